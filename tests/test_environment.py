"""The environment report (notebook 00), and the Colab setup pinning this environment's torch."""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import metadata

from grpo_core.environment import environment_report, package_versions
from tools.colab_setup import installed_versions, keep_installed_constraints


def test_report_names_profile_reason_and_device():
    report = environment_report("smoke")
    assert "profile       smoke (passed as an argument)" in report
    assert "device        cpu" in report
    assert re.search(r"^threads       \d+ threads?: ", report, re.MULTILINE)
    assert f"torch         {metadata.version('torch')}" in report


def test_missing_packages_are_reported_as_none():
    assert package_versions(("surely-not-installed-grpo",)) == {"surely-not-installed-grpo": None}


def test_colab_keeps_the_installed_torch():
    lines = keep_installed_constraints(installed_versions()).split()
    assert f"torch=={metadata.version('torch')}" in lines


def test_the_report_fits_100_columns_and_breaks_between_words(monkeypatch):
    from grpo_core import precision
    from grpo_core.environment import REPORT_WIDTH, environment_report, report_line

    real = precision.precision_plan

    def long_reason(profile):
        plan = real(profile)
        return replace(plan, reason="because " + "a fairly long explanation " * 12)

    monkeypatch.setattr(precision, "precision_plan", long_reason)
    lines = environment_report("smoke").splitlines()
    assert max(len(line) for line in lines) <= REPORT_WIDTH
    entry = [i for i, line in enumerate(lines) if line.startswith("precision")][0]
    assert lines[entry + 1].startswith(" " * 14) and lines[entry + 1][14] != " "
    assert " ".join(" ".join(lines[entry:entry + 6]).split()).count("fairly long") == 12
    assert report_line("x", "a" * 150).startswith("x" + " " * 13 + "a" * 150)  # one word: whole
