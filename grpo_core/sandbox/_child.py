"""The trusted code that runs in the sandbox's own interpreter: a fork server and its children.

The parent starts ``python -S -s -c <this file's text> <config>`` once per worker slot. That
process, the *zygote*, never runs candidate code and never sees any: it only forks. Each
completion runs in a brand-new process forked from it (the same idea as ``multiprocessing``'s
forkserver), which enters the sandbox before it reads its request from its own pipe. So every
completion starts from the same pristine interpreter state, and nothing of another completion
is in its memory. Only the standard library is used; ``ctypes`` (for ``unshare``, ``mount``,
``prctl`` and seccomp) is optional, and the parent is told which layers it got: the zygote
tries each per-completion layer once, for real, in a throw-away child (``per_child_layers``).

Each completion is one process, forked by the zygote as PID 1 of a new PID namespace
(``fork_in_own_pid_namespace``). Before it reads its request it makes its own mount
namespace with a private tmpfs root (``enter_private_root``, a copy of the skeleton the
zygote built once: ``build_skeleton``) and its own network namespace, drops to the sandbox
uid, makes its own Landlock domain and loads the seccomp filter and its rlimits. The parent enforces the CPU budget from /proc. Docs: ``docs/sandbox.md``.

Control protocol on fd 0 (a Unix stream socket to the parent):
* zygote -> parent at start: ``Z`` + marshal dict of the layers it set up.
* parent -> zygote ``F``: 4-byte length + marshal dict (uid, workdir, env, limits, CPU
  budget), with two descriptors attached: the request pipe's read end and the result pipe's
  write end. zygote -> parent: ``P`` + 4-byte pid (or ``E`` + 4-byte errno).
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
import struct
import sys

try:
    import resource  # POSIX only; the portable tier runs without it where it is missing
except ImportError:
    resource = None

MAX_DEPTH = 50
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWIPC = 0x10000000, 0x40000000, 0x08000000
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
PR_SET_CHILD_SUBREAPER = 36
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MNT_DETACH = 1 << 21, 2
MACHINE = os.uname().machine if hasattr(os, "uname") else ""
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(MACHINE, -1)
RESULT_FD = 3
RANDOM_SEED = 0  # random's seed in every child (seed_random)


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

def seed_random(seed):
    """Seed ``random`` (imported by the zygote, so its state is already in every child)."""
    import random
    random.seed(seed)


def evaluate(request):
    """Load the candidate and the setup code, evaluate every leaf, report each on fd 3."""
    import builtins
    # bind everything this loop uses before the candidate can rebind builtins or os
    write, exit_now, to_bool, to_list = os.write, os._exit, bool, list
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
    # the same completion must earn the same reward in every run: a candidate that draws
    # random numbers gets the same ones each time (random would seed itself from os.urandom)
    seed_random(RANDOM_SEED)
    namespace = {"__name__": "candidate", "__builtins__": builtins}
    for tag, source in (("L", request["code"]), ("S", request["setup"])):
        try:
            run_exec(run_compile(source, "<candidate>", "exec", dont_inherit=True), namespace)
        except BaseException as error:  # SystemExit and KeyboardInterrupt too
            emit('["%s","%s"]' % (tag, hex_name(error)))
            exit_now(0)
    emit("K")
    for index, leaf in numbered(request["leaves"]):
        source, truth_context, iterable = leaf[0], leaf[1], leaf[2:3] == (True,)
        try:
            value = run_eval(run_compile(source, "<test>", "eval", dont_inherit=True), namespace)
            try:
                record = '[%d,"v",%s]' % (index, encode(value))
            except not_plain:
                if iterable:  # the parent only iterates it: a generator, a map, a view
                    record = '[%d,"v",%s]' % (index, encode(to_list(value)))
                elif not truth_context:
                    raise
                else:
                    record = '[%d,"b",%d]' % (index, 1 if to_bool(value) else 0)
        except BaseException as error:
            record = '[%d,"e","%s"]' % (index, hex_name(error))
        emit(record)
    emit("D")
    exit_now(0)


def enter_sandbox(spec, request_fd, result_fd, libc, zygote_pid):
    """In the freshly forked child, still privileged: drop into the sandbox before reading.

    With the PID-namespace layer this process is PID 1 of a namespace of its own (the zygote
    forked it that way), so every process it could make dies with it.
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
    # anything else inherited: the parked copies, and the zygote's descriptors of the host's
    # /proc and PID namespace (ways out of the sandbox), first thing
    os.closerange(RESULT_FD + 2, 1 << 16)
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies with the zygote
    if not spec["pid_ns"] and os.getppid() != zygote_pid:
        os._exit(4)  # (in its own PID namespace its parent has no pid it could see)
    if spec.get("net_each") and libc.unshare(CLONE_NEWNET) != 0:
        os._exit(6)  # issue 50: no socket or abstract name of this child reaches the next
    if spec["fs"]:
        enter_private_root(spec, libc)
    os.chdir(spec["workdir"])
    # opened while still privileged: the uid may not be able to walk the path to its folder
    allowed = () if spec["fs"] or not spec.get("landlock") else (
        os.open(".", os.O_PATH | os.O_CLOEXEC),)
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
        if spec.get("landlock") and not install_landlock(libc, spec["landlock"], allowed):
            os._exit(8)
        if spec["seccomp"] and not install_seccomp(libc, spec["seccomp"]):
            os._exit(7)
    for name, value in spec["limits"]:
        resource.setrlimit(getattr(resource, name), (value, value))
    if uid is not None and (os.getuid(), os.geteuid()) != (uid, uid):
        os._exit(3)  # the uid drop did not happen: run nothing


