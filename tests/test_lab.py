"""`make lab` starts JupyterLab (headless, on a free port) over the repository: it opens on the
start page's working copy, lists the course's files but not `notebooks/` or the jupytext twins,
shows no news pop-up, starts every visit without the last one's tabs, and never shuts down a
kernel whose notebook is open."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

# the browser test's helpers: Debian's chromium through Playwright (tests/test_browser.py)
from test_browser import OUTPUT_DIR, _launch, browser_requirements  # noqa: F401 (a fixture)

REPO_ROOT = Path(__file__).resolve().parent.parent
START_PAGE = "START_HERE.ipynb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# the token every test server takes (a request with it needs no XSRF cookie)
TOKEN = secrets.token_hex(16)


def _request(url: str, method: str = "GET", body: dict | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Content-Type": "application/json", "Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


def _get_json(url: str):
    return json.loads(_request(url)[1])


def _listing(base: str, path: str = "") -> set[str]:
    return {item["name"] for item in _get_json(f"{base}/api/contents/{path}")["content"]}


class Lab:
    """`make lab` with extra server options, in its own process group."""

    def __init__(self, tmp_path: Path, *extra: str):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        lab_args = " ".join([
            "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
            *extra])
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / f"runtime-{self.port}")}
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}"], cwd=REPO_ROOT,
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)  # its own process group: make, jupyter and the server

    def wait(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stderr.read().decode()[-2000:]
            try:
                if _request(f"{self.base}/api")[0] == 200:
                    return
            except OSError:
                time.sleep(0.5)
        pytest.fail("make lab did not answer within 120 s")

    def stop(self) -> None:
        """SIGTERM to the whole group (make, the shell, the server, its kernels), then SIGKILL
        to whatever is left of it after 20 s: make exits at once, the server may not."""
        group = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            self.process.poll()
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def lab(tmp_path):
    started: list[Lab] = []

    def start(*extra: str) -> Lab:
        server = Lab(tmp_path, *extra)
        started.append(server)
        server.wait()
        return server

    yield start
    for server in started:
        server.stop()


def test_make_lab_serves_the_course_and_opens_the_start_page(lab):
    base = lab().base
    top = _listing(base)
    # the course a learner looks for is one click away; the committed notebooks are not
    assert {"lab", "solutions", "docs", "data", "grpo_core", "README.md"} <= top, sorted(top)
    assert "notebooks" not in top
    assert "exercises.py" in _listing(base, "solutions")
    assert {"exp3-stop-cpu", "exp2-k8-cpu"} <= _listing(base, "data/runs")
    copies = _listing(base, "lab")
    assert {"00_setup.ipynb", START_PAGE} <= copies
    assert not [name for name in copies if name.endswith(".py")], sorted(copies)
    assert (REPO_ROOT / "lab" / "00_setup.ipynb").exists()
    # hidden from the listing, still there: a notebook's link to its twin or original works
    status, body = _request(f"{base}/api/contents/notebooks/00_setup.py?content=0")
    assert status == 200 and json.loads(body)["name"] == "00_setup.py"
    status, page = _request(f"{base}/lab")
    config = json.loads(re.search(rb'id="jupyter-config-data"[^>]*>\s*(\{.*?\})\s*</script>', page,
                                  re.DOTALL).group(1))
    assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    with urllib.request.urlopen(f"{base}/?token={TOKEN}", timeout=5) as response:  # redirects
        assert response.url.split("?")[0].endswith(f"/lab/tree/lab/{START_PAGE}")


def test_a_second_make_lab_reopens_no_tab_of_the_first(lab):
    first = lab()
    workspace = {"data": {"layout-restorer:data": {"main": {"dock": {
        "type": "tab-area", "currentIndex": 0, "widgets": ["notebook:lab/07_exp1_length.ipynb"]}}},
        "notebook:lab/07_exp1_length.ipynb": {"data": {"path": "lab/07_exp1_length.ipynb",
                                                       "factory": "Notebook"}}},
        "metadata": {"id": "default"}}
    _request(f"{first.base}/lab/api/workspaces/default", "PUT", workspace)
    saved = _get_json(f"{first.base}/lab/api/workspaces/default")
    assert "notebook:lab/07_exp1_length.ipynb" in saved["data"]  # what a visit leaves behind
    first.stop()
    second = lab()
    restored = _get_json(f"{second.base}/lab/api/workspaces/default")
    assert not [key for key in restored["data"] if key.startswith("notebook:")], restored


async def _connect(base: str, kernel_id: str):
    from tornado.websocket import websocket_connect

    url = base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels?token={TOKEN}"
    return await websocket_connect(url)


def test_an_idle_kernel_is_culled_only_when_no_tab_is_connected(lab):
    """The course's culling settings with the clock shortened to seconds: the kernel behind an
    open notebook (a websocket connection, as a tab holds) keeps its model; the other goes."""
    base = lab("--MappingKernelManager.cull_idle_timeout=3",
               "--MappingKernelManager.cull_interval=1").base
    open_tab = json.loads(_request(f"{base}/api/kernels", "POST", {})[1])["id"]
    closed_tab = json.loads(_request(f"{base}/api/kernels", "POST", {})[1])["id"]

    async def watch() -> set[str]:
        connection = await _connect(base, open_tab)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await asyncio.sleep(1)
                alive = {kernel["id"] for kernel in _get_json(f"{base}/api/kernels")}
                if closed_tab not in alive:
                    await asyncio.sleep(5)  # several more cull passes
                    return {kernel["id"] for kernel in _get_json(f"{base}/api/kernels")}
            return alive
        finally:
            connection.close()

    alive = asyncio.run(watch())
    assert closed_tab not in alive, "the culling did not run"
    assert open_tab in alive, "a kernel with an open tab was shut down"


def _open_in_file_browser(page, *names: str) -> None:
    """From the file browser's top folder, double-click each name in turn."""
    from playwright.sync_api import expect

    page.locator(".jp-FileBrowser .jp-BreadCrumbs-home").click()
    for name in names:
        item = page.locator(".jp-FileBrowser .jp-DirListing-item", has=page.locator(
            ".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(name)}$")))
        expect(item).to_have_count(1)
        item.dblclick()


