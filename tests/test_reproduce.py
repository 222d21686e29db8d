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
    printed = capsys.readouterr().out.split()
    assert printed[1:] == ["-m", "grpo_core", "mbpp", "--k", "8", "--steps", "40", "--steps",
                           "2", "--out", "runs/x"]  # the last --steps wins (argparse)
    assert printed[0] == sys.executable


def test_a_planned_run_adds_its_seed_saves_every_five_steps_and_knows_where_it_stands(
        runs, monkeypatch):
    monkeypatch.setattr(record_runs, "PLANNED", {"exp2-k8-seed2-cpu": ("exp2-k8-cpu",
                                                                      ["--seed", "2"])})
    command = record_runs.command_for("exp2-k8-seed2-cpu")
    assert command[3:] == ["mbpp", "--k", "8", "--steps", "40", "--seed", "2", "--save-every",
                           "5", "--quiet", "--out", "data/runs/exp2-k8-seed2-cpu"]
    folder = runs / "exp2-k8-seed2-cpu"
    assert record_runs.state_of("exp2-k8-seed2-cpu", command) == "start"
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "metrics.jsonl").write_text('{"step": 0}\n{"step": 5}\n')
    assert record_runs.state_of("exp2-k8-seed2-cpu", command) == "resume"
    (folder / "metrics.jsonl").write_text('{"step": 39}\n{"step": 40}\n')
    assert record_runs.state_of("exp2-k8-seed2-cpu", command) == "done"
    with pytest.raises(SystemExit, match="unknown runs"):
        record_runs.main(["nope"])
