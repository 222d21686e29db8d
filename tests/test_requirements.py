"""The install files agree with pyproject.toml: requirements.txt is its runtime dependencies plus
the `lab` extra, and pyproject's bounds accept Colab's versions (tools/colab/pip-freeze.gpu.txt)
of everything the Colab setup keeps. Under `make test-colab` also: the pinned Colab versions
survived the setup and the test tools' install."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tools import colab_env, colab_setup

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "tools" / "colab_pins.txt"
# set by `make test-colab`, which runs this file inside .venv-colab
IN_COLAB_VENV = os.environ.get("GRPO_COLAB_PINNED") == "1"


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of a pip requirements file: no blanks, no comments."""
    lines = (line.split(" #")[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def differences(listed: list[str], expected: list[str]) -> tuple[list[str], list[str]]:
    """``(only in listed, only in expected)``, each requirement normalised by ``packaging``
    (name case, spaces, the order of specifiers do not count)."""
    def normalised(lines):
        return {str(Requirement(line)).lower() for line in lines}

    have, want = normalised(listed), normalised(expected)
    return sorted(have - want), sorted(want - have)


def parse_pins(lines: list[str]) -> dict[str, Version]:
    """``{canonical name: version}`` from ``name==version`` lines; ValueError on anything else
    (another operator, extras, a marker, a name pinned twice)."""
    pins: dict[str, Version] = {}
    for line in lines:
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        if (len(specifiers) != 1 or specifiers[0].operator != "==" or requirement.extras
                or requirement.marker is not None or "*" in specifiers[0].version):
            raise ValueError(f"not an exact pin (name==version): {line!r}")
        name = canonicalize_name(requirement.name)
        if name in pins:
            raise ValueError(f"{name} is pinned twice")
        pins[name] = Version(specifiers[0].version)
    return pins


def colab_pins() -> dict[str, Version]:
    return parse_pins(requirement_lines(PINS.read_text()))


def test_requirements_txt_is_the_runtime_dependencies_plus_the_lab_extra():
    project = pyproject()["project"]
    expected = project["dependencies"] + project["optional-dependencies"]["lab"]
    listed = requirement_lines((REPO / "requirements.txt").read_text())
    only_listed, only_expected = differences(listed, expected)
    assert (only_listed, only_expected) == ([], []), (
        f"requirements.txt has {only_listed}, pyproject.toml says {only_expected}")
    named = {Requirement(line).name for line in listed}
    assert {"torch", "transformers", "datasets", "jupyterlab", "ipywidgets", "matplotlib",
            "pandas", "nbval"} <= named  # what the design card says a learner gets


def test_a_changed_bound_or_a_missing_package_is_a_difference():
    expected = ["torch>=2.4", "nbval>=0.11.0"]
    assert differences(["Torch >= 2.4", "nbval>=0.11.0"], expected) == ([], [])
    assert differences(["torch>=2.5", "nbval>=0.11.0"], expected) == (["torch>=2.5"],
                                                                       ["torch>=2.4"])
    assert differences(["torch>=2.4"], expected) == ([], ["nbval>=0.11.0"])


def test_the_colab_pins_are_colabs_own_versions():
    """tools/colab_pins.txt holds the Colab packages the test tools may not move (the widgets,
    the kernel, what the notebooks import): each at the version of Colab's freeze."""
    freeze = colab_env.read_freeze(colab_env.FREEZE.read_text())
    pins = colab_pins()
    assert {"ipywidgets", "ipykernel", "numpy", "pandas", "matplotlib", "tqdm"} <= set(pins)
    assert {name: str(version) for name, version in pins.items()} == {
        name: freeze[name] for name in pins}


@pytest.mark.parametrize("line", ["numpy>=2.1", "numpy==2.*", "numpy[extra]==2.1.3",
                                  "numpy==2.1.3; python_version < '3.12'"])
def test_a_pin_that_is_not_name_equals_version_is_refused(line):
    with pytest.raises(ValueError, match="not an exact pin"):
        parse_pins([line])


def test_a_package_pinned_twice_is_refused():
    assert parse_pins(["NumPy==2.1.3"]) == {"numpy": Version("2.1.3")}
    with pytest.raises(ValueError, match="pinned twice"):
        parse_pins(["numpy==2.1.3", "NumPy==2.1.3"])


def test_pyproject_bounds_accept_every_colab_version():
    """The setup keeps every package Colab has, so the course's runtime bounds must accept
    Colab's versions, but for those a notebook's install is allowed to change (with why)."""
    freeze = colab_env.read_freeze(colab_env.FREEZE.read_text())
    may_change = {name for notebook in [None, *colab_setup.NOTEBOOK_NEEDS]
                  for name in colab_setup.may_change(notebook)}
    checked, refused = set(), []
    for requirement in map(Requirement, pyproject()["project"]["dependencies"]):
        name = canonicalize_name(requirement.name)
        if name in freeze and name not in may_change:
            checked.add(name)
            if not requirement.specifier.contains(Version(freeze[name]), prereleases=True):
                refused.append(f"{requirement} refuses Colab's {freeze[name]}")
    assert refused == []
    # the bounds that matter on Colab were really compared (a renamed package would skip them)
    assert {"torch", "ipywidgets", "numpy", "pandas", "accelerate", "peft",
            "safetensors"} <= checked


@pytest.mark.skipif(not IN_COLAB_VENV, reason="only in .venv-colab (make test-colab)")
def test_the_colab_setup_kept_colabs_versions():
    """.venv-colab got Colab's versions first and the setup cell's install after: a package the
    setup upgraded would, on Colab, replace one the kernel may already have imported."""
    installed = {name: Version(metadata.version(name)) for name in colab_pins()}
    assert installed == colab_pins()


def test_trl_is_bounded_above_by_the_version_the_parity_tests_and_notebook_10_ran():
    # TRL changes metric names and defaults between minor versions (1.18 renamed metrics), so a
    # learner must get the TRL the course was tested with, not the newest one
    trl = next(Requirement(line) for line in pyproject()["project"]["dependencies"]
               if Requirement(line).name == "trl")
    tested = Version(metadata.version("trl"))
    assert tested in trl.specifier, f"the installed TRL {tested} is outside {trl}"
    upper = [s for s in trl.specifier if s.operator == "<"]
    assert len(upper) == 1, f"{trl} has no upper bound"
    assert Version(upper[0].version) > tested
    assert Version(upper[0].version).release[:2] == (tested.major, tested.minor + 1), (
        f"{trl}: the bound should stop at the next minor version after the tested {tested}")
    for path in ("requirements.txt", "requirements-colab-trl.txt"):
        listed = [Requirement(line) for line in requirement_lines((REPO / path).read_text())]
        assert [r.specifier for r in listed if r.name == "trl"] == [trl.specifier], path
