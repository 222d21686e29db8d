"""Issue 50, the fourth review's kernel layers: any TMPDIR, nothing of one completion
reachable from the next, and the system calls the filter did not name.

Mechanisms: Landlock (writes only below the working folder; signals and abstract sockets only
inside the completion's own domain), a network namespace per completion, a walk for every
world-writable folder where neither Landlock nor a private root holds, uid locks whatever
TMPDIR says, and seccomp rules for vmsplice, io_setup, POSIX message queues, AF_VSOCK and the
limit, priority and scheduling calls. The level-0 tests run as an ordinary user (``setpriv``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_third_review import REPO_ROOT, run_as_ordinary_user

from grpo_core.sandbox import _child, host, probe_isolation, run_tests

# ---------------------------------------------------------------- the filter, rule by rule

SELF, OTHER = 4242, 777


def run_filter(machine: str, name_or_number: str | int, *args: int) -> str:
    """Run the seccomp program for one system call in a small BPF interpreter: 'allow',
    'EPERM', 'ENOSYS' or 'no-op' (the child's own pid is ``SELF``)."""
    program = _child.seccomp_program(machine)
    arch = _child._SECCOMP_TABLES[machine][0]
    number = name_or_number if isinstance(name_or_number, int) else NUMBERS[name_or_number][
        0 if machine == "x86_64" else 1]
    words = {0: number, 4: arch}
    for index, value in enumerate(args):
        words[16 + 8 * index] = value & 0xFFFFFFFF
    own = {_child.SELF_PID: SELF, _child.SELF_GROUP: (-SELF) & 0xFFFFFFFF}
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        k = own.get(k, k) if code in (0x15,) else k
        if code == 0x20:
            accumulator = words.get(k, 0)
        elif code == 0x15:
            pc += jt if accumulator == k else jf
        elif code == 0x35:
            pc += jt if accumulator >= k else jf
        elif code == 0x45:
            pc += jt if accumulator & k else jf
        elif code == 0x06:
            if k == _child.SECCOMP_ALLOW:
                return "allow"
            return {_child.SECCOMP_ERRNO | _child.EPERM: "EPERM",
                    _child.SECCOMP_ERRNO | _child.ENOSYS: "ENOSYS",
                    _child.SECCOMP_ERRNO: "no-op"}[k]
        else:
            raise AssertionError(f"unknown BPF instruction {code:#x}")
        pc += 1


NUMBERS = {"vmsplice": (278, 75), "io_setup": (206, 0), "mq_open": (240, 180),
           "migrate_pages": (256, 238), "move_pages": (279, 239),
           "process_madvise": (440, 440), "prlimit64": (302, 261),
           "sched_setaffinity": (203, 122), "sched_setscheduler": (144, 119),
           "sched_setparam": (142, 118), "sched_setattr": (314, 274),
           "setpriority": (141, 140), "ioprio_set": (251, 30), "socket": (41, 198),
           "read": (0, 63), "kill": (62, 129), "getpriority": (140, 141)}
MACHINES = ("x86_64", "aarch64")


@pytest.mark.parametrize("machine", MACHINES)
def test_the_filter_refuses_the_shared_pools(machine):
    for name in ("vmsplice", "io_setup", "mq_open", "migrate_pages", "move_pages",
                 "process_madvise"):
        assert run_filter(machine, name, 0, 0) == "EPERM", name
    assert run_filter(machine, "read", 0, 0) == "allow"


@pytest.mark.parametrize("machine", MACHINES)
def test_limits_and_scheduling_name_only_the_child_itself(machine):
    for name in ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
                 "sched_setattr"):
        assert run_filter(machine, name, 0, 1) == "allow", name
        assert run_filter(machine, name, SELF, 1) == "allow", name
        assert run_filter(machine, name, OTHER, 1) == "EPERM", name
        assert run_filter(machine, name, SELF + 1, 1) == "EPERM", name


@pytest.mark.parametrize("machine", MACHINES)
def test_priority_calls_name_one_process_and_only_the_child(machine):
    prio_process, prio_pgrp, prio_user = 0, 1, 2
    assert run_filter(machine, "setpriority", prio_process, 0, 5) == "allow"
    assert run_filter(machine, "setpriority", prio_process, SELF, 5) == "allow"
    assert run_filter(machine, "setpriority", prio_process, OTHER, 5) == "EPERM"
    assert run_filter(machine, "setpriority", prio_pgrp, 0, 5) == "EPERM"
    assert run_filter(machine, "setpriority", prio_user, 0, 5) == "EPERM"
    who_process, who_pgrp, who_user = 1, 2, 3
    assert run_filter(machine, "ioprio_set", who_process, 0, 0) == "allow"
    assert run_filter(machine, "ioprio_set", who_process, OTHER, 0) == "EPERM"
    assert run_filter(machine, "ioprio_set", who_pgrp, 0, 0) == "EPERM"
    assert run_filter(machine, "ioprio_set", who_user, 0, 0) == "EPERM"
    assert run_filter(machine, "getpriority", prio_user, 0) == "allow"  # reading is harmless


