"""Record the course's across-seed runs into ``data/runs/``, one at a time, every run of one
comparison by one commit.

Which runs: experiment 2 at k = 2, 8 and 16 with seeds 0-3, experiment 3 and dynamic
sampling at k = 2 with seeds 0-2 (issue 45: 4 seeds per group size, as CS336's assignment 5
asks, 3 for the others). Each is its base run's command (``data/runs/<base>/config.json``)
with its seed (and ``--dynamic-sampling``), plus ``--save-every 5`` so that a run stopped
part-way goes on with ``--resume``.

Which machine: every CPU here and most learners' laptops can take the float32 plan on AVX2
kernels, so every run is recorded that way (``--precision float32``, ``ATEN_CPU_CAPABILITY=avx2``
and ``ONEDNN_MAX_CPU_ISA=AVX2``): runs recorded in later sessions, on another CPU, are then
still the same draws (``seeds.seed_group`` checks it from their step-0 completions).

Which code: the commit in ``tools/recording_commit.txt``. A run recorded by another commit
is recorded again. Every run is made in a git worktree of that commit (``.record/<commit>``,
git ignores it), so that a later session, whose own code has moved on, still records with the
same code and the same draws; the finished run folder (without its checkpoint) is then copied
into ``data/runs/recording/<name>``, its ``config.json`` naming the commit
(``grpo_core.provenance``). The notebooks do not read that folder (``list_runs`` lists
``data/runs/`` itself): a comparison half re-recorded would change their outputs run by run.
Once every planned run is there, ``--promote`` moves them all into ``data/runs/`` over the
older runs of the same names, and the notebooks that read them are rebuilt.

Usage: ``python tools/record_runs.py [--list] [name ...]`` (default: every planned run, in
order; ``--commit REV`` first writes REV's commit into ``tools/recording_commit.txt``;
``--promote`` moves the whole recorded plan into ``data/runs/``). One
heavy job at a time: start it alone, in the background, with a log::

    nohup .venv/bin/python tools/record_runs.py > /tmp/record_runs.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:  # run as a script (python tools/record_runs.py) or imported as tools.record_runs
    from tools.reproduce import recorded_command
except ImportError:  # pragma: no cover - the script's own folder is on sys.path instead
    from reproduce import recorded_command

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "data" / "runs"
# where finished runs wait until the whole plan is recorded (module docstring)
PENDING = RUNS / "recording"
COMMIT_FILE = ROOT / "tools" / "recording_commit.txt"
WORKTREES = ROOT / ".record"
SAVE_EVERY = 5
# the plan and the kernels every CPU here can take (module docstring)
PORTABLE_PLAN = ["--precision", "float32"]
PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# options the recorder adds; dropped from a base command that a re-recording wrote
RECORDER_OPTIONS = {"--seed": 1, "--save-every": 1, "--out": 1, "--quiet": 0, "--resume": 0,
                    "--precision": 1}
EXP2_SEEDS, OTHER_SEEDS = 4, 3


def _planned() -> dict[str, tuple[str, list[str]]]:
    """name -> (the recorded run whose command it repeats, what it adds), seed by seed, so
    that every group grows together."""
    plan: dict[str, tuple[str, list[str]]] = {}
    for seed in range(EXP2_SEEDS):
        seeded = ["--seed", str(seed)] if seed else []
        suffix = f"-seed{seed}" if seed else ""
        for k in (2, 8, 16):
            plan[f"exp2-k{k}{suffix}-cpu"] = (f"exp2-k{k}-cpu", seeded)
        if seed < OTHER_SEEDS:
            # evaluated every 10 steps: the held-out score against completions sampled, to
            # compare with plain k = 2 at equal generations (a dynamic step samples more)
            plan[f"exp2-k2-dynamic{suffix}-cpu"] = (
                "exp2-k2-cpu", ["--dynamic-sampling", "--eval-every", "10", *seeded])
            plan[f"exp3-stop{suffix}-cpu"] = ("exp3-stop-cpu", seeded)
    return plan


PLANNED: dict[str, tuple[str, list[str]]] = _planned()


def base_options(base: str) -> list[str]:
    """The base run's recorded options without those the recorder adds (a base run recorded
    by this script has them)."""
    words, kept = recorded_command(base), []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
        elif word in RECORDER_OPTIONS:
            skip = RECORDER_OPTIONS[word]
        else:
            kept.append(word)
    return kept


def command_for(name: str) -> list[str]:
    """The command that records ``name`` (run in the recording worktree): its base run's
    options (:func:`base_options`), its additions, the portable plan, and
    ``--out data/runs/<name>``."""
    base, extra = PLANNED[name]
    return [sys.executable, "-m", "grpo_core", *base_options(base), *extra, *PORTABLE_PLAN,
            "--save-every", str(SAVE_EVERY), "--quiet", "--out", f"data/runs/{name}"]


def recording_commit() -> str:
    """The commit every planned run is recorded by (``tools/recording_commit.txt``)."""
    if not COMMIT_FILE.exists():
        raise SystemExit(f"no {COMMIT_FILE.relative_to(ROOT)}: run with --commit REV first")
    lines = [line.strip() for line in COMMIT_FILE.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    if len(lines) != 1 or len(lines[0]) != 40:
        raise SystemExit(f"{COMMIT_FILE.relative_to(ROOT)} must hold one 40-digit commit")
    return lines[0]


def recorded_by(folder: Path) -> str | None:
    """The commit a run folder's ``config.json`` names, if its tree was clean."""
    config = folder / "config.json"
    if not config.exists():
        return None
    code = json.loads(config.read_text()).get("code") or {}
    return code.get("commit") if code.get("clean") else None


