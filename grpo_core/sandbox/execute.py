"""Run one request in one fresh sandboxed child, under a CPU budget and a wall-clock backstop.

Guarantees of ``run_child``, whatever the child does:
* it returns by the wall-clock backstop plus ``CLEAN_UP_GRACE_S`` (and the milliseconds a
  kill takes), and once the child has used its CPU budget: a clean-up that does not end by
  then is finished in the background with the slot kept busy (issue 50);
* it reads at most ``budget`` bytes of the child's records and nothing else (the child's
  stdout and stderr are /dev/null);
* on return the child's whole process group has been SIGKILLed and reaped, with every orphan
  it left (its PID namespace, or the zygote as subreaper); with a private root nothing of it
  is left on disk (its tmpfs died with its mount namespace); without one its working folder
  and the uid's files are removed by a process with that uid's own rights, never by root.
"""

from __future__ import annotations

import contextlib
import marshal
import math
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .host import Isolation, Slot, kill_processes_of, make_workdir, sandbox_env
from .zygote import Zygote, ZygoteError, discard_zygote, zygote_for, zygote_running

OUTPUT_BUDGET = 4 << 20  # bytes of records read per completion
# /proc's unit of CPU time (Linux); other systems have no /proc to read it from
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
TMPFS_BYTES = 16 << 20  # everything a completion may write, in memory, freed when it ends
INSIDE_WORKDIR = "/scratch/work"  # the working folder inside a private root (_child.SCRATCH)


