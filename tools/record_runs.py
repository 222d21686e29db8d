"""Record the course's seed and dynamic-sampling runs into ``data/runs/``, one at a time.

Each run is the recorded experiment's own command (``data/runs/<base>/config.json``) with
another ``--seed`` (or ``--dynamic-sampling``) and its own ``--out``, plus ``--save-every 5``
so that a run stopped part-way (a session's end) goes on with ``--resume`` next time. A run
whose ``metrics.jsonl`` already reaches its last step is skipped; one with a checkpoint is
resumed; any other is started afresh. Run it again until it says every run is done.

Usage: ``python tools/record_runs.py [--list] [name ...]`` (default: every run below, in
order). One heavy job at a time: start it alone, in the background, with a log::

    nohup .venv/bin/python tools/record_runs.py > /tmp/record_runs.log 2>&1 &
"""

from __future__ import annotations

import json
import shlex
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
SAVE_EVERY = 5

# name -> (the recorded run whose command it repeats, what it adds to that command)
PLANNED: dict[str, tuple[str, list[str]]] = {
    "exp3-stop-seed1-cpu": ("exp3-stop-cpu", ["--seed", "1"]),
    "exp2-k8-seed2-cpu": ("exp2-k8-cpu", ["--seed", "2"]),
    "exp2-k2-seed1-cpu": ("exp2-k2-cpu", ["--seed", "1"]),
    "exp2-k16-seed1-cpu": ("exp2-k16-cpu", ["--seed", "1"]),
    "exp3-stop-seed2-cpu": ("exp3-stop-cpu", ["--seed", "2"]),
    "exp2-k8-seed3-cpu": ("exp2-k8-cpu", ["--seed", "3"]),
    # evaluated every 10 steps: the held-out score against completions sampled, to compare
    # with plain k = 2 at equal generations (a dynamic step samples more than a plain one)
    "exp2-k2-dynamic-cpu": ("exp2-k2-cpu", ["--dynamic-sampling", "--eval-every", "10"]),
    "exp2-k2-dynamic-seed1-cpu": ("exp2-k2-cpu", ["--dynamic-sampling", "--eval-every", "10",
                                                  "--seed", "1"]),
}


def command_for(name: str) -> list[str]:
    """The command that records ``name``: its base run's recorded command
    (``tools/reproduce.py``), its additions, and ``--out data/runs/<name>``."""
    base, extra = PLANNED[name]
    return [sys.executable, "-m", "grpo_core", *recorded_command(base), *extra,
            "--save-every", str(SAVE_EVERY), "--quiet", "--out", f"data/runs/{name}"]


def state_of(name: str, command: list[str]) -> str:
    """``done``, ``resume`` or ``start``."""
    folder = RUNS / name
    steps = int(command[command.index("--steps") + 1])
    metrics = folder / "metrics.jsonl"
    if metrics.exists():
        logged = [json.loads(line).get("step", -1) for line in metrics.read_text().splitlines()
                  if line.strip()]
        if steps in logged:
            return "done"
    return "resume" if (folder / "checkpoint").exists() else "start"


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")] or list(PLANNED)
    unknown = [n for n in names if n not in PLANNED]
    if unknown:
        raise SystemExit(f"unknown runs {unknown}; planned: {list(PLANNED)}")
    for name in names:
        command = command_for(name)
        state = state_of(name, command)
        if "--list" in argv or state == "done":
            print(f"{name}: {state}: {shlex.join(command)}", flush=True)
            continue
        if state == "resume":
            command.append("--resume")
        print(f"{time.strftime('%H:%M:%S')} {name}: {state}: {shlex.join(command)}", flush=True)
        started = time.time()
        code = subprocess.run(command, cwd=ROOT).returncode
        print(f"{time.strftime('%H:%M:%S')} {name}: exit {code} after "
              f"{(time.time() - started) / 60:.1f} min", flush=True)
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
