"""Keep each notebook and its jupytext twin in step, and execute notebooks for committing.

Every notebook is written as ``notebooks/NN_name.py`` (jupytext ``py:percent``: reviewable
diffs) and committed as ``notebooks/NN_name.ipynb`` executed in the ``cpu`` profile, so a
reader sees real results.

    python tools/notebooks.py build [NAME ...]   # .py -> executed .ipynb (all, or the named ones)
    python tools/notebooks.py check              # exit 1 if a pair (or START_HERE) is out of sync
    python tools/notebooks.py start              # rewrite START_HERE.ipynb, the start page
    python tools/notebooks.py markdown NAME ...  # copy prose edits into the executed .ipynb
    python tools/notebooks.py sources NAME ...   # re-run only the cells that print package code
    python tools/notebooks.py snapshots [NAME ...]  # redraw the widgets' static pictures

This lives outside ``grpo_core`` on purpose: the package knows nothing about notebooks.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

try:  # run as a script (python tools/notebooks.py) or imported as tools.notebooks
    from tools.widget_snapshot import add_snapshots
except ImportError:  # pragma: no cover - the script's own folder is on sys.path instead
    from widget_snapshot import add_snapshots

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
FORMATS = "ipynb,py:percent"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def paired_scripts(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """The ``NN_*.py`` twins, in course order."""
    return sorted(p for p in notebook_dir.glob("[0-9][0-9]_*.py"))


def cell_signature(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(cell type, source) for every cell: what must agree between the two files of a pair."""
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


START_PAGE = "START_HERE.ipynb"  # what `make lab` opens: the path through the course
# each notebook's last build: seconds, the kernel's peak memory, the machine (the start page's
# table is written from it, so no time or memory figure is typed by hand)
BUILD_INFO = "build_info.json"
# appended to a notebook while it is built, then removed: the kernel's peak resident memory
PEAK_MARK = "__peak_rss_kib__"
# grpo_core.models.CACHE_ENV_VAR, named here so that this tool loads no torch
CACHE_ENV_VAR = "GRPO_CACHE_DIR"
PEAK_CELL = f"import resource\nprint({PEAK_MARK!r}, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
START_INTRO = """# GRPO from scratch: start here

Open the notebooks in this order; each one runs on its own. Start with **00 · Setup**: it
loads the model you will train and says which profile your machine runs. Every notebook is
already executed, so you can read its results before running anything; run a cell with
Shift+Enter, or the whole notebook with *Run → Run All Cells*.

**Profiles.** On a laptop the notebooks run in the `cpu` profile (the offline SmolLM2-135M,
groups of 8): real curves; the table below gives each notebook's measured time and peak
memory. Each notebook's kernel keeps its model in memory until you shut it down (the last
cell of each says so): on an 8 GB laptop, shut each one down before opening the next.
For a quick click-through, start JupyterLab with `GRPO_PROFILE=smoke make lab`: every cell
runs in seconds, but the runs are far too short to learn anything, so read the committed
results for that. On a GPU (Colab's badge in each notebook) the `gpu` profile trains
Qwen3-0.6B at the lecture's scale.

**An afternoon with the course** (on a laptop, `cpu` profile; the table below gives each
notebook's time and memory). Run 00 to 04 yourself, top to bottom: they are short, and each
shows one idea on the real model (the signal, one GRPO round, the group baseline, the clip
and the KL). Read 05 and 06, running the cells you want to change. Run 07 live: experiment 1
trains while you watch. For 08 and 09, read the committed results first (the recorded runs
took hours), then run sections 1-3 of each. Read 10 if you use TRL, then 11 and 12, which
read the recorded runs: how to tell what a run did, and whether a difference is real.

**Your copies.** `make lab` opens *working copies* of the notebooks (in the folder `lab/`,
which git ignores): run and edit them freely, the course's own executed notebooks in
`notebooks/` are never touched and stay the reference. To start one notebook afresh, delete
its copy (`rm lab/07_exp1_length.ipynb`) and start `make lab` again; `make lab-reset` starts
every copy afresh. The file browser reaches the rest of the course: `solutions/`, `docs/`,
the recorded runs in `data/runs/` and the package `grpo_core/`. A kernel whose tab is closed is
shut down after 30 minutes idle to free its memory; one whose tab is open keeps its model.
"""


