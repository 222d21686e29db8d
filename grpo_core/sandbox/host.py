"""Host-side mechanics: the isolation settings, sandbox uids, working folders, killing by uid.

Everything here runs in the trusted parent. The settings (``Isolation``) come from the probe in
``probe.py``; this module only carries them out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

BOOTSTRAP = Path(__file__).with_name("_child.py").read_text(encoding="utf-8")
# what the child may read from its environment: nothing the trainer knows (no tokens, no keys)
_ENV_ALLOWLIST = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                  # a fixed seed: set and dict order, and so the score, never depend on the run
                  "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                  "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# world-writable folders where a sandbox uid could leave files behind (without a private root)
SHARED_DIR_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")


@dataclass(frozen=True)
class Isolation:
    """How completions are run; built and checked by ``probe.probe_isolation``.

    ``uids`` empty means level 0: children run as the current user. The network and IPC
    namespaces are entered once by each worker's zygote and shared by the children it forks
    one after the other; the PID and mount namespaces (``pid_namespace``, ``private_root``)
    are new for every completion. ``user_namespace`` is only used at level 0, where it is
    what lets an ordinary user create the others.

    ``portable``: the portable tier (``portable.py``), for systems without Linux's layers:
    one plain subprocess per completion, as the current user, with the rlimits the system
    has; none of the namespace or seccomp fields apply.
    """

    interpreter: str
    interpreter_version: str = "?"
    uids: tuple[int, ...] = ()
    network_namespace: bool = False
    ipc_namespace: bool = False
    user_namespace: bool = False
    no_new_privs: bool = False
    base_dir: str = ""
    shared_dirs: tuple[str, ...] = ()
    slots: int = 32  # concurrent completions per process at level 0
    pid_namespace: bool = False  # each completion in its own PID namespace (and /proc)
    private_root: bool = False  # each completion in its own mount namespace and tmpfs root
    seccomp: bool = False  # no kernel keyrings, sync(2) a no-op
    ipc_limits: bool = False  # near-zero System V limits in the IPC namespace
    portable: bool = False  # the portable tier: no zygote, no namespaces (portable.py)
    network_each: bool = False  # each completion in a network namespace of its own
    landlock: int = 0  # the Landlock ABI each completion restricts itself with (0: none)

    def promised(self) -> tuple[bool | int, ...]:
        """The kernel layers a zygote must reach for these settings."""
        return (self.network_namespace, self.ipc_namespace, self.user_namespace,
                self.pid_namespace, self.private_root, self.seccomp, self.ipc_limits,
                self.network_each, self.landlock)

    @property
    def level(self) -> int:
        """1 when each completion runs as a dedicated non-root uid, else 0."""
        return 1 if self.uids else 0


@dataclass
class Slot:
    """A worker slot held exclusively: ``key`` names its zygote, ``uid`` its sandbox user.

    ``finish``: set when a clean-up did not end by its deadline (issue 32, class 6): a call
    that finishes it. The slot then stays busy (its uid quarantined) until a background
    thread has run it, instead of being handed to the next completion with files of the last
    one still there. The thread frees the slot whatever ``finish`` does (issue 50).
    """

    key: int
    uid: int | None
    finish: Callable[[], None] | None = None


def sandbox_env(workdir: str) -> dict[str, str]:
    """The child's whole environment: a fixed allowlist, home and temp in its working folder."""
    return {**_ENV_ALLOWLIST, "HOME": workdir, "TMPDIR": workdir}


def prepare_base_dir(parent: str | None = None) -> str:
    """The folder that holds working folders (under ``parent``, default the temporary folder);
    created 0711, checked if present.

    0711: a sandbox uid can reach its own working folder but cannot list the others.
    """
    path = os.path.join(parent or tempfile.gettempdir(), f"grpo-sandbox-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o711)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise PermissionError(f"{path} exists but is not a private folder of this user; "
                              "remove it or set TMPDIR elsewhere")
    os.chmod(path, 0o711)
    return path


def existing_shared_dirs() -> tuple[str, ...]:
    """World-writable folders on this machine (deduplicated through symlinks)."""
    found: dict[str, str] = {}
    for path in (*SHARED_DIR_CANDIDATES, tempfile.gettempdir()):
        with contextlib.suppress(OSError):
            real = os.path.realpath(path)
            if os.stat(real).st_mode & stat.S_IWOTH:
                found.setdefault(real, real)
    return tuple(found)


# what a walk for world-writable folders never enters: kernel views, not folders on a disk
_NOT_WALKED = ("/proc", "/sys")
WALK_LIMIT = 500_000  # folders looked at, at most (about 0.6 s for 31 000 on the course machine)


def world_writable_folders(top: str = "/", limit: int = WALK_LIMIT) -> tuple[str, ...]:
    """Every world-writable folder a sandbox uid can reach from ``top`` (issue 50).

    Where neither a private root nor Landlock keeps a completion's files in its working
    folder, the clean-up must know every folder the uid could write to: a sticky folder below
    a private TMPDIR or a 1777 folder anywhere, not only /tmp and its kin. Only folders that
    others may search (o+x) are entered, as the sandbox uid could enter no other; symlinks
    are not followed. Run once per process, by the probe, and only in that case.
    """
    found: list[str] = []
    stack, looked_at = [top], 0
    while stack and looked_at < limit:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                looked_at += 1
                try:
                    if entry.path in _NOT_WALKED or not entry.is_dir(follow_symlinks=False):
                        continue
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if mode & stat.S_IXOTH:
                    stack.append(entry.path)
                    if mode & stat.S_IWOTH:
                        found.append(entry.path)
    return tuple(sorted(found))


