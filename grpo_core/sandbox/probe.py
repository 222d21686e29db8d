"""Find the strongest isolation this machine allows, once, and report it.

The probe tries each layer for real (it runs a small trusted program in a sandboxed child and
reads back what that child could and could not do), so the report states measured facts, not
intentions. A layer that is not available is dropped with a ``SandboxWarning``, never silently.

Levels:
* **1**: the parent is root (CI, Colab): every completion runs as a dedicated unprivileged uid
  (one per worker slot, from ``GRPO_SANDBOX_UID_BASE``, default 60100).
* **0**: the parent is an ordinary user (a laptop): the child runs as that same user. The
  kernel limits (no fork, no threads, memory, CPU, files) and the split evaluation still hold.

At either level, where the kernel allows ``unshare(2)`` (through ``ctypes``; an ordinary user
needs unprivileged user namespaces), each completion also gets an empty network namespace, a
private IPC namespace, its own PID namespace, its own mount namespace with a private tmpfs
root (``_child.enter_private_root``) and a seccomp filter. Each layer is tried for real by
the zygote and reported on or off; ``docs/sandbox.md`` explains the design.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any

from .execute import TMPFS_BYTES, SandboxError
from .host import (
    Isolation,
    existing_shared_dirs,
    prepare_base_dir,
    temp_parent_for_uids,
    worker_slot,
    world_writable_folders,
)
from .judge import decode_value
from .portable import runner_for
from .zygote import Zygote, ZygoteError, discard_zygote

UID_BASE_DEFAULT = 60100
UID_SLOTS = 32
LANDLOCK_WANTED = 1  # "try Landlock": the zygote answers with the ABI version it got (or 0)


class SandboxWarning(RuntimeWarning):
    """An isolation layer is not available here; the sandbox runs without it."""


# The probe program: trusted code, run in a sandboxed child exactly like a candidate.
_PROBE_CODE = '''
import os, sys
def facts():
    out = {"uid": os.getuid(), "euid": os.geteuid(), "version": sys.version.split()[0]}
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out["fork"] = "allowed"
    except OSError:
        out["fork"] = "blocked"
    try:
        import _thread
        _thread.start_new_thread(int, ())
        out["threads"] = "allowed"
    except RuntimeError:
        out["threads"] = "blocked"
    try:
        import json, fractions  # modules the zygote did not load: is the stdlib readable?
        out["imports"] = "ok"
    except Exception as error:
        out["imports"] = type(error).__name__
    import socket
    probe = socket.socket()
    probe.settimeout(0.2)
    try:
        probe.connect(("127.0.0.1", 9))
        out["loopback"] = "reachable"
    except OSError as error:
        out["loopback"] = "unreachable" if error.errno == 101 else "reachable"
    probe.close()
    try:
        with open("/proc/self/status") as status:
            out["no_new_privs"] = any(l.split() == ["NoNewPrivs:", "1"] for l in status)
    except OSError:  # no /proc at all (a private root without a PID namespace)
        out["no_new_privs"] = NO_NEW_PRIVS_UNKNOWN
    out["pid"] = os.getpid()
    out["hidden"] = not any(os.path.exists(path) for path in HIDDEN)
    return out
'''


@dataclass(frozen=True)
class Facts:
    """What the probe program measured inside a sandboxed child, and interpreters passed over."""

    uid: int
    version: str
    fork_blocked: bool
    threads_blocked: bool
    network_cut: bool
    no_new_privs: bool
    imports: str = "ok"
    pid: int = 0  # the probe's own pid: 1 in a PID namespace of its own
    hidden: bool = False  # the parent's package and temporary folder were not visible  # "ok", or the error a child got importing from the standard library
    rejected: tuple[str, ...] = ()


def probe_isolation(*, allow_uid_drop: bool = True, allow_namespaces: bool = True,
                    allow_landlock: bool = True,
                    interpreters: tuple[str, ...] | None = None) -> tuple[Isolation, Facts]:
    """The strongest ``Isolation`` that works here, checked by a real sandboxed run.

    The ``allow_*`` switches exist to test the degraded levels on a machine that has more
    (Landlock needs no namespace: a container that forbids namespaces may still allow it).
    Raises ``SandboxError`` if no interpreter can run the sandbox at all.
    """
    is_root = os.geteuid() == 0
    base = Isolation(interpreter="", base_dir=prepare_base_dir(
                         temp_parent_for_uids() if is_root and allow_uid_drop else None),
                     shared_dirs=existing_shared_dirs(), network_namespace=allow_namespaces,
                     ipc_namespace=allow_namespaces, pid_namespace=allow_namespaces,
                     private_root=allow_namespaces, seccomp=allow_namespaces,
                     network_each=allow_namespaces,
                     landlock=LANDLOCK_WANTED if allow_landlock else 0)
    if is_root and allow_uid_drop:
        base = replace(base, uids=free_uids())
    if not is_root:
        base = replace(base, user_namespace=allow_namespaces)  # lets a user make the others
    rejected: list[str] = []
    for wanted in _variants(base):
        for interpreter in interpreters or interpreter_candidates():
            found = _try(replace(wanted, interpreter=interpreter), rejected)
            if found is not None:
                return found[0], replace(found[1], rejected=tuple(rejected))
    raise SandboxError("no Python interpreter could run the sandbox (" + "; ".join(rejected)
                       + "); set GRPO_SANDBOX_PYTHON to one every user may run, such as "
                       "/usr/bin/python3")


def _variants(isolation: Isolation):
    """The settings to try, strongest first; as the current user only if no interpreter can
    run as the sandbox uid."""
    yield isolation
    if isolation.uids:
        yield replace(isolation, uids=())


def _try(wanted: Isolation, rejected: list[str]) -> tuple[Isolation, Facts] | None:
    """Start a zygote as ``wanted``, keep the layers it really got, run the probe program."""
    try:
        zygote = Zygote(wanted)
    except ZygoteError as error:
        rejected.append(f"{wanted.interpreter}: {error}")
        return None
    layers = zygote.layers
    zygote.close()
    isolation = replace(wanted, interpreter_version=layers.version,
                        network_namespace=layers.network_namespace,
                        ipc_namespace=layers.ipc_namespace,
                        user_namespace=layers.user_namespace,
                        pid_namespace=layers.pid_namespace, private_root=layers.private_root,
                        seccomp=layers.seccomp, ipc_limits=layers.ipc_limits,
                        network_each=layers.network_each, landlock=layers.landlock)
    if isolation.uids and not (isolation.private_root or isolation.landlock):
        # the uid can write wherever others may: its clean-up must know every such folder
        isolation = replace(isolation, shared_dirs=world_writable_folders())
    try:
        facts = _self_test(isolation)
    except SandboxError as error:
        rejected.append(f"{wanted.interpreter}: {error}")
        return None
    problem = _problem_with(isolation, facts)
    if problem:
        rejected.append(f"{wanted.interpreter}: {problem}")
        return None
    return replace(isolation, no_new_privs=facts.no_new_privs), facts


def _problem_with(isolation: Isolation, facts: Facts | None) -> str:
    if facts is None:
        return "the probe program did not report"
    if facts.imports != "ok":
        return f"the sandbox uid cannot import the standard library ({facts.imports})"
    if isolation.uids and facts.uid not in isolation.uids:
        return f"the child runs as uid {facts.uid}, not a sandbox uid"
    return ""


def free_uids(count: int = UID_SLOTS) -> tuple[int, ...]:
    """``count`` uids (from ``GRPO_SANDBOX_UID_BASE``) that no user or group on this machine has."""
    import grp  # POSIX only, and only the Linux tiers' root level needs them
    import pwd

    start = int(os.environ.get("GRPO_SANDBOX_UID_BASE", UID_BASE_DEFAULT))
    chosen: list[int] = []
    uid = start
    while len(chosen) < count and uid < start + 10 * count:
        if not _id_exists(pwd.getpwuid, uid) and not _id_exists(grp.getgrgid, uid):
            chosen.append(uid)
        uid += 1
    return tuple(chosen)


def _id_exists(lookup, number: int) -> bool:
    """Does ``lookup`` (``getpwuid`` or ``getgrgid``) know ``number``?"""
    try:
        lookup(number)
    except KeyError:
        return False
    return True


def interpreter_candidates() -> tuple[str, ...]:
    """Interpreters to try, preferring ``GRPO_SANDBOX_PYTHON``, then ``sys.executable``."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    paths = [os.environ.get("GRPO_SANDBOX_PYTHON"), sys.executable,
             getattr(sys, "_base_executable", None), f"/usr/bin/python{version}",
             f"/usr/local/bin/python{version}", "/usr/bin/python3", "/usr/local/bin/python3"]
    found: list[str] = []
    for path in paths:
        if path and path not in found and os.path.isfile(path) and os.access(path, os.X_OK):
            found.append(path)
    return tuple(found)


