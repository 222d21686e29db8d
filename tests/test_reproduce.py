"""``tools/reproduce.py`` and ``tools/record_runs.py``: a recorded run's own command again,
with a seed or dynamic sampling added, resumed where a session stopped it."""

from __future__ import annotations

import json
import sys

import pytest

from tools import record_runs, reproduce


def recorded(root, name: str, command: str, **config) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"command": command, **config}))


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "RUNS", tmp_path)
    monkeypatch.setattr(record_runs, "RUNS", tmp_path)
    monkeypatch.setattr(record_runs, "PENDING", tmp_path / "recording")
    recorded(tmp_path, "exp2-k8-cpu", "python -m grpo_core mbpp --k 8 --steps 40 "
             "--out data/runs/exp2-k8-cpu")
    recorded(tmp_path, "old-hacking", "python -m grpo_core.train hacking --steps 12 "
             "--out data/runs/x", proxy_reward="defines_function_reward")
    return tmp_path


def test_the_recorded_command_comes_back_without_its_output_folder(runs):
    assert reproduce.recorded_command("exp2-k8-cpu") == ["mbpp", "--k", "8", "--steps", "40"]
    # an old run: the former entry point, and the proxy that was then the default, written out
    assert reproduce.recorded_command("old-hacking") == [
        "hacking", "--steps", "12", "--proxy", "defines_function"]
    with pytest.raises(SystemExit, match="no recorded run 'nope'.*exp2-k8-cpu"):
        reproduce.recorded_command("nope")


def test_reproduce_writes_elsewhere_and_appends_what_it_is_given(runs, capsys):
    assert reproduce.main(["exp2-k8-cpu", "--steps", "2", "--out", "runs/x", "--dry-run"]) == 0
    note, line = capsys.readouterr().out.splitlines()
    assert "exp2-k8-cpu was recorded before runs named their commit" in note
    printed = line.split()
    assert printed[1:] == ["-m", "grpo_core", "mbpp", "--k", "8", "--steps", "40", "--steps",
                           "2", "--out", "runs/x"]  # the last --steps wins (argparse)
    assert printed[0] == sys.executable


def test_a_planned_run_adds_its_seed_saves_every_five_steps_and_knows_where_it_stands(
        runs, monkeypatch, tmp_path):
    monkeypatch.setattr(record_runs, "PLANNED", {"exp2-k8-seed2-cpu": ("exp2-k8-cpu",
                                                                      ["--seed", "2"])})
    command = record_runs.command_for("exp2-k8-seed2-cpu")
    assert command[3:] == ["mbpp", "--k", "8", "--steps", "40", "--seed", "2", "--precision",
                           "float32", "--save-every", "5", "--quiet", "--out",
                           "data/runs/exp2-k8-seed2-cpu"]
    commit, worktree = "c" * 40, tmp_path / "worktree"
    folder = runs / "exp2-k8-seed2-cpu"
    assert record_runs.state_of("exp2-k8-seed2-cpu", command, commit, worktree) == "start"
    (worktree / "data" / "runs" / "exp2-k8-seed2-cpu" / "checkpoint").mkdir(parents=True)
    assert record_runs.state_of("exp2-k8-seed2-cpu", command, commit, worktree) == "resume"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"step": 39}\n{"step": 40}\n')
    # finished, but by other code (or code that names none): recorded again
    for code in ({}, {"commit": "d" * 40, "clean": True}, {"commit": commit, "clean": False}):
        (folder / "config.json").write_text(json.dumps({"code": code}))
        assert record_runs.state_of("exp2-k8-seed2-cpu", command, commit, worktree) == "resume"
    (folder / "config.json").write_text(json.dumps({"code": {"commit": commit, "clean": True}}))
    assert record_runs.state_of("exp2-k8-seed2-cpu", command, commit, worktree) == "done"
    (folder / "metrics.jsonl").write_text('{"step": 0}\n{"step": 5}\n')
    assert record_runs.state_of("exp2-k8-seed2-cpu", command, commit, worktree) == "resume"
    with pytest.raises(SystemExit, match="unknown runs"):
        record_runs.main(["nope"])


def test_a_base_run_recorded_by_the_recorder_gives_back_only_its_own_options(runs):
    recorded(runs, "exp3-stop-cpu", "python -m grpo_core hacking --steps 30 --seed 2 "
             "--precision float32 --save-every 5 --quiet --resume --out data/runs/exp3-stop-cpu")
    assert record_runs.base_options("exp3-stop-cpu") == ["hacking", "--steps", "30"]


