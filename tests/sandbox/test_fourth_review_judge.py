"""The fourth review's judging classes (issue 50, docs/sandbox.md "The fourth review",
"Judging"): A, honest values the parent's budgets refused; B, names the setup binds judged in
the child; C, identity lost across the decode boundary; D, work in the parent the guards did
not see; E, a name setup and solution both import refused. Each attack scores 0 or is stopped
within bounds, and an honest control scores 1.0."""

from __future__ import annotations

import time

import pytest
from sandbox_attacks import time_scale

from grpo_core.sandbox import UnsplittableTestError, judge, run_tests
from grpo_core.sandbox.judge import (
    MAX_ITEMS,
    _Budget,
    check_arguments,
    count_calls,
    decode_value,
    parse_records,
    weigh_arguments,
)
from grpo_core.sandbox.split import plan_tests


def cpu(function) -> tuple[float, object]:
    """The parent's CPU seconds for ``function()`` (the child's are another process's)."""
    started = time.process_time()
    result = function()
    return time.process_time() - started, result


# --- A. budgets that accept every honest value within the documented limits -------------------

SQUARES = "def squares(n):\n    return [i * i for i in range(n)]\n"
SQUARE_TESTS = ["assert squares(250000) == [i * i for i in range(250000)]",
                "assert squares(3) == [0, 1, 4]", "assert squares(10)[-1] == 81"]


def test_a_quarter_million_squares_score_like_plain_python():
    """2.8 MB of records, within the 4 MiB and million-value budgets (the 4 MiB hold all of
    a completion's records: one such list per completion): before, 100 000 values refused it
    and the honest function scored 0.67."""
    used, result = cpu(lambda: run_tests(SQUARES, SQUARE_TESTS))
    assert (result.fraction, result.status) == (1.0, "ok"), result
    assert used < 2.0 * time_scale(), used  # decoding 250 001 values and comparing them: about 0.1-0.3 s
    wrong = SQUARES.replace("i * i", "i * i + (i == 249999)")
    assert run_tests(wrong, SQUARE_TESTS).verdicts == (False, True, True)


def _record(count: int) -> bytes:
    return b'R\nK\n[0,"v",[' + b",".join([b"7"] * count) + b"]]\nD\n"


def test_the_value_budget_admits_exactly_a_million_values_and_no_more():
    """A list is one value and each item one more: ``MAX_ITEMS - 1`` items is the whole
    budget, one more item is refused, and either costs the parent well under a second."""
    assert MAX_ITEMS == 1_000_000  # what docs/sandbox.md says
    plan = plan_tests("def f():\n    return []\n", "", ["assert f() != 1"])
    inside = _record(MAX_ITEMS - 1)
    assert len(inside) < 4 << 20  # within the byte budget too
    used, records = cpu(lambda: parse_records(inside, plan))
    assert len(records.values[0]) == MAX_ITEMS - 1 and used < 2.0 * time_scale(), used
    used, records = cpu(lambda: parse_records(_record(MAX_ITEMS), plan))
    assert records.values == {} and records.malformed == 1 and used < 1.0 * time_scale(), used


@pytest.mark.parametrize("tag", ["y", "a"])
def test_bytes_are_charged_one_value_per_16_bytes_against_the_same_budget(tag):
    """bytes and bytearray arrive as hex: beside a list that fills the budget but for a
    thousand values, 900 units of 16 bytes fit and 1100 do not (at one value per 32 bytes,
    1100 would)."""
    plan = plan_tests("def f():\n    return []\n", "", ["assert f() != 1"])
    sevens = b",".join([b"7"] * (MAX_ITEMS - 1 - 1000))
    for units, fits in ((900, True), (1100, False)):
        blob = b'{"' + tag.encode() + b'":"' + b"00" * (16 * units) + b'"}'
        records = parse_records(b'R\nK\n[0,"v",[' + blob + b"," + sevens + b"]]\nD\n", plan)
        assert (records.values != {}) is fits, (tag, units)


