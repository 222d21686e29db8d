"""The CPU thread plan (grpo_core.threads): reading /proc/stat, what counts as busy elsewhere,
the count chosen from it, how a count is forced, and that the loader applies the plan."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
import torch

from grpo_core import threads
from grpo_core.threads import (
    ThreadPlan,
    apply_threads,
    busy_elsewhere,
    choose_threads,
    cpu_list,
    cpu_ticks,
    forced_plan,
    measure_busy,
    own_ticks,
    parse_request,
    thread_plan,
    usable_cpus,
)

STAT = """cpu  300 0 100 1000 20 0 0 0 0 0
cpu0 100 5 50 400 10 1 2 3 7 0
cpu1 200 0 50 600 10 0 0 0 0 0
intr 12345 0 0
ctxt 999
"""


@pytest.fixture(autouse=True)
def torch_threads_kept():
    """Every test leaves torch's thread count as it found it (conftest empties the plan's
    cache, so every test decides anew)."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("text, expected", [("auto", None), (" AUTO ", None), ("4", 4),
                                            (" 1\n", 1)])
def test_a_request_is_auto_or_a_positive_count(text, expected):
    assert parse_request(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "two", "", "1.5", "auto2"])
def test_a_bad_request_names_the_variable_and_the_value(text):
    with pytest.raises(ValueError, match=f"GRPO_THREADS must be 'auto'.*{text!r}"):
        parse_request(text)


def test_cpu_ticks_reads_each_core_without_the_total_line_or_guest_time():
    ticks = cpu_ticks(STAT)
    assert set(ticks) == {0, 1}
    # cpu0: user 100 nice 5 system 50 idle 400 iowait 10 irq 1 softirq 2 steal 3 (guest 7 not)
    assert ticks[0] == (100 + 5 + 50 + 1 + 2 + 3, 571)
    assert ticks[1] == (250, 860)