def _self_test(isolation: Isolation) -> Facts | None:
    """Run the probe program under ``isolation``; what it measured, or None."""
    limits = [("RLIMIT_NPROC", 0), ("RLIMIT_AS", 1 << 30), ("RLIMIT_CORE", 0)]
    hidden = (os.path.dirname(os.path.abspath(__file__)), isolation.base_dir)
    code = f"HIDDEN = {hidden!r}\nNO_NEW_PRIVS_UNKNOWN = {isolation.seccomp!r}\n" + _PROBE_CODE
    request = {"code": code, "setup": "", "leaves": [("facts()", False)]}
    with worker_slot(isolation) as slot:
        try:
            run = runner_for(isolation)(isolation, slot, request, limits, timeout_s=10.0)
        finally:
            discard_zygote(isolation, slot)
    lines = run.data.split(b"\n")
    if len(lines) < 3 or lines[:2] != [b"R", b"K"] or not lines[2].startswith(b'[0,"v",'):
        return None
    raw: dict[str, Any] = decode_value(json.loads(lines[2])[2])
    return Facts(uid=raw["uid"], version=raw["version"], imports=raw["imports"],
                     fork_blocked=raw["fork"] == "blocked",
                     threads_blocked=raw["threads"] == "blocked",
                     network_cut=raw["loopback"] == "unreachable",
                     no_new_privs=raw["no_new_privs"], pid=raw["pid"], hidden=raw["hidden"])


