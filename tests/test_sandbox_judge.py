"""The judge's verdicts, through ``run_tests``: a test passes only when every value it needs
came back from the child, and the parent's own comparison of them is true.

(The sandbox's statuses, isolation and wire format are in ``tests/test_sandbox.py``; the
hostile completions in ``tests/sandbox/``.)
"""

from __future__ import annotations

import pytest

from grpo_core.sandbox import run_tests
from grpo_core.sandbox.split import plan_tests

EXITS_WHEN_CALLED = "import os\ndef f(x):\n    os._exit(0)\n"


@pytest.mark.parametrize("test", [
    "assert f(1) != 5", "assert not f(1)", "assert f(1) is None or True",
    "assert f(1) not in (1, 2)", "assert f(1) == f(1)",
])
def test_a_candidate_that_exits_before_reporting_fails_even_a_negated_assert(test):
    result = run_tests(EXITS_WHEN_CALLED, [test])
    assert (result.passed, result.verdicts) == (0, (False,))
    assert result.status == "crashed"


def test_a_candidate_that_exits_midway_keeps_what_it_reported_before():
    code = "import os\ndef f(x):\n    if x == 2:\n        os._exit(0)\n    return x\n"
    result = run_tests(code, ["assert f(1) == 1", "assert f(2) != 5", "assert f(3) != 5"])
    assert result.verdicts == (True, False, False)
    assert (result.passed, result.total, result.status) == (1, 3, "crashed")


def test_a_candidate_that_exits_while_loading_fails_every_test():
    result = run_tests("import os\nos._exit(0)\ndef f(x):\n    return x\n",
                       ["assert f(1) != 5", "assert not f(0)"])
    assert (result.passed, result.verdicts) == (0, (False, False))


def test_a_leaf_that_raises_fails_its_test_even_when_negated():
    code = "def f(x):\n    raise ValueError(x)\n"
    result = run_tests(code, ["assert f(1) != 5", "assert not f(1)"])
    assert result.verdicts == (False, False) and result.status == "ok"
    assert "ValueError" in result.detail


@pytest.mark.parametrize("test", [
    "assert f() * 600_000 != ''", "assert 600_000 * f() != ''",
    "assert f() * 500_001 != ''", "assert 500_001 * f() != ''",  # 1_000_002 items
])
def test_a_repetition_too_large_to_judge_fails_with_the_count_on_either_side(test):
    result = run_tests("def f():\n    return 'ab'\n", [test])
    assert result.verdicts == (False,)


@pytest.mark.parametrize("test", [
    "assert f() * 3 == 'ababab'", "assert 3 * f() == 'ababab'",
    "assert f() * 500_000 != ''", "assert 500_000 * f() != ''",  # 1_000_000 items: the limit
])
def test_a_repetition_within_the_limit_is_judged_with_the_count_on_either_side(test):
    assert run_tests("def f():\n    return 'ab'\n", [test]).verdicts == (True,)


def returns(value: str) -> str:
    return f"def f():\n    return {value}\n"


@pytest.mark.parametrize("test", [
    "assert 0 ** f() == 0", "assert 1 ** f() == 1", "assert (-1) ** f() == 1",
    "assert 0 << f() == 0", "assert 0.0 ** f() == 0.0",
])
def test_a_huge_exponent_is_judged_when_the_base_keeps_it_cheap(test):
    assert run_tests(returns("10 ** 6"), [test]).verdicts == (True,)


@pytest.mark.parametrize("test", [
    "assert 2 ** f() != 0", "assert 1 << f() != 0", "assert (-1) << f() != 0",
    "assert 2 ** -f() != 1",
])
def test_a_huge_exponent_or_shift_is_refused(test):
    assert run_tests(returns("10 ** 6"), [test]).verdicts == (False,)


def test_an_exponent_at_the_limit_is_still_judged():
    assert run_tests(returns("10_000"), ["assert 2 ** f() > 0", "assert 1 << f() > 0"]).passed == 2
    assert run_tests(returns("10_001"), ["assert 2 ** f() > 0", "assert 1 << f() > 0"]).passed == 0


@pytest.mark.parametrize(("value", "test"), [
    ("1 + 2j", "assert f() == complex(1, 2)"),
    ("b'ab'", "assert f() == b'ab' and isinstance(f(), bytes)"),
    ("bytearray(b'ab')", "assert f() == bytearray(b'ab') and isinstance(f(), bytearray)"),
    ("float('inf')", "assert f() == math.inf"),
    ("float('nan')", "assert f() != f() and isinstance(f(), float)"),
    ("{1, 2}", "assert f() == {1, 2} and not isinstance(f(), frozenset)"),
    ("frozenset({1})", "assert f() == frozenset({1}) and isinstance(f(), frozenset)"),
    ("{'a': (1, [2])}", "assert f() == {'a': (1, [2])}"),
    ("'h\\u00e9'", "assert f() == 'h\\u00e9'"),
])
def test_values_of_every_kind_reach_the_judge_as_themselves(value, test):
    assert run_tests(returns(value), [test]).verdicts == (True,)