@pytest.mark.parametrize("machine", MACHINES)
def test_vsock_sockets_are_refused_and_others_allowed(machine):
    af_unix, af_inet, af_vsock = 1, 2, 40
    assert run_filter(machine, "socket", af_vsock, 1, 0) == "EPERM"
    assert run_filter(machine, "socket", af_unix, 1, 0) == "allow"
    assert run_filter(machine, "socket", af_inet, 1, 0) == "allow"


@pytest.mark.parametrize("machine", MACHINES)
def test_the_older_rules_still_hold(machine):
    assert run_filter(machine, "kill", SELF, 9) == "allow"
    assert run_filter(machine, "kill", OTHER, 9) == "EPERM"


# ---------------------------------------------------------------- the filter, for real

REFUSED_CALLS = '''
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *args)
    return ctypes.get_errno() if result == -1 else 0
def refused():
    r, w = os.pipe()
    buffer = ctypes.create_string_buffer(4096)
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 4096)
    context = ctypes.c_ulong(0)
    found = {"vmsplice": errno_of(278, w, iov, 1, 0),
             "io_setup": errno_of(206, 8, ctypes.byref(context)),
             "mq_open": errno_of(240, b"leak", 0o100 | 2, 0o600, None)}
    try:
        socket.socket(40, socket.SOCK_STREAM)
        found["vsock"] = 0
    except OSError as error:
        found["vsock"] = error.errno
    return found
'''


def test_vmsplice_aio_message_queues_and_vsock_are_refused():
    if os.uname().machine != "x86_64":
        pytest.skip("the attack uses x86_64 syscall numbers")
    eperm = 1
    result = run_tests(REFUSED_CALLS, [f"assert refused() == {{'vmsplice': {eperm}, "
                                       f"'io_setup': {eperm}, 'mq_open': {eperm}, "
                                       f"'vsock': {eperm}}}"])
    assert result.fraction == 1.0, result


LEVEL0_SETTINGS = '''
import ctypes, json, os, resource, time
from concurrent.futures import ThreadPoolExecutor
from grpo_core.sandbox import get_isolation, run_tests
from grpo_core.sandbox.zygote import _zygotes
libc = ctypes.CDLL(None, use_errno=True)
add = "def add(a, b):\\n    return a + b\\n"
tests = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
with ThreadPoolExecutor(2) as pool:  # two warm slots, two zygotes
    list(pool.map(lambda _: (run_tests(add, tests), time.sleep(0.2)), range(2)))
zygotes = sorted(z.process.pid for z in _zygotes.values() if z.alive())
def settings(pid):
    return {"nice": os.getpriority(os.PRIO_PROCESS, pid),
            "fsize": list(resource.prlimit(pid, resource.RLIMIT_FSIZE)),
            "cpu": list(resource.prlimit(pid, resource.RLIMIT_CPU)),
            "affinity": sorted(os.sched_getaffinity(pid)),
            "policy": os.sched_getscheduler(pid),
            "ioprio": libc.syscall(252, 1, pid)}
before = {pid: settings(pid) for pid in [os.getpid()] + zygotes}
attack = """
import ctypes, os, resource
libc = ctypes.CDLL(None, use_errno=True)
TARGETS = %r
def attempts():
    done = []
    for pid in TARGETS:
        tries = [("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                 ("nice user", lambda: os.setpriority(os.PRIO_USER, 0, 19)),
                 ("fsize", lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, 1))),
                 ("cpu", lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (0, 0))),
                 ("affinity", lambda: os.sched_setaffinity(pid, {0})),
                 ("idle", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
                 ("ioprio", lambda: libc.syscall(251, 1, pid, 3 << 13) == 0 or 1 / 0),
                 ("ioprio user", lambda: libc.syscall(251, 3, 0, 3 << 13) == 0 or 1 / 0)]
        for name, call in tries:
            try:
                call()
                done.append(name)
            except (OSError, ZeroDivisionError):
                pass
    return done
def own():
    nicer = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 1)  # the tests may run niced
    os.setpriority(os.PRIO_PROCESS, 0, nicer)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    os.sched_setaffinity(0, os.sched_getaffinity(0))
    return os.getpriority(os.PRIO_PROCESS, 0) == nicer
def add(a, b):
    attempts()
    return a + b
""" % ([os.getpid()] + zygotes,)
with ThreadPoolExecutor(2) as pool:
    scores = list(pool.map(lambda code: run_tests(code, tests).fraction, [attack, add] * 3))
reached = run_tests(attack, ["assert attempts() == []"])
own = run_tests(attack, ["assert own()"])
time.sleep(0.2)
after = {pid: settings(pid) for pid in before if os.path.exists("/proc/%d" % pid)}
print(json.dumps({"level": get_isolation().level, "seccomp": get_isolation().seccomp,
                  "scores": scores, "nothing_reached": reached.fraction, "own": own.fraction,
                  "same": before == after, "before": str(before), "after": str(after)}))
'''