def test_a_full_budget_list_scores_through_the_sandbox_and_one_more_item_fails():
    code = "def f(n):\n    return [7] * n\n"
    inside = f"assert len(f({MAX_ITEMS - 1})) == {MAX_ITEMS - 1}"  # a guarded call too
    outside = f"assert len(f({MAX_ITEMS})) == {MAX_ITEMS}"
    used, result = cpu(lambda: run_tests(code, [inside]))
    assert result.fraction == 1.0 and used < 3.0 * time_scale(), (result, used)
    used, result = cpu(lambda: run_tests(code, [outside]))
    assert (result.fraction, result.status) == (0.0, "ok") and used < 2.0 * time_scale(), (result, used)


@pytest.mark.parametrize("payload", [
    [7] * 999_999,  # the densest shape: two units of weight per value
    [{"t": [1, 2]}] * 300_000,
    {"d": [[k, "6" * 40] for k in range(200_000)]},
    ["61" * 500] * 1000,  # text: one value per 16 bytes, as weigh counts it
    [int("9" * 40)] * 300_000,  # bits: one value per 64, as weigh counts it
    [int("9" * 4300)] * 900,
])
def test_a_guard_takes_every_value_the_decoder_admits(payload):
    """Whatever shape fills the decoder's budget weighs at most twice what it was charged,
    so a guarded call (``len``, ``sorted``...) judges every leaf that arrives."""
    budget = _Budget(MAX_ITEMS)
    value = decode_value(payload, budget=budget)
    charged = MAX_ITEMS - budget.left
    assert weigh_arguments((value,)) <= 2 * charged - 1


# --- B. names that setup binds, judged where the candidate cannot reach them -----------------

RIGHT = "def squares(n):\n    return [i * i for i in range(n)]\n"
WRONG = "def squares(n):\n    return 'x'\n"


def test_a_checker_the_setup_defines_is_never_called_in_the_child():
    """``check(f())`` used to be one leaf: the candidate's process ran the setup's checker,
    and a wrong function could patch its ``__code__`` before it ran. No candidate could be
    judged fairly by it, so the test is a dataset error, raised before anything runs."""
    setup = "def check(value):\n    return value == [0, 1, 4]\n"
    for test in ("assert check(squares(3))", "assert squares(3) == made", "assert made.x"):
        with pytest.raises(UnsplittableTestError, match="setup code defines"):
            run_tests(RIGHT, [test], setup_code=setup + "made = sorted([3, 1])\n")


PATCH_EXPECTED = ("import gc\ndef squares(n):\n"
                  "    for o in gc.get_objects():\n"
                  "        if type(o) is list and o[:2] == [0, 1] and len(o) == n:\n"
                  "            o[:] = ['x'] * n\n"
                  "    return ['x'] * n\n")
READ_EXPECTED = ("import gc, ast\ndef squares(n):\n"
                 "    for o in gc.get_objects():\n"
                 "        if type(o) is dict and 'setup' in o and 'expected' in o['setup']:\n"
                 "            return ast.literal_eval(o['setup'].split('=')[1].strip())\n"
                 "    return []\n")
REBIND_EXPECTED = ("def squares(n):\n    global expected\n    expected = 'x'\n"
                   "    return 'x'\n")


@pytest.mark.parametrize("attack", [PATCH_EXPECTED, READ_EXPECTED, REBIND_EXPECTED,
                                    WRONG + "expected = 'x'\n"])
def test_a_plain_value_the_setup_binds_is_the_parents(attack):
    """``expected = [0, 1, 4]`` in the setup is evaluated by the parent (a literal) and left
    out of the child's setup: patching it through gc, reading it from the request, or
    rebinding it after the setup ran earns nothing; the right function scores 1.0."""
    setup, test = "expected = [0, 1, 4]\n", "assert squares(3) == expected"
    plan = plan_tests(attack, setup, [test])
    assert "[0, 1, 4]" not in plan.child_setup and [leaf.source for leaf in plan.leaves] in (
        ["squares(3)"], [])
    assert run_tests(attack, [test], setup_code=setup).passed == 0
    assert run_tests(RIGHT, [test], setup_code=setup).fraction == 1.0


