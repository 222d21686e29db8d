"""The trusted code that runs in the sandbox's own interpreter: a fork server and its children.

The parent starts ``python -S -s -c <this file's text> <config>`` once per worker slot. That
process, the *zygote*, never runs candidate code and never sees any: it only forks. Each
completion runs in a brand-new process forked from it (the same idea as ``multiprocessing``'s
forkserver), which enters the sandbox before it reads its request from its own pipe. So every
completion starts from the same pristine interpreter state, and nothing of another completion
is in its memory. Only the standard library is used; ``ctypes`` (for ``unshare``, ``mount``,
``prctl`` and seccomp) is optional, and the parent is told which layers it got: the zygote
tries each per-completion layer once, for real, in a throw-away child (``per_child_layers``).

Each completion is two processes. The *keeper* (forked by the zygote, trusted) makes a new
PID namespace for its child and forks the *candidate* (PID 1 there), which makes its own
mount namespace with a private tmpfs root (``enter_private_root``), drops to the sandbox uid,
loads the seccomp filter and its rlimits, then runs the request. The keeper enforces the CPU
budget and ends the way the candidate ended. Docs: ``docs/sandbox.md``.

Control protocol on fd 0 (a Unix stream socket to the parent):
* zygote -> parent at start: ``Z`` + marshal dict of the layers it set up.
* parent -> zygote ``F``: 4-byte length + marshal dict (uid, workdir, env, limits, CPU
  budget), with two descriptors attached: the request pipe's read end and the result pipe's
  write end. zygote -> parent: ``P`` + 4-byte pid of the keeper (or ``E`` + 4-byte errno).
* parent -> zygote ``W`` + 4-byte pid (after the parent has SIGKILLed its process group):
  the zygote reaps it, kills and reaps any orphan of it (the zygote is a child subreaper),
  deletes any System V IPC object left in its IPC namespace, and answers ``S`` + 4-byte wait
  status.
* parent -> zygote ``C``: 4-byte length + marshal dict (paths, shared folders, uid): only
  without a private root, a child of the zygote with that uid's own rights empties the
  working folder and removes the uid's files; answer ``S`` + its wait status.

Child records, one ASCII line each, on fd 3 (the result pipe):
``R`` ready (written by trusted code, before any candidate code runs); ``["L","<hex>"]`` loading
the candidate raised (hex of the exception type's name); ``["S","<hex>"]`` the setup code
raised; ``K`` candidate and setup loaded; ``[i,"v",<value>]`` leaf i's value in the tagged
encoding below; ``[i,"b",0|1]`` leaf i (truth context only) was not plain data, its truth
value; ``[i,"e","<hex>"]`` leaf i raised; ``D`` done.

Tagged encoding (JSON text built by hand, so ``json``'s 12 ms import is never paid): ``null``,
``true``/``false``, integers as JSON numbers, strings as JSON strings holding the hex of their
UTF-8 bytes, one-key objects ``{"f": repr}`` float, ``{"c": repr}`` complex, ``{"y": hex}``
bytes, ``{"a": hex}`` bytearray, ``{"t": [...]}`` tuple, ``{"s": [...]}`` set, ``{"z": [...]}``
frozenset, ``{"d": [[k, v], ...]}`` dict, and JSON arrays for lists. Everything after ``R``
may have been written by the candidate: the parent treats every record as a claim.
"""

# ruff: noqa: UP031 - JSON text reads better with %-formatting than with doubled braces
import marshal
import os
import resource
import struct
import sys

MAX_DEPTH = 50
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWIPC = 0x10000000, 0x40000000, 0x08000000
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
PR_SET_CHILD_SUBREAPER = 36
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MNT_DETACH = 1 << 21, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, -1)
RESULT_FD = 3


