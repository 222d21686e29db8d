"""Issue 32, class 3, what is left of it: memory the kernel holds for a completion outside its
RSS, through the objects the filter allows (memfds, pipes, a Unix socket's queue). Each test
runs one attack through ``run_tests`` and reads what it got from its verdicts: every such
object is bounded by the kernel limits the child sets on itself (``RLIMIT_FSIZE`` per file,
``RLIMIT_NOFILE`` per table of descriptors, ``RLIMIT_AS`` per mapping), and the kernel frees
it when the completion ends.

What a completion can pin outside its RSS, measured on 3 December (kernel 6.18, root, level 1,
memory_mb 1024): 1005 MiB of memfds kept only by their (untouched) shared mappings, their
descriptors closed (RSS 14 MiB: bounded by the address space, not by the descriptors), 65
memfds of 1 MiB in flight in a socket's queue and 57 more held open: about 1.1 GiB of shared
memory in all, 123 MiB of it beyond the address-space limit, gone when the child exits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grpo_core.sandbox import FILE_SIZE_LIMIT, OPEN_FILES_LIMIT, run_tests

MiB = 1 << 20
MEMORY_MB = 256  # the attacks fill what they are allowed: keep it small

ATTACKS = '''
import errno, fcntl, os, signal, socket
MiB = 1 << 20
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a refused write then fails with EFBIG

def _error(call):
    try:
        call()
        return "allowed"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))

def _memfd():
    """A memfd holding 1 MiB, or None where memfds are refused."""
    try:
        fd = os.memfd_create("pin")
    except (OSError, AttributeError):
        return None
    os.write(fd, b"x" * MiB)
    return fd

def one_memfd():
    """How far write, ftruncate, fallocate and a write after a seek take one memfd."""
    fd, other = _memfd(), _memfd()
    if fd is None:
        return "refused"
    os.ftruncate(other, 0)
    found = [os.fstat(fd).st_size, _error(lambda: os.write(fd, b"x")),
             _error(lambda: os.ftruncate(fd, 2 * MiB)),
             _error(lambda: os.posix_fallocate(other, 0, 2 * MiB)),
             _error(lambda: (os.lseek(other, 64 * MiB, 0), os.write(other, b"x")))]
    found.append(max(os.fstat(fd).st_size, os.fstat(other).st_size))
    return found

def _hold_memfds():
    """Open memfds of 1 MiB until the next one is refused; their descriptors."""
    held = []
    while True:
        try:
            fd = _memfd()
        except OSError:
            break
        if fd is None:
            break
        held.append(fd)
    return held

def open_memfds():
    """How many memfds of 1 MiB it holds open at once."""
    held = _hold_memfds()
    for fd in held:
        os.close(fd)
    return len(held)

def memfds_in_flight():
    """How many memfds of 1 MiB it parks in a Unix socket's queue (SCM_RIGHTS), closing its
    own descriptor for each: they are the kernel's, in no descriptor table."""
    try:
        mine, other = socket.socketpair()
    except OSError:
        return 0
    sent = 0
    while sent < 4096:
        fd = _memfd()
        if fd is None:
            break
        try:
            socket.send_fds(mine, [b"x"], [fd])
        except OSError:
            break
        finally:
            os.close(fd)
        sent += 1
    mine.close(), other.close()
    return sent

def _mapper():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    return libc.mmap, ctypes.c_void_p(-1).value