def wall_backstop(cpu_s: float) -> float:
    """The wall-clock limit for a completion with a CPU budget of ``cpu_s`` seconds.

    Only a backstop (a candidate that sleeps or waits uses no CPU): twice the budget, so a
    completion that gets half a core on a busy machine still ends by its CPU budget.
    """
    return 2 * cpu_s + 0.25


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the candidate): never scored, always raised."""


@dataclass(frozen=True)
class ChildRun:
    """What one child produced.

    ``ended_by``: ``eof`` (it closed its result pipe, normally by exiting), ``exit`` (it
    exited while a descendant held the pipe: the portable tier), ``cpu`` (it used its CPU
    budget), ``deadline`` (the wall-clock backstop), ``budget`` (it wrote too much) or
    ``no_start``. ``status``: its wait status, if known.
    """

    data: bytes
    ended_by: str
    status: int | None
    seconds: float

    @property
    def clean(self) -> bool:
        """Ended by itself with exit status 0."""
        return self.ended_by == "eof" and self.status == 0


def run_child(isolation: Isolation, slot: Slot, request: dict[str, Any],
              limits: list[tuple[str, int]], timeout_s: float,
              budget: int = OUTPUT_BUDGET) -> ChildRun:
    """Fork a sandboxed child for ``slot``, send it ``request``, collect its records.

    ``timeout_s`` is the child's CPU budget; the wall clock only backs it up
    (``wall_backstop``).
    """
    _zygote(isolation, slot)  # started (once per slot) before the clock starts
    started = time.monotonic()
    deadline = started + wall_backstop(timeout_s)
    workdir = INSIDE_WORKDIR if isolation.private_root else make_workdir(isolation, slot.uid)
    request_r, request_w = os.pipe()
    result_r, result_w = os.pipe()
    still_open = {request_r, request_w, result_r, result_w}
    zygote, pid, run = None, None, None
    try:
        spec = {"uid": slot.uid, "workdir": workdir, "env": sandbox_env(workdir),
                "limits": limits, "drop_caps": isolation.user_namespace,
                "tmpfs_bytes": TMPFS_BYTES}
        zygote, pid = _spawn(isolation, slot, spec, request_r, result_w)
        _close(still_open, request_r, result_w)
        sent = _send(request_w, marshal.dumps(request, 4), deadline)
        _close(still_open, request_w)
        exit_fd = _pidfd(pid)  # readable once the child exits (it is not reaped before _stop)
        try:
            data, ended_by = _collect(result_r, deadline, budget, pid, timeout_s,
                                      exit_fd=exit_fd) if sent == "ok" else (b"", sent)
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
        status = _stop(isolation, slot, zygote, pid)
        run = ChildRun(data, ended_by, status, time.monotonic() - started)
    finally:
        if run is None:  # interrupted (KeyboardInterrupt...): kill it, start afresh next time
            if pid is not None:
                _kill(pid)
            discard_zygote(isolation, slot)  # its children die with it (parent-death signal)
        _close(still_open, *list(still_open))
        _clean_up(isolation, slot, workdir, thorough=run is None or not run.clean,
                  by=deadline + CLEAN_UP_GRACE_S)
    return run


def _zygote(isolation: Isolation, slot: Slot) -> Zygote:
    try:
        return zygote_for(isolation, slot)
    except ZygoteError as error:
        raise SandboxError(f"cannot start the sandbox: {error}") from error


def _spawn(isolation: Isolation, slot: Slot, spec: dict[str, Any], request_fd: int,
           result_fd: int) -> tuple[Zygote, int]:
    """Fork the child; a zygote that died since its last use is replaced once."""
    for attempt in range(2):
        zygote = _zygote(isolation, slot)
        try:
            return zygote, zygote.spawn(spec, request_fd, result_fd)
        except ZygoteError as error:
            discard_zygote(isolation, slot)
            if attempt:
                raise SandboxError(f"the sandbox could not start a child: {error}") from error
    raise AssertionError("unreachable")


def _close(still_open: set[int], *fds: int) -> None:
    """Close each fd once (a second close could hit another thread's new fd)."""
    for fd in fds:
        if fd in still_open:
            still_open.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


def _send(fd: int, payload: bytes, deadline: float) -> str:
    """Write the whole request: ``ok``, ``deadline``, or ``no_start`` (the child is gone)."""
    os.set_blocking(fd, False)
    view, poller = memoryview(payload), _poller(fd, write=True)
    try:
        while view:
            if time.monotonic() >= deadline:
                return "deadline"
            if poller.poll(_ms_left(deadline)):
                with contextlib.suppress(BlockingIOError):
                    view = view[os.write(fd, view):]
        return "ok"
    except (BrokenPipeError, ConnectionResetError):
        return "no_start"


def _pidfd(pid: int) -> int | None:
    """A pidfd of the child (Linux 5.3+), or None: the run can then end when the child exits,
    even if a copy of its result pipe outlives it (in a unix socket's in-flight message, a
    garbage cycle only the kernel's collector frees: issue 32)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _collect(fd: int, deadline: float, budget: int, pid: int, cpu_s: float,
             exited: Callable[[], bool] | None = None,
             exit_fd: int | None = None,
             watch: Callable[[], str | None] | None = None) -> tuple[bytes, str]:
    """Read until EOF, the CPU budget, the wall-clock backstop or the byte budget, whichever
    comes first (``eof``, ``cpu``, ``deadline``, ``budget``).

    The child's CPU time can grow at most as fast as the wall clock, so it is read (from
    /proc) only when the budget could have run out: a quick completion never pays for it.
    Never waits for EOF past the deadline: a stuck child cannot hold the parent. With
    ``exited`` (the portable tier, whose child's descendants may hold the pipe open), a pipe
    silent for ``EXIT_CHECK_S`` is also ended once the child itself has exited (``exit``).
    With ``exit_fd`` (a pidfd of the child), the run ends once the child has exited and the
    pipe holds nothing more (``exit``), whoever still holds a copy of its write end.
    With ``watch`` (the portable tier's disk cap), it is called every ``WATCH_S`` (or twice
    as long as the last call took, if more) whatever the pipe does, and a reason it returns
    (``disk``) ends the run.
    """
    poller = _poller(fd)
    if exit_fd is not None:
        poller.register(exit_fd, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    check_cpu_at = time.monotonic() + cpu_s
    watch_at = time.monotonic() + WATCH_S if watch is not None else math.inf
    while True:
        now = time.monotonic()
        if now >= deadline:
            return b"".join(chunks), "deadline"
        if now >= check_cpu_at:
            left = cpu_s - cpu_seconds(pid)
            if left <= 0:
                return b"".join(chunks), "cpu"
            check_cpu_at = now + max(left, 0.01)
        if now >= watch_at:  # on the clock, not when the pipe is quiet: records cannot hide it
            reason = watch()
            if reason:
                return b"".join(chunks), reason
            spent = time.monotonic() - now  # a long look waits longer: at most a third of a core
            watch_at = now + spent + max(WATCH_S, 2 * spent)
        wake = min(deadline, check_cpu_at, watch_at)
        if exited is not None:
            wake = min(wake, now + EXIT_CHECK_S)
        events = poller.poll(_ms_left(wake))
        if not events:
            if exited is not None and exited():
                return b"".join(chunks), "exit"
            continue
        if exit_fd is not None and all(ready != fd for ready, _ in events):
            return _drain(fd, chunks, size, budget)  # the child is gone: what is left, then end
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), "eof"
        chunks.append(chunk)
        size += len(chunk)
        if size > budget:
            return b"".join(chunks), "budget"


EXIT_CHECK_S = 0.05
# how often ``watch`` looks: what a completion can write past a cap grows with it (issue 50;
# 1 MiB files went to the page cache at 185 MiB/s on the course machine, niced, under load)
WATCH_S = 0.01


def _drain(fd: int, chunks: list[bytes], size: int, budget: int) -> tuple[bytes, str]:
    """After the child's exit: read what the pipe already holds, without waiting."""
    os.set_blocking(fd, False)
    while size <= budget:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b"".join(chunks), "exit"
        if not chunk:
            return b"".join(chunks), "eof"
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), "budget"