def make_encoder(max_depth=MAX_DEPTH):
    """Return ``encode(value) -> str`` for plain data; it raises ``TypeError`` for anything else.

    Subclasses of the builtin types (``Counter``, ``namedtuple``, an ``int`` with a lying
    ``__eq__``) are read through the *base* type's own methods, so the text holds the real
    stored data and no method of the candidate's class ever runs.
    """
    # every builtin is bound here, before the candidate can rebind it in ``builtins``
    _type, _issubclass = type, issubclass
    _int, _float, _complex, _str, _bytes, _bytearray = int, float, complex, str, bytes, bytearray
    _list, _tuple, _set, _frozenset, _dict = list, tuple, set, frozenset, dict
    int_repr, float_repr, complex_repr = int.__repr__, float.__repr__, complex.__repr__
    str_encode, bytes_hex = str.encode, bytes.hex
    list_iter, tuple_iter, set_iter, frozenset_iter = (
        list.__iter__, tuple.__iter__, set.__iter__, frozenset.__iter__)
    dict_items = dict.items

    def encode(value, depth=0):
        """The tagged JSON text of ``value`` (see the module docstring)."""
        kind = _type(value)
        if value is None:
            return "null"
        if kind is bool:
            return "true" if value else "false"
        if _issubclass(kind, _int):
            return int_repr(value)
        if _issubclass(kind, _float):
            return '{"f":"%s"}' % float_repr(value)
        if _issubclass(kind, _str):
            return '"%s"' % bytes_hex(str_encode(value, "utf-8", "surrogatepass"))
        if _issubclass(kind, _complex):
            return '{"c":"%s"}' % complex_repr(value)
        if _issubclass(kind, _bytes):
            return '{"y":"%s"}' % bytes_hex(value)
        if _issubclass(kind, _bytearray):
            return '{"a":"%s"}' % bytes_hex(_bytes(value))
        if depth >= max_depth:
            raise TypeError("nested too deeply")
        inner = depth + 1
        if _issubclass(kind, _list):
            return "[%s]" % ",".join([encode(item, inner) for item in list_iter(value)])
        if _issubclass(kind, _tuple):
            return '{"t":[%s]}' % ",".join([encode(item, inner) for item in tuple_iter(value)])
        if _issubclass(kind, _set):
            return '{"s":[%s]}' % ",".join([encode(item, inner) for item in set_iter(value)])
        if _issubclass(kind, _frozenset):
            return '{"z":[%s]}' % ",".join([encode(i, inner) for i in frozenset_iter(value)])
        if _issubclass(kind, _dict):
            pairs = ["[%s,%s]" % (encode(k, inner), encode(v, inner))
                     for k, v in dict_items(value)]
            return '{"d":[%s]}' % ",".join(pairs)
        raise TypeError("not plain data")

    return encode


def hex_name(error, _type=type, _str=str, _name=type.__dict__["__name__"].__get__):
    """The hex of an exception's type name (at most 80 characters of it)."""
    name = _str.__str__(_name(_type(error)))[:80]
    return _str.encode(name, "utf-8", "surrogatepass").hex()


def read_all(fd):
    """Everything readable from ``fd`` until EOF."""
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# ---------------------------------------------------------------- the candidate's process

def evaluate(request):
    """Load the candidate and the setup code, evaluate every leaf, report each on fd 3."""
    import builtins
    # bind everything this loop uses before the candidate can rebind builtins or os
    write, exit_now, to_bool = os.write, os._exit, bool
    run_exec, run_eval, run_compile, numbered = exec, eval, compile, enumerate
    not_plain = (TypeError, ValueError, RecursionError, MemoryError)
    encode = make_encoder()

    def emit(text):
        """Write one record; if the pipe is gone there is no one left to tell."""
        try:
            write(RESULT_FD, (text + "\n").encode("ascii"))
        except BaseException:
            exit_now(0)

    emit("R")
    namespace = {"__name__": "candidate", "__builtins__": builtins}
    for tag, source in (("L", request["code"]), ("S", request["setup"])):
        try:
            run_exec(run_compile(source, "<candidate>", "exec", dont_inherit=True), namespace)
        except BaseException as error:  # SystemExit and KeyboardInterrupt too
            emit('["%s","%s"]' % (tag, hex_name(error)))
            exit_now(0)
    emit("K")
    for index, (source, truth_context) in numbered(request["leaves"]):
        try:
            value = run_eval(run_compile(source, "<test>", "eval", dont_inherit=True), namespace)
            try:
                record = '[%d,"v",%s]' % (index, encode(value))
            except not_plain:
                if not truth_context:
                    raise
                record = '[%d,"b",%d]' % (index, 1 if to_bool(value) else 0)
        except BaseException as error:
            record = '[%d,"e","%s"]' % (index, hex_name(error))
        emit(record)
    emit("D")
    exit_now(0)


