"""The environment report (notebook 00), and the Colab setup pinning this environment's torch."""

from __future__ import annotations

from importlib import metadata

from grpo_core.environment import environment_report, package_versions
from tools.colab_setup import installed_versions, keep_installed_constraints


def test_report_names_profile_reason_and_device():
    report = environment_report("smoke")
    assert "profile       smoke (passed as an argument)" in report
    assert "device        cpu" in report
    assert f"torch         {metadata.version('torch')}" in report


def test_missing_packages_are_reported_as_none():
    assert package_versions(("surely-not-installed-grpo",)) == {"surely-not-installed-grpo": None}


def test_colab_keeps_the_installed_torch():
    lines = keep_installed_constraints(installed_versions()).split()
    assert f"torch=={metadata.version('torch')}" in lines