def state_of(name: str, command: list[str], commit: str, worktree: Path) -> str:
    """``done`` (here, reaching its last step, by ``commit``), ``resume`` (a checkpoint in the
    worktree) or ``start``."""
    steps = int(command[command.index("--steps") + 1])
    for folder in (PENDING / name, RUNS / name):
        metrics = folder / "metrics.jsonl"
        if metrics.exists() and recorded_by(folder) == commit:
            logged = [json.loads(line).get("step", -1)
                      for line in metrics.read_text().splitlines() if line.strip()]
            if steps in logged:
                return "done"
    return "resume" if (worktree / "data" / "runs" / name / "checkpoint").exists() else "start"


def worktree_for(commit: str) -> Path:
    """A git worktree of ``commit`` (made once, kept between runs of a session)."""
    path = WORKTREES / commit[:12]
    if not (path / "grpo_core").exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
                       check=True)
    return path


def publish(worktree: Path, name: str) -> Path:
    """Copy the finished run from the worktree into ``data/runs/recording/<name>``, without
    its checkpoint (too large for git), replacing what was there."""
    target = PENDING / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(worktree / "data" / "runs" / name, target,
                    ignore=shutil.ignore_patterns("checkpoint"))
    return target


def promote(commit: str) -> list[str]:
    """Move every planned run from ``data/runs/recording/`` into ``data/runs/`` (over the
    older runs of the same names), once all of them are there, recorded by ``commit``.

    Raises SystemExit naming the runs still missing: promoting part of the plan would leave a
    comparison pooled from two recordings."""
    missing = [name for name in PLANNED if recorded_by(PENDING / name) != commit]
    if missing:
        raise SystemExit(f"{len(missing)} of {len(PLANNED)} planned runs are not recorded by "
                         f"{commit[:7]} yet: {missing}")
    for name in PLANNED:
        if (RUNS / name).exists():
            shutil.rmtree(RUNS / name)
        shutil.move(str(PENDING / name), str(RUNS / name))
    return list(PLANNED)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Record the course's across-seed runs, one at a time, every run of one "
                    "comparison by one commit (see the module docstring).")
    parser.add_argument("names", nargs="*", metavar="name",
                        help="planned runs to record (default: every one, in order)")
    parser.add_argument("--list", action="store_true",
                        help="print each planned run's state and command; record nothing")
    parser.add_argument("--commit", metavar="REV",
                        help="first write REV's commit into tools/recording_commit.txt")
    parser.add_argument("--promote", action="store_true",
                        help="move the whole recorded plan into data/runs/")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.commit:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.commit],
                             capture_output=True, text=True, check=True).stdout.strip()
        COMMIT_FILE.write_text("# every run of tools/record_runs.py is recorded by this commit\n"
                               f"{rev}\n")
    names = args.names or list(PLANNED)
    unknown = [n for n in names if n not in PLANNED]
    if unknown:
        raise SystemExit(f"unknown runs {unknown}; planned: {list(PLANNED)}")
    commit = recording_commit()
    if args.promote:
        moved = promote(commit)
        print(f"moved {len(moved)} runs into {RUNS.relative_to(ROOT)}: rebuild notebooks 08, 09, "
              "11 and 12 (tools/notebooks.py build ...)")
        return 0
    listing = args.list
    worktree = WORKTREES / commit[:12] if listing else worktree_for(commit)
    for name in names:
        command = command_for(name)
        state = state_of(name, command, commit, worktree)
        if listing or state == "done":
            print(f"{name}: {state} (by {commit[:7]}): {shlex.join(command)}", flush=True)
            continue
        if state == "resume":
            command.append("--resume")
        else:
            shutil.rmtree(worktree / "data" / "runs" / name, ignore_errors=True)
        print(f"{time.strftime('%H:%M:%S')} {name}: {state} at {commit[:7]}: "
              f"{shlex.join(command)}", flush=True)
        started = time.time()
        env = {**os.environ, **PORTABLE_KERNELS, "PYTHONPATH": str(worktree),
               "HF_HUB_OFFLINE": "1"}
        code = subprocess.run(command, cwd=worktree, env=env).returncode
        print(f"{time.strftime('%H:%M:%S')} {name}: exit {code} after "
              f"{(time.time() - started) / 60:.1f} min", flush=True)
        if code:
            return code
        print(f"{name}: published to {publish(worktree, name).relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