SCRATCH = "/scratch"  # the per-completion tmpfs, inside the skeleton
# After the zygote moves into its skeleton, it reads the host's /proc through this
# descriptor (opened before the move). Every child closes it before anything else.
HOST_PROC_FD = 1010


def build_skeleton(layout, root, libc):
    """Move this process (the zygote) into a mount namespace whose root is a small read-only
    tmpfs: read-only binds of the system folders and the interpreter's import path (its
    third-party package folders covered by empty ones), a few device nodes, symlinks for /tmp, /var/tmp and /dev/shm into ``/scratch`` and an empty
    ``/proc``. The host's /proc stays reachable to the zygote only as ``HOST_PROC_FD``.

    Built once per zygote, so each completion only copies a namespace of about ten mounts
    and mounts two (``enter_private_root``). Raises ``OSError`` if the kernel refuses a step.
    """
    check = raising_checker(libc)
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private /")
    check(libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                     b"size=1m,nr_inodes=1024,mode=0755"), "tmpfs")
    links, binds, hidden = layout
    for name, target in links:
        os.symlink(target, root + name)
    for path in binds:
        bind_read_only(libc, check, path, root + path, directory=True)
    for path in hidden:  # third-party packages: an empty, read-only folder instead
        check(libc.mount(b"tmpfs", (root + path).encode(), b"tmpfs",
                         MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                         b"size=4k,nr_inodes=1,mode=0555"), "hide packages")
    os.makedirs(root + "/dev", 0o755)
    for name in ("null", "zero", "random", "urandom"):
        if os.path.exists("/dev/" + name):
            os.close(os.open(root + "/dev/" + name, os.O_CREAT | os.O_WRONLY, 0o666))
            check(libc.mount(("/dev/" + name).encode(), (root + "/dev/" + name).encode(),
                             None, MS_BIND, None), "device")
    os.makedirs(root + "/var", 0o755, exist_ok=True)
    for path, target in (("/dev/fd", "/proc/self/fd"), ("/dev/shm", SCRATCH + "/shm"),
                         ("/tmp", SCRATCH + "/tmp"), ("/var/tmp", SCRATCH + "/tmp")):
        os.symlink(target, root + path)
    for path, mode in ((SCRATCH, 0o755), ("/proc", 0o555)):
        os.mkdir(root + path, mode)
    host = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(host, HOST_PROC_FD)
    os.close(host)
    os.chdir(root)
    check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    check(libc.mount(None, b"/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
          "read-only skeleton")


def open_host_proc(path):
    """Open ``path`` under the host's /proc (``HOST_PROC_FD`` once in the skeleton)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=HOST_PROC_FD)
    except OSError as error:
        if error.errno != 9:  # EBADF: not in a skeleton, /proc is the host's
            raise
    return os.open("/proc/" + path, os.O_RDONLY | os.O_CLOEXEC)


def enter_private_root(spec, libc):
    """Give the candidate a root of its own: a copy of the zygote's skeleton (see
    ``build_skeleton``) in a new mount namespace, with a fresh size-capped tmpfs at
    ``/scratch`` for everything it may write (working folder, /tmp, /var/tmp, /dev/shm) and
    a /proc of its own PID namespace. Two mounts, no unmount: cheap to make and to end.

    Nothing else of the host exists there (no project, no data, no home, no /run), and the
    kernel frees the tmpfs when the last process of the namespace exits: no clean-up runs on
    paths the candidate controlled.
    """
    check = make_checker(libc)
    check(libc.unshare(CLONE_NEWNS), "unshare")
    options = ("size=%d,nr_inodes=%d,mode=0755" % (spec["tmpfs_bytes"], 4096)).encode()
    check(libc.mount(b"tmpfs", SCRATCH.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
          "tmpfs")
    for name in ("tmp", "shm"):
        os.mkdir(SCRATCH + "/" + name)
        os.chmod(SCRATCH + "/" + name, 0o1777)
    os.mkdir(spec["workdir"], 0o700)
    if spec["uid"] is not None:
        os.chown(spec["workdir"], spec["uid"], spec["uid"])
    if spec["pid_ns"]:  # without its own PID namespace, /proc stays an empty folder
        check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
              "proc")


def make_checker(libc):
    """``check(result, what)``: exit (status 6, nothing run) if a mount call failed."""
    def check(result, what):
        if result != 0:
            os._exit(6)
    return check


def raising_checker(libc):
    """``check(result, what)``: raise ``OSError`` if a mount call failed."""
    import ctypes

    def check(result, what):
        if result != 0:
            raise OSError(ctypes.get_errno(), what)
    return check


def bind_read_only(libc, check, source, target, directory=True):
    """Bind ``source`` at ``target`` (created), then make it read-only, keeping the flags the
    kernel locks on it (an unprivileged remount may not clear nosuid, nodev or noexec)."""
    if directory:
        os.makedirs(target, 0o755, exist_ok=True)
    check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), "bind")
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_RDONLY
    locked = os.statvfs(target).f_flag
    for st_flag, ms_flag in ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME),
                             (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if locked & st_flag:
            flags |= ms_flag
    check(libc.mount(None, target.encode(), None, flags, None), "read-only")


def compile_seccomp(program):
    """The ctypes ``sock_fprog`` for ``program`` ((code, jt, jf, k) rows), built once in the
    zygote: a child that built it would allocate, and so copy, memory it shares. The rows
    that hold ``SELF_PID`` or ``SELF_GROUP`` are remembered, for ``install_seccomp``."""
    import ctypes

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(program))(*[Filter(*row) for row in program])
    own = [(index, row[3]) for index, row in enumerate(program)
           if row[0] == 0x15 and row[3] in (SELF_PID, SELF_GROUP)]
    return Program(len(program), filters), filters, ctypes.byref, own


def install_seccomp(libc, compiled):
    """Load a compiled seccomp filter, with this process's own pid filled in (the one
    process it may signal); True if the kernel took it."""
    prog, filters, byref, own = compiled
    pid = os.getpid()
    for index, which in own:
        filters[index].k = pid if which == SELF_PID else (-pid) & 0xFFFFFFFF
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, byref(prog), 0, 0) == 0


# Landlock (issue 50), where the kernel has it (Linux 5.13+): without a private root the
# candidate may change the filesystem only below its working folder (and write /dev/null),
# so it cannot plant a file in a world-writable folder the clean-up does not know (below a
# private TMPDIR, say); from ABI 6 on (Linux 6.12+) it can neither signal a process nor
# connect to an abstract unix socket outside its own domain, whatever its uid. Each child
# makes its own domain: nothing of the zygote's or another child's is inside it.
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
LANDLOCK_WRITE_FILE, LANDLOCK_REFER, LANDLOCK_TRUNCATE = 1 << 1, 1 << 13, 1 << 14
# WRITE_FILE, REMOVE_DIR, REMOVE_FILE and MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM} (ABI 1)
LANDLOCK_CHANGES_V1 = LANDLOCK_WRITE_FILE | sum(1 << bit for bit in range(4, 13))
LANDLOCK_SCOPES = 1 | 2  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)
LANDLOCK_WRITABLE_FILES = ("/dev/null",)


def landlock_abi(libc):
    """The kernel's Landlock ABI version; 0 without Landlock (or without ctypes)."""
    if libc is None:
        return 0
    version = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0,
                           LANDLOCK_CREATE_RULESET_VERSION)
    return max(version, 0)


