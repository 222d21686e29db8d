"""The portable tier: for systems without Linux's layers (macOS), or forced with
``GRPO_SANDBOX=portable``.

It promises less than the Linux tiers and says so (``probe.isolation_report_for``). What it
keeps:

* **the verdict is the parent's**: the same request, the same child code (``_child.evaluate``)
  and the same split, record decoding and judge as the Linux tiers; the child only returns
  values, so a completion that lies about its values, forges records or exits early scores
  exactly what it would score there;
* **a fresh interpreter per completion** (``python -S -s``, started by the parent with
  ``subprocess``: no fork server, no fork of the trainer), in its own session and process
  group, with its own empty working folder, the allowlisted environment and its output
  discarded;
* **the POSIX limits the system has** (``resource.setrlimit`` in the child before any
  candidate code: address space, CPU, file size, open files, core dumps, processes), each
  where the system has and enforces it;
* **a budget enforced from outside**: the parent SIGKILLs the process group at the
  wall-clock backstop (``2 * timeout_s + 0.25`` s), and also once the child has used
  ``timeout_s`` of CPU where /proc tells it (Linux).

What it does not stop (there are no namespaces, no separate uid and no syscall filter): the
candidate runs as the current user, can read and change that user's files (answer keys
included), reach the network, signal or ptrace the user's processes (the trainer included)
and leave files outside its working folder or processes that leave its process group.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import subprocess
import time
from typing import Any

from ._child import empty_folder
from .execute import (
    OUTPUT_BUDGET,
    ChildRun,
    SandboxError,
    _collect,
    _send,
    run_child,
    wall_backstop,
)
from .host import BOOTSTRAP, Isolation, Slot, make_workdir, sandbox_env


def run_portable(isolation: Isolation, slot: Slot, request: dict[str, Any],
                 limits: list[tuple[str, int]], timeout_s: float,
                 budget: int = OUTPUT_BUDGET) -> ChildRun:
    """``execute.run_child`` for the portable tier (the same arguments; ``slot`` only counts
    concurrent runs): start one fresh child for ``request``, collect its records, kill and
    reap it, remove its working folder. Raises ``SandboxError`` only if the interpreter
    cannot be started."""
    workdir = make_workdir(isolation, None)
    result_r, result_w = os.pipe()
    started = time.monotonic()
    deadline = started + wall_backstop(timeout_s)
    process: subprocess.Popen | None = None
    run = None
    try:
        config = marshal.dumps({"limits": limits}, 4).hex()
        try:
            process = subprocess.Popen(
                [isolation.interpreter, "-S", "-s", "-c", BOOTSTRAP, "portable", config],
                stdin=subprocess.PIPE, stdout=result_w, stderr=subprocess.DEVNULL,
                cwd=workdir, env=sandbox_env(workdir), close_fds=True,
                start_new_session=True)  # its own group: the parent kills all of it
        except OSError as error:
            raise SandboxError(f"cannot start {isolation.interpreter}: {error}") from error
        os.close(result_w)
        result_w = -1
        sent = _send(process.stdin.fileno(), marshal.dumps(request, 4), deadline)
        with contextlib.suppress(OSError):
            process.stdin.close()
        exited = _exit_check(process.pid)
        data, ended_by = _collect(result_r, deadline, budget, process.pid, timeout_s,
                                  exited=exited) if sent == "ok" else (b"", sent)
        status = _stop(process)
        run = ChildRun(data, ended_by, status, time.monotonic() - started)
    finally:
        if process is not None and run is None:  # interrupted: kill it all the same
            _stop(process)
        for fd in (result_r, result_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        _remove(workdir)
    return run


def _exit_check(pid: int):
    """A call that says whether the child has exited, without reaping it (so its pid, and
    its process group's id, cannot be reused before the parent kills the group); None where
    the system has no ``waitid`` (macOS: the run then ends at EOF or the deadline)."""
    if not hasattr(os, "waitid"):
        return None

    def exited() -> bool:
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
    return exited


def _stop(process: subprocess.Popen) -> int | None:
    """SIGKILL the child's process group (before reaping it: its id cannot have been reused),
    then reap the child; its wait status."""
    for send in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(process.pid, signal.SIGKILL)
    code = process.wait()
    return -code if code < 0 else code << 8  # back to a wait status (os.WIFSIGNALED...)


def _remove(workdir: str) -> None:
    """Empty and remove the working folder, with the user's own rights (the candidate ran
    with the same ones): through folder descriptors opened with O_NOFOLLOW, so a symlink it
    planted is removed, never followed. Never raises."""
    with contextlib.suppress(OSError):
        empty_folder(workdir)
    with contextlib.suppress(OSError):
        os.rmdir(workdir)


def runner_for(isolation: Isolation):
    """``run_portable`` for the portable tier, else ``execute.run_child``."""
    return run_portable if isolation.portable else run_child
