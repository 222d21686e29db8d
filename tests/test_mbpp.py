"""MBPP and the course's own problem set: loading, splits, prompts, and every reference
solution scoring 1.0 in the sandbox.

The MBPP files are found in ``$GRPO_MBPP_DIR`` or in ``../shared/mbpp`` next to the
repository; the tests that need them are skipped, with that reason, when neither exists.
Nothing here contacts the Hugging Face Hub.
"""

from __future__ import annotations

import ast
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import grpo_core.mbpp as mbpp
from grpo_core.sandbox import run_tests

REFERENCE_TIMEOUT_S = 30.0  # MBPP task 123 alone takes 3-5 s; the others milliseconds
# Some MBPP solutions hold invalid escape sequences; the sandbox parses them quietly, but pytest
# turns every warning back on inside a test: a DeprecationWarning up to Python 3.11, a
# SyntaxWarning since 3.12 (Colab's 3.13).
quiet_escapes = pytest.mark.filterwarnings(
    "ignore:invalid escape sequence:DeprecationWarning",
    "ignore:invalid escape sequence:SyntaxWarning")


def _mbpp_dir() -> Path | None:
    for folder in (os.environ.get(mbpp.ENV_DIR), mbpp.SHARED_MBPP):
        if folder and (Path(folder) / "mbpp.jsonl").is_file():
            return Path(folder)
    return None


MBPP_DIR = _mbpp_dir()
needs_mbpp = pytest.mark.skipif(
    MBPP_DIR is None, reason=f"no local MBPP: set {mbpp.ENV_DIR} or put the upstream files in "
                             "../shared/mbpp")


def _all_score_one(rows: list[dict]) -> list[tuple[int, str, str]]:
    """Run every row's reference in parallel; the rows that did not score 1.0."""
    def score(row):
        tests = row["tests"] + row["challenge_tests"]
        return run_tests(row["code"], tests, setup_code=row["setup_code"],
                         timeout_s=REFERENCE_TIMEOUT_S)

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(score, rows))
    return [(row["task_id"], r.status, r.detail) for row, r in zip(rows, results, strict=True)
            if r.fraction != 1.0]


# ---------------------------------------------------------------- MBPP

def test_split_boundaries_follow_the_paper():
    assert [mbpp.split_of(i) for i in (1, 10, 11, 510, 511, 600, 601, 974)] == [
        "prompt", "prompt", "test", "test", "validation", "validation", "train", "train"]
    with pytest.raises(ValueError, match="from 1 to 974, not 975"):
        mbpp.split_of(975)


@needs_mbpp
@quiet_escapes
@pytest.mark.parametrize(("config", "sizes"), [
    ("full", {"prompt": 10, "test": 500, "validation": 90, "train": 374}),
    ("sanitized", {"prompt": 7, "test": 257, "validation": 43, "train": 120}),
])
def test_local_files_load_with_the_papers_splits(config, sizes):
    path = MBPP_DIR / mbpp.FILE_NAMES[config]
    assert {split: len(mbpp.read_mbpp_file(path, split=split)) for split in sizes} == sizes
    dataset = mbpp.load_mbpp("validation", config, path=MBPP_DIR, source="local")
    assert dataset.column_names == list(mbpp.COLUMNS) and len(dataset) == sizes["validation"]
    row = dataset[0]
    assert row["entry_point"] and row["entry_point"] in row["tests"][0]
    assert "\r" not in row["code"]


@needs_mbpp
def test_sanitized_test_imports_become_setup_code():
    rows = mbpp.read_mbpp_file(MBPP_DIR / "sanitized-mbpp.json")
    with_imports = [row for row in rows if row["setup_code"]]
    assert len(with_imports) == 13 and {row["setup_code"] for row in with_imports} == {
        "import math"}


def test_no_hub_and_no_local_copy_is_a_clear_error(monkeypatch, tmp_path):
    def offline(config, split):
        raise ConnectionError("no route to huggingface.co")

    monkeypatch.setattr(mbpp, "_load_from_hub", offline)
    monkeypatch.setattr(mbpp, "local_mbpp_file", lambda config, directory=None: None)
    with pytest.raises(mbpp.MBPPUnavailableError) as error:
        mbpp.load_mbpp("train", path=tmp_path)
    message = str(error.value)
    assert "no route to huggingface.co" in message and mbpp.ENV_DIR in message
    with pytest.raises(mbpp.MBPPUnavailableError, match="was not tried"):
        mbpp.load_mbpp("train", source="local")


def test_the_prompt_shows_the_problem_and_one_test():
    tests = ["assert add(1, 2) == 3", "assert add(5, 5) == 10", "assert add(0, 0) == 0"]
    prompt = mbpp.format_code_prompt("Write a function add(a, b).", tests)
    assert prompt.startswith("Write a function add(a, b).")
    assert tests[0] in prompt and tests[1] not in prompt and tests[2] not in prompt
    assert "```python" in prompt


@needs_mbpp
@quiet_escapes
def test_every_mbpp_reference_solution_scores_one():
    rows = mbpp.read_mbpp_file(MBPP_DIR / "mbpp.jsonl")
    assert len(rows) == 974
    assert _all_score_one(rows) == []


@needs_mbpp
@quiet_escapes
def test_every_sanitized_mbpp_reference_solution_scores_one():
    rows = mbpp.read_mbpp_file(MBPP_DIR / "sanitized-mbpp.json")
    assert len(rows) == 427
    assert _all_score_one(rows) == []


# ---------------------------------------------------------------- the course's problems

PROBLEMS = mbpp.read_problems()


def test_the_problem_set_is_large_and_graded():
    assert len(PROBLEMS) >= 40
    assert [row["task_id"] for row in PROBLEMS] == list(range(1, len(PROBLEMS) + 1))
    assert {row["difficulty"] for row in PROBLEMS} == {"very easy", "easy", "medium"}
    assert len({row["entry_point"] for row in PROBLEMS}) == len(PROBLEMS)
    assert any(row["entry_point"] == "add" for row in PROBLEMS)


@pytest.mark.parametrize("row", PROBLEMS, ids=[row["entry_point"] for row in PROBLEMS])
def test_each_problem_is_well_formed(row):
    assert list(row)[:len(mbpp.COLUMNS)] == list(mbpp.COLUMNS)
    assert len(row["tests"]) >= 3
    assert all(mbpp.entry_point(test) == row["entry_point"] for test in row["tests"])
    assert f"{row['entry_point']}(" in row["text"]  # the statement names the function
    defined = [node.name for node in ast.parse(row["code"]).body
               if isinstance(node, ast.FunctionDef)]
    assert row["entry_point"] in defined


def test_every_problem_reference_solution_scores_one():
    assert _all_score_one(PROBLEMS) == []


@needs_mbpp
def test_the_problem_texts_are_our_own():
    texts = {row["text"].strip().lower() for row in mbpp.read_mbpp_file(MBPP_DIR / "mbpp.jsonl")}
    assert not texts & {row["text"].strip().lower() for row in PROBLEMS}


def test_load_problems_gives_a_dataset_with_the_mbpp_columns():
    dataset = mbpp.load_problems(difficulty="very easy")
    assert set(mbpp.COLUMNS) <= set(dataset.column_names)
    assert len(dataset) == sum(row["difficulty"] == "very easy" for row in PROBLEMS)
    prompted = mbpp.with_prompts(dataset, as_messages=True)
    assert prompted[0]["prompt"][0]["role"] == "user"