def notebook_title(script: Path) -> str:
    """The notebook's title: its first markdown heading, without the ``#``."""
    first = jupytext.read(script).cells[0].source
    heading = next((line for line in first.splitlines() if line.startswith("# ")), script.stem)
    return heading.removeprefix("# ").strip()


def read_build_info(notebook_dir: Path = NOTEBOOK_DIR) -> dict[str, dict]:
    """``{notebook stem: its last build's figures}`` from ``build_info.json`` ({} if none)."""
    path = notebook_dir / BUILD_INFO
    return json.loads(path.read_text())["notebooks"] if path.exists() else {}


def record_build(stem: str, figures: dict, notebook_dir: Path = NOTEBOOK_DIR) -> None:
    """Store one notebook's build figures in ``build_info.json``, keeping the others'."""
    info = read_build_info(notebook_dir)
    info[stem] = figures
    (notebook_dir / BUILD_INFO).write_text(
        json.dumps({"notebooks": dict(sorted(info.items()))}, indent=1) + "\n")


def machine() -> str:
    """The CPU's model name, its core count and whether it has bfloat16 instructions."""
    model, flags = "unknown CPU", set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    bf16 = sorted(flags & {"amx_bf16", "avx512_bf16"})
    return (f"{model}, {os.cpu_count()} cores, "
            f"{'bfloat16 instructions (' + ', '.join(bf16) + ')' if bf16 else 'no bfloat16 instructions'}")


def timing_table(scripts: list[Path], info: dict[str, dict]) -> str:
    """The start page's table of measured build times and peak memory, and where they were
    measured; a notebook never built with figures gets a dash."""
    rows = ["| notebook | time to run | peak memory |", "|---|---|---|"]
    for script in scripts:
        got = info.get(script.stem)
        figures = (f"{_minutes(got['seconds'])} | {got['peak_rss_gib']:.1f} GiB" if got
                   else "not measured yet | -")
        if got and got.get("first_run"):
            figures += " (a first run: it converts the offline model once; later runs less)"
        rows.append(f"| [{script.stem}]({script.stem}.ipynb) | {figures} |")
    machines = sorted({(got["machine"], got["profile"]) for got in info.values()})
    where = "; ".join(f"{m} ({p} profile)" for m, p in machines) or "not measured yet"
    loads = [got["load_before"] for got in info.values()]
    idle = (f"the 1-minute load average as each build began was at most {max(loads):.1f} (it "
            "still counts the build before, when `make notebooks` runs them back to back)"
            if loads else "")
    return ("\n".join(rows) + f"\n\nMeasured by `make notebooks` on {where}; {idle}.\n\n"
            + BUSY_MACHINE)


# what the times assume, said where they are given
BUSY_MACHINE = (
    "**These times assume a machine doing nothing else.** Another program busy on one of the "
    "cores (a video call, a build, a second notebook running) leaves the course fewer cores: "
    "when a notebook loads the model it gives torch one thread per core that is not busy "
    "(notebook 00's `threads` line says how many), so it runs at the speed of the cores left "
    "rather than several times slower, but a program started after the model loaded is not "
    "seen. Close what you can before a long run, run one notebook at a time, and restart the "
    "kernel (or set `GRPO_THREADS=1`) if the machine got busy after the load.")


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def start_page(scripts: list[Path], info: dict[str, dict] | None = None) -> nbformat.NotebookNode:
    """The start page `make lab` opens: how to use the course, every notebook in order (each
    a link with its title), and each one's measured time and memory (``build_info.json``).
    Markdown only: nothing to run."""
    info = read_build_info() if info is None else info
    path = "\n".join(f"- [{notebook_title(script)}]({script.stem}.ipynb)" for script in scripts)
    notebook = nbformat.v4.new_notebook()
    # fixed cell ids: rewriting the page changes nothing when the notebooks did not change
    notebook.cells = [nbformat.v4.new_markdown_cell(START_INTRO, id="start-intro"),
                      nbformat.v4.new_markdown_cell(f"## The path through the course\n\n{path}",
                                                    id="start-path"),
                      nbformat.v4.new_markdown_cell(
                          "## How long each takes\n\n" + timing_table(scripts, info),
                          id="start-times")]
    notebook.metadata["kernelspec"] = KERNELSPEC
    return notebook


