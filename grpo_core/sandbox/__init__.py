"""Run untrusted, model-written Python against unit tests, and count the asserts it passes.

``run_tests(code, tests)`` runs the candidate in a fresh, isolated process and returns a
``SandboxResult`` with ``passed``, ``total``, ``fraction`` and ``status``. Standard library
only: no torch, no numpy. The design, and why it is built this way, is in ``docs/sandbox.md``;
in short:

* **The verdict is the parent's.** Each assert is split (``split.py``): the child evaluates
  only the candidate's calls and sends back plain data; the parent compares it with the
  expected values, which never enter the child. Exit codes, stdout and exceptions never count
  as a pass. A test whose trusted names (``math``, ``abs``, ``set``...) the candidate rebinds
  is failed, not delegated. Decoding and judging in the parent are bounded in time and memory
  whatever the child wrote (``judge.py``).
* **The kernel enforces the limits**: every completion gets a brand-new process, forked from
  a pristine ``python -S -s`` that never runs candidate code (a fork server, one per worker:
  ``_child.py``), running as a dedicated unprivileged uid when the parent is root, with no
  fork and no threads (``RLIMIT_NPROC=0``), memory, CPU time, file size, open files and core
  dumps limited, no_new_privs, and, where the kernel allows them, an empty network namespace,
  a private IPC namespace, its own PID namespace and its own mount namespace whose root is a
  size-capped tmpfs holding only read-only system folders and the standard library (the
  project, its data, every home folder and every third-party package are absent), and a
  seccomp filter (signals only to itself; no ptrace, new namespaces, mounts, io_uring,
  userfaultfd, bpf, perf_event_open, System V IPC, kernel keyrings or ``sync``). Its
  environment holds no secrets and its output goes to /dev/null.
* **The budget is CPU time**: ``timeout_s`` of CPU for the whole completion, read from
  /proc by the parent, so a completion scores the same on a busy machine; a wall-clock
  limit (``2 * timeout_s + 0.25`` s) is only a backstop, enforced with SIGKILL by the parent.
  Every process of a completion dies with it; its files go with its tmpfs.

``isolation_report()`` says which layers this machine allows (print it in a notebook).

Tiers (``GRPO_SANDBOX``: ``auto``, ``linux`` or ``portable``): on Linux everything above; on
macOS the *portable tier* (``portable.py``): a fresh interpreter per completion with the
rlimits the system has and a budget enforced by the parent, the verdict still the parent's,
but no filesystem, network or process isolation (the report lists what it does not stop).
On Windows ``run_tests`` raises ``SandboxError`` (use WSL2 or Colab); importing works
everywhere.

Residual risks, by design: where the kernel refuses the mount namespace (some containers)
a candidate can read world-readable files, and the report says so; at level 0 (not root) it
runs as your own user; it can hard-code the tests the prompt shows (score hidden tests too).
"""

from __future__ import annotations

import math
import os
import signal
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from .execute import ChildRun, SandboxError, run_child
from .host import Isolation, worker_slot
from .judge import Records, judge_tests, parse_records
from .portable import run_portable
from .probe import (
    IsolationReport,
    SandboxWarning,
    get_isolation,
    isolation_report,
    probe_isolation,
)
from .split import SplitPlan, UnsplittableTestError, plan_tests
from .zygote import discard_zygote

__all__ = [
    "DEFAULT_MEMORY_MB", "DEFAULT_TIMEOUT_S", "Isolation", "IsolationReport", "SandboxError",
    "SandboxResult", "SandboxWarning", "UnsplittableTestError", "get_isolation",
    "isolation_report", "kernel_limits", "probe_isolation", "run_tests",
]

