"""A catalogue of hostile completions, one per attack class, for ``test_hostile.py``.

Each attack's tests are written so that the attack *succeeding* would make them pass (a fork
bomb's test expects the forks to have happened, a secret reader's test expects the secret),
so a score of 0 means the sandbox stopped it. Every attack is bounded: if the sandbox were
broken it could waste a few seconds or a few GiB briefly, never harm the machine (no signal
to process groups or to -1, no fork without a cap, writes only to paths the tests create).

``${name}`` placeholders are filled from the test's context (victim paths, a port, ...).
"""

from __future__ import annotations

import os
import socket
import stat
import time
from dataclasses import dataclass
from typing import Any

ADD_TESTS = ("assert add(2, 3) == 5", "assert add(-1, 1) == 0", "assert add(10, 32) == 42")


@dataclass(frozen=True)
class Attack:
    """``level``: the isolation level the attack needs to be both safe and stopped."""

    name: str
    category: str
    code: str
    tests: tuple[str, ...] = ADD_TESTS
    level: int = 0
    followup: str = ""  # a second completion, run right after, that looks for what it left
    # why the portable tier (no namespaces, your own user) cannot stop it; "" if it does.
    # Every attack of level 1 is such a gap too: the portable tier runs at level 0.
    portable_gap: str = ""
    # a fact of the probe (probe.Facts) the portable tier needs to stop it, such as
    # "threads_blocked" (RLIMIT_NPROC=0 binds neither root nor, on macOS, threads)
    portable_needs: str = ""