def test_without_root_a_completion_changes_no_other_process_settings():
    """Level 0 has no PID namespace: before issue 50 a completion lowered the trainer's
    file-size limit, made it SCHED_IDLE and nice 19, pinned it to one CPU, and could end a
    sibling through its CPU limit. Now these calls name only the completion itself."""
    facts = run_as_ordinary_user(LEVEL0_SETTINGS)
    if not facts["seccomp"]:
        pytest.skip("no seccomp for an ordinary user here")
    assert facts["level"] == 0
    assert facts["same"], (facts["before"], facts["after"])
    assert facts["nothing_reached"] == 1.0
    assert facts["own"] == 1.0  # its own limits and priority still work
    assert facts["scores"] == [1.0] * 6


# ---------------------------------------------------------------- nothing reaches the next one

LEAVE = '''import socket, array
def leave():
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\\0grpo-leak-{unique}")
    server.listen()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    # a cycle of in-flight descriptors keeps the listener alive after the process is gone
    b.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                        array.array("i", [server.fileno(), a.fileno()]))])
    server.close(); a.close(); b.close()
    return True
'''
REACH = '''import socket
def reach():
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect("\\0grpo-leak-{unique}")
        return True
    except OSError:
        return False
'''
NETNS = '''import os
def net():
    return os.readlink("/proc/self/ns/net")
'''


@pytest.fixture(scope="module")
def variants():
    """The kernel layers one at a time: each must close the class on its own."""
    full, _ = probe_isolation()
    netns_only, _ = probe_isolation(allow_landlock=False)
    landlock_only, _ = probe_isolation(allow_namespaces=False)
    return {"full": full, "netns": netns_only, "landlock": landlock_only}


@pytest.mark.parametrize("variant", ["full", "netns", "landlock"])
def test_an_abstract_socket_kept_alive_does_not_reach_the_next_completion(variants, variant):
    isolation = variants[variant]
    if variant == "netns" and not isolation.network_each:
        pytest.skip("no network namespace per completion here")
    if variant == "landlock" and isolation.landlock < 6:
        pytest.skip("no Landlock scopes (ABI 6) here")
    unique = secrets.token_hex(6)
    left = run_tests(LEAVE.format(unique=unique), ["assert leave()"], isolation=isolation)
    reached = run_tests(REACH.format(unique=unique), ["assert reach()"], isolation=isolation)
    assert left.fraction == 1.0 and left.uid == reached.uid  # same slot, same zygote
    assert reached.fraction == 0.0


def test_each_completion_has_a_network_namespace_of_its_own(variants):
    """Not the zygote's (which every completion of the slot shared before) nor the host's."""
    from grpo_core.sandbox.zygote import _zygotes
    isolation = variants["netns"]
    if not isolation.network_each:
        pytest.skip("no network namespace per completion here")
    run_tests(NETNS, ["assert net()"], isolation=isolation)
    shared = {os.readlink(f"/proc/{zygote.process.pid}/ns/net")
              for (settings, _), zygote in _zygotes.items() if settings == isolation}
    shared.add(os.readlink("/proc/self/ns/net"))
    result = run_tests(NETNS, [f"assert net() not in {sorted(shared)!r}",
                               "assert net().startswith('net:[')"], isolation=isolation)
    assert len(shared) == 2 and result.fraction == 1.0, (result, shared)


