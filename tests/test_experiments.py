"""The three experiments as data (grpo_core.experiments): their prompts and rewards, the
training and held-out splits, the held-out sizes of each profile, the variants an option picks,
and the train config ``build_config`` makes of them (the stop rule included).

Nothing here loads a model.
"""

from __future__ import annotations

import pytest

from grpo_core.cli import main
from grpo_core.experiments import negated
from grpo_core.rewards import length_reward
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

# --- experiment 1: length ------------------------------------------------------------------


def test_negated_reward_flips_the_sign_and_the_name():
    flipped = negated(length_reward)
    assert flipped.__name__ == "negated_length_reward"
    assert flipped(["x" * 25]) == [5.0]


def test_experiment_1_prompts_are_rows_with_a_prompt():
    rows = read_jsonl(EXP1_PROMPTS)
    assert len(rows) >= 16 and all(isinstance(r["prompt"], str) and r["prompt"] for r in rows)


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


# --- experiment 2: mbpp, the k sweep --------------------------------------------------------


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


# --- experiment 3: hacking, a proxy reward ---------------------------------------------------


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


# --- the held-out problems of both code experiments, and their sizes per profile ------------


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
    # pass@k for the unit-test reward (pass/fail), never for experiment 3's proxy
    assert cpu.evaluate.pass_fail == smoke.evaluate.pass_fail == ["unit_test_reward"]


def test_the_code_experiments_sample_at_their_own_budget_unless_told():
    from grpo_core.experiments import build_config, hacking_experiment, mbpp_experiment
    from grpo_core.profiles import get_profile

    cpu, smoke = get_profile("cpu"), get_profile("smoke")
    for make in (mbpp_experiment, hacking_experiment):
        assert build_config(cpu, make(cpu)).max_new_tokens == 192  # the recorded runs'
        assert build_config(smoke, make(smoke)).max_new_tokens == smoke.max_new_tokens
        assert build_config(cpu, make(cpu), max_new_tokens=32).max_new_tokens == 32
        # four completions per forward/backward on a laptop: the same gradient, less memory
        assert build_config(cpu, make(cpu)).micro_batch_size == 4
        assert build_config(smoke, make(smoke)).micro_batch_size is None
        assert build_config(cpu, make(cpu), micro_batch_size=8).micro_batch_size == 8


# --- build_config: the stop rule ------------------------------------------------------------


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
