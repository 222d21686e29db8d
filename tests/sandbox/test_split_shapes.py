"""How ``grpo_core.sandbox.split`` cuts a test around the candidate's calls, shape by shape:
which calls become leaves, and what the parent needs to know about each (read in a truth
context, only iterated). Pure: ``plan_tests`` parses, nothing runs."""

from __future__ import annotations

import ast
import types

import pytest

from grpo_core.sandbox import run_tests
from grpo_core.sandbox.split import plan_tests, setup_for_child

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
    # a join, a method of the test's own string, only iterates its argument
    ("assert '-'.join(f('ab')) == 'a-b'", [("f('ab')", False, True)]),
    # the items of a list or tuple display are values; a starred one is only iterated
    ("assert [f(1), f(2)] == [1, 2]", [("f(1)", False, False), ("f(2)", False, False)]),
    ("assert (f(1), not f(0)) == (1, True)", [("f(1)", False, False), ("f(0)", True, False)]),
    ("assert [*g(1), f(5)] == [1, 2, 3, 4, 5]", [("g(1)", False, True), ("f(5)", False, False)]),
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
    "assert '-'.join(f('ab')) == 'a-b'",
    "assert [*g(1), f(5)] == [1, 2, 3, 4, 5]",
])
def test_the_parent_judges_each_shape_right(test):
    assert run_tests(CODE, [test]).fraction == 1.0
    assert run_tests(WRONG, [test]).fraction == 0.0


def test_a_refused_test_carries_a_judge_that_fails_it():
    """Whatever refuses a test (a rebound trusted name, a name nobody binds), its judge is
    still compiled code that evaluates to False: a caller that forgot ``refused`` would fail
    the test, not crash or pass it."""
    for code, test in ((CODE + "abs = f\n", "assert abs(g(1)[0]) == 1"),
                       (CODE, "assert f(u) == w")):
        (split,) = plan_tests(code, "", [test]).tests
        assert split.refused and split.leaves == ()
        assert isinstance(split.judge, types.CodeType) and eval(split.judge, {}) is False


def test_names_nobody_binds_are_listed_in_the_reason():
    """The reason a test is refused for names neither side binds names each of them,
    sorted, as a comma-separated list."""
    (split,) = plan_tests(CODE, "", ["assert f(w) == u"]).tests
    assert "u, w" in split.refused


def test_a_trusted_module_imported_under_another_name_is_called_by_its_own_name():
    """Under ``import math as m`` (setup code), ``m.sqrt(f(x))`` is the parent's
    ``math.sqrt``, allowed on the candidate's value; so is ``c.Counter`` for collections."""
    setup = "import math as m\nimport collections as c\n"
    for test in ("assert m.sqrt(f(4)) == 2", "assert c.Counter(g(1))[2] == 1"):
        (split,) = plan_tests(CODE, setup, [test]).tests
        assert not split.refused, split.refused
        assert run_tests(CODE, [test], setup_code=setup).fraction == 1.0
        assert run_tests(WRONG, [test], setup_code=setup).fraction == 0.0


def test_the_childs_setup_drops_only_single_name_bindings_of_the_parents_values():
    """Only ``expected = ...`` goes (a plain value the parent keeps); an import, another
    name's binding, a tuple target and an annotated binding stay, in order."""
    setup = ("import math\nlimit = 3\nexpected = [0, 1, 4]\na, b = 1, 2\n"
             "x: int = 5\ndef helper():\n    return limit\n")
    kept = ("import math\nlimit = 3\na, b = 1, 2\n"
            "x: int = 5\ndef helper():\n    return limit\n")
    assert setup_for_child(setup, frozenset({"expected"})) == ast.unparse(ast.parse(kept)) + "\n"
    assert setup_for_child(setup, frozenset()) == setup