class _SelectorPoller:
    """``select.poll``'s two calls used here, over ``selectors`` (where there is no poll)."""

    def __init__(self, fd: int, write: bool):
        import selectors
        self.selector = selectors.DefaultSelector()
        self.selector.register(fd, selectors.EVENT_WRITE if write else selectors.EVENT_READ)

    def poll(self, timeout_ms: int) -> list:
        return self.selector.select(timeout_ms / 1000)  # its kqueue closes with the object


def _poller(fd: int, write: bool = False):
    """An object whose ``poll(ms)`` is true once ``fd`` is ready (to read, or to write)."""
    if not hasattr(select, "poll"):
        return _SelectorPoller(fd, write)
    poller = select.poll()
    poller.register(fd, select.POLLOUT if write else select.POLLIN)
    return poller


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (all its threads), from /proc; 0 if gone.

    ``pid`` is the zygote's unreaped child, so it cannot have been reused.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def _ms_left(deadline: float) -> int:
    return max(0, math.ceil((deadline - time.monotonic()) * 1000))


def _stop(isolation: Isolation, slot: Slot, zygote: Zygote, pid: int) -> int | None:
    """SIGKILL the child's process group, then have the zygote reap the child.

    The group is killed *before* the child is reaped, so its id cannot have been reused. If
    the zygote is gone (at level 0 a candidate can kill it), its children were killed with it
    (parent-death signal) and are reaped by init; nothing is signalled then.
    """
    if not zygote.alive():
        discard_zygote(isolation, slot)
        return None
    _kill(pid)
    try:
        return zygote.reap(pid)
    except ZygoteError:
        discard_zygote(isolation, slot)
        return None


def _kill(pid: int) -> None:
    """SIGKILL the child and its process group (the child calls setsid first thing, so
    until then the group does not exist yet and only the pid is signalled)."""
    for send in (os.kill, os.killpg):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(pid, signal.SIGKILL)


