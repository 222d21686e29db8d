"""Run an experiment from the command line: ``python -m grpo_core <experiment> ...``.

    python -m grpo_core length --profile cpu --out runs/exp1-length-cpu
    python -m grpo_core length --profile cpu --out runs/exp1-length-cpu --resume
    python -m grpo_core length --profile smoke --out /tmp/x --steps 2 --beta 0.04
    python -m grpo_core mbpp --k 8 --profile cpu --out runs/exp2-k8-cpu
    python -m grpo_core hacking --profile cpu --out runs/exp3-cpu
    python -m grpo_core length --reward detail --profile cpu --out runs/gaming   (notebook 11)
    python -m grpo_core mbpp --problems mbpp --profile cpu --out runs/no-signal  (notebook 11)

(``grpo-train`` is the same command, installed with the package.) Writes
``<out>/metrics.jsonl`` (one line per step, flushed each step; with a held-out evaluation a
``"step": 0`` line first), ``<out>/samples.jsonl`` (every completion, cut at 600 characters),
``<out>/config.json``, ``<out>/curves.png`` (redrawn every ``--plot-every`` steps) and
``<out>/checkpoint/`` (at the end, on Ctrl-C, on an error; ``--resume`` continues from it). Sizes come from the profile
(``--profile`` or ``GRPO_PROFILE``); every loop setting can be overridden. The experiments
themselves are defined in ``grpo_core.experiments``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_core.checkpoints import checkpoint_step
from grpo_core.experiments import (
    EXPERIMENTS,
    HACKING_PROXIES,
    LENGTH_REWARDS,
    PROBLEM_SOURCES,
    Experiment,
    build_config,
)
from grpo_core.loop import CORRECTION_CHOICES, RunResult, TrainConfig, train
from grpo_core.precision import precision_plan
from grpo_core.profiles import PRECISION_CHOICES, PRECISION_ENV_VAR, Profile, get_profile
from grpo_core.rollout import STOP_RULES
from grpo_core.run_files import METRICS_FILE, eval_mean_keys, read_jsonl
from grpo_core.scoring import RewardError
from grpo_core.threads import thread_plan

PROG = "python -m grpo_core"

# command-line option -> TrainConfig field
OPTIONS: dict[str, tuple[str, type]] = {
    "--steps": ("max_steps", int),
    "--lr": ("learning_rate", float),
    "--beta": ("beta", float),
    "--num-iterations": ("num_iterations", int),
    "--loss-type": ("loss_type", str),
    "--scale": ("scale", str),
    "--seed": ("seed", int),
    "--prompts-per-step": ("prompts_per_step", int),
    "--max-new-tokens": ("max_new_tokens", int),
    "--max-grad-norm": ("max_grad_norm", float),
    "--micro-batch-size": ("micro_batch_size", int),
    "--save-every": ("save_every", int),
    "--eval-every": ("eval_every", int),
    "--samples-max-chars": ("samples_max_chars", int),
    "--samples-eval-per-problem": ("samples_eval_per_problem", int),
    "--temperature": ("temperature", float),
    "--lora-rank": ("lora_rank", int),
    "--lora-alpha": ("lora_alpha", float),
    "--max-refill-generations": ("max_refill_generations", int),
    "--sampling-correction-cap": ("sampling_correction_cap", float),
}
LORA_RANK = 16  # --lora without --lora-rank


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--profile", default=None, help="smoke, cpu or gpu (default: GRPO_PROFILE)")
    parser.add_argument("--out", default=None, help="output folder (default: runs/<exp>-<profile>)")
    for option, (name, kind) in OPTIONS.items():
        parser.add_argument(option, dest=name, type=kind, default=None, help=f"TrainConfig.{name}")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint")
    parser.add_argument("--no-checkpoint", action="store_true", help="never write a checkpoint")
    parser.add_argument("--no-samples", action="store_true", help="do not write samples.jsonl")
    parser.add_argument("--dynamic-sampling", action="store_true",
                        help="sample the groups that gave no signal again (DAPO), up to "
                             "--max-refill-generations extra completions per step")
    parser.add_argument("--sampling-correction", dest="sampling_correction", default=None,
                        choices=CORRECTION_CHOICES,
                        help="weight each completion by the learner's probability over the "
                             "sampling copy's (TRL's vllm_importance_sampling_mode; notebook "
                             "13); measure: log the mismatch only")
    parser.add_argument("--plot-every", type=int, default=5, help="redraw curves.png every N steps")
    parser.add_argument("--negate", action="store_true", help="flip the reward's sign (demo)")
    parser.add_argument("--k", "--group-size", dest="k", type=int, default=None,
                        help="the group size k (completions per prompt), at the profile's "
                             "completions per step: prompts per step = completions / k, unless "
                             "--prompts-per-step says otherwise")
    parser.add_argument("--proxy", choices=HACKING_PROXIES, default=None,
                        help=f"hacking: the proxy reward (default {HACKING_PROXIES[0]})")
    parser.add_argument("--reward", choices=LENGTH_REWARDS, default=None,
                        help="length: the reward (default length; detail pays 0.1 per distinct "
                             "word, for length without naming it)")
    parser.add_argument("--problems", choices=PROBLEM_SOURCES, default=None,
                        help="mbpp: the training problems (default: the profile's; mbpp: "
                             "MBPP's train split, a local copy or the Hub)")
    parser.add_argument("--eval-samples", type=int, default=None,
                        help="mbpp, hacking: completions per held-out problem at each "
                             "evaluation (default: the profile's, experiments.HELD_OUT_EVAL)")
    parser.add_argument("--lora", action="store_true",
                        help=f"train LoRA adapters (rank {LORA_RANK} unless --lora-rank) instead "
                             "of every weight; LoRA usually wants a ~10x larger --lr")
    parser.add_argument("--lora-targets", default=None,
                        help="comma-separated module names to adapt (default: all-linear)")
    parser.add_argument("--precision", choices=PRECISION_CHOICES, default=None,
                        help="the precision plan, float32 master weights in each (default: "
                             f"{PRECISION_ENV_VAR}, else the profile's): auto: what the device "
                             "does best (bfloat16 autocast on a recent GPU or a CPU with "
                             "AMX/AVX512-BF16, float16 with loss scaling on a T4); bfloat16, "
                             "float16: that autocast, forced; float32: float32 throughout")
    parser.add_argument("--stop-at", choices=[*sorted(STOP_RULES), "none"], default=None,
                        help="where a completion ends besides EOS and max_new_tokens (default: "
                             "the experiment's; mbpp and hacking: code_block, where the first "
                             "fenced code block closes; none: only EOS and the budget, as the "
                             "runs recorded before the rule)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: GRPO_THREADS, else one per core that "
                             "no other program keeps busy, see grpo_core.threads)")
    return parser.parse_args(argv)


# options that only some experiments take: option -> those experiments
OWN_OPTIONS = {"proxy": ("hacking",), "reward": ("length",), "problems": ("mbpp",),
               "eval_samples": ("mbpp", "hacking")}


def make_experiment(name: str, profile: Profile, args: argparse.Namespace) -> Experiment:
    """The experiment ``name`` with the command line's experiment options."""
    options: dict[str, Any] = {"negate": args.negate}
    if args.k is not None:
        options["k"] = args.k
    for option, owners in OWN_OPTIONS.items():
        value = getattr(args, option, None)
        if value is not None:
            if name not in owners:
                raise SystemExit(f"--{option.replace('_', '-')} belongs to {' and '.join(owners)}")
            options[option] = value
    return EXPERIMENTS[name](profile, **options)


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``TrainConfig`` fields the command line sets."""
    overrides = {name: getattr(args, name) for name, _ in OPTIONS.values()
                 if getattr(args, name) is not None}
    if args.no_checkpoint:
        overrides["save_checkpoint"] = False
    if getattr(args, "stop_at", None) is not None:
        overrides["stop_at"] = None if args.stop_at == "none" else args.stop_at
    if getattr(args, "no_samples", False):
        overrides["keep_samples"] = False
    if getattr(args, "dynamic_sampling", False):
        overrides["dynamic_sampling"] = True
    if "max_refill_generations" in overrides and not overrides.get("dynamic_sampling"):
        raise SystemExit("--max-refill-generations needs --dynamic-sampling")
    if getattr(args, "sampling_correction", None):
        overrides["sampling_correction"] = args.sampling_correction
    if "sampling_correction_cap" in overrides and overrides.get("sampling_correction") in (
            None, "measure"):
        raise SystemExit("--sampling-correction-cap needs --sampling-correction MODE")
    if args.lora and "lora_rank" not in overrides:
        overrides["lora_rank"] = LORA_RANK
    if args.lora_targets:
        overrides["lora_targets"] = tuple(t.strip() for t in args.lora_targets.split(",") if t.strip())
    if ("lora_alpha" in overrides or "lora_targets" in overrides) and not overrides.get("lora_rank"):
        raise SystemExit("--lora-alpha and --lora-targets need --lora (or --lora-rank R)")
    return overrides


def fit_to_gpu(config: TrainConfig, model: Any, tokenizer: Any, experiment: Experiment,
               profile: Profile) -> TrainConfig:
    """The micro-batch size and gradient checkpointing of ``grpo_core.hardware``'s memory plan
    for this GPU's memory, printed."""
    import torch

    from grpo_core.hardware import plan_for_model

    plan = plan_for_model(model, tokenizer, [row["prompt"] for row in experiment.prompts],
                          torch.cuda.get_device_properties(0).total_memory,
                          batch_rows=config.batch_size, completion_tokens=config.max_new_tokens,
                          beta=config.beta, precision=precision_plan(profile),
                          lora_rank=config.lora_rank, lora_targets=config.lora_targets)
    print(f"memory plan: {plan.describe()}", flush=True)
    if not plan.fits:
        raise SystemExit(f"{PROG}: {plan.describe()}")
    return replace(config, micro_batch_size=plan.micro_batch_size,
                   gradient_checkpointing=config.gradient_checkpointing or plan.gradient_checkpointing)