def enter_sandbox(spec, request_fd, result_fd, libc, zygote_pid):
    """In the freshly forked child, still privileged: set up, fork the candidate, keep it.

    This process is the *keeper*: trusted code that stays outside the candidate's PID
    namespace, enforces its CPU budget and passes its wait status on. It returns only in the
    candidate's process (the keeper's fork child), after that has entered the sandbox.
    """
    os.setsid()  # its own session and process group: the parent kills the whole group
    # park both pipe ends high first: they may arrive as 3 and 4, in either order
    os.dup2(result_fd, 1000)
    os.dup2(request_fd, 1001)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # fd 0 was the control socket
    os.dup2(1000, RESULT_FD)
    os.dup2(1001, RESULT_FD + 1)
    os.closerange(RESULT_FD + 2, 1 << 16)  # anything else inherited, the parked copies too
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies with the zygote
    if os.getppid() != zygote_pid:
        os._exit(4)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if spec["pid_ns"] and libc.unshare(CLONE_NEWPID) != 0:
        os._exit(6)  # the probe said it works: never run weaker than reported
    keeper_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        enter_candidate(spec, libc, keeper_pid)
        return
    os.close(RESULT_FD)  # only the candidate may hold the result pipe: its EOF is the end
    os.close(RESULT_FD + 1)
    keep(pid, spec["cpu_s"])


def enter_candidate(spec, libc, keeper_pid):
    """In the candidate's process: private filesystem, uid drop, seccomp, limits."""
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies with its keeper
    if not spec["pid_ns"] and os.getppid() != keeper_pid:
        os._exit(4)
    if spec["fs"]:
        enter_private_root(spec, libc)
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update(spec["env"])
    uid = spec["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # all capabilities go with uid 0
    if libc is not None:
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if spec["drop_caps"]:
            drop_capabilities(libc)
        if spec["seccomp"] and not install_seccomp(libc, spec["seccomp"]):
            os._exit(7)
    for name, value in spec["limits"]:
        resource.setrlimit(getattr(resource, name), (value, value))
    if uid is not None and (os.getuid(), os.geteuid()) != (uid, uid):
        os._exit(3)  # the uid drop did not happen: run nothing


def keep(pid, cpu_s, _exit=os._exit):
    """Wait for the candidate; SIGKILL it once it has used ``cpu_s`` seconds of CPU.

    The budget is CPU time, not wall-clock time, so a completion scores the same on a busy
    machine; the parent's wall-clock deadline is only a backstop (a sleeping candidate). The
    keeper then ends the way the candidate did, so the parent reads one wait status; a
    candidate stopped for its budget shows as killed by SIGXCPU.
    """
    import select
    import signal
    try:
        poller = select.poll()
        poller.register(os.pidfd_open(pid), select.POLLIN)
        over = False
        while True:
            left = cpu_s - cpu_seconds(pid)
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                over = True
                break
            if poller.poll(max(10, int(left * 1000) + 10)):
                break  # it exited (CPU time only grows while it runs, so wait what is left)
        status = os.waitpid(pid, 0)[1]
        if over:
            status = signal.SIGXCPU
        if os.WIFEXITED(status):
            _exit(os.WEXITSTATUS(status))
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    finally:
        _exit(120)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid, _ticks=CLOCK_TICKS):
    """User + system CPU time of a live process (all its threads), from /proc."""
    try:
        fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY)
        try:
            fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
        finally:
            os.close(fd)
        return (int(fields[11]) + int(fields[12])) / _ticks
    except (OSError, IndexError, ValueError):
        return 0.0  # gone (a zombie keeps its /proc entry): the poll sees it exit