# ---------------------------------------------------------------- worker slots

_slots_in_use: set[int] = set()
_slots_lock = threading.Lock()


@contextlib.contextmanager
def worker_slot(isolation: Isolation) -> Iterator[Slot]:
    """Hold one worker slot exclusively, across threads and (at level 1) processes.

    At level 1 a slot is a sandbox uid, locked with ``flock``. Exclusive use is what makes the
    clean-up safe: while we hold uid U, every process and every stray file of U is ours.
    """
    if isolation.uids:
        uid, lock_fd = _acquire(isolation)
        slot = Slot(uid, uid)
    else:
        lock_fd, slot = -1, Slot(_acquire_local(isolation.slots), None)

    def release() -> None:
        if lock_fd >= 0:
            os.close(lock_fd)  # releases the flock
        with _slots_lock:
            _slots_in_use.discard(slot.key)

    try:
        yield slot
    finally:  # an interrupted run too may have left a clean-up to finish
        if slot.finish is None:
            release()
        else:  # quarantined: the clean-up ends in the background, then the uid is free again
            threading.Thread(target=_finish_then_release, args=(slot.finish, release),
                             name=f"grpo-sandbox-clean-up-{slot.key}", daemon=True).start()


def _finish_then_release(finish: Callable[[], None], release: Callable[[], None]) -> None:
    """Run an unfinished clean-up to its end, then free the slot, whatever ``finish`` does
    (never raises). Issue 50: one that raised kept its uid out of use for good, and once all
    of them were, every later ``run_tests`` blocked; what a failed clean-up left, the slot's
    next clean-up tries again (``execute._carried_over``, and the sweep by owner)."""
    try:
        finish()
    except Exception:  # noqa: BLE001, S110 - a daemon thread has no one to tell
        pass
    finally:
        release()


def _acquire_local(count: int) -> int:
    while True:
        with _slots_lock:
            for key in range(count):
                if key not in _slots_in_use:
                    _slots_in_use.add(key)
                    return key
        time.sleep(0.005)


def _acquire(isolation: Isolation) -> tuple[int, int]:
    while True:
        for uid in isolation.uids:
            with _slots_lock:
                if uid in _slots_in_use:
                    continue
                _slots_in_use.add(uid)
            lock_fd = _try_lock(os.path.join(uid_lock_dir(), f"uid-{uid}.lock"))
            if lock_fd is not None:
                return uid, lock_fd
            with _slots_lock:
                _slots_in_use.discard(uid)  # another process holds it
        time.sleep(0.005)


def temp_parent_for_uids() -> str:
    """The temporary folder, if a sandbox uid may walk the whole path to it; else /tmp.

    A private TMPDIR (0700, as on clusters; macOS sets one) would keep the sandbox uid out of
    its own working folder: the probe then fell back to level 0 (issue 50).
    """
    folder = os.path.realpath(tempfile.gettempdir())
    path = "/"
    for part in folder.strip("/").split("/"):
        path = os.path.join(path, part)
        try:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return "/tmp"
        except OSError:
            return "/tmp"
    return folder


def uid_lock_dir() -> str:
    """Where the uid locks live: /tmp's folder of this user whatever TMPDIR says (issue 50).

    Two trainers with different TMPDIRs must still see each other's locks: with the locks
    beside the working folders, each would take uid 60100 and kill the other's completions.
    /tmp is where they lived before, so a process of an older version still agrees.
    """
    return prepare_base_dir("/tmp") if os.path.isdir("/tmp") else prepare_base_dir()


def _try_lock(path: str) -> int | None:
    import fcntl  # Linux tiers only (level 1): importing the package works on any system

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


# ---------------------------------------------------------------- working folders and clean-up

def make_workdir(isolation: Isolation, uid: int | None) -> str:
    """A fresh 0700 folder owned by the sandbox uid (named after this process, for audits)."""
    path = tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=isolation.base_dir)
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def kill_processes_of(uid: int, rounds: int = 5) -> int:
    """SIGKILL every live process whose real, effective or saved uid is ``uid``; returns the count.

    Reads ``/proc/<pid>/status`` rather than the owner of ``/proc/<pid>``, which a process can
    hide by making itself non-dumpable. Zombies are skipped: they are already dead.
    """
    killed = 0
    for _ in range(rounds):
        found = list(_pids_with_uid(uid))
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += len(found)
        if not found:
            break
        time.sleep(0.01)
    return killed


def _pids_with_uid(uid: int) -> Iterator[int]:
    wanted = str(uid).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/status", os.O_RDONLY | os.O_CLOEXEC)
            try:
                head = os.read(fd, 1024)  # Name, State ... Uid come first
            finally:
                os.close(fd)
        except OSError:
            continue
        if _status_field(head, b"State").startswith(b"Z"):
            continue
        if wanted in _status_field(head, b"Uid").split()[:3]:
            yield int(name)


def _status_field(status: bytes, field: bytes) -> bytes:
    start = status.find(b"\n" + field + b":")
    if start < 0:
        return b""
    start += len(field) + 2
    end = status.find(b"\n", start)
    return status[start:end if end >= 0 else None].strip()
