"""``make lab``'s working copies: the learner runs copies in ``lab/``, never the course.

The committed notebooks in ``notebooks/`` are the reference: executed in the ``cpu`` profile,
their outputs are what the README and the start page tell a learner to read. Running a
notebook autosaves its outputs, so ``make lab`` opens copies instead:

- on first start, every ``notebooks/*.ipynb`` (the start page included) is copied into
  ``lab/`` (git ignores it); a copy that exists is never overwritten, so a learner's work
  stays across restarts;
- the copies lose their jupytext pairing, so saving one never writes a ``.py`` twin, and
  nothing in ``lab/`` is ever written back to ``notebooks/``;
- the copies name the Python that runs them (``language_info``), so a tab does not show
  "modified" the moment its kernel starts;
- to start a notebook afresh, delete its copy (``rm lab/07_exp1_length.ipynb``) or run
  ``make lab-reset`` (every copy), then start ``make lab`` again.

Usage: ``python tools/lab_copies.py [--reset] [--dir lab]``.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
LAB_DIR = ROOT / "lab"


def language_info() -> dict:
    """What this Python's kernel reports as the notebook's ``language_info`` (ipykernel's
    fields). A copy that already says it opens unmodified: JupyterLab writes the kernel's
    ``language_info`` into a notebook on start, and a different one (the start page has none,
    the others name the Python they were built with) marks the tab modified before the
    learner has done anything."""
    return {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
            "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
            "pygments_lexer": "ipython3", "version": platform.python_version()}


def working_copy(source: Path, target: Path) -> bool:
    """Copy the notebook ``source`` to ``target`` without its jupytext pairing and with this
    Python's :func:`language_info`; False (and nothing written) when ``target`` exists."""
    if target.exists():
        return False
    notebook = nbformat.read(source, as_version=4)
    notebook.metadata.pop("jupytext", None)
    notebook.metadata["language_info"] = language_info()
    nbformat.write(notebook, target)
    return True


def make_copies(lab_dir: Path = LAB_DIR, notebook_dir: Path = NOTEBOOK_DIR,
                reset: bool = False) -> list[Path]:
    """Create the missing working copies in ``lab_dir`` (all of them after ``reset``, which
    first removes every copy); returns the copies written."""
    if reset and lab_dir.exists():
        shutil.rmtree(lab_dir)
    lab_dir.mkdir(exist_ok=True)
    (lab_dir / ".gitignore").write_text("*\n")  # ignored even outside this repository's rules
    return [lab_dir / source.name for source in sorted(notebook_dir.glob("*.ipynb"))
            if working_copy(source, lab_dir / source.name)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reset", action="store_true", help="remove every copy first")
    parser.add_argument("--dir", type=Path, default=LAB_DIR, help="where the copies go")
    args = parser.parse_args(argv)
    written = make_copies(args.dir, reset=args.reset)
    kept = len(list(args.dir.glob("*.ipynb"))) - len(written)
    print(f"{args.dir}: {len(written)} working copies made, {kept} kept from before "
          f"(the course's own notebooks stay in notebooks/)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
