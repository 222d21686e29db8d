"""The course's own problem set (``grpo_core/data/problems.jsonl``) as evidence: every
reference passes, every listed wrong answer fails, no constant or echo earns half the
asserts, and the fixed training / held-out split is what ``data/README.md`` says.

All sandbox runs happen in one batched ``unit_test_reward`` call (a few seconds).
"""

from __future__ import annotations

import ast
import math
from collections import Counter

import pytest

import grpo_core.mbpp as mbpp
from grpo_core.rewards import unit_test_reward

PROBLEMS = mbpp.read_problems()
BY_ID = {row["task_id"]: row for row in PROBLEMS}

# The first 48 problems, by task id: their ids and entry points never change.
FIRST_48 = [
    "add", "subtract", "multiply", "square", "double", "half", "is_even", "is_positive",
    "absolute", "larger", "smaller", "first_item", "last_item", "string_length", "shout",
    "reverse_string", "total", "count_items", "greet", "join_words", "factorial", "count_vowels",
    "is_palindrome", "digit_sum", "count_value", "mean", "to_fahrenheit", "biggest",
    "drop_negatives", "squares_up_to", "word_count", "is_leap_year", "fizzbuzz", "keep_even",
    "title_words", "fibonacci", "is_prime", "gcd", "unique_in_order", "second_largest",
    "letter_counts", "flatten_once", "merge_sorted", "are_anagrams", "running_total", "to_binary",
    "longest_word", "rotate_left",
]
# the sizes data/README.md documents
TRAIN_SIZE, HELD_OUT_SIZE = 78, 115

# What a completion that ignores the problem returns: its first argument, or a constant.
TRIVIAL = {"first argument": "args[0]", "None": "None", "0": "0", "1": "1", "-1": "-1",
           "True": "True", "False": "False", "''": "''", "[]": "[]", "{}": "{}"}

# Wrong answers that passed every assert before the six problems were strengthened (written
# here, independent of the file's ``wrong`` column).
STRENGTHENED = {
    23: "def is_palindrome(s):\n    return s.lower() == s.lower()[::-1]\n",  # case
    35: "def title_words(sentence):\n    return sentence.title()\n",  # several spaces
    37: "def is_prime(n):\n"  # calls 25 and 4 prime
        "    return n > 1 and all(n % k for k in range(2, int(n ** 0.5)))\n",
    41: "def letter_counts(s):\n"  # letters only
        "    return {ch: s.count(ch) for ch in s if ch.isalpha()}\n",
    42: "def flatten_once(lists):\n"  # flattens every level
        "    out = []\n    for item in lists:\n        if isinstance(item, list):\n"
        "            out.extend(flatten_once(item))\n        else:\n            out.append(item)\n"
        "    return out\n",
    44: "def are_anagrams(a, b):\n    return set(a.lower()) == set(b.lower())\n",  # multiplicity
}


def _trivial_code(entry: str, value: str) -> str:
    return f"def {entry}(*args, **kwargs):\n    return {value}\n"


@pytest.fixture(scope="module")
def scores() -> dict[tuple[int, str, str], float]:
    """Every (task id, kind, name) -> its score: the references, the listed wrong answers,
    the trivial answers and the known wrong answers of the strengthened six, in one batch."""
    jobs = []
    for row in PROBLEMS:
        jobs.append(((row["task_id"], "reference", ""), row["code"]))
        jobs += [((row["task_id"], "wrong", str(i)), code) for i, code in enumerate(row["wrong"])]
        jobs += [((row["task_id"], "trivial", name), _trivial_code(row["entry_point"], value))
                 for name, value in TRIVIAL.items()]
    jobs += [((task_id, "strengthened", ""), code) for task_id, code in STRENGTHENED.items()]
    values = unit_test_reward([f"```python\n{code}```" for _, code in jobs],
                              tests=[BY_ID[key[0]]["tests"] for key, _ in jobs])
    return {key: value for (key, _), value in zip(jobs, values, strict=True)}


# ---------------------------------------------------------------- the rows

def test_the_set_is_large_with_stable_ids_and_unique_names():
    assert len(PROBLEMS) >= 170
    assert [row["task_id"] for row in PROBLEMS] == list(range(1, len(PROBLEMS) + 1))
    assert [row["entry_point"] for row in PROBLEMS[:48]] == FIRST_48
    assert len({row["entry_point"] for row in PROBLEMS}) == len(PROBLEMS)