def test_setup_values_the_candidate_takes_as_inputs_still_reach_the_child():
    """MBPP's trees (tasks 367, 927), a literal passed to the candidate, and an object the
    setup builds from the candidate's class (``s = Solution()``, then ``s.method(x)``)."""
    code = ("class Node:\n    def __init__(self, v):\n        self.v, self.left = v, None\n"
            "def depth(n):\n    return 0 if n is None else 1 + depth(n.left)\n"
            "def total(xs):\n    return sum(xs)\n"
            "class Solution:\n    def twice(self, x):\n        return 2 * x\n")
    setup = "root = Node(1)\nroot.left = Node(2)\ndata = [1, 2, 3]\ns = Solution()\n"
    tests = ["assert depth(root) == 2", "assert total(data) == 6", "assert s.twice(4) == 8",
             "assert data == [1, 2, 3]"]
    plan = plan_tests(code, setup, tests)
    assert "data = [1, 2, 3]" in plan.child_setup  # a leaf takes it as an input
    assert run_tests(code, tests, setup_code=setup).fraction == 1.0


# --- C. identity across the decode boundary ----------------------------------------------------

ALIASED = "CACHE = []\ndef f():\n    return CACHE\n"  # plain Python: f() is f()
FRESH = "def f():\n    return []\n"


@pytest.mark.parametrize("test", ["assert f() is not f()", "assert not (f() is f())",
                                  "assert f()[:0] is not f()"])
def test_identity_between_two_candidate_values_is_refused(test):
    """Each leaf decodes into new objects, so ``f() is not f()`` was always true: the
    aliasing bug scored 1.0 where plain Python scores 0. Such a test now fails for every
    candidate, with a reason."""
    (split,) = plan_tests(ALIASED, "", [test]).tests
    assert "identity" in split.refused
    assert run_tests(ALIASED, [test]).passed == 0
    assert run_tests(FRESH, [test]).passed == 0


def test_identity_against_the_tests_own_objects_is_still_judged():
    code = "def g(x):\n    return None if x else [x]\n"
    tests = ["assert g(1) is None", "assert g(0) is not None", "assert type(g(0)) is list",
             "assert (g(0) is True) is False"]
    assert run_tests(code, tests).fraction == 1.0
    assert run_tests("def g(x):\n    return [x]\n", tests[:1]).passed == 0


# --- D. every parent-side call on candidate values under the work bounds --------------------

def test_a_key_lambdas_body_is_guarded_and_its_calls_are_counted():
    code = "def f():\n    return [3, 1, 2]\n"
    (split,) = plan_tests(code, "", ["assert sorted(f(), key=lambda t: -t) == [3, 2, 1]"]).tests
    assert "__calls" in split.judge.co_names and not split.refused
    tests = ["assert sorted(f(), key=lambda t: -t) == [3, 2, 1]",
             "assert max(f(), key=lambda t: abs(t - 2)) == 3", "assert min(f(), key=None) == 1",
             "assert sorted(map_of(), key=len) == ['a', 'bb']"]
    code += "def map_of():\n    return ['bb', 'a']\n"
    assert run_tests(code, tests).fraction == 1.0


def test_a_key_lambdas_defaults_stay_and_its_body_resolves_the_setups_import_aliases():
    code = "def f():\n    return [3, 1, 2]\n"
    tests = ["assert sorted(f(), key=lambda t, scale=2: -t * scale) == [3, 2, 1]",
             "assert sorted(f(), key=lambda t, *, scale=-1: t * scale) == [3, 2, 1]",
             "assert sorted(f(), key=lambda t: -m.fabs(t)) == [3, 2, 1]"]
    for split in plan_tests(code, "import math as m", tests).tests:
        assert not split.refused, split.refused
    result = run_tests(code, tests, setup_code="import math as m")
    assert result.fraction == 1.0, result
    # a keyword-only parameter without a default: split as written, and the parent's call fails
    uncallable = "assert sorted(f(), key=lambda t, *, s: t) == [1, 2, 3]"
    (split,) = plan_tests(code, "", [uncallable]).tests
    assert not split.refused
    result = run_tests(code, [uncallable])
    assert (result.passed, result.status) == (0, "ok"), result