def landlock_masks(abi):
    """(the filesystem rights a ruleset handles, the rights a file rule may grant, scopes)."""
    changes = LANDLOCK_CHANGES_V1 | (LANDLOCK_REFER if abi >= 2 else 0) | (
        LANDLOCK_TRUNCATE if abi >= 3 else 0)
    files = LANDLOCK_WRITE_FILE | (LANDLOCK_TRUNCATE if abi >= 3 else 0)
    return changes, files, LANDLOCK_SCOPES if abi >= 6 else 0


def compile_landlock(abi):
    """The ctypes structures a child fills and passes to Landlock, built once in the zygote
    (like ``compile_seccomp``: a child that built them would copy shared pages)."""
    import ctypes

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64),
                    ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    changes, files, scopes = landlock_masks(abi)
    return (abi, changes, files, scopes, RulesetAttr(), PathBeneath(), ctypes.byref,
            ctypes.sizeof(RulesetAttr))


def install_landlock(libc, compiled, folders):
    """Restrict this process (and all it forks) to changing the filesystem below ``folders``
    (``O_PATH`` descriptors, closed here; none: the filesystem is not restricted, only the
    scopes apply) and writing ``LANDLOCK_WRITABLE_FILES``; True if the kernel took it."""
    _abi, changes, files, scopes, attr, beneath, byref, size = compiled
    rules = [(fd, changes) for fd in folders]
    try:
        rules += [(os.open(path, os.O_PATH | os.O_CLOEXEC), files)
                  for path in LANDLOCK_WRITABLE_FILES if folders]
        attr.handled_access_fs = changes if folders else 0
        attr.handled_access_net = 0
        attr.scoped = scopes
        if not attr.handled_access_fs and not scopes:
            return True  # nothing this kernel could add
        ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, byref(attr), size, 0)
        if ruleset < 0:
            return False
        try:
            for fd, access in rules:
                beneath.allowed_access, beneath.parent_fd = access, fd
                if libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH,
                                byref(beneath), 0) != 0:
                    return False
            return libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
        finally:
            os.close(ruleset)
    finally:
        for fd, _ in rules:
            os.close(fd)


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
    got = {"net": False, "ipc": False, "user": False, "ipc_limits": False}
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
            got["ipc_limits"] = bool(ipc) and limit_ipc()
            return got
    return got


# System V IPC limits of the zygote's own IPC namespace (issue 32, class 3): memory the kernel
# holds for shared memory and semaphores shows in no process's RSS, so the out-of-memory
# killer would pick the trainer. The filter refuses System V IPC to the candidate anyway;
# these near-zero limits are the second wall (where the namespace's sysctls are writable:
# the zygote is root, or the namespace's owner maps root).
IPC_LIMITS = (("shmmax", "1048576"), ("shmall", "256"), ("shmmni", "4"), ("msgmni", "4"),
              ("msgmax", "8192"), ("msgmnb", "16384"), ("sem", "32 128 32 4"))


def limit_ipc():
    """Set ``IPC_LIMITS`` in our IPC namespace; True if every one was set."""
    done = True
    for name, value in IPC_LIMITS:
        try:
            with open("/proc/sys/kernel/" + name, "w") as handle:
                handle.write(value)
        except OSError:
            done = False
    return done


