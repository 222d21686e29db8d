"""Where the course's files are, and how a run's files are read.

Two kinds of files:

- **package data**, shipped inside the wheel (``grpo_core/data/``): experiment 1's prompts
  (``prompts_exp1.jsonl``) and the course's coding problems (``problems.jsonl``);
- **recorded runs**, kept in the repository (``data/runs/<name>/``: ``metrics.jsonl``,
  ``config.json``, ``curves.png``, ``samples.jsonl``), too large and too
  many to ship in a wheel. ``GRPO_RUNS_DIR`` points the package at another folder of them;
  :func:`runs_dir` says plainly when there is none.

A run folder's ``metrics.jsonl`` holds one JSON object per step (:data:`StepMetrics`, TRL's
metric names); :func:`series` is the one way every view reads a metric out of it. A run with
a held-out evaluation also has a ``"step": 0`` record first: the base model's ``eval/...``
numbers and ``time/eval``, with no ``reward`` and none of the update's metrics.

``samples.jsonl`` (:func:`read_samples`; older runs have none) keeps the completions, one row
per completion (:func:`sample_record` gives the format):

- training completions (``"split": "train"``): ``step``, ``split``, ``prompt_id`` (the
  prompt row's ``task_id``, else its index in the run's prompt list), ``prompt`` (only for
  rows without a ``task_id``: the user message, cut at ``PROMPT_CHARS`` characters),
  ``sample`` (the completion's place in its group), ``completion`` (cut at the run's
  ``samples_max_chars``), ``chars`` (its full length), ``cut`` (True when it was cut),
  ``truncated`` (True when it hit ``max_new_tokens``), ``reward`` (the weighted total), each
  reward function's value under its name, and ``advantage`` (the loop's);
- held-out completions (``"split": "held_out"``, from each evaluation, step 0 included): the
  same fields without ``prompt``, ``reward`` and ``advantage`` (each function's value only).

A rollout reused for several steps (``num_iterations > 1``) is written once, at the step that
sampled it. Numbers are rounded to 6 decimals.
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

from grpo_core.stats import PASS_SCORE, problem_means, problem_pass_at_k

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
SAMPLES_FILE = "samples.jsonl"
# the held-out evaluator's step-0 per-problem means, for delta_sem after a resume
EVAL_STATE_FILE = "eval_state.json"
PROMPT_CHARS = 200  # a samples.jsonl row's prompt (rows without a task_id) is cut here
SAMPLE_SPLITS = ("train", "held_out")
# the standard errors logged beside an eval/<fn> mean (grpo_core.evaluation)
EVAL_STAT_SUFFIXES = ("/sem", "/delta_sem")
PASS_AT = "/pass@"  # eval/<fn>/pass@<k>: pass@k beside a pass/fail reward's held-out mean

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
    """A run folder written by ``python -m grpo_core``: its per-step metrics and its config.

    ``run.samples()`` reads its ``samples.jsonl`` (:func:`read_samples`); ``run.has_samples``
    says whether it has one (runs recorded before samples were kept have none).
    """

    name: str
    records: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def has_samples(self) -> bool:
        return self.path is not None and (self.path / SAMPLES_FILE).exists()

    def samples(self, **select: Any) -> Samples:
        """The run's completions; ``select`` as :meth:`Samples.select` (``split=``, ``step=``,
        ``prompt_id=``). Empty, with ``found`` False, when the run kept none."""
        if self.path is None:
            return Samples([], found=False, path=None)
        found = read_samples(self.path)
        return found.select(**select) if select else found


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


@dataclass
class Samples:
    """The rows of a run's ``samples.jsonl`` (the module's docstring gives their fields).

    Attributes:
        rows: one dict per completion, in the order they were written.
        found: False when the run folder has no ``samples.jsonl`` (an older run): ``rows`` is
            then empty because nothing was kept, not because nothing was sampled.
        path: the file read (or looked for).
    """

    rows: list[dict[str, Any]]
    found: bool
    path: Path | None

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    def select(self, *, split: str | None = None, step: int | None = None,
               prompt_id: Any = None) -> Samples:
        """The rows of one split, step and/or prompt (None: any)."""
        if split is not None and split not in SAMPLE_SPLITS:
            raise ValueError(f"split must be one of {SAMPLE_SPLITS}, got {split!r}")
        rows = [row for row in self.rows
                if (split is None or row.get("split") == split)
                and (step is None or row.get("step") == step)
                and (prompt_id is None or row.get("prompt_id") == prompt_id)]
        return Samples(rows, self.found, self.path)

    def problem_means(self, name: str, step: int, split: str = "held_out") -> dict[Any, float]:
        """Each problem's mean ``name`` (a reward function's value) over its rows of ``split``
        at ``step``: ``{prompt_id: mean}``, the per-problem scores a paired comparison needs
        (``grpo_core.stats.paired_difference``). Empty when no row matches; a matching row
        without ``name`` raises KeyError."""
        values: dict[Any, list[float]] = {}
        for row in self.select(split=split, step=step):
            if name not in row:
                raise KeyError(f"a {split} row of step {step} has no {name!r}; it has "
                               f"{sorted(k for k in row if isinstance(row[k], (int, float)))}")
            values.setdefault(row.get("prompt_id"), []).append(float(row[name]))
        return problem_means(values)

    def problem_pass_at_k(self, name: str, step: int, k: int, split: str = "held_out",
                          pass_score: float = PASS_SCORE) -> dict[Any, float]:
        """Each problem's pass@k (``grpo_core.stats.pass_at_k``) from its recorded rows of
        ``split`` at ``step``, a row passing when ``name`` is at least ``pass_score``: pass@k
        of runs that logged none, from the samples they kept (every sample of a problem must
        have been kept, or the estimate is of the kept ones). Empty when no row matches."""
        passed: dict[Any, list[bool]] = {}
        for row in self.select(split=split, step=step):
            if name not in row:
                raise KeyError(f"a {split} row of step {step} has no {name!r}")
            passed.setdefault(row.get("prompt_id"), []).append(float(row[name]) >= pass_score)
        return problem_pass_at_k(passed, k)

    @property
    def steps(self) -> list[int]:
        """The steps that have rows, in order."""
        return sorted({int(row["step"]) for row in self.rows if "step" in row})


def read_samples(path: str | Path) -> Samples:
    """A run's ``samples.jsonl`` (``path``: the run folder or the file itself).

    A folder without one (runs recorded before samples were kept) gives an empty
    :class:`Samples` with ``found=False``; it never raises for a missing file.
    """
    path = Path(path)
    file = path if path.suffix == ".jsonl" and not path.is_dir() else path / SAMPLES_FILE
    if not file.exists():
        return Samples([], found=False, path=file)
    return Samples(read_jsonl(file), found=True, path=file)


def _rounded(value: float) -> float:
    return round(float(value), 6)


def sample_record(
    step: int,
    split: str,
    prompt_id: Any,
    sample: int,
    completion: str,
    *,
    truncated: bool,
    values: dict[str, float],
    max_chars: int,
    prompt: str | None = None,
    reward: float | None = None,
    advantage: float | None = None,
) -> dict[str, Any]:
    """One ``samples.jsonl`` row (the module's docstring lists the fields).

    ``completion`` is cut at ``max_chars`` characters (``cut`` True, ``chars`` the full
    length); ``prompt`` at ``PROMPT_CHARS``. ``values`` are the reward functions' values, each
    logged under its name (a name that clashes with a fixed field gets ``rewards/`` before it).
    """
    if split not in SAMPLE_SPLITS:
        raise ValueError(f"split must be one of {SAMPLE_SPLITS}, got {split!r}")
    record: dict[str, Any] = {"step": int(step), "split": split, "prompt_id": prompt_id}
    if prompt is not None:
        record["prompt"] = prompt[:PROMPT_CHARS]
    record.update({"sample": int(sample), "completion": completion[:max_chars],
                   "chars": len(completion), "cut": len(completion) > max_chars,
                   "truncated": bool(truncated)})
    if reward is not None:
        record["reward"] = _rounded(reward)
    fixed = set(record) | {"reward", "advantage"}
    for name, value in values.items():
        record[f"rewards/{name}" if name in fixed else name] = _rounded(value)
    if advantage is not None:
        record["advantage"] = _rounded(advantage)
    return record


# ----------------------------------------------------------------------------- writing a run


class JsonlLog:
    """A run's ``metrics.jsonl`` or ``samples.jsonl``, written a row at a time and flushed at
    once, so a run stopped at any moment keeps every row written before.

    Opening one for a resumed run keeps the rows up to the checkpoint's step (``keep_up_to``)
    and drops the later ones (they are computed again). ``path=None`` writes nothing.
    """

    def __init__(self, path: Path | None, keep_up_to: int | None):
        self.path = path
        self._file = None
        self.kept: list[dict[str, Any]] = []
        if path is None:
            return
        self.kept = [r for r in read_jsonl(path, missing_ok=True)
                     if keep_up_to and r.get("step", 0) <= keep_up_to]
        self._file = path.open("w")
        for record in self.kept:
            self.write(record)

    @property
    def writing(self) -> bool:
        """Whether rows go anywhere (callers skip building rows nobody keeps)."""
        return self._file is not None

    def has_step(self, step: int) -> bool:
        """Whether a row of ``step`` was kept from the run this one resumes."""
        return any(record.get("step") == step for record in self.kept)

    def write_first(self, records: Sequence[dict[str, Any]]) -> None:
        """Write ``records`` before the kept ones (the step-0 evaluation of a run resumed
        from one that had none): the file is rewritten, records first."""
        if self._file is None:
            return
        self._file.close()
        self._file = self.path.open("w")
        for record in [*records, *self.kept]:
            self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def jsonable(value: Any) -> Any:
    """``value`` with every dict key a string and anything JSON cannot hold as its ``repr``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def write_config(out_dir: Path | str, record: dict[str, Any]) -> Path:
    """``<out_dir>/config.json``: how the run was made (the loop's settings, the command...)."""
    path = Path(out_dir) / CONFIG_FILE
    path.write_text(json.dumps(jsonable(record), indent=1) + "\n")
    return path


def write_eval_state(out_dir: Path | str, state: dict[str, Any]) -> Path:
    """``<out_dir>/eval_state.json``: the held-out evaluator's state (its step-0 per-problem
    means), so a resumed run goes on logging ``delta_sem``."""
    path = Path(out_dir) / EVAL_STATE_FILE
    path.write_text(json.dumps(state) + "\n")
    return path


def read_eval_state(out_dir: Path | str) -> dict[str, Any] | None:
    """What :func:`write_eval_state` wrote, or None when the run has no such file."""
    path = Path(out_dir) / EVAL_STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


# ----------------------------------------------------------------------------- reading metrics


def is_eval_stat(key: str) -> bool:
    """True for what is logged beside a held-out mean (its standard errors ``eval/<fn>/sem``
    and ``eval/<fn>/delta_sem``, and ``eval/<fn>/pass@<k>``), which is not a mean score of
    its own."""
    return key.startswith("eval/") and (key.endswith(EVAL_STAT_SUFFIXES) or PASS_AT in key)


def eval_mean_keys(records: StepMetrics) -> list[str]:
    """The held-out means a run logged (``eval/<fn>``, not their standard errors), sorted."""
    return sorted({key for record in records for key in record
                   if key.startswith("eval/") and not is_eval_stat(key)})


def pass_at_keys(records: StepMetrics) -> list[str]:
    """The pass@k figures a run logged (``eval/<fn>/pass@<k>``, not their standard errors),
    sorted by reward and then by k."""
    found = {key for record in records for key in record
             if key.startswith("eval/") and PASS_AT in key and not key.endswith("/sem")}
    return sorted(found, key=lambda key: (key.split(PASS_AT)[0], int(key.split(PASS_AT)[1])))


def training_records(records: StepMetrics) -> list[dict[str, Any]]:
    """The records of training steps: every record except the ``"step": 0`` evaluation row."""
    return [record for record in records if record.get("step") != 0]


def list_runs(root: str | Path | None = None) -> list[Path]:
    """The run folders under ``root`` (default :func:`runs_dir`) with a non-empty metrics file,
    sorted so that ``exp2-k2-cpu`` comes before ``exp2-k16-cpu``."""
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
