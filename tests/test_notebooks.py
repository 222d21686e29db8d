"""Notebook hygiene: each notebook matches its jupytext twin and is committed executed."""

from __future__ import annotations

import nbformat
import pytest

from tools.notebooks import (
    NOTEBOOK_DIR,
    START_PAGE,
    copy_markdown,
    notebook_title,
    out_of_sync,
    paired_scripts,
    refresh_sources,
    shows_source,
    start_page_stale,
)
from tools.widget_snapshot import missing_snapshots, widget_outputs

SCRIPTS = paired_scripts()


def test_there_are_notebooks():
    assert [s.stem for s in SCRIPTS][:1] == ["00_setup"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_pair_in_sync(script):
    assert out_of_sync(script) is None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_committed_executed_without_errors(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert code_cells, "a notebook without code"
    assert all(c.execution_count is not None for c in code_cells), (
        "run every cell before committing"
    )
    errors = [o for c in code_cells for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("ename") if errors else ""


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_states_needs_and_time_up_front(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    first = notebook.cells[0]
    assert first.cell_type == "markdown"
    assert "**Needs:**" in first.source and "**Takes:**" in first.source


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_no_output_checked_cell_depends_on_the_profile(script):
    """Cells compared by nbval in CI (smoke) were executed in cpu: they must not print either."""
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and "# NBVAL_CHECK_OUTPUT" in cell.source:
            text = "".join(o.get("text", "") for o in cell.outputs)
            assert "profile       " not in text and "(set by GRPO_PROFILE)" not in text


def test_notebook_dir_has_no_strays():
    notebooks = {p.name for p in NOTEBOOK_DIR.glob("*.ipynb")} - {START_PAGE}
    assert notebooks == {f"{s.stem}.ipynb" for s in SCRIPTS}, (
        "every .ipynb needs a .py twin and vice versa")


def test_start_page_lists_the_course_in_order():
    assert start_page_stale(SCRIPTS) is None
    page = nbformat.read(NOTEBOOK_DIR / START_PAGE, as_version=4)
    assert all(cell.cell_type == "markdown" for cell in page.cells)  # nothing to run
    text = "\n".join(cell.source for cell in page.cells)
    links = [text.index(f"]({s.stem}.ipynb)") for s in SCRIPTS]
    assert links == sorted(links)  # every notebook, in course order
    assert f"[{notebook_title(SCRIPTS[0])}](00_setup.ipynb)" in text
    assert "`cpu` profile" in text and "GRPO_PROFILE=smoke make lab" in text


def test_rewriting_the_start_page_changes_no_byte(tmp_path):
    from tools.notebooks import write_start_page

    first = write_start_page(SCRIPTS, tmp_path).read_bytes()
    assert write_start_page(SCRIPTS, tmp_path).read_bytes() == first  # no fresh cell ids


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_committed_widgets_carry_their_state_and_a_static_picture(script):
    """A widget output shows its picture where no kernel runs it (JupyterLab before the kernel
    starts, nbviewer, GitHub), never only its repr; rebuild with `make notebooks`, or add the
    pictures to an executed notebook with `python tools/notebooks.py snapshots NAME`."""
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert missing_snapshots(notebook) == [], f"{len(widget_outputs(notebook))} widget outputs"


def test_copy_markdown_keeps_outputs_and_refuses_code_changes(tmp_path):
    import jupytext

    script = tmp_path / "99_toy.py"
    script.write_text("# %% [markdown]\n# Old prose.\n\n# %%\nprint(1)\n")
    executed = jupytext.read(script)
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nbformat.write(executed, script.with_suffix(".ipynb"))

    script.write_text("# %% [markdown]\n# New prose.\n\n# %%\nprint(1)\n")
    assert copy_markdown(script) == 1
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert notebook.cells[0].source == "New prose."
    assert notebook.cells[1].outputs[0]["text"] == "1\n"
    assert out_of_sync(script) is None

    script.write_text("# %% [markdown]\n# New prose.\n\n# %%\nprint(2)\n")
    with pytest.raises(ValueError, match="code cell 1 changed; rebuild it"):
        copy_markdown(script)


def test_refresh_sources_reruns_only_the_code_listings(tmp_path):
    import jupytext

    script = tmp_path / "99_toy.py"
    script.write_text(
        "# %%\nimport textwrap\nx = 1\n\n"
        "# %%\nprint(inspect.getsource(textwrap.dedent))\n\n"
        "# %%\nprint(inspect.getsource(textwrap.indent))\nprint(x)\n")
    executed = jupytext.read(script)
    stale = [nbformat.v4.new_output("stream", name="stdout", text="stale\n")]
    for cell in executed.cells:
        cell.outputs = list(stale)
    nbformat.write(executed, script.with_suffix(".ipynb"))

    assert refresh_sources(script) == 1
    cells = nbformat.read(script.with_suffix(".ipynb"), as_version=4).cells
    assert cells[1].outputs[0]["text"].startswith("def dedent(text):")  # a listing: re-run
    assert cells[0].outputs[0]["text"] == "stale\n"  # not a listing: untouched
    assert cells[2].outputs[0]["text"] == "stale\n"  # prints more than code: untouched
    assert refresh_sources(script) == 0
    assert shows_source("import inspect\nprint(inspect.getsource(len))")
    assert not shows_source("print(inspect.getsource(len))\nprint(1)")
    assert not shows_source("x = (")


def test_build_pictures_a_finished_progress_bar_in_its_final_state(tmp_path):
    """The build step (a real kernel): a tqdm bar in the committed notebook shows 3/3 and a
    full bar where no kernel runs it, not the "0/3" its text repr was frozen at."""
    from tools.notebooks import build

    script = tmp_path / "99_toy.py"
    script.write_text("# %%\nfrom tqdm.auto import tqdm\n\nfor _ in tqdm(range(3), desc='steps'):\n"
                      "    pass\n")
    build(script, timeout_s=120)
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    (output,) = widget_outputs(notebook)
    assert "0/3" in output.data["text/plain"]  # what the repr alone would show
    assert missing_snapshots(notebook) == []
    picture = output.data["text/html"]
    assert "3/3" in picture and "width:100.0%" in picture and "steps" in picture


MAX_NOTEBOOK_BYTES = 1_500_000  # the largest teaching notebook is about half of it


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_committed_notebooks_stay_small(script):
    """A committed notebook loads fast on GitHub and nbviewer: figures are drawn as palette
    PNGs (``grpo_core.plots.figure_png``) and no cell displays every run's curves at once."""
    size = script.with_suffix(".ipynb").stat().st_size
    assert size <= MAX_NOTEBOOK_BYTES, f"{size / 1e6:.1f} MB"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_figures_drawn_in_a_notebook_use_the_course_dpi(script):
    """A figure made with pyplot in a notebook takes ``dpi=DPI`` (120, as ``grpo_core.plots``'
    own), not the inline backend's default of about 72-100, which reads small on a laptop."""
    import re

    calls = re.findall(r"plt\.(?:subplots|figure)\((.*)", script.read_text("utf-8"))  # one line
    assert all("dpi=DPI" in arguments for arguments in calls), calls


def test_a_build_records_its_time_and_the_kernels_peak_memory(tmp_path, monkeypatch):
    import json

    import jupytext

    from tools.notebooks import BUILD_INFO, PEAK_MARK, build, read_build_info, timing_table

    monkeypatch.setenv("GRPO_PROFILE", "smoke")
    script = tmp_path / "99_probe.py"
    script.write_text("# %% [markdown]\n# # 99 · probe\n\n# %%\nblock = bytearray(300 * 2**20)\n"
                      "print(len(block))\n")
    jupytext.write(jupytext.read(script), script, fmt="py:percent")
    seconds = build(script, timeout_s=120)
    built = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert [c.cell_type for c in built.cells] == ["markdown", "code"]  # the probe cell is gone
    assert not any(PEAK_MARK in c.source for c in built.cells)
    figures = json.loads((tmp_path / BUILD_INFO).read_text())["notebooks"]["99_probe"]
    assert figures["seconds"] == round(seconds, 1) and figures["profile"] == "smoke"
    assert figures["peak_rss_gib"] >= 300 / 1024  # the 300 MiB the cell held
    assert "cores" in figures["machine"] and figures["load_before"] >= 0
    table = timing_table([script, tmp_path / "98_other.py"], read_build_info(tmp_path))
    assert "| [99_probe](99_probe.ipynb) | " in table and " GiB |" in table
    assert "| [98_other](98_other.ipynb) | not measured yet | - |" in table


def test_a_first_run_build_starts_with_an_empty_model_cache_and_says_so(tmp_path, monkeypatch):
    import json
    import os

    import jupytext

    from grpo_core.models import CACHE_ENV_VAR
    from tools import notebooks
    from tools.notebooks import BUILD_INFO, build, read_build_info, timing_table

    assert notebooks.CACHE_ENV_VAR == CACHE_ENV_VAR
    monkeypatch.setenv("GRPO_PROFILE", "smoke")
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "my-cache"))
    script = tmp_path / "97_first.py"
    script.write_text("# %% [markdown]\n# # 97 · first\n\n# %%\nimport os\n"
                      f"folder = os.environ[{CACHE_ENV_VAR!r}]\n"
                      "print(folder, os.path.isdir(folder), os.listdir(folder))\n")
    jupytext.write(jupytext.read(script), script, fmt="py:percent")
    build(script, timeout_s=120, fresh_cache=True)
    printed = nbformat.read(script.with_suffix(".ipynb"), as_version=4).cells[1].outputs[0]["text"]
    folder, exists, listing = printed.split(maxsplit=2)
    assert "grpo-first-run-" in folder and exists == "True" and listing.strip() == "[]"
    assert not os.path.exists(folder)  # removed afterwards
    assert os.environ[CACHE_ENV_VAR] == str(tmp_path / "my-cache")  # the caller's, back
    figures = json.loads((tmp_path / BUILD_INFO).read_text())["notebooks"]["97_first"]
    assert figures["first_run"] is True
    assert "a first run: it converts the offline model once" in timing_table(
        [script], read_build_info(tmp_path))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_ends_with_what_it_showed_the_next_notebook_and_shutting_the_kernel(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    last = notebook.cells[-1]
    assert last.cell_type == "markdown" and "## What this notebook showed" in last.source
    bullets = [line for line in last.source.splitlines() if line.startswith("- ")]
    assert len(bullets) == 3, "three lines: what the notebook showed"
    position = SCRIPTS.index(script)
    following = SCRIPTS[position + 1].stem if position + 1 < len(SCRIPTS) else "START_HERE"
    assert f"]({following}.ipynb)" in last.source
    assert "Shut Down Kernel" in last.source