def probe_portable(interpreters: tuple[str, ...] | None = None) -> tuple[Isolation, Facts]:
    """The portable tier (``portable.py``), checked by a real run of the probe program.

    Raises ``SandboxError`` if no interpreter can run it.
    """
    base = Isolation(interpreter="", portable=True, base_dir=prepare_base_dir())
    rejected: list[str] = []
    for interpreter in interpreters or interpreter_candidates():
        isolation = replace(base, interpreter=interpreter)
        try:
            facts = _self_test(isolation)
        except SandboxError as error:
            rejected.append(f"{interpreter}: {error}")
            continue
        problem = _problem_with(isolation, facts)
        if problem:
            rejected.append(f"{interpreter}: {problem}")
            continue
        return (replace(isolation, interpreter_version=facts.version),
                replace(facts, rejected=tuple(rejected)))
    raise SandboxError("no Python interpreter could run the portable sandbox ("
                       + "; ".join(rejected) + "); set GRPO_SANDBOX_PYTHON")


# ---------------------------------------------------------------- the process-wide choice

TIERS = ("auto", "linux", "portable")  # the values of GRPO_SANDBOX
WINDOWS_MESSAGE = ("The code sandbox does not run on Windows: run the course in WSL2 (the "
                   "Windows Subsystem for Linux) or in Google Colab.")


def current_platform() -> str:
    """``sys.platform`` (a function, so that a test can stand in for another system)."""
    return sys.platform


