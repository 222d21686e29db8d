"""`make lab` starts JupyterLab serving the notebooks (headless, on a free port): it opens on the
start page, hides the jupytext twins from the file browser and shows no news pop-up."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
START_PAGE = "START_HERE.ipynb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


@pytest.fixture
def running_lab(tmp_path):
    port = _free_port()
    lab_args = (
        f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} "
        "--ServerApp.port_retries=0 --IdentityProvider.token= --ServerApp.password="
    )
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    process = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: make, jupyter and the server
    )
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_make_lab_serves_the_notebooks(running_lab):
    process, base = running_lab
    deadline = time.monotonic() + 120
    status = None
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        try:
            status, _ = _get(f"{base}/api")
            break
        except OSError:
            time.sleep(0.5)
    assert status == 200
    status, body = _get(f"{base}/api/contents")
    names = {item["name"] for item in json.loads(body)["content"]}
    assert "00_setup.ipynb" in names  # the server's root is the working copies, lab/
    assert START_PAGE in names
    # copies only: no jupytext twins, and nothing a learner saves reaches notebooks/
    assert not [name for name in names if name.endswith(".py")], sorted(names)
    assert (REPO_ROOT / "lab" / "00_setup.ipynb").exists()
    status, body = _get(f"{base}/api/contents/00_setup.ipynb?content=0")
    assert status == 200 and json.loads(body)["name"] == "00_setup.ipynb"
    status, page = _get(f"{base}/lab")
    assert status == 200
    config = json.loads(re.search(rb'id="jupyter-config-data"[^>]*>\s*(\{.*?\})\s*</script>', page,
                                  re.DOTALL).group(1))
    assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    with urllib.request.urlopen(f"{base}/", timeout=5) as response:  # follows the redirect
        assert response.url.endswith(f"/lab/tree/{START_PAGE}")
