"""The Colab path without Colab: the install plan, the restart rule, and every notebook's first
code cell run with Colab's marker faked (nothing is cloned or installed)."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from tools import colab_setup
from tools.notebooks import paired_scripts

REPO = Path(__file__).resolve().parent.parent
COLAB_PREINSTALLS = {"torch", "numpy", "pandas", "matplotlib", "tqdm", "ipywidgets"}
NOTEBOOKS = [p.with_suffix(".ipynb") for p in paired_scripts()]


def _names(lines):
    return {re.split(r"[<>=!~ \[]", line.strip(), maxsplit=1)[0].lower()
            for line in lines if line.strip() and not line.lstrip().startswith("#")}


def test_colab_requirements_are_the_runtime_dependencies_colab_lacks():
    runtime = [r for r in metadata.requires("grpo-course") if "extra ==" not in r]
    colab = (REPO / "requirements-colab.txt").read_text().splitlines()
    assert _names(colab) == _names(runtime) - COLAB_PREINSTALLS
    assert not _names(colab) & {"pytest", "nbval", "ruff", "jupyterlab", "hypothesis",
                                "ipykernel", "ipywidgets", "torch"}


def test_colab_keeps_torch_ipywidgets_and_ipykernel_as_installed():
    pins = colab_setup.keep_preinstalled_constraints().split()
    for name in ("torch", "ipywidgets", "ipykernel"):
        assert f"{name}=={metadata.version(name)}" in pins


def test_dry_run_prints_the_plan_in_order_and_installs_nothing(monkeypatch, capsys):
    def no_pip(args):
        raise AssertionError(f"a dry run must not install: {args}")

    monkeypatch.setattr(colab_setup, "pip", no_pip)
    assert colab_setup.main(["--dry-run"], loaded_modules=[]) == 0
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if line.startswith("[")]
    assert [s[:5] for s in steps] == ["[1/3]", "[2/3]", "[3/3]"]
    assert "requirements-colab.txt" in steps[0] and "-c " in steps[0]
    assert "--no-deps -e" in steps[1] and "requirements-nodeps.txt" in steps[2]
    assert f"torch=={metadata.version('torch')}" in out and "nothing installed" in out


def test_a_restart_is_asked_only_for_what_the_kernel_had_imported():
    before = {"ipywidgets": "7.7.1", "transformers": "4.40.0", "trl": "0.9.0"}
    after = {"ipywidgets": "7.7.1", "transformers": "5.24.0", "trl": "1.16.0", "gguf": "0.19.0"}
    provides = {"transformers": ["transformers"], "trl": ["trl"], "ipywidgets": ["ipywidgets"]}
    assert colab_setup.needs_restart(before, after, ["transformers.models", "sys"], provides) \
        == ["transformers"]
    assert colab_setup.needs_restart(before, after, ["ipywidgets", "gguf"], provides) == []
    assert colab_setup.needs_restart(before, before, ["transformers"], provides) == []


def _bootstrap_cell(notebook: Path) -> str:
    cells = nbformat.read(notebook, as_version=4).cells
    return next(c.source for c in cells if c.cell_type == "code")


def _run_in_fake_colab(source: str, monkeypatch, clone_fails: bool, clone_exists: bool):
    calls = []

    def fake_run(command, **kwargs):
        calls.append((command, kwargs))
        failed = clone_fails and command[0] == "git"
        return subprocess.CompletedProcess(command, 128 if failed else 0, "",
                                           "fatal: could not resolve host" if failed else "")

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr("os.path.isdir", lambda path: clone_exists)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(source, "<colab cell>", "exec"), {})
    return calls


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_cell_clones_then_runs_the_setup_in_colab(notebook, monkeypatch):
    source = _bootstrap_cell(notebook)
    assert colab_setup.REPO_URL in source and colab_setup.CLONE_DIR in source
    calls = _run_in_fake_colab(source, monkeypatch, clone_fails=False, clone_exists=False)
    (clone, _), (setup, options) = calls
    assert clone[:2] == ["git", "clone"] and clone[-2:] == [colab_setup.REPO_URL,
                                                           colab_setup.CLONE_DIR]
    assert setup[1] == f"{colab_setup.CLONE_DIR}/tools/colab_setup.py" and options["check"]
    assert "google.colab" in options["input"].split()  # what the kernel had imported
    assert sys.path[0] == colab_setup.CLONE_DIR


@pytest.mark.parametrize("notebook", NOTEBOOKS[:1], ids=lambda p: p.stem)
def test_first_cell_says_why_a_clone_failed(notebook, monkeypatch):
    source = _bootstrap_cell(notebook)
    with pytest.raises(RuntimeError, match="could not clone .*could not resolve host"):
        _run_in_fake_colab(source, monkeypatch, clone_fails=True, clone_exists=False)
    # a second run of the cell: the clone is already there, so the setup still runs
    calls = _run_in_fake_colab(source, monkeypatch, clone_fails=True, clone_exists=True)
    assert len(calls) == 2


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_opens_with_its_colab_badge(notebook):
    first = next(c for c in nbformat.read(notebook, as_version=4).cells
                 if c.cell_type == "markdown")
    assert colab_setup.colab_badge(notebook.stem) in first.source
