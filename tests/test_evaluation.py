"""The held-out evaluation and the kept samples, on the tiny random policy (no real model).

- the standard errors against a hand computation on fixed score matrices;
- the evaluator: same prompts and seed at every call, identical results for identical weights;
- ``train``: step 0 evaluated on the weights passed in, before any update, as its own metrics
  line; every ``eval_every`` steps and the last; a resume keeps step 0 and its per-problem
  means;
- ``samples.jsonl`` as the loop writes it: its fields and types, the cut mark, the loop's
  advantages, the resume trim, the switch (the row format itself, its size bound and the
  readers: ``tests/test_run_files.py``).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from grpo_core import evaluation, loop
from grpo_core.evaluation import (
    HeldOutEvaluator,
    eval_metrics,
    matrix_problem_means,
    pass_at_k_metrics,
)
from grpo_core.loop import TrainConfig, checkpoint_step, train
from grpo_core.run_files import EVAL_STATE_FILE, SAMPLES_FILE, read_jsonl, read_samples
from grpo_core.stats import standard_error

GROUP = 4
PROMPTS = ["Say hello.", "Name a colour.", "Describe the sea."]
HELD_OUT = [{"prompt": f"Spell {word}.", "task_id": 100 + i}
            for i, word in enumerate(["cat", "dog", "sun", "sea", "sky"])]


def config(**overrides) -> TrainConfig:
    values = {"group_size": GROUP, "prompts_per_step": 2, "max_new_tokens": 6, "max_steps": 1,
              "learning_rate": 1e-2, "seed": 0, "save_checkpoint": False, **overrides}
    return TrainConfig(**values)


def by_position(completions, **kwargs):
    """1.0 for the first half of every group, 0.0 for the second."""
    return [1.0 if index % GROUP < GROUP // 2 else 0.0 for index in range(len(completions))]


def has_a(completions, **kwargs):
    """1.0 when the completion has an ``a``: a score that depends on the text."""
    return [float("a" in text) for text in completions]


def length_score(completions, **kwargs):
    return [len(text) / 10 for text in completions]


def weights(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def evaluator(**overrides) -> HeldOutEvaluator:
    values = {"samples_per_prompt": 3, **overrides}
    return HeldOutEvaluator(HELD_OUT, [has_a, length_score], **values)


class Watching(HeldOutEvaluator):
    """Keeps, for every call, the step and what the model it was given looked like."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def __call__(self, model, tokenizer, step):
        self.seen.append((step, weights(model), model.training, torch.is_grad_enabled()))
        return super().__call__(model, tokenizer, step)


# ---------------------------------------------------------------- the standard errors


def test_sem_and_delta_sem_are_computed_over_problems_by_hand():
    # 4 problems x 2 samples; problem means 0.5, 1.0, 0.0, 0.5
    now = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.5, 0.5]])
    # step 0's problem means 0.0, 1.0, 0.0, 0.0: changes 0.5, 0.0, 0.0, 0.5
    base = {"score": torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)}
    metrics = eval_metrics({"score": now}, base)
    # mean 0.5; deviations 0, .5, -.5, 0: variance (ddof 1) 0.5 / 3, over sqrt(4) problems
    assert metrics["eval/score"] == pytest.approx(0.5)
    assert metrics["eval/score/sem"] == pytest.approx(math.sqrt(0.5 / 3) / 2)
    # changes' mean 0.25; deviations +-0.25: variance 0.25 / 3
    assert metrics["eval/score/delta_sem"] == pytest.approx(math.sqrt(0.25 / 3) / 2)
    # not the naive standard error over the 8 samples as if they were independent
    assert metrics["eval/score/sem"] != pytest.approx(now.flatten().std().item() / math.sqrt(8))
    assert matrix_problem_means(now) == [0.5, 1.0, 0.0, 0.5]


def test_standard_errors_need_two_problems_and_delta_sem_a_step_zero():
    assert math.isnan(standard_error([0.3]))
    one_problem = eval_metrics({"score": torch.tensor([[1.0, 0.0, 1.0]])})
    assert one_problem == {"eval/score": pytest.approx(2 / 3)}
    no_base = eval_metrics({"score": torch.tensor([[1.0], [0.0]])}, prefix="held")
    assert set(no_base) == {"held/score", "held/score/sem"}  # no step 0: no delta_sem
    with pytest.raises(ValueError, match="cover 3 problems"):
        eval_metrics({"score": torch.zeros(2, 1)}, {"score": torch.zeros(3)})


