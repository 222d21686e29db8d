"""The course in a real JupyterLab, driven by headless Chromium as a learner would.

Starts its own JupyterLab (a free port, a fresh config) over temporary copies of notebooks 03
and 09, opens them in Debian's ``chromium`` through Playwright (``executable_path``:
Playwright never downloads a browser here) and checks, with screenshots in
``out/test_browser/`` (or ``$GRPO_TEST_OUTPUT/test_browser/``):

- notebook 03 opened before running anything shows the group widget's static picture (drawn
  from its stored state, ``tools/widget_snapshot.py``), not its repr;
- after running the cells up to the widget, the "too easy" preset shows every advantage as
  0.00 and the no-signal message; a typed value out of range shows an error that goes away
  once a slider moves;
- at 1000 px wide no toggle covers a slider's readout;
- the clip widget (a cell the test adds to its copy): while "ε_high = ε" is ticked the greyed
  ε_high follows ε, and unticking keeps the band;
- notebook 09's recorded run, with the held-out panel and its legend.

A second test opens a one-cell notebook with the run explorer (``run_explorer``) on experiment
3's recorded run, moves its step slider (typing the step into the slider's readout, as a
learner can) and checks that the page then shows that step's completions from
``samples.jsonl``; its screenshot is ``run_explorer_<run>.png``.

The kernel runs in the smoke profile. The cells after the widget load the model and train
(minutes on a busy CPU); they are not run here, ``make test`` runs the whole notebook under nbval.

Needs chromium (``tools/install_browser.sh``) and playwright (``requirements-browser.txt``).
Without them the test is skipped locally, and fails when the environment variable ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO_ROOT / "notebooks" / "03_group_baseline.ipynb"
RUN_NOTEBOOK = REPO_ROOT / "notebooks" / "09_exp3_reward_hacking.ipynb"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
OUTPUT_DIR = Path(os.environ.get("GRPO_TEST_OUTPUT", REPO_ROOT / "out")) / "test_browser"
SCREENSHOT = OUTPUT_DIR / "03_group_baseline_too_easy.png"
EXPLORER_NOTEBOOK = "run_explorer.ipynb"
EXPLORER_RUN = "exp3-stop-cpu"  # experiment 3: the proxy climbs, the true score falls
SCREENSHOTS = {
    "before running": OUTPUT_DIR / "03_group_baseline_before_running.png",
    "group at 1000 px": OUTPUT_DIR / "03_group_widget_1000px.png",
    "clip at 1000 px": OUTPUT_DIR / "04_clip_widget_1000px.png",
    "held-out panel": OUTPUT_DIR / "09_recorded_run_held_out_legend.png",
}
WIDGET_CELL_MARK = "group_variation_widget(k=4)"
CLIP_CELL_MARK = "clip_widget()  # added by the browser test"
RUN_CELL_MARK = "plot_run(recorded, recorded_diagnosis)"
CHROMIUM_ARGS = [
    "--no-sandbox",  # root in containers and CI
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing_requirement() -> str | None:
    if not CHROMIUM.is_file():
        return f"chromium is not installed at {CHROMIUM} (run: bash tools/install_browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "playwright is not installed (run: .venv/bin/pip install -r requirements-browser.txt)"
        )
    return None


@pytest.fixture(scope="module")
def browser_requirements():
    problem = _missing_requirement()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the browser test must run: {problem}")
        pytest.skip(problem)


def _explorer_run() -> str:
    """Experiment 3's recorded run; while it has no ``samples.jsonl`` (recorded before samples
    were kept), the first recorded run that has one, so the completions can still be seen."""
    from grpo_core.run_files import list_runs, read_samples

    with_samples = [path.name for path in list_runs() if read_samples(path).found]
    if not with_samples:
        pytest.fail("no recorded run in data/runs has samples.jsonl")
    return EXPLORER_RUN if EXPLORER_RUN in with_samples else with_samples[0]


def _write_explorer_notebook(path: Path, run: str) -> None:
    import nbformat

    cell = nbformat.v4.new_code_cell(
        f"from grpo_core.widgets import run_explorer\n\nrun_explorer({run!r})")
    nbformat.write(nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}), path)


def _copy_with_clip_cell(source: Path, target: Path) -> None:
    """Copy notebook 03 with its widget snapshots drawn (as ``make notebooks`` writes them)
    and a clip-widget cell after the group widget's, so one kernel serves both widgets
    (notebook 04's cells above its clip widget load the model)."""
    import nbformat

    from tools.widget_snapshot import add_snapshots

    notebook = nbformat.read(source, as_version=4)
    add_snapshots(notebook)
    index = next(i for i, cell in enumerate(notebook.cells) if WIDGET_CELL_MARK in cell.source)
    clip_cell = nbformat.v4.new_code_cell(f"from grpo_core.widgets import clip_widget\n\n"
                                          f"{CLIP_CELL_MARK}")
    notebook.cells.insert(index + 1, clip_cell)
    nbformat.write(notebook, target)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def scratch():
    """A temporary folder removed afterwards (server root, configs, logs, browser profile)."""
    with tempfile.TemporaryDirectory(prefix="grpo-browser-test-") as folder:
        yield Path(folder)


@pytest.fixture
def lab_server(browser_requirements, scratch):
    """A JupyterLab serving a temporary copy of notebook 03; yields ``(base_url, token)``."""
    root = scratch / "root"
    root.mkdir()
    # copies: autosave must never touch the repository's files
    _copy_with_clip_cell(NOTEBOOK, root / NOTEBOOK.name)
    shutil.copy(RUN_NOTEBOOK, root / RUN_NOTEBOOK.name)
    _write_explorer_notebook(root / EXPLORER_NOTEBOOK, _explorer_run())
    config = scratch / "jupyter-config"
    (config / "labconfig").mkdir(parents=True)
    # no "get notified about Jupyter news?" toast over the screenshot
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    token = secrets.token_hex(16)
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    command = [
        str(jupyter), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = {
        **os.environ,
        "GRPO_PROFILE": "smoke",
        "HF_HUB_OFFLINE": "1",
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(scratch / "settings"),
        "IPYTHONDIR": str(scratch / "ipython"),
    }
    log = (scratch / "lab.log").open("wb")
    process = subprocess.Popen(
        command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the server and its kernels
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited: {(scratch / 'lab.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("jupyter lab did not answer within 120 s")
                time.sleep(0.3)
        yield base, token
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _overlaps(a: dict, b: dict) -> bool:
    """Do two bounding boxes (Playwright's ``bounding_box()``) intersect?"""
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _assert_nothing_covers_a_readout(cell) -> None:
    readouts = [r.bounding_box() for r in cell.locator(".widget-readout").all()]
    toggles = [t.bounding_box() for t in cell.locator(".widget-toggle-buttons").all()]
    assert readouts and toggles
    for readout in readouts:
        for toggle in toggles:
            assert not _overlaps(readout, toggle), (readout, toggle)


def _set_readout(slider, value: str, page) -> None:
    """Type a value into a slider's readout (editable in ipywidgets 8), as a learner can."""
    readout = slider.locator(".widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(value)
    page.keyboard.press("Enter")


def _screenshot(locator, name: str) -> None:
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(SCREENSHOTS[name]), animations="disabled")


def _open_notebook(browser, base: str, token: str, name: str):
    """A new 1400 x 1000 page with notebook ``name`` open (a fresh workspace) and its kernel
    idle."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")
    page.locator(".jp-Notebook").first.wait_for()
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=90_000)
    return page


def test_the_course_in_a_browser(lab_server, scratch):
    from playwright.sync_api import expect, sync_playwright

    base, token = lab_server
    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        browser = _launch(playwright, scratch)
        try:
            page = _open_notebook(browser, base, token, NOTEBOOK.name)
            widget_cell = page.locator(".jp-CodeCell").filter(has_text=WIDGET_CELL_MARK).first

            # before running anything: the stored picture, not "VBox(children=..."
            snapshot = widget_cell.locator(".grpo-widget-snapshot")
            expect(snapshot).to_be_visible()
            expect(snapshot.locator(".grpo-adv")).to_have_count(4)
            bars = snapshot.locator('img[alt="chart"]')  # the bars survive the sanitizer
            expect(bars).to_have_count(1)
            assert bars.evaluate("image => image.complete && image.naturalWidth > 0")
            expect(widget_cell.locator(".jp-OutputArea")).not_to_contain_text("VBox(children")
            _screenshot(widget_cell.locator(".jp-Cell-outputArea"), "before running")

            # run every cell up to and including the widget, as a learner would: select the
            # widget's cell, "Run All Above Selected Cell", then run the cell itself
            widget_cell.locator(".jp-InputPrompt").click()
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Above Selected Cell").click()
            page.keyboard.press("Shift+Enter")

            dropdown = widget_cell.locator(".widget-dropdown select")
            dropdown.wait_for(timeout=180_000)  # the cells above import torch, pandas, ...
            expect(widget_cell.locator(".grpo-adv")).to_have_count(4)
            expect(widget_cell.locator(".grpo-no-signal")).to_have_count(0)  # "usable" first

            dropdown.select_option("too easy")
            expect(widget_cell.locator(".grpo-adv")).to_have_text(["0.00"] * 4)
            expect(widget_cell.locator(".grpo-no-signal")).to_contain_text("no learning signal")
            expect(widget_cell.locator(".widget-readout")).to_have_text(["2.0"] * 4)
            output = widget_cell.locator(".jp-Cell-outputArea")
            OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
            output.scroll_into_view_if_needed()
            output.screenshot(path=str(SCREENSHOT), animations="disabled")

            # a typed value out of range: an error; a slider moved next: the error is gone
            text_box = widget_cell.locator(".widget-text input")
            text_box.fill("0, 9, 1, 1")
            text_box.press("Enter")
            error = widget_cell.locator(".widget-html").filter(has_text="each reward must lie")
            expect(error).to_have_count(1)
            _set_readout(widget_cell.locator(".widget-slider").nth(1), "1.5", page)
            expect(widget_cell.locator(".widget-readout").nth(1)).to_have_text("1.5")
            expect(error).to_have_count(0)
            expect(text_box).to_have_value("2, 1.5, 2, 2")

            # 1000 px wide: the rows wrap, no toggle covers a readout
            page.set_viewport_size({"width": 1000, "height": 1000})
            page.wait_for_timeout(500)  # the layout settles after the resize
            _assert_nothing_covers_a_readout(widget_cell)
            _screenshot(output, "group at 1000 px")

            # the clip widget: while tied, the greyed ε_high follows ε; unticking keeps it
            clip_cell = page.locator(".jp-CodeCell").filter(has_text=CLIP_CELL_MARK).first
            clip_cell.locator(".jp-InputPrompt").click()
            page.keyboard.press("Shift+Enter")
            epsilon, epsilon_high = (
                clip_cell.locator(".widget-slider").filter(has_text=name).first
                for name in ("ε", "ε_high"))
            expect(epsilon_high.locator(".widget-readout")).to_have_text("0.20", timeout=120_000)
            _set_readout(epsilon, "0.3", page)
            expect(epsilon_high.locator(".widget-readout")).to_have_text("0.30")
            expect(clip_cell.locator(".jp-Cell-outputArea")).to_contain_text("ratio > 1.30")
            clip_cell.locator(".widget-checkbox input").uncheck()
            expect(clip_cell.locator(".jp-Cell-outputArea")).to_contain_text("ratio > 1.30")
            expect(epsilon_high.locator(".widget-readout")).to_have_text("0.30")
            _assert_nothing_covers_a_readout(clip_cell)
            _screenshot(clip_cell.locator(".jp-Cell-outputArea"), "clip at 1000 px")

            # a recorded run as committed: the held-out panel with its legend
            page.set_viewport_size({"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/{RUN_NOTEBOOK.name}?reset&token={token}")
            run_cell = page.locator(".jp-CodeCell").filter(has_text=RUN_CELL_MARK).first
            figure = run_cell.locator(".jp-OutputArea-output img").last
            figure.wait_for()
            _screenshot(figure, "held-out panel")
        finally:
            browser.close()
    for path in [SCREENSHOT, *SCREENSHOTS.values()]:
        assert path.stat().st_size > 10_000, path
    print(f"screenshots: {OUTPUT_DIR}")


def _launch(playwright, scratch: Path):
    home = scratch / "browser-home"  # chromium's profile and crash database stay out of $HOME
    home.mkdir(exist_ok=True)
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip


def _first_words(text: str, words: int = 6) -> str:
    return " ".join(text.split()[:words])


def test_run_explorer_slider_shows_another_steps_completions(lab_server, scratch):
    from playwright.sync_api import expect, sync_playwright

    from grpo_core.run_files import load_run, read_samples
    from grpo_core.widgets.explorer import step_groups, training_steps

    run = _explorer_run()
    if run != EXPLORER_RUN:
        print(f"{EXPLORER_RUN} has no samples.jsonl yet: exploring {run} instead")
    path = load_run(run).path
    screenshot = OUTPUT_DIR / f"run_explorer_{run}.png"
    steps = training_steps(load_run(run).records)
    samples = read_samples(path)
    first, last = steps[0], max(s for s in samples.steps if s in steps)
    # what the page must show, in its order: each group's completions in sample order
    expected = {step: [c.text for g in step_groups(samples, step) for c in g.completions]
                for step in (first, last)}
    base, token = lab_server
    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        browser = _launch(playwright, scratch)
        try:
            page = _open_notebook(browser, base, token, EXPLORER_NOTEBOOK)
            cell = page.locator(".jp-CodeCell").first
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")

            step_label = cell.locator(".grpo-step")
            step_label.wait_for(timeout=120_000)  # the kernel imports torch and diagnoses the run
            expect(step_label).to_have_text(str(first))
            texts = cell.locator(".grpo-completion-text")
            expect(texts).to_have_count(len(expected[first]))
            expect(texts.first).to_contain_text(_first_words(expected[first][0]))
            cursor_before = cell.locator(".grpo-cursor").first.get_attribute("x1")

            readout = cell.locator(".widget-slider .widget-readout")
            readout.click()
            page.keyboard.press("Control+A")
            page.keyboard.type(str(last))
            page.keyboard.press("Enter")

            expect(step_label).to_have_text(str(last))
            expect(texts).to_have_count(len(expected[last]))
            expect(texts.first).to_contain_text(_first_words(expected[last][0]))
            assert _first_words(expected[last][0]) != _first_words(expected[first][0])
            assert float(cell.locator(".grpo-cursor").first.get_attribute("x1")) > float(
                cursor_before)
            signs = cell.locator(".grpo-completion.grpo-pos, .grpo-completion.grpo-neg")
            assert signs.count() > 0  # completions coloured by their advantage's sign

            OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
            area = cell.locator(".jp-Cell-outputArea")
            # the whole explorer, its groups too: a window as tall as the output, else the
            # notebook panel clips what lies below its fold and the picture shows grey there
            height = int(area.bounding_box()["height"]) + 400
            page.set_viewport_size({"width": 1400, "height": min(max(height, 1000), 12_000)})
            area.scroll_into_view_if_needed()
            area.screenshot(path=str(screenshot), animations="disabled")
        finally:
            browser.close()
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
