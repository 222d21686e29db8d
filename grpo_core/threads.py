"""CPU threads, decided once: how many threads torch's kernels use, for the machine as it is
when the policy is loaded (a core another program holds, a laptop's efficiency cores).

torch starts one thread per core and splits every parallel region (a matrix product, an
elementwise operation) evenly between them, so a region ends when its slowest thread does. If
another program holds one of two cores, the thread that shares that core gets half of it and
every region waits for it: on the course's 2-core machine a float32 GRPO step took 3.3 times
its idle time with a busy loop on one core (2 threads), and 1.6 times with one thread, which
is what one free core can do (``docs/performance.md``, "A busy core").

The plan (:func:`thread_plan`), made once per process where the precision plan is applied
(``grpo_core.models.load_policy``) and printed beside it by notebook 00:

- **usable cores**: the cores this process may run on (its CPU affinity), and of those only a
  hybrid CPU's performance cores where Linux lists them (``/sys/devices/cpu_core/cpus``): an
  even split that gives an efficiency core the same share waits for it;
- **busy elsewhere**: the cores' worth of CPU time other programs used over a short sample
  (0.3 s of ``/proc/stat``, this process's own time taken out), rounded to whole cores;
- **threads** = usable cores minus the busy ones, at least 1, at most torch's own default.

``GRPO_THREADS=<n>`` (or the command line's ``--threads``) forces a count; ``auto`` (the
default) decides as above. Where ``/proc/stat`` cannot be read (macOS, Windows) the plan
keeps torch's default and says so.

What it leaves out: the decision is taken once, at load; a program that starts later is not
seen (restart the kernel, or set ``GRPO_THREADS=1``). OpenMP's waiting policy is left at its
default: with one thread fewer than free cores nothing waits, and ``OMP_WAIT_POLICY`` only
acts when it is set before torch is imported (measured in ``docs/performance.md``).

Imports torch only to read and set its thread count.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

THREADS_ENV_VAR = "GRPO_THREADS"
# seconds of /proc/stat read to see what other programs use (100 ticks a second on Linux)
SAMPLE_SECONDS = 0.3
# /proc/stat's columns after the cpu name: user nice system idle iowait irq softirq steal...
IDLE_COLUMNS = (3, 4)  # idle and iowait: time the core had nothing to run
PERFORMANCE_CORES = Path("/sys/devices/cpu_core/cpus")  # Linux, hybrid Intel CPUs only


@dataclass(frozen=True)
class ThreadPlan:
    """How many threads torch's CPU kernels use.

    Attributes:
        threads: the count to set, or None to keep torch's default.
        reason: one sentence for notebook 00 and ``config.json``: the count and why.
    """

    threads: int | None
    reason: str


def parse_request(text: str) -> int | None:
    """``"auto"`` -> None; ``"4"`` -> 4. Raises ValueError for anything else."""
    cleaned = text.strip().lower()
    if cleaned == "auto":
        return None
    if not cleaned.isdigit() or int(cleaned) < 1:
        raise ValueError(f"{THREADS_ENV_VAR} must be 'auto' or a whole number of threads >= 1, "
                         f"not {text!r}")
    return int(cleaned)


def cpu_ticks(stat_text: str) -> dict[int, tuple[int, int]]:
    """``{cpu number: (busy ticks, all ticks)}`` from the text of ``/proc/stat`` (its
    ``cpuN`` lines; the ``cpu`` total line is skipped). Guest time, already inside user time,
    is not counted twice."""
    ticks = {}
    for line in stat_text.splitlines():
        name, *columns = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        values = [int(v) for v in columns[:8]]  # user .. steal; guest columns repeat user time
        idle = sum(values[i] for i in IDLE_COLUMNS)
        ticks[int(name[3:])] = (sum(values) - idle, sum(values))
    return ticks


def own_ticks(self_stat_text: str) -> int:
    """This process's user + system ticks (all its threads) from ``/proc/self/stat``."""
    after_name = self_stat_text.rpartition(")")[2].split()  # the name may hold spaces
    return int(after_name[11]) + int(after_name[12])  # fields 14 and 15: utime, stime


def busy_elsewhere(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
                   own: int, cpus: list[int]) -> float:
    """Cores' worth of CPU time that programs other than this one used on ``cpus`` between two
    :func:`cpu_ticks` readings; ``own``: this process's ticks in between."""
    busy = sum(after[c][0] - before[c][0] for c in cpus if c in before and c in after)
    elapsed = max((after[c][1] - before[c][1] for c in cpus if c in before and c in after),
                  default=0)
    if elapsed <= 0:
        return 0.0
    return max(0.0, (busy - own) / elapsed)