def test_pass_at_k_is_logged_for_pass_fail_rewards_by_hand():
    # 3 problems x 3 samples: a sample passes only at 1.0 (0.75 is three asserts of four)
    scores = torch.tensor([[1.0, 0.75, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.5]])
    metrics = eval_metrics({"tests": scores, "other": scores}, pass_fail=["tests"])
    per_problem_1, per_problem_3 = [1 / 3, 0.0, 2 / 3], [1.0, 0.0, 1.0]
    assert metrics["eval/tests/pass@1"] == pytest.approx(1 / 3)
    assert metrics["eval/tests/pass@3"] == pytest.approx(2 / 3)
    assert metrics["eval/tests/pass@1/sem"] == pytest.approx(standard_error(per_problem_1))
    assert metrics["eval/tests/pass@3/sem"] == pytest.approx(standard_error(per_problem_3))
    assert not any("pass@" in key for key in metrics if key.startswith("eval/other"))
    assert pass_at_k_metrics(torch.tensor([[1.0], [0.0]]), "e/t") == {
        "e/t/pass@1": 0.5, "e/t/pass@1/sem": pytest.approx(0.5)}  # one sample: pass@1 only
    assert set(pass_at_k_metrics(torch.tensor([[1.0, 1.0]]), "e/t")) == {"e/t/pass@1",
                                                                       "e/t/pass@2"}
    with pytest.raises(ValueError, match="did not score"):
        eval_metrics({"tests": scores}, pass_fail=["missing"])
    with pytest.raises(ValueError, match="matrix"):
        pass_at_k_metrics(torch.zeros(3), "e/t")
    assert pass_at_k_metrics(torch.tensor([[1.0]]), "e/t") == {"e/t/pass@1": 1.0}  # 1 x 1
    assert matrix_problem_means(torch.tensor([[0.5]])) == [0.5]
    for bad in (torch.zeros(3), torch.zeros(0, 2)):
        with pytest.raises(ValueError, match="matrix"):
            matrix_problem_means(bad)


def test_the_evaluator_logs_pass_at_k_for_the_rewards_it_is_told_are_pass_fail(tiny_policy):
    with pytest.raises(ValueError, match="not among the reward functions"):
        evaluator(pass_fail=["nope"])
    by_function, by_name = evaluator(pass_fail=[has_a]), evaluator(pass_fail=["has_a"])
    assert by_function.pass_fail == by_name.pass_fail == ["has_a"]
    model, tokenizer = tiny_policy
    metrics = evaluator(pass_fail=[has_a], max_new_tokens=4)(model, tokenizer, 0)
    passes = [key for key in metrics if "pass@" in key]
    assert sorted(passes) == ["eval/has_a/pass@1", "eval/has_a/pass@1/sem",
                              "eval/has_a/pass@3", "eval/has_a/pass@3/sem"]
    # has_a scores 0 or 1, so pass@1 is its held-out mean; pass@3 is at least pass@1
    assert metrics["eval/has_a/pass@1"] == pytest.approx(metrics["eval/has_a"])
    assert metrics["eval/has_a/pass@3"] >= metrics["eval/has_a/pass@1"]


# ---------------------------------------------------------------- the evaluator