def write_start_page(scripts: list[Path], notebook_dir: Path = NOTEBOOK_DIR) -> Path:
    """Write :func:`start_page` to ``notebook_dir/START_HERE.ipynb``."""
    path = notebook_dir / START_PAGE
    nbformat.write(start_page(scripts), path)
    return path


def start_page_stale(scripts: list[Path], notebook_dir: Path = NOTEBOOK_DIR) -> str | None:
    """Why the committed start page differs from the one the notebooks give, or None."""
    path = notebook_dir / START_PAGE
    if not path.exists():
        return f"{START_PAGE} is missing (run: python tools/notebooks.py start)"
    if cell_signature(nbformat.read(path, as_version=4)) != cell_signature(start_page(scripts)):
        return f"{START_PAGE} is out of date (run: python tools/notebooks.py start)"
    return None


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


def build(script: Path, timeout_s: int = 3600, fresh_cache: bool = False) -> float:
    """Turn ``script`` into an executed notebook next to it; returns the seconds it took.

    ``fresh_cache``: the kernel starts with an empty model cache (``GRPO_CACHE_DIR`` in a
    temporary folder), as on a learner's first run, which converts the offline model once;
    the start page then gives that run's time and memory, and says so."""
    if fresh_cache:
        with tempfile.TemporaryDirectory(prefix="grpo-first-run-") as folder, \
                _environment(**{CACHE_ENV_VAR: folder}):
            return _build(script, timeout_s, first_run=True)
    return _build(script, timeout_s, first_run=False)


@contextlib.contextmanager
def _environment(**values: str):
    """``os.environ`` with ``values`` set while the block runs (a kernel started inside it
    inherits them)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _build(script: Path, timeout_s: int, first_run: bool) -> float:
    notebook = jupytext.read(script)
    notebook.metadata["kernelspec"] = KERNELSPEC
    notebook.metadata.setdefault("jupytext", {})["formats"] = FORMATS
    load_before = os.getloadavg()[0]
    notebook.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
    start = time.perf_counter()
    client = NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(script.parent)}},
    )
    client.execute()
    seconds = time.perf_counter() - start
    measured = notebook.cells.pop()
    peak_kib = int(measured.outputs[0]["text"].split()[-1])
    record_build(script.stem, {
        "seconds": round(seconds, 1), "peak_rss_gib": round(peak_kib / 2**20, 2),
        "profile": os.environ.get("GRPO_PROFILE", "(default)"), "machine": machine(),
        "load_before": round(load_before, 2), "date": time.strftime("%Y-%m-%d"),
        "first_run": first_run},
        script.parent)
    # a picture of every widget's final state beside its view: what JupyterLab before the
    # kernel runs, nbviewer and GitHub show instead of the widget's repr or a 0 % progress bar
    add_snapshots(notebook)
    nbformat.write(notebook, script.with_suffix(".ipynb"))
    return seconds


def redraw_snapshots(notebook_path: Path) -> int:
    """Add (or redraw) the widget snapshots of an executed notebook from its stored widget
    state, without executing anything. Returns how many widget outputs got one."""
    notebook = nbformat.read(notebook_path, as_version=4)
    written = add_snapshots(notebook)
    if written:
        nbformat.write(notebook, notebook_path)
    return written


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


def _prints_source(node: ast.stmt) -> bool:
    """``print(inspect.getsource(name))``."""
    call = node.value if isinstance(node, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == "print" and len(call.args) == 1
            and isinstance(call.args[0], ast.Call)
            and ast.unparse(call.args[0].func) == "inspect.getsource")


def shows_source(source: str) -> bool:
    """True for a cell that only imports and prints package code with ``inspect.getsource``:
    its output is the code itself, which changes whenever the code does."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    shown = [node for node in body if not isinstance(node, (ast.Import, ast.ImportFrom))]
    return bool(shown) and all(map(_prints_source, shown))


