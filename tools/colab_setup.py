"""Install the course into a Colab runtime without replacing what Colab preinstalled.

The first code cell of every notebook clones the repository and runs this script, in Colab
only. It installs the course package (editable, from the clone, so it finds the recorded runs
in ``data/runs``) with its runtime dependencies only (``pyproject.toml``: no test or lab tools)
and Colab's own torch pinned to the version already there (a constraints file made on the
spot), then the offline model package without its dependencies.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# never replaced: Colab's CUDA build of torch matches its drivers
KEEP_PREINSTALLED = ("torch", "torchvision", "torchaudio")


def keep_preinstalled_constraints(names: tuple[str, ...] = KEEP_PREINSTALLED) -> str:
    """Constraint lines pinning each installed distribution of ``names`` to its current version."""
    lines = []
    for name in names:
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return "\n".join(lines) + "\n"


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=True)


def main() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write(keep_preinstalled_constraints())
    pip("-c", constraints.name, "-e", str(REPO_ROOT))
    pip("--no-deps", "-r", str(REPO_ROOT / "requirements-nodeps.txt"))
    print(f"installed the course from {REPO_ROOT}; kept: {keep_preinstalled_constraints().split()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
