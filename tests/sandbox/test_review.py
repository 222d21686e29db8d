"""The second review's six classes of weakness, one section each, written from their
descriptions (issue 18). Each test states the class-wide property the mechanism gives, and
attacks it the way a completion would.
"""

from __future__ import annotations

import builtins
import json
import keyword
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sandbox_attacks import ADD_TESTS, leftovers, nothing_reached, time_scale

from grpo_core import mbpp
from grpo_core.sandbox import probe_isolation, run_tests
from grpo_core.sandbox.judge import (
    MAX_SAME_HASH,
    decode_value,
    guarded_binop,
    parse_records,
    safe_name,
)
from grpo_core.sandbox.split import TRUSTED_MODULES, plan_tests

CORRECT = "def add(a, b):\n    return a + b\n"
REPO_ROOT = Path(__file__).resolve().parents[2]
MERSENNE = (1 << 61) - 1  # ints that differ by a multiple of it share a hash
DEADLINE_S = 0.5


@pytest.fixture(autouse=True)
def _not_the_portable_tier(isolation):
    """These attacks aim at the Linux tiers' layers; under GRPO_SANDBOX=portable some would
    reach the host (kill the test process, leave folders in /tmp): tests/sandbox/
    test_portable.py runs the portable tier's own suite."""
    if isolation.portable:
        pytest.skip("the portable tier does not stop these (see test_portable.py)")


def _needs(isolation, *layers: str) -> None:
    missing = [name for name in layers if not getattr(isolation, name)]
    if missing:
        pytest.skip(f"this machine's kernel refuses {', '.join(missing)} (see the report)")


# ---------------------------------------------------------------- 1. clean-up and root

CLEANUP_ATTACK = (
    "import os\n"
    "targets = ['${victim_dir}', '${victim_file}', '/']\n"
    "for folder in ('.', '/tmp', '/var/tmp', '/dev/shm'):\n"
    "    try:\n"
    "        base = os.path.join(folder, 'grpo-trap-${unique}')\n"
    "        os.makedirs(base + '/deep', exist_ok=True)\n"
    "        os.chmod(base, 0o777)\n"
    "        for k, target in enumerate(targets):\n"
    "            os.symlink(target, '%s/link%d' % (base, k))\n"
    "        path = base + '/deep'\n"
    "        for _ in range(400):\n"
    "            path += '/d'\n"
    "            os.mkdir(path)\n"
    "        os.chmod(base + '/deep', 0)\n"
    "    except OSError:\n"
    "        pass\n"
    "def add(a, b):\n"
    "    import time\n"
    "    end = time.monotonic() + 0.3\n"
    "    while time.monotonic() < end:  # swap an entry between a folder and a symlink\n"
    "        for folder in ('.', '/tmp'):\n"
    "            name = os.path.join(folder, 'grpo-swap-${unique}')\n"
    "            try:\n"
    "                os.mkdir(name)\n"
    "                os.rmdir(name)\n"
    "                os.symlink('${victim_dir}', name)\n"
    "                os.unlink(name)\n"
    "            except OSError:\n"
    "                pass\n"
    "    return -99\n")


def _fill(text: str, values: dict[str, str]) -> str:
    from string import Template
    return Template(text).substitute(values)


def _host_traces(unique: str) -> list[str]:
    return [str(path) for folder in ("/tmp", "/var/tmp", "/dev/shm")
            for path in Path(folder).glob(f"grpo-*-{unique}")]


def _wait_for_clean_ups(timeout_s: float = 120.0) -> None:
    """Let a clean-up that passed its deadline finish in the background (its slot stays
    quarantined until then, issue 32 class 6): on a loaded machine the sweep of what a
    candidate left can take longer than its 2 s."""
    for thread in threading.enumerate():
        if thread.name.startswith("grpo-sandbox-clean-up-"):
            thread.join(timeout_s)


