"""tools/colab_env.py: Colab's freeze read right, the real/metadata-only split, the metadata-only
packages pip can read, and the judge of a setup run, fed runs it must fail."""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest

from tools import colab_env, colab_setup

FREEZE_TEXT = """# a comment
absl-py==1.4.0
Jinja2==3.1.6
google-colab @ file:///colabtools/dist/google_colab-1.0.0.tar.gz
torch==2.11.0+cu128
"""


def test_a_freeze_is_read_as_canonical_names_and_versions_without_url_lines():
    assert colab_env.read_freeze(FREEZE_TEXT) == {
        "absl-py": "1.4.0", "jinja2": "3.1.6", "torch": "2.11.0+cu128"}


def test_the_committed_freeze_names_its_source_and_every_pin_has_its_metadata():
    text = colab_env.FREEZE.read_text()
    assert re.match(r"# googlecolab/backend-info, pip-freeze.gpu.txt at commit [0-9a-f]{40} "
                    r"\(\d{4}-\d{2}-\d{2}\)", text)
    pins = colab_env.read_freeze(text)
    stored = json.loads(colab_env.METADATA.read_text())
    assert len(pins) > 600
    # python-apt is Debian's, not the package index's: the one pin without metadata
    assert set(pins) - set(stored) == {"python-apt"}
    assert all(stored[name]["version"] == pins[name] for name in stored)
    assert pins["python-apt"] and pins["torch"].startswith("2.11.0")


FAKE_METADATA = {
    "a": {"name": "a", "version": "1", "requires_dist": ["b>=1", "c; python_version < '3.13'",
                                                          "d; extra == 'fast'"]},
    "b": {"name": "b", "version": "1", "requires_dist": ["e", "not-in-the-freeze"]},
    "c": {"name": "c", "version": "1", "requires_dist": []},
    "d": {"name": "d", "version": "1", "requires_dist": []},
    "e": {"name": "e", "version": "1", "requires_dist": []},
}


def test_the_closure_follows_requirements_under_colabs_markers_and_no_extras():
    assert colab_env.closure(["a"], FAKE_METADATA) == {"a", "b", "e"}
    assert colab_env.closure(["c"], FAKE_METADATA) == {"c"}
    assert colab_env.closure(["missing"], FAKE_METADATA) == set()


def test_what_is_installed_for_real_covers_the_course_and_leaves_torch_to_its_own_install():
    pins = colab_env.read_freeze(colab_env.FREEZE.read_text())
    stored = json.loads(colab_env.METADATA.read_text())
    # a renamed root would silently leave a package the course imports as metadata only
    assert {colab_env.canonical(name) for name in colab_env.IMPORTED} <= set(pins)
    real = {line.split("==")[0] for line in colab_env.installed_for_real(pins, stored)}
    assert {"transformers", "huggingface-hub", "pyarrow", "ipywidgets", "pandas"} <= real
    assert not {name for name in real if colab_env.TORCH_FAMILY.match(name)}
    assert {"tensorflow", "jax", "gradio"}.isdisjoint(real)


def test_a_metadata_only_package_reads_back_as_installed_with_its_requirements(tmp_path):
    entry = {"name": "gradio", "version": "6.24.0", "requires_python": ">=3.10",
             "requires_dist": ["huggingface-hub<2.0,>=1.16.0", "audioop-lts; python_version >= '3.13'"]}
    folder = colab_env.write_stub(tmp_path, entry)
    dist = metadata.Distribution.at(folder)
    assert (dist.metadata["Name"], dist.version) == ("gradio", "6.24.0")
    assert dist.requires == entry["requires_dist"]
    assert dist.metadata["Requires-Python"] == ">=3.10"
    # pip uninstalls what RECORD lists: the folder's own three files
    assert sorted(line.split(",")[0] for line in dist.read_text("RECORD").splitlines()) == [
        f"{folder.name}/{name}" for name in ("INSTALLER", "METADATA", "RECORD")]


INSTALL_CONFLICT = """\
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.
gradio 6.24.0 requires huggingface-hub<2.0,>=1.16.0, but you have huggingface-hub 2.4.0 which is incompatible.
"""
KNOWN_CONFLICT = """\
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.
cudf-cu12 26.2.1 requires cuda-toolkit[nvcc,nvrtc]==12.*, but you have cuda-toolkit 13.0.2 which is incompatible.
"""


def test_unmet_requirements_are_read_from_install_and_check_wording_alike():
    check_output = ("cudf-cu12 26.2.1 has requirement cuda-toolkit[nvcc,nvrtc]==12.*, but you have "
                    "cuda-toolkit 13.0.2.\nipython 7.34.0 requires jedi, which is not installed.\n")
    assert colab_env.unmet_requirements(check_output) == {("cudf-cu12", "cuda-toolkit"),
                                                          ("ipython", "jedi")}
    assert colab_env.unmet_requirements(KNOWN_CONFLICT) == {("cudf-cu12", "cuda-toolkit")}


@pytest.mark.parametrize("output, status, changed, restart_allowed, expected", [
    (INSTALL_CONFLICT, 0, {}, False, "pip reported trouble: gradio 6.24.0 requires"),
    ("ERROR: Could not find a version that satisfies the requirement trl<1.17", 1, {}, False,
     "pip reported trouble: ERROR: Could not find"),
    ("", 0, {"huggingface-hub": ("1.27.0", "2.4.0")}, False,
     "changed huggingface-hub 1.27.0 -> 2.4.0, which the setup may not change"),
    ("RESTART: pyarrow changed", colab_setup.RESTART_EXIT, {}, False, "asked for a restart"),
    ("", 1, {}, False, "exited with status 1"),
], ids=["new-conflict", "unresolvable", "unlisted-change", "restart", "failed"])
def test_a_setup_run_that_breaks_a_rule_is_judged_a_failure(output, status, changed,
                                                            restart_allowed, expected):
    problems = colab_env.setup_problems(output, status, changed, {"pyarrow": "TRL needs it"},
                                        restart_allowed, {("cudf-cu12", "cuda-toolkit")})
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_clean_run_conflicts_the_runtime_already_had_and_allowed_changes_pass():
    known = {("cudf-cu12", "cuda-toolkit")}
    allowed = {"pyarrow": "TRL needs it"}
    assert colab_env.setup_problems("installed the course", 0, {}, allowed, False, known) == []
    assert colab_env.setup_problems(KNOWN_CONFLICT, colab_setup.RESTART_EXIT,
                                    {"pyarrow": ("18.1.0", "26.0.1")}, allowed, True, known) == []
    # the same conflict is the setup's doing when the runtime did not have it before
    assert colab_env.setup_problems(KNOWN_CONFLICT, 0, {}, allowed, False, set())