def refresh_sources(script: Path) -> int:
    """Re-run the cells of ``script``'s executed notebook that only print package code
    (:func:`shows_source`), each with the imports of every cell above it, and store their new
    output. Nothing else is executed or changed. Returns the number of outputs that changed."""
    notebook_path = script.with_suffix(".ipynb")
    executed = nbformat.read(notebook_path, as_version=4)
    imports: list[str] = ["import inspect"]
    changed = 0
    for cell in executed.cells:
        if cell.cell_type != "code":
            continue
        if shows_source(cell.source):
            program = "\n".join([*imports, cell.source])
            done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                                  cwd=script.parent, check=True)
            output = nbformat.v4.new_output("stream", name="stdout", text=done.stdout)
            if [dict(o) for o in cell.outputs] != [dict(output)]:
                cell.outputs = [output]
                changed += 1
        try:
            body = ast.parse(cell.source).body
        except SyntaxError:
            continue
        imports += [ast.unparse(node) for node in body
                    if isinstance(node, (ast.Import, ast.ImportFrom))]
    nbformat.write(executed, notebook_path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build_parser = sub.add_parser("build", help="execute notebooks from their .py twins")
    build_parser.add_argument("names", nargs="*", help="e.g. 00_setup (default: all)")
    build_parser.add_argument("--fresh-cache", action="store_true",
                              help="run with an empty model cache, as a learner's first run")
    sub.add_parser("check", help="report pairs that are out of sync")
    markdown_parser = sub.add_parser("markdown", help="copy prose edits into executed notebooks")
    markdown_parser.add_argument("names", nargs="+", help="e.g. 02_policy_rollout_reward")
    sources_parser = sub.add_parser("sources", help="re-run only the cells that print package code")
    sources_parser.add_argument("names", nargs="*", help="e.g. 03_group_baseline (default: all)")
    sub.add_parser("start", help=f"write {START_PAGE} from the notebooks' titles")
    snapshots_parser = sub.add_parser("snapshots", help="redraw the widgets' static pictures")
    snapshots_parser.add_argument("names", nargs="*", help="e.g. 03_group_baseline (default: all)")
    args = parser.parse_args(argv)

    scripts = paired_scripts()
    if args.command == "check":
        problems = [p for p in [*map(out_of_sync, scripts), start_page_stale(scripts)] if p]
        print("\n".join(problems) or f"{len(scripts)} notebook pairs in sync")
        return 1 if problems else 0
    if args.command == "start":
        print(f"wrote {write_start_page(scripts)}")
        return 0
    chosen = [s for s in scripts if not args.names or s.stem in args.names]
    unknown = set(args.names) - {s.stem for s in scripts}
    if unknown:
        parser.error(f"no such notebook(s): {sorted(unknown)}; have {[s.stem for s in scripts]}")
    if args.command == "sources":
        for script in chosen:
            print(f"{script.with_suffix('.ipynb').name}: {refresh_sources(script)} code listings "
                  "updated")
        return 0
    if args.command == "snapshots":
        for script in chosen:
            notebook_path = script.with_suffix(".ipynb")
            print(f"{notebook_path.name}: {redraw_snapshots(notebook_path)} widget snapshots")
        return 0
    if args.command == "markdown":
        for script in chosen:
            print(f"{script.with_suffix('.ipynb').name}: {copy_markdown(script)} markdown cells "
                  "updated")
        return 0
    print(f"profile: {os.environ.get('GRPO_PROFILE', '(default)')}")
    write_start_page(scripts)  # titles may have changed
    for script in chosen:
        print(f"executing {script.name} ...", flush=True)
        seconds = build(script, fresh_cache=args.fresh_cache)
        print(f"  wrote {script.with_suffix('.ipynb').name} in {seconds:.0f} s", flush=True)
    write_start_page(scripts)  # with the new times
    return 0


if __name__ == "__main__":
    sys.exit(main())