def chosen_tier() -> str:
    """``linux`` or ``portable``: ``GRPO_SANDBOX`` if it is set, else the strongest tier this
    system has (Linux: the Linux tiers; macOS and other POSIX systems: portable).

    Raises ``SandboxError`` for an unknown ``GRPO_SANDBOX``, on Windows (use WSL2 or Colab)
    and for ``GRPO_SANDBOX=linux`` on another system.
    """
    raw = os.environ.get("GRPO_SANDBOX", "")
    wanted = raw.strip().lower() or "auto"
    if wanted not in TIERS:
        raise SandboxError(f"GRPO_SANDBOX={raw!r} is not a sandbox tier: use auto (the "
                           "default), linux or portable")
    platform = current_platform()
    if platform in ("win32", "cygwin"):
        raise SandboxError(WINDOWS_MESSAGE)
    linux = platform.startswith("linux")
    if wanted == "linux" and not linux:
        raise SandboxError(f"GRPO_SANDBOX=linux, but this system is {platform}: the Linux "
                           "tiers need Linux (use GRPO_SANDBOX=portable or auto)")
    return "linux" if wanted == "linux" or (wanted == "auto" and linux) else "portable"


_active: tuple[Isolation, Facts] | None = None
_active_lock = threading.Lock()


def get_isolation() -> Isolation:
    """The isolation every ``run_tests`` call uses, chosen (``chosen_tier``) and probed on
    first use, for the whole process (warns if degraded)."""
    return _get_active()[0]


def _get_active() -> tuple[Isolation, Facts]:
    global _active
    with _active_lock:
        if _active is None:
            _active = probe_portable() if chosen_tier() == "portable" else probe_isolation()
            warn_if_degraded(isolation_report_for(*_active))
        return _active


def warn_if_degraded(report: IsolationReport) -> None:
    """One ``SandboxWarning`` per missing layer: a degraded sandbox is never silent."""
    for message in report.warnings:
        warnings.warn(message, SandboxWarning, stacklevel=3)


def isolation_report() -> IsolationReport:
    """A printable report of the isolation reached on this machine (probes on first use)."""
    return isolation_report_for(*_get_active())


@dataclass(frozen=True)
class IsolationReport:
    """What the sandbox guarantees here. ``layers``: (layer, active, how or why not)."""

    level: int
    interpreter: str
    interpreter_version: str
    layers: tuple[tuple[str, bool, str], ...]
    warnings: tuple[str, ...]
    passed_over: tuple[str, ...] = ()  # interpreters the sandbox uid could not use, and why
    tier: str = "linux"  # or "portable" (portable.py)

    def __str__(self) -> str:
        where = "portable tier (no Linux isolation layers), level 0" \
            if self.tier == "portable" else f"isolation level {self.level}"
        lines = [f"sandbox {where} "
                 f"(child interpreter {self.interpreter}, Python {self.interpreter_version})"]
        lines += [f"  [{'x' if active else ' '}] {name}: {how}"
                  for name, active, how in self.layers]
        lines += [f"  warning: {message}" for message in self.warnings]
        lines += [f"  passed over {note}" for note in self.passed_over]
        return _short_paths("\n".join(lines))


def _short_paths(text: str) -> str:
    """``text`` with the active virtual environment written ``<venv>`` and the home folder
    ``~``: the report reads the same on every machine and shows no one's folders."""
    prefixes = [(sys.prefix, "<venv>")] if sys.prefix != sys.base_prefix else []
    prefixes.append((os.path.expanduser("~"), "~"))
    for prefix, name in prefixes:
        if prefix.rstrip(os.sep):
            text = text.replace(prefix.rstrip(os.sep) + os.sep, name + os.sep)
    return text


def isolation_report_for(isolation: Isolation, facts: Facts) -> IsolationReport:
    """The report for given settings and the facts the probe measured under them."""
    layers = _portable_layers(isolation, facts) if isolation.portable \
        else _layers(isolation, facts)
    problems = [f"{name} is not available: {how}" for name, active, how in layers if not active]
    if isolation.portable:
        problems.append(PORTABLE_SUMMARY)
    elif isolation.level == 0 and isolation.private_root:
        problems.append("level 0: the candidate runs as your own user; its private root "
                        "keeps your files out of its reach, a separate uid would add a second "
                        "wall")
    elif isolation.level == 0:
        problems.append("level 0: the candidate runs as your own user and can read or change "
                        "your files, signal your processes and read their environment")
    return IsolationReport(isolation.level, isolation.interpreter, facts.version,
                           tuple(layers), tuple(problems), facts.rejected,
                           "portable" if isolation.portable else "linux")


