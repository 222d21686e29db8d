"""Run a recorded run again: the command in ``data/runs/<run>/config.json``, writing to
``runs/<run>`` (git ignores it) instead of over the recorded folder.

Usage: ``python tools/reproduce.py RUN [--out DIR] [--dry-run] [extra options ...]``
(``make reproduce RUN=exp2-k8-cpu``; ``make exp2 K=8`` and ``make exp3`` in the ``cpu``
profile). Extra options are appended (``--steps 4`` for a shorter look). The same command on
the same kind of CPU and code gives the same numbers (notebook 12); another CPU, torch build
or precision plan gives others, and a run recorded by an older version of the course (see
``data/README.md``) runs today's code and data.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "data" / "runs"


def recorded_command(run: str) -> list[str]:
    """The recorded command's options (after ``python -m grpo_core``), without ``--out``."""
    config = RUNS / run / "config.json"
    if not config.exists():
        known = sorted(p.parent.name for p in RUNS.glob("*/config.json"))
        raise SystemExit(f"no recorded run {run!r} in data/runs; recorded: {known}")
    recorded = json.loads(config.read_text())
    words = shlex.split(recorded["command"])
    if words[:3] == ["python", "-m", "grpo_core.train"]:  # the entry point's former name
        words[2] = "grpo_core"
    if words[:3] != ["python", "-m", "grpo_core"]:
        raise SystemExit(f"{run}'s command is not a python -m grpo_core command: {words}")
    if "--out" in words:
        at = words.index("--out")
        del words[at:at + 2]
    proxy = recorded.get("proxy_reward")
    if proxy and "--proxy" not in words:  # recorded when this proxy was experiment 3's default
        words += ["--proxy", proxy.removesuffix("_reward")]
    return words[3:]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    run, rest = argv[0], argv[1:]
    out = f"runs/{run}"
    if "--out" in rest:
        at = rest.index("--out")
        out = rest[at + 1]
        del rest[at:at + 2]
    dry = "--dry-run" in rest
    rest = [word for word in rest if word != "--dry-run"]
    command = [sys.executable, "-m", "grpo_core", *recorded_command(run), *rest, "--out", out]
    print(shlex.join(command), flush=True)
    return 0 if dry else subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