BIG_INTS = "def f():\n    return [10 ** 4299 + k for k in range(900)]\n"  # 3.9 MB of digits
MANY = "def f():\n    return list(range(400_000))\n"


@pytest.mark.parametrize(("code", "test"), [
    (BIG_INTS, "assert max(f(), key=lambda t: t ** 290) > 0"),  # 0.26 s a call, 900 calls
    (MANY, "assert sorted(f(), key=lambda t: (t * 3) % 7)[0] == 0"),  # 400 000 calls
])
def test_a_key_lambda_on_many_or_large_values_is_stopped_within_bounds(code, test):
    """Run unguarded, the first makes 900 calls of 0.26 s each of the trainer's CPU with
    the GIL held. Now the lambda's calls stop at ``_MAX_FUNCTION_CALLS`` or
    ``_MAX_FUNCTION_SECONDS`` (plus one guarded call), and the test fails."""
    used, result = cpu(lambda: run_tests(code, [test]))
    assert (result.passed, result.status) == (0, "ok"), result
    assert used < 3.0 * time_scale(), used


def test_the_call_budget_stops_at_its_count_and_its_time():
    counted = count_calls(3, seconds=10.0)(abs)
    assert [counted(-1) for _ in range(3)] == [1, 1, 1]
    with pytest.raises(OverflowError, match="too often"):
        counted(-1)
    slow = count_calls(1000, seconds=0.05)(lambda: sum(range(200_000)))
    started = time.thread_time()
    with pytest.raises(OverflowError):
        for _ in range(1000):
            slow()
    assert time.thread_time() - started < 1.0


@pytest.mark.parametrize("test", [
    "assert sorted(f(), key=math.factorial) == []",  # not a PARENT_CALLS function
    "assert sorted(f(), **{'key': lambda t: t}) == []",  # the test's own mapping
    "assert sorted(f(), key=lambda t: [u for u in t]) == []",
    "assert sorted(f(), key=lambda t: t.replace('a', 'bb')) == []",
    "assert sorted(f(), key=[abs][0]) == []",  # no name the parent could resolve
])
def test_key_functions_the_parent_cannot_bound_are_refused(test):
    (split,) = plan_tests(FRESH, "import math", [test]).tests
    assert split.refused


def test_the_candidates_own_function_as_a_key_is_one_of_its_leaves():
    """Split, not refused: the leaf's value is a function, which no record carries back, so
    the parent's call fails the test (a candidate cannot hand the parent code to run)."""
    code = "def f():\n    return [3, 1, 2]\ndef neg(x):\n    return -x\n"
    test = "assert sorted(f(), key=neg) == [3, 2, 1]"
    (split,) = plan_tests(code, "", [test]).tests
    assert not split.refused
    result = run_tests(code, [test])
    assert (result.passed, result.status, result.detail) == (0, "ok", "raised: TypeError")