def map_own_ids(uid, gid):
    """Inside a new user namespace, keep our own uid and gid (an unprivileged user may)."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", "%d %d 1" % (
            uid, uid)), ("/proc/self/gid_map", "%d %d 1" % (gid, gid))):
        with open(path, "w") as handle:
            handle.write(text)


def remove_ipc_objects(libc, owner=None):
    """Delete System V shared memory, queues and semaphores left in our IPC namespace (or,
    with ``owner``, those that uid owns or created, in whatever namespace we are)."""
    for kind, remove in (("shm", lambda i: libc.shmctl(i, 0, None)),
                         ("msg", lambda i: libc.msgctl(i, 0, None)),
                         ("sem", lambda i: libc.semctl(i, 0, 0))):
        try:
            with open(open_host_proc("sysvipc/" + kind)) as table:
                header, *rows = table.read().splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        owners = [names.index(name) for name in ("uid", "cuid") if name in names]
        for row in rows:
            fields = row.split()
            if owner is None or any(int(fields[k]) == owner for k in owners):
                remove(int(fields[1]))


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
# Signals and other processes (issue 32, class 7): without a PID namespace of its own (an
# ordinary user's laptop), kill(2) only compares user ids, so the candidate could signal the
# trainer, every process of the user and the other slots' zygotes. The filter lets it signal
# only itself (its pid, 0 = its own process group, -pid), refuses the other ways to send a
# signal to someone else (pidfd_send_signal; fcntl F_SETOWN/F_SETOWN_EX/F_SETSIG and ioctl
# FIOSETOWN/SIOCSPGRP, which make the kernel send SIGIO, or any signal, to a chosen pid) and
# the ways to reach into another process of the same uid (ptrace, process_vm_readv/writev,
# pidfd_getfd, kcmp). Numbers: (x86_64, aarch64).
_SIGNAL_SYSCALLS = {  # syscall: the argument that names the target process
    "kill": ((62, 129), 0), "tkill": ((200, 130), 0), "tgkill": ((234, 131), 0),
    "rt_sigqueueinfo": ((129, 138), 0), "rt_tgsigqueueinfo": ((297, 240), 0),
}
_OTHER_PROCESS_SYSCALLS = {
    "pidfd_send_signal": (424, 424), "pidfd_getfd": (438, 438), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
}
# The kernel's larger attack surface (issue 32, class 4): a completion needs no namespace of
# its own (a user namespace hands it CAP_NET_ADMIN over a network namespace, the way in for
# the unprivileged nf_tables escalations, and CAP_SYS_ADMIN over mounts, such as a huge-page
# tmpfs whose memory no rlimit counts), no mount, and none of io_uring (which would also
# bypass every syscall rule here), userfaultfd, bpf or perf_event_open.
_KERNEL_SURFACE_SYSCALLS = {
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_tree_attr": (467, 467), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "userfaultfd": (323, 282), "bpf": (321, 280), "perf_event_open": (298, 241),
}
# clone(2) is allowed without a new-namespace flag (fork and threads, where RLIMIT_NPROC
# allows them); clone3(2) passes its flags in memory a filter cannot read, so it answers
# ENOSYS, and glibc falls back to clone(2) (pthread_create, posix_spawn).
CLONE_SYSCALL, CLONE3_SYSCALL = (56, 220), (435, 435)
CLONE_NEW_FLAGS = (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID
                   | 0x04000000 | 0x02000000)  # with CLONE_NEWUTS, CLONE_NEWCGROUP
# System V IPC (class 3): shared memory, queues and semaphores are memory no rlimit counts,
# and without an IPC namespace they are the host's; no completion needs them (Python's
# multiprocessing uses POSIX semaphores).
_SYSV_IPC_SYSCALLS = {
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "semget": (64, 190),
    "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192), "msgget": (68, 186),
    "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
}
_REFUSED_COMMANDS = {  # syscall: (numbers, the command argument, commands refused)
    "fcntl": ((72, 25), 1, (8, 10, 15)),  # F_SETOWN, F_SETSIG, F_SETOWN_EX
    "ioctl": ((16, 29), 1, (0x8901, 0x8902)),  # FIOSETOWN, SIOCSPGRP
    # AF_VSOCK ignores network namespaces: ports shared across slots, and on a virtual
    # machine the hypervisor host is a peer (issue 50)
    "socket": ((41, 198), 0, (40,)),
}
# Shared pools and other processes' settings (issue 50): vmsplice pins whole (huge) pages in
# a pipe, memory outside every limit; io_setup takes from the host's AIO pool (aio-max-nr);
# POSIX message queues are memory no rlimit counts that outlive the completion in the slot's
# IPC namespace; migrate_pages, move_pages and process_madvise act on another process's
# memory. Numbers: (x86_64, aarch64).
_SHARED_POOL_SYSCALLS = {
    "vmsplice": (278, 75), "io_setup": (206, 0), "mq_open": (240, 180),
    "migrate_pages": (256, 238), "move_pages": (279, 239), "process_madvise": (440, 440),
}
# A process's limits, priority and scheduling (issue 50): without a PID namespace of its own
# (level 0) the candidate could lower the trainer's file-size limit, make it SCHED_IDLE or
# nice 19, pin it to one CPU, or kill a sibling completion through its CPU limit. These calls
# may name only the child itself: a pid of 0 or its own pid; setpriority and ioprio_set only
# for one process (PRIO_PROCESS 0, IOPRIO_WHO_PROCESS 1), never a group or a user.
_OWN_PROCESS_SYSCALLS = {  # syscall: (numbers, the pid argument)
    "prlimit64": ((302, 261), 0), "sched_setparam": ((142, 118), 0),
    "sched_setscheduler": ((144, 119), 0), "sched_setaffinity": ((203, 122), 0),
    "sched_setattr": ((314, 274), 0),
}
_OWN_PROCESS_PAIRS = {  # syscall: (numbers, (which argument, its one value), the pid argument)
    "setpriority": ((141, 140), (0, 0), 1), "ioprio_set": ((251, 30), (0, 1), 1),
}
SECCOMP_ALLOW, SECCOMP_ERRNO, EPERM, ENOSYS = 0x7FFF0000, 0x00050000, 1, 38
SELF_PID, SELF_GROUP = 0x7FFFFFF0, 0x7FFFFFF1  # placeholders: the child's own pid and -pid


def _arg(index):
    """The BPF load of the low 32 bits of syscall argument ``index`` (little-endian)."""
    return (0x20, 0, 0, 16 + 8 * index)


def _allow_only(number, index, values):
    """Rows: syscall ``number`` is allowed only if argument ``index`` is one of ``values``."""
    count = len(values)
    rows = [(0x15, 0, count + 3, number), _arg(index)]
    rows += [(0x15, count - k, 0, value) for k, value in enumerate(values)]
    return rows + [(0x06, 0, 0, SECCOMP_ERRNO | EPERM), (0x06, 0, 0, SECCOMP_ALLOW)]


def _refuse_values(number, index, values):
    """Rows: syscall ``number`` fails with EPERM if argument ``index`` is one of ``values``."""
    count = len(values)
    rows = [(0x15, 0, count + 3, number), _arg(index)]
    rows += [(0x15, count - k, 0, value) for k, value in enumerate(values)]
    return rows + [(0x06, 0, 0, SECCOMP_ALLOW), (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]


def _allow_only_both(number, first, values):
    """Rows: syscall ``number`` is allowed only if argument ``first[0]`` equals ``first[1]``
    and argument ``values[0]`` is one of ``values[1]``."""
    (index_a, value_a), (index_b, allowed) = first, values
    count = len(allowed)
    rows = [(0x15, 0, count + 5, number), _arg(index_a),
            (0x15, 0, count + 1, value_a), _arg(index_b)]
    rows += [(0x15, count - k, 0, value) for k, value in enumerate(allowed)]
    return rows + [(0x06, 0, 0, SECCOMP_ERRNO | EPERM), (0x06, 0, 0, SECCOMP_ALLOW)]


def seccomp_program(machine=None):
    """The seccomp filter, as (code, jt, jf, k) rows, or None for an unknown architecture.

    Keyring calls fail with EPERM; sync and syncfs succeed without doing anything; signals
    reach only the child itself (``SELF_PID`` and ``SELF_GROUP`` are filled in by
    ``install_seccomp``); the calls that reach into another process fail; so do new
    namespaces, mounts, io_uring, userfaultfd, bpf, perf_event_open, System V IPC, POSIX
    message queues, vmsplice, io_setup and AF_VSOCK sockets (clone3 answers ENOSYS); limits,
    priority and scheduling calls name only the child itself; any syscall of another ABI
    (i386 through int 0x80, x32) fails, so numbers mean what we think.
    """
    machine = machine or MACHINE
    table = _SECCOMP_TABLES.get(machine)
    if table is None:
        return None
    column = 0 if machine == "x86_64" else 1
    arch, denied, no_ops = table
    rows = [(0x20, 0, 0, 4),  # A = seccomp_data.arch
            (0x15, 1, 0, arch),  # native: skip the next row
            (0x06, 0, 0, SECCOMP_ERRNO | EPERM),
            (0x20, 0, 0, 0),  # A = seccomp_data.nr
            (0x35, 0, 1, 0x40000000),  # x32 numbers
            (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]
    denied = tuple(denied) + tuple(
        numbers[column] for numbers in (*_OTHER_PROCESS_SYSCALLS.values(),
                                        *_KERNEL_SURFACE_SYSCALLS.values(),
                                        *_SYSV_IPC_SYSCALLS.values(),
                                        *_SHARED_POOL_SYSCALLS.values()))
    for number in denied:
        rows += [(0x15, 0, 1, number), (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]
    rows += [(0x15, 0, 1, CLONE3_SYSCALL[column]), (0x06, 0, 0, SECCOMP_ERRNO | ENOSYS),
             (0x15, 0, 4, CLONE_SYSCALL[column]), _arg(0),  # clone(flags, ...)
             (0x45, 1, 0, CLONE_NEW_FLAGS),  # JSET: any new-namespace flag
             (0x06, 0, 0, SECCOMP_ALLOW), (0x06, 0, 0, SECCOMP_ERRNO | EPERM)]
    for number in no_ops:
        rows += [(0x15, 0, 1, number), (0x06, 0, 0, SECCOMP_ERRNO)]
    for name, (numbers, index) in _SIGNAL_SYSCALLS.items():
        own = (0, SELF_PID, SELF_GROUP) if name == "kill" else (SELF_PID,)
        rows += _allow_only(numbers[column], index, own)
    for numbers, index in _OWN_PROCESS_SYSCALLS.values():
        rows += _allow_only(numbers[column], index, (0, SELF_PID))
    for numbers, which, index in _OWN_PROCESS_PAIRS.values():
        rows += _allow_only_both(numbers[column], which, (index, (0, SELF_PID)))
    for numbers, index, commands in _REFUSED_COMMANDS.values():
        rows += _refuse_values(numbers[column], index, commands)
    return rows + [(0x06, 0, 0, SECCOMP_ALLOW)]


def filesystem_layout():
    """What the candidate's root holds: symlinks like /bin -> usr/bin, read-only binds of the
    system folders and of the interpreter's import path (its standard library), and the
    third-party package folders inside those binds, to be hidden (``package_folders``)."""
    links, binds = [], []
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            binds.append(path)
    for entry in sys.path:  # under -S: the standard library and lib-dynload only
        path = os.path.abspath(entry)
        inside = any(path == bound or path.startswith(bound + "/")
                     for bound in binds + [link for link, _ in links])
        special = path == "/" or any(path == top or path.startswith(top + "/") for top in (
            "/tmp", "/var/tmp", "/dev", "/proc", "/sys", "/run", SCRATCH))
        if os.path.isdir(path) and not inside and not special:
            binds.append(path)
    return links, binds, package_folders(binds)


PACKAGE_FOLDERS = ("site-packages", "dist-packages")


def package_folders(binds):
    """The third-party package folders the binds would show (issue 32, class 5): a standard
    library folder's own ``site-packages`` (pyenv's, under a home folder that is otherwise
    private), and ``lib/python3*/{site,dist}-packages`` under each bound tree (/usr's and
    /usr/local's). The skeleton covers each with an empty read-only tmpfs: the candidate gets
    the standard library and nothing a learner installed. Real folders only (a symlink
    points somewhere the skeleton either hides or does not hold)."""
    found = []
    for top in binds:
        parents = [top]
        for lib in ("lib", "lib64", "local/lib", "local/lib64"):
            folder = os.path.join(top, lib)
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            parents += [os.path.join(folder, name) for name in names
                        if name.startswith("python3")]
        for parent in parents:
            for name in PACKAGE_FOLDERS:
                path = os.path.join(parent, name)
                if os.path.isdir(path) and not os.path.islink(path) and path not in found:
                    found.append(path)
    return found


def trial(layers, libc, root, layout):
    """Does a child get these per-completion layers here? (A real fork, exit status 0.)

    The trial process plays the zygote: with ``pid_ns`` it forks two children the way the
    zygote will, each of which must be PID 1 of a namespace of its own.
    """
    spec = dict(layers, uid=None, workdir=SCRATCH + "/work", tmpfs_bytes=1 << 20)
    pid = os.fork()
    if pid == 0:
        try:
            if spec["fs"]:
                build_skeleton(layout, root, libc)
            for _ in range(2 if spec["pid_ns"] else 1):
                inner = fork_in_own_pid_namespace(libc) if spec["pid_ns"] else os.fork()
                if inner == 0:
                    trial_child(spec, libc, root)
                if os.waitpid(inner, 0)[1] != 0:
                    os._exit(10)
            os._exit(0)
        except BaseException:
            os._exit(14)
    return os.waitpid(pid, 0)[1] == 0


def trial_child(spec, libc, root):
    """The child half of ``trial``: enter each layer, check it, exit 0 if all held."""
    try:
        os.closerange(3, 1 << 16)
        if spec["pid_ns"] and os.getpid() != 1:
            os._exit(11)
        if spec["fs"]:
            enter_private_root(spec, libc)
            if os.path.exists(root) or not os.path.isdir(spec["workdir"]):
                os._exit(12)
        if spec["seccomp"]:
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            if not install_seccomp(libc, spec["seccomp"]) or libc.syscall(
                    _SECCOMP_TABLES[MACHINE][1][2], 0, 0) != -1:
                os._exit(13)
        os._exit(0)
    except BaseException:
        os._exit(15)


def per_child_layers(config, libc, layout, namespaces):
    """The per-completion layers this kernel allows, each tried for real in a child."""
    layers = {"pid_ns": False, "fs": False, "seccomp": None, "net_each": False,
              "landlock": None}
    if libc is None:
        return layers
    program = seccomp_program()
    compiled = compile_seccomp(program) if config.get("seccomp") and program else None
    if compiled and trial(dict(layers, seccomp=compiled), libc, config["root"], layout):
        layers["seccomp"] = compiled
    for key in ("pid_ns", "fs"):
        wanted = dict(layers, **{key: True}, seccomp=None)
        if config.get(key) and (key != "fs" or SYS_PIVOT_ROOT > 0) and \
                trial(wanted, libc, config["root"], layout):
            layers[key] = True
    if namespaces["net"] and config.get("net_each") and \
            trial_alone(lambda: libc.unshare(CLONE_NEWNET) == 0):
        layers["net_each"] = True
    abi = landlock_abi(libc) if config.get("landlock") else 0
    if abi:
        landlock = compile_landlock(abi)
        if trial_alone(lambda: libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                       and install_landlock(libc, landlock, (os.open(
                           config["root"], os.O_PATH | os.O_CLOEXEC),))):
            layers["landlock"] = landlock
    return layers


def trial_alone(attempt):
    """Does ``attempt()`` return True in a forked child? (Layers a child enters by itself.)"""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if attempt() else 1)
        finally:
            os._exit(2)
    return os.waitpid(pid, 0)[1] == 0


CLEAN_UP_FILES = 32  # descriptors the clean-up may open: its walks need four at any depth


def remove_as_owner(paths, shared_dirs, uid, libc=None, cpu_s=2):
    """The clean-up after a child without a private root, run in a child of the zygote with
    the sandbox uid's own rights: it can remove only what that uid could remove itself, so
    no link or race the candidate set up can turn it against anything else.

    It sweeps by owner, not by place (issue 32, class 6): the working folders, then
    everything the uid owns anywhere below the world-writable folders (descending into every
    world-writable folder, sticky ones of other users included), then the System V shared
    memory, queues and semaphores it owns (without an IPC namespace they would outlive it).
    ``cpu_s``: its CPU limit (a later, longer round gets more: issue 50)."""
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))  # a huge tree cannot hold it
    # its walks hold a constant number of descriptors at any depth (issue 50): a low limit
    # costs nothing, and a walk that needed one per level would fail here, not loop
    resource.setrlimit(resource.RLIMIT_NOFILE, (CLEAN_UP_FILES, CLEAN_UP_FILES))
    for path in paths:
        empty_folder(path)
    if uid is None:
        return
    for folder in shared_dirs:
        sweep_owned(folder, uid)
    if libc is not None:
        remove_ipc_objects(libc, owner=uid)


def sweep_owned(top, uid, limit=100000):
    """Remove every entry ``uid`` owns below ``top``, entering only folders others may write
    in (where such an entry can be) and never following a symlink; at most ``limit``
    folders are read. Each folder is listed once: an entry that vanishes meanwhile is
    skipped, never the rest of the folder (issue 50)."""
    import stat
    stack, seen = [top], 0
    while stack and seen < limit:
        folder = stack.pop()
        seen += 1
        for name, info in listed_entries(folder):
            path = os.path.join(folder, name)
            if info.st_uid == uid:
                if stat.S_ISDIR(info.st_mode):
                    empty_folder(path)
                    try_call(os.rmdir, path)
                else:
                    try_call(os.unlink, path)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                stack.append(path)


def listed_entries(folder):
    """(name, lstat result) of each entry of ``folder`` (a path or a folder descriptor).

    An entry removed between the listing and its ``lstat`` is skipped, and the listing goes
    on: before issue 50 one such entry ended the whole folder's sweep."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    found.append((entry.name, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError:
        pass
    return found


def owned_entries(folder, uid):
    """(name, is a real folder) of the entries ``uid`` owns directly in ``folder``."""
    import stat
    return [(name, stat.S_ISDIR(info.st_mode)) for name, info in listed_entries(folder)
            if info.st_uid == uid]


# (getattr: the package is imported on Windows too, where the sandbox never runs)
FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)
EMPTY_FOLDER_PASSES = 4  # walks from the top again if a folder moved under one


