"""Issue 32, class 1, closed: the child evaluates only the candidate's calls.

The mechanism, one section per part: (1) ``set``/``frozenset``/``dict``/``Counter`` around a
candidate call are the parent's, built from the decoded values only after a linear check that
the child did not choose colliding hashes; (2) every other wrapper (``int``, ``str``,
``math.sqrt``, a method of a plain value...) is the parent's too, from a whitelist, through
guards that bound its work, and a test that needs anything else fails; (3) a name the parent
can neither resolve nor see bound by the candidate's code fails the test instead of being
shipped. Each attack scores 0 with a wrong function and the right function scores 1.0.
"""

from __future__ import annotations

import time

import pytest

from grpo_core.sandbox import run_tests
from grpo_core.sandbox.judge import guarded_call, guarded_method, spread_keys
from grpo_core.sandbox.split import module_level_names, plan_tests

MERSENNE = 2 ** 61 - 1  # k * MERSENNE hashes to 0 for every k: a child can collide at will


def leaves_of(code: str, test: str, setup: str = "") -> list[str]:
    return [leaf.source for leaf in plan_tests(code, setup, [test]).leaves]


def assert_only_right_passes(attack: str, wrong: str, right: str, test: str,
                             setup: str = "") -> None:
    """The attack plus a wrong function scores 0; the right function alone scores 1.0; and
    the child was sent nothing but calls of the candidate's own names."""
    code = attack + wrong
    leaves = leaves_of(code, test, setup)
    assert leaves and all(leaf.split("(")[0] in module_level_names(code) for leaf in leaves)
    assert run_tests(code, [test], setup_code=setup).passed == 0
    assert run_tests(right, [test], setup_code=setup).fraction == 1.0


# ---------------------------------------------------------------- 1. sets and dicts

WRONG_SIMILAR = "def similar(a, b):\n    return []\n"
RIGHT_SIMILAR = "def similar(a, b):\n    return set(a) & set(b)\n"
SIMILAR_TEST = "assert set(similar((3, 4), (4, 5))) == set((4,))"


@pytest.mark.parametrize(("attack", "test"), [
    ("import builtins\nbuiltins.set = lambda *a: {4}\n", SIMILAR_TEST),
    ("import builtins\n_f = frozenset\nbuiltins.frozenset = lambda *a: _f({4})\n",
     "assert frozenset(similar((3, 4), (4, 5))) == frozenset({4})"),
    ("import builtins\nbuiltins.dict = lambda *a: {4: 1}\n",
     "assert dict(zip(similar((3, 4), (4, 5)), [1])) == {4: 1}"),
    ("import collections\ncollections.Counter = lambda *a: {4: 1}\n",
     "assert Counter(similar((3, 4), (4, 5))) == Counter([4])"),
])
def test_a_set_or_dict_around_a_candidate_call_is_the_parents(attack, test):
    wrong = WRONG_SIMILAR
    setup = "from collections import Counter" if "Counter" in test else ""
    assert leaves_of(attack + wrong, test, setup) == ["similar((3, 4), (4, 5))"]
    assert_only_right_passes(attack, wrong, RIGHT_SIMILAR, test, setup)


# a CPU-time bound that separates "refused before the work" from doing the work
QUADRATIC_WOULD_TAKE_S = 8.0
COLLIDING = f"def f():\n    return [k * {MERSENNE} for k in range(1, 45001)]\n"


@pytest.mark.parametrize("tests", [
    ["assert len(f()) == 45000", "assert set(f()) == {0}"],
    ["assert len(f()) == 45000", "assert len(frozenset(f())) == 1"],
    ["assert len(f()) == 45000", "assert len(collections.Counter(f())) == 1"],
    ["assert dict(zip(f(), f())) == {}"],
])
def test_a_set_of_colliding_keys_is_refused_in_linear_time(tests):
    """45 000 integers with one hash (they arrive: the first test passes) would make the
    parent's ``set(f())`` take seconds to minutes, quadratic and holding the GIL; the check
    refuses them in milliseconds."""
    started = time.process_time()
    result = run_tests(COLLIDING, tests, setup_code="import collections")
    assert result.verdicts == (True,) * (len(tests) - 1) + (False,), result
    assert result.status == "ok"
    # linear: well under a second here; building the set would be quadratic, about 19 s of
    # CPU for 45 000 keys (3.8 s measured for 20 000). The bound leaves room for a slow or
    # busy machine (and for make mutate's instrumented code) while still telling them apart.
    assert time.process_time() - started < QUADRATIC_WOULD_TAKE_S


