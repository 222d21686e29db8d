"""Where the course's files are, and how a run's files are read.

Two kinds of files:

- **package data**, shipped inside the wheel (``grpo_core/data/``): experiment 1's prompts
  (``prompts_exp1.jsonl``) and the course's coding problems (``problems.jsonl``);
- **recorded runs**, kept in the repository (``data/runs/<name>/``: ``metrics.jsonl``,
  ``config.json``, ``curves.png``), too large and too
  many to ship in a wheel. ``GRPO_RUNS_DIR`` points the package at another folder of them;
  :func:`runs_dir` says plainly when there is none.

A run folder's ``metrics.jsonl`` holds one JSON object per step (:data:`StepMetrics`, TRL's
metric names); :func:`series` is the one way every view reads a metric out of it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE_DATA = Path(__file__).resolve().parent / "data"
EXP1_PROMPTS = PACKAGE_DATA / "prompts_exp1.jsonl"
PROBLEMS_FILE = PACKAGE_DATA / "problems.jsonl"
# the repository this package sits in, when it is used from a clone (None inside a wheel)
REPO_ROOT: Path | None = (
    PACKAGE_DATA.parent.parent if (PACKAGE_DATA.parent.parent / "data" / "runs").is_dir() else None
)
RUNS_ENV = "GRPO_RUNS_DIR"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"

StepMetrics = Sequence[dict[str, Any]]  # one dict of metrics per step (TRL's names)


class RunsNotFoundError(FileNotFoundError):
    """The recorded runs are not where the package looked; the message says where to get them."""


def runs_dir() -> Path:
    """The folder of recorded runs: ``$GRPO_RUNS_DIR``, else the clone's ``data/runs``.

    Raises:
        RunsNotFoundError: neither exists (an installed wheel without a clone).
    """
    configured = os.environ.get(RUNS_ENV)
    if configured:
        folder = Path(configured).expanduser()
        if not folder.is_dir():
            raise RunsNotFoundError(f"{RUNS_ENV}={configured} is not a folder")
        return folder
    if REPO_ROOT is None:
        raise RunsNotFoundError(
            "the recorded runs live in the course's repository (data/runs/), not in the installed "
            f"package: clone the repository, or set {RUNS_ENV} to a folder of runs")
    return REPO_ROOT / "data" / "runs"


def read_jsonl(path: str | Path, *, missing_ok: bool = False) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, in order (blank lines skipped).

    Raises ``FileNotFoundError`` when ``path`` does not exist, unless ``missing_ok`` (then
    ``[]``: a run that has not written its first step yet).
    """
    path = Path(path)
    if missing_ok and not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class RecordedRun:
    """A run folder written by ``python -m grpo_core``: its per-step metrics and its config."""

    name: str
    records: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None


def load_run(path: str | Path) -> RecordedRun:
    """Read ``<path>/metrics.jsonl`` and ``<path>/config.json`` (or a ``metrics.jsonl`` path).

    A bare name (``"exp1-length-cpu"``) that is not a folder here is looked up in
    :func:`runs_dir`.
    """
    path = Path(path)
    if not path.exists() and len(path.parts) == 1:
        path = runs_dir() / path
    folder = path.parent if path.is_file() else path
    metrics = path if path.is_file() else path / METRICS_FILE
    if not metrics.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} at {metrics}")
    config_file = folder / CONFIG_FILE
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    return RecordedRun(folder.name, read_jsonl(metrics), config, folder)


def list_runs(root: str | Path | None = None) -> list[Path]:
    """The run folders under ``root`` (default :func:`runs_dir`) with a non-empty metrics file,
    sorted so that ``exp2-mbpp-k2`` comes before ``exp2-mbpp-k16``."""
    root = runs_dir() if root is None else Path(root)
    found = root.glob(f"*/{METRICS_FILE}") if root.exists() else []
    return sorted((p.parent for p in found if p.stat().st_size > 0), key=_natural)


def _natural(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def series(records: StepMetrics, key: str) -> tuple[list[int], list[float]]:
    """``(steps, values)`` of ``key`` over the records that have a finite number for it.

    Missing keys, None, NaN, inf and booleans are skipped, so sparse metrics (``eval/...``,
    logged every few steps) give only the steps that have them. A record without ``step``
    counts as its position, from 1.
    """
    steps, values = [], []
    for index, record in enumerate(records, start=1):
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            steps.append(int(record.get("step", index)))
            values.append(float(value))
    return steps, values
