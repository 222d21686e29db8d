"""What the benchmarks say about the machine they ran on, and the conditions they can set up:
the CPU and its flags, kernels held to AVX2 (``--isa avx2``), another program on one core
(``--busy-core``). Imported by the ``bench_*.py`` scripts beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# the kernels of a CPU without AVX-512 (--isa avx2): torch's own and oneDNN's
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def isa_description() -> str:
    """Which kernels this process runs: the CPU's own, or held to AVX2 (``--isa avx2``)."""
    held = all(os.environ.get(key) == value for key, value in AVX2_ONLY.items())
    return ("kernels held to AVX2 (ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2)" if held
            else "the CPU's own kernels")


def run_with_isa(isa: str, argv: list[str]) -> None:
    """For ``--isa avx2``: run this script again with the AVX2 environment, unless it is set
    (the variables are read once, when torch loads its kernels)."""
    if isa == "avx2" and any(os.environ.get(k) != v for k, v in AVX2_ONLY.items()):
        os.execve(sys.executable, [sys.executable, sys.argv[0], *argv], {**os.environ, **AVX2_ONLY})


def busy_loop(core: int) -> subprocess.Popen:
    """Another program holding one core: a Python busy loop pinned to ``core``, at this
    process's priority, until it is killed."""
    code = (f"import os\nos.sched_setaffinity(0, {{{core}}})\n"
            "while True:\n    pass\n")
    return subprocess.Popen([sys.executable, "-c", code])


def cpu_description() -> str:
    """The CPU's name and the flags that decide the precision plan (avx2, avx512_bf16, amx)."""
    import platform

    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:  # not Linux: the name only
        pass
    cores = os.cpu_count()
    wanted = ["avx2", "avx512f", "avx512_bf16", "amx_bf16"]
    shown = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in wanted) if flags else "flags unknown"
    return f"{name}, {cores} logical CPUs ({shown})"
