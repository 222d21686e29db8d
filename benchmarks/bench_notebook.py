"""A notebook's wall time as a learner meets it: on an idle machine, then with another program
holding one core (a busy loop pinned to it, at the same priority: the browser, a video call).

Each run executes the notebook's ``py:percent`` script top to bottom in a fresh kernel
(nbclient, the notebook's folder as working directory, the committed ``.ipynb`` untouched),
with the profile given (``cpu`` by default, as the start page's times are), the model already
cached. The runs alternate idle and busy, ``--rounds`` times. Printed: every run's seconds,
the median busy / idle, and the start page's time for the notebook (``build_info.json``) with
the machine it was taken on.

    python benchmarks/bench_notebook.py [NAME ...] [--rounds 1] [--profile cpu] [--isa native|avx2]

NAME: e.g. ``03_group_baseline`` (the default). The course's thread plan
(``grpo_core.threads``) sees the busy loop when the notebook loads the model: the kernel's
threads line in notebook 00 says what it decided.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from machine import busy_loop, cpu_description, isa_description, run_with_isa

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def run_notebook(name: str, timeout_s: int = 3600) -> float:
    """Seconds to execute ``notebooks/<name>.py`` in a fresh kernel (its outputs discarded)."""
    import jupytext
    from nbclient import NotebookClient

    notebook = jupytext.read(NOTEBOOKS / f"{name}.py")
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    start = time.perf_counter()
    NotebookClient(notebook, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=["03_group_baseline"])
    parser.add_argument("--rounds", type=int, default=1, help="alternations idle, busy")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: torch's and oneDNN's kernels held to AVX2 in every kernel")
    args = parser.parse_args()
    run_with_isa(args.isa, sys.argv[1:])
    os.environ["GRPO_PROFILE"] = args.profile
    print(f"CPU: {cpu_description()}; {isa_description()}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    info = json.loads((NOTEBOOKS / "build_info.json").read_text())["notebooks"]
    core = sorted(os.sched_getaffinity(0))[-1]
    for name in args.names:
        times: dict[str, list[float]] = {"idle": [], "busy": []}
        for _ in range(args.rounds):
            times["idle"].append(run_notebook(name))
            loop = busy_loop(core)
            try:
                times["busy"].append(run_notebook(name))
            finally:
                loop.kill()
                loop.wait()
        idle, busy = (statistics.median(times[k]) for k in ("idle", "busy"))
        page = info.get(name, {})
        print(f"{name} ({args.profile}): idle {', '.join(f'{t:.0f}' for t in times['idle'])} s; "
              f"busy loop on core {core}: {', '.join(f'{t:.0f}' for t in times['busy'])} s; "
              f"busy / idle {busy / idle:.2f}; start page {page.get('seconds', '?')} s "
              f"(profile {page.get('profile', '?')}, {page.get('machine', '?')}); busy / start "
              f"page {busy / page['seconds'] if page.get('seconds') else float('nan'):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