@pytest.mark.usefixtures("browser_requirements")
def test_a_learner_reaches_solutions_and_runs_and_a_new_visit_starts_clean(lab, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    first = lab()
    with sync_playwright() as playwright:
        browser = _launch(playwright, tmp_path)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(f"{first.base}/?token={TOKEN}")
        page.locator(".jp-Notebook").first.wait_for()
        assert page.url.split("?")[0].endswith(f"/lab/tree/lab/{START_PAGE}")
        expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=90_000)
        start_tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=START_PAGE)
        expect(start_tab).not_to_have_class(re.compile("jp-mod-dirty"))  # opened, not changed
        _open_in_file_browser(page, "solutions", "exercises.py")
        current = page.locator(".jp-MainAreaWidget:visible .cm-content").first
        expect(current).to_contain_text("def ")
        expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(
            "exercises.py")
        page.screenshot(path=str(OUTPUT_DIR / "lab_solutions_from_file_browser.png"))
        _open_in_file_browser(page, "data", "runs", "exp3-stop-cpu")
        listing = page.locator(".jp-FileBrowser .jp-DirListing-content")
        for name in ("config.json", "metrics.jsonl", "samples.jsonl"):
            expect(listing).to_contain_text(name)
        page.screenshot(path=str(OUTPUT_DIR / "lab_recorded_run_from_file_browser.png"))
        _open_in_file_browser(page, "lab", "00_setup.ipynb")
        page.locator(".jp-Notebook").last.wait_for()
        deadline = time.monotonic() + 60
        while not any(s["path"].endswith("00_setup.ipynb")
                      for s in _get_json(f"{first.base}/api/sessions")):
            assert time.monotonic() < deadline, "opening 00 started no kernel"
            time.sleep(0.5)
        page.close()
        first.stop()

        second = lab()
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{second.base}/?token={TOKEN}")
        page.locator(".jp-Notebook").first.wait_for()
        time.sleep(3)  # what a restored tab would have started by now
        paths = [s["path"] for s in _get_json(f"{second.base}/api/sessions")]
        assert not [p for p in paths if not p.endswith(START_PAGE)], paths
        tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").all_inner_texts()
        assert not [t for t in tabs if "00_setup" in t or "exercises" in t], tabs
        browser.close()
