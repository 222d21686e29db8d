"""grpo_core.provenance: the commit a run names, whether its tree was clean, the draws'
fingerprint and the differences said in words."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from grpo_core.provenance import (
    code_version,
    describe_provenance,
    draws_fingerprint,
    provenance_differences,
    short_commit,
)


def git(folder, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "grpo_core").mkdir()
    (tmp_path / "grpo_core" / "loop.py").write_text("x = 1\n")
    (tmp_path / "data" / "runs" / "r").mkdir(parents=True)
    (tmp_path / "data" / "runs" / "r" / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("a\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_a_clean_tree_names_its_commit_from_any_folder_inside_it(repo):
    head = git(repo, "rev-parse", "HEAD")
    for folder in (repo, repo / "grpo_core"):
        assert code_version(folder) == {"commit": head, "clean": True, "changed": [],
                                        "changed_count": 0}


def test_changed_code_is_not_clean_but_runs_written_while_recording_are(repo):
    (repo / "data" / "runs" / "r" / "metrics.jsonl").write_text("{}\n{}\n")
    (repo / "data" / "runs" / "new").mkdir()
    (repo / "data" / "runs" / "new" / "config.json").write_text("{}")
    assert code_version(repo)["clean"] is True
    (repo / "grpo_core" / "loop.py").write_text("x = 2\n")
    (repo / "notes.txt").write_text("b\n")
    changed = code_version(repo)
    assert changed["clean"] is False and changed["changed"] == ["grpo_core/loop.py", "notes.txt"]
    assert changed["changed_count"] == 2


def test_an_untracked_module_changes_the_code_an_untracked_note_does_not(repo):
    (repo / "scratch.txt").write_text("mine")
    assert code_version(repo)["clean"] is True
    (repo / "grpo_core" / "extra.py").write_text("y = 1\n")
    assert code_version(repo)["changed"] == ["grpo_core/extra.py"]


def test_outside_git_the_commit_is_unknown_and_said_so(tmp_path):
    version = code_version(tmp_path)
    assert version["commit"] is None and version["clean"] is None
    assert "not in a git checkout" in version["note"]
    git(tmp_path, "init", "-q")  # a repository without a commit yet: no commit to name
    assert code_version(tmp_path)["commit"] is None


def test_a_checkout_in_a_folder_with_spaces_names_its_commit(tmp_path):
    folder = tmp_path / "my course"
    folder.mkdir()
    git(folder, "init", "-q")
    git(folder, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "first")
    assert code_version(folder)["commit"] == git(folder, "rev-parse", "HEAD")


def test_the_package_names_the_code_of_this_checkout():
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    assert code_version()["commit"] == head.stdout.strip()


def test_the_fingerprint_id_changes_with_any_part_and_only_then():
    parts = {"sampler": "decode_until", "torch": "2.13.0+cpu", "precision": {"a": 1}}
    first = draws_fingerprint(parts)
    assert first == {**parts, "id": first["id"]} and len(first["id"]) == 12
    assert draws_fingerprint(dict(reversed(parts.items())))["id"] == first["id"]
    for key, other in (("torch", "2.12.0+cpu"), ("precision", {"a": 2}), ("sampler", "x")):
        assert draws_fingerprint({**parts, key: other})["id"] != first["id"]
    with pytest.raises(ValueError, match="cannot contain"):
        draws_fingerprint({"id": "x"})
    # a part JSON cannot hold (a path) is hashed as its text
    assert draws_fingerprint({"where": Path("/a")})["id"] == draws_fingerprint(
        {"where": "/a"})["id"]


def config(commit: str | None, clean: bool = True, torch: str = "2.13.0+cpu") -> dict:
    return {"code": {"commit": commit, "clean": clean},
            "draws": draws_fingerprint({"sampler": "s", "torch": torch})}


def test_differences_are_said_in_words_and_nothing_for_one_clean_commit():
    a = config("a" * 40)
    assert provenance_differences(a, config("a" * 40)) == []
    assert provenance_differences(a, config("b" * 40)) == ["code: commit aaaaaaa vs bbbbbbb"]
    # one commit, but a tree with changes: the code is not known to agree
    assert provenance_differences(config("a" * 40, False), config("a" * 40, False)) == [
        "code: commit aaaaaaa+changes vs aaaaaaa+changes"]
    assert provenance_differences(a, config("a" * 40, torch="2.12")) == [
        "draws.torch: '2.13.0+cpu' vs '2.12'"]
    assert provenance_differences({}, {}) == ["code: unrecorded vs unrecorded",
                                              "draws: not recorded by either run"]
    assert provenance_differences(a, {}) == ["code: aaaaaaa vs unrecorded", "draws: not recorded"]
    assert provenance_differences({}, a)[0] == "code: unrecorded vs aaaaaaa"
    # code and draws both differ, and a part only one run records
    other = {"code": {"commit": "b" * 40, "clean": True},
             "draws": draws_fingerprint({"sampler": "s", "torch": "2.13.0+cpu", "isa": "AVX2"})}
    assert provenance_differences(a, other) == ["code: commit aaaaaaa vs bbbbbbb",
                                                "draws.isa: None vs 'AVX2'"]


def test_the_one_line_names_the_commit_and_the_draws():
    assert short_commit(None) == "unrecorded"
    said = describe_provenance(config("c" * 40))
    assert said.startswith("commit ccccccc, draws ") and len(said.split()[-1]) == 12
    assert describe_provenance({}) == (
        "recorded before runs named their code (no commit, no draws fingerprint)")
    assert describe_provenance({"code": {"commit": "d" * 40, "clean": True}}) == (
        "commit ddddddd, no draws fingerprint")
