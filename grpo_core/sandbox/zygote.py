"""The parent's handle on a zygote: the small fork server each worker slot keeps.

A zygote is started once per slot (``python -S -s -c <_child.py>``, as the parent's user,
with the allowlisted environment) and lives until the parent exits. It never sees candidate
code: the parent hands it two pipe ends, it forks, and the new child reads its request from
the pipe after it has entered the sandbox. See ``_child.py`` for the protocol.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from .host import BOOTSTRAP, Isolation, Slot, sandbox_env

_REPLY_TIMEOUT_S = 10.0  # the zygote answers in microseconds; this only catches a broken one


class ZygoteError(RuntimeError):
    """The zygote died or broke the protocol."""


@dataclass(frozen=True)
class ZygoteLayers:
    """What the zygote managed to set up (reported by it at start)."""

    network_namespace: bool
    ipc_namespace: bool
    user_namespace: bool
    ctypes: bool
    version: str
    pid_namespace: bool = False
    private_root: bool = False
    seccomp: bool = False
    ipc_limits: bool = False
    network_each: bool = False
    landlock: int = 0

    def namespaces(self) -> tuple[bool | int, ...]:
        """The layers ``Isolation`` promises, in ``Isolation.promised()``'s order."""
        return (self.network_namespace, self.ipc_namespace, self.user_namespace,
                self.pid_namespace, self.private_root, self.seccomp, self.ipc_limits,
                self.network_each, self.landlock)


class Zygote:
    """One fork server. Not thread-safe: each slot (held exclusively) has its own."""

    def __init__(self, isolation: Isolation):
        config = {"net": isolation.network_namespace, "ipc": isolation.ipc_namespace,
                  "user": isolation.user_namespace, "pid_ns": isolation.pid_namespace,
                  "fs": isolation.private_root, "seccomp": isolation.seccomp,
                  "landlock": isolation.landlock > 0, "net_each": isolation.network_each,
                  "root": isolation.base_dir}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [isolation.interpreter, "-S", "-s", "-c", BOOTSTRAP,
                 marshal.dumps(config, 4).hex()],
                stdin=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=isolation.base_dir, env=sandbox_env(isolation.base_dir), close_fds=True,
                start_new_session=True)  # a Ctrl-C in the terminal is not meant for it
        except OSError as error:
            ours.close()
            raise ZygoteError(f"cannot start {isolation.interpreter}: {error}") from error
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(_REPLY_TIMEOUT_S)
        self.layers = self._read_layers()

    def _read_layers(self) -> ZygoteLayers:
        tag, size = self._read_header()
        if tag != b"Z" or not 0 < size < 4096:
            self.close()
            raise ZygoteError("the zygote did not start")
        info: dict[str, Any] = marshal.loads(self._read_exact(size))
        return ZygoteLayers(info["net"], info["ipc"], info["user"], info["ctypes"],
                            info["version"], info["pid_ns"], info["fs"], info["seccomp"],
                            info.get("ipc_limits", False), info.get("net_each", False),
                            info.get("landlock", 0))

    def spawn(self, spec: dict[str, Any], request_fd: int, result_fd: int) -> int:
        """Fork a child that will enter the sandbox described by ``spec``; returns its pid."""
        payload = marshal.dumps(spec, 4)
        self._call(lambda: socket.send_fds(
            self.sock, [b"F" + struct.pack("!i", len(payload)) + payload],
            [request_fd, result_fd]))
        tag, number = self._read_header()
        if tag != b"P":
            raise ZygoteError(f"the zygote could not fork (errno {number})")
        return number

    def reap(self, pid: int) -> int:
        """Wait for a child the caller has already SIGKILLed; returns its wait status."""
        self._call(lambda: self.sock.sendall(b"W" + struct.pack("!i", pid)))
        tag, status = self._read_header()
        if tag != b"S":
            raise ZygoteError("the zygote broke the protocol")
        return status

    def clean(self, paths: list[str], shared_dirs: tuple[str, ...], uid: int | None,
              deadline_s: float = 2.0) -> int:
        """Have a child of the zygote, with ``uid``'s own rights, empty ``paths`` and delete
        what ``uid`` owns below ``shared_dirs`` and in System V IPC; the zygote kills it after
        ``deadline_s``. Returns its wait status (0: it ran to its end)."""
        payload = marshal.dumps({"paths": paths, "shared": list(shared_dirs), "uid": uid,
                                 "deadline": deadline_s}, 4)
        self._call(lambda: self.sock.sendall(b"C" + struct.pack("!i", len(payload)) + payload))
        tag, status = self._read_header()
        if tag != b"S":
            raise ZygoteError("the zygote broke the protocol")
        return status

    def alive(self) -> bool:
        """Is the zygote process still running?"""
        return self.process.poll() is None

    def close(self) -> None:
        """Stop it (its children die with it: they have a parent-death signal)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=_REPLY_TIMEOUT_S)

    def _call(self, send) -> None:
        try:
            send()
        except OSError as error:
            raise ZygoteError(f"the zygote is gone: {error}") from error

    def _read_header(self) -> tuple[bytes, int]:
        header = self._read_exact(5)
        return header[:1], struct.unpack("!i", header[1:])[0]

    def _read_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            try:
                chunk = self.sock.recv(size - len(data))
            except OSError as error:
                raise ZygoteError(f"the zygote is gone: {error}") from error
            if not chunk:
                raise ZygoteError("the zygote is gone")
            data += chunk
        return data


# ---------------------------------------------------------------- one zygote per slot

_zygotes: dict[tuple[Isolation, int], Zygote] = {}
_owner_pid = os.getpid()
_registry_lock = threading.Lock()


def zygote_for(isolation: Isolation, slot: Slot) -> Zygote:
    """The running zygote for this slot, started (and checked) if needed.

    Raises ``ZygoteError`` if a new zygote gets fewer layers than ``isolation`` promises: the
    sandbox never runs weaker than what ``isolation_report()`` said.
    """
    global _owner_pid
    key = (isolation, slot.key)
    with _registry_lock:
        if _owner_pid != os.getpid():  # we are a forked copy: the zygotes are not ours
            _zygotes.clear()
            _owner_pid = os.getpid()
        zygote = _zygotes.get(key)
    if zygote is not None and zygote.alive():
        return zygote
    zygote = Zygote(isolation)
    promised, got = isolation.promised(), zygote.layers.namespaces()
    if got != promised:
        zygote.close()
        raise ZygoteError(f"a new zygote got namespaces {got}, not the probed {promised}")
    with _registry_lock:
        _zygotes[key] = zygote
    return zygote


def zygote_running(isolation: Isolation, slot: Slot) -> bool:
    """Has this slot a live zygote now (so that a clean-up needs no new one)?"""
    with _registry_lock:
        found = _zygotes.get((isolation, slot.key))
    return found is not None and found.alive()


def discard_zygote(isolation: Isolation, slot: Slot) -> None:
    """Stop and forget this slot's zygote (after it broke); the next use starts a new one."""
    with _registry_lock:
        zygote = _zygotes.pop((isolation, slot.key), None)
    if zygote is not None:
        zygote.close()


def close_all_zygotes() -> None:
    """Stop every zygote of this process (they also exit by themselves when it exits)."""
    with _registry_lock:
        zygotes = list(_zygotes.values()) if _owner_pid == os.getpid() else []
        _zygotes.clear()
    for zygote in zygotes:
        zygote.close()


atexit.register(close_all_zygotes)
