"""Coding problems for experiment 2: MBPP, and the course's own easier set in ``data/``.

Every loader returns rows with the same columns, ready for ``unit_test_reward``:
``task_id`` (int), ``text`` (the problem statement), ``code`` (a reference solution),
``tests`` (assert statements), ``setup_code`` (runs after the solution, before the tests),
``challenge_tests`` (MBPP's extra asserts; empty elsewhere) and ``entry_point`` (the name of
the function the tests call). ``format_code_prompt`` turns a row into the prompt the model sees.
The course's problems also carry a fixed ``train`` / ``held_out`` split: ``course_split``.

MBPP (Austin et al. 2021, arXiv:2108.07732, CC-BY-4.0) comes from the Hugging Face Hub
(``google-research-datasets/mbpp``, configs ``full`` and ``sanitized``) through ``datasets``,
or from a local copy of the upstream files (``mbpp.jsonl``, ``sanitized-mbpp.json``), with the
paper's splits by task id. ``datasets`` is imported only by the functions that build a
``datasets.Dataset``.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grpo_core.run_files import PROBLEMS_FILE, REPO_ROOT

HUB_ID = "google-research-datasets/mbpp"
ENV_DIR = "GRPO_MBPP_DIR"
FILE_NAMES = {"full": "mbpp.jsonl", "sanitized": "sanitized-mbpp.json"}
# the paper's splits, by task id (the sanitized subset uses the same ranges)
SPLITS = {"prompt": (1, 10), "test": (11, 510), "validation": (511, 600), "train": (601, 974)}
COLUMNS = ("task_id", "text", "code", "tests", "setup_code", "challenge_tests", "entry_point")

# where the course's checks keep a local copy: a ``shared/mbpp`` folder beside the clone
SHARED_MBPP = None if REPO_ROOT is None else REPO_ROOT.parent / "shared" / "mbpp"


class MBPPUnavailableError(RuntimeError):
    """Neither the Hugging Face Hub nor a local copy of MBPP could be read."""


# ---------------------------------------------------------------- rows

def split_of(task_id: int) -> str:
    """The paper's split for an MBPP task id (1-10 prompt, 11-510 test, 511-600 validation,
    601-974 train)."""
    for name, (first, last) in SPLITS.items():
        if first <= task_id <= last:
            return name
    raise ValueError(f"MBPP task ids run from 1 to 974, not {task_id}")


def entry_point(test: str) -> str:
    """The name of the first function a test calls (``"add"`` for ``assert add(1, 2) == 3``)."""
    for node in ast.walk(ast.parse(test.strip())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id not in _WRAPPERS:
            return node.func.id
    return ""


_WRAPPERS = frozenset({"set", "sorted", "list", "tuple", "int", "float", "str", "abs", "round",
                       "len", "isinstance"})  # builtins that tests wrap around the call


def normalize(record: dict[str, Any], config: str) -> dict[str, Any]:
    """One upstream or Hub record (``full`` or ``sanitized`` layout) in the course's columns."""
    if config == "full":
        text, setup = record["text"], record["test_setup_code"]
        challenge = list(record.get("challenge_test_list") or [])
    elif config == "sanitized":
        text, setup, challenge = record["prompt"], "\n".join(record["test_imports"]), []
    else:
        raise ValueError(f"config must be 'full' or 'sanitized', not {config!r}")
    tests = list(record["test_list"])
    return {"task_id": int(record["task_id"]), "text": text,
            "code": record["code"].replace("\r\n", "\n"), "tests": tests,
            "setup_code": setup.replace("\r\n", "\n"), "challenge_tests": challenge,
            "entry_point": entry_point(tests[0])}


def read_mbpp_file(path: str | os.PathLike[str], config: str | None = None,
                   split: str | None = None) -> list[dict[str, Any]]:
    """Rows from an upstream MBPP file (no ``datasets`` needed), optionally one split.

    ``config`` defaults from the file: ``.jsonl`` is the full set, a JSON array the
    sanitized one.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if config is None:
        config = "sanitized" if text.lstrip().startswith("[") else "full"
    records = json.loads(text) if config == "sanitized" else \
        [json.loads(line) for line in text.splitlines() if line.strip()]
    rows = [normalize(record, config) for record in records]
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    return [row for row in rows if split is None or split_of(row["task_id"]) == split]


def local_mbpp_file(config: str = "full",
                    directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The local copy to use: ``directory``, else ``$GRPO_MBPP_DIR``, else a ``shared/mbpp``
    folder next to the repository (where the course's checks keep it). None if absent."""
    candidates = [directory, os.environ.get(ENV_DIR), SHARED_MBPP]
    for folder in candidates:
        if folder:
            path = Path(folder)
            path = path if path.is_file() else path / FILE_NAMES[config]
            if path.is_file():
                return path
    return None


# ---------------------------------------------------------------- datasets