@pytest.mark.parametrize("variant", ["default", "without namespaces"])
def test_clean_up_never_follows_what_the_candidate_planted(variant, context, isolation):
    chosen = isolation
    if variant == "without namespaces":
        chosen, _ = probe_isolation(allow_namespaces=False)
    result = run_tests(_fill(CLEANUP_ATTACK, context.values), list(ADD_TESTS),
                       timeout_s=DEADLINE_S, isolation=chosen)
    assert result.passed == 0
    assert nothing_reached(context) == []
    assert stat.S_IMODE(os.stat("/").st_mode) == 0o755
    _wait_for_clean_ups()
    assert _host_traces(context.values["unique"]) == []
    assert leftovers(result.uid, chosen.base_dir) == []
    assert run_tests(CORRECT, list(ADD_TESTS), isolation=chosen).fraction == 1.0


def test_a_deep_tree_does_not_break_the_slot():
    deep = ("import os\npath = 'x'\nfor _ in range(1500):\n    try:\n        os.mkdir(path)\n"
            "    except OSError:\n        break\n    path += '/x'\n" + CORRECT)
    fallback, _ = probe_isolation(allow_namespaces=False)
    for chosen in (None, fallback):
        for _ in range(2):
            assert run_tests(deep, list(ADD_TESTS), isolation=chosen).fraction == 1.0


# ---------------------------------------------------------------- 2. trusted names

@pytest.mark.parametrize(("code", "test", "setup"), [
    ("class M:\n    isclose = staticmethod(lambda *a, **k: True)\nmath = M()\n"
     "def area(r):\n    return 0\n", "assert math.isclose(area(1), 3.14159, rel_tol=1e-3)", ""),
    ("def abs(x):\n    return 0\ndef area(r):\n    return 99\n",
     "assert abs(area(2) - 12.566) < 1e-3", ""),
    ("def set(*args):\n    return 1\ndef similar(a, b):\n    return None\n",
     "assert set(similar((3, 4), (4, 5))) == set((4, 5))", ""),
    ("import sys, types\nfake = types.ModuleType('collections')\n"
     "fake.Counter = lambda *a: 1\nsys.modules['collections'] = fake\n"
     "def count(s):\n    return None\n",
     "assert Counter(count('aab')) == Counter('aab')", "from collections import Counter"),
    ("import sys, types\nfake = types.ModuleType('math')\nfake.isclose = lambda *a, **k: True\n"
     "sys.modules['math'] = fake\ndef area(r):\n    return 0\n",
     "assert math.isclose(area(1), 3.14159)", "import math"),
])
def test_rebinding_a_trusted_name_fails_the_test(code, test, setup):
    assert run_tests(code, [test], setup_code=setup).passed == 0
    plan = plan_tests(code, setup, [test])
    assert all(not leaf.source.count("3.14159") and "(4, 5))" not in leaf.source
               and "Counter('aab')" not in leaf.source for leaf in plan.leaves)


def test_honest_solutions_using_those_names_still_pass():
    cases = [("def sum(a, b):\n    return a % b\n", "assert sum(10, 15) == 10", ""),
             ("def count(s):\n    from collections import Counter\n    return Counter(s)\n",
              "assert Counter(count('aab')) == Counter('aab')", "from collections import Counter"),
             ("import math\ndef area(r):\n    return math.pi * r * r\n",
              "assert math.isclose(area(1), 3.14159, rel_tol=1e-3)", "import math"),
             ("def similar(a, b):\n    return set(a) & set(b)\n",
              "assert set(similar((3, 4), (4, 5))) == set((4,))", "")]
    for code, test, setup in cases:
        assert run_tests(code, [test], setup_code=setup).fraction == 1.0, (code, test)


def _rebind_everything(entry: str) -> str:
    """A completion that knows only the entry point's name: it binds every trusted name to
    a function that returns the same thing whatever it is given."""
    names = sorted(name for name in set(dir(builtins)) | TRUSTED_MODULES
                   if name.isidentifier() and not keyword.iskeyword(name)
                   and not name.startswith("_"))
    lines = ["class _Same:", "    def __getattr__(self, name):", "        return _same",
             "def _same(*args, **kwargs):", "    return 1"]
    lines += [f"{name} = _same" for name in names if name not in TRUSTED_MODULES]
    lines += [f"{name} = _Same()" for name in sorted(TRUSTED_MODULES)]
    lines += [f"def {entry}(*args, **kwargs):", "    return 1"]
    return "\n".join(lines) + "\n"