@pytest.mark.parametrize("test", [
    "assert f() + 1 == 2", "assert f() < 1", "assert not f() < 1", "assert f()[5] != 'x'",
])
def test_a_judge_that_raises_on_the_values_fails_its_test(test):
    result = run_tests(returns("'a'"), [test, "assert f() == 'a'"])
    assert result.verdicts == (False, True) and result.status == "ok"


# ---------------------------------------------------------------- which part is the candidate's

@pytest.mark.parametrize(("code", "test"), [
    ("match -3:\n    case abs:\n        pass\n", "assert abs == -3"),
    ("match [1, 2]:\n    case [*sum]:\n        pass\n", "assert sum == [1, 2]"),
    ("match {'a': 1}:\n    case {**max}:\n        pass\n", "assert max == {'a': 1}"),
    ("for len in [7]:\n    pass\n", "assert len == 7"),
])
def test_a_test_reading_a_builtin_name_the_candidate_rebinds_is_failed(code, test):
    # every way of binding a name counts (match captures, loop targets): the judge would
    # otherwise read the candidate's value under a trusted name (issue 18, class 2)
    assert run_tests(code, [test]).verdicts == (False,)


@pytest.mark.parametrize(("code", "test"), [
    ("x = 5\n", "assert [x * 2 for x in range(2)] == [0, 2]"),
    ("x = 5\n", "assert (lambda x: x + 1)(1) == 2"),
    ("x = 5\n", "assert (lambda *, x=1: x)() == 1"),
    ("x = 5\ny = 7\n", "assert [x for x in range(2)] + [y for y in range(2)] == [0, 1, 0, 1]"),
    ("x = 5\ny = 7\n", "assert [x for x in range(2)] == list(map(lambda y: y, range(2)))"),
])
def test_names_bound_inside_the_test_are_the_tests_own(code, test):
    assert run_tests(code, [test]).verdicts == (True,)


@pytest.mark.parametrize(("code", "test"), [
    ("fs = [lambda x: x + 1]\n", "assert fs[0](1) == 2"),
    ("fs = [3]\n", "assert fs[0] == 3"),
    ("def f():\n    return [-2]\n", "assert abs(*f()) == 2"),
    ("class Box:\n    v = 4\n", "assert Box.v == 4"),
])
def test_subscripts_attributes_and_starred_calls_are_judged(code, test):
    assert run_tests(code, [test]).verdicts == (True,)


def test_a_module_the_candidate_rebinds_fails_the_tests_that_read_it():
    code = ("class math:\n    @staticmethod\n    def isclose(a, b):\n        return True\n"
            "def f():\n    return 1\n")
    # a candidate-made math.isclose would say True for anything: the test is failed instead
    assert run_tests(code, ["assert math.isclose(f(), 2)"]).verdicts == (False,)
    honest = "import math\ndef f():\n    return 1\n"
    assert run_tests(honest, ["assert math.isclose(f(), 2)"]).verdicts == (False,)
    assert run_tests(honest, ["assert math.isclose(f(), 1)"]).verdicts == (True,)


@pytest.mark.parametrize(("code", "test"), [
    ("match -3:\n    case abs:\n        pass\n", "assert abs(-3) == 3"),
    ("match [1, 2]:\n    case [*sum]:\n        pass\n", "assert sum([1, 2]) == 3"),
    ("match {'a': 1}:\n    case {**max}:\n        pass\n", "assert max(1, 2) == 2"),
])
def test_a_builtin_the_candidate_rebinds_by_a_match_capture_is_the_candidates_when_called(
        code, test):
    # called as the entry point, the name is the candidate's (here not a function at all):
    # the parent's own builtin never answers for it
    plan = plan_tests(code, "", [test])
    assert [leaf.source for leaf in plan.leaves] == [test[7:test.index(" ==")]]
    assert run_tests(code, [test]).verdicts == (False,)


def test_an_entry_point_named_like_a_call_the_parent_evaluates_is_the_candidates():
    code = "def abs(x):\n    return x\n"  # MBPP-style: the function under test is called abs
    assert run_tests(code, ["assert abs(-3) == -3", "assert abs(-3) == 3"]).verdicts == (
        True, False)


REBINDS_TWO = "def max(x):\n    return 2\ndef sum(x, y=0):\n    return x + y\n"