def test_landlock_scopes_keep_a_completion_from_the_host_abstract_sockets(variants):
    isolation = variants["landlock"]
    if isolation.landlock < 6:
        pytest.skip("no Landlock scopes (ABI 6) here")
    assert not isolation.network_namespace  # the host's network namespace: only Landlock
    unique = secrets.token_hex(6)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"\0grpo-leak-{unique}")
    listener.listen()
    try:
        code = REACH.format(unique=unique)
        assert run_tests(code, ["assert reach()"], isolation=isolation).fraction == 0.0
        without, _ = probe_isolation(allow_namespaces=False, allow_landlock=False)
        assert run_tests(code, ["assert reach()"], isolation=without).fraction == 1.0
    finally:
        listener.close()


# ---------------------------------------------------------------- any TMPDIR

PLANT = '''import os
def plant(paths):
    done = 0
    for path in paths:
        try:
            with open(path, "w") as handle:
                handle.write("planted")
            done += 1
        except OSError:
            pass
    return done
def own_folder():
    with open("here.txt", "w") as handle:
        handle.write("ok")
    with open("/dev/null", "w") as null:
        null.write("x")
    return open("here.txt").read()
'''


@pytest.fixture
def sticky_below_private():
    """A private 0755 folder (a cluster's or macOS's TMPDIR) holding a sticky 1777 folder.

    Made under /tmp whatever TMPDIR is: below a 0700 TMPDIR the sandbox uid could not reach
    the sticky folder at all (nothing to find, nothing to plant)."""
    private = Path(tempfile.mkdtemp(prefix="grpo-private-tmp-", dir="/tmp"))
    private.chmod(0o755)
    sticky = private / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    yield sticky
    shutil.rmtree(private, ignore_errors=True)


def test_with_landlock_nothing_is_written_outside_the_working_folder(sticky_below_private):
    if os.geteuid() != 0:
        pytest.skip("needs root (a separate uid)")
    isolation, _ = probe_isolation(allow_namespaces=False)
    if not isolation.landlock:
        pytest.skip("no Landlock here")
    targets = [str(sticky_below_private / "a"), "/tmp/grpo-landlock-" + secrets.token_hex(4),
               "/dev/shm/grpo-landlock-" + secrets.token_hex(4)]
    result = run_tests(PLANT, [f"assert plant({targets!r}) == 0",
                               "assert own_folder() == 'ok'"], isolation=isolation)
    assert result.fraction == 1.0, result
    assert not any(os.path.exists(path) for path in targets)


def test_without_landlock_the_sweep_finds_every_world_writable_folder(sticky_below_private):
    if os.geteuid() != 0:
        pytest.skip("needs root (a separate uid) to test the clean-up by owner")
    isolation, _ = probe_isolation(allow_namespaces=False, allow_landlock=False)
    assert str(sticky_below_private) in isolation.shared_dirs
    deeper = sticky_below_private / "open"
    deeper.mkdir()
    deeper.chmod(0o1777)
    targets = [str(sticky_below_private / "a"), str(deeper / "b")]
    result = run_tests(PLANT, [f"assert plant({targets!r}) == 2"], isolation=isolation)
    assert result.fraction == 1.0, result  # it could write there...
    assert sorted(p.name for p in sticky_below_private.rglob("*")) == ["open"]  # ...not now


def test_the_walk_enters_only_what_others_may_search(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "shared").mkdir()
    (tmp_path / "open" / "shared").chmod(0o1777)
    (tmp_path / "closed").mkdir(mode=0o700)
    (tmp_path / "closed" / "shared").mkdir()
    (tmp_path / "closed" / "shared").chmod(0o1777)
    (tmp_path / "link").symlink_to(tmp_path / "open" / "shared")
    tmp_path.chmod(0o755)
    (tmp_path / "open").chmod(0o755)
    (tmp_path / "closed").chmod(0o700)
    assert host.world_writable_folders(str(tmp_path)) == (str(tmp_path / "open" / "shared"),)


def test_uid_locks_do_not_depend_on_tmpdir(monkeypatch, tmp_path):
    before = host.uid_lock_dir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None
    try:
        assert tempfile.gettempdir() == str(tmp_path)
        assert host.uid_lock_dir() == before == f"/tmp/grpo-sandbox-{os.geteuid()}"
    finally:
        tempfile.tempdir = None


def test_the_sandbox_suite_passes_with_a_private_tmpdir(tmp_path):
    """The clean-up and layer tests, in a fresh process whose TMPDIR is a private folder."""
    private = tmp_path / "private-tmp"
    private.mkdir(mode=0o700)
    env = dict(os.environ, TMPDIR=str(private))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/sandbox/test_hostile.py", "tests/sandbox/test_third_review.py",
         "-k", "swept or clean or hostile or signals"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
