"""Print what a recorded run measured, one Markdown row per run: held-out score at step 0
and at the end (each with its standard error), the change with its own standard error and
z, the training reward over the first and last fifth, truncation over the last fifth, and
the wall time. The figures a closing note or ``data/README.md`` quotes, read from the files.
Then one row per setup that has a held-out change: the runs that differ only in their seed
(``grpo_core.seeds``), each seed's change with its z, and the mean ± its standard error over
seeds with its t interval (or why there is none), pooled as "same distribution, other draws"
with every step-0 score where the runs' step-0 evaluations are different draws. Each run's
last column names the code that recorded it (``grpo_core.provenance``).

Usage: ``python tools/run_summary.py [run folder or name ...]`` (default: every run in
``data/runs``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grpo_core.diagnosis import (  # noqa: E402
    diagnose,
    find_true_score,
    held_out_change,
    trained_rewards,
)
from grpo_core.provenance import describe_provenance  # noqa: E402
from grpo_core.run_files import list_runs, load_run, runs_dir, series, training_records  # noqa: E402
from grpo_core.seeds import group_by_setup, held_out_key, seed_group  # noqa: E402
from grpo_core.stats import trend  # noqa: E402

HEADER = ("| run | held-out metric | step 0 | end | change (z) | reward first -> last fifth "
          "| truncated, last fifth | wall | flagged | recorded by |")


def _fifths(records, key: str):
    """``trend`` of ``key`` (its first and last fifth), or None when it was not logged."""
    steps, values = series(records, key)
    return trend(steps, values) if values else None


def _sem(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def summary_row(path: Path) -> str:
    """One Markdown row for the run in ``path``."""
    run = load_run(path)
    records = run.records
    trained = trained_rewards(records, run.config)
    # the true score of a proxy run, else the trained reward's own held-out mean (experiment 2)
    key = find_true_score(records, trained) or next(
        (f"eval/{name}" for name in trained if series(records, f"eval/{name}")[1]), None)
    moved = held_out_change(records, key) if key else None
    if moved is None:
        held = ("-", "-", "-", "-")
    else:
        z = f"{moved.z:+.1f}" if moved.z is not None else "-"
        held = (key, f"{moved.start:.3f} ± {_sem(moved.start_sem)}",
                f"{moved.end:.3f} ± {_sem(moved.end_sem)} (step {moved.end_step})",
                f"{moved.change:+.3f} ± {moved.delta_sem:.3f} ({z})")
    reward, clipped = _fifths(records, "reward"), _fifths(records, "completions/clipped_ratio")
    seconds = sum(r.get("step_time", 0.0) for r in training_records(records))
    seconds += sum(r.get("time/eval", 0.0) for r in records)  # step_time leaves it out
    flagged = ", ".join(diagnose(run).symptoms) or "nothing"
    return (f"| `{run.name}` | {' | '.join(held)} | "
            f"{'-' if reward is None else f'{reward.first:.3g} -> {reward.last:.3g}'} | "
            f"{'-' if clipped is None else f'{clipped.last:.0%}'} | {seconds / 60:.0f} min | "
            f"{flagged} | {describe_provenance(run.config)} |")


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    paths = [Path(a) if Path(a).exists() else runs_dir() / a for a in argv] or list_runs()
    missing = [str(p) for p in paths if p not in list_runs(p.parent)]
    if missing:
        raise SystemExit(f"not a recorded run (no metrics.jsonl and config.json): "
                         f"{', '.join(missing)}; the runs: {[p.name for p in list_runs()]}")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for path in paths:
        print(summary_row(path))
    print()
    print("| runs (same setup, by seed) | across seeds |")
    print("|---|---|")
    for group in group_by_setup(paths):
        if held_out_key(group[0]) is None:
            continue
        try:
            line = seed_group(group, other_draws=True).describe()
        except ValueError as error:  # a run without a held-out change
            line = f"- ({error})"
        print(f"| {', '.join(f'`{run.name}`' for run in group)} | {line} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