def run_experiment(args: argparse.Namespace) -> RunResult:
    """Load the profile's model, train the experiment, and write the curves."""
    from grpo_core.models import load_policy
    from grpo_core.plots import LivePlot

    threads = thread_plan(None if args.threads is None else str(args.threads), "--threads")
    profile = get_profile(args.profile)
    if args.precision is not None:
        profile = profile.with_overrides(precision=args.precision, precision_reason="--precision")
    experiment = make_experiment(args.experiment, profile, args)
    config = build_config(profile, experiment, **config_overrides(args))
    out = Path(args.out or f"runs/{args.experiment}-{profile.name}")
    model, tokenizer = load_policy(profile, threads)  # the precision plan's float32 weights
    if profile.device == "cuda" and config.micro_batch_size is None:
        config = fit_to_gpu(config, model, tokenizer, experiment, profile)
    # the steps a resumed run keeps (metrics.jsonl up to its checkpoint), so that curves.png,
    # which only the live plot writes, shows the whole run
    kept = [record for record in read_jsonl(out / METRICS_FILE, missing_ok=True)
            if record.get("step", 0) <= (checkpoint_step(out) or 0)] if args.resume else []
    plot = LivePlot(every=args.plot_every, path=out / "curves.png", title=experiment.title,
                    targets=experiment.targets, show=False, records=kept)
    extra = {"experiment": experiment.name, "profile": profile.name, "model_id": profile.model_id,
             "precision": precision_plan(profile).reason, "threads": threads.reason,
             "negate": args.negate, **experiment.notes,
             "command": " ".join([PROG, *sys.argv[1:]])}
    try:
        result = train(model, tokenizer, experiment.prompts, experiment.reward_funcs, config, out,
                       reward_weights=experiment.reward_weights, callbacks=[plot],
                       resume=args.resume, progress=not args.quiet, extra_config=extra,
                       evaluate=experiment.evaluate)
    finally:
        plot.close()  # draws the steps since its last redraw, once
    return result


