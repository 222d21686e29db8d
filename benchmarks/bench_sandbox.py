"""How fast the sandbox scores completions, next to a plain evaluator with no isolation.

Runs every MBPP reference solution (974 completions, 3 asserts each) through
``grpo_core.sandbox.run_tests`` with full isolation, and, in the same run, through a plain
evaluator: one ``python -S -s -c "<code + setup + asserts>"`` subprocess per completion, judged
by its exit code, with the same interpreter, the same number of worker threads and no
isolation at all. The two alternate in rounds, so that load from other processes on the
machine falls on both. Prints completions per second for each and their ratio.

    python benchmarks/bench_sandbox.py [--workers N] [--rounds R] [--limit K]

MBPP is read from ``$GRPO_MBPP_DIR`` or ``../shared/mbpp``; without it the course's own
``data/problems.jsonl`` is used (and the output says so).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_core import mbpp  # noqa: E402
from grpo_core.sandbox import get_isolation, isolation_report, run_tests  # noqa: E402

TIMEOUT_S = 30.0  # MBPP task 123 alone takes seconds; every other reference milliseconds
PLAIN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


def load_rows(limit: int | None) -> tuple[str, list[dict]]:
    """The completions to score: MBPP's references if a local copy exists, else ours."""
    path = mbpp.local_mbpp_file("full")
    if path is not None:
        name, rows = f"MBPP reference solutions ({path})", mbpp.read_mbpp_file(path)
    else:
        name, rows = "the course's problems (no local MBPP found)", mbpp.read_problems()
    return name, rows[:limit] if limit else rows


def sandboxed(row: dict) -> bool:
    """Full isolation: the course's sandbox."""
    result = run_tests(row["code"], row["tests"], setup_code=row["setup_code"],
                       timeout_s=TIMEOUT_S)
    return result.fraction == 1.0


def plain(row: dict, interpreter: str) -> bool:
    """No isolation: one subprocess runs code, setup and asserts; exit status 0 is a pass."""
    program = "\n".join([row["code"], row["setup_code"], *row["tests"]])
    try:
        done = subprocess.run([interpreter, "-S", "-s", "-c", program], env=PLAIN_ENV,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def timed(evaluate: Callable[[dict], bool], rows: list[dict], workers: int) -> tuple[float, int]:
    """Seconds to score every row with ``workers`` threads, and how many passed."""
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(evaluate, rows))
    return time.perf_counter() - started, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()

    name, rows = load_rows(args.limit)
    interpreter = get_isolation().interpreter
    print(isolation_report())
    print(f"\nscoring {len(rows)} completions: {name}; {args.workers} workers, "
          f"{args.rounds} alternating rounds; plain evaluator: {interpreter} -S -s -c")
    evaluators = {"sandbox": sandboxed, "plain": lambda row: plain(row, interpreter)}
    for evaluate in evaluators.values():  # warm-up: probe, zygotes, page cache
        timed(evaluate, rows[:2 * args.workers], args.workers)
    totals = {label: [0.0, 0] for label in evaluators}
    for round_index in range(args.rounds):
        for label, evaluate in evaluators.items():
            seconds, passed = timed(evaluate, rows, args.workers)
            totals[label][0] += seconds
            totals[label][1] += passed
            print(f"  round {round_index + 1} {label:8s} {len(rows) / seconds:7.1f} completions/s"
                  f" ({passed}/{len(rows)} scored 1.0)")
    rate = {label: args.rounds * len(rows) / seconds for label, (seconds, _) in totals.items()}
    print(f"\nsandbox (full isolation): {rate['sandbox']:.1f} completions/s")
    print(f"plain subprocess, no isolation: {rate['plain']:.1f} completions/s")
    print(f"ratio sandbox / plain: {rate['sandbox'] / rate['plain']:.2f}")


if __name__ == "__main__":
    main()