def test_every_call_samples_the_same_prompts_with_the_same_seed(tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    calls = []
    sample_group = evaluation.sample_group

    def recorded(model, tokenizer, prompts, group_size, **kwargs):
        calls.append((list(prompts), group_size, kwargs["seed"], kwargs["max_new_tokens"]))
        return sample_group(model, tokenizer, prompts, group_size, **kwargs)

    monkeypatch.setattr(evaluation, "sample_group", recorded)
    held_out = evaluator(max_new_tokens=5, completions_per_batch=6, seed=3)
    first = held_out(model, tokenizer, 0)
    first_calls, first_texts = list(calls), list(held_out.last.texts)
    calls.clear()
    again = held_out(model, tokenizer, 7)
    assert calls == first_calls  # same prompts, batches, seeds and budget
    assert [len(prompts) for prompts, *_ in calls] == [2, 2, 1]  # 6 completions // 3 = 2 prompts
    assert len({seed for *_, seed, _ in calls}) == 3
    # identical weights: identical completions and numbers, and no change against step 0
    assert held_out.last.texts == first_texts and len(first_texts) == 15
    assert {k: v for k, v in again.items() if "delta" not in k} == \
        {k: v for k, v in first.items() if "delta" not in k}
    assert first["eval/has_a/delta_sem"] == 0.0 and again["eval/has_a/delta_sem"] == 0.0
    assert set(first) == {f"eval/{name}{stat}" for name in ("has_a", "length_score")
                          for stat in ("", "/sem", "/delta_sem")}


def test_the_evaluator_samples_with_the_runs_settings_unless_told(tiny_policy):
    held_out = evaluator()
    with pytest.raises(ValueError, match="max_new_tokens"):
        held_out.sampling()
    held_out.bind(config(max_new_tokens=9, temperature=0.7, top_p=0.9, stop_at="code_block"))
    assert held_out.sampling() == {"max_new_tokens": 9, "temperature": 0.7, "top_p": 0.9,
                                   "system_message": None, "enable_thinking": False,
                                   "stop_at": "code_block"}
    told = evaluator(max_new_tokens=4, temperature=1.3)
    told.bind(config(max_new_tokens=9))
    assert told.sampling()["max_new_tokens"] == 4 and told.sampling()["temperature"] == 1.3


def test_the_evaluator_state_round_trips_and_refuses_other_problems(tiny_policy):
    model, tokenizer = tiny_policy
    held_out = evaluator(max_new_tokens=4)
    held_out(model, tokenizer, 0)
    state = json.loads(json.dumps(held_out.state_dict()))
    fresh = evaluator(max_new_tokens=4)
    assert fresh.load_state_dict(state)
    for name, means in held_out.baseline.items():
        torch.testing.assert_close(fresh.baseline[name], means)
    other = HeldOutEvaluator(HELD_OUT[:3], [has_a], samples_per_prompt=3, max_new_tokens=4)
    with pytest.warns(UserWarning, match="other problems"):
        assert not other.load_state_dict(state)
    assert other.baseline is None


# ---------------------------------------------------------------- in the loop


def test_step_zero_evaluates_the_weights_passed_in_before_any_update(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    start = weights(model)
    held_out = Watching(HELD_OUT, [has_a], samples_per_prompt=2)
    result = train(model, tokenizer, PROMPTS, by_position,
                   config(max_steps=5, eval_every=2, max_new_tokens=5), tmp_path,
                   progress=False, evaluate=held_out)
    seen = held_out.seen
    assert [step for step, *_ in seen] == [0, 2, 4, 5]
    assert torch.equal(seen[0][1], start)  # step 0: not one update yet
    assert not torch.equal(seen[1][1], start)
    assert not any(training or grad for *_, training, grad in seen)
    assert held_out.sampling()["max_new_tokens"] == 5  # the run's budget (bind)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == result.metrics and [r["step"] for r in records] == [0, 1, 2, 3, 4, 5]
    assert set(records[0]) == {"step", "eval/has_a", "eval/has_a/sem", "eval/has_a/delta_sem",
                               "time/eval"}
    assert records[0]["eval/has_a/delta_sem"] == 0.0  # the base model against itself
    assert [("eval/has_a" in r) for r in records] == [True, False, True, False, True, True]


def test_identical_weights_give_identical_evaluations_through_a_run(tiny_policy):
    model, tokenizer = tiny_policy
    result = train(model, tokenizer, PROMPTS, by_position,
                   config(max_steps=3, eval_every=1, learning_rate=0.0),
                   progress=False, evaluate=evaluator())
    evaluated = [{k: v for k, v in r.items() if k.startswith("eval/")} for r in result.metrics]
    assert len(evaluated) == 4 and all(e == evaluated[0] for e in evaluated)
    assert evaluated[0]["eval/length_score/delta_sem"] == 0.0


def test_max_steps_zero_only_evaluates_the_base_model(tiny_policy):
    model, tokenizer = tiny_policy
    start = weights(model)
    result = train(model, tokenizer, PROMPTS, by_position, config(max_steps=0, eval_every=5),
                   progress=False, evaluate=evaluator())
    assert [r["step"] for r in result.metrics] == [0] and result.step == 0
    assert torch.equal(weights(model), start)


def test_a_resume_keeps_step_zero_and_its_per_problem_means(new_tiny_policy, tmp_path):
    model, tokenizer = new_tiny_policy()
    settings = {"eval_every": 2, "learning_rate": 0.0, "save_every": 2}
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=3, **settings), tmp_path,
          progress=False, evaluate=evaluator())
    assert checkpoint_step(tmp_path) == 2  # step 3 is after the checkpoint
    assert json.loads((tmp_path / EVAL_STATE_FILE).read_text())["baseline"]
    # a new evaluator knows nothing: it must read step 0's means from the folder
    fresh_evaluator = Watching(HELD_OUT, [has_a, length_score], samples_per_prompt=3)
    base, _ = new_tiny_policy()
    resumed = train(base, tokenizer, PROMPTS, by_position, config(max_steps=4, **settings),
                    tmp_path, resume=True, progress=False, evaluate=fresh_evaluator)
    assert [step for step, *_ in fresh_evaluator.seen] == [4]  # step 0 is not evaluated again
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [0, 1, 2, 3, 4]
    # lr = 0: the weights never moved, so the change against the stored step 0 is exactly 0
    assert resumed.metrics[-1]["eval/has_a/delta_sem"] == 0.0
    samples = read_samples(tmp_path)
    assert samples.steps == [0, 1, 2, 3, 4]
    assert len(samples.select(step=3)) == 8  # step 3's rows once: the first run's were dropped
    assert len(samples.select(step=0)) == len(HELD_OUT) * 2  # two of 3 samples kept per problem
    assert len(samples.select(step=4, split="held_out")) == 10