ATTACKS = [
    # ------------------------------------------------------------ resources
    Attack("infinite_loop", "resources", "def add(a, b):\n    while True:\n        pass\n"),
    Attack("loop_at_import", "resources", "while True:\n    pass\n"),
    Attack("c_level_cpu_burn", "resources",
           "def add(a, b):\n    return 10 ** (10 ** 9) % 7 + a + b - 4\n"),
    Attack("regex_backtracking", "resources",
           "import re\ndef add(a, b):\n    re.match(r'(a+)+b', 'a' * 64)\n    return a + b\n"),
    Attack("memory_bomb", "resources",
           "def grab():\n    block = b'x' * (3 << 30)\n    return len(block)\n",
           ("assert grab() == 3 << 30",)),
    Attack("memory_growth", "resources",
           "def grab():\n    hoard = []\n    while len(hoard) < 3000:\n"
           "        hoard.append(bytearray(1 << 20))\n    return len(hoard)\n",
           ("assert grab() == 3000",)),
    Attack("fork_bomb_bounded", "resources",
           "import os, time\ndef forks():\n    made = 0\n    for _ in range(32):\n"
           "        try:\n            pid = os.fork()\n        except OSError:\n            break\n"
           "        if pid == 0:\n            time.sleep(20)\n            os._exit(0)\n"
           "        made += 1\n    return made\n",
           ("assert forks() == 32",), level=1),
    Attack("subprocess_spawn", "resources",
           "import subprocess, os\ndef spawn():\n    done = subprocess.run(['sleep', '20'])\n"
           "    return done.returncode + os.system('sleep 20')\n",
           ("assert spawn() == 0",), level=1),
    Attack("thread_outlives_deadline", "resources",
           "import threading, time, os\n"
           "def late():\n    time.sleep(1.5)\n    for fd in range(64):\n        try:\n"
           "            os.write(fd, b'[0,\"v\",1]\\n')\n        except OSError:\n"
           "            pass\nthreads = []\n"
           "def started():\n    t = threading.Thread(target=late)\n    t.start()\n"
           "    threads.append(t)\n    return len(threads)\n",
           ("assert started() == 1",), portable_needs="threads_blocked"),
    Attack("sleep", "resources",
           "import time\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n"),
    Attack("stdout_flood", "resources",
           "import sys\nwhile True:\n    sys.stdout.write('PASSED\\n' * 10000)\n"
           "    sys.stderr.write('3/3 tests passed\\n' * 10000)\n"),
    Attack("result_pipe_flood", "resources",
           "import os\nwhile True:\n    for fd in range(3, 8):\n        try:\n"
           "            os.write(fd, b'[0,\"v\",5]' * 8192)\n        except OSError:\n"
           "            pass\n"),
    Attack("huge_return_value", "resources", "def add(a, b):\n    return 'x' * (60 << 20)\n"),
    Attack("deep_return_value", "resources",
           "def add(a, b):\n    value = 5\n    for _ in range(100000):\n        value = [value]\n"
           "    return value\n"),
    Attack("deep_recursion_segfault", "resources",
           "import sys\nsys.setrecursionlimit(10 ** 8)\n"
           "def add(a, b):\n    return add(a, b) + 1\n"),
    Attack("ctypes_segfault", "resources",
           "import ctypes\ndef add(a, b):\n    ctypes.string_at(0)\n    return a + b\n"),
    Attack("file_size", "resources",
           "def write():\n    with open('big.bin', 'wb') as handle:\n"
           "        handle.write(b'0' * (10 << 20))\n    return 10 << 20\n",
           ("assert write() == 10 << 20",)),
    Attack("open_files", "resources",
           "def hoard():\n    handles = [open('f%d' % i, 'w') for i in range(500)]\n"
           "    return len(handles)\n",
           ("assert hoard() == 500",)),
    # ------------------------------------------------------------ reward forgery
    Attack("sys_exit_before_asserts", "forgery", "import sys\nsys.exit(0)\n"),
    Attack("sys_exit_in_function", "forgery",
           "import sys\ndef add(a, b):\n    sys.exit(0)\n"),
    Attack("os_exit_before_asserts", "forgery", "import os\nos._exit(0)\n"),
    Attack("os_exit_in_function", "forgery", "import os\ndef add(a, b):\n    os._exit(0)\n"),
    Attack("raise_base_exceptions", "forgery",
           "class Escape(BaseException):\n    pass\n"
           "def add(a, b):\n    raise {(2, 3): SystemExit(0), (-1, 1): KeyboardInterrupt()}"
           ".get((a, b), Escape())\n"),
    Attack("excepthook_and_atexit", "forgery",
           "import sys, os, atexit\nsys.excepthook = lambda *args: os._exit(0)\n"
           "atexit.register(lambda: os._exit(0))\n"
           "def add(a, b):\n    raise ValueError('no idea')\n"),
    Attack("always_equal_object", "forgery",
           "class Anything:\n    def __eq__(self, other):\n        return True\n"
           "    def __ne__(self, other):\n        return False\n"
           "    __hash__ = object.__hash__\n"
           "def add(a, b):\n    return Anything()\n",
           ADD_TESTS + ("assert not add(7, 7) != 14",)),
    Attack("lying_builtin_subclasses", "forgery",
           "class Int(int):\n    __eq__ = lambda self, other: True\n    __hash__ = int.__hash__\n"
           "class Str(str):\n    __eq__ = lambda self, other: True\n    __hash__ = str.__hash__\n"
           "class List(list):\n    __eq__ = lambda self, other: True\n"
           "def add(a, b):\n    return Int(0)\n"
           "def name():\n    return Str('nobody')\n"
           "def items():\n    return List([0])\n",
           ("assert add(2, 3) == 5", "assert name() == 'zq-name'", "assert items() == [1, 2]")),
    Attack("poisoned_builtins", "forgery",
           "import builtins\n"
           "for name in ('isinstance', 'issubclass', 'type', 'repr', 'str', 'int', 'bool',\n"
           "             'len', 'compile', 'eval', 'exec', 'enumerate', 'hex'):\n"
           "    setattr(builtins, name, lambda *args, **kwargs: 5)\n"
           "def add(a, b):\n    return -99\n"),
    Attack("settrace_hijack", "forgery",
           "import sys\nclass Anything:\n    __eq__ = lambda self, other: True\n"
           "def tracer(frame, event, arg):\n"
           "    if 'value' in frame.f_locals and frame.f_code.co_name != 'tracer':\n"
           "        frame.f_locals['value'] = Anything()\n"
           "        try:\n            import ctypes\n"
           "            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame),"
           " ctypes.c_int(0))\n        except Exception:\n            pass\n"
           "    return tracer\n"
           "sys.settrace(tracer)\nsys._getframe().f_back.f_trace = tracer\n"
           "def add(a, b):\n    return -99\n"),
    Attack("fake_verdict_on_stdout", "forgery",
           "import sys\nfor stream in (sys.stdout, sys.stderr):\n"
           "    stream.write('PASSED\\n3/3 tests passed\\n{\"passed\": 3, \"total\": 3}\\n')\n"
           "    stream.write('R\\nK\\n[0,\"v\",5]\\n[1,\"v\",0]\\n[2,\"v\",42]\\nD\\n')\n"
           "    stream.flush()\ndef add(a, b):\n    return 1\n"),
    Attack("forged_result_records", "forgery",
           "import os\nforged = (b'R\\nK\\n[0,\"b\",1]\\n[0,\"v\",{\"x\":1}]\\n[1,\"v\",{\"f\":\"nan\"}]\\n'"
           " + b'[2,\"v\",' + b'9' * 5000 + b']\\n[9,\"v\",1]\\n\\xff\\xfe garbage\\nD\\n')\n"
           "for fd in range(64):\n    try:\n        os.write(fd, forged)\n    except OSError:\n"
           "        pass\ndef add(a, b):\n    return None\n"),
    Attack("inherited_fd_tampering", "forgery",
           "import os\nfor fd in range(0, 64):\n    try:\n        os.write(fd, b'\\x00\\xff' * 100)\n"
           "    except OSError:\n        pass\n"
           "os.dup2(os.open('/dev/null', os.O_WRONLY), 3)\n"
           "def add(a, b):\n    return a + b\n"),
    Attack("caller_frame_theft", "forgery",
           "import sys\ndef secret():\n    found = []\n    frame = sys._getframe(1)\n"
           "    while frame is not None:\n"
           "        found += [c for c in frame.f_code.co_consts if isinstance(c, str)"
           " and c.startswith('zq-')]\n"
           "        found += [v for v in frame.f_locals.values() if isinstance(v, str)"
           " and 'zq-' in v]\n"
           "        frame = frame.f_back\n    return found[0] if found else None\n",
           ("assert secret() == 'zq-7f3a9c-expected'",)),
    Attack("memory_scan_theft", "forgery",
           "import gc, os\ndef secret():\n    prefix = 'zq-' + '4b1d-'\n    texts = []\n"
           "    for obj in gc.get_objects():\n"
           "        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()\n"
           "        texts += [x for x in items if isinstance(x, str)]\n"
           "    for path in ('/proc/self/cmdline', '/proc/%d/cmdline' % os.getppid(), '/proc/self/environ'):\n"
           "        try:\n            texts += open(path, 'rb').read().decode('latin-1').split('\\0')\n"
           "        except OSError:\n            pass\n"
           "    hits = [t for t in texts if t.startswith(prefix) and len(t) > len(prefix)]\n"
           "    return hits[0] if hits else None\n",
           ("assert secret() == 'zq-4b1d-' + 'hidden'",)),
    # ------------------------------------------------------------ escapes
    Attack("write_outside", "escape",
           "import os\ndef write_outside():\n    done = 0\n"
           "    for path in ('${victim_file}', '${victim_dir}/new.txt', '${tmp_target}',\n"
           "                 '/var/tmp/grpo-attack-${unique}', '/dev/shm/grpo-attack-${unique}'):\n"
           "        try:\n            with open(path, 'w') as handle:\n"
           "                handle.write('owned')\n            done += 1\n"
           "        except OSError:\n            pass\n    return done\n",
           ("assert write_outside() == 5",), level=1),
    Attack("delete_outside", "escape",
           "import os, shutil\ndef delete_outside():\n    done = 0\n"
           "    for action in (lambda: os.remove('${victim_file}'),\n"
           "                   lambda: shutil.rmtree('${victim_dir}'),\n"
           "                   lambda: os.rename('${victim_file}', '${victim_file}.moved'),\n"
           "                   lambda: os.chmod('${victim_dir}', 0o777),\n"
           "                   lambda: [os.remove(os.path.join('${base_dir}', n))"
           " for n in os.listdir('${base_dir}')]):\n"
           "        try:\n            action()\n            done += 1\n"
           "        except OSError:\n            pass\n    return done\n",
           ("assert delete_outside() == 5",), level=1),
    Attack("cleanup_symlink_trap", "escape",
           "import os\nos.symlink('${victim_dir}', 'escape')\nos.symlink('${victim_file}', 'file')\n"
           "os.makedirs('locked/inner')\nopen('locked/inner/x', 'w').write('x')\n"
           "os.chmod('locked/inner', 0)\nos.chmod('locked', 0)\n"
           "def add(a, b):\n    return -99\n", level=1),
    Attack("read_env_secrets", "escape",
           "import os\ndef leak():\n    texts = list(os.environ.values())\n"
           "    parents = [os.getppid()]\n"
           "    try:\n        parents.append(int(open('/proc/%d/stat' % os.getppid()).read()"
           ".rsplit(')', 1)[1].split()[1]))\n    except (OSError, ValueError, IndexError):\n"
           "        pass\n"
           "    for pid in ['self', '1'] + [str(p) for p in parents]:\n        try:\n"
           "            texts.append(open('/proc/%s/environ' % pid, 'rb').read()"
           ".decode('latin-1'))\n        except OSError:\n            pass\n"
           "    for text in texts:\n        start = text.find('zq-secret-')\n"
           "        if start >= 0:\n            return text[start:start + 26]\n    return None\n",
           ("assert leak() == '${secret}'",), level=1),
    Attack("read_answer_key_file", "escape",
           "def key():\n    try:\n        return open('${answer_key}').read().strip()\n"
           "    except OSError:\n        return None\n",
           ("assert key() == '${key}'",), level=1),
    Attack("network_sockets", "escape",
           "import socket\ndef connect():\n    done = 0\n    attempts = (\n"
           "        lambda: socket.create_connection(('127.0.0.1', ${port}), timeout=0.3),\n"
           "        lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x',"
           " ('127.0.0.1', ${udp_port})),\n"
           "        lambda: socket.socket(socket.AF_UNIX).connect('${unix_socket}'),\n"
           "        lambda: socket.socket(socket.AF_UNIX).connect('\\0${abstract}'),\n"
           "        lambda: socket.create_connection(('8.8.8.8', 53), timeout=0.3))\n"
           "    for attempt in attempts:\n        try:\n            attempt()\n"
           "            done += 1\n        except OSError:\n            pass\n    return done\n",
           ("assert connect() >= 1",), level=1),
    Attack("signal_the_parents", "escape",
           "import os, signal\ndef signal_parents():\n    done = 0\n    zygote = os.getppid()\n"
           "    trainer = int(open('/proc/%d/stat' % zygote).read().rsplit(')', 1)[1].split()[1])\n"
           "    for pid, sig in ((trainer, signal.SIGUSR1), (zygote, signal.SIGKILL)):\n"
           "        try:\n            os.kill(pid, sig)\n            done += 1\n"
           "        except OSError:\n            pass\n    return done\n",
           ("assert signal_parents() >= 1",), level=1),
    Attack("ptrace_and_parent_memory", "escape",
           "import ctypes, os\ndef attach():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
           "    done = 0\n    if libc.ptrace(16, os.getppid(), None, None) == 0:\n        done += 1\n"
           "    try:\n        open('/proc/%d/mem' % os.getppid(), 'rb').read(1)\n        done += 1\n"
           "    except OSError:\n        pass\n    return done\n",
           ("assert attach() >= 1",), level=1),
    Attack("ignore_signals_and_loop", "escape",
           "import signal\nfor number in range(1, 32):\n    try:\n"
           "        signal.signal(number, signal.SIG_IGN)\n    except (OSError, ValueError):\n"
           "        pass\nsignal.pthread_sigmask(signal.SIG_BLOCK, range(1, 32))\n"
           "while True:\n    pass\n"),
    Attack("raise_own_limits", "escape",
           "import os, resource\ndef escalate():\n    for limit in (resource.RLIMIT_NPROC, resource.RLIMIT_AS,"
           " resource.RLIMIT_CPU):\n        try:\n"
           "            resource.setrlimit(limit, (resource.RLIM_INFINITY,) * 2)\n"
           "        except (OSError, ValueError):\n            pass\n    try:\n"
           "        pid = os.fork()\n    except OSError:\n        return False\n"
           "    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    return True\n",
           ("assert escalate() == True",), level=1),
    Attack("become_root", "escape",
           "import os\ndef become_root():\n    for change in (lambda: os.setuid(0), lambda: os.setresuid(0, 0, 0),\n"
           "                   lambda: os.setgroups([0])):\n        try:\n            change()\n"
           "        except OSError:\n            pass\n    return os.geteuid()\n"
           "def exec_setuid():\n    for path in ('/usr/bin/su', '/bin/su', '/usr/bin/mount'):\n"
           "        if os.path.exists(path):\n            os.execv(path, [path, '--version'])\n",
           ("assert become_root() == 0", "assert exec_setuid() == 0"), level=1),
    Attack("persistence_between_completions", "escape",
           "import os\nplanted = \"PLANTED = True\\n\"\n"
           "for folder in ('.', os.environ.get('HOME', '.'), '/tmp', '/dev/shm', '/var/tmp'):\n"
           "    for name in ('sitecustomize.py', 're.py', 'json.py', 'grpo_planted.pth'):\n"
           "        try:\n            with open(os.path.join(folder, name), 'w') as handle:\n"
           "                handle.write(planted)\n        except OSError:\n            pass\n"
           "def add(a, b):\n    return -99\n",
           portable_gap="no private root: what it writes to /tmp, /var/tmp or /dev/shm stays "
                        "on the host, where the follow-up finds it",
           followup="import os, re, json\ndef add(a, b):\n"
                    "    found = hasattr(re, 'PLANTED') or hasattr(json, 'PLANTED')\n"
                    "    found = found or any(os.path.exists(os.path.join(d, 'sitecustomize.py'))"
                    " for d in ('.', '/tmp', '/dev/shm', '/var/tmp'))\n"
                    "    return a + b if found else -1\n"),
]


