"""Run a recorded run again: the command in ``data/runs/<run>/config.json``, writing to
``runs/<run>`` (git ignores it) instead of over the recorded folder.

Usage: ``python tools/reproduce.py RUN [--out DIR] [--dry-run] [extra options ...]``
(``make reproduce RUN=exp2-k8-cpu``; ``make exp2 K=8`` and ``make exp3`` in the ``cpu``
profile). Extra options are appended (``--steps 4`` for a shorter look). The same command on
the same kind of CPU and code gives the same numbers (notebook 12); another CPU, torch build
or precision plan gives others. Before running, it says whether today's code is the code that
recorded the run (``config.json``'s ``code``, ``grpo_core.provenance``) and, when it is not,
how to replay the run exactly: a git worktree of the run's commit.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # as tools/run_summary.py: the package of this checkout

from grpo_core.provenance import CODE_KEY, DRAWS_KEY, code_version, short_commit  # noqa: E402

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


def code_note(run: str, today: dict | None = None) -> str:
    """Whether today's code (``today``, default :func:`~grpo_core.provenance.code_version`)
    is the code that recorded ``run``, and if not, how to replay the run exactly."""
    recorded = json.loads((RUNS / run / "config.json").read_text())
    code = recorded.get(CODE_KEY) or {}
    today = code_version(ROOT) if today is None else today
    draws = recorded.get(DRAWS_KEY) or {}
    isa = draws.get("onednn_max_isa")
    needs = (f" Its draws also need {draws.get('sampler')}, torch {draws.get('torch')} and "
             f"the CPU kernels {draws.get('cpu_kernels')}"
             + (f" (ATEN_CPU_CAPABILITY={str(draws.get('cpu_kernels')).lower()} "
                f"ONEDNN_MAX_CPU_ISA={isa})" if isa else "") + "." if draws else "")
    if not code.get("commit"):
        return (f"{run} was recorded before runs named their commit: today's code "
                f"({short_commit(today)}) may sample other completions, so its numbers can "
                f"differ from the recorded ones by more than the seed explains.")
    if today.get("commit") == code["commit"] and today.get("clean") and code.get("clean"):
        return f"{run} was recorded by this code (commit {short_commit(code)}).{needs}"
    return (f"{run} was recorded by commit {short_commit(code)}; today's code is "
            f"{short_commit(today)}, which may draw other samples. To replay it exactly: "
            f"git worktree add --detach /tmp/replay-{run} {code['commit']} && "
            f"cd /tmp/replay-{run} && PYTHONPATH=. {Path(sys.executable).name} -m grpo_core "
            f"{shlex.join(recorded_command(run))} --out runs/{run}.{needs}")


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
    print(code_note(run), flush=True)
    print(shlex.join(command), flush=True)
    return 0 if dry else subprocess.run(command, cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
