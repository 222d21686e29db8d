"""Run an experiment from the command line: ``python -m grpo_core.train <experiment> ...``.

    python -m grpo_core.train length --profile cpu --out runs/exp1-length-cpu
    python -m grpo_core.train length --profile cpu --out runs/exp1-length-cpu --resume
    python -m grpo_core.train length --profile smoke --out /tmp/x --steps 2 --beta 0.04

Writes ``<out>/metrics.jsonl`` (one line per step, flushed each step), ``<out>/config.json``,
``<out>/curves.png`` (redrawn every ``--plot-every`` steps) and ``<out>/checkpoint/`` (at the
end, on Ctrl-C, on an error; ``--resume`` continues from it). Sizes come from the profile
(``--profile`` or ``GRPO_PROFILE``); every loop setting can be overridden.

Experiments (COURSE.md section 2):

- ``length`` (experiment 1): reward ``-abs(len(completion) - 20)`` on characters; a completion
  is best when it is 20 characters long. ``--negate`` flips the sign (notebook 07's
  demonstration that GRPO optimizes exactly the number you return).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.loop import RewardError, RewardFn, RunResult, TrainConfig, reward_name, train
from grpo_core.profiles import Profile, get_profile

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
EXP1_PROMPTS = DATA_DIR / "prompts_exp1.jsonl"
LENGTH_TARGET = 20


@dataclass
class Experiment:
    """What an experiment trains on: prompts, reward functions, and its own loop settings.

    Attributes:
        name: the command-line name.
        prompts: rows ``{"prompt": ..., <columns for the rewards>}``.
        reward_funcs, reward_weights: TRL-style reward functions and their weights.
        overrides: ``TrainConfig`` fields this experiment sets (the profile gives the rest).
        targets: dashed lines for the plot, ``{metric: value}``.
        title: the plot's title.
    """

    name: str
    prompts: list[dict[str, Any]]
    reward_funcs: list[RewardFn]
    reward_weights: list[float] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)
    title: str = ""


def load_prompts(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines prompt file (each has at least ``"prompt"``)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def negated(fn: RewardFn) -> RewardFn:
    """``fn`` with its sign flipped, logged as ``negated_<name>``: what a sign bug trains."""

    def flipped(completions: list[str], **columns: Any) -> list[float]:
        return [-value for value in fn(completions=completions, **columns)]

    flipped.__name__ = f"negated_{reward_name(fn)}"
    return flipped


def length_experiment(profile: Profile, negate: bool = False) -> Experiment:
    """Experiment 1: be close to 20 characters long (``grpo_core.rewards.length_reward``).

    Loop settings: the lecture's loss (``loss_type="grpo"``: each completion's log-prob
    averaged over its tokens, then over completions), no KL (beta = 0), one update per rollout.
    """
    from grpo_core.rewards import length_reward

    reward = negated(length_reward) if negate else length_reward
    target = "longer and longer (sign flipped)" if negate else f"{LENGTH_TARGET} characters"
    return Experiment(
        name="length",
        prompts=load_prompts(EXP1_PROMPTS),
        reward_funcs=[reward],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1},
        targets={} if negate else {"completions/mean_chars": LENGTH_TARGET},
        title=f"experiment 1 ({profile.name}): reward -|len - 20|, target {target}",
    )


EXPERIMENTS: dict[str, Callable[..., Experiment]] = {"length": length_experiment}

# command-line option -> TrainConfig field
_OPTIONS: dict[str, tuple[str, type]] = {
    "--steps": ("max_steps", int),
    "--lr": ("learning_rate", float),
    "--beta": ("beta", float),
    "--num-iterations": ("num_iterations", int),
    "--loss-type": ("loss_type", str),
    "--scale": ("scale", str),
    "--seed": ("seed", int),
    "--group-size": ("group_size", int),
    "--prompts-per-step": ("prompts_per_step", int),
    "--max-new-tokens": ("max_new_tokens", int),
    "--max-grad-norm": ("max_grad_norm", float),
    "--micro-batch-size": ("micro_batch_size", int),
    "--save-every": ("save_every", int),
    "--temperature": ("temperature", float),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grpo_core.train", description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--profile", default=None, help="smoke, cpu or gpu (default: GRPO_PROFILE)")
    parser.add_argument("--out", default=None, help="output folder (default: runs/<exp>-<profile>)")
    for option, (name, kind) in _OPTIONS.items():
        parser.add_argument(option, dest=name, type=kind, default=None, help=f"TrainConfig.{name}")
    parser.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint")
    parser.add_argument("--no-checkpoint", action="store_true", help="never write a checkpoint")
    parser.add_argument("--plot-every", type=int, default=5, help="redraw curves.png every N steps")
    parser.add_argument("--negate", action="store_true", help="flip the reward's sign (demo)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (1 is steadier on a busy or shared machine)")
    return parser.parse_args(argv)


def build_config(profile: Profile, experiment: Experiment, args: argparse.Namespace) -> TrainConfig:
    """Profile sizes, then the experiment's settings, then the command line's."""
    overrides = dict(experiment.overrides)
    overrides.update({name: getattr(args, name) for name, _ in _OPTIONS.values()
                      if getattr(args, name) is not None})
    if args.no_checkpoint:
        overrides["save_checkpoint"] = False
    if profile.device == "cuda" and profile.dtype != "float32":
        overrides.setdefault("autocast_dtype", profile.dtype)  # float32 weights, bf16 compute
    return TrainConfig.from_profile(profile, **overrides)


def run_experiment(args: argparse.Namespace) -> RunResult:
    """Load the profile's model, train the experiment, and write the curves."""
    from grpo_core.models import load_policy
    from grpo_core.plots import LivePlot, save_curves

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    profile = get_profile(args.profile)
    experiment = EXPERIMENTS[args.experiment](profile, negate=args.negate)
    config = build_config(profile, experiment, args)
    out = Path(args.out or f"runs/{args.experiment}-{profile.name}")
    model, tokenizer = load_policy(profile)
    if config.autocast_dtype is not None:
        model.float()  # master weights in float32; autocast runs the matmuls in bf16
    plot = LivePlot(every=args.plot_every, path=out / "curves.png", title=experiment.title,
                    targets=experiment.targets, show=False)
    extra = {"experiment": experiment.name, "profile": profile.name, "model_id": profile.model_id,
             "negate": args.negate,
             "command": " ".join(["python -m grpo_core.train", *sys.argv[1:]])}
    try:
        result = train(model, tokenizer, experiment.prompts, experiment.reward_funcs, config, out,
                       reward_weights=experiment.reward_weights, callbacks=[plot],
                       resume=args.resume, progress=not args.quiet, extra_config=extra)
    finally:
        records = _read(out / "metrics.jsonl")
        if records:
            save_curves(records, out / "curves.png", title=experiment.title,
                        targets=experiment.targets)
    return result


def _read(path: Path) -> list[dict[str, Any]]:
    from grpo_core.loop import read_jsonl

    return read_jsonl(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        result = run_experiment(args)
    except RewardError as error:
        print(f"stopped: {error}", file=sys.stderr)
        return 1
    minutes = (time.perf_counter() - started) / 60
    last = result.metrics[-1] if result.metrics else {}
    print(f"{result.stopped} at step {result.step} after {minutes:.1f} min; last reward "
          f"{last.get('reward', float('nan')):.3g}, mean characters "
          f"{last.get('completions/mean_chars', float('nan')):.1f}; wrote {result.out_dir}")
    return 130 if result.stopped == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