@pytest.mark.parametrize("row", PROBLEMS, ids=[row["entry_point"] for row in PROBLEMS])
def test_each_row_has_tests_wrong_answers_and_a_split(row):
    assert row["text"].startswith(f"Write a function {row['entry_point']}(")
    assert 3 <= len(row["tests"]) <= 5
    assert all(mbpp.entry_point(test) == row["entry_point"] for test in row["tests"])
    assert not row["tests"][0].startswith("assert (")  # the one the prompt shows: a plain call
    assert row["setup_code"] == "" and row["difficulty"] in ("very easy", "easy", "medium")
    assert row["split"] in mbpp.COURSE_SPLITS
    assert 1 <= len(row["wrong"]) <= 3 and len(set(row["wrong"])) == len(row["wrong"])
    for code in row["wrong"]:
        defined = [node.name for node in ast.parse(code).body if isinstance(node, ast.FunctionDef)]
        assert defined == [row["entry_point"]], code
        assert code != row["code"]


# ---------------------------------------------------------------- scores in the sandbox

def _failures(scores: dict, kind: str, bad) -> list[tuple[int, str, str, float]]:
    return [(task_id, BY_ID[task_id]["entry_point"], name, value)
            for (task_id, k, name), value in scores.items() if k == kind and bad(value)]


def test_every_reference_scores_one(scores):
    assert _failures(scores, "reference", lambda value: value != 1.0) == []


def test_every_listed_wrong_answer_fails_an_assert(scores):
    assert _failures(scores, "wrong", lambda value: value >= 1.0) == []


def test_no_trivial_answer_earns_half_the_asserts(scores):
    """Returning the first argument, None, 0, 1, -1, True, False, '', [] or {} passes fewer
    than half the asserts of every problem (so the reward separates it from a real try)."""
    assert _failures(scores, "trivial", lambda value: value >= 0.5) == []


def test_the_strengthened_six_catch_their_known_wrong_answers(scores):
    assert _failures(scores, "strengthened", lambda value: value >= 1.0) == []
    assert "upper and lower case" in BY_ID[23]["text"]
    assert "one level only" in BY_ID[42]["text"]
    assert "spaces and punctuation included" in BY_ID[41]["text"]


# ---------------------------------------------------------------- the split

def test_the_split_follows_its_rule_and_sizes():
    train, held_out = mbpp.course_split()
    assert (len(train), len(held_out)) == (TRAIN_SIZE, HELD_OUT_SIZE)
    train_ids, held_ids = {r["task_id"] for r in train}, {r["task_id"] for r in held_out}
    assert not train_ids & held_ids and train_ids | held_ids == set(BY_ID)
    assert all(row["split"] == mbpp.course_split_of(row["task_id"]) for row in PROBLEMS)
    assert [r["task_id"] for r in train] == sorted(train_ids)  # file order kept
    # every difficulty on both sides, in about the same proportions
    for part in (train, held_out):
        counts = Counter(row["difficulty"] for row in part)
        for difficulty, total in Counter(row["difficulty"] for row in PROBLEMS).items():
            assert math.isclose(counts[difficulty] / len(part), total / len(PROBLEMS),
                                abs_tol=0.05), (difficulty, counts)


def test_the_held_out_part_is_big_enough_for_a_small_standard_error():
    """A pass rate p over n problems has standard error at most sqrt(p (1 - p) / n): 0.03 or
    less on the held-out problems when p is at most 0.11 (or at least 0.89), 0.047 in the
    worst case (p = 0.5)."""
    n = len(mbpp.course_split()[1])
    assert math.sqrt(0.11 * 0.89 / n) <= 0.03 and math.sqrt(0.25 / n) < 0.047


def test_course_split_takes_a_subset_and_refuses_rows_without_a_split():
    easy = mbpp.read_problems(difficulty="easy")
    train, held_out = mbpp.course_split(easy)
    assert len(train) + len(held_out) == len(easy) and train and held_out
    with pytest.raises(ValueError, match="split None"):
        mbpp.course_split([{"task_id": 7, "text": "no split"}])


def test_the_extra_columns_stay_out_of_training_rows_and_the_dataset():
    from grpo_core.experiments import code_row

    row = code_row(PROBLEMS[0])
    assert "wrong" not in row and "split" not in row and "code" not in row
    columns = mbpp.load_problems(difficulty="medium").column_names
    assert set(mbpp.COLUMNS) | {"difficulty", "split"} == set(columns)