def enter_private_root(spec, libc):
    """Give the candidate a root of its own: a size-capped tmpfs that holds read-only binds
    of the system folders and the interpreter's standard library, fresh /tmp, /var/tmp,
    /dev/shm and working folder, a few device nodes, and /proc of its own PID namespace.

    Nothing else of the host exists there (no project, no data, no home, no /run), and
    everything it can write lives in that tmpfs, which the kernel frees when the last process
    of the mount namespace exits: no clean-up runs on paths the candidate controlled.
    """
    check = make_checker(libc)
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private /")
    root = spec["root"].encode()
    options = ("size=%d,nr_inodes=%d,mode=0755" % (spec["tmpfs_bytes"], 4096)).encode()
    check(libc.mount(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, options), "tmpfs")
    base = spec["root"]
    for name, target in spec["links"]:
        os.symlink(target, base + name)
    for path in spec["binds"]:
        bind_read_only(libc, check, path, base + path, directory=True)
    os.makedirs(base + "/dev", 0o755)
    for name in ("null", "zero", "full", "random", "urandom"):
        if not os.path.exists("/dev/" + name):
            continue
        os.close(os.open(base + "/dev/" + name, os.O_CREAT | os.O_WRONLY, 0o666))
        bind_read_only(libc, check, "/dev/" + name, base + "/dev/" + name, directory=False,
                       read_only=False)
    os.symlink("/proc/self/fd", base + "/dev/fd")
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        os.makedirs(base + path, 0o755, exist_ok=True)
        os.chmod(base + path, 0o1777)
    os.makedirs(base + spec["workdir"], 0o700)
    if spec["uid"] is not None:
        os.chown(base + spec["workdir"], spec["uid"], spec["uid"])
    os.mkdir(base + "/proc", 0o555)
    if spec["pid_ns"]:  # without its own PID namespace, /proc would show the host: none
        check(libc.mount(b"proc", (base + "/proc").encode(), b"proc",
                         MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "proc")
    os.chdir(base)
    check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


def make_checker(libc):
    """``check(result, what)``: exit (status 6, nothing run) if a mount call failed."""
    def check(result, what):
        if result != 0:
            os._exit(6)
    return check


def bind_read_only(libc, check, source, target, directory, read_only=True):
    """Bind ``source`` at ``target`` (created), then make it read-only, keeping the flags the
    kernel locks on it (an unprivileged remount may not clear nosuid, nodev or noexec)."""
    if directory:
        os.makedirs(target, 0o755, exist_ok=True)
    check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), "bind")
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (MS_RDONLY if read_only else 0)
    locked = os.statvfs(target).f_flag
    for st_flag, ms_flag in ((os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
                             (os.ST_RELATIME, MS_RELATIME)):
        if locked & st_flag:
            flags |= ms_flag
    if directory:
        flags |= MS_NODEV
    check(libc.mount(None, target.encode(), None, flags, None), "read-only")


def install_seccomp(libc, program):
    """Load a seccomp filter (``program``: (code, jt, jf, k) tuples); True if the kernel took it."""
    import ctypes

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(program))(*[Filter(*row) for row in program])
    prog = Program(len(program), filters)
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0


def drop_capabilities(libc):
    """Clear every capability (they exist at level 0 inside a user namespace)."""
    import ctypes
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        os._exit(5)


def child_main(spec, request_fd, result_fd, libc, zygote_pid, _exit=os._exit):
    """Never returns: whatever happens, the child must not fall back into the zygote's loop."""
    try:
        enter_sandbox(spec, request_fd, result_fd, libc, zygote_pid)
        request = marshal.loads(read_all(RESULT_FD + 1))
        os.close(RESULT_FD + 1)
    except BaseException:
        _exit(2)
    try:
        evaluate(request)
    finally:
        _exit(1)