def test_a_key_function_is_guarded_under_its_own_name():
    """``key=list`` iterates each item, so a string item weighs its characters (below)."""
    test = "assert len(sorted(f(), key=list)) == 1"
    for length, passed in ((10, 1), (judge._MAX_CALL_WEIGHT // 2 + 1, 0)):
        code = f"def f():\n    return ['a' * {length}]\n"
        result = run_tests(code, [test])
        assert (result.passed, result.status) == (passed, "ok"), (length, result)


def test_only_the_argument_a_call_iterates_weighs_its_characters():
    """``min(a, b)`` compares two strings; it iterates neither into objects, so each weighs
    16 characters a unit, while ``min(a)`` makes one string per character of ``a``."""
    size = judge._MAX_CALL_WEIGHT * 3 // 10  # two of them are above the bound as characters
    code = (f"def f():\n    return 'a' * {size}\n"
            f"def g():\n    return 'b' * {size}\n")
    result = run_tests(code, ["assert min(f(), g()) < 'b'"])
    assert result.fraction == 1.0, result


def test_a_string_the_parent_iterates_weighs_its_characters():
    """``dict(enumerate(s))`` on 2 million characters cost 2.7 s and 565 MiB while ``s``
    weighed 125 000: iterated, text weighs what the list of its characters would."""
    limit = judge._MAX_CALL_WEIGHT
    edge = "a" * ((limit - 1) // 2)  # 1 + 2 * len == limit
    check_arguments("enumerate", (edge,), {})
    check_arguments("len", (edge * 2,), {})  # not iterated: 16 characters a unit
    for name in ("enumerate", "list", "set", "sorted", "collections.Counter", "zip"):
        with pytest.raises(OverflowError, match="too much"):
            check_arguments(name, (edge + "a",), {})
    with pytest.raises(OverflowError, match="too much"):
        check_arguments("zip", ("ab", edge), {})
    code = "def f():\n    return 'a' * 2_000_000\n"
    used, result = cpu(lambda: run_tests(code, ["assert len(f()) == 2_000_000",
                                                "assert len(dict(enumerate(f()))) == 2"]))
    assert result.verdicts == (True, False) and used < 1.5 * time_scale(), (result, used)


def test_colliding_keys_are_still_refused_and_a_million_honest_ones_are_quick():
    mersenne = 2**61 - 1
    with pytest.raises(OverflowError, match="one hash"):
        judge.spread_keys([k * mersenne for k in range(1, 45_001)])
    keys = list(range(999_999))
    used, _ = cpu(lambda: judge.guarded_call("set", set)(keys))
    assert used < 1.0 * time_scale(), used


# --- E. a name that setup and solution both bind ----------------------------------------------

COUNTER_SETUP = "from collections import Counter\n"
COUNTS = "def counts(s):\n    return Counter(s)\n"
COUNTER_TESTS = ["assert counts('aab') == Counter('aab')",
                 "assert Counter(counts('abc'))['a'] == 1", "assert counts('') == Counter()"]


@pytest.mark.parametrize("code", [
    COUNTER_SETUP + COUNTS,  # the solution's import before its function
    COUNTS + COUNTER_SETUP,  # and after it
    "import collections\nfrom collections import Counter as Counter\n" + COUNTS,
])
def test_the_same_trusted_import_in_setup_and_solution_is_the_parents(code):
    """Before, every test reading ``Counter`` failed (0.33): the candidate's binding made it
    a rebound trusted name. The setup runs later and binds the same object, which the
    parent resolves itself."""
    plan = plan_tests(code, COUNTER_SETUP, COUNTER_TESTS)
    assert not any(split.refused for split in plan.tests)
    assert all(leaf.source.startswith("counts(") for leaf in plan.leaves)
    assert run_tests(code, COUNTER_TESTS, setup_code=COUNTER_SETUP).fraction == 1.0


@pytest.mark.parametrize("code", [
    "Counter = lambda *a: 1\n" + COUNTS,
    COUNTER_SETUP + "def counts(s):\n    global Counter\n    Counter = dict\n"
    "    return Counter()\n",  # could rebind it after the setup ran
    "from collections import OrderedDict as Counter\n" + COUNTS,
])
def test_a_solution_that_binds_the_name_to_something_else_is_refused(code):
    plan = plan_tests(code, COUNTER_SETUP, COUNTER_TESTS)
    assert all("rebinds Counter" in split.refused for split in plan.tests)
    assert run_tests(code, COUNTER_TESTS, setup_code=COUNTER_SETUP).passed == 0