def mapped_memfds():
    """How many memfds of 1 MiB it keeps by a shared mapping alone (libc's mmap: Python's
    would keep a copy of the descriptor), each descriptor closed, no page touched: memory
    in no descriptor table and in no RSS."""
    mmap, failed = _mapper()
    count = 0
    while count < 4096:
        fd = _memfd()
        if fd is None:
            break
        address = mmap(None, MiB, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        os.close(fd)
        if address in (None, failed):
            break
        count += 1
    return count

def all_at_once():
    """MiB of memfds mapped, then in flight, then held open, all at the same time."""
    mapped = mapped_memfds()
    try:
        mine, other = socket.socketpair()
    except OSError:
        mine = None
    flying = 0
    while mine is not None:
        fd = _memfd()
        if fd is None:
            break
        try:
            socket.send_fds(mine, [b"x"], [fd])
            flying += 1
        except OSError:
            break
        finally:
            os.close(fd)
    return mapped + flying + len(_hold_memfds())

def pipe_growth(largest):
    """A pipe grown to the kernel's largest size for users, then to twice that."""
    read, write = os.pipe()
    return [fcntl.fcntl(write, 1031, largest),  # F_SETPIPE_SZ: the size it got
            _error(lambda: fcntl.fcntl(write, 1031, 2 * largest))]

def pipes_filled():
    """Bytes it parks in pipes at once, each grown as far as it goes and filled."""
    ends, held = [], 0
    while True:
        try:
            read, write = os.pipe()
        except OSError:
            break
        ends += [read, write]
        for size in (64 * MiB, MiB):
            try:
                fcntl.fcntl(write, 1031, size)
                break
            except OSError:
                pass
        os.set_blocking(write, False)
        while True:
            try:
                held += os.write(write, b"x" * 65536)
            except BlockingIOError:
                break
    return held
'''


@pytest.fixture
def linux(isolation):
    if isolation.portable or not sys.platform.startswith("linux"):
        pytest.skip("memfds and pipe sizes are Linux's")
    return isolation


def attack(test: str) -> bool:
    """Run one attack's test; its verdict (the completion must have run to the end)."""
    result = run_tests(ATTACKS, [test], memory_mb=MEMORY_MB)
    assert result.status == "ok", result
    return result.verdicts[0]


def test_one_memfd_holds_at_most_the_file_size_limit(linux):
    """A memfd is a file: a write, ``ftruncate``, ``fallocate`` or a write after a seek past
    ``RLIMIT_FSIZE`` (1 MiB) is refused with EFBIG, and it stays at 1 MiB."""
    refused = ["EFBIG"] * 4
    expected = [FILE_SIZE_LIMIT, *refused, FILE_SIZE_LIMIT]
    assert attack(f"assert one_memfd() in ({expected!r}, 'refused')")


def test_open_memfds_are_bounded_by_the_open_files_limit(linux):
    """Descriptors held: fewer than ``RLIMIT_NOFILE`` (64), so at most 64 MiB of memfds."""
    assert attack(f"assert open_memfds() < {OPEN_FILES_LIMIT}")


def test_memfds_in_flight_are_bounded_by_the_open_files_limit_too(linux):
    """Descriptors passed to a socket and closed are in no table, but the kernel counts a
    user's descriptors in flight against ``RLIMIT_NOFILE`` (ETOOMANYREFS past it): at most
    65 more MiB."""
    assert attack(f"assert memfds_in_flight() <= {OPEN_FILES_LIMIT + 1}")


def test_memfds_kept_by_mappings_are_bounded_by_the_address_space(linux):
    """A memfd mapped and closed costs no descriptor and, untouched, no RSS: only the address
    space bounds how many stay (one MiB each, within ``memory_mb``)."""
    assert attack(f"assert mapped_memfds() <= {MEMORY_MB}")


def test_all_at_once_the_memfds_stay_within_the_address_space_and_two_tables(linux):
    """Mapped, in flight and held open together: at most the memory budget plus one MiB per
    descriptor and per descriptor in flight."""
    assert attack(f"assert all_at_once() <= {MEMORY_MB + 2 * OPEN_FILES_LIMIT + 1}")


def test_a_pipe_grows_to_the_kernels_user_limit_and_no_further(linux):
    """Without ``CAP_SYS_RESOURCE`` a pipe grows to ``/proc/sys/fs/pipe-max-size`` and no
    further (EPERM), so its pipes hold at most half the descriptor table times that."""
    largest = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    assert attack(f"assert pipe_growth({largest}) == [{largest}, 'EPERM']")
    assert attack(f"assert pipes_filled() <= {OPEN_FILES_LIMIT // 2 * largest}")


OOM_PROBE = ("def adj():\n    try:\n        with open('/proc/self/oom_score_adj') as f:\n"
             "            return f.read().strip()\n    except OSError:\n        return 'no /proc'\n")


def test_the_out_of_memory_killer_takes_a_completion_before_the_trainer(isolation):
    """What a completion keeps outside its RSS does not count towards its badness, so the
    sandbox's processes ask to be killed first (``oom_score_adj`` 1000, inherited from the
    zygote, or set by the portable child); the trainer keeps its own setting."""
    result = run_tests(OOM_PROBE, ["assert adj() == '1000'", "assert adj() == 'no /proc'"])
    assert result.verdicts in ((True, False), (False, True)), result
    trainer = Path("/proc/self/oom_score_adj")
    if trainer.exists():
        assert trainer.read_text().strip() != "1000"
    if result.verdicts[1]:
        pytest.skip("this tier gives the completion no /proc to read its setting from")