# ---------------------------------------------------------------- the zygote

def load_libc():
    """libc through ctypes (for unshare, prctl, capset), or None without ctypes."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None


def set_up_namespaces(config, libc):
    """Move the zygote into fresh namespaces its children share; returns what worked."""
    got = {"net": False, "ipc": False, "user": False}
    if libc is None or not (config["net"] or config["ipc"]):
        return got
    uid, gid = os.getuid(), os.getgid()
    user = CLONE_NEWUSER if config["user"] else 0
    for net, ipc in ((config["net"], config["ipc"]), (config["net"], False), (False, True)):
        flags = (CLONE_NEWNET if net else 0) | (CLONE_NEWIPC if ipc else 0)
        if flags and libc.unshare(flags | user) == 0:
            if user:
                map_own_ids(uid, gid)
            got.update(net=bool(net), ipc=bool(ipc), user=bool(user))
            return got
    return got


def map_own_ids(uid, gid):
    """Inside a new user namespace, keep our own uid and gid (an unprivileged user may)."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", "%d %d 1" % (
            uid, uid)), ("/proc/self/gid_map", "%d %d 1" % (gid, gid))):
        with open(path, "w") as handle:
            handle.write(text)


def remove_ipc_objects(libc):
    """Delete System V shared memory, queues and semaphores left in our IPC namespace."""
    for kind, remove in (("shm", lambda i: libc.shmctl(i, 0, None)),
                         ("msg", lambda i: libc.msgctl(i, 0, None)),
                         ("sem", lambda i: libc.semctl(i, 0, 0))):
        try:
            with open("/proc/sysvipc/" + kind) as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            remove(int(row.split()[1]))


def recv_exact(sock, size):
    """Exactly ``size`` bytes from the parent; exits if it is gone."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            os._exit(0)  # the parent is gone
        data += chunk
    return data


# syscalls no completion needs, by architecture: the kernel keyrings (a channel between
# completions and a per-uid quota one of them could use up) and sync(2)/syncfs(2), which
# write back the whole machine's dirty pages and keep the caller unkillable meanwhile.
_SECCOMP_TABLES = {
    "x86_64": (0xC000003E, (248, 249, 250), (162, 306)),  # add_key, request_key, keyctl; sync
    "aarch64": (0xC00000B7, (217, 218, 219), (81, 267)),
}
SECCOMP_ALLOW, SECCOMP_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1


def seccomp_program(machine=None):
    """The seccomp filter, as (code, jt, jf, k) rows, or None for an unknown architecture.

    Keyring calls fail with EPERM; sync and syncfs succeed without doing anything; any
    syscall of another ABI (i386 through int 0x80, x32) fails, so numbers mean what we think.
    """
    table = _SECCOMP_TABLES.get(machine or os.uname().machine)
    if table is None:
        return None
    arch, denied, no_ops = table
    rows = [(0x20, 0, 0, 4),  # A = seccomp_data.arch
            (0x15, 1, 0, arch),  # native: skip the next row
            (0x06, 0, 0, SECCOMP_ERRNO | EPERM),
            (0x20, 0, 0, 0),  # A = seccomp_data.nr
            (0x35, 0, 1, 0x40000000),  # x32 numbers
            (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]
    for number in denied:
        rows += [(0x15, 0, 1, number), (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]
    for number in no_ops:
        rows += [(0x15, 0, 1, number), (0x06, 0, 0, SECCOMP_ERRNO)]
    return rows + [(0x06, 0, 0, SECCOMP_ALLOW)]


def filesystem_layout():
    """What the candidate's root holds: symlinks like /bin -> usr/bin, and read-only binds
    of the system folders and of the interpreter's import path (its standard library)."""
    links, binds = [], []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            binds.append(path)
    for entry in sys.path:
        path = os.path.abspath(entry)
        inside = any(path == bound or path.startswith(bound + "/")
                     for bound in binds + [link for link, _ in links])
        if os.path.isdir(path) and not inside:
            binds.append(path)
    return links, binds