def test_a_resumed_run_without_a_step_zero_evaluates_the_base_model_first(new_tiny_policy,
                                                                         tmp_path):
    model, tokenizer = new_tiny_policy()
    start = weights(model)
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=2, save_checkpoint=True),
          tmp_path, progress=False)  # no evaluation at all
    base, _ = new_tiny_policy()
    held_out = Watching(HELD_OUT, [has_a], samples_per_prompt=1)
    train(base, tokenizer, PROMPTS, by_position, config(max_steps=3, eval_every=5), tmp_path,
          resume=True, progress=False, evaluate=held_out)
    seen = held_out.seen
    assert [step for step, *_ in seen] == [0, 3]
    assert torch.equal(seen[0][1], start)  # the base model, before the checkpoint was loaded
    assert not torch.equal(seen[1][1], start)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 3]  # step 0 written first
    assert records[-1]["eval/has_a/delta_sem"] >= 0.0


def test_a_missing_eval_state_on_resume_is_said(new_tiny_policy, tmp_path):
    model, tokenizer = new_tiny_policy()
    train(model, tokenizer, PROMPTS, by_position,
          config(max_steps=1, eval_every=1, save_checkpoint=True), tmp_path, progress=False,
          evaluate=evaluator())
    (tmp_path / EVAL_STATE_FILE).unlink()
    with pytest.warns(UserWarning, match="delta_sem is not logged"):
        resumed = train(model, tokenizer, PROMPTS, by_position, config(max_steps=2, eval_every=1),
                        tmp_path, resume=True, progress=False, evaluate=evaluator())
    assert "eval/has_a/sem" in resumed.metrics[-1]
    assert "eval/has_a/delta_sem" not in resumed.metrics[-1]


# ---------------------------------------------------------------- samples.jsonl


TRAIN_FIELDS = {"step": int, "split": str, "prompt_id": int, "sample": int, "completion": str,
                "chars": int, "cut": bool, "truncated": bool, "reward": float,
                "by_position": float, "advantage": float}