def test_an_honest_list_full_of_duplicates_still_becomes_its_set():
    code = "def g():\n    return [1] * 50000 + list(range(40000))\n"
    assert run_tests(code, ["assert len(set(g())) == 40000"]).fraction == 1.0


def test_the_key_check_counts_distinct_keys_only():
    few = [k * MERSENNE for k in range(1, 33)]
    assert spread_keys(few + few) == few + few  # 32 distinct keys with one hash: fine
    with pytest.raises(OverflowError, match="one hash"):
        spread_keys(few + [33 * MERSENNE])
    with pytest.raises(OverflowError, match="one hash"):
        guarded_call("set", set)([k * MERSENNE for k in range(1, 100)])
    with pytest.raises(OverflowError, match="one hash"):
        guarded_call("dict", dict)([(k * MERSENNE, 0) for k in range(1, 100)])
    assert guarded_call("set", set)(few + few) == set(few)


# ---------------------------------------------------------------- 2. every other wrapper

WRONG_SQUARE = "def square(x):\n    return x + 1\n"
RIGHT_SQUARE = "def square(x):\n    return x * x\n"


@pytest.mark.parametrize(("attack", "test", "setup"), [
    ("import builtins\nbuiltins.int = lambda *a, **k: 9\n", "assert int(square(3.0)) == 9", ""),
    ("import builtins\nbuiltins.str = lambda *a, **k: '9'\n", "assert str(square(3)) == '9'",
     ""),
    ("import builtins\nbuiltins.float = lambda *a, **k: 9.0\n",
     "assert float(square(3)) == 9.0", ""),
    ("import builtins\nbuiltins.bool = lambda *a, **k: True\n",
     "assert bool(square(3) == 9)", ""),
    ("import math\nmath.sqrt = lambda x: 3.0\n", "assert math.sqrt(square(3)) == 3.0",
     "import math"),
    ("import math\nmath.floor = lambda x: 9\n", "assert floor(square(3) + 0.5) == 9",
     "from math import floor"),
    ("import math\nmath.sqrt = lambda x: 3.0\n", "assert sqrt(square(3)) == 3.0",
     "from math import *"),
    # the expected 9 sat in the leaf "int(square(3.0) - 9)" the child evaluated, where the
    # candidate read it from its caller's code; now that code holds only square(3.0)
    ("import sys\n", "assert int(square(3.0) - 9) == 0", ""),
])
def test_a_wrapper_around_a_candidate_call_is_the_parents(attack, test, setup):
    wrong = WRONG_SQUARE if attack != "import sys\n" else (
        "def square(x):\n    consts = sys._getframe(1).f_code.co_consts\n"
        "    return max([c for c in consts if type(c) is int], default=-1)\n")
    assert leaves_of(attack + wrong, test, setup) in (["square(3.0)"], ["square(3)"])
    assert_only_right_passes(attack, wrong, RIGHT_SQUARE, test, setup)


def test_a_str_method_the_candidate_overrides_is_not_called():
    code = ("class S(str):\n    def startswith(self, prefix):\n        return True\n"
            "def name():\n    return S('zz')\n")
    test = "assert name().startswith('ab')"
    assert leaves_of(code, test) == ["name()"]
    assert run_tests(code, [test]).passed == 0
    assert run_tests("def name():\n    return 'abc'\n", [test]).fraction == 1.0


@pytest.mark.parametrize("test", [
    "assert re.match('a', word()) is not None", "assert f'{word()}' == 'a'",
    "assert word().replace('a', 'b') == 'b'", "assert sys.getsizeof(word()) > 0",
    "assert (lambda w: w)(word()) == 'a'",
])
def test_a_test_that_needs_what_the_parent_will_not_evaluate_fails(test):
    # the child could fake these, and the parent will not run them on a chosen value
    # (re could backtrack for ever): the test fails for every candidate, nothing is shipped
    code = "import re, sys\ndef word():\n    return 'a'\n"
    (split,) = plan_tests(code, "import re, sys", [test]).tests
    assert split.leaves == () and split.refused.startswith("the parent does not ")
    assert run_tests(code, [test], setup_code="import re, sys").passed == 0