def test_of_two_rebound_builtins_only_the_innermost_call_is_the_candidates():
    # sum wraps a call of max: sum is not the entry point, so the test is refused
    plan = plan_tests(REBINDS_TWO, "", ["assert sum(max([1, 2]), 3) == 5"])
    assert plan.tests[0].refused == "it rebinds sum, which the test reads"
    assert run_tests(REBINDS_TWO, ["assert sum(max([1, 2]), 3) == 5"]).verdicts == (False,)
    # side by side, both are innermost: both are the candidate's
    assert run_tests(REBINDS_TWO, ["assert sum(5) + max([7]) == 7"]).verdicts == (True,)


def test_a_refused_test_says_which_names_it_rebinds():
    code = REBINDS_TWO + "def f():\n    return 1\n"
    plan = plan_tests(code, "", ["assert sum(f()) == max(1, 2)", "assert f() == 1"])
    assert [split.refused for split in plan.tests] == [
        "it rebinds max, sum, which the test reads", ""]
    assert run_tests(code, ["assert sum(f()) == max(1, 2)", "assert f() == 1"]).verdicts == (
        False, True)


def test_a_trusted_module_imported_under_another_name_is_the_parents():
    code = "import math\ndef f():\n    return math.pi\n"
    tests = ["assert f() == m.pi", "assert f() == pi", "assert f() != m.e"]
    assert run_tests(code, tests, setup_code="import math as m\nfrom math import pi").verdicts \
        == (True, True, True)


def test_a_name_the_candidate_plants_in_a_trusted_module_is_not_the_parents():
    # the setup imports it from the child's (patched) module; the parent has no such name,
    # so the test fails, and nothing raises
    code = "import collections\ncollections.Planted = 5\ndef f():\n    return 5\n"
    result = run_tests(code, ["assert f() == Planted", "assert f() == 5"],
                       setup_code="from collections import Planted")
    assert result.verdicts == (False, True) and result.status == "ok"


def test_a_name_the_setup_imports_may_sit_in_a_part_the_parent_judges():
    # sqrt comes from the setup's trusted import: the comprehension is the test's own, the
    # parent evaluates it (were sqrt unknown, the child would judge it: unsplittable)
    test = "assert [sqrt(i) for i in (0, 1, 4)] == [0, 1, 2] and f() == 1"
    result = run_tests("def f():\n    return 1\n", [test], setup_code="from math import sqrt")
    assert result.verdicts == (True,)


def test_a_name_the_setup_imports_and_the_candidate_defines_is_refused():
    # the candidate's own sqrt under the name the setup imports from math: reading it would
    # put a trusted name's meaning in the candidate's hands, so the test is failed
    code = "def sqrt(x):\n    return 3\ndef f():\n    return 3\n"
    test = "assert f() == sqrt(9)"
    (split,) = plan_tests(code, "from math import sqrt", [test]).tests
    assert split.refused == "it rebinds sqrt, which the test reads"
    assert run_tests(code, [test], setup_code="from math import sqrt").verdicts == (False,)


def test_a_test_that_is_not_python_is_named_in_the_error():
    from grpo_core.sandbox.split import UnsplittableTestError, split_assert

    with pytest.raises(UnsplittableTestError, match=r"not valid Python.*\(<test>, line 1\)"):
        split_assert("assert f(", frozenset())


def test_a_test_the_candidates_bindings_make_unsplittable_is_refused_and_says_why():
    # abs is the entry point here, so its call inside the comprehension is the candidate's:
    # the child would judge the comprehension, so the test is failed instead
    code = "def abs(x):\n    return x\n"
    test = "assert [abs(i) for i in (-1, 1)] == [1, 1]"
    (split,) = plan_tests(code, "", [test]).tests
    assert split.source == test and split.leaves == ()
    assert split.refused.startswith("its bindings make the test unsplittable (")
    assert run_tests(code, [test, "assert abs(-2) == -2"]).verdicts == (False, True)


def test_a_candidate_that_draws_random_numbers_gets_the_same_ones_every_time():
    # the same completion must earn the same reward in every run and every process
    import random

    from grpo_core.sandbox._child import RANDOM_SEED

    first = random.Random(RANDOM_SEED).random()
    code = "import random\nDRAWN = random.random()\ndef f():\n    return DRAWN\n"
    for _ in range(3):
        result = run_tests(code, [f"assert f() == {first!r}", "assert f() != 0.5"])
        assert result.verdicts == (True, True), result
    reseeds = "import random\nrandom.seed(7)\ndef f():\n    return random.random()\n"
    assert run_tests(reseeds, [f"assert f() == {random.Random(7).random()!r}"]).passed == 1
