"""One GRPO step of ``grpo_core``'s loop against TRL 1.16's ``GRPOTrainer``, same model and prompts.

A step is: sample k = 8 completions for each of 2 prompts (64 new tokens at most, one
``generate`` call), score them with experiment 1's length reward, compute advantages and
log-probs, the ``grpo`` loss, backward, gradient clipping and one AdamW step. Both sides use
the offline SmolLM2-135M in float32, beta = 0 (no reference model), ``loss_type="grpo"``,
temperature 1, learning rate 0 (every step still does the AdamW update; the model does not
change, so completion lengths, and the work per step, stay the same from step to step).

Each implementation runs in its own subprocess (so each peak memory is its own): one warm-up
step, then ``--steps`` timed steps. Printed per implementation: the median step time (wall
clock, generation included), the rollout throughput (completion tokens, up to and including
the first EOS, per second of ``generate``), and the peak memory (resident set size on CPU,
``torch.cuda.max_memory_allocated`` on a GPU). Then the ratio ours / TRL (<= 1.0: ours is no
slower).

    python benchmarks/bench_step.py [--steps 3] [--threads 1] [--device cpu|cuda]

Timings on a shared machine are noisy: compare figures from the same invocation only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
              "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GROUP, PROMPTS_PER_STEP, NEW_TOKENS, LR = 8, 2, 64, 0.0  # lr 0: lengths stay put, steps comparable
SIZES = {"group_size": GROUP, "prompts_per_step": PROMPTS_PER_STEP, "max_new_tokens": NEW_TOKENS}


def timed_generate(model, tokenizer, log: list[tuple[float, int]]) -> None:
    """Wrap ``model.generate`` to record (seconds, completion tokens) of every call."""
    import torch

    from grpo_core.logprobs import completion_mask

    original = model.generate
    eos = {tokenizer.eos_token_id}
    configured = model.generation_config.eos_token_id
    eos.update(configured if isinstance(configured, list) else [configured])
    eos_ids = sorted(i for i in eos if i is not None)

    def generate(*args, **kwargs):
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = original(*args, **kwargs)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        prompt_width = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
        tokens = int(completion_mask(output[:, prompt_width:], eos_ids).sum())
        log.append((seconds, tokens))
        return output

    model.generate = generate


def load(device: str):
    from grpo_core.models import load_policy
    from grpo_core.profiles import get_profile

    profile = get_profile("cpu").with_overrides(device=device)
    return load_policy(profile)


def prompts() -> list[str]:
    from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

    return [row["prompt"] for row in read_jsonl(EXP1_PROMPTS)]


def run_ours(steps: int, device: str, *, sizes: dict[str, int] = SIZES, precision=None,
             loader=load) -> dict:
    """Our loop: one warm-up step, then ``steps`` timed ones. ``precision``: a
    ``grpo_core.hardware.Precision`` (None: float32); ``loader(device) -> (model, tokenizer)``."""
    from grpo_core.loop import TrainConfig, train
    from grpo_core.rewards import length_reward

    model, tokenizer = loader(device)
    generations: list[tuple[float, int]] = []
    timed_generate(model, tokenizer, generations)
    config = TrainConfig(**sizes, max_steps=steps + 1, learning_rate=LR, loss_type="grpo",
                         beta=0.0, save_checkpoint=False,
                         autocast_dtype=None if precision is None else precision.autocast,
                         loss_scaling=precision is not None and precision.loss_scaling)
    result = train(model, tokenizer, prompts(), length_reward, config, progress=False)
    step_times = [r["step_time"] for r in result.metrics[1:]]
    return summary("grpo_core", step_times, generations[1:], device)


def run_trl(steps: int, device: str, *, sizes: dict[str, int] = SIZES, precision=None,
            loader=load) -> dict:
    """TRL's GRPOTrainer at the same sizes and precision (its bf16/fp16 flags)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_core.rewards import length_reward

    model, tokenizer = loader(device)
    generations: list[tuple[float, int]] = []
    timed_generate(model, tokenizer, generations)
    rows = [{"prompt": [{"role": "user", "content": p}]} for p in prompts()]
    autocast = None if precision is None else precision.autocast
    step_times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if device == "cuda":
                import torch

                torch.cuda.synchronize()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                import torch

                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.start)

    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, bf16=autocast == "bfloat16", fp16=autocast == "float16",
            use_cpu=device == "cpu", activation_checkpointing=False,
            report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True,
            max_steps=steps + 1, num_generations=sizes["group_size"],
            per_device_train_batch_size=sizes["group_size"] * sizes["prompts_per_step"],
            max_completion_length=sizes["max_new_tokens"], learning_rate=LR, beta=0.0,
            loss_type="grpo",
            temperature=1.0, top_p=1.0, seed=0, lr_scheduler_type="constant",
        )
        trainer = GRPOTrainer(model=model, reward_funcs=length_reward, args=args,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              callbacks=[StepTimer()])
        trainer.train()
    return summary("TRL GRPOTrainer", step_times[1:], generations[1:], device)


def summary(name: str, step_times: list[float], generations: list, device: str) -> dict:
    import torch

    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    seconds = sum(s for s, _ in generations)
    tokens = sum(t for _, t in generations)
    return {"name": name, "median_step_s": statistics.median(step_times), "step_times": step_times,
            "rollout_tokens_per_s": tokens / seconds if seconds else float("nan"),
            "peak_memory_gib": peak, "memory_kind": "GPU allocated" if device == "cuda" else "RSS"}


def child(impl: str, steps: int, threads: int, device: str) -> None:
    import torch

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    result = run_ours(steps, device) if impl == "ours" else run_trl(steps, device)
    print("RESULT " + json.dumps(result), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--impl", choices=["ours", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        child(args.impl, args.steps, args.threads, args.device)
        return 0
    print(f"one GRPO step: {PROMPTS_PER_STEP} prompts x k={GROUP}, {NEW_TOKENS} new tokens, "
          f"SmolLM2-135M float32 on {args.device}, {args.threads or 'default'} thread(s), "
          f"median of {args.steps} steps after 1 warm-up")
    results = {}
    for impl in ("ours", "trl"):
        command = [sys.executable, __file__, "--impl", impl, "--steps", str(args.steps),
                   "--threads", str(args.threads), "--device", args.device]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            return 1
        results[impl] = json.loads(lines[-1][len("RESULT "):])
    for r in results.values():
        times = ", ".join(f"{t:.1f}" for t in r["step_times"])
        print(f"{r['name']:>16}: median step {r['median_step_s']:.2f} s ({times}), rollout "
              f"{r['rollout_tokens_per_s']:.0f} tokens/s, peak {r['memory_kind']} "
              f"{r['peak_memory_gib']:.2f} GiB")
    ratio = results["ours"]["median_step_s"] / results["trl"]["median_step_s"]
    print(f"ratio ours / TRL (median step time): {ratio:.2f}  (<= 1.0: ours is no slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