def test_samples_keep_every_training_completion_with_the_loops_advantages(tiny_policy, tmp_path,
                                                                          monkeypatch):
    model, tokenizer = tiny_policy
    advantages = []
    group_advantages = loop.group_advantages

    def recorded(*args, **kwargs):
        advantages.append(group_advantages(*args, **kwargs))
        return advantages[-1]

    monkeypatch.setattr(loop, "group_advantages", recorded)
    rows = [{"prompt": p, "task_id": 10 + i} for i, p in enumerate(PROMPTS)]
    result = train(model, tokenizer, rows, by_position,
                   config(max_steps=2, eval_every=2, samples_max_chars=3), tmp_path,
                   progress=False, evaluate=evaluator())
    samples = read_samples(tmp_path)
    assert samples.found and samples.path == tmp_path / SAMPLES_FILE
    training = samples.select(split="train")
    assert len(training) == 2 * 8
    for row in training:
        assert set(row) == set(TRAIN_FIELDS)  # a task_id: no prompt text
        assert all(isinstance(row[k], kind) for k, kind in TRAIN_FIELDS.items()), row
        assert row["prompt_id"] in (10, 11, 12)
        assert len(row["completion"]) <= 3 and row["cut"] == (row["chars"] > 3)
        assert row["reward"] == row["by_position"] == (1.0 if row["sample"] < 2 else 0.0)
    assert any(row["cut"] for row in training)
    for step in (1, 2):
        logged = [row["advantage"] for row in training if row["step"] == step]
        assert logged == pytest.approx(advantages[step - 1].tolist(), abs=1e-6)
        texts = [row["completion"] for row in training if row["step"] == step]
        if step == 2:
            assert texts == [text[:3] for text in result.last_texts]
    held_out = samples.select(split="held_out")
    assert samples.steps == [0, 1, 2] and [r["step"] for r in held_out][::10] == [0, 2]
    for row in held_out:
        assert set(row) == {"step", "split", "prompt_id", "sample", "completion", "chars",
                            "cut", "truncated", "has_a", "length_score"}
        assert row["has_a"] == float("a" in row["completion"]) or row["cut"]
        assert row["sample"] in (0, 1)  # samples_eval_per_problem = 2 of the 3


def test_rows_without_a_task_id_carry_their_prompt_and_its_index(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=3), tmp_path,
          progress=False)
    rows = read_samples(tmp_path).rows
    assert len(rows) == 3 * 8
    assert all(row["prompt"] == PROMPTS[row["prompt_id"]] for row in rows)
    assert {row["prompt_id"] for row in rows} == {0, 1, 2}  # indices in the prompt list


def test_a_reused_rollout_is_kept_once_at_the_step_that_sampled_it(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=4, num_iterations=2),
          tmp_path, progress=False)
    assert [row["step"] for row in read_samples(tmp_path)] == [1] * 8 + [3] * 8


def test_samples_can_be_switched_off_and_need_an_out_dir(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    train(model, tokenizer, PROMPTS, by_position, config(keep_samples=False), tmp_path,
          progress=False, evaluate=evaluator())
    assert not (tmp_path / SAMPLES_FILE).exists()
    assert (tmp_path / "metrics.jsonl").exists()
    with pytest.raises(ValueError, match="samples_max_chars"):
        config(samples_max_chars=0).validate()


# ----------------------------------------------------------------------------- the hook's protocol


def test_a_plain_function_becomes_an_evaluator_that_keeps_nothing():
    from grpo_core.evaluation import Evaluator, FunctionEvaluator, as_evaluator

    def score(model, tokenizer, step):
        return {"eval/x": float(step)}

    wrapped = as_evaluator(score)
    assert isinstance(wrapped, FunctionEvaluator) and isinstance(wrapped, Evaluator)
    assert wrapped(None, None, 3) == {"eval/x": 3.0}
    wrapped.bind(object())
    assert wrapped.sample_rows(2) == [] and wrapped.state_dict() is None
    assert wrapped.load_state_dict({"baseline": None}) is False
    held_out = HeldOutEvaluator([{"prompt": "p"}], [lambda completions, **_: [0.0]],
                                samples_per_prompt=1, max_new_tokens=2)
    assert as_evaluator(held_out) is held_out  # already one: used as it is
    with pytest.raises(TypeError, match="must be callable"):
        as_evaluator(42)


def test_train_keeps_no_eval_state_for_a_plain_function(new_tiny_policy, tmp_path):
    model, tokenizer = new_tiny_policy()
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=1, eval_every=1),
          tmp_path, progress=False, evaluate=lambda m, t, step: {"eval/constant": 1.0})
    assert not (tmp_path / EVAL_STATE_FILE).exists()
    assert [r["eval/constant"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1.0, 1.0]