def test_own_ticks_reads_utime_and_stime_after_a_name_with_spaces_and_brackets():
    fields = " ".join(["S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "31", "12", "13"])
    assert own_ticks(f"4242 (a) (b c) {fields}") == 31 + 12


def test_busy_elsewhere_is_the_others_time_over_the_elapsed_time():
    before = {0: (100, 1000), 1: (50, 1000), 2: (0, 1000)}
    after = {0: (130, 1030), 1: (80, 1030), 2: (30, 1030)}
    assert busy_elsewhere(before, after, own=0, cpus=[0, 1]) == pytest.approx(2.0)
    assert busy_elsewhere(before, after, own=15, cpus=[0, 1]) == pytest.approx(1.5)
    assert busy_elsewhere(before, after, own=0, cpus=[0]) == pytest.approx(1.0)
    assert busy_elsewhere(before, after, own=90, cpus=[0, 1]) == 0.0  # never below zero
    assert busy_elsewhere(before, before, own=0, cpus=[0, 1]) == 0.0  # no time passed
    assert busy_elsewhere(before, after, own=0, cpus=[7]) == 0.0  # a core /proc/stat lacks


@pytest.mark.parametrize("text, expected", [("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
                                            ("5", [5]), ("", [])])
def test_cpu_list_reads_linux_ranges(text, expected):
    assert cpu_list(text) == expected


def test_usable_cpus_keeps_a_hybrid_cpus_performance_cores():
    assert usable_cpus({0, 1, 2, 3}, [0, 1]) == [0, 1]
    assert usable_cpus({2, 3}, [0, 1]) == [2, 3]  # pinned to efficiency cores: use them
    assert usable_cpus({3, 1}, None) == [1, 3]


@pytest.mark.parametrize("usable, busy, default, expected", [
    (2, 0.0, 2, 2), (2, 0.4, 2, 2), (2, 0.5, 2, 1), (2, 1.0, 2, 1), (2, 1.9, 2, 1),
    (2, 3.0, 2, 1), (8, 2.6, 8, 5), (8, 0.0, 4, 4)])
def test_a_busy_core_gets_no_thread(usable, busy, default, expected):
    plan = choose_threads(default, usable, busy)
    assert plan.threads == expected
    assert plan.reason.startswith(f"{expected} thread{'' if expected == 1 else 's'}: ")
    assert f"{usable} usable core{'' if usable == 1 else 's'}, {busy:.1f} busy with other " \
        "programs" in plan.reason
    assert ("torch's default" in plan.reason) == (default < usable)


def test_a_forced_count_wins_and_says_where_it_came_from():
    assert forced_plan(3, "--threads") == ThreadPlan(3, "3 threads, set by --threads")
    assert forced_plan(1, "GRPO_THREADS") == ThreadPlan(1, "1 thread, set by GRPO_THREADS")


def test_the_reason_names_torchs_default_only_when_it_is_the_limit():
    assert choose_threads(2, 2, 0.0).reason == "2 threads: 2 usable cores, 0.0 busy with other programs"
    assert choose_threads(4, 8, 1.2).reason == ("4 threads: 8 usable cores, 1.2 busy with other "
                                                "programs, torch's default 4")


def test_performance_cores_reads_linux_list_and_is_none_without_one(tmp_path):
    listed = tmp_path / "cpus"
    listed.write_text("0-3,8\n")
    assert threads.performance_cores(listed) == [0, 1, 2, 3, 8]
    listed.write_text("\n")
    assert threads.performance_cores(listed) is None
    assert threads.performance_cores(tmp_path / "absent") is None


def test_measure_busy_sees_a_busy_loop_on_a_core_and_not_this_process(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, "
                             f"{{{cpus[-1]}}})\nwhile True:\n    pass\n"])
    try:
        time.sleep(0.2)  # the interpreter started and spins
        assert measure_busy(cpus, seconds=0.5) > 0.7
    finally:
        loop.kill()
        loop.wait()
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    own = threading.Thread(target=spin)
    own.start()
    try:
        assert measure_busy(cpus, seconds=0.5) < 0.5  # this process's own time is taken out
    finally:
        stop.set()
        own.join()


def test_measure_busy_without_proc_says_none(tmp_path):
    assert measure_busy([0], seconds=0.0, proc=tmp_path) is None


def test_measure_busy_reads_the_given_proc(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "self" / "stat").write_text("1 (x) " + " ".join(["0"] * 20))
    assert measure_busy([0, 1], seconds=0.0, proc=tmp_path) == 0.0


def test_the_variable_forces_a_count_and_a_bad_one_fails(monkeypatch):
    monkeypatch.setattr(threads, "measure_busy", lambda cpus: pytest.fail("a forced count measured"))
    monkeypatch.setenv("GRPO_THREADS", "3")
    assert thread_plan() == ThreadPlan(3, "3 threads, set by GRPO_THREADS")
    assert thread_plan("1", "--threads") == ThreadPlan(1, "1 thread, set by --threads")
    assert thread_plan("2") == ThreadPlan(2, "2 threads, set by argument")
    monkeypatch.setenv("GRPO_THREADS", "many")
    with pytest.raises(ValueError, match="'many'"):
        thread_plan()


def test_auto_is_decided_once_per_process(monkeypatch):
    monkeypatch.delenv("GRPO_THREADS", raising=False)
    calls = []
    monkeypatch.setattr(threads, "measure_busy", lambda cpus: calls.append(cpus) or 0.0)
    first = thread_plan()
    assert thread_plan() is first
    assert thread_plan("auto") is first and thread_plan(" AUTO", "--threads") is first
    monkeypatch.setenv("GRPO_THREADS", "auto")
    assert thread_plan() is first
    assert len(calls) == 1  # however auto was asked for
    assert first.threads == min(threads.torch_default_threads(), len(os.sched_getaffinity(0)))


def test_without_proc_stat_torchs_default_is_kept(monkeypatch):
    monkeypatch.delenv("GRPO_THREADS", raising=False)
    monkeypatch.setattr(threads, "measure_busy", lambda cpus: None)
    plan = thread_plan()
    assert plan.threads is None and "torch's default" in plan.reason


def test_apply_threads_sets_torchs_count_and_a_default_plan_leaves_it():
    apply_threads(ThreadPlan(1, "one"))
    assert torch.get_num_threads() == 1
    apply_threads(ThreadPlan(None, "default"))
    assert torch.get_num_threads() == 1


def test_load_policy_applies_the_plan(smoke_profile):
    from grpo_core.models import load_policy

    torch.set_num_threads(2)
    load_policy(smoke_profile, ThreadPlan(1, "forced for the test"))
    assert torch.get_num_threads() == 1