# ---------------------------------------------------------------- checks after an attack

def nothing_reached(ctx: Any) -> list[str]:
    """What the attack managed to touch outside the sandbox (empty when nothing)."""
    problems = []
    if ctx.signals_received:
        problems.append(f"the test process received signals {ctx.signals_received}")
    for listener in ctx.listeners:
        try:
            if listener.type == socket.SOCK_STREAM:
                listener.accept()[0].close()
            else:
                listener.recv(16)
            problems.append(f"a connection reached {listener.getsockname()!r}")
        except (BlockingIOError, OSError):
            pass
    if not ctx.victim_file.exists() or ctx.victim_file.read_text() != "precious":
        problems.append("the victim file changed")
    if sorted(p.name for p in ctx.victim_dir.iterdir()) != ["precious.txt"]:
        problems.append("the victim folder changed")
    if stat.S_IMODE(ctx.victim_dir.stat().st_mode) != 0o755:
        problems.append("the victim folder's mode changed")
    return problems


def leftovers(uid: int | None, base_dir: str) -> list[str]:
    """Processes and files the sandbox left behind for this uid and this test process."""
    from grpo_core.sandbox.host import SHARED_DIR_CANDIDATES, _pids_with_uid

    found = [f"run folder {name}" for name in os.listdir(base_dir)
             if name.startswith(f"run-{os.getpid()}-")]
    if uid is None:
        return found
    found += [f"process {pid}" for pid in _pids_with_uid(uid)]
    for folder in SHARED_DIR_CANDIDATES:
        if os.path.isdir(folder):
            found += [f"file {entry.path}" for entry in os.scandir(folder)
                      if entry.stat(follow_symlinks=False).st_uid == uid]
    return found


def wait_for_clean_ups(limit_s: float = 60.0) -> bool:
    """Wait until this process holds no sandbox slot: a clean-up that outlasted its bound
    (the backstop plus ``CLEAN_UP_GRACE_S``) goes on in the background and frees its slot when
    done (issue 50). What a completion left is judged after that, not while it is removed."""
    from grpo_core.sandbox import host

    deadline = time.monotonic() + limit_s * time_scale()
    while host._slots_in_use and time.monotonic() < deadline:
        time.sleep(0.05)
    return not host._slots_in_use


def time_scale() -> float:
    """What a test's time bound is multiplied by in this process: 1, except under
    ``make mutate`` (mutmut sets ``MUTANT_UNDER_TEST``): 30. Its first pass ("stats") runs the
    original code with every call into a mutated module recorded, about 25 times slower; its
    clean pass and the mutants run every call through mutmut's trampolines, two at a time at
    nice 10 on a machine that may be busy: the parent's parse of a million-value record, which
    is judging code (mutated), took 5.9 s of CPU there against 1 s bare. A judge or split
    mutant is killed by what it computes, not by a bound. Read at call time: the mutants run
    in processes forked from the stats run."""
    return 1.0 if os.environ.get("MUTANT_UNDER_TEST") is None else 30.0
