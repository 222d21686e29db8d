"""``make lab``'s working copies (tools/lab_copies.py): made once, without the jupytext
pairing, ignored by git, and never written back to ``notebooks/``."""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess

import nbformat
import pytest

from tools.lab_copies import LAB_DIR, NOTEBOOK_DIR, ROOT, make_copies


def digest(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file()}


def test_copies_are_made_once_unpaired_and_the_course_is_never_touched(tmp_path):
    course = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOK_DIR, course)
    before = digest(course)
    lab = tmp_path / "lab"
    written = make_copies(lab, course)
    assert sorted(p.name for p in written) == sorted(p.name for p in course.glob("*.ipynb"))
    assert "START_HERE.ipynb" in {p.name for p in written}
    copy = lab / "07_exp1_length.ipynb"
    assert "jupytext" not in nbformat.read(copy, as_version=4).metadata  # saving writes no twin
    assert "jupytext" in nbformat.read(course / copy.name, as_version=4).metadata
    # every copy names the Python that runs it, as its kernel will (the start page too)
    for name in ("START_HERE.ipynb", copy.name):
        info = nbformat.read(lab / name, as_version=4).metadata.language_info
        assert info["version"] == platform.python_version() and info["name"] == "python"
    # the learner runs a cell: the next start keeps the copy
    mine = nbformat.read(copy, as_version=4)
    mine.cells[0].source = "my notes"
    nbformat.write(mine, copy)
    assert make_copies(lab, course) == []
    assert nbformat.read(copy, as_version=4).cells[0].source == "my notes"
    assert digest(course) == before  # nothing written to the course
    # a reset starts every copy afresh from the course
    assert len(make_copies(lab, course, reset=True)) == len(written)
    assert nbformat.read(copy, as_version=4).cells[0].source != "my notes"
    assert digest(course) == before


def test_git_ignores_the_working_copies():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    probe = LAB_DIR / "07_exp1_length.ipynb"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT)
    assert ignored.returncode == 0, "lab/ must be in .gitignore"
