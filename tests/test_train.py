"""The training loop and its command line, on the real offline model in tiny runs."""

from __future__ import annotations

import json
import math

import pytest
import torch

from grpo_core.cli import main
from grpo_core.experiments import negated
from grpo_core.loop import TrainConfig, checkpoint_step, make_reference, train
from grpo_core.rewards import length_reward
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl, read_samples
from grpo_core.scoring import RewardError, call_reward

CONTRACT_KEYS = {
    "step", "reward", "reward_std", "rewards/length_reward/mean", "frac_reward_zero_std",
    "entropy", "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean",
    "loss", "grad_norm", "learning_rate", "step_time",
}
PROMPTS = ["Say hello.", "Name a colour.", "Describe the sea."]


@pytest.fixture
def policy(smoke_policy):
    """A tiny random Llama with the offline model's tokenizer: the loop's mechanics in seconds.

    (The real model is trained by the command-line test; this one never emits EOS, so every
    completion runs to ``max_new_tokens``.)
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    _, tokenizer = smoke_policy
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config).eval(), tokenizer


def tiny(smoke_profile, **overrides):
    values = {"max_new_tokens": 6, "max_steps": 2, "save_checkpoint": False, **overrides}
    return TrainConfig.from_profile(smoke_profile, **values)


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
    assert not (out / "checkpoint").exists()


def test_beta_zero_creates_no_reference_model(smoke_policy):
    model, _ = smoke_policy
    assert make_reference(model, 0.0) is None
    reference = make_reference(model, 0.04)
    assert reference is not model and not any(p.requires_grad for p in reference.parameters())


def test_beta_positive_logs_kl(policy, smoke_profile):
    model, tokenizer = policy
    result = train(model, tokenizer, PROMPTS, length_reward,
                   tiny(smoke_profile, beta=0.04, max_steps=1), progress=False)
    assert result.ref_model is not None
    assert result.metrics[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # the policy starts at the reference


def test_reusing_a_rollout_moves_the_ratio_and_fires_the_clip(policy, smoke_profile):
    model, tokenizer = policy
    config = tiny(smoke_profile, num_iterations=2, learning_rate=1e-2)
    result = train(model, tokenizer, PROMPTS, length_reward, config, progress=False)
    first, second = result.metrics
    assert result.ref_model is None  # beta = 0
    assert (first["iteration"], second["iteration"]) == (0, 1)
    assert first["reward"] == second["reward"]  # the same rollout, used twice
    assert first["ratio/min"] == pytest.approx(1.0, abs=1e-4)
    assert first["ratio/max"] == pytest.approx(1.0, abs=1e-4)
    assert first["clip_ratio/region_mean"] == 0.0
    assert second["ratio/min"] < 0.99 or second["ratio/max"] > 1.01
    assert second["clip_ratio/region_mean"] > 0.0


def test_interrupted_run_keeps_metrics_and_resumes_the_step_count(policy, smoke_profile, tmp_path):
    model, tokenizer = policy
    calls = []

    def stops_on_second_step(completions, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # what Ctrl-C does in the middle of a step
        return length_reward(completions)

    config = tiny(smoke_profile, max_steps=3, save_checkpoint=True)
    result = train(model, tokenizer, PROMPTS, stops_on_second_step, config, tmp_path,
                   progress=False)
    assert result.stopped == "interrupted" and result.step == 1
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1]
    assert checkpoint_step(tmp_path) == 1
    weight = next(model.parameters())
    at_checkpoint = weight.detach().clone()

    with torch.no_grad():  # resuming must load the checkpoint's weights over these
        weight.add_(1.0)
    config = tiny(smoke_profile, max_steps=2, save_checkpoint=False)
    resumed = train(model, tokenizer, PROMPTS, length_reward, config, tmp_path, resume=True,
                    progress=False)
    assert resumed.stopped == "finished" and [r["step"] for r in resumed.metrics] == [2]
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2]
    assert json.loads((tmp_path / "config.json").read_text())["resumed_from_step"] == 1
    assert (weight.detach() - at_checkpoint).abs().max() < 0.01  # one small step away, not +1


def test_all_equal_rewards_log_zero_std_and_carry_on(policy, smoke_profile):
    model, tokenizer = policy

    def constant(completions, **kwargs):
        return [1.0] * len(completions)

    result = train(model, tokenizer, PROMPTS, constant, tiny(smoke_profile, max_new_tokens=3),
                   progress=False)
    assert [r["frac_reward_zero_std"] for r in result.metrics] == [1.0, 1.0]
    assert all(r["loss"] == 0.0 and r["grad_norm"] == 0.0 for r in result.metrics)


def test_an_error_in_a_reward_function_keeps_the_metrics(policy, smoke_profile, tmp_path):
    model, tokenizer = policy
    calls = []

    def fails_on_second_step(completions, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ZeroDivisionError("boom")
        return length_reward(completions)

    with pytest.raises(RewardError, match="fails_on_second_step.*ZeroDivisionError"):
        train(model, tokenizer, PROMPTS, fails_on_second_step,
              tiny(smoke_profile, max_new_tokens=3), tmp_path, progress=False)
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1]


def _wrong_count(completions, **kwargs):
    return [0.0]


def _nan(completions, **kwargs):
    return [float("nan")] * len(completions)


def _text(completions, **kwargs):
    return ["1.0"] * len(completions)


def _none(completions, **kwargs):
    return [None] * len(completions)


@pytest.mark.parametrize(
    ("fn", "message"),
    [(_wrong_count, "returned 1 values for 3"), (_nan, "nan"), (_text, "'1.0'"), (_none, "None")],
)
def test_bad_rewards_name_the_function(fn, message):
    with pytest.raises(RewardError, match=rf"{fn.__name__}.*{message}"):
        call_reward(fn, ["a", "b", "c"], {"prompts": ["p"] * 3})


def test_rewards_receive_columns_and_accept_numpy_and_tensors():
    import numpy as np

    def uses_column(completions, target, prompts, **kwargs):
        return [np.float32(t) if i % 2 else torch.tensor(t) for i, t in enumerate(target)]

    values = call_reward(uses_column, ["a", "b"], {"prompts": ["p", "p"], "target": [3, 4]})
    assert values.tolist() == [3.0, 4.0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"group_size": 1}, "group_size must be an int >= 2"),
        ({"group_size": 4, "prompts_per_step": 3, "micro_batch_size": 5}, "do not fit"),
        ({"loss_type": "ppo"}, "loss_type"),
        ({"prompts_per_step": 5}, "only 3 prompts"),
    ],
)
def test_bad_settings_are_explained_before_any_work(smoke_policy, smoke_profile, overrides, message):
    model, tokenizer = smoke_policy
    with pytest.raises(ValueError, match=message):
        train(model, tokenizer, PROMPTS, length_reward, tiny(smoke_profile, **overrides),
              progress=False)


def test_negated_reward_flips_the_sign_and_the_name():
    flipped = negated(length_reward)
    assert flipped.__name__ == "negated_length_reward"
    assert flipped(["x" * 25]) == [5.0]


def test_experiment_1_prompts_are_rows_with_a_prompt():
    rows = read_jsonl(EXP1_PROMPTS)
    assert len(rows) >= 16 and all(isinstance(r["prompt"], str) and r["prompt"] for r in rows)


# ----------------------------------------------------------------------------- experiment 2


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


@pytest.mark.parametrize(("k", "prompts"), [(2, 8), (8, 2), (16, 1)])
def test_k_sweep_keeps_completions_per_step(k, prompts):
    from grpo_core.experiments import k_sweep_sizes
    from grpo_core.profiles import get_profile

    assert k_sweep_sizes(get_profile("cpu"), k) == {"group_size": k, "prompts_per_step": prompts}


@pytest.mark.parametrize("k", [1, 3, 32])
def test_k_that_cannot_keep_completions_per_step_is_refused(k):
    from grpo_core.experiments import k_sweep_sizes
    from grpo_core.profiles import get_profile

    with pytest.raises(ValueError, match="k"):
        k_sweep_sizes(get_profile("cpu"), k)


def test_mbpp_rows_carry_prompt_and_tests():
    from grpo_core.experiments import MBPP_LOCAL_DIFFICULTIES, mbpp_rows
    from grpo_core.profiles import get_profile
    from grpo_core.rewards import unit_test_reward

    rows = mbpp_rows(get_profile("cpu"))
    assert rows and all(row["tests"] and row["tests"][0] in row["prompt"] for row in rows)
    from grpo_core.mbpp import course_split

    training, _ = course_split()
    wanted = [p for p in training if p["difficulty"] in MBPP_LOCAL_DIFFICULTIES]
    assert [row["task_id"] for row in rows] == [p["task_id"] for p in wanted] and len(rows) == 63
    references = ["```python\n" + p["code"] + "```" for p in wanted]
    assert unit_test_reward(references, tests=[r["tests"] for r in rows]) == [1.0] * len(rows)


def test_evaluate_hook_joins_the_metrics_of_its_steps(policy, smoke_profile):
    model, tokenizer = policy
    calls = []

    def evaluate(model, tokenizer, step):
        calls.append((step, model.training, torch.is_grad_enabled()))
        return {"eval/score": float(step)}

    result = train(model, tokenizer, PROMPTS, length_reward,
                   tiny(smoke_profile, max_steps=5, eval_every=2), evaluate=evaluate,
                   progress=False)
    assert [c[0] for c in calls] == [0, 2, 4, 5]  # step 0: before the first update
    assert not any(training or grad for _, training, grad in calls)
    assert [r.get("eval/score") for r in result.metrics] == [0.0, None, 2.0, None, 4.0, 5.0]


def test_evaluate_must_return_finite_numbers(policy, smoke_profile):
    model, tokenizer = policy
    with pytest.raises(ValueError, match="finite"):
        train(model, tokenizer, PROMPTS, length_reward, tiny(smoke_profile, eval_every=1),
              evaluate=lambda *_: {"eval/x": float("nan")}, progress=False)


# ----------------------------------------------------------------------------- experiment 3


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
        for stat in ("", "/sem", "/delta_sem")}
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


def test_hacking_split_holds_out_problems_it_never_trains_on():
    from grpo_core.experiments import hacking_split
    from grpo_core.mbpp import course_split
    from grpo_core.profiles import get_profile

    training, held_out = hacking_split(get_profile("cpu"))
    train_ids, held_out_ids = ({p["task_id"] for p in part} for part in course_split())
    assert [r["task_id"] for r in held_out] == sorted(held_out_ids) and len(held_out) == 115
    assert {r["task_id"] for r in training} == train_ids and len(training) == 78
    smoke_training, smoke_held_out = hacking_split(get_profile("smoke"))
    assert smoke_training == training and smoke_held_out == held_out[:3]


@pytest.mark.parametrize("name", ["mbpp", "hacking"])
@pytest.mark.parametrize("profile_name", ["smoke", "cpu"])
def test_no_held_out_problem_ever_reaches_a_training_batch(name, profile_name):
    from grpo_core.experiments import EXPERIMENTS, build_config, eval_size
    from grpo_core.loop import choose_prompts
    from grpo_core.mbpp import course_split
    from grpo_core.profiles import get_profile

    profile = get_profile(profile_name)
    _, every_held_out = course_split()
    never = {p["task_id"] for p in every_held_out}
    for k in ((2, 8, 16) if profile_name == "cpu" else (2, 4)):
        experiment = EXPERIMENTS[name](profile, k=k)
        config = build_config(profile, experiment)
        evaluated = {row["task_id"] for row in experiment.evaluate.rows}
        assert evaluated <= never and len(evaluated) == (eval_size(profile).problems or 115)
        assert not {row["task_id"] for row in experiment.prompts} & never
        seen = set()
        for seed in (0, 1):
            for step in range(1, 301):
                chosen = choose_prompts(experiment.prompts, config.prompts_per_step, seed, step)
                seen |= {row["task_id"] for row in chosen}
        assert not seen & never
        assert seen == {row["task_id"] for row in experiment.prompts}  # every one is reachable
        assert experiment.notes["held_out_task_ids"] == [r["task_id"] for r in experiment.evaluate.rows]
        assert config.eval_every == eval_size(profile).every


def test_the_experiments_evaluate_with_the_profiles_sizes():
    from grpo_core.experiments import hacking_experiment, mbpp_experiment
    from grpo_core.profiles import get_profile

    cpu = mbpp_experiment(get_profile("cpu"), k=8)
    assert len(cpu.evaluate.rows) == 115 and cpu.evaluate.samples_per_prompt == 2
    assert cpu.overrides["eval_every"] == 10 and cpu.notes["eval_samples_per_problem"] == 2
    assert cpu.evaluate.prompts_per_batch == 8  # 16 completions per decoding loop
    smoke = hacking_experiment(get_profile("smoke"))
    assert len(smoke.evaluate.rows) == 3 and smoke.evaluate.samples_per_prompt == 1
    assert cpu.evaluate.settings["max_new_tokens"] is None  # the run's budget, bound by train


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


def test_hacking_proxy_option_picks_the_reward_and_is_refused_elsewhere(capsys):
    from grpo_core.experiments import hacking_experiment, hacking_proxy
    from grpo_core.profiles import get_profile
    from grpo_core.rewards import defines_function_reward, unit_test_reward

    experiment = hacking_experiment(get_profile("smoke"), proxy="defines_function")
    assert experiment.reward_funcs == [defines_function_reward, unit_test_reward]
    assert experiment.notes["proxy_reward"] == "defines_function_reward"
    assert "defines_function_reward" in experiment.title
    with pytest.raises(ValueError, match="unknown proxy 'tests_pass'"):
        hacking_proxy("tests_pass")
    with pytest.raises(SystemExit, match="--proxy belongs to hacking"):
        main(["length", "--profile", "smoke", "--proxy", "long_function", "--out", "/nonexistent"])
    capsys.readouterr()
    with pytest.raises(SystemExit, match="^2$"):  # argparse's usage error: not one of the choices
        main(["hacking", "--profile", "smoke", "--proxy", "tests_pass", "--out", "/nonexistent"])
    assert "invalid choice: 'tests_pass'" in capsys.readouterr().err


def test_length_reward_option_trains_on_the_detail_proxy_and_is_refused_elsewhere():
    from grpo_core.experiments import length_experiment
    from grpo_core.profiles import get_profile
    from grpo_core.rewards import detail_reward

    smoke = get_profile("smoke")
    experiment = length_experiment(smoke, reward="detail")
    assert experiment.reward_funcs == [detail_reward]
    assert experiment.targets == {} and experiment.notes == {"reward": "detail_reward"}
    assert "0.1 per distinct word" in experiment.title
    assert "length" not in experiment.notes["reward"]  # diagnose must not take it for the task
    assert length_experiment(smoke).reward_funcs == [length_reward]
    assert length_experiment(smoke).targets == {"completions/mean_chars": 20}
    flipped = length_experiment(smoke, negate=True, reward="detail")
    assert flipped.reward_funcs[0].__name__ == "negated_detail_reward"
    with pytest.raises(ValueError, match="unknown reward 'words'"):
        length_experiment(smoke, reward="words")
    with pytest.raises(SystemExit, match="--reward belongs to length"):
        main(["mbpp", "--profile", "smoke", "--reward", "detail", "--out", "/nonexistent"])


def test_problems_option_trains_mbpp_on_real_mbpp_and_is_refused_elsewhere(monkeypatch):
    from grpo_core import mbpp
    from grpo_core.experiments import mbpp_experiment, mbpp_rows
    from grpo_core.profiles import get_profile

    fake = [{"task_id": 601, "text": "Write a function to add.", "tests": ["assert add(1, 2) == 3"],
             "setup_code": "", "entry_point": "add"}]
    asked = []
    monkeypatch.setattr(mbpp, "load_mbpp", lambda split, config: asked.append(split) or fake)
    smoke = get_profile("smoke")
    rows = mbpp_rows(smoke, "mbpp")
    assert asked == ["train"] and [row["task_id"] for row in rows] == [601]
    assert "assert add(1, 2) == 3" in rows[0]["prompt"]
    course = mbpp_rows(smoke)
    assert asked == ["train"] and course and all(row["task_id"] != 601 for row in course)
    experiment = mbpp_experiment(smoke, problems="mbpp")
    assert experiment.prompts == rows and experiment.notes["train_split"] == "MBPP train"
    assert mbpp_experiment(smoke).notes["train_split"].startswith("course_split train")
    with pytest.raises(ValueError, match="unknown problems 'hub'"):
        mbpp_rows(smoke, "hub")
    with pytest.raises(SystemExit, match="--problems belongs to mbpp"):
        main(["length", "--profile", "smoke", "--problems", "mbpp", "--out", "/nonexistent"])


def test_the_code_experiments_stop_each_completion_where_its_code_block_closes():
    from grpo_core.experiments import EXPERIMENTS, build_config
    from grpo_core.loop import TrainConfig
    from grpo_core.profiles import get_profile

    cpu = get_profile("cpu")
    for name in ("mbpp", "hacking"):
        assert build_config(cpu, EXPERIMENTS[name](cpu)).stop_at == "code_block"
    assert build_config(cpu, EXPERIMENTS["length"](cpu)).stop_at is None
    with pytest.raises(ValueError, match="unknown stop rule 'fence'"):
        TrainConfig(stop_at="fence").validate()


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
