"""Experiment 1 against the clock: how long ``python -m grpo_core length --profile cpu`` takes,
model load included, to reach its target, in the course's default precision and in float32.

The target is the one the README and notebook 07 state: the mean distance from 20 characters,
``mean |len - 20|`` (= minus the mean reward), averaged over 5 consecutive steps, at most 10.
Each precision runs the real command line in a subprocess (same seed, same steps) while this
script watches ``metrics.jsonl`` and notes the wall time at which each step's line appears,
counted from the moment the command was started (so ``import torch`` and the model load are
included). Run it with the model already cached (``make setup`` converts it once) on an
otherwise idle machine.

    python benchmarks/bench_exp1.py [--steps 30] [--precision default|float32|both] [--keep DIR]
                                    [--isa native|avx2] [--seeds N ...]
    python benchmarks/bench_exp1.py --summarize OUTPUT [OUTPUT ...]

``--isa avx2`` holds torch's and oneDNN's kernels to AVX2 (a laptop without AVX-512; the
default plan is then that laptop's too).

``--seeds 1 2 3`` runs each precision once per seed (``--seed`` of the command line; without
it, the command's own default seed) and then the time to the target over the seeds that reached
it: median, range, and mean with its 95 % t-interval. The step at which a run reaches it moves
with the sampled tokens, so one seed's time is one draw of it.

``--summarize OUTPUT ...`` runs nothing: it reads earlier outputs of this script (their per-seed
lines) and prints each precision's summary line again, as this version writes it.

``--keep DIR`` keeps the default-precision run in DIR (the recorded run
``data/runs/exp1-length-cpu`` is made this way; its ``config.json`` holds the command).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from machine import cpu_description, isa_description, run_with_isa

from grpo_core.stats import seed_interval

ROOT = Path(__file__).resolve().parents[1]
TARGET, WINDOW = 10.0, 5


def first_step_at_target(rewards: list[float], window: int = WINDOW, target: float = TARGET) -> int | None:
    """The first step whose last ``window`` steps have mean ``-reward <= target`` (1-based)."""
    for end in range(window, len(rewards) + 1):
        if -sum(rewards[end - window:end]) / window <= target:
            return end
    return None


def run(precision: str, steps: int, out: Path, seed: int | None = None) -> dict:
    # the learner's command (progress bar, curves redrawn every 5 steps), without a checkpoint
    command = [sys.executable, "-m", "grpo_core", "length", "--profile", "cpu", "--out", str(out),
               "--steps", str(steps), "--no-checkpoint"]
    if precision == "float32":
        command += ["--precision", "float32"]
    if seed is not None:
        command += ["--seed", str(seed)]
    metrics = out / "metrics.jsonl"
    arrivals: list[float] = []
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    while process.poll() is None:
        if metrics.exists():
            lines = metrics.read_text().count("\n")
            arrivals.extend([time.perf_counter() - started] * (lines - len(arrivals)))
        time.sleep(0.1)
    total = time.perf_counter() - started
    output = process.stdout.read()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    arrivals.extend([total] * (len(records) - len(arrivals)))
    step = first_step_at_target([r["reward"] for r in records])
    return {"precision": precision, "step": step, "total_s": total, "steps": len(records),
            "at_target_s": None if step is None else arrivals[step - 1],
            "first_line_s": arrivals[0] if arrivals else None,
            "median_step_s": sorted(r["step_time"] for r in records)[len(records) // 2],
            # a step's time follows its completions' length, which the run's own path sets
            "mean_tokens": sum(r["completions/mean_length"] for r in records) / len(records)}


def summarize_times(times: list[float | None]) -> str:
    """One line for the times to the target over seeds (None: a seed that did not reach it):
    the median and range over the runs that reached it, and their mean with its t-interval
    (``grpo_core.stats.seed_interval``)."""
    reached = sorted(t for t in times if t is not None)
    if not reached:
        return f"target not reached in any of {len(times)} seeds"
    interval = seed_interval(reached)
    spread = (f"{interval.confidence * 100:g} % t-interval {interval.low:.0f}-{interval.high:.0f} s"
              if interval.reason is None else interval.reason)
    return (f"target reached in {len(reached)} of {len(times)} seeds; time to it: median "
            f"{median(reached):.0f} s, range {reached[0]:.0f}-{reached[-1]:.0f} s; mean "
            f"{interval.mean:.0f} s, {spread}")


def times_in_output(text: str) -> dict[str, list[float | None]]:
    """The times to the target per precision in this script's printed output (its per-seed
    lines): ``{"float32": [281.0, None, ...]}`` (None: not reached), in the order printed."""
    times: dict[str, list[float | None]] = {}
    for match in re.finditer(r"^ *(\w+), seed \d+: (?:reached at step \d+, (\d+) s|not reached)",
                             text, re.M):
        times.setdefault(match[1], []).append(None if match[2] is None else float(match[2]))
    return times


def run_one(precision: str, steps: int, seed: int | None, keep: Path | None) -> dict:
    if precision == "default" and keep is not None:
        shutil.rmtree(keep, ignore_errors=True)
        return run(precision, steps, keep.resolve(), seed)
    with tempfile.TemporaryDirectory() as folder:
        return run(precision, steps, Path(folder) / "run", seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--precision", choices=["default", "float32", "both"], default="both")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the default-precision run to this folder (replaced)")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: torch's and oneDNN's kernels held to AVX2 in every run")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="run each precision once per seed (default: the command's seed)")
    parser.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="OUTPUT",
                        help="run nothing: print the seeds' summary of earlier outputs of this script")
    args = parser.parse_args()
    if args.summarize:
        for output in args.summarize:
            for name, times in times_in_output(output.read_text()).items():
                print(f"{output.name}: {name}: {summarize_times(times)}")
        return 0
    if args.keep is not None and args.seeds and len(args.seeds) > 1:
        parser.error("--keep keeps one run: give at most one seed with it")
    run_with_isa(args.isa, sys.argv[1:])
    print(f"CPU: {cpu_description()}; {isa_description()}")
    names = ["default", "float32"] if args.precision == "both" else [args.precision]
    print(f"experiment 1, cpu profile, {args.steps} steps; target: the mean |len - 20| over "
          f"{WINDOW} steps <= {TARGET:g} characters")
    seeds = args.seeds or [None]
    for name in names:
        times = []
        for seed in seeds:
            r = run_one(name, args.steps, seed, args.keep)
            label = name if seed is None else f"{name}, seed {seed}"
            reached = ("not reached" if r["step"] is None else
                       f"reached at step {r['step']}, {r['at_target_s']:.0f} s after the start")
            print(f"{label:>8}: {reached}; first step logged at {r['first_line_s']:.0f} s, "
                  f"median step {r['median_step_s']:.1f} s (completions {r['mean_tokens']:.0f} tokens on "
                  f"average), {r['steps']} steps in {r['total_s']:.0f} s", flush=True)
            times.append(r["at_target_s"])
        if len(seeds) > 1:
            print(f"{name:>8}: {summarize_times(times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
