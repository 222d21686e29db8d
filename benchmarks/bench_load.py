"""How long the offline model takes to load: first (converting) load vs cached load.

Each load runs in a fresh Python process, as a learner's kernel would, so import time is
measured too (reported separately). Median of 3 runs each; peak resident memory per run.

    .venv/bin/python benchmarks/bench_load.py [--runs 3]

Target (issue #2): the cached load takes at most 5 s on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, time
start = time.perf_counter()
import torch, transformers  # imports are timed separately: every notebook pays them once
imported = time.perf_counter()
from grpo_core.models import load_policy
model, tokenizer = load_policy("cpu")
loaded = time.perf_counter()
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"imports_s": imported - start, "load_s": loaded - imported,
                  "peak_mib": peak_kib / 1024}))
"""


def run_once(cache: str) -> dict[str, float]:
    env = {**os.environ, "GRPO_CACHE_DIR": cache, "HF_HUB_OFFLINE": "1", "GRPO_PROFILE": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(label: str, runs: list[dict[str, float]]) -> None:
    load = statistics.median(r["load_s"] for r in runs)
    imports = statistics.median(r["imports_s"] for r in runs)
    peak = max(r["peak_mib"] for r in runs)
    each = ", ".join(f"{r['load_s']:.2f}" for r in runs)
    print(
        f"{label:<16} load {load:6.2f} s (median; runs {each})  "
        f"imports {imports:5.2f} s  peak RSS {peak:7.0f} MiB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each")
    first, cached = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="grpo-bench-") as cache:
            first.append(run_once(cache))  # empty cache: GGUF -> safetensors
            cached.append(run_once(cache))  # the same cache, now complete
    summarize("first (convert)", first)
    summarize("cached", cached)
    median_cached = statistics.median(r["load_s"] for r in cached)
    verdict = "meets" if median_cached <= 5.0 else "MISSES"
    print(f"cached load {median_cached:.2f} s {verdict} the 5 s target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
