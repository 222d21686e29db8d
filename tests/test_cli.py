"""The command line, ``python -m grpo_core``: what a smoke run of each experiment writes, how
its options reach the train config, and the line it ends with.

The three smoke runs load the offline model; the option tests only parse.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from grpo_core.cli import main
from grpo_core.run_files import read_jsonl, read_samples

CONTRACT_KEYS = {
    "step", "reward", "reward_std", "rewards/length_reward/mean", "frac_reward_zero_std",
    "entropy", "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean",
    "loss", "grad_norm", "learning_rate", "step_time",
}


# --- what a run writes: a smoke run of each experiment -------------------------------------


def test_cli_smoke_run_writes_every_contract_metric_and_a_png(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr("sys.argv", ["grpo_core", "length"])
    code = main(["length", "--profile", "smoke", "--out", str(out), "--steps", "2",
                 "--max-new-tokens", "6", "--no-checkpoint", "--quiet"])
    assert code == 0
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert set(record) >= CONTRACT_KEYS, CONTRACT_KEYS - set(record)
        assert "kl" not in record  # beta = 0
        assert all(math.isfinite(v) for v in record.values() if isinstance(v, float))
        assert record["reward"] <= 0  # -|len - 20| is never positive
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = json.loads((out / "config.json").read_text())
    assert config["experiment"] == "length" and config["train"]["beta"] == 0.0
    assert config["reward_funcs"] == ["length_reward"]
    assert re.match(r"\d+ threads?: \d+ usable cores?, \d+\.\d busy with other programs",
                    config["threads"])
    assert not (out / "checkpoint").exists()


def test_cli_threads_sets_torchs_count_and_the_config_says_so(tmp_path):
    import torch

    before = torch.get_num_threads()
    try:
        assert main(["length", "--profile", "smoke", "--out", str(tmp_path / "run"), "--steps",
                     "1", "--max-new-tokens", "4", "--no-checkpoint", "--quiet",
                     "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["threads"] == "1 thread, set by --threads"


def test_cli_mbpp_k4_smoke_run_scores_code_in_the_sandbox(tmp_path):
    out = tmp_path / "mbpp"
    code = main(["mbpp", "--k", "4", "--profile", "smoke", "--out", str(out), "--steps", "2",
                 "--no-checkpoint", "--quiet"])
    assert code == 0
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]  # step 0: the base model, held out
    assert "reward" not in records[0]
    for record in records[1:]:
        assert 0.0 <= record["rewards/unit_test_reward/mean"] <= 1.0
        assert record["frac_reward_zero_std"] in (0.0, 1.0)  # one prompt per step at k=4
    for record in records:  # smoke: 3 held-out problems x 1 sample, every step
        assert 0.0 <= record["eval/unit_test_reward"] <= 1.0
        assert record["eval/unit_test_reward/sem"] >= 0.0
        assert record["eval/unit_test_reward/delta_sem"] >= 0.0
    assert records[0]["eval/unit_test_reward/delta_sem"] == 0.0
    config = json.loads((out / "config.json").read_text())
    assert config["experiment"] == "mbpp" and config["reward_funcs"] == ["unit_test_reward"]
    assert config["train"]["group_size"] == 4 and config["train"]["prompts_per_step"] == 1
    assert config["train"]["eval_every"] == 1 and config["eval_samples_per_problem"] == 1
    assert len(config["held_out_task_ids"]) == 3
    assert (out / "curves.png").stat().st_size > 0
    samples = read_samples(out)
    assert len(samples.select(split="train")) == 2 * 4
    assert len(samples.select(split="held_out")) == 3 * 3  # 3 evaluations x 3 problems
    held_out = set(config["held_out_task_ids"])
    assert not {row["prompt_id"] for row in samples.select(split="train")} & held_out
    assert {row["prompt_id"] for row in samples.select(split="held_out")} == held_out


def test_cli_hacking_smoke_run_logs_proxy_true_score_and_held_out(tmp_path):
    out = tmp_path / "hacking"
    code = main(["hacking", "--profile", "smoke", "--out", str(out), "--steps", "2",
                 "--no-checkpoint", "--quiet"])
    assert code == 0
    records = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    assert set(records[0]) == {"step", "time/eval"} | {
        f"eval/{name}{stat}" for name in ("unit_test_reward", "long_function_reward",
                                          "defines_function_reward")
        for stat in ("", "/sem", "/delta_sem")} | {"eval/unit_test_reward/pass@1",
                                                   "eval/unit_test_reward/pass@1/sem"}
    # pass@k for the pass/fail unit tests only (smoke: one sample a problem: pass@1 alone)
    for record in records[1:]:  # the reward is the proxy alone: the true score has weight 0
        assert record["reward"] == pytest.approx(record["rewards/long_function_reward/mean"])
        assert 0.0 <= record["rewards/unit_test_reward/mean"] <= 1.0
    for record in records:
        for name in ("unit_test_reward", "long_function_reward", "defines_function_reward"):
            assert 0.0 <= record[f"eval/{name}"] <= 1.0
        # a completion earns the length-scaled proxy only if it defines the function
        assert record["eval/long_function_reward"] <= record["eval/defines_function_reward"]
    config = json.loads((out / "config.json").read_text())
    assert config["proxy_reward"] == "long_function_reward"
    assert config["true_metric"] == "eval/unit_test_reward"
    assert config["reward_weights"] == [1.0, 0.0]
    held_out = read_samples(out).select(split="held_out")
    assert {row["step"] for row in held_out} == {0, 1, 2}
    assert set(held_out[0]) >= {"unit_test_reward", "long_function_reward",
                                "defines_function_reward", "completion"}
    assert "advantage" not in held_out[0] and "reward" not in held_out[0]


# --- the options: parsed into the experiment and the train config --------------------------


def test_stop_at_on_the_command_line_overrides_the_experiments_rule(capsys):
    # the runs recorded before the rule are reproduced with --stop-at none (notebook 11)
    from grpo_core.cli import config_overrides, parse_args
    from grpo_core.experiments import EXPERIMENTS, build_config
    from grpo_core.profiles import get_profile

    cpu = get_profile("cpu")
    off = config_overrides(parse_args(["hacking", "--stop-at", "none"]))
    assert off == {"stop_at": None}
    assert build_config(cpu, EXPERIMENTS["hacking"](cpu), **off).stop_at is None
    on = config_overrides(parse_args(["length", "--stop-at", "code_block"]))
    assert build_config(cpu, EXPERIMENTS["length"](cpu), **on).stop_at == "code_block"
    assert "stop_at" not in config_overrides(parse_args(["mbpp"]))
    with pytest.raises(SystemExit, match="2"):
        parse_args(["mbpp", "--stop-at", "fence"])
    assert "invalid choice: 'fence'" in capsys.readouterr().err


def test_eval_samples_sets_the_held_out_samples_of_both_code_experiments():
    from grpo_core.cli import config_overrides, make_experiment, parse_args
    from grpo_core.experiments import eval_size
    from grpo_core.profiles import get_profile

    cpu = get_profile("cpu")
    for name in ("mbpp", "hacking"):
        args = parse_args([name, "--profile", "cpu", "--eval-samples", "3"])
        experiment = make_experiment(name, cpu, args)
        assert experiment.evaluate.samples_per_prompt == 3
        assert experiment.notes["eval_samples_per_problem"] == 3
        default = make_experiment(name, cpu, parse_args([name, "--profile", "cpu"]))
        assert default.evaluate.samples_per_prompt == eval_size(cpu).samples == 2
    assert eval_size(cpu, 3).every == eval_size(cpu).every  # only the samples change
    with pytest.raises(ValueError, match="eval samples per problem must be an int >= 1"):
        eval_size(cpu, 0)
    # and samples.jsonl can keep every one of them (TrainConfig keeps the first 2 by default)
    kept = parse_args(["mbpp", "--eval-samples", "3", "--samples-eval-per-problem", "3"])
    assert config_overrides(kept) == {"samples_eval_per_problem": 3}
    with pytest.raises(SystemExit, match="--eval-samples belongs to mbpp and hacking"):
        main(["length", "--profile", "smoke", "--eval-samples", "3", "--out", "/nonexistent"])


def test_beta_on_the_command_line_reaches_the_train_config():
    # the beta runs of notebook 07: python -m grpo_core length --beta 0.04 ...
    from grpo_core.cli import config_overrides, parse_args

    args = parse_args(["length", "--profile", "cpu", "--beta", "0.04", "--seed", "0"])
    assert config_overrides(args) == {"beta": 0.04, "seed": 0}
    assert "beta" not in config_overrides(parse_args(["length"]))


# --- the line a run ends with --------------------------------------------------------------


def test_the_last_line_reads_past_a_step_zero_row():
    from grpo_core.cli import summary
    from grpo_core.loop import RunResult

    base = {"step": 0, "eval/unit_test_reward": 0.1, "eval/unit_test_reward/sem": 0.02,
            "eval/defines_function_reward": 0.5, "time/eval": 1.0}
    trained = {"step": 1, "reward": 0.5, "completions/mean_chars": 100.0}
    said = summary(RunResult(None, None, metrics=[base, trained]))
    assert said.startswith("last reward 0.5, mean characters 100.0")
    assert "held out at step 0: eval/unit_test_reward 0.1 ± 0.02 s.e." in said
    assert summary(RunResult(None, None, metrics=[base])).startswith("last reward nan")
    assert summary(RunResult(None, None)) == "last reward nan, mean characters nan"


def test_dynamic_sampling_and_its_cap_come_from_the_command_line():
    from grpo_core.cli import config_overrides, parse_args

    assert config_overrides(parse_args(["mbpp", "--dynamic-sampling"])) == {
        "dynamic_sampling": True}
    assert config_overrides(parse_args(["mbpp", "--dynamic-sampling",
                                        "--max-refill-generations", "8"])) == {
        "dynamic_sampling": True, "max_refill_generations": 8}
    assert "dynamic_sampling" not in config_overrides(parse_args(["mbpp"]))
    with pytest.raises(SystemExit, match="needs --dynamic-sampling"):
        config_overrides(parse_args(["mbpp", "--max-refill-generations", "8"]))


def test_the_sampling_correction_and_its_cap_come_from_the_command_line():
    from grpo_core.cli import config_overrides, parse_args

    assert config_overrides(parse_args(["length", "--sampling-correction", "token_mask",
                                        "--sampling-correction-cap", "2"])) == {
        "sampling_correction": "token_mask", "sampling_correction_cap": 2.0}
    assert config_overrides(parse_args(["length", "--sampling-correction", "measure"])) == {
        "sampling_correction": "measure"}
    assert "sampling_correction" not in config_overrides(parse_args(["length"]))
    for without_mode in (["--sampling-correction-cap", "2"],
                         ["--sampling-correction", "measure", "--sampling-correction-cap", "2"]):
        with pytest.raises(SystemExit, match="needs --sampling-correction MODE"):
            config_overrides(parse_args(["length", *without_mode]))
    with pytest.raises(SystemExit):
        parse_args(["length", "--sampling-correction", "tokens"])