def _mbpp_rows(config: str) -> list[dict]:
    path = mbpp.local_mbpp_file(config)
    return mbpp.read_mbpp_file(path) if path is not None else mbpp.read_problems()


def test_knowing_only_the_entry_point_earns_nothing_more_on_mbpp():
    rows = _mbpp_rows("sanitized")

    def gain(row: dict) -> int:
        entry = mbpp.entry_point(row["tests"][0])
        constant = f"def {entry}(*args, **kwargs):\n    return 1\n"
        attack = run_tests(_rebind_everything(entry), row["tests"], setup_code=row["setup_code"])
        return attack.passed - run_tests(constant, row["tests"],
                                         setup_code=row["setup_code"]).passed

    with ThreadPoolExecutor(2) as pool:
        gains = list(pool.map(gain, rows))
    assert max(gains) <= 0, [row["task_id"] for row, g in zip(rows, gains, strict=True) if g > 0]


# ---------------------------------------------------------------- 3. answer keys

READER = ("import os\ndef visible(path):\n    return os.path.exists(path)\n"
          "def read(path):\n    try:\n        return open(path).read()\n"
          "    except OSError:\n        return None\n"
          "def cmdlines():\n    found = []\n    for name in os.listdir('/proc'):\n"
          "        try:\n            found.append(open('/proc/%s/cmdline' % name, 'rb').read())\n"
          "        except OSError:\n            pass\n"
          "    return b'pytest' in b''.join(found)\n"
          "def pids():\n    return len([n for n in os.listdir('/proc') if n.isdigit()])\n")


def test_the_project_and_shared_data_are_not_there(isolation, tmp_path):
    _needs(isolation, "private_root")
    secret = REPO_ROOT / f".grpo-secret-{os.getpid()}"
    secret.write_text("zq-in-the-project")
    secret.chmod(0o644)
    try:
        keys = [REPO_ROOT / "data" / "problems.jsonl",  # where the answer keys live
                REPO_ROOT / "grpo_core" / "data" / "problems.jsonl",
                REPO_ROOT.parent / "shared", Path(os.environ.get("GRPO_MBPP_DIR", "/work"))]
        paths = [str(secret), str(REPO_ROOT), str(Path(__file__)), "/etc/passwd", "/run",
                 *(str(path) for path in keys if path.exists())]
        assert all(os.path.exists(path) for path in paths)  # on the host, every one is there
        tests = [f"assert visible({path!r}) == True" for path in paths]
        tests.append(f"assert read({str(secret)!r}) == 'zq-in-the-project'")
        result = run_tests(READER, tests)
    finally:
        secret.unlink()
    assert (result.passed, result.status) == (0, "ok"), result


def test_proc_shows_only_the_sandbox(isolation):
    _needs(isolation, "pid_namespace", "private_root")
    result = run_tests(READER, ["assert cmdlines() == True", "assert pids() > 1"])
    assert (result.passed, result.status) == (0, "ok"), result


# ---------------------------------------------------------------- 4. never raises

NASTY_CODE = [
    "\x00", "(" * 5000, "x = '\ud800'\n", "def add(a, b):\n    return a + b\n" * 20000,
    "max = 1\nall = 2\nsorted = 3\n" + CORRECT, "import os\nos.kill(os.getppid(), 9)\n",
    "import os\nos.killpg(0, 9)\n", "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
    "import os\nfor fd in range(64):\n    try:\n        os.close(fd)\n    except OSError:\n"
    "        pass\n",
    "import os\nos.write(3, b'\\n' * (5 << 20))\n",
    "import os\nos.write(3, b'[0,\"v\",' + b'[' * 100000 + b']' * 100000 + b']\\n')\n",
    "class E(BaseException):\n    pass\nE.__name__ = '\\x1b[2J\\nPASSED'\nraise E\n",
]


@pytest.mark.parametrize("code", NASTY_CODE, ids=range(len(NASTY_CODE)))
def test_no_candidate_input_makes_run_tests_raise(code):
    tests = [*ADD_TESTS, "assert max([i * i for i in range(3)]) == 4",
             "assert sorted([3, 1]) == [1, 3]"]
    result = run_tests(code, tests, timeout_s=DEADLINE_S)
    assert 0 <= result.passed <= result.total == len(tests)
    assert run_tests(CORRECT, list(ADD_TESTS)).fraction == 1.0


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200))
def test_no_random_text_makes_run_tests_raise(code):
    assert run_tests(code, list(ADD_TESTS), timeout_s=DEADLINE_S).total == 3