@pytest.mark.parametrize(("value", "test"), [
    ("'9' * 5000", "assert int(f()) > 0"),  # int <-> text is quadratic
    ("2 ** 14000", "assert str(f() * f()) != ''"),
    ("3 ** 3000", "assert pow(f(), f(), f() + 2) >= 0"),  # modular power: bits(e) * bits(m)
    ("[list(range(900))] * 100", "assert sorted(f() * 1000) != []"),  # shared items
    ("['x' * 100000]", "assert ', '.join(f() * 1000) != ''"),
    ("[1, 2]", "assert round(f()[0], 10 ** 9) == 1"),
])
def test_the_wrappers_the_parent_evaluates_refuse_unbounded_work(value, test):
    started = time.process_time()
    result = run_tests(f"def f():\n    return {value}\n", [test])
    assert result.verdicts == (False,), result
    # refused before the work: milliseconds here; the unbounded work itself takes far longer
    assert time.process_time() - started < QUADRATIC_WOULD_TAKE_S


def test_honest_values_pass_the_wrappers_guards():
    code = ("def f():\n    return [3, 1, 2]\ndef w():\n    return 'a b'\n"
            "def n():\n    return 2 ** 100\ndef d():\n    return {'a': 1}\n")
    tests = ["assert sorted(f()) == [1, 2, 3] and max(f()) == 3 and sum(f(), 1) == 7",
             "assert int(str(n())) == n() and pow(n(), 2, 7) == pow(2 ** 100, 2, 7)",
             "assert w().split() == ['a', 'b'] and '-'.join(w().split()) == 'a-b'",
             "assert list(d().items()) == [('a', 1)] and d().get('b', 0) == 0",
             "assert dict(zip(w().split(), f())) == {'a': 3, 'b': 1}",
             "assert math.isclose(math.sqrt(f()[0] ** 2), 3) and math.floor(2.5) == 2",
             "assert [*f(), *f()][3:] == f() and {'k': f()}['k'][0] == 3 and -f()[0] == -3",
             "assert (f() if n() else None) == [3, 1, 2] and bool(f())"]
    assert run_tests(code, tests, setup_code="import math").fraction == 1.0


def test_a_method_is_called_on_plain_values_only():
    with pytest.raises(TypeError, match="plain data"):
        guarded_method(object(), "count")
    assert guarded_method([1, 1, 2], "count")(1) == 2


# ---------------------------------------------------------------- 3. unknown names

WRONG_ADD = "def add(a, b):\n    return a - b\n"
RIGHT_ADD = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(("attack", "test"), [
    # a helper the test expects, planted as a builtin at run time: the child looked it up
    ("import builtins\nbuiltins.check = lambda *a: True\n", "assert check(add(2, 3), 5)"),
    # bound dynamically, where the parent cannot see it
    ("globals()['expected'] = -1\n", "assert add(2, 3) == expected"),
    ("import builtins\nbuiltins.FIVE = -1\n", "assert add(2, 3) == FIVE"),
])
def test_a_name_nobody_binds_fails_the_test(attack, test):
    code = attack + WRONG_ADD
    (split,) = plan_tests(code, "", [test]).tests
    assert split.leaves == () and "neither the parent nor the candidate binds" in split.refused
    assert run_tests(code, [test]).passed == 0
    # bound by the candidate, statically, the name is the candidate's, and so is the test
    name = split.refused.split()[2].rstrip(",")
    right = RIGHT_ADD + ("def check(a, b):\n    return a == b\n" if name == "check"
                         else f"{name} = 5\n")
    assert run_tests(right, [test]).fraction == 1.0


def test_names_bound_inside_top_level_if_and_try_are_the_candidates():
    code = ("try:\n    LIMIT = int('5')\nexcept ValueError:\n    LIMIT = 0\n"
            "if LIMIT:\n    def add(a, b):\n        return a + b\nelse:\n    add = None\n")
    tests = ["assert add(2, 3) == 5", "assert LIMIT == 5", "assert add(LIMIT, 1) == 6"]
    assert run_tests(code, tests).fraction == 1.0
    assert run_tests(code.replace("'5'", "'x'"), tests).passed == 0