def empty_folder(path, deadline=None):
    """Delete everything under ``path`` (not ``path`` itself), depth-first without recursion,
    through folder descriptors opened with O_NOFOLLOW (a symlink is removed, never
    followed), unlocking folders chmod-ed to 0; True if ``path`` is empty at the end.
    ``deadline`` (a ``time.monotonic()`` value): stop there, with False.

    It holds at most four descriptors at any depth (issue 50: one per level ran out on a
    chain of folders deeper than RLIMIT_NOFILE, and the walk then looped for ever): it goes
    down with ``openat`` and back up through ``..``, checked against the folder it came
    from. Each folder is listed once and entered at most once per pass, and an entry that
    vanishes meanwhile is skipped, so it ends in time proportional to the tree."""
    try_call(os.chmod, path, 0o700)
    try:
        top = os.open(path, FOLDER_FLAGS)
    except OSError:
        return False
    try:
        for _ in range(EMPTY_FOLDER_PASSES):
            emptied = empty_from(top, deadline)
            if emptied is not None:
                return emptied
        return False
    finally:
        os.close(top)


def empty_from(top, deadline=None):
    """One pass of ``empty_folder`` below the folder descriptor ``top``: True if the folder
    is empty at the end, False if not (or past ``deadline``), None if a folder moved during
    the walk (its ``..`` is not the folder the walk came from: a new pass starts from the
    top)."""
    fd = os.dup(top)
    try:
        here, todo, trail = folder_identity(fd), clear_folder(fd, deadline), []
        while True:
            if deadline is not None and past(deadline):
                return False
            entered = enter_next(fd, todo)
            if entered is not None:  # down: one level deeper, the parent's descriptor closed
                name, child = entered
                trail.append((here, todo, name))
                os.close(fd)
                fd = child
                here, todo = folder_identity(fd), clear_folder(fd, deadline)
                continue
            if not trail:
                return not os.listdir(fd)
            here, todo, name = trail.pop()  # up: this folder is as empty as it gets
            up = os.open("..", FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            if folder_identity(fd) != here:
                return None
            try_call(os.rmdir, name, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def past(deadline):
    """Is ``time.monotonic()`` past ``deadline``?"""
    import time
    return time.monotonic() > deadline


def folder_identity(fd):
    """(device, inode) of an open folder."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def clear_folder(fd, deadline=None):
    """Remove the files, links and empty folders directly in the folder ``fd`` (until
    ``deadline``); the names of the subfolders still there (to be entered). An entry gone
    since the listing is skipped (issue 50)."""
    import stat
    left = []
    for name, info in listed_entries(fd):
        if deadline is not None and past(deadline):  # (one rmdir can cost 2 ms on a disk)
            break
        if not stat.S_ISDIR(info.st_mode):
            try_call(os.unlink, name, dir_fd=fd)
            continue
        try_call(os.chmod, name, 0o700, dir_fd=fd)  # ours: only our own folders
        if not try_call(os.rmdir, name, dir_fd=fd):
            left.append(name)
    return left


def enter_next(fd, todo):
    """Open the next of the subfolders ``todo`` of folder ``fd`` that can still be opened
    (O_NOFOLLOW: a symlink swapped in is not followed): (its name, its descriptor), or None
    once there is none left."""
    while todo:
        name = todo.pop()
        try:
            return name, os.open(name, FOLDER_FLAGS, dir_fd=fd)
        except OSError:  # gone, or not a folder of ours: nothing to enter
            continue
    return None


def try_call(function, *args, **kwargs):
    """``function(*args)``; True if it worked, False on OSError."""
    try:
        function(*args, **kwargs)
        return True
    except OSError:
        return False


PID_NS_FD = 1011  # the zygote's own PID namespace, to come back to after each fork


def fork_in_own_pid_namespace(libc):
    """``os.fork()``, with the child as PID 1 of a new PID namespace.

    ``unshare(CLONE_NEWPID)`` moves only the caller's *future* children, once; ``setns`` back
    to our own namespace makes the next ``unshare`` possible. One fork per completion, no
    helper process (a root zygote only: ``setns`` needs CAP_SYS_ADMIN over that namespace).
    """
    import ctypes
    if libc.unshare(CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
    try:
        return os.fork()
    finally:
        if os.getpid() != 1 and libc.setns(PID_NS_FD, CLONE_NEWPID) != 0:
            os._exit(9)  # the zygote cannot reset its PID namespace: stop, a new one starts


def end_orphans(rounds=50):
    """SIGKILL and reap every remaining child of the zygote.

    The zygote is a child subreaper and runs one completion at a time, so any child it has
    after reaping the child is a process of that completion that outlived it (one that left
    its process group and cleared its parent-death signal, say). They are our unreaped
    children, so their pids cannot have been reused.
    """
    path = "self/task/%d/children" % os.getpid()
    for _ in range(rounds):
        try:
            with open(open_host_proc(path), "rb") as handle:
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


def clean(spec, libc):
    """Fork the owner's clean-up and wait for it, at most ``spec["deadline"]`` seconds (then
    it is killed: the parent finishes it later, with the slot kept busy); its wait status,
    0 only if it ran to its end."""
    import time
    pid = os.fork()
    if pid == 0:
        try:
            if libc is not None:
                libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # it dies with the zygote
            remove_as_owner(spec["paths"], spec["shared"], spec["uid"], libc,
                            max(2, int(spec.get("deadline", 2.0)) + 1))
            os._exit(0)
        finally:
            os._exit(1)
    deadline, pause = time.monotonic() + spec.get("deadline", 2.0), 0.0005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= deadline:
            try_call(os.kill, pid, 9)
            return os.waitpid(pid, 0)[1]
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


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
            spec = marshal.loads(recv_exact(sock, number))
            reply = b"S" + struct.pack("!i", clean(spec, libc))
        else:
            os._exit(0)
        sock.sendall(reply)


def fork_child(spec, fds, libc, zygote_pid):
    """Fork one sandboxed child; the reply for the parent (its pid, or an errno)."""
    if len(fds) != 2:
        return b"E" + struct.pack("!i", 22)
    pid, code = -1, 1
    try:
        pid = fork_in_own_pid_namespace(libc) if spec["pid_ns"] else os.fork()
    except OSError as error:
        code = error.errno or 1
    if pid == 0:
        child_main(spec, fds[0], fds[1], libc, zygote_pid)
    for fd in fds:
        os.close(fd)
    return b"P" + struct.pack("!i", pid) if pid > 0 else b"E" + struct.pack("!i", code)


def volunteer_for_the_oom_killer():
    """Ask the kernel's out-of-memory killer to take this process (and every process forked
    from it, which inherits the setting) before any other: memory a completion pins outside
    its resident set (a shared mapping of a memfd whose descriptor it closed) does not count
    towards a process's badness, so without this the killer would pick the trainer. Raising
    one's own ``oom_score_adj`` needs no privilege; where /proc is missing nothing changes."""
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass


def zygote_main():
    """Enter the shared namespaces, try the per-child layers, report them, then serve."""
    import gc
    import socket
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    sys.path[:] = [entry for entry in sys.path if entry and entry != "."]
    libc = load_libc()
    volunteer_for_the_oom_killer()  # before the namespaces: the host's /proc is still here
    # No parent-death signal here: it fires when the parent *thread* that started us ends.
    # The zygote exits instead when its control socket reaches EOF (the parent is gone).
    namespaces = set_up_namespaces(config, libc)
    if libc is not None:  # a completion's orphans become our children, to be ended
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    layout = filesystem_layout()
    with_fd = os.open("/proc/self/ns/pid", os.O_RDONLY)  # before the skeleton hides /proc
    os.dup2(with_fd, PID_NS_FD)
    os.close(with_fd)
    layers = per_child_layers(config, libc, layout, namespaces)
    if layers["fs"]:
        try:
            build_skeleton(layout, config["root"], libc)
        except OSError:  # the trial passed, so this should not happen: run without it
            layers["fs"] = False
            libc.umount2(config["root"].encode(), MNT_DETACH)
    sock = socket.socket(fileno=0)
    report = dict(namespaces, ctypes=libc is not None, pid=os.getpid(),
                  version=sys.version.split()[0], pid_ns=layers["pid_ns"], fs=layers["fs"],
                  seccomp=layers["seccomp"] is not None, net_each=layers["net_each"],
                  landlock=layers["landlock"][0] if layers["landlock"] else 0)
    payload = marshal.dumps(report, 4)
    sock.sendall(b"Z" + struct.pack("!i", len(payload)) + payload)
    import random  # noqa: F401  (once here, not in every child: each child seeds it)
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on the next collection
    serve(sock, libc, namespaces, layers)


# ---------------------------------------------------------------- the portable tier

def set_limits(limits):
    """The portable child's rlimits (hard = soft), each where this system has and accepts it;
    the names of those it could not set."""
    missing = []
    for name, value in limits:
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (AttributeError, ValueError, OSError):  # no such limit here, or refused
            missing.append(name)
    return missing


def portable_main():
    """The portable tier's child (``python -S -s -c <this file> portable <config>``): one
    fresh interpreter per completion, started by the parent itself. Its stdout is the result
    pipe (moved to fd 3 first thing), its stdin the request; then both become /dev/null, the
    rlimits the system has are set, and the candidate runs exactly as in the Linux tiers."""
    os.dup2(1, RESULT_FD)
    volunteer_for_the_oom_killer()
    config = marshal.loads(bytes.fromhex(sys.argv[2]))
    sys.path[:] = [entry for entry in sys.path if entry and entry != "."]
    request = marshal.loads(read_all(0))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(RESULT_FD + 1, 1 << 16)
    if resource is not None:
        set_limits(config["limits"])
    evaluate(request)


if __name__ == "__main__":
    if sys.argv[1:2] == ["portable"]:
        portable_main()
    else:
        zygote_main()