# ---------------------------------------------------------------- 5. the parent's work

def test_colliding_keys_are_refused_in_linear_time():
    # refusing 200 000 keys that share a hash costs no more than decoding 200 000 keys with
    # distinct hashes into a set (a set built from the colliding ones would take hours); both
    # timed in this process, so the bound holds however slow each call is (make mutate)
    keys = [k * MERSENNE for k in range(1, 200_001)]
    distinct = list(range(1, 200_001))
    for tag in ("s", "z"):
        started = time.monotonic()
        assert len(decode_value({tag: distinct})) == len(distinct)
        linear = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(ValueError, match="one hash"):
            decode_value({tag: keys})
        assert time.monotonic() - started < 2 * linear + 0.2
    with pytest.raises(ValueError, match="one hash"):
        decode_value({"d": [[k, 0] for k in keys[:1000]]})
    few = [k * MERSENNE for k in range(1, MAX_SAME_HASH + 1)]
    assert decode_value({"s": few}) == set(few)  # a handful of equal hashes is fine


def test_a_flood_of_short_lines_is_parsed_in_bounded_time():
    plan = plan_tests(CORRECT, "", list(ADD_TESTS))
    data = b"R\n" + b'[0,"v",1]\n' * 400_000 + b"[1,2]\n" * 400_000
    started = time.monotonic()
    records = parse_records(data, plan)
    assert time.monotonic() - started < 0.5 * time_scale()
    assert records.values == {0: 1}


def test_the_judge_does_not_format_or_explode():
    for name, left, right, says in (
            ("Mod", "%0999999999d", 1, "does not format strings"),
            ("Mod", b"%0999999999d", 1, "does not format strings"),
            ("Pow", 10 ** 4000, 9000, "too large to judge"),
            ("Mult", [0] * 10, 10 ** 6, "too large to judge")):
        with pytest.raises(OverflowError, match=says):
            guarded_binop(name, left, right)
    assert guarded_binop("Mod", 17, 5) == 2


DECODER_ATTACK = (
    "import os\nm = (1 << 61) - 1\nbody = ','.join(str(k * m) for k in range(1, 70000))\n"
    "for index in range(3):\n"
    "    os.write(3, ('[%d,\"v\",{\"s\":[%s]}]\\n' % (index, body)).encode())\n"
    "def add(a, b):\n    return -99\n")


@pytest.mark.parametrize("workers", [2, 8])
def test_an_attack_on_clean_up_or_decoder_does_not_hold_up_the_others(workers, context):
    jobs = [_fill(CLEANUP_ATTACK, context.values), DECODER_ATTACK] + [CORRECT] * 14

    def score(code: str) -> tuple[float, float]:
        started = time.monotonic()
        result = run_tests(code, list(ADD_TESTS), timeout_s=DEADLINE_S)
        return result.fraction, time.monotonic() - started

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(score, jobs))
    assert [fraction for fraction, _ in results] == [0.0, 0.0] + [1.0] * 14
    assert max(seconds for _, seconds in results) < (DEADLINE_S * 2 + 1.5) * time_scale()
    assert nothing_reached(context) == []
    assert _host_traces(context.values["unique"]) == []


# ---------------------------------------------------------------- 6. isolation gaps

def test_tmpfs_is_capped_and_freed(isolation):
    _needs(isolation, "private_root")
    code = ("def fill():\n    written = 0\n    try:\n"
            "        for k in range(200):\n"
            "            with open('/dev/shm/f%d' % k, 'wb') as handle:\n"
            "                handle.write(b'x' * (1 << 20))\n            written += 1\n"
            "    except OSError:\n        pass\n    return written\n")
    result = run_tests(code, ["assert fill() >= 100"], timeout_s=2.0)
    assert result.passed == 0 and not list(Path("/dev/shm").glob("f1*"))


