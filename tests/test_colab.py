"""The Colab path without Colab: the install plan, the restart rule, and every notebook's first
code cell run with Colab's marker faked (nothing is cloned or installed)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

from tools import colab_env, colab_setup
from tools.notebooks import paired_scripts

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = [p.with_suffix(".ipynb") for p in paired_scripts()]


def _names(lines):
    return {re.split(r"[<>=!~ \[]", line.strip(), maxsplit=1)[0].lower()
            for line in lines if line.strip() and not line.lstrip().startswith("#")}


def test_colab_requirements_are_the_runtime_dependencies_colab_lacks():
    runtime = [r for r in metadata.requires("grpo-course") if "extra ==" not in r]
    colab_has = set(colab_env.read_freeze(colab_env.FREEZE.read_text()))
    every = (REPO / colab_setup.REQUIREMENTS).read_text().splitlines()
    trl_file = (REPO / colab_setup.NOTEBOOK_NEEDS["10_trl"][0]).read_text().splitlines()
    too_old = set(colab_setup.EVERY_NOTEBOOK_MAY_CHANGE) & _names(runtime)
    assert _names(every) | _names(trl_file) == (_names(runtime) - colab_has) | too_old | {
        "huggingface-hub"}  # bounded below 2 for Colab's gradio (the file says so)
    assert _names(trl_file) == {"trl"} and "trl" not in _names(every)
    assert not (_names(every) | _names(trl_file)) & {
        "pytest", "nbval", "ruff", "jupyterlab", "hypothesis", "ipykernel", "ipywidgets", "torch"}


def test_every_installed_package_is_pinned_but_those_the_notebook_may_change():
    installed = {"torch": "2.11.0+cu128", "pyarrow": "18.1.0", "huggingface-hub": "1.27.0"}
    pins = colab_setup.keep_installed_constraints(installed, ["pyarrow"]).split()
    assert pins == ["huggingface-hub==1.27.0", "torch==2.11.0+cu128"]
    every = {"transformers", "huggingface-hub", "tokenizers"}
    assert colab_setup.may_change("10_trl").keys() == every | {"datasets", "pyarrow"}
    assert colab_setup.may_change("03_group_baseline").keys() == every
    assert colab_setup.may_change(None) == colab_setup.EVERY_NOTEBOOK_MAY_CHANGE


def test_each_allowed_change_says_why_and_names_a_package_colab_has():
    colab_has = colab_env.read_freeze(colab_env.FREEZE.read_text())
    for notebook, (requirements, _) in colab_setup.NOTEBOOK_NEEDS.items():
        assert (REPO / "notebooks" / f"{notebook}.py").exists()
        assert (REPO / requirements).exists()
    for notebook in [None, *colab_setup.NOTEBOOK_NEEDS]:
        for name, why in colab_setup.may_change(notebook).items():
            assert name in colab_has and colab_has[name] in why, (name, why)


@pytest.mark.parametrize("notebook, steps_first", [
    (None, ["requirements-colab.txt"]),
    ("10_trl", ["requirements-colab.txt", "requirements-colab-trl.txt"]),
])
def test_dry_run_prints_the_plan_in_order_and_installs_nothing(monkeypatch, capsys, notebook,
                                                              steps_first):
    def no_pip(args):
        raise AssertionError(f"a dry run must not install: {args}")

    monkeypatch.setattr(colab_setup, "pip", no_pip)
    argv = ["--dry-run"] + (["--notebook", notebook] if notebook else [])
    assert colab_setup.main(argv, loaded_modules=[]) == 0
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if line.startswith("[")]
    assert [s[:5] for s in steps] == ["[1/3]", "[2/3]", "[3/3]"]
    assert [f for f in re.findall(r"-r \S*/(requirements[^ ]*)", steps[0])] == steps_first
    assert "-c " in steps[0] and "nothing installed" in out
    assert "--no-deps -e" in steps[1] and "requirements-nodeps.txt" in steps[2]
    assert "may change: transformers, huggingface-hub, tokenizers" in out
    assert ("datasets, pyarrow" in out) == (notebook == "10_trl")


def test_a_changed_package_the_kernel_had_imported_ends_in_the_restart_status(monkeypatch, capsys):
    versions = iter([{"pyarrow": "18.1.0", "pandas": "2.2.3"},
                     {"pyarrow": "26.0.1", "pandas": "2.2.3", "trl": "1.16.0"}])
    monkeypatch.setattr(colab_setup, "installed_versions", lambda: next(versions))
    monkeypatch.setattr(colab_setup, "pip", lambda args: None)
    monkeypatch.setattr(colab_setup.metadata, "packages_distributions",
                        lambda: {"pyarrow": ["pyarrow"], "pandas": ["pandas"]})
    status = colab_setup.main(["--notebook", "10_trl"], loaded_modules=["pandas", "pyarrow.lib"])
    out = capsys.readouterr().out
    assert status == colab_setup.RESTART_EXIT
    assert "changed pyarrow 18.1.0 -> 26.0.1: TRL 1.16 needs pyarrow" in out
    assert "RESTART: pyarrow changed" in out


def test_a_restart_is_asked_only_for_what_the_kernel_had_imported():
    before = {"ipywidgets": "7.7.1", "transformers": "4.40.0", "trl": "0.9.0"}
    after = {"ipywidgets": "7.7.1", "transformers": "5.24.0", "trl": "1.16.0", "gguf": "0.19.0"}
    provides = {"transformers": ["transformers"], "trl": ["trl"], "ipywidgets": ["ipywidgets"]}
    assert colab_setup.needs_restart(before, after, ["transformers.models", "sys"], provides) \
        == ["transformers"]
    assert colab_setup.needs_restart(before, after, ["ipywidgets", "gguf"], provides) == []
    assert colab_setup.needs_restart(before, before, ["transformers"], provides) == []
    assert colab_setup.changes(before, after) == {"transformers": ("4.40.0", "5.24.0"),
                                                  "trl": ("0.9.0", "1.16.0")}


def _bootstrap_cell(notebook: Path) -> str:
    cells = nbformat.read(notebook, as_version=4).cells
    return next(c.source for c in cells if c.cell_type == "code")


class KernelEnded(Exception):
    pass


def _run_in_fake_colab(source: str, monkeypatch, clone_fails: bool, clone_exists: bool,
                       setup_status: int = 0, calls: list | None = None):
    calls = [] if calls is None else calls

    def fake_run(command, **kwargs):
        calls.append((command, kwargs))
        failed = clone_fails and command[0] == "git"
        status = 128 if failed else setup_status if command[0] != "git" else 0
        return subprocess.CompletedProcess(command, status, "",
                                           "fatal: could not resolve host" if failed else "")

    def fake_kill(pid, signal_number):
        calls.append((["kill", pid, signal_number], {}))
        raise KernelEnded  # the real kill ends this process: nothing after it runs

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr("os.path.isdir", lambda path: clone_exists)
    monkeypatch.setattr("os.kill", fake_kill)
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
    assert setup[1:] == [f"{colab_setup.CLONE_DIR}/tools/colab_setup.py",
                         "--notebook", notebook.stem]
    assert "google.colab" in options["input"].split()  # what the kernel had imported
    assert sys.path[0] == colab_setup.CLONE_DIR


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_cell_ends_the_kernel_when_the_setup_asks_and_stops_when_it_fails(notebook,
                                                                               monkeypatch):
    source = _bootstrap_cell(notebook)
    calls: list = []
    with pytest.raises(KernelEnded):
        _run_in_fake_colab(source, monkeypatch, clone_fails=False, clone_exists=False,
                           setup_status=colab_setup.RESTART_EXIT, calls=calls)
    assert calls[-1][0] == ["kill", os.getpid(), signal.SIGKILL]
    assert colab_setup.CLONE_DIR not in sys.path  # the kernel ended before anything else ran
    with pytest.raises(subprocess.CalledProcessError):
        _run_in_fake_colab(source, monkeypatch, clone_fails=False, clone_exists=False,
                           setup_status=1)


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