def trial(layers, libc, root, layout):
    """Does a child get these per-completion layers here? (A real fork, exit status 0.)"""
    spec = dict(layers, uid=None, workdir="/sandbox", tmpfs_bytes=1 << 20, root=root,
                links=layout[0], binds=layout[1])
    pid = os.fork()
    if pid == 0:
        try:
            if spec["pid_ns"] and libc.unshare(CLONE_NEWPID) != 0:
                os._exit(10)
            inner = os.fork() if spec["pid_ns"] else 0
            if inner:
                os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]) & 0xFF)
            if spec["pid_ns"] and os.getpid() != 1:
                os._exit(11)
            if spec["fs"]:
                enter_private_root(spec, libc)
                if os.path.exists(root) and root != "/":
                    os._exit(12)
            if spec["seccomp"]:
                libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
                if not install_seccomp(libc, spec["seccomp"]) or libc.syscall(
                        _SECCOMP_TABLES[os.uname().machine][1][2], 0, 0) != -1:
                    os._exit(13)
            os._exit(0)
        except BaseException:
            os._exit(14)
    return os.waitpid(pid, 0)[1] == 0


def per_child_layers(config, libc, layout):
    """The per-completion layers this kernel allows, each tried for real in a child."""
    layers = {"pid_ns": False, "fs": False, "seccomp": None}
    if libc is None:
        return layers
    program = seccomp_program()
    if config.get("seccomp") and program and trial(dict(layers, seccomp=program), libc,
                                                   config["root"], layout):
        layers["seccomp"] = program
    for key in ("pid_ns", "fs"):
        wanted = dict(layers, **{key: True}, seccomp=None)
        if config.get(key) and (key != "fs" or SYS_PIVOT_ROOT > 0) and \
                trial(wanted, libc, config["root"], layout):
            layers[key] = True
    return layers


def remove_as_owner(paths, shared_dirs, uid):
    """The clean-up after a child without a private root, run in a child of the zygote with
    the sandbox uid's own rights: it can remove only what that uid could remove itself, so
    no link or race the candidate set up can turn it against anything else."""
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    resource.setrlimit(resource.RLIMIT_CPU, (2, 2))  # a huge tree cannot hold the zygote
    for path in paths:
        empty_folder(path)
    if uid is None:
        return
    for folder in shared_dirs:
        for name, is_dir in owned_entries(folder, uid):
            if is_dir:
                empty_folder(os.path.join(folder, name))
                try_call(os.rmdir, os.path.join(folder, name))
            else:
                try_call(os.unlink, os.path.join(folder, name))


def owned_entries(folder, uid):
    """(name, is a real folder) of the entries ``uid`` owns directly in ``folder``."""
    import stat
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid == uid:
                    found.append((entry.name, stat.S_ISDIR(info.st_mode)))
    except OSError:
        pass
    return found


def empty_folder(path):
    """Delete everything under ``path`` (not ``path`` itself), depth-first without recursion,
    through folder descriptors opened with O_NOFOLLOW, unlocking folders chmod-ed to 0."""
    import stat
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try_call(os.chmod, path, 0o700)
    try:
        stack = [(os.open(path, flags), None)]
    except OSError:
        return
    while stack:
        fd, _ = stack[-1]
        pushed = False
        try:
            names = os.listdir(fd)
        except OSError:
            names = []
        for name in names:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                try_call(os.chmod, name, 0o700, dir_fd=fd)  # ours: only our own folders
                if try_call(os.rmdir, name, dir_fd=fd):
                    continue
                try:
                    stack.append((os.open(name, flags, dir_fd=fd), name))
                    pushed = True
                    break
                except OSError:
                    continue
            else:
                try_call(os.unlink, name, dir_fd=fd)
        if pushed or len(stack) > 100000:
            continue
        fd, name = stack.pop()
        os.close(fd)
        if stack and name is not None:
            try_call(os.rmdir, name, dir_fd=stack[-1][0])