KEYRING = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
           "def add_key():\n    return libc.syscall(248, b'user', b'zq-key', b'v', 1, -3) > 0\n"
           "def sync():\n    import os, time\n    started = time.monotonic()\n    os.sync()\n"
           "    return time.monotonic() - started\n")


def test_no_keyrings_and_sync_does_nothing(isolation):
    _needs(isolation, "seccomp")
    if os.uname().machine != "x86_64":
        pytest.skip("the test calls add_key by its x86_64 number")
    result = run_tests(KEYRING, ["assert add_key() == True", "assert sync() < 1.0"])
    assert result.verdicts == (False, True), result


def test_host_sockets_are_neither_listed_nor_reachable(isolation, context, tmp_path):
    _needs(isolation, "private_root", "network_namespace")
    folder = Path(tempfile.mkdtemp(prefix="grpo-open-sock-", dir="/tmp"))  # not a private TMPDIR
    folder.chmod(0o755)
    path = folder / "sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    listener.setblocking(False)
    path.chmod(0o777)
    port = f"{int(context.values['port']):04X}"
    code = ("import socket, os\ndef listed():\n    text = ''\n"
            "    for name in ('/proc/net/tcp', '/proc/self/net/tcp', '/proc/1/net/tcp'):\n"
            "        try:\n            text += open(name).read()\n        except OSError:\n"
            "            pass\n    return ':%s' % " + repr(port) + " in text\n"
            "def reach():\n    s = socket.socket(socket.AF_UNIX)\n    try:\n"
            f"        s.connect({str(path)!r})\n        return True\n"
            "    except OSError:\n        return False\n")
    try:
        result = run_tests(code, ["assert listed() == True", "assert reach() == True"])
        with pytest.raises(BlockingIOError, match=r"\[Errno 11\]"):  # EAGAIN: nobody connected
            listener.accept()
    finally:
        listener.close()
        path.unlink()
        folder.rmdir()
    assert (result.passed, result.status) == (0, "ok"), result


def test_detail_is_escaped():
    code = ("class E(Exception):\n    pass\nE.__name__ = '\\x1b[31mPASSED\\n3/3 tests passed'\n"
            "def add(a, b):\n    raise E()\n")
    result = run_tests(code, list(ADD_TESTS))
    assert "\x1b" not in result.detail and "\n" not in result.detail
    assert "\\x1b" in result.detail
    assert safe_name("ValueError") == "ValueError" and safe_name("a.B_c") == "a.B_c"


def test_the_budget_is_cpu_time_not_wall_time():
    """A completion that needs 0.35 s of CPU passes with a 0.5 s budget while the CPUs are
    shared with busy processes (on a busy machine its wall time is longer than 0.5 s)."""
    work = ("import time\ndef add(a, b):\n    end = time.process_time() + 0.35\n"
            "    while time.process_time() < end:\n        pass\n    return a + b\n")
    hogs = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 6\n"
                              "while time.time() < end:\n    pass\n"])
            for _ in range(max(2, os.cpu_count() or 1) + 1)]
    try:
        time.sleep(0.2)  # let the hogs start
        results = [run_tests(work, ["assert add(2, 3) == 5"], timeout_s=DEADLINE_S)
                   for _ in range(3)]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert [r.fraction for r in results] == [1.0] * 3, results
    assert max(r.seconds for r in results) > 0.35  # it did share the CPUs
    over = run_tests("def add(a, b):\n    while True:\n        pass\n", list(ADD_TESTS),
                     timeout_s=DEADLINE_S)
    assert over.status == "timeout" and over.seconds < (DEADLINE_S * 2 + 0.5) * time_scale()


def test_the_report_names_every_new_layer(isolation):
    from grpo_core.sandbox import isolation_report
    text = str(isolation_report())
    for layer in ("private filesystem view", "own PID namespace", "seccomp filter",
                  "CPU-time budget", "clean-up without root"):
        assert layer in text
    fallback, facts = probe_isolation(allow_namespaces=False)
    from grpo_core.sandbox.probe import isolation_report_for
    report = isolation_report_for(fallback, facts)
    off = {name for name, active, _ in report.layers if not active}
    assert {"private filesystem view", "own PID namespace", "seccomp filter"} <= off
    assert any("private filesystem view is not available" in w for w in report.warnings)
    assert json.dumps([str(report)])