def summary(result: RunResult) -> str:
    """The last training step's reward and length, and the last held-out evaluation's mean
    (``eval/unit_test_reward`` when logged) with its standard error (the ``"step": 0`` row has
    no reward: it is skipped for the first)."""
    trained = [record for record in result.metrics if "reward" in record]
    last = trained[-1] if trained else {}
    said = (f"last reward {last.get('reward', float('nan')):.3g}, mean characters "
            f"{last.get('completions/mean_chars', float('nan')):.1f}")
    evaluated = [record for record in result.metrics if eval_mean_keys([record])]
    if evaluated:
        record = evaluated[-1]
        keys = eval_mean_keys([record])
        key = "eval/unit_test_reward" if "eval/unit_test_reward" in keys else keys[0]
        sem = record.get(f"{key}/sem")
        said += (f"; held out at step {record['step']}: {key} {record[key]:.3g}"
                 + (f" ± {sem:.2g} s.e." if sem is not None else ""))
    return said


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        result = run_experiment(args)
    except RewardError as error:
        print(f"stopped: {error}", file=sys.stderr)
        return 1
    minutes = (time.perf_counter() - started) / 60
    print(f"{result.stopped} at step {result.step} after {minutes:.1f} min; {summary(result)}; "
          f"wrote {result.out_dir}")
    return 130 if result.stopped == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