def try_call(function, *args, **kwargs):
    """``function(*args)``; True if it worked, False on OSError."""
    try:
        function(*args, **kwargs)
        return True
    except OSError:
        return False


def end_orphans(rounds=50):
    """SIGKILL and reap every remaining child of the zygote.

    The zygote is a child subreaper and runs one completion at a time, so any child it has
    after reaping the keeper is a process of that completion that outlived it (one that left
    its process group and cleared its parent-death signal, say). They are our unreaped
    children, so their pids cannot have been reused.
    """
    path = "/proc/self/task/%d/children" % os.getpid()
    for _ in range(rounds):
        try:
            with open(path, "rb") as handle:
                pids = [int(pid) for pid in handle.read().split()]
        except (OSError, ValueError):
            pids = []
        if not pids:
            break
        for pid in pids:
            try_call(os.kill, pid, 9)
        for pid in pids:
            try_call(os.waitpid, pid, 0)
    while True:  # zombies that /proc no longer lists as children
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def clean(spec):
    """Fork the owner's clean-up, wait for it; its wait status."""
    pid = os.fork()
    if pid == 0:
        try:
            remove_as_owner(spec["paths"], spec["shared"], spec["uid"])
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def serve(sock, libc, namespaces, layers):
    """Answer the parent's commands until it goes away (see the protocol above)."""
    import socket
    zygote_pid = os.getpid()
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 5, 2)
        if not message:
            os._exit(0)
        message += recv_exact(sock, 5 - len(message))
        command, number = message[:1], struct.unpack("!i", message[1:])[0]
        if command == b"F":
            spec = marshal.loads(recv_exact(sock, number))
            spec.update(layers)  # the layers are the zygote's to apply, not the request's
            reply = fork_child(spec, fds, libc, zygote_pid)
        elif command == b"W":
            status = os.waitpid(number, 0)[1]
            end_orphans()
            if namespaces["ipc"]:
                remove_ipc_objects(libc)
            reply = b"S" + struct.pack("!i", status)
        elif command == b"C":
            reply = b"S" + struct.pack("!i", clean(marshal.loads(recv_exact(sock, number))))
        else:
            os._exit(0)
        sock.sendall(reply)


def fork_child(spec, fds, libc, zygote_pid):
    """Fork one sandboxed child; the reply for the parent (its pid, or an errno)."""
    if len(fds) != 2:
        return b"E" + struct.pack("!i", 22)
    try:
        pid = os.fork()
    except OSError as error:
        pid = -1
        code = error.errno or 1
    if pid == 0:
        child_main(spec, fds[0], fds[1], libc, zygote_pid)
    for fd in fds:
        os.close(fd)
    return b"P" + struct.pack("!i", pid) if pid > 0 else b"E" + struct.pack("!i", code)


def zygote_main():
    """Enter the shared namespaces, try the per-child layers, report them, then serve."""
    import gc
    import socket
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    sys.path[:] = [entry for entry in sys.path if entry and entry != "."]
    libc = load_libc()
    # No parent-death signal here: it fires when the parent *thread* that started us ends.
    # The zygote exits instead when its control socket reaches EOF (the parent is gone).
    namespaces = set_up_namespaces(config, libc)
    if libc is not None:  # a completion's orphans become our children, to be ended
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    links, binds = filesystem_layout()
    layers = per_child_layers(config, libc, (links, binds))
    layers.update(links=links, binds=binds, root=config["root"])
    sock = socket.socket(fileno=0)
    report = dict(namespaces, ctypes=libc is not None, pid=os.getpid(),
                  version=sys.version.split()[0], pid_ns=layers["pid_ns"], fs=layers["fs"],
                  seccomp=layers["seccomp"] is not None)
    payload = marshal.dumps(report, 4)
    sock.sendall(b"Z" + struct.pack("!i", len(payload)) + payload)
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on the next collection
    serve(sock, libc, namespaces, layers)


if __name__ == "__main__":
    zygote_main()