def cpu_list(text: str) -> list[int]:
    """Linux's CPU list format: ``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def usable_cpus(affinity: set[int], performance: list[int] | None) -> list[int]:
    """The cores of ``affinity`` worth a thread: its performance cores on a hybrid CPU (when
    any of them is in the affinity), all of it otherwise."""
    chosen = sorted(affinity & set(performance or []))
    return chosen or sorted(affinity)


def count(n: int, noun: str) -> str:
    """``count(1, "thread")`` -> ``"1 thread"``; ``count(2, "core")`` -> ``"2 cores"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def choose_threads(default: int, usable: int, busy: float) -> ThreadPlan:
    """The plan from what was measured (a pure function).

    Args:
        default: torch's own thread count (one per core it found).
        usable: cores worth a thread (:func:`usable_cpus`).
        busy: cores' worth of time other programs use (:func:`busy_elsewhere`).
    """
    held = int(busy + 0.5)  # a core counts as taken from half its time
    threads = max(1, min(default, usable - held))
    words = (f"{count(usable, 'usable core')}, {busy:.1f} busy with other programs"
             + (f", torch's default {default}" if default < usable else ""))
    return ThreadPlan(threads, f"{count(threads, 'thread')}: {words}")


def forced_plan(requested: int, where: str) -> ThreadPlan:
    """A count given by the learner; ``where``: how it was given (``GRPO_THREADS``,
    ``--threads``), for the reason."""
    return ThreadPlan(requested, f"{count(requested, 'thread')}, set by {where}")


def read_stat(proc: Path) -> tuple[dict[int, tuple[int, int]], int]:
    """One reading: every core's ticks and this process's own."""
    return cpu_ticks((proc / "stat").read_text()), own_ticks((proc / "self" / "stat").read_text())


def measure_busy(cpus: list[int], seconds: float = SAMPLE_SECONDS,
                 proc: Path = Path("/proc")) -> float | None:
    """Cores' worth of time other programs use on ``cpus`` now (None without ``/proc``)."""
    try:
        before, own_before = read_stat(proc)
        time.sleep(seconds)
        after, own_after = read_stat(proc)
    except (OSError, ValueError, IndexError):
        return None
    return busy_elsewhere(before, after, own_after - own_before, cpus)


def performance_cores(path: Path = PERFORMANCE_CORES) -> list[int] | None:
    """A hybrid CPU's performance cores as Linux lists them; None elsewhere."""
    try:
        return cpu_list(path.read_text()) or None
    except (OSError, ValueError):
        return None


@functools.cache
def torch_default_threads() -> int:
    """torch's thread count the first time this is asked (before a plan changes it)."""
    import torch

    return torch.get_num_threads()


@functools.cache
def measured_plan() -> ThreadPlan:
    """The plan decided from the machine (``auto``), measured once per process however it
    was asked for (the default, ``GRPO_THREADS=auto``, ``--threads auto``)."""
    default = torch_default_threads()
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    cpus = usable_cpus(affinity, performance_cores())
    busy = measure_busy(cpus) if cpus else None
    if busy is None:
        return ThreadPlan(None, f"torch's default ({default}): this system does not say what "
                                "other programs use")
    return choose_threads(default, len(cpus), busy)


def decide(requested_text: str, where: str) -> ThreadPlan:
    """The plan for a request (``"auto"`` or a count) given ``where``."""
    requested = parse_request(requested_text)
    if requested is None:
        return measured_plan()
    return forced_plan(requested, where)


def thread_plan(requested: str | None = None, where: str = "argument") -> ThreadPlan:
    """The plan for ``requested`` (given ``where``; else ``GRPO_THREADS``, else ``auto``);
    ``auto`` is measured once per process and returns the same object every time."""
    if requested is not None:
        return decide(requested, where)
    if THREADS_ENV_VAR in os.environ:
        return decide(os.environ[THREADS_ENV_VAR], THREADS_ENV_VAR)
    return measured_plan()


def apply_threads(plan: ThreadPlan) -> ThreadPlan:
    """Set torch's thread count to the plan's (nothing when it keeps the default)."""
    import torch

    if plan.threads is not None and torch.get_num_threads() != plan.threads:
        torch.set_num_threads(plan.threads)
    return plan
