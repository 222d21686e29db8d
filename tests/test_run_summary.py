"""``tools/run_summary.py``: the figures a closing note quotes, read from a run's files."""

from __future__ import annotations

import json

from tools.run_summary import HEADER, main, summary_row


def write_run(folder, records, config) -> None:
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "config.json").write_text(json.dumps(config))


def proxy_run() -> list[dict]:
    """Ten steps on a proxy (reward 0.1 -> 1.0), the true score held out at steps 0 and 10."""
    records = [{"step": 0, "time/eval": 60.0, "eval/unit_test_reward": 0.30,
                "eval/unit_test_reward/sem": 0.031, "eval/unit_test_reward/delta_sem": 0.0}]
    for step in range(1, 11):
        records.append({"step": step, "reward": 0.1 * step, "step_time": 30.0,
                        "completions/clipped_ratio": 1.0 if step <= 5 else 0.25})
    records[-1].update({"eval/unit_test_reward": 0.12, "eval/unit_test_reward/sem": 0.03,
                        "eval/unit_test_reward/delta_sem": 0.04, "time/eval": 60.0})
    return records


def test_a_proxy_run_reports_its_true_score_against_step_0(tmp_path):
    write_run(tmp_path / "hack", proxy_run(),
              {"reward_funcs": ["long_function_reward", "unit_test_reward"],
               "reward_weights": [1.0, 0.0]})
    row = summary_row(tmp_path / "hack").split(" | ")
    assert row[1:5] == ["eval/unit_test_reward", "0.300 ± 0.031", "0.120 ± 0.030 (step 10)",
                        "-0.180 ± 0.040 (-4.5)"]
    assert row[5] == "0.15 -> 0.95"  # the first and last fifth: steps 1-2, 9-10
    assert row[6] == "25%"
    assert row[7] == "7 min"  # 10 steps x 30 s and two evaluations of 60 s
    assert row[9] == "recorded before runs named their code (no commit, no draws fingerprint) |"


def test_each_run_names_the_code_that_recorded_it_and_other_draws_are_pooled_aloud(
        tmp_path, capsys):
    code = {"commit": "ab" * 20, "clean": True}
    write_run(tmp_path / "s0", proxy_run(), {"reward_funcs": ["unit_test_reward"],
                                             "code": code, "draws": {"id": "0123456789ab"}})
    later = proxy_run()
    later[0]["eval/unit_test_reward"] = 0.35  # another draw of the base model's completions
    write_run(tmp_path / "s1", later, {"reward_funcs": ["unit_test_reward"],
                                       "train": {"seed": 1}})
    assert main([str(tmp_path / "s0"), str(tmp_path / "s1")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith("| commit ababab, draws 0123456789ab |".replace("ababab", "abababa"))
    assert lines[7].endswith("same distribution, other draws (step-0 scores 0.300, 0.350) |")


def test_a_run_trained_on_the_held_out_reward_reports_that_reward(tmp_path, capsys):
    # experiment 2: eval/unit_test_reward is what it trained on, so no *true* score, but
    # the held-out change of the trained reward is the result
    write_run(tmp_path / "k8", proxy_run(), {"reward_funcs": ["unit_test_reward"]})
    write_run(tmp_path / "plain", [{"step": 1, "reward": 1.0}], {})
    assert main([str(tmp_path / "k8"), str(tmp_path / "plain")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the per-run table, a blank line, then one row per setup (runs that differ in the seed)
    assert lines[0] == HEADER and len(lines) == 8 and lines[4] == ""
    assert lines[7].startswith("| `k8` | eval/unit_test_reward: seed 0: ")
    assert "| `k8` | eval/unit_test_reward | 0.300 ± 0.031 |" in lines[2]
    assert lines[3].startswith("| `plain` | - | - | - | - | 1 -> 1 | - |")


def test_a_name_that_is_not_a_recorded_run_is_refused_with_the_runs_there(tmp_path, capsys):
    import pytest

    write_run(tmp_path / "k8", proxy_run(), {"reward_funcs": ["unit_test_reward"]})
    with pytest.raises(SystemExit, match=r"not a recorded run .*nope"):
        main([str(tmp_path / "k8"), str(tmp_path / "nope")])
    assert main(["--help"]) == 0
    assert "Usage: ``python tools/run_summary.py" in capsys.readouterr().out