CLEAN_UP_DEADLINE_S = 2.0  # wall-clock seconds a clean-up may take before it is stopped
CLEAN_UP_GRACE_S = 0.25  # what run_child may take past its backstop to clean up (issue 50)
CLEAN_UP_MIN_S = 0.01  # less time left than this: the clean-up goes to the background at once
# in the background: rounds, each twice as long as the last (up to a minute), until one ends
# or this long has passed; then the slot is freed all the same (issue 50)
CLEAN_UP_GIVE_UP_S = 600.0
# working folders whose clean-up did not end, per slot: its next clean-up tries them again
_carried_over: dict[int, list[str]] = {}


def _clean_up(isolation: Isolation, slot: Slot, workdir: str, thorough: bool,
              by: float = math.inf) -> None:
    """Remove what the child left; never raises (nothing a completion does may make
    ``run_tests`` fail).

    With a private root there is nothing on disk to remove: the child's tmpfs went with its
    mount namespace, and its PID namespace took every process it made. Without one, the
    zygote removes, with that uid's own rights (root never walks a path the candidate
    controls), the working folder and everything the uid owns below the world-writable
    folders and in System V IPC; ``thorough`` (a run that did not end cleanly) first kills
    every process of the uid. It may run until ``by`` (the run's backstop plus
    ``CLEAN_UP_GRACE_S``), ``CLEAN_UP_DEADLINE_S`` at most: issue 50 found the first round
    allowed its full 2 s even after a backstop, so ``run_tests`` returned after 8.3 s against
    6.25 s. A clean-up that does not end by then is finished in the background while the
    slot stays busy (``Slot.finish``).
    """
    if thorough and slot.uid is not None and not isolation.pid_namespace:
        kill_processes_of(slot.uid)
    if isolation.private_root:
        return
    paths = [workdir, *_carried_over.pop(slot.key, [])]
    left = min(CLEAN_UP_DEADLINE_S, by - time.monotonic())
    # a zygote that died would have to be started first: not within the bound
    if left < CLEAN_UP_MIN_S or not zygote_running(isolation, slot) or \
            not _clean_once(isolation, slot, paths, left):
        _carried_over[slot.key] = paths  # until a round ends, whatever happens to the thread
        slot.finish = lambda: _finish_clean_up(isolation, slot, paths)


def _clean_once(isolation: Isolation, slot: Slot, paths: list[str],
                deadline_s: float | None = None) -> bool:
    """One clean-up by the zygote's owner-rights child; True if it ran to its end."""
    try:
        status = _zygote(isolation, slot).clean(paths, isolation.shared_dirs, slot.uid,
                                                deadline_s or CLEAN_UP_DEADLINE_S)
    except (SandboxError, ZygoteError):
        discard_zygote(isolation, slot)
        return False
    if status != 0:
        return False
    for path in paths:
        with contextlib.suppress(OSError):
            os.rmdir(path)  # empty now; the folder above it is root's, not the uid's
    return True


def _finish_clean_up(isolation: Isolation, slot: Slot, paths: list[str]) -> None:
    """Clean-up rounds, each twice as long (and with twice the CPU) as the last, up to a
    minute, until one ends. After ``CLEAN_UP_GIVE_UP_S`` the slot is freed all the same, its
    paths carried over to its next clean-up (issue 50: before, after ten rounds the uid
    stayed out of use for the process, and once all 32 were out every later ``run_tests``
    blocked); what the uid owns in the shared folders that one sweeps by owner anyway."""
    give_up_at, round_ = time.monotonic() + CLEAN_UP_GIVE_UP_S, 0
    while True:
        if slot.uid is not None:
            kill_processes_of(slot.uid)
        if _clean_once(isolation, slot, paths, min(60.0, CLEAN_UP_DEADLINE_S * 2 ** round_)):
            _carried_over.pop(slot.key, None)
            return
        round_ = min(round_ + 1, 30)
        if time.monotonic() >= give_up_at:
            return
