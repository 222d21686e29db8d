"""Keep each notebook and its jupytext twin in step, and execute notebooks for committing.

Every notebook is written as ``notebooks/NN_name.py`` (jupytext ``py:percent``: reviewable
diffs) and committed as ``notebooks/NN_name.ipynb`` executed in the ``cpu`` profile, so a
reader sees real results.

    python tools/notebooks.py build [NAME ...]   # .py -> executed .ipynb (all, or the named ones)
    python tools/notebooks.py check              # exit 1 if a pair is out of sync
    python tools/notebooks.py markdown NAME ...  # copy prose edits into the executed .ipynb

This lives outside ``grpo_core`` on purpose: the package knows nothing about notebooks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
FORMATS = "ipynb,py:percent"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def paired_scripts(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The ``NN_*.py`` twins, in course order."""
    return sorted(p for p in notebook_dir.glob("[0-9][0-9]_*.py"))


def cell_signature(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) for every cell: what must agree between the two files of a pair."""
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def out_of_sync(script: Path) -> str | None:
    """Why ``script`` and its ``.ipynb`` differ, or None when they hold the same cells."""
    notebook_path = script.with_suffix(".ipynb")
    if not notebook_path.exists():
        return f"{notebook_path.name} is missing (run: make notebooks)"
    from_script = cell_signature(jupytext.read(script))
    from_notebook = cell_signature(nbformat.read(notebook_path, as_version=4))
    if from_script == from_notebook:
        return None
    for index, (a, b) in enumerate(zip(from_script, from_notebook, strict=False)):
        if a != b:
            return f"{script.name} and {notebook_path.name} differ at cell {index}"
    return f"{script.name} has {len(from_script)} cells, {notebook_path.name} {len(from_notebook)}"


def build(script: Path, timeout_s: int = 3600) -> float:
    """Turn ``script`` into an executed notebook next to it; returns the seconds it took."""
    notebook = jupytext.read(script)
    notebook.metadata["kernelspec"] = KERNELSPEC
    notebook.metadata.setdefault("jupytext", {})["formats"] = FORMATS
    start = time.perf_counter()
    client = NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(script.parent)}},
    )
    client.execute()
    nbformat.write(notebook, script.with_suffix(".ipynb"))
    return time.perf_counter() - start


def copy_markdown(script: Path) -> int:
    """Copy ``script``'s markdown cells into its executed ``.ipynb``, keeping every output.

    For prose-only edits, which need no re-execution. Refuses (``ValueError``) when a code
    cell or the cell layout differs: then the notebook must be rebuilt. Returns the number
    of markdown cells that changed.
    """
    notebook_path = script.with_suffix(".ipynb")
    source = jupytext.read(script)
    executed = nbformat.read(notebook_path, as_version=4)
    if [c.cell_type for c in source.cells] != [c.cell_type for c in executed.cells]:
        raise ValueError(f"{script.name}: the cells differ in number or type; rebuild it")
    changed = 0
    for index, (new, old) in enumerate(zip(source.cells, executed.cells, strict=True)):
        if new.cell_type == "code" and new.source.strip() != old.source.strip():
            raise ValueError(f"{script.name}: code cell {index} changed; rebuild it")
        if new.cell_type == "markdown" and new.source != old.source:
            old.source = new.source
            changed += 1
    nbformat.write(executed, notebook_path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build", help="execute notebooks from their .py twins")
    build_parser.add_argument("names", nargs="*", help="e.g. 00_setup (default: all)")
    sub.add_parser("check", help="report pairs that are out of sync")
    markdown_parser = sub.add_parser("markdown", help="copy prose edits into executed notebooks")
    markdown_parser.add_argument("names", nargs="+", help="e.g. 02_policy_rollout_reward")
    args = parser.parse_args(argv)

    scripts = paired_scripts()
    if args.command == "check":
        problems = [p for p in map(out_of_sync, scripts) if p]
        print("\n".join(problems) or f"{len(scripts)} notebook pairs in sync")
        return 1 if problems else 0
    chosen = [s for s in scripts if not args.names or s.stem in args.names]
    unknown = set(args.names) - {s.stem for s in scripts}
    if unknown:
        parser.error(f"no such notebook(s): {sorted(unknown)}; have {[s.stem for s in scripts]}")
    if args.command == "markdown":
        for script in chosen:
            print(f"{script.with_suffix('.ipynb').name}: {copy_markdown(script)} markdown cells "
                  "updated")
        return 0
    print(f"profile: {os.environ.get('GRPO_PROFILE', '(default)')}")
    for script in chosen:
        print(f"executing {script.name} ...", flush=True)
        print(f"  wrote {script.with_suffix('.ipynb').name} in {build(script):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