def test_the_plan_has_four_seeds_per_group_size_and_three_for_the_others():
    plan = record_runs.PLANNED
    for prefix, seeds in (("exp2-k2-", 4), ("exp2-k8-", 4), ("exp2-k16-", 4),
                          ("exp2-k2-dynamic", 3), ("exp3-stop", 3)):
        names = [n for n in plan if n.startswith(prefix) and ("dynamic" in n) == ("dynamic" in prefix)]
        assert len(names) == seeds, (prefix, names)
    assert plan["exp2-k16-seed3-cpu"] == ("exp2-k16-cpu", ["--seed", "3"])
    assert plan["exp2-k8-cpu"] == ("exp2-k8-cpu", [])
    assert plan["exp2-k2-dynamic-seed2-cpu"] == ("exp2-k2-cpu", ["--dynamic-sampling",
                                                                 "--eval-every", "10", "--seed", "2"])


def test_the_recording_commit_is_one_full_commit(tmp_path, monkeypatch):
    file = tmp_path / "recording_commit.txt"
    monkeypatch.setattr(record_runs, "COMMIT_FILE", file)
    monkeypatch.setattr(record_runs, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match="--commit REV"):
        record_runs.recording_commit()
    file.write_text("# a comment\nabc\n")
    with pytest.raises(SystemExit, match="one 40-digit commit"):
        record_runs.recording_commit()
    file.write_text("# a comment\n" + "e" * 40 + "\n")
    assert record_runs.recording_commit() == "e" * 40


def test_the_code_note_says_whether_todays_code_recorded_the_run(runs):
    recorded(runs, "new", "python -m grpo_core mbpp --k 2 --out data/runs/new",
             code={"commit": "f" * 40, "clean": True},
             draws={"sampler": "decode_until", "torch": "2.13.0+cpu", "cpu_kernels": "AVX2",
                    "id": "x"})
    same = reproduce.code_note("new", {"commit": "f" * 40, "clean": True})
    assert same.startswith("new was recorded by this code (commit fffffff).")
    assert same.endswith("torch 2.13.0+cpu and the CPU kernels AVX2.")
    recorded(runs, "capped", "python -m grpo_core mbpp --out data/runs/capped",
             code={"commit": "f" * 40, "clean": True},
             draws={"sampler": "s", "torch": "t", "cpu_kernels": "AVX2", "onednn_max_isa": "AVX2"})
    assert reproduce.code_note("capped", {"commit": "f" * 40, "clean": True}).endswith(
        "CPU kernels AVX2 (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2).")
    other = reproduce.code_note("new", {"commit": "1" * 40, "clean": True})
    assert "recorded by commit fffffff; today's code is 1111111" in other
    assert f"git worktree add --detach /tmp/replay-new {'f' * 40}" in other
    assert "-m grpo_core mbpp --k 2 --out runs/new" in other
    # a tree with changes is not the recorded code, even at the same commit
    assert "today's code is fffffff+changes" in reproduce.code_note(
        "new", {"commit": "f" * 40, "clean": False})


def test_finished_runs_wait_apart_until_the_whole_plan_is_promoted(runs, monkeypatch, tmp_path):
    monkeypatch.setattr(record_runs, "PLANNED", {"a-cpu": ("exp2-k8-cpu", []),
                                                 "b-cpu": ("exp2-k8-cpu", ["--seed", "1"])})
    commit = "c" * 40
    worktree = tmp_path / "worktree"
    for name in ("a-cpu", "b-cpu"):
        folder = worktree / "data" / "runs" / name
        (folder / "checkpoint").mkdir(parents=True)
        (folder / "metrics.jsonl").write_text('{"step": 40}\n')
        (folder / "config.json").write_text(json.dumps({"code": {"commit": commit,
                                                                 "clean": True}}))
    (runs / "a-cpu").mkdir()
    (runs / "a-cpu" / "metrics.jsonl").write_text("old\n")
    published = record_runs.publish(worktree, "a-cpu")
    assert published == runs / "recording" / "a-cpu"
    assert not (published / "checkpoint").exists() and (published / "metrics.jsonl").exists()
    assert (runs / "a-cpu" / "metrics.jsonl").read_text() == "old\n"  # the notebooks' run
    command = record_runs.command_for("a-cpu")
    assert record_runs.state_of("a-cpu", command, commit, worktree) == "done"
    with pytest.raises(SystemExit, match=r"1 of 2 planned runs are not recorded by ccccccc "
                                         r"yet: \['b-cpu'\]"):
        record_runs.promote(commit)
    record_runs.publish(worktree, "b-cpu")
    assert record_runs.promote(commit) == ["a-cpu", "b-cpu"]
    assert (runs / "a-cpu" / "metrics.jsonl").read_text() == '{"step": 40}\n'
    assert (runs / "b-cpu" / "config.json").exists() and not (runs / "recording" / "a-cpu").exists()


def test_record_runs_help_records_nothing(monkeypatch, capsys):
    monkeypatch.setattr(record_runs, "worktree_for", lambda commit: pytest.fail("recorded"))
    with pytest.raises(SystemExit) as stop:
        record_runs.main(["--help"])
    assert stop.value.code == 0 and "--promote" in capsys.readouterr().out
    args = record_runs.parse_args(["--list", "exp2-k8-cpu"])
    assert args.list and args.names == ["exp2-k8-cpu"] and not args.promote