PORTABLE_SUMMARY = (
    "portable tier: the verdict is still decided in the parent (lying values, forged records "
    "and early exits score 0), but the candidate runs as your own user with no filesystem, "
    "network or process isolation and no syscall filter: it can read and change your files "
    "(answer keys included), open network connections, signal or ptrace your processes (the "
    "trainer too) and leave files outside its working folder. Use Linux (WSL2, Colab) for the "
    "full sandbox, and only score code you would run yourself")


def _portable_layers(isolation: Isolation, facts: Facts) -> list[tuple[str, bool, str]]:
    """The portable tier's report: what it keeps, and every Linux layer it does not have."""
    cpu_from_proc = os.path.exists(f"/proc/{os.getpid()}/stat")
    tier = "portable tier: "
    return [
        ("fresh process per completion", True,
         f"{isolation.interpreter} -S -s, a new interpreter started by the parent for each "
         "completion (no fork server), PYTHONHASHSEED=0"),
        ("verdict decided in the parent", True,
         "the child returns values only; the parent decodes and judges them, and the "
         "expected values never enter the child"),
        ("separate unprivileged uid", False, tier + "the candidate runs as your own user"),
        ("no_new_privs", False, tier + "no prctl(PR_SET_NO_NEW_PRIVS)"),
        ("no network", facts.network_cut, "the network is unreachable" if facts.network_cut
         else tier + "no network namespace: it can open connections"),
        ("private IPC namespace", False, tier + "System V objects it makes outlive it"),
        ("no fork / no threads", facts.fork_blocked and facts.threads_blocked,
         "RLIMIT_NPROC=0" if facts.fork_blocked and facts.threads_blocked else
         f"fork {'blocked' if facts.fork_blocked else 'allowed'}, threads "
         f"{'blocked' if facts.threads_blocked else 'allowed'} (RLIMIT_NPROC=0 binds "
         "neither root nor, on macOS, threads)"),
        ("kernel limits", True, "the rlimits this system has, hard = soft, set by the child "
         "before the candidate runs: AS (macOS does not enforce it), CPU, FSIZE 1 MiB, "
         "NOFILE 64, CORE 0, NPROC 0"),
        ("private filesystem view", facts.hidden,
         "the project and data were not visible" if facts.hidden
         else tier + "it sees, and can change, every file your user can"),
        ("own PID namespace", False,
         tier + "it can see, signal and ptrace your processes, the trainer included"),
        ("seccomp filter", False, tier + "no syscall filter"),
        ("CPU-time budget", cpu_from_proc,
         "timeout_s of CPU, read from /proc by the parent; the wall clock (2 x timeout_s + "
         "0.25 s) only as a backstop" if cpu_from_proc else tier + "no /proc to read CPU "
         "time from: the wall clock (2 x timeout_s + 0.25 s) and RLIMIT_CPU stand in"),
        ("private working folder", True,
         f"fresh 0700 folder under {isolation.base_dir}, removed afterwards (not what it "
         "writes elsewhere)"),
        ("environment without secrets", True, "a fixed allowlist (PATH, LANG, HOME, ...); "
         "but it can read your processes' environments"),
        ("output discarded", True, "stdout and stderr go to /dev/null"),
        ("deadline from outside", True, "SIGKILL of its process group by the parent (a "
         "process that leaves the group outlives it)"),
    ]


