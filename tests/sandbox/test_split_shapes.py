"""How ``grpo_core.sandbox.split`` cuts a test around the candidate's calls, shape by shape:
which calls become leaves, and what the parent needs to know about each (read in a truth
context, only iterated). Pure: ``plan_tests`` parses, nothing runs."""

from __future__ import annotations

import pytest

from grpo_core.sandbox import run_tests
from grpo_core.sandbox.split import plan_tests

CODE = "def f(x):\n    return x\ndef g(x):\n    return [x, x + 1, x + 2, x + 3]\n"
WRONG = "def f(x):\n    return 0\ndef g(x):\n    return [0, 0, 0, 0]\n"


def leaves(test: str) -> list[tuple[str, bool, bool]]:
    """``(source, truth_context, iterable)`` of each leaf of ``test`` against ``CODE``."""
    (split,) = plan_tests(CODE, "", [test]).tests
    assert not split.refused, split.refused
    return [(leaf.source, leaf.truth_context, leaf.iterable) for leaf in split.leaves]


@pytest.mark.parametrize(("test", "expected"), [
    # every part of a slice is the candidate's call, the slicing the parent's
    ("assert g(1)[f(1):f(3):f(1)] == [2, 3]",
     [("g(1)", False, False), ("f(1)", False, False), ("f(3)", False, False),
      ("f(1)", False, False)]),
    ("assert g(1)[:f(2)] == [1, 2]", [("g(1)", False, False), ("f(2)", False, False)]),
    # an if-expression: its condition is read for its truth, its branches as values
    ("assert (f(1) if f(0) else f(2)) == 2",
     [("f(0)", True, False), ("f(1)", False, False), ("f(2)", False, False)]),
    ("assert bool(f(0)) is False", [("f(0)", True, False)]),
    # zip iterates every argument; sorted only its first, not its keyword arguments
    ("assert list(zip(g(1), g(2)))[0] == (1, 2)", [("g(1)", False, True), ("g(2)", False, True)]),
    ("assert sorted(g(3), reverse=f(True))[0] == 6",
     [("g(3)", False, True), ("f(True)", False, False)]),
    ("assert max(g(1), f(9)) == 9", [("g(1)", False, True), ("f(9)", False, False)]),
    # a set display of candidate calls is the parent's; a method of the decoded value too
    ("assert {f(1), f(2)} == {1, 2}", [("f(1)", False, False), ("f(2)", False, False)]),
    ("assert f('AB').lower() == 'ab'", [("f('AB')", False, False)]),
])
def test_the_leaves_are_the_candidates_calls_and_nothing_around_them(test, expected):
    assert leaves(test) == expected


def test_what_the_parent_does_not_evaluate_on_candidate_values_is_refused():
    (split,) = plan_tests(CODE, "", ["assert {*g(1)} == {1, 2, 3, 4}"]).tests
    assert split.refused and "Set" in split.refused and split.leaves == ()
    (split,) = plan_tests(CODE, "", ["assert f('a').replace('a', 'b') == 'b'"]).tests
    assert split.refused  # replace is not among the safe methods: it can grow its input


@pytest.mark.parametrize("test", [
    "assert g(1)[f(1):f(3):f(1)] == [2, 3]",
    "assert (f(1) if f(0) else f(2)) == 2",
    "assert list(zip(g(1), g(2)))[0] == (1, 2)",
    "assert f('AB').lower() == 'ab'",
    "assert {f(1), f(2)} == {1, 2}",
])
def test_the_parent_judges_each_shape_right(test):
    assert run_tests(CODE, [test]).fraction == 1.0
    assert run_tests(WRONG, [test]).fraction == 0.0
