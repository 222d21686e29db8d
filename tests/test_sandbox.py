"""The sandbox's behaviour: scores, statuses, the split of each assert, the wire format and the
isolation it reports. The hostile completions are in ``tests/sandbox/``."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from collections import Counter, OrderedDict, namedtuple
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.sandbox import (
    SandboxWarning,
    UnsplittableTestError,
    _child,
    get_isolation,
    isolation_report,
    probe_isolation,
    run_tests,
)
from grpo_core.sandbox.judge import (
    decode_value,
    guarded_binop,
    judge_tests,
    parse_records,
    safe_name,
)
from grpo_core.sandbox.probe import IsolationReport, isolation_report_for, warn_if_degraded
from grpo_core.sandbox.split import module_level_names, plan_tests, split_assert

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = ["assert add(2, 3) == 5", "assert add(1, 1) == 2", "assert add(0, 0) == 1"]
REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- scores and statuses

def test_the_score_is_the_fraction_of_asserts_passed():
    result = run_tests(ADD, ADD_TESTS)
    assert (result.passed, result.total, result.status) == (2, 3, "ok")
    assert result.fraction == pytest.approx(2 / 3)
    assert result.verdicts == (True, True, False)
    assert run_tests("def add(a, b):\n    return 7\n", ADD_TESTS).passed == 0


@pytest.mark.parametrize(("code", "setup", "status", "detail"), [
    ("def add(a, b) return a", "", "load_error", "SyntaxError"),
    ("raise ImportError('x')", "", "load_error", "ImportError"),
    (ADD, "raise KeyError('setup')", "setup_error", "KeyError"),
    ("import os\nos._exit(3)", "", "crashed", "exit status 3"),
    ("def add(a, b):\n    return a - b\n", "", "ok", ""),
    ("def add(a, b):\n    return a.b\n", "", "ok", "raised: AttributeError"),
])
def test_status_says_what_happened(code, setup, status, detail):
    result = run_tests(code, ADD_TESTS, setup_code=setup)
    assert (result.status, result.passed) == (status, 0)
    assert detail in result.detail


def test_a_timeout_keeps_the_results_that_came_before_it():
    code = "def add(a, b):\n    while a < 0:\n        pass\n    return a + b\n"
    result = run_tests(code, ["assert add(1, 1) == 2", "assert add(-1, 0) == -1"],
                       timeout_s=0.5)
    assert (result.status, result.passed, result.total) == ("timeout", 1, 2)
    assert result.seconds < 1.5


def test_setup_code_runs_after_the_code_and_before_the_tests():
    code = ("class Node:\n    def __init__(self, value):\n        self.value = value\n"
            "        self.left = None\n\ndef depth(node):\n"
            "    return 0 if node is None else 1 + depth(node.left)\n")
    setup = "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n"
    assert run_tests(code, ["assert depth(root) == 3"], setup_code=setup).fraction == 1.0


def test_test_imports_go_in_the_setup_code():
    code = "def area(r):\n    return 3.14159 * r * r\n"
    tests = ["assert math.isclose(area(1), 3.1416, rel_tol=1e-3)",
             "assert math.isclose(area(math.sqrt(2)), 6.2832, rel_tol=1e-3)"]
    assert run_tests(code, tests, setup_code="import math").fraction == 1.0
    assert run_tests(code, tests).passed == 1  # without it, math is unknown in the child


def test_results_do_not_depend_on_hash_order():
    code = "def letters(s):\n    return list(set(s))\n"
    test = ["assert letters('sandbox') == ['s', 'a', 'n', 'd', 'b', 'o', 'x']"]
    verdicts = {run_tests(code, test).verdicts for _ in range(3)}
    assert len(verdicts) == 1


def test_plain_data_of_every_kind_round_trips_through_a_child():
    code = ("from collections import Counter, OrderedDict, namedtuple\nPoint = namedtuple('P', 'x y')\n"
            "def values():\n    return [1, 2.5, float('inf'), 1+2j, 'é\\ud800', b'\\x00', bytearray(b'a'),"
            " (1,), {2}, frozenset({3}), {'k': [None, True]}, Counter('aab'), OrderedDict(a=1),"
            " Point(1, 2), 10 ** 100]\n")
    expected = ("[1, 2.5, float('inf'), 1+2j, 'é\\ud800', b'\\x00', bytearray(b'a'), (1,), {2},"
                " frozenset({3}), {'k': [None, True]}, {'a': 2, 'b': 1}, {'a': 1}, (1, 2), 10 ** 100]")
    assert run_tests(code, [f"assert values() == {expected}"]).fraction == 1.0


def test_concurrent_calls_each_get_their_own_child():
    codes = [f"def add(a, b):\n    return a + b + {k}\n" for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda code: run_tests(code, [
            f"assert add(1, 1) == {2 + codes.index(code)}"]), codes))
    assert [r.fraction for r in results] == [1.0] * 8


def test_nothing_is_left_in_the_working_folders():
    for _ in range(3):
        run_tests("open('scratch.txt', 'w').write('x')\n" + ADD, ADD_TESTS)
    mine = [n for n in os.listdir(get_isolation().base_dir) if n.startswith(f"run-{os.getpid()}-")]
    assert mine == []


def test_bad_tests_are_rejected_before_anything_runs():
    with pytest.raises(ValueError, match="at least one test"):
        run_tests(ADD, [])
    with pytest.raises(UnsplittableTestError, match="one assert"):
        run_tests(ADD, ["x = add(1, 2)"])
    with pytest.raises(UnsplittableTestError, match="GeneratorExp"):
        run_tests(ADD, ["assert all(add(i, i) == 2 * i for i in range(3))"])


# ---------------------------------------------------------------- the split

def _binds(*names: str) -> str:
    return "".join(f"def {name}(*args):\n    return None\n" for name in names)


# Issue 32, class 1 changed these cases (they were written for the old splitting): the
# candidate used to be code="", binding nothing, and its calls were still shipped as leaves;
# a name the parent can neither resolve nor see bound by the candidate now fails the test
# instead (see the next test), so each case's code binds the names it calls. And the leaf of
# the set case was "set(similar((3, 4), (4, 5)))": the parent now evaluates set() itself, on
# the decoded value, so the child gets only the candidate's call.
@pytest.mark.parametrize(("test", "code", "leaves"), [
    ("assert add(2, 3) == 5", ADD, ["add(2, 3)"]),
    ("assert set(similar((3, 4), (4, 5))) == set((4, 5))", _binds("similar"),
     ["similar((3, 4), (4, 5))"]),
    ("assert math.isclose(volume(10), 4188.79, rel_tol=0.001)", _binds("volume"),
     ["volume(10)"]),
    ("assert abs(area(2) - 12.566) < 1e-3", _binds("area"), ["area(2)"]),
    ("assert tuple_size((1, 'a')) == sys.getsizeof((1, 'a'))", _binds("tuple_size"),
     ["tuple_size((1, 'a'))"]),
    ("assert f(1) == f(2)", _binds("f"), ["f(1)", "f(2)"]),
    ("assert sum(10, 15) == 6", "def sum(a, b):\n    return a % b\n", ["sum(10, 15)"]),
    ("assert sum([10, 15]) == 25", "import math\n", []),
])
def test_the_child_gets_only_the_candidates_part(test, code, leaves):
    plan = plan_tests(code, "", [test])
    assert [leaf.source for leaf in plan.leaves] == leaves


@pytest.mark.parametrize("test", [
    "assert set(similar((3, 4), (4, 5))) == set((4, 5))",
    "assert math.isclose(volume(10), 4188.79, rel_tol=0.001)", "assert f(1) == f(2)",
])
def test_a_candidate_that_binds_no_name_the_test_calls_ships_nothing(test):
    # issue 32, class 1: the name is failed, not looked up in the child (the old splitting
    # shipped these calls, wrappers and all, for a candidate that bound nothing: code="")
    (split,) = plan_tests("", "", [test]).tests
    assert split.leaves == () and "which neither the parent nor the candidate binds" in \
        split.refused


def test_truth_tests_mark_their_leaves():
    split = split_assert("assert not is_prime(10) and is_odd(3)", frozenset())
    assert [(leaf.source, leaf.truth_context) for leaf in split.leaves] == [
        ("is_prime(10)", True), ("is_odd(3)", True)]
    assert split_assert("assert f(1) == True", frozenset()).leaves[0].truth_context is False


def test_module_level_names_follow_python_scoping():
    code = ("import math\nimport os.path\nimport re as regex\nfrom heapq import nlargest\n"
            "def helper():\n    inner = 1\n    global shared\n    shared = 2\n"
            "class Box:\n    size = 3\nfor index in range(2):\n    pass\n"
            "total = [y for y in range(3)]\n")
    assert module_level_names(code) == {"os", "regex", "nlargest", "helper", "shared", "Box",
                                        "index", "total"}
    assert module_level_names("def broken(:") == frozenset()


def test_the_judge_refuses_results_too_large_to_compute():
    assert guarded_binop("Pow", 2, 10) == 1024
    assert guarded_binop("Mult", "ab", 3) == "ababab"
    for name, left, right in (("Pow", 2, 10 ** 9), ("LShift", 1, 10 ** 9), ("Mult", "x", 10 ** 9)):
        with pytest.raises(OverflowError, match="too large to judge"):
            guarded_binop(name, left, right)


# ---------------------------------------------------------------- the wire format

_plain_scalars = (st.none() | st.booleans() | st.integers() | st.text()
                  | st.floats(allow_nan=False) | st.binary()
                  | st.complex_numbers(allow_nan=False))
_hashables = st.recursive(_plain_scalars, lambda inner: st.tuples(inner, inner)
                          | st.frozensets(inner, max_size=3), max_leaves=8)
_plain_values = st.recursive(
    _plain_scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(_hashables, inner, max_size=3) | st.sets(_hashables, max_size=3),
    max_leaves=20)


def _typed(value):
    """A comparable form that also records every type (and tells -0.0 from 0.0)."""
    kind = type(value)
    if kind in (list, tuple):
        return kind.__name__, tuple(_typed(item) for item in value)
    if kind in (set, frozenset):
        return kind.__name__, frozenset(_typed(item) for item in value)
    if kind is dict:
        return "dict", tuple((_typed(k), _typed(v)) for k, v in value.items())
    return kind.__name__, repr(value)


@settings(max_examples=100, deadline=None)
@given(_plain_values)
def test_plain_values_survive_encoding_and_decoding(value):
    decoded = decode_value(json.loads(_child.make_encoder()(value)))
    assert decoded == value
    assert _typed(decoded) == _typed(value)


def test_subclasses_are_read_through_the_base_type():
    class Liar(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__

    encode = _child.make_encoder()
    assert decode_value(json.loads(encode(Liar(3)))) == 3
    assert type(decode_value(json.loads(encode(Liar(3))))) is int
    assert decode_value(json.loads(encode(Counter("aab")))) == {"a": 2, "b": 1}
    assert decode_value(json.loads(encode(OrderedDict(a=1)))) == {"a": 1}
    assert decode_value(json.loads(encode(namedtuple("P", "x y")(1, 2)))) == (1, 2)
    assert math.isnan(decode_value(json.loads(encode(float("nan")))))
    with pytest.raises(TypeError, match="not plain data"):
        encode(object())
    nested: list = []
    for _ in range(60):
        nested = [nested]
    with pytest.raises(TypeError, match="nested too deeply"):
        encode(nested)


def test_records_are_claims_checked_one_by_one():
    plan = plan_tests(ADD, "", ["assert add(2, 3) == 5", "assert add(1, 1)"])
    forged = (b'R\nK\n[0,"v",5]\n[0,"v",6]\n[0,"b",1]\n[1,"b",1]\n[7,"v",1]\n'
              b'not json\n[0,"v",{"q":1}]\nD\n')
    records = parse_records(forged, plan)
    assert records.values == {0: 5, 1: True}  # first per leaf; "b" only in a truth context
    assert records.malformed == 2 and records.done
    assert not parse_records(b'K\n[0,"v",5]\nD\n', plan).ready  # no R: nothing counts


def _hex(text: str) -> str:
    return text.encode().hex()


def _parsed(*lines: str, tests=("assert add(2, 3) == 5", "assert not add(1, 1)")):
    plan = plan_tests(ADD, "", list(tests))
    return plan, parse_records("\n".join(["R", *lines]).encode(), plan)


def test_load_and_setup_errors_come_from_their_own_records_and_the_first_one_wins():
    _, loading = _parsed(f'["L","{_hex("ImportError")}"]', f'["L","{_hex("KeyError")}"]')
    assert (loading.load_error, loading.setup_error) == ("ImportError", None)
    _, setup = _parsed("K", f'["S","{_hex("KeyError")}"]', f'["S","{_hex("OSError")}"]')
    assert (setup.load_error, setup.setup_error) == (None, "KeyError")


@pytest.mark.parametrize("error", ['["L","4b6579"]', '["S","4b6579"]'])
def test_a_load_or_setup_error_fails_every_test_whatever_values_follow(error):
    # values that would pass both tests, claimed after an error record: all failed
    plan, records = _parsed("K", '[0,"v",5]', '[1,"b",0]', error, "D")
    assert records.values == {0: 5, 1: False}
    assert judge_tests(plan, records) == (False, False)
    plan, honest = _parsed("K", '[0,"v",5]', '[1,"b",0]', "D")
    assert judge_tests(plan, honest) == (True, True)


def test_a_claimed_name_is_decoded_safely_or_refused():
    _, records = _parsed('["L","ff41"]')  # not UTF-8: replaced, then escaped
    assert records.load_error == safe_name("\ufffdA") == "'\\ufffdA'"
    _, longest = _parsed(f'["L","{"41" * 200}"]')  # 400 hex digits: the longest claim read
    assert longest.load_error == safe_name("A" * 200) and longest.malformed == 0
    _, long = _parsed(f'["L","{"41" * 201}"]', '[0,"e","41"]')  # 402 hex digits: too long
    assert (long.load_error, long.malformed, long.errors) == (None, 1, {0: "A"})
    assert safe_name("E" * 80) == "E" * 80  # the longest name printed as it is
    assert safe_name("E" * 81) == ascii("E" * 81)[:80]


def test_only_known_leaves_and_record_kinds_count():
    # leaf 1 is a truth context ("not add(1, 1)"), leaf 0 is not; there are 2 leaves
    _, records = _parsed("K", '[2,"v",1]', '[0,"b",1]', '[0,"x",1]', '[0,"e",1]', '[1,"b",2]',
                         '[1,"b",0]', "D", "K")
    assert records.values == {1: False}
    assert records.errors == {} and records.malformed == 5
    assert records.loaded and records.done  # a K after the D changes nothing


def test_the_value_budget_is_for_all_records_together(monkeypatch):
    from grpo_core.sandbox import judge

    monkeypatch.setattr(judge, "MAX_ITEMS", 10)
    _, records = _parsed("K", '[0,"v",[1,2,3,4,5]]', '[1,"v",{"t":[6,7,8,9,10]}]', "D")
    assert records.values == {0: [1, 2, 3, 4, 5]} and records.malformed == 1  # 6 + 6 > 10
    # a list is one value and each item one more; a tag is one and each item one more
    _, exactly = _parsed("K", '[0,"v",[1,2,3,4]]', '[1,"v",{"t":[6,7,8,9]}]', "D")
    assert exactly.values == {0: [1, 2, 3, 4], 1: (6, 7, 8, 9)}  # 5 + 5 = 10: all of them
    assert exactly.malformed == 0


def test_values_nest_up_to_the_decoders_depth_and_no_deeper():
    for wrap in (lambda inner: [inner], lambda inner: {"t": [inner]}):
        nested = 5
        for _ in range(60):
            nested = wrap(nested)
        decode_value(nested)
        with pytest.raises(ValueError, match="nested too deeply"):
            decode_value(wrap(nested))
    with pytest.raises(ValueError, match="unknown value"):
        decode_value({"t": [], "s": []})  # a tag is an object with one key


@pytest.mark.parametrize(("payload", "error"), [
    ({"f": 1.5}, "bad scalar"), ({"c": 1}, "bad scalar"), ({"y": 5}, "bad scalar"),
    ({"a": [1]}, "bad scalar"), ({"t": "ab"}, "bad container"),
    ({"d": [{"t": [1, 2]}]}, "bad dict"), ({"d": ["6162"]}, "bad dict"),
    ({"d": [[1, 2, 3]]}, "bad dict"), ({"q": []}, "unknown tag"),
])
def test_a_tagged_value_must_have_the_body_its_tag_says(payload, error):
    # scalars arrive as text, containers as lists, a dict as [key, value] lists
    with pytest.raises(ValueError, match=error):
        decode_value(payload)


def test_values_count_only_once_the_candidate_has_loaded():
    plan, records = _parsed('[0,"v",5]', '[1,"b",0]', "D")  # no K: loading never finished
    assert records.values == {0: 5, 1: False}
    assert judge_tests(plan, records) == (False, False)
    plan, loaded = _parsed("K", '[0,"v",5]', '[1,"b",0]', "D")
    assert judge_tests(plan, loaded) == (True, True)


def test_records_past_the_line_limit_are_never_read():
    plan = plan_tests(ADD, "", ["assert add(2, 3) == 5", "assert add(1, 1) == 2"])
    limit = 2 * len(plan.leaves) + 8  # lines looked at, the R included
    lines = ["R", "K"] + ["[9]"] * (limit - 3) + ['[0,"v",5]', '[1,"v",2]']
    records = parse_records("\n".join(lines).encode(), plan)
    assert records.values == {0: 5}  # line limit + 1 holds leaf 1's value
    assert parse_records("\n".join(lines[:-2] + lines[-1:]).encode(), plan).values == {1: 2}


def test_an_int_power_of_exactly_the_largest_size_is_judged():
    from grpo_core.sandbox.judge import _MAX_RESULT_BITS

    assert (2 ** 511).bit_length() * 8192 == _MAX_RESULT_BITS
    assert guarded_binop("Pow", 2 ** 511, 8192) == 1 << (511 * 8192)
    with pytest.raises(OverflowError, match="too large to judge"):
        guarded_binop("Pow", 2 ** 512, 8192)


# ---------------------------------------------------------------- isolation

def test_the_isolation_report_prints_every_layer():
    report = isolation_report()
    text = str(report)
    assert f"level {report.level}" in text and "no network" in text and "kernel limits" in text
    if os.geteuid() == 0 and not get_isolation().portable:  # CI and Colab: a separate uid
        # is always possible as root (the portable tier, GRPO_SANDBOX=portable, runs as you)
        assert report.level == 1


def test_a_degraded_sandbox_warns_and_still_scores():
    isolation, facts = probe_isolation(allow_uid_drop=False, allow_namespaces=False)
    report = isolation_report_for(isolation, facts)
    assert report.level == 0 and any("no network" in w for w in report.warnings)
    with pytest.warns(SandboxWarning) as caught:
        warn_if_degraded(report)
    assert len(caught) == len(report.warnings) and "level 0" in str(caught[-1].message)
    assert run_tests(ADD, ADD_TESTS, isolation=isolation).passed == 2


_LAPTOP = """
import json, os, warnings
warnings.simplefilter('ignore')
from grpo_core.sandbox import get_isolation, isolation_report, run_tests
report = isolation_report()
fork = run_tests("import os\\ndef forked():\\n    os.fork()\\n    return 1\\n", ["assert forked() == 1"])
locks = "import os\\nos.makedirs('a/b')\\nos.chmod('a/b', 0)\\nos.chmod('a', 0)\\nos.chmod('.', 0)\\n"
add = run_tests(locks + "def add(a, b):\\n    return a + b\\n", ["assert add(2, 3) == 5"])
left = [n for n in os.listdir(get_isolation().base_dir) if n.startswith("run-")]
print(json.dumps([report.level, len(report.warnings), fork.passed, add.fraction, left]))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run a check as an ordinary user")
def test_an_ordinary_user_gets_level_0_with_a_warning():
    python = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no system python3 another user can run")
    # under /tmp, not TMPDIR (a private one would keep that user out)
    home = tempfile.mkdtemp(prefix="grpo-laptop-", dir="/tmp")
    os.chmod(home, 0o777)
    # That user gets its own copy of the package (standard library only), so the test does
    # not depend on where the checkout lives: a clone in a 0700 folder works the same.
    shutil.copytree(REPO_ROOT / "grpo_core", Path(home) / "lib" / "grpo_core",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _, files in os.walk(home):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=60199", "--regid=60199", "--clear-groups", python, "-c",
             _LAPTOP], env={"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home,
                            "PYTHONPATH": os.path.join(home, "lib")},
            capture_output=True, text=True, timeout=120, cwd=home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    level, warnings, forked, fraction, left = json.loads(done.stdout.splitlines()[-1])
    assert (level, forked, fraction, left) == (0, 0, 1.0, []) and warnings >= 1


def test_the_report_shows_no_home_or_virtual_environment_folder(monkeypatch, tmp_path):
    import sys

    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "course" / ".venv"))
    report = IsolationReport(1, "/usr/bin/python3", "3.11", (), (), (
        f"{tmp_path}/course/.venv/bin/python: cannot import the standard library",
        f"{tmp_path}/me/.pyenv/bin/python3: cannot import the standard library"))
    text = str(report)
    assert "passed over <venv>/bin/python: cannot" in text
    assert "passed over ~/.pyenv/bin/python3: cannot" in text
    assert str(tmp_path) not in text and "/usr/bin/python3" in text
