"""Fixtures for the hostile suite: victims to protect, listeners to probe, traps to notice."""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grpo_core.sandbox import get_isolation, isolation_report, run_tests


@dataclass
class Context:
    """Everything an attack may aim at, and what the test checks afterwards."""

    values: dict[str, str]
    victim_dir: Path
    victim_file: Path
    answer_key: Path
    signals_received: list[int] = field(default_factory=list)
    listeners: list[socket.socket] = field(default_factory=list)


@pytest.fixture(scope="session")
def isolation():
    """The probed isolation, with a warm zygote, so the attacks' timings measure only them."""
    run_tests("def add(a, b):\n    return a + b\n", ["assert add(1, 1) == 2"])
    return get_isolation()


@pytest.fixture(scope="session")
def level(isolation):
    print(isolation_report())
    return isolation.level


def _private_dir(path: Path, mode: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


@pytest.fixture
def context(monkeypatch):
    """Victims owned by the test's user, a secret in its environment, listening sockets.

    The victims live in a fresh world-traversable folder under /tmp, so that only their own
    modes (and the sandbox) protect them.
    """
    unique = secrets.token_hex(6)
    # /tmp, not TMPDIR: a private TMPDIR would protect them by its own mode, and a long one
    # makes the unix socket's path too long to bind (108 bytes)
    root = Path(tempfile.mkdtemp(prefix="grpo-victims-", dir="/tmp"))
    root.chmod(0o755)
    open_dir = _private_dir(root / "victims", 0o755)
    victim_file = open_dir / "precious.txt"
    victim_file.write_text("precious")
    victim_file.chmod(0o644)
    key_dir = _private_dir(root / "keys", 0o700)
    answer_key = key_dir / "answers.txt"
    key = f"zq-key-{unique}"
    answer_key.write_text(key)
    answer_key.chmod(0o600)
    secret = f"zq-secret-{secrets.token_hex(8)}"
    monkeypatch.setenv("GRPO_ATTACK_SECRET", secret)
    ctx = Context(values={}, victim_dir=open_dir, victim_file=victim_file,
                  answer_key=answer_key)
    tcp, udp = _listen(socket.AF_INET, socket.SOCK_STREAM), _listen(socket.AF_INET,
                                                                      socket.SOCK_DGRAM)
    unix_path = str(key_dir / "sock")
    unix = _listen(socket.AF_UNIX, socket.SOCK_STREAM, unix_path)
    abstract = _listen(socket.AF_UNIX, socket.SOCK_STREAM, f"\0grpo-attack-{unique}")
    ctx.listeners = [tcp, udp, unix, abstract]
    ctx.values = {"unique": unique, "victim_dir": str(open_dir), "victim_file": str(victim_file),
                  "tmp_target": f"/tmp/grpo-attack-{unique}", "answer_key": str(answer_key),
                  "key": key, "secret": secret, "port": str(tcp.getsockname()[1]),
                  "udp_port": str(udp.getsockname()[1]), "unix_socket": unix_path,
                  "abstract": f"grpo-attack-{unique}", "base_dir": get_isolation().base_dir}
    previous = signal.signal(signal.SIGUSR1, lambda number, _frame:
                             ctx.signals_received.append(number))
    yield ctx
    signal.signal(signal.SIGUSR1, previous)
    for listener in ctx.listeners:
        listener.close()
    shutil.rmtree(root, ignore_errors=True)


def _listen(family: int, kind: int, address: str | None = None) -> socket.socket:
    sock = socket.socket(family, kind)
    sock.bind(address if address is not None else ("127.0.0.1", 0))
    if kind == socket.SOCK_STREAM:
        sock.listen()
    sock.setblocking(False)
    return sock
