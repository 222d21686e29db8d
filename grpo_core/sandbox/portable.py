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
  ``timeout_s`` of CPU where /proc tells it (Linux);
* **a disk cap on its working folder** (issue 50): besides ``RLIMIT_FSIZE`` per file, the
  parent looks at the folder every ``WATCH_S`` while the child runs and kills it once
  it holds more than ``DISK_BYTES``, ``DISK_ENTRIES`` entries or ``DISK_DEPTH`` levels (the
  Linux tiers' tmpfs: 16 MiB, 4096 inodes); a working folder left full is removed by a
  background thread while the slot stays busy, never in the trainer's call.

What it does not stop (there are no namespaces, no separate uid and no syscall filter): the
candidate runs as the current user, can read and change that user's files (answer keys
included), reach the network, signal or ptrace the user's processes (the trainer included)
and leave files outside its working folder (no cap there) or processes that leave its
process group.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import subprocess
import time
from typing import Any

from ._child import FOLDER_FLAGS, empty_folder
from .execute import (
    CLEAN_UP_GRACE_S,
    OUTPUT_BUDGET,
    TMPFS_BYTES,
    ChildRun,
    SandboxError,
    _collect,
    _send,
    run_child,
    wall_backstop,
)
from .host import BOOTSTRAP, Isolation, Slot, make_workdir, sandbox_env

DISK_BYTES = TMPFS_BYTES  # bytes a completion may keep in its working folder (as allocated)
DISK_ENTRIES = 4096  # files, folders and links in it (the Linux tiers' tmpfs has 4096 inodes)
DISK_DEPTH = 64  # levels of folders; a deeper tree is over the cap (no honest one nests so)
REMOVE_IN_CALL_S = 0.05  # what the caller may spend removing a working folder (issue 50)


def run_portable(isolation: Isolation, slot: Slot, request: dict[str, Any],
                 limits: list[tuple[str, int]], timeout_s: float,
                 budget: int = OUTPUT_BUDGET) -> ChildRun:
    """``execute.run_child`` for the portable tier (the same arguments; ``slot`` only counts
    concurrent runs): start one fresh child for ``request``, collect its records, kill and
    reap it, remove its working folder (in the background, the slot kept busy, unless it is
    empty: ``_remove_later``). Raises ``SandboxError`` only if the interpreter cannot be
    started."""
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
                                  exited=exited, watch=_disk_watch(workdir)) \
            if sent == "ok" else (b"", sent)
        status = _stop(process)
        run = ChildRun(data, ended_by, status, time.monotonic() - started)
    finally:
        if process is not None and run is None:  # interrupted: kill it all the same
            _stop(process)
        for fd in (result_r, result_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        _remove_later(slot, workdir, deadline + CLEAN_UP_GRACE_S)
    return run


def _disk_watch(workdir: str):
    """The check ``_collect`` runs while the child runs: ``disk`` once ``workdir`` is over the
    cap (the run then ends and the child is killed), else None."""
    def watch() -> str | None:
        return "disk" if over_disk_cap(workdir) else None
    return watch


def over_disk_cap(workdir: str, max_bytes: int = DISK_BYTES, max_entries: int = DISK_ENTRIES,
                  max_depth: int = DISK_DEPTH) -> bool:
    """Does ``workdir`` hold more than ``max_bytes`` (allocated blocks), more than
    ``max_entries`` entries, or folders nested deeper than ``max_depth``?

    It stops at the first excess, so one look costs at most ``max_entries`` ``lstat`` calls
    and ``max_depth`` descriptors, whatever the candidate built; it opens folders with
    O_NOFOLLOW relative to their parent, so no symlink or long path leads it elsewhere. An
    entry removed meanwhile is not counted."""
    totals = [0, 0]  # entries, bytes
    try:
        fds = [os.open(workdir, FOLDER_FLAGS)]
    except OSError:
        return False
    try:
        pending = [_tally(fds[0], totals, max_entries)]  # per open folder: its subfolders not yet looked at
        while pending and totals[0] <= max_entries and totals[1] <= max_bytes:
            if not pending[-1]:
                pending.pop()
                os.close(fds.pop())
                continue
            if len(fds) > max_depth:
                return True
            try:
                fds.append(os.open(pending[-1].pop(), FOLDER_FLAGS, dir_fd=fds[-1]))
            except OSError:
                continue
            pending.append(_tally(fds[-1], totals, max_entries))
        return totals[0] > max_entries or totals[1] > max_bytes
    finally:
        for fd in fds:
            os.close(fd)


def _tally(fd: int, totals: list[int], max_entries: int) -> list[str]:
    """Add the entries of folder ``fd`` and the blocks they hold to ``totals``, stopping once
    there are more than ``max_entries`` (a folder of a million files costs no more than
    that); the names of its subfolders."""
    import stat
    folders: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:  # removed since the listing
                    continue
                totals[0] += 1
                totals[1] += getattr(info, "st_blocks", 0) * 512 or info.st_size
                if stat.S_ISDIR(info.st_mode):
                    folders.append(entry.name)
                if totals[0] > max_entries:
                    break
    except OSError:
        pass
    return folders


def _remove_later(slot: Slot, workdir: str, by: float) -> None:
    """Remove the working folder: in the call if that takes at most ``REMOVE_IN_CALL_S``
    (and ends by ``by``, the run's backstop plus the grace: an honest completion's folder is
    empty), else in a background thread while ``slot`` stays busy (``host.worker_slot``).
    Issue 50: removing a full folder in the trainer's call took minutes, and a chain of
    folders deeper than the descriptor limit never ended."""
    if not _remove(workdir, min(time.monotonic() + REMOVE_IN_CALL_S, by)):
        slot.finish = lambda: _remove(workdir)


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


def _remove(workdir: str, deadline: float | None = None) -> bool:
    """Empty and remove the working folder, with the user's own rights (the candidate ran
    with the same ones): through folder descriptors opened with O_NOFOLLOW, so a symlink it
    planted is removed, never followed; stop at ``deadline`` (``time.monotonic()``). True if
    it is gone. Never raises."""
    with contextlib.suppress(OSError):
        os.rmdir(workdir)  # empty: the usual case, one call
        return True
    with contextlib.suppress(OSError):
        empty_folder(workdir, deadline)
    try:
        os.rmdir(workdir)
    except OSError:
        return False
    return True


def runner_for(isolation: Isolation):
    """``run_portable`` for the portable tier, else ``execute.run_child``."""
    return run_portable if isolation.portable else run_child
