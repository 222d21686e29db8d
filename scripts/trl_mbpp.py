"""Experiment 2 (coding problems, unit-test reward) through TRL's ``GRPOTrainer``, one process or many.

The same reward function as our own loop (``grpo_core.rewards.unit_test_reward``: the fraction of
a problem's asserts that the completion's code passes, run in the course's sandbox), the same
data (``grpo_core.experiments``), and the settings of the course's loop made explicit (notebook 10):
``loss_type="grpo"``, ``beta=0.0``, one update per generation batch, a constant learning rate.

One process (any profile)::

    python scripts/trl_mbpp.py --profile smoke --max-steps 2 --out runs/trl-mbpp-smoke

Several processes, data parallel (every process holds the whole model, generates and scores its
share of the batch; gradients are averaged, so the weights stay identical)::

    # 2 processes on a CPU machine (gloo); see the config for why it is not accelerate's --cpu
    accelerate launch --config_file scripts/accelerate/cpu_2proc.yaml scripts/trl_mbpp.py \
        --profile smoke
    # 4 GPUs, DDP, vLLM generating inside each training process (pip install vllm)
    accelerate launch --config_file scripts/accelerate/ddp.yaml --num_processes 4 \\
        scripts/trl_mbpp.py --profile gpu --use-vllm
    # the model, gradients and optimizer state sharded: DeepSpeed ZeRO-3 or FSDP
    accelerate launch --config_file scripts/accelerate/zero3.yaml scripts/trl_mbpp.py --profile gpu
    accelerate launch --config_file scripts/accelerate/fsdp.yaml scripts/trl_mbpp.py --profile gpu

HF Jobs runs the same command on rented GPUs: see ``scripts/hf_jobs.md``.

Data: ``--data auto`` takes experiment 2's own rows (``grpo_core.experiments.mbpp_rows``, the
ones ``python -m grpo_core mbpp`` trains on): MBPP's train split (a local copy, else the Hub) for
the ``gpu`` profile and the course's own easier ``train`` problems (``course_split``; the
held-out ones are never trained on) for ``cpu`` and ``smoke``, which run offline. ``--data mbpp`` or ``--data problems [--difficulty ...]`` choose another set.

Writes, under ``--out``: ``report-rank<r>.json`` from every process (a SHA-256 of its parameters
before and after training, the rewards it computed, its log history and wall time), which is how
``tests/test_scale_out.py`` checks that data-parallel processes finish with identical weights.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run from a clone without `pip install -e .`
    sys.path.insert(0, str(REPO_ROOT))

REWARDS = ("unit_test", "length")
DATA_SOURCES = ("auto", "mbpp", "problems")


class SetupError(SystemExit):
    """A missing optional package or an impossible setting, said plainly (exit status 1)."""

    def __init__(self, message: str):
        super().__init__(f"trl_mbpp.py: {message}")


# ----------------------------------------------------------------------------- arguments


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", default=None, help="smoke, cpu or gpu (default: GRPO_PROFILE)")
    parser.add_argument("--out", default=None, help="output folder (default: runs/trl-mbpp-<p>)")
    parser.add_argument("--data", choices=DATA_SOURCES, default="auto",
                        help="mbpp, the course's problems, or auto (mbpp on gpu, else problems)")
    parser.add_argument("--difficulty", default=None,
                        help="only the course's problems of this difficulty ('very easy', ...)")
    parser.add_argument("--rewards", default="unit_test",
                        help=f"comma-separated reward functions from {REWARDS} (weights 1)")
    parser.add_argument("--max-steps", type=int, default=None, help="default: the profile's")
    parser.add_argument("--num-generations", type=int, default=None,
                        help="completions per prompt, k (default: the profile's group size)")
    parser.add_argument("--prompts-per-step", type=int, default=None,
                        help="prompts per optimizer step over all processes (default: profile)")
    parser.add_argument("--max-completion-length", type=int, default=None,
                        help="new tokens per completion (default: the profile's)")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--loss-type", default="grpo", help="grpo (our loop's), dapo (TRL's)...")
    parser.add_argument("--beta", type=float, default=0.0, help="KL weight (0: no reference)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM (GPU only)")
    parser.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate")
    parser.add_argument("--vllm-gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--activation-checkpointing", action="store_true",
                        help="recompute activations in the backward pass (less memory)")
    parser.add_argument("--lora", action="store_true",
                        help="train LoRA adapters (peft) instead of every weight")
    parser.add_argument("--lora-rank", type=int, default=16, help="with --lora (default 16)")
    parser.add_argument("--lora-targets", default="all-linear",
                        help="with --lora: comma-separated module names, or all-linear")
    parser.add_argument("--hub-model-id", default=None,
                        help="push the trained model to this Hub repo (HF Jobs: the disk is lost)")
    parser.add_argument("--report-to", default="none", help="none, trackio, wandb, tensorboard")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads per process")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan (data, batch split, backends) and exit")
    return parser.parse_args(argv)


def reward_names(spec: str) -> list[str]:
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = sorted(set(names) - set(REWARDS))
    if not names or unknown:
        raise SetupError(f"--rewards takes names from {REWARDS}, got {spec!r}")
    return names


# ----------------------------------------------------------------------------- the setup


def world_size() -> int:
    """Processes in this job (``WORLD_SIZE``, set by ``accelerate launch``/``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def per_device_batch(prompts_per_step: int, num_generations: int, processes: int) -> int:
    """Completions each process generates and trains on per step.

    TRL's ``per_device_train_batch_size`` counts completions, not prompts, and one optimizer
    step uses ``per_device_train_batch_size x processes`` of them (no gradient accumulation).
    A group may span processes: TRL gathers every reward before computing advantages.
    """
    total = prompts_per_step * num_generations
    if total % processes:
        raise SetupError(
            f"{prompts_per_step} prompts x {num_generations} completions = {total} completions "
            f"per step cannot be split evenly over {processes} processes; change "
            "--prompts-per-step or --num-generations"
        )
    return total // processes


def check_backends(use_vllm: bool, device: str) -> list[str]:
    """Fail clearly when an optional backend is asked for but missing; return what is used."""
    used = []
    if use_vllm:
        if device != "cuda":
            raise SetupError("--use-vllm needs a CUDA GPU (the gpu profile); vLLM has no CPU path "
                             "here. Drop --use-vllm: transformers' generate() is used instead.")
        if importlib.util.find_spec("vllm") is None:
            raise SetupError("--use-vllm was given but vLLM is not installed. Install it with "
                             "`pip install vllm` (Linux + CUDA), or drop --use-vllm to generate "
                             "with transformers' generate().")
        used.append("vllm")
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        if importlib.util.find_spec("deepspeed") is None:
            raise SetupError("the accelerate config asks for DeepSpeed, which is not installed. "
                             "Install it with `pip install deepspeed`, or launch with "
                             "scripts/accelerate/ddp.yaml or fsdp.yaml (FSDP ships with torch).")
        used.append("deepspeed")
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        used.append("fsdp")
    return used


def load_rows(profile: Any, source: str, difficulty: str | None) -> tuple[Any, str]:
    """The training problems as a ``datasets.Dataset`` with a chat ``prompt`` column.

    ``auto`` is experiment 2's own data (``grpo_core.experiments.mbpp_rows``): exactly the rows
    ``python -m grpo_core mbpp`` trains on in this profile, with the same prompts.
    """
    import datasets

    from grpo_core.experiments import MBPP_LOCAL_DIFFICULTIES, code_row, mbpp_rows
    from grpo_core.mbpp import MBPPUnavailableError, load_mbpp, read_problems

    try:
        if source == "auto":
            rows = mbpp_rows(profile)
            described = ("experiment 2's data: " + ("MBPP train split" if profile.data_source == "hub"
                         else f"the course's train problems "
                         f"({', '.join(MBPP_LOCAL_DIFFICULTIES)})"))
        elif source == "mbpp":
            rows = [code_row(dict(row)) for row in load_mbpp(split="train")]
            described = "MBPP train split"
        else:
            rows = [code_row(row) for row in read_problems(difficulty=difficulty)]
            described = "the course's problems" + (f" ({difficulty})" if difficulty else "")
    except MBPPUnavailableError as error:
        raise SetupError(f"{error}\nOffline, use the course's problems: --data problems") from None
    if not rows:
        raise SetupError(f"no problems selected from {described}")
    chat = [{**row, "prompt": [{"role": "user", "content": row["prompt"]}]} for row in rows]
    return datasets.Dataset.from_list(chat), f"{described}, {len(rows)} problems"


def lora_targets(args: argparse.Namespace) -> str | list[str]:
    targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    return targets[0] if targets == ["all-linear"] else targets


def lora_plan(args: argparse.Namespace) -> str:
    """The plan's LoRA part, one phrase."""
    if not args.lora:
        return "every weight trains"
    return f"LoRA rank {args.lora_rank} on {lora_targets(args)} (beta > 0: base model as reference)"


def peft_config(args: argparse.Namespace) -> Any:
    """The ``peft.LoraConfig`` our loop uses (``grpo_core.lora``), or None without --lora."""
    if not args.lora:
        return None
    try:
        from grpo_core.lora import lora_config
        return lora_config(args.lora_rank, targets=lora_targets(args))
    except ImportError as error:
        raise SetupError(f"--lora needs peft ({error}); pip install peft") from None


def reward_functions(names: Sequence[str], log: list[dict[str, Any]]) -> list[Callable[..., Any]]:
    """The reward functions, each wrapped to record what this process scored."""
    from grpo_core.rewards import length_reward, unit_test_reward

    available = {"unit_test": unit_test_reward, "length": length_reward}
    return [recorded(available[name], log) for name in names]


def recorded(fn: Callable[..., list[float]], log: list[dict[str, Any]]) -> Callable[..., Any]:
    """``fn`` unchanged (same name, so TRL logs ``rewards/<name>/mean``), plus a record of the
    completions and rewards it saw in *this* process."""

    def wrapper(completions: list[Any], **columns: Any) -> list[float]:
        rewards = fn(completions, **columns)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        log.append({"reward": fn.__name__, "completions": len(texts),
                    "completions_sha256": hashlib.sha256("\x00".join(texts).encode()).hexdigest(),
                    "rewards": [float(r) for r in rewards]})
        return rewards

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def parameter_digest(model: Any) -> str:
    """SHA-256 over every parameter's name and raw bytes: equal digests, equal weights.

    Under ZeRO-3 or FSDP each process holds a shard, so the digest is of that shard.
    """
    import torch

    digest = hashlib.sha256()
    for name, parameter in model.named_parameters():
        digest.update(name.encode())
        raw = parameter.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        digest.update(raw.numpy().tobytes())
    return digest.hexdigest()


def report_callback(out: Path, reward_log: list[dict[str, Any]]) -> Any:
    """A ``TrainerCallback`` that writes ``report-rank<r>.json`` at the end of training."""
    from transformers import TrainerCallback

    class RankReport(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.started = time.perf_counter()
            self.initial = parameter_digest(model)

        def on_train_end(self, args, state, control, model=None, **kwargs):
            report = {
                "rank": rank(), "world_size": world_size(),
                "initial_parameters_sha256": self.initial,
                "final_parameters_sha256": parameter_digest(model),
                "steps": state.global_step, "train_seconds": time.perf_counter() - self.started,
                "rewards_seen": reward_log, "log_history": state.log_history,
            }
            out.mkdir(parents=True, exist_ok=True)
            (out / f"report-rank{rank()}.json").write_text(json.dumps(report, indent=1) + "\n")

    return RankReport()


# ----------------------------------------------------------------------------- the run


def main(argv: Sequence[str] | None = None) -> int:
    wall_start = time.perf_counter()
    args = parse_args(argv)
    for name in ("HF_HUB_DISABLE_TELEMETRY", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(name, "1")
    from grpo_core.profiles import get_profile

    profile = get_profile(args.profile)
    if profile.model_source == "package":  # the offline model: nothing may call the Hub
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            os.environ.setdefault(name, "1")
    names = reward_names(args.rewards)
    backends = check_backends(args.use_vllm, profile.device)
    processes = world_size()
    num_generations = args.num_generations or profile.group_size
    prompts_per_step = args.prompts_per_step or profile.prompts_per_step
    per_device = per_device_batch(prompts_per_step, num_generations, processes)
    max_steps = profile.max_steps if args.max_steps is None else args.max_steps
    max_completion_length = args.max_completion_length or profile.max_new_tokens
    out = Path(args.out or REPO_ROOT / "runs" / f"trl-mbpp-{profile.name}")
    dataset, described = load_rows(profile, args.data, args.difficulty)
    plan = (f"profile {profile.name} ({profile.model_id}, {profile.device}); data: {described}; "
            f"{processes} process(es) x {per_device} completions = {prompts_per_step} prompts x "
            f"{num_generations} per step; {max_completion_length} new tokens; {max_steps} steps; "
            f"rewards {names}; generation with {'vLLM' if args.use_vllm else 'transformers'}; "
            f"{lora_plan(args)}; "
            f"backends {backends or ['ddp' if processes > 1 else 'single process']}")
    if rank() == 0:
        print(plan, flush=True)
    if args.dry_run:
        return 0

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as error:
        raise SetupError(f"TRL is not installed ({error}); pip install -e . (from the course's folder)") from None

    from grpo_core.precision import precision_plan

    on_cpu = profile.device == "cpu"
    # the course's precision plan, given to TRL: float32 master weights (an AdamW step of 1e-6
    # is lost in bfloat16 weights, whose spacing near 0.02 is about 1e-4) and its autocast as
    # TRL's bf16/fp16 flags (fp16 brings TRL's own loss scaling)
    precision = precision_plan(profile)
    if profile.model_source == "package":  # the offline model object and its tokenizer
        from grpo_core.models import load_policy

        model, tokenizer = load_policy(profile)
        model.train()
        model_init_kwargs = None
    else:  # a Hub id: TRL loads it, which is what DeepSpeed ZeRO-3 and FSDP need
        model, tokenizer = profile.model_id, None
        model_init_kwargs = {"dtype": precision.load_dtype}

    config = GRPOConfig(
        output_dir=str(out),
        max_steps=max_steps,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=1,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        temperature=profile.temperature,
        top_p=profile.top_p,
        chat_template_kwargs={"enable_thinking": profile.enable_thinking},
        learning_rate=args.learning_rate or profile.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        loss_type=args.loss_type,
        beta=args.beta,
        num_iterations=1,
        epsilon=0.2,
        scale_rewards="group",
        seed=args.seed,
        bf16=precision.autocast == "bfloat16",
        fp16=precision.autocast == "float16",
        use_cpu=on_cpu,
        ddp_backend="gloo" if on_cpu and processes > 1 else None,
        ddp_find_unused_parameters=False,  # every parameter gets a gradient; skip the search
        activation_checkpointing=args.activation_checkpointing,
        model_init_kwargs=model_init_kwargs,
        use_vllm=args.use_vllm,
        vllm_mode=args.vllm_mode,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        logging_steps=1,
        report_to=args.report_to,
        save_strategy="no",
        push_to_hub=args.hub_model_id is not None,
        hub_model_id=args.hub_model_id,
    )
    reward_log: list[dict[str, Any]] = []
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_functions(names, reward_log),
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[report_callback(out, reward_log)],
        peft_config=peft_config(args),
    )
    trainer.train()
    if args.hub_model_id is not None:
        trainer.push_to_hub()
    if trainer.accelerator.is_main_process:
        losses = [round(r["loss"], 5) for r in trainer.state.log_history if "loss" in r]
        rewards = [round(r["reward"], 4) for r in trainer.state.log_history if "reward" in r]
        print(f"done: {trainer.state.global_step} steps, loss per step {losses}, "
              f"reward per step {rewards}, {time.perf_counter() - wall_start:.1f} s wall in this "
              f"process (imports, model load and training)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
