"""The portable tier (``grpo_core/sandbox/portable.py``): what a learner on macOS gets, run
here with Linux's layers set aside (``GRPO_SANDBOX=portable``, or the tier passed directly),
and the package importing where Linux-only modules are missing.

It keeps the verdict in the parent, so every forgery of the hostile suite scores 0 exactly as
under the Linux tiers; it has no namespaces and runs as the user, so the attacks that need a
separate uid or a private root are not run against it (``portable_gap``), and the report says
so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from string import Template

import pytest
from sandbox_attacks import ADD_TESTS, ATTACKS, Attack, leftovers, nothing_reached, time_scale

from grpo_core.sandbox import SandboxError, _child, probe, run_tests
from grpo_core.sandbox.probe import chosen_tier, isolation_report_for, probe_portable

REPO_ROOT = Path(__file__).resolve().parents[2]
CORRECT = "def add(a, b):\n    return a + b\n"
DEADLINE_S = 0.5


@pytest.fixture(scope="module")
def portable():
    isolation, facts = probe_portable()
    return isolation, facts


def _portable_gap(attack: Attack) -> str:
    """Why the portable tier cannot stop ``attack`` ("" if it does)."""
    if attack.level > 0:
        return "needs a separate uid or namespaces: the portable tier runs as your own user"
    return attack.portable_gap


STOPPED = [attack for attack in ATTACKS if not _portable_gap(attack)]
GAPS = [attack for attack in ATTACKS if _portable_gap(attack)]


# ---------------------------------------------------------------- it scores like the sandbox

def test_a_correct_solution_scores_one_and_a_wrong_one_zero(portable):
    isolation, _ = portable
    right = run_tests(CORRECT, list(ADD_TESTS), isolation=isolation)
    assert (right.fraction, right.status, right.uid) == (1.0, "ok", None)
    wrong = run_tests("def add(a, b):\n    return a * b\n", list(ADD_TESTS), isolation=isolation)
    assert (wrong.passed, wrong.fraction, wrong.status) == (0, 0.0, "ok")


def test_an_endless_loop_is_stopped_within_its_budget(portable):
    isolation, _ = portable
    for code in ("def add(a, b):\n    while True:\n        pass\n",
                 "import time\ndef add(a, b):\n    time.sleep(30)\n"):
        started = time.monotonic()
        result = run_tests(code, list(ADD_TESTS), timeout_s=DEADLINE_S, isolation=isolation)
        elapsed = time.monotonic() - started
        assert (result.passed, result.status) == (0, "timeout"), result
        assert elapsed <= (2 * DEADLINE_S + 0.25 + 0.5) * time_scale(), elapsed


def test_a_descendant_holding_the_pipe_does_not_hold_the_run(portable):
    """The run ends when the child exits, not when the last copy of its pipe closes."""
    isolation, facts = portable
    if facts.fork_blocked:
        pytest.skip("RLIMIT_NPROC stops fork here (not root): no descendant can hold it")
    code = ("import os, time\nif os.fork() == 0:\n    time.sleep(10)\n    os._exit(0)\n"
            + CORRECT)
    started = time.monotonic()
    result = run_tests(code, list(ADD_TESTS), timeout_s=3.0, isolation=isolation)
    assert result.fraction == 1.0, result
    assert time.monotonic() - started < 2.0 * time_scale()


@pytest.mark.parametrize("attack", STOPPED, ids=[attack.name for attack in STOPPED])
def test_hostile_completions_score_zero_under_the_portable_tier(attack, context, portable):
    """The hostile suite's checks (tests/sandbox/test_hostile.py), for every attack the
    portable tier is meant to stop: forgeries, exits, resources."""
    isolation, facts = portable
    if attack.portable_needs and not getattr(facts, attack.portable_needs):
        pytest.skip(f"the portable tier stops it only where {attack.portable_needs} "
                    "(RLIMIT_NPROC=0 binds neither root nor, on macOS, threads)")
    fill = lambda text: Template(text).substitute(context.values)  # noqa: E731
    started = time.monotonic()
    result = run_tests(fill(attack.code), [fill(t) for t in attack.tests],
                       timeout_s=DEADLINE_S, isolation=isolation)
    elapsed = time.monotonic() - started
    assert result.passed == 0, result
    assert elapsed <= (DEADLINE_S + 1.0) * time_scale(), f"returned after {elapsed:.2f} s"
    assert nothing_reached(context) == []
    assert leftovers(None, isolation.base_dir) == []
    if attack.followup:
        assert run_tests(attack.followup, list(ADD_TESTS), isolation=isolation).passed == 0
    assert run_tests(CORRECT, list(ADD_TESTS), isolation=isolation).fraction == 1.0


def test_the_gaps_are_exactly_the_attacks_that_need_isolation():
    """What the portable tier is not run against: each level-1 attack (a separate uid or
    namespaces stop it) and the ones that need a private root."""
    assert len(STOPPED) >= 25
    assert {attack.name for attack in GAPS} == {
        "fork_bomb_bounded", "subprocess_spawn", "write_outside", "delete_outside",
        "cleanup_symlink_trap", "read_env_secrets", "read_answer_key_file", "network_sockets",
        "signal_the_parents", "ptrace_and_parent_memory", "raise_own_limits", "become_root",
        "persistence_between_completions"}


def test_the_judges_forgery_tests_pass_with_grpo_sandbox_portable():
    """tests/test_sandbox_judge.py (exits before and while reporting, values that raise,
    rebound names, ...) again, in a process where GRPO_SANDBOX=portable chose the tier."""
    env = {**os.environ, "GRPO_SANDBOX": "portable"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(REPO_ROOT / "tests" / "test_sandbox_judge.py"), "-W", "ignore::Warning"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


# ---------------------------------------------------------------- choosing the tier

def test_grpo_sandbox_chooses_the_tier_and_an_unknown_value_is_an_error(monkeypatch):
    monkeypatch.setattr(probe, "current_platform", lambda: "linux")
    for value, tier in (("", "linux"), ("auto", "linux"), ("portable", "portable"),
                        (" Portable ", "portable"), ("linux", "linux")):
        monkeypatch.setenv("GRPO_SANDBOX", value)
        assert chosen_tier() == tier
    monkeypatch.setenv("GRPO_SANDBOX", "docker")
    with pytest.raises(SandboxError, match="GRPO_SANDBOX='docker' is not a sandbox tier: use "
                                           "auto .*, linux or portable"):
        chosen_tier()


def test_macos_gets_the_portable_tier(monkeypatch):
    monkeypatch.setattr(probe, "current_platform", lambda: "darwin")
    monkeypatch.delenv("GRPO_SANDBOX", raising=False)
    assert chosen_tier() == "portable"
    monkeypatch.setenv("GRPO_SANDBOX", "linux")
    with pytest.raises(SandboxError, match="this system is darwin"):
        chosen_tier()


def test_windows_stops_with_one_sentence_that_names_wsl2_and_colab(monkeypatch):
    monkeypatch.setattr(probe, "current_platform", lambda: "win32")
    monkeypatch.setattr(probe, "_active", None)  # as in a fresh process
    for value in ("", "portable"):
        monkeypatch.setenv("GRPO_SANDBOX", value)
        with pytest.raises(SandboxError) as raised:
            run_tests(CORRECT, list(ADD_TESTS))
        message = str(raised.value)
        assert message == probe.WINDOWS_MESSAGE
        assert "WSL2" in message and "Colab" in message and message.count(".") == 1


def test_the_report_says_what_the_portable_tier_does_not_stop(portable):
    report = isolation_report_for(*portable)
    text = str(report)
    assert report.tier == "portable" and "portable tier" in text.splitlines()[0]
    off = {name for name, active, _ in report.layers if not active}
    assert {"separate unprivileged uid", "private filesystem view", "own PID namespace",
            "seccomp filter", "private IPC namespace"} <= off
    on = {name for name, active, _ in report.layers if active}
    assert {"verdict decided in the parent", "fresh process per completion", "kernel limits",
            "deadline from outside"} <= on
    summary = report.warnings[-1]
    for says in ("decided in the parent", "your own user", "read and change your files",
                 "network", "signal or ptrace", "no syscall filter"):
        assert says in summary


def test_the_child_sets_only_the_limits_this_system_has(monkeypatch):
    class Resource:  # a system with one of the limits
        RLIMIT_CORE = 4
        calls: list = []

        @staticmethod
        def setrlimit(number, pair):
            Resource.calls.append((number, pair))

    monkeypatch.setattr(_child, "resource", Resource)
    assert _child.set_limits([("RLIMIT_CORE", 0), ("RLIMIT_NPROC", 0)]) == ["RLIMIT_NPROC"]
    assert Resource.calls == [(4, (0, 0))]


# ---------------------------------------------------------------- importing anywhere

IMPORT_ELSEWHERE = textwrap.dedent("""
    import sys, os
    # what the package's imports need from the standard library, loaded first, as on that
    # system; then the Linux- and POSIX-only modules are hidden and sys.platform changed
    import ast, concurrent.futures, json, marshal, selectors, signal, socket, subprocess
    import tempfile, threading, warnings, decimal, cmath, heapq, string, stat
    for name in ("fcntl", "resource", "grp", "pwd", "termios"):
        sys.modules[name] = None
    sys.platform = PLATFORM
    if PLATFORM == "win32":
        for name in ("sysconf", "uname", "geteuid", "getuid", "fork", "killpg", "setsid"):
            if hasattr(os, name):
                delattr(os, name)
    import grpo_core, grpo_core.rewards, grpo_core.sandbox
    from grpo_core.sandbox import SandboxError, run_tests
    assert grpo_core.run_tests is run_tests
    try:
        result = run_tests("def add(a, b):\\n    return a + b\\n", ["assert add(2, 3) == 5"])
        print("scored", result.fraction, grpo_core.sandbox.get_isolation().portable)
    except SandboxError as error:
        print("error:", error)
""")


@pytest.mark.parametrize(("platform", "says"), [
    ("darwin", "scored 1.0 True"),  # macOS: the portable tier, without fcntl or resource
    ("win32", "error: The code sandbox does not run on Windows: run the course in WSL2"),
])
def test_the_package_imports_without_linux_only_modules(platform, says):
    program = f"PLATFORM = {platform!r}\n" + IMPORT_ELSEWHERE
    env = {key: value for key, value in os.environ.items() if key != "GRPO_SANDBOX"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", program], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().startswith(says), done.stdout + done.stderr[-2000:]