DEFAULT_TIMEOUT_S = 3.0  # CPU seconds for the whole completion: load, setup and every test
DEFAULT_MEMORY_MB = 1024
FILE_SIZE_LIMIT = 1 << 20
OPEN_FILES_LIMIT = 64


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one completion.

    ``status``: ``ok`` (ran to the end; some asserts may have failed), ``timeout``,
    ``crashed`` (died or exited before reporting every test), ``load_error`` (the code raised
    while loading, syntax errors included), ``setup_error``, ``flooded`` (wrote more
    records than the budget, or passed the portable tier's disk cap), or ``sandbox_error`` (the sandbox could not run it: scored 0). ``status`` and ``detail`` are diagnostics only: the score is
    ``passed``, the number of tests whose judge the parent evaluated as true.
    """

    passed: int
    total: int
    status: str
    detail: str = ""
    verdicts: tuple[bool, ...] = ()
    seconds: float = 0.0
    uid: int | None = None  # the sandbox uid it ran as (None at level 0)

    @property
    def fraction(self) -> float:
        """``passed / total``, in [0, 1]."""
        return self.passed / self.total if self.total else 0.0


def run_tests(code: str, tests: Sequence[str], *, setup_code: str = "",
              timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB,
              isolation: Isolation | None = None) -> SandboxResult:
    """Run ``code``, then ``setup_code``, then score every assert in ``tests``.

    ``timeout_s`` is the completion's CPU-time budget (load, setup and every test together);
    a wall-clock backstop of ``2 * timeout_s + 0.25`` s catches one that sleeps.

    Guarantees: returns within the backstop plus 0.25 s of clean-up (milliseconds, normally);
    leaves no process and no file behind; the same inputs give the same result (the child's
    hash seed is fixed), unless a completion runs close to its budget. Raises
    ``UnsplittableTestError`` for a test that is not a single splittable assert whoever
    answers it (a dataset bug), and ``SandboxError`` if the sandbox cannot run on this
    machine at all (the first call's probe: Windows, no usable interpreter); never for
    anything the candidate does. Once the sandbox has run, a completion it cannot run
    (twice: a zygote that died and cannot be replaced) scores 0 with status
    ``sandbox_error`` and a ``SandboxWarning``.
    """
    tests = tuple(tests)
    if not tests:
        raise ValueError("run_tests needs at least one test")
    if not (isinstance(code, str) and isinstance(setup_code, str)):
        raise TypeError("code and setup_code must be strings")
    plan = plan_tests(code, setup_code, tests)
    request = {"code": code, "setup": plan.child_setup,
               "leaves": [(leaf.source, leaf.truth_context, leaf.iterable)
                          for leaf in plan.leaves]}
    chosen = isolation or get_isolation()
    run, records, uid, problem = _run(chosen, request, kernel_limits(timeout_s, memory_mb),
                                      timeout_s, plan)
    if run is None:  # the sandbox could not run it twice (a zygote died...): 0, never raise
        warnings.warn(f"a completion was scored 0 because the sandbox could not run it: "
                      f"{problem}", SandboxWarning, stacklevel=2)
        return SandboxResult(0, len(tests), "sandbox_error", problem,
                             tuple(False for _ in tests))
    try:
        verdicts = judge_tests(plan, records)
        status, detail = classify(run, records, plan)
    except Exception as error:  # noqa: BLE001 - a reward call never raises for a completion
        verdicts = tuple(False for _ in tests)
        status, detail = "crashed", f"the parent could not judge it ({type(error).__name__})"
    return SandboxResult(sum(verdicts), len(tests), status, detail, verdicts, run.seconds, uid)


def _run(isolation: Isolation, request: dict, limits: list[tuple[str, int]], timeout_s: float,
         plan: SplitPlan) -> tuple[ChildRun | None, Records | None, int | None, str]:
    """Run the request in a fresh child: ``(run, records, uid, "")``, or ``(None, None,
    None, why)`` if the sandbox failed twice (issue 32, class 7: a zygote another completion
    killed, or one that cannot start, must not crash the reward function).

    A child that ends before its first record (``R``, written by trusted code before any
    candidate code) ran nothing of the candidate, so running it again is safe; its slot's
    zygote is replaced first.
    """
    problem = ""
    for _ in range(2):
        try:
            with worker_slot(isolation) as slot:
                runner = run_portable if isolation.portable else run_child
                run = runner(isolation, slot, request, limits, timeout_s)
                records = parse_records(run.data, plan)
                if records.ready or run.ended_by not in ("eof", "exit", "no_start"):
                    return run, records, slot.uid, ""
                discard_zygote(isolation, slot)
        except (SandboxError, OSError) as error:  # OSError: its working folder, its pipes
            problem = f"{type(error).__name__}: {error}"
            continue
        problem = ("the sandboxed child exited before running anything "
                   f"(wait status {run.status}); see isolation_report()")
    return None, None, None, problem


def kernel_limits(timeout_s: float, memory_mb: int) -> list[tuple[str, int]]:
    """The rlimits the child sets on itself (hard = soft) before any candidate code runs."""
    return [("RLIMIT_AS", memory_mb << 20), ("RLIMIT_CPU", math.ceil(timeout_s) + 1),
            ("RLIMIT_FSIZE", FILE_SIZE_LIMIT), ("RLIMIT_NOFILE", OPEN_FILES_LIMIT),
            ("RLIMIT_CORE", 0), ("RLIMIT_NPROC", 0), ("RLIMIT_MSGQUEUE", 0),
            ("RLIMIT_MEMLOCK", 0)]


def classify(run: ChildRun, records: Records, plan: SplitPlan) -> tuple[str, str]:
    """A status and a short human-readable detail (diagnostics only, never a score)."""
    if run.ended_by == "deadline":
        return "timeout", f"no result within {run.seconds:.2f} s (wall-clock backstop)"
    if run.ended_by == "cpu" or (run.status is not None and os.WIFSIGNALED(run.status)
                                 and os.WTERMSIG(run.status) == signal.SIGXCPU):
        return "timeout", f"CPU budget used up after {run.seconds:.2f} s"
    if run.ended_by == "budget":
        return "flooded", "more than the record budget was written"
    if run.ended_by == "disk":
        return "flooded", "its working folder passed the portable tier's disk cap"
    if records.load_error:
        return "load_error", records.load_error
    if records.setup_error:
        return "setup_error", records.setup_error
    if records.done and records.loaded:
        raised = sorted(set(records.errors.values()))
        return "ok", f"raised: {', '.join(raised)}" if raised else ""
    return "crashed", f"{_describe(run.status)} after {len(records.values)} of " \
                      f"{len(plan.leaves)} results"


def _describe(status: int | None) -> str:
    if status is None:
        return "ended"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"
