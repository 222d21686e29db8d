"""The trusted code that runs in the sandbox's own interpreter: a fork server and its children.

The parent starts ``python -S -s -c <this file's text> <config>`` once per worker slot. That
process, the *zygote*, never runs candidate code and never sees any: it only forks. Each
completion runs in a brand-new process forked from it (the same idea as ``multiprocessing``'s
forkserver), which enters the sandbox before it reads its request from its own pipe. So every
completion starts from the same pristine interpreter state, and nothing of another completion
is in its memory. Only the standard library is used; ``ctypes`` (for ``unshare`` and ``prctl``)
is optional, and the parent is told which layers it got.

Control protocol on fd 0 (a Unix stream socket to the parent):
* zygote -> parent at start: ``Z`` + marshal dict of the layers it set up.
* parent -> zygote ``F``: 4-byte length + marshal dict (uid, workdir, env, limits), with two
  descriptors attached: the request pipe's read end and the result pipe's write end.
  zygote -> parent: ``P`` + 4-byte pid (or ``E`` + 4-byte errno).
* parent -> zygote ``W`` + 4-byte pid (after the parent has SIGKILLed its process group):
  the zygote reaps it, deletes any System V IPC object left in its IPC namespace, and answers
  ``S`` + 4-byte wait status.

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
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
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
    """In the freshly forked child, still privileged: drop to the sandbox before reading."""
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
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies with the zygote
        if spec["drop_caps"]:
            drop_capabilities(libc)
    if os.getppid() != zygote_pid:
        os._exit(4)
    for name, value in spec["limits"]:
        resource.setrlimit(getattr(resource, name), (value, value))
    if uid is not None and (os.getuid(), os.geteuid()) != (uid, uid):
        os._exit(3)  # the uid drop did not happen: run nothing


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


def serve(sock, libc, namespaces):
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
            reply = fork_child(spec, fds, libc, zygote_pid)
        elif command == b"W":
            status = os.waitpid(number, 0)[1]
            if namespaces["ipc"]:
                remove_ipc_objects(libc)
            reply = b"S" + struct.pack("!i", status)
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
    """Enter the shared namespaces, report the layers, then serve until EOF."""
    import gc
    import socket
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    sys.path[:] = [entry for entry in sys.path if entry and entry != "."]
    libc = load_libc()
    # No parent-death signal here: it fires when the parent *thread* that started us ends.
    # The zygote exits instead when its control socket reaches EOF (the parent is gone).
    namespaces = set_up_namespaces(config, libc)
    sock = socket.socket(fileno=0)
    layers = dict(namespaces, ctypes=libc is not None, pid=os.getpid(),
                  version=sys.version.split()[0])
    payload = marshal.dumps(layers, 4)
    sock.sendall(b"Z" + struct.pack("!i", len(payload)) + payload)
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on the next collection
    serve(sock, libc, namespaces)


if __name__ == "__main__":
    zygote_main()