def load_mbpp(split: str = "train", config: str = "full", *,
              path: str | os.PathLike[str] | None = None, source: str = "auto") -> Any:
    """MBPP as a ``datasets.Dataset`` with the course's columns, for one of the paper's splits.

    ``source``: ``"local"`` (``path`` or ``local_mbpp_file``), ``"hub"``, or ``"auto"``
    (a local copy when one is found, else the Hub). Raises ``MBPPUnavailableError`` saying
    what was tried when neither can be read.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    if config not in FILE_NAMES:
        raise ValueError(f"config must be 'full' or 'sanitized', not {config!r}")
    local = local_mbpp_file(config, path) if source in ("auto", "local") else None
    if local is not None:
        return rows_to_dataset(read_mbpp_file(local, config, split))
    if source == "local":
        raise MBPPUnavailableError(_unavailable_message(config, path, hub_error=None))
    try:
        return _load_from_hub(config, split)
    except Exception as error:  # no network, no datasets, a Hub outage: say so, clearly
        raise MBPPUnavailableError(_unavailable_message(config, path, error)) from error


def _load_from_hub(config: str, split: str) -> Any:
    import datasets  # heavy: imported only when the Hub is actually used

    hub = datasets.load_dataset(HUB_ID, config, split=split)
    return hub.map(lambda record: normalize(record, config), remove_columns=hub.column_names)


def _unavailable_message(config: str, path: Any, hub_error: Exception | None) -> str:
    tried = f"path={path!r}, ${ENV_DIR}={os.environ.get(ENV_DIR)!r} and {SHARED_MBPP}"
    hub = f"the Hub ({HUB_ID!r}) failed: {type(hub_error).__name__}: {hub_error}" \
        if hub_error is not None else "the Hub was not tried (source='local')"
    return (f"MBPP ({config}) is not available: no local {FILE_NAMES[config]} was found "
            f"(looked at {tried}), and {hub}. Download the upstream file and pass its folder "
            f"as path=... or set {ENV_DIR}, or connect to the Hugging Face Hub.")


def rows_to_dataset(rows: Iterable[dict[str, Any]]) -> Any:
    """A ``datasets.Dataset`` from rows (columns in the course's order)."""
    import datasets

    rows = list(rows)
    if not rows:
        return datasets.Dataset.from_dict({column: [] for column in COLUMNS})
    return datasets.Dataset.from_list(rows)


# ---------------------------------------------------------------- the course's own problems

def read_problems(path: str | os.PathLike[str] | None = None,
                  difficulty: str | None = None) -> list[dict[str, Any]]:
    """The course's problem set (``grpo_core/data/problems.jsonl``) as rows, optionally one difficulty
    (``"very easy"``, ``"easy"``, ``"medium"``). No ``datasets`` needed.

    Each row has the MBPP ``COLUMNS`` first, then the file's own: ``difficulty``, ``split``
    (``"train"`` or ``"held_out"``, see ``course_split``) and ``wrong`` (plausible wrong
    solutions that must fail the tests; the tests of the problem set read it, nothing else).
    """
    rows = []
    with open(path or PROBLEMS_FILE, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = {"challenge_tests": [], **json.loads(line)}
                ordered = {column: row[column] for column in COLUMNS}
                rows.append({**ordered, **row})
    return [row for row in rows if difficulty is None or row["difficulty"] == difficulty]


# The course's fixed split: a task id goes to training when it leaves 1 or 3 modulo 5 (two
# ids in every five), else it is held out. The ids run in blocks of difficulty, so every
# difficulty is in both parts. ``data/README.md`` gives the sizes.
COURSE_SPLITS = ("train", "held_out")
TRAIN_REMAINDERS = (1, 3)


def course_split_of(task_id: int) -> str:
    """``"train"`` or ``"held_out"`` for one of the course's task ids (the rule behind the
    ``split`` column of ``problems.jsonl``)."""
    return "train" if task_id % 5 in TRAIN_REMAINDERS else "held_out"


def course_split(rows: Iterable[dict[str, Any]] | None = None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The course's problems as (training rows, held-out rows), by their ``split`` column.

    ``rows`` defaults to every problem (``read_problems()``); pass a subset (one difficulty,
    say) to split just those. The split is fixed in the data file, so a run that trains on
    the first part never sees the second: evaluate on the held-out rows for evidence that
    what was learned carries over to unseen problems. Rows keep their order; a row
    without a valid ``split`` is an error, not a silent guess.
    """
    rows = read_problems() if rows is None else list(rows)
    parts: dict[str, list[dict[str, Any]]] = {name: [] for name in COURSE_SPLITS}
    for row in rows:
        name = row.get("split")
        if name not in parts:
            raise ValueError(f"problem {row.get('task_id')!r} has split {name!r}, not one of "
                             f"{COURSE_SPLITS}")
        parts[name].append(row)
    return parts["train"], parts["held_out"]


def load_problems(path: str | os.PathLike[str] | None = None,
                  difficulty: str | None = None) -> Any:
    """``read_problems`` as a ``datasets.Dataset``: the columns of ``load_mbpp``, plus
    ``difficulty`` and ``split`` (the ``wrong`` answers stay out of the dataset)."""
    return rows_to_dataset({key: value for key, value in row.items() if key != "wrong"}
                           for row in read_problems(path, difficulty))


# ---------------------------------------------------------------- prompts

def format_code_prompt(text: str, tests: list[str], shown: int = 1) -> str:
    """The prompt for one problem: the statement and ``shown`` of its tests.

    One visible test is enough for the model to learn the function's name and signature;
    the reward scores *all* tests, so a completion that only hard-codes the visible one
    earns just that one.
    """
    visible = "\n".join(test.strip() for test in tests[:shown])
    noun = "this test" if shown == 1 else "these tests"
    return (f"{text.strip()}\nYour code should pass {noun}:\n\n{visible}\n\n"
            "Answer with the complete Python function in a ```python code block.")


def with_prompts(dataset: Any, shown: int = 1, as_messages: bool = False) -> Any:
    """Add a ``prompt`` column (a string, or one user message for chat templates)."""
    def add_prompt(row: dict[str, Any]) -> dict[str, Any]:
        """The prompt column for one row."""
        prompt = format_code_prompt(row["text"], row["tests"], shown)
        return {"prompt": [{"role": "user", "content": prompt}] if as_messages else prompt}

    return dataset.map(add_prompt)