def _layers(isolation: Isolation, facts: Facts) -> list[tuple[str, bool, str]]:
    separate = isolation.level == 1 and facts.uid in isolation.uids
    interpreter = f"{isolation.interpreter} -S -s, forked from a pristine zygote, " \
                  "PYTHONHASHSEED=0"
    return [
        ("fresh process per completion", True, interpreter),
        ("separate unprivileged uid", separate,
         f"uids {isolation.uids[0]}-{isolation.uids[-1]}, one per worker slot" if separate
         else "the parent is not root (or no interpreter runs as another uid)"),
        ("no_new_privs", facts.no_new_privs, "prctl(PR_SET_NO_NEW_PRIVS)" if facts.no_new_privs
         else "ctypes is unavailable"),
        ("no network", facts.network_cut, ("an empty network namespace of its own for each "
         "completion" if isolation.network_each else "an empty network namespace, shared by "
         "the completions of one worker slot (abstract socket names reach the next one)")
         if facts.network_cut else "no network namespace could be created"),
        ("Landlock", isolation.landlock > 0 or isolation.private_root,
         (f"ABI {isolation.landlock}: " + ("changes to files only below its working folder"
          if not isolation.private_root else "its files are in its private root")
          + ("; signals and abstract unix sockets only inside its own domain"
             if isolation.landlock >= 6 else "")) if isolation.landlock
         else "not on this kernel; not needed for files: its private root keeps them apart"
         if isolation.private_root else "this kernel has no Landlock (Linux 5.13+, enabled): "
         "the candidate can leave files in any world-writable folder it reaches"),
        ("private IPC namespace", isolation.ipc_namespace,
         "System V objects deleted after each child" + (
             "; limits near zero (1 MiB of shared memory, 4 queues, 4 semaphore sets)"
             if isolation.ipc_limits else "") if isolation.ipc_namespace
         else "no IPC namespace could be created"),
        ("no fork / no threads", facts.fork_blocked and facts.threads_blocked,
         "RLIMIT_NPROC=0 for a non-root uid" if facts.fork_blocked else
         "RLIMIT_NPROC does not bind root"),
        ("kernel limits", True, "RLIMIT_AS, CPU, FSIZE 1 MiB, NOFILE 64, CORE 0, hard = soft"),
        ("private filesystem view", isolation.private_root and facts.hidden,
         f"own mount namespace: a {TMPFS_BYTES >> 20} MiB tmpfs root (working folder, /tmp, "
         "/var/tmp, /dev/shm) with read-only system folders and standard library; the "
         "project, data and home folders are not there" if isolation.private_root
         else "no mount namespace could be created: the candidate sees the host's files"),
        ("own PID namespace", isolation.pid_namespace and facts.pid == 1,
         ("its /proc shows only the sandbox; " if isolation.private_root else
          "its processes die with it (but without a private root it sees the host's /proc)")
         + ("its processes die with it" if isolation.private_root else "")
         if isolation.pid_namespace else "no PID namespace could be created (at level 0 "
         "it needs root)" if isolation.level == 0 else "no PID namespace could be created"),
        ("seccomp filter", isolation.seccomp,
         "signals, limits, priority and scheduling only for itself; no ptrace, new "
         "namespaces, mounts, io_uring, userfaultfd, bpf, perf_event_open, System V IPC, "
         "message queues, vmsplice, io_setup, AF_VSOCK or kernel keyrings; sync(2) and "
         "syncfs(2) do nothing" if isolation.seccomp
         else "seccomp is unavailable (or an unknown architecture)"),
        ("CPU-time budget", True, "timeout_s of CPU, read from /proc by the parent; the wall "
         "clock (2 x timeout_s + 0.25 s) only as a backstop"),
        ("private working folder", True, "in its tmpfs root" if isolation.private_root
         else f"fresh 0700 folder under {isolation.base_dir}"),
        ("environment without secrets", True, "a fixed allowlist (PATH, LANG, HOME, ...)"),
        ("output discarded", True, "stdout and stderr go to /dev/null"),
        ("deadline from outside", True, "SIGKILL of the process group by the parent"),
        ("clean-up without root", True,
         "nothing to remove: the kernel frees the tmpfs" if isolation.private_root
         else "the uid removes its own files (" + ", ".join(isolation.shared_dirs) + ")"
         if isolation.level == 1 else "the working folder is removed with your own rights"),
    ]
