"""The loop's update on a tiny random model: which way a step moves the policy, micro-batches,
the optimizer step, a rollout reused for several iterations, and the reference model.

Every test goes through ``train`` (the public entry) with rewards chosen by position in the
batch, so the advantages are known without reading the random model's text.
"""

from __future__ import annotations

import copy
import os
import re
import time

import pytest
import torch

from grpo_core import rollout
from grpo_core.advantages import group_advantages
from grpo_core.logprobs import completion_mask, token_logprobs
from grpo_core.loop import TrainConfig, checkpoint_step, train
from grpo_core.loss import LOSS_TYPES, grpo_loss
from grpo_core.packed import packing_available

PROMPTS = ["Say hello.", "Name a colour.", "Describe the sea."]
GROUP = 4


def config(**overrides) -> TrainConfig:
    values = {"group_size": GROUP, "prompts_per_step": 2, "max_new_tokens": 6, "max_steps": 1,
              "learning_rate": 1e-2, "seed": 0, "save_checkpoint": False, **overrides}
    return TrainConfig(**values)


def by_position(completions, **kwargs):
    """1.0 for the first half of every group, 0.0 for the second: half the rows have A > 0."""
    return [1.0 if index % GROUP < GROUP // 2 else 0.0 for index in range(len(completions))]


@pytest.fixture(autouse=True)
def _restore_decode(monkeypatch):
    """``record_generate`` wraps ``grpo_core.rollout.decode_until``; put it back after each test."""
    monkeypatch.setattr(rollout, "decode_until", rollout.decode_until)


def record_generate(model) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Keep every rollout ``model`` samples: (prompt width, prompt mask, prompt + completion ids)."""
    calls, decode_until = [], rollout.decode_until

    def recorded(sampled_by, input_ids, attention_mask, **kwargs):
        new_ids, stopped_at = decode_until(sampled_by, input_ids, attention_mask, **kwargs)
        if sampled_by is model:
            calls.append((input_ids.size(1), attention_mask, torch.cat([input_ids, new_ids], 1)))
        return new_ids, stopped_at

    rollout.decode_until = recorded
    return calls


def completion_logps(model, call, eos_id: int) -> torch.Tensor:
    """``[B]`` summed log-probs of one recorded rollout's completions (up to the first EOS)."""
    prompt_len, prompt_mask, output = call
    completions = output[:, prompt_len:]
    mask = completion_mask(completions, [eos_id]).long()
    attention = torch.cat([prompt_mask, mask], dim=1)
    with torch.no_grad():
        logps = token_logprobs(model.eval(), output, attention, completions.size(1))
    return (logps * mask).sum(dim=1)


def weights(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def test_one_update_makes_positive_advantage_completions_more_likely(tiny_policy):
    model, tokenizer = tiny_policy
    before = copy.deepcopy(model)
    calls = record_generate(model)
    train(model, tokenizer, PROMPTS, by_position, config(), progress=False)
    (call,) = calls
    change = (completion_logps(model, call, tokenizer.eos_token_id)
              - completion_logps(before, call, tokenizer.eos_token_id))
    advantages = group_advantages(torch.tensor(by_position([None] * change.numel())), GROUP)
    assert (advantages > 0).sum() == (advantages < 0).sum() == change.numel() // 2
    assert change[advantages > 0].mean() > 0  # the rewarded completions became more likely
    assert change[advantages < 0].mean() < 0  # and the others less likely
    assert (change * advantages).sum() > 0


def test_every_step_logs_its_phase_times_and_they_add_up(tiny_policy):
    """The ``time/...`` metrics (docs/design.md) split a step: each phase is a duration (not
    negative, inside the step's own wall time), and the update is its two parts."""
    model, tokenizer = tiny_policy
    result = train(model, tokenizer, PROMPTS, by_position,
                   config(max_steps=2, beta=0.1, num_iterations=2), progress=False)
    phases = ["time/generate", "time/reward", "time/frozen_logps", "time/update"]
    for record in result.metrics:
        for key in [*phases, "time/forward_backward", "time/optimizer"]:
            assert record[key] >= 0, (key, record[key])
        # a reused rollout (iteration > 0) keeps its rollout's times: only the update is new
        timed = phases if record["iteration"] == 0 else ["time/update"]
        assert sum(record[key] for key in timed) <= record["step_time"]
        parts = record["time/forward_backward"] + record["time/optimizer"]
        assert record["time/update"] == pytest.approx(parts, abs=1e-6)


@pytest.mark.parametrize(("loss_type", "micro_batch_size", "scale", "stops_at_once"),
                         [(t, None, "group", False) for t in LOSS_TYPES]
                         + [("grpo", 2, "group", False), ("dapo", 4, "group", False),
                            ("grpo", None, "none", False), ("dr_grpo", None, "group", True)])
def test_the_logged_loss_and_gradient_are_grpo_loss_of_the_reused_batch(
        tiny_policy, loss_type, micro_batch_size, scale, stops_at_once):
    # the second step on one rollout, recomputed by hand from the recorded tokens: the old
    # log-probs are the sampling policy's, the new ones the policy after step 1 (at the
    # temperature of the config), the advantages group_advantages of the rewards
    model, tokenizer = tiny_policy
    eos_ids = [tokenizer.eos_token_id]
    if stops_at_once:  # every token ends a completion: a batch one token wide
        eos_ids = list(range(len(tokenizer)))
        model.generation_config.eos_token_id = eos_ids
    sampler = copy.deepcopy(model)
    calls = record_generate(model)
    after_step = []
    cfg = config(loss_type=loss_type, micro_batch_size=micro_batch_size, num_iterations=2,
                 max_steps=2, temperature=0.7, max_grad_norm=None, scale=scale, epsilon=0.05,
                 epsilon_high=0.1)
    result = train(model, tokenizer, PROMPTS, by_position, cfg, progress=False,
                   callbacks=[lambda record: after_step.append(copy.deepcopy(model))])
    ((prompt_len, prompt_mask, output),) = calls
    completions = output[:, prompt_len:]
    mask = completion_mask(completions, eos_ids).long()
    attention = torch.cat([prompt_mask, mask], dim=1)
    width = completions.size(1)
    assert (width == 1) == stops_at_once
    with torch.no_grad():
        old = token_logprobs(sampler, output, attention, width, temperature=0.7)
    policy = after_step[0]
    policy.zero_grad(set_to_none=True)
    logps, entropy = token_logprobs(policy, output, attention, width, temperature=0.7,
                                    return_entropy=True)
    advantages = group_advantages(torch.tensor(by_position([None] * mask.size(0))), GROUP,
                                  scale=scale)
    loss, metrics = grpo_loss(logps, old, advantages, mask, loss_type=loss_type,
                              epsilon=0.05, epsilon_high=0.1,
                              max_completion_length=cfg.max_new_tokens,
                              num_items_in_batch=mask.sum())
    loss.backward()
    grad_norm = torch.stack([p.grad.norm() for p in policy.parameters() if p.grad is not None])
    second = result.metrics[1]
    assert second["loss"] == pytest.approx(loss.item(), rel=1e-4, abs=1e-7)
    assert second["grad_norm"] == pytest.approx(grad_norm.norm().item(), rel=1e-4)
    assert second["entropy"] == pytest.approx(
        ((entropy * mask).sum() / mask.sum()).item(), rel=1e-4)
    for key, value in metrics.items():
        assert second[key] == pytest.approx(value, abs=1e-6), key
    ratio = torch.exp(logps.detach() - old)[mask.bool()]
    assert second["ratio/min"] == pytest.approx(ratio.min().item(), rel=1e-5)
    assert second["ratio/max"] == pytest.approx(ratio.max().item(), rel=1e-5)
    # after one step the same batch scores better (the first loss is 0 only for grpo: the
    # token-level losses weigh each advantage by its completion's length)
    assert second["loss"] < result.metrics[0]["loss"] - 1e-4


def test_one_update_lowers_the_loss_of_its_own_batch(tiny_policy):
    model, tokenizer = tiny_policy
    result = train(model, tokenizer, PROMPTS, by_position,
                   config(num_iterations=2, max_steps=2), progress=False)
    first, second = result.metrics
    assert first["iteration"] == 0 and second["iteration"] == 1  # the same batch, twice
    # on-policy, the grpo loss is -mean(A) = 0 (advantages sum to 0 in each group)
    assert first["loss"] == pytest.approx(0.0, abs=1e-6)
    assert second["loss"] < -1e-3  # after one step the same batch scores better


def test_every_step_changes_the_weights(tiny_policy):
    model, tokenizer = tiny_policy
    start = weights(model)
    result = train(model, tokenizer, PROMPTS, by_position, config(max_steps=1), progress=False)
    assert result.metrics[0]["grad_norm"] > 0
    moved = (weights(model) - start).abs().max().item()
    # AdamW's first step moves each weight by about the learning rate, never much more
    assert 1e-4 < moved <= 1.1e-2


def test_a_resumed_run_steps_from_the_checkpoint(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    first = train(model, tokenizer, PROMPTS, by_position,
                  config(max_steps=1, save_checkpoint=True), tmp_path, progress=False)
    assert first.metrics[0]["ratio/min"] == first.metrics[0]["ratio/max"] == 1.0  # on-policy
    assert checkpoint_step(tmp_path) == 1
    at_checkpoint = weights(model)
    resumed = train(model, tokenizer, PROMPTS, by_position, config(max_steps=2), tmp_path,
                    resume=True, progress=False)
    assert [r["step"] for r in resumed.metrics] == [2]
    moved = (weights(model) - at_checkpoint).abs().max().item()
    assert 1e-4 < moved <= 1.1e-2  # step 2 really updated the checkpoint's weights


@pytest.mark.parametrize(("loss_type", "micro_batch_size"),
                         [("grpo", 2), ("dr_grpo", 4), ("dapo", 2)])
def test_micro_batches_give_the_whole_batch_loss_and_gradient(new_tiny_policy, loss_type,
                                                             micro_batch_size):
    # two steps on one rollout (old log-probs and a moved ratio) with a reference (beta > 0):
    # every number the update logs, and the weights, must not depend on the micro-batches
    runs = []
    for size in (None, micro_batch_size):
        model, tokenizer = new_tiny_policy()
        cfg = config(loss_type=loss_type, micro_batch_size=size, num_iterations=2, max_steps=2,
                     beta=0.5, max_grad_norm=None)
        result = train(model, tokenizer, PROMPTS, by_position, cfg, progress=False)
        runs.append((result.metrics, weights(model)))
    (whole, whole_weights), (micro, micro_weights) = runs
    for step_whole, step_micro in zip(whole, micro, strict=True):
        for key in ("loss", "grad_norm", "entropy", "kl", "ratio/min", "ratio/max",
                    "clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean"):
            assert step_micro[key] == pytest.approx(step_whole[key], rel=1e-4, abs=1e-6), key
    assert whole[1]["loss"] != pytest.approx(0.0, abs=1e-4)  # the compared numbers are not 0
    assert whole[1]["kl"] > 0
    # AdamW divides each gradient by its own running scale, so where a gradient is tiny a
    # rounding difference in it (the micro-batches sum in another order) can move that element's
    # step by a visible fraction; allow a thousandth of what two steps can move an element
    # (about lr each). Dropping or mis-weighting a micro-batch moves weights by ~lr.
    torch.testing.assert_close(micro_weights, whole_weights, rtol=1e-4,
                               atol=1e-3 * cfg.learning_rate * cfg.max_steps)


def test_a_rollout_is_reused_for_num_iterations_steps_with_its_old_logprobs(tiny_policy):
    model, tokenizer = tiny_policy
    calls = record_generate(model)
    rewarded = []

    def counting(completions, **kwargs):
        rewarded.append(list(completions))
        return by_position(completions)

    result = train(model, tokenizer, PROMPTS, counting,
                   config(num_iterations=3, max_steps=6, learning_rate=3e-3), progress=False)
    assert len(calls) == len(rewarded) == 2  # one rollout per three steps
    assert [r["iteration"] for r in result.metrics] == [0, 1, 2, 0, 1, 2]
    assert result.last_texts == rewarded[1]
    for first, *reused in (result.metrics[:3], result.metrics[3:]):
        assert first["ratio/min"] == first["ratio/max"] == 1.0  # sampled by this very policy
        assert first["loss"] == pytest.approx(0.0, abs=1e-6)
        for record in reused:
            assert record["ratio/min"] < 1.0 < record["ratio/max"]
        # measured against the same old log-probs, the surrogate keeps improving
        assert first["loss"] > reused[0]["loss"] > reused[1]["loss"]


def test_beta_gives_a_kl_and_a_gradient_from_it_on_step_two(new_tiny_policy):
    runs = {}
    for beta in (0.0, 0.5):
        model, tokenizer = new_tiny_policy()
        start = weights(model)
        result = train(model, tokenizer, PROMPTS, by_position, config(beta=beta, max_steps=2),
                       progress=False)
        runs[beta] = result
    plain, with_kl = runs[0.0].metrics, runs[0.5].metrics
    reference = runs[0.5].ref_model
    assert runs[0.0].ref_model is None and "kl" not in plain[0]
    assert reference is not runs[0.5].model
    assert not any(p.requires_grad for p in reference.parameters())
    torch.testing.assert_close(weights(reference), start)  # the reference never trains
    # step 1: the policy is the reference, so the KL and its gradient are 0
    assert with_kl[0]["kl"] == pytest.approx(0.0, abs=1e-7)
    assert with_kl[0]["grad_norm"] == pytest.approx(plain[0]["grad_norm"], rel=1e-5)
    # step 2 (a fresh rollout, the same in both runs): the policy has left the reference
    assert with_kl[1]["reward"] == plain[1]["reward"]
    assert with_kl[1]["kl"] > 1e-5
    assert with_kl[1]["loss"] > plain[1]["loss"]  # + beta * kl
    assert with_kl[1]["grad_norm"] != pytest.approx(plain[1]["grad_norm"], rel=1e-4)


def test_loss_scaling_changes_neither_the_step_nor_what_is_logged(new_tiny_policy):
    # GradScaler multiplies the loss before backward and divides the gradient back before it
    # is clipped, logged and stepped: on a float32 model (powers of two: exact) the run is the
    # unscaled run, plus the scale it used
    runs = []
    for scaling in (False, True):
        model, tokenizer = new_tiny_policy()
        cfg = config(loss_scaling=scaling, max_steps=2, num_iterations=2, max_grad_norm=0.5)
        result = train(model, tokenizer, PROMPTS, by_position, cfg, progress=False)
        runs.append((result.metrics, weights(model)))
    (plain, plain_weights), (scaled, scaled_weights) = runs
    for step_plain, step_scaled in zip(plain, scaled, strict=True):
        for key in ("loss", "grad_norm", "entropy", "ratio/min", "ratio/max"):
            assert step_scaled[key] == pytest.approx(step_plain[key], rel=1e-5, abs=1e-7), key
        assert "loss_scale" not in step_plain
        assert step_scaled["loss_scale"] == torch.amp.GradScaler("cpu").get_scale() > 1.0
    assert plain[0]["grad_norm"] > 0.5  # clipped: the clip saw the unscaled gradient
    torch.testing.assert_close(scaled_weights, plain_weights, rtol=1e-5, atol=1e-7)


def test_each_step_is_logged_once_everywhere_and_checkpointed_every_save_every(tiny_policy,
                                                                           tmp_path):
    from grpo_core.run_files import read_jsonl

    model, tokenizer = tiny_policy
    seen, evaluated = [], []

    def evaluate(model, tokenizer, step):
        evaluated.append(step)
        return {"eval/score": float(step)}

    started = time.perf_counter()
    result = train(model, tokenizer, PROMPTS, by_position,
                   config(max_steps=3, save_every=2, eval_every=2), tmp_path, progress=False,
                   callbacks=[seen.append], evaluate=evaluate)
    whole_run = time.perf_counter() - started
    # step 0: the base model's evaluation, a line of its own, first
    assert [r["step"] for r in result.metrics] == [0, 1, 2, 3] and result.step == 3
    assert read_jsonl(tmp_path / "metrics.jsonl") == result.metrics == seen
    assert checkpoint_step(tmp_path) == 2  # save_every=2; save_checkpoint=False adds none
    assert evaluated == [0, 2, 3]
    assert [r.get("eval/score") for r in result.metrics] == [0, None, 2, 3]
    assert set(result.metrics[0]) == {"step", "eval/score", "time/eval"}
    assert all(0 < r["step_time"] < whole_run for r in result.metrics[1:])  # a part of the run
    assert len(result.last_texts) == 8 and result.stopped == "finished"


def test_max_grad_norm_clips_the_gradient_before_the_step(new_tiny_policy):
    moved = {}
    for max_norm in (None, 1e-12):
        model, tokenizer = new_tiny_policy()
        start = weights(model)
        result = train(model, tokenizer, PROMPTS, by_position, config(max_grad_norm=max_norm),
                       progress=False)
        moved[max_norm] = (weights(model) - start).abs().max().item()
        assert result.metrics[0]["grad_norm"] > 1e-6  # logged before clipping
        assert result.metrics[0]["learning_rate"] == 1e-2
    # AdamW normalises the step: only a clipped gradient far below its eps barely moves it
    assert moved[None] > 1e-3 > 1e-5 > moved[1e-12]


def test_each_step_samples_new_completions_and_the_same_seed_the_same_ones(new_tiny_policy):
    runs = []
    for _ in range(2):
        model, tokenizer = new_tiny_policy()
        calls = record_generate(model)
        train(model, tokenizer, PROMPTS, by_position, config(max_steps=2, learning_rate=0.0),
              progress=False)
        runs.append([output for _, _, output in calls])
    (first, second), (again, _) = runs
    assert not torch.equal(first, second)  # step 2 samples afresh (same weights: lr = 0)
    assert torch.equal(first, again)


def test_the_reward_gets_the_prompt_rows_columns_once_per_completion(tiny_policy):
    model, tokenizer = tiny_policy
    calls = record_generate(model)
    seen = []

    def reads_columns(completions, prompts, answer, **kwargs):
        seen.append((list(prompts), list(answer)))
        return [2.0 * len(a) for a in answer]

    rows = [{"prompt": "Say hello.", "answer": "a"}, {"prompt": "Name a colour.", "answer": "bb"}]
    result = train(model, tokenizer, rows, reads_columns,
                   config(prompts_per_step=2, system_message="be brief."),
                   reward_weights=[0.5], progress=False)
    ((prompts, answers),) = seen
    assert len(prompts) == 2 * GROUP and sorted(set(prompts)) == ["Name a colour.", "Say hello."]
    for group in range(2):  # each row's columns repeated for its group of completions
        block = slice(group * GROUP, (group + 1) * GROUP)
        assert len(set(prompts[block])) == len(set(answers[block])) == 1
        row = next(r for r in rows if r["prompt"] == prompts[block][0])
        assert answers[block][0] == row["answer"]
    assert result.metrics[0]["reward"] == pytest.approx(0.5 * 2.0 * 1.5)  # weighted, mean
    assert result.metrics[0]["rewards/reads_columns/mean"] == pytest.approx(3.0)
    ((prompt_len, _, output),) = calls
    prompt = tokenizer.decode(output[0, :prompt_len], skip_special_tokens=True)
    assert prompt.endswith(f"<system>be brief.<user>{prompts[0]}<assistant>")  # no <think>


def test_thinking_is_passed_to_the_chat_template(tiny_policy):
    model, tokenizer = tiny_policy
    calls = record_generate(model)
    train(model, tokenizer, PROMPTS, by_position, config(enable_thinking=True), progress=False)
    ((prompt_len, _, output),) = calls
    assert tokenizer.decode(output[0, :prompt_len]).endswith("<assistant><think>")


@pytest.mark.parametrize("sampling", [{"temperature": 1e-4}, {"top_p": 1e-6}])
def test_the_sampling_settings_reach_the_sampler(new_tiny_policy, sampling):
    groups = {}
    for name, settings in (("default", {}), ("greedy", sampling)):
        model, tokenizer = new_tiny_policy()
        calls = record_generate(model)
        train(model, tokenizer, PROMPTS, by_position, config(**settings), progress=False)
        ((prompt_len, _, output),) = calls
        groups[name] = output[:, prompt_len:].view(2, GROUP, -1)
    # near-greedy sampling gives each prompt's group one completion; temperature 1 does not
    assert all(torch.equal(group[0], row) for group in groups["greedy"] for row in group)
    assert not all(torch.equal(group[0], row) for group in groups["default"] for row in group)


def test_the_configured_stop_rule_ends_every_completion(tiny_policy, monkeypatch):
    # a rule met by any text: each completion ends with its first token (not EOS, not the
    # 6-token budget), and nothing after it is sampled
    model, tokenizer = tiny_policy
    monkeypatch.setitem(rollout.STOP_RULES, "any_text", rollout.StopRule(bool, trigger=""))
    calls = record_generate(model)
    result = train(model, tokenizer, PROMPTS, by_position, config(stop_at="any_text"),
                   progress=False)
    ((prompt_len, _, output),) = calls
    assert output.size(1) - prompt_len == 1
    assert result.metrics[0]["completions/mean_length"] == 1.0
    assert result.metrics[0]["completions/clipped_ratio"] == 0.0


def test_the_prompts_of_a_step_depend_on_the_seed_and_the_step(new_tiny_policy):
    many = [f"Count to {n}." for n in range(10)]
    chosen = {}
    for seed in (0, 1):
        model, tokenizer = new_tiny_policy()
        seen = []

        def records_prompts(completions, prompts, seen=seen, **kwargs):
            seen.append(tuple(sorted(set(prompts))))
            return by_position(completions)

        train(model, tokenizer, many, records_prompts,
              config(max_steps=3, learning_rate=0.0, seed=seed), progress=False)
        chosen[seed] = seen
    assert len(set(chosen[0])) == 3  # three steps, three different pairs of prompts
    assert chosen[0] != chosen[1]


def test_a_resumed_run_samples_what_the_uninterrupted_run_samples(new_tiny_policy, tmp_path):
    outputs = {}
    for name in ("straight", "resumed"):
        model, tokenizer = new_tiny_policy()
        calls = record_generate(model)
        if name == "straight":
            train(model, tokenizer, PROMPTS, by_position, config(max_steps=2), progress=False)
        else:
            train(model, tokenizer, PROMPTS, by_position,
                  config(max_steps=1, save_checkpoint=True), tmp_path, progress=False)
            base, tokenizer = new_tiny_policy()
            calls = record_generate(base)
            train(base, tokenizer, PROMPTS, by_position, config(max_steps=2), tmp_path,
                  resume=True, progress=False)
        outputs[name] = calls[-1][2]
    torch.testing.assert_close(outputs["resumed"], outputs["straight"], rtol=0, atol=0)


def test_the_progress_bar_shows_the_step_the_reward_and_the_characters(tiny_policy, capsys,
                                                                        tmp_path, monkeypatch):
    from tqdm import tqdm

    # no monitor thread: a process forked later (make mutate) must not inherit its lock
    monkeypatch.setattr(tqdm, "monitor_interval", 0)
    model, tokenizer = tiny_policy
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=2, save_checkpoint=True),
          tmp_path, progress=True)
    bar = capsys.readouterr().err.replace("\r", "\n")
    assert "GRPO: 100%" in bar and " 2/2 " in bar
    assert "reward=0.5" in bar and re.search(r"chars=\d+\b", bar)
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=3), tmp_path, resume=True,
          progress=True)
    resumed = capsys.readouterr().err.replace("\r", "\n")
    assert " 2/3 " in resumed and " 3/3 " in resumed and " 1/3 " not in resumed
    train(model, tokenizer, PROMPTS, by_position, config(max_steps=1), progress=False)
    assert "GRPO" not in capsys.readouterr().err


def test_a_resumed_run_samples_a_fresh_rollout_even_in_the_middle_of_its_iterations(
        tiny_policy, tmp_path):
    model, tokenizer = tiny_policy
    train(model, tokenizer, PROMPTS, by_position,
          config(max_steps=1, num_iterations=2, save_checkpoint=True), tmp_path, progress=False)
    calls = record_generate(model)
    resumed = train(model, tokenizer, PROMPTS, by_position, config(max_steps=2, num_iterations=2),
                    tmp_path, resume=True, progress=False)
    assert len(calls) == 1 and resumed.metrics[0]["iteration"] == 1  # the rollout is not saved


# ---------------------------------------------------------------- the bfloat16 sampling copy


def test_rollouts_come_from_the_bf16_copy_and_it_follows_every_update(tiny_policy):
    model, tokenizer = tiny_policy
    sampled_dtypes = []
    decode_until = rollout.decode_until

    def recorded(sampled_by, *args, **kwargs):
        sampled_dtypes.append(next(sampled_by.parameters()).dtype)
        return decode_until(sampled_by, *args, **kwargs)

    rollout.decode_until = recorded
    from grpo_core.loop import _start, make_rollout, update

    run = _start(model, tokenizer, PROMPTS, [by_position],
                 config(sampling_dtype="bfloat16", autocast_dtype="bfloat16"), None)
    before = weights(run.sampler)
    update(run, make_rollout(run, 1))
    assert sampled_dtypes == [torch.bfloat16]
    assert next(run.model.parameters()).dtype == torch.float32  # master weights stay float32
    for copied, weight in zip(run.sampler.parameters(), run.model.parameters(), strict=True):
        assert torch.equal(copied, weight.detach().to(torch.bfloat16))
    assert not torch.equal(before, weights(run.sampler))  # the update reached the copy
    assert not any(p.requires_grad for p in run.sampler.parameters())


# ---------------------------------------------------------------- sampler/learner correction


def _captured_update(monkeypatch, run_config, tiny_policy):
    """One update under ``run_config``; what ``grpo_loss`` was given, and the step's metrics."""
    from grpo_core import loop

    model, tokenizer = tiny_policy
    given = []

    def recording(*args, **kwargs):
        given.append(kwargs.get("sampler_weights"))
        return grpo_loss(*args, **kwargs)

    monkeypatch.setattr(loop, "grpo_loss", recording)
    run = loop._start(copy.deepcopy(model), tokenizer, PROMPTS, [by_position], run_config, None)
    batch = loop.make_rollout(run, 1)
    if run.sampler is not None:  # the copy's own numbers, before the update refreshes it
        with torch.no_grad():
            batch.sampler_check = token_logprobs(run.sampler, batch.input_ids,
                                                 batch.attention_mask, batch.width).float()
    return run, batch, given, loop.update(run, batch)


def test_the_correction_weighs_by_the_learner_over_the_bf16_copy(tiny_policy, monkeypatch):
    from grpo_core.sampling_correction import sampler_weights

    cfg = config(sampling_dtype="bfloat16", sampling_correction="token_truncate",
                 sampling_correction_cap=1.001)
    model = copy.deepcopy(tiny_policy[0])
    run, batch, given, metrics = _captured_update(monkeypatch, cfg, tiny_policy)
    mask = batch.rollout.completion_mask
    learner = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.width)
    assert next(run.sampler.parameters()).dtype == torch.bfloat16
    assert torch.equal(batch.sampler_logps, batch.sampler_check)
    assert not torch.equal(batch.sampler_logps * mask, learner * mask)  # bf16 is not float32
    expected = sampler_weights(learner, batch.sampler_logps, mask, "token_truncate", None, 1.001)
    assert len(given) == 1 and torch.allclose(given[0], expected, atol=1e-5)
    assert given[0].max() <= 1.001 and given[0][mask.bool()].min() < 1.0
    difference = (learner - batch.sampler_logps)[mask.bool()].abs()
    assert metrics["sampling/sampling_logp_difference/max"] == pytest.approx(
        difference.max().item(), abs=1e-5)
    assert metrics["sampling/importance_sampling_ratio/max"] <= 1.001


def test_a_float32_copy_needs_no_correction_and_changes_nothing(tiny_policy, monkeypatch):
    plain = config(sampling_dtype="float32")
    corrected = config(sampling_dtype="float32", sampling_correction="sequence_mask")
    run_a, _, given_a, metrics_a = _captured_update(monkeypatch, plain, tiny_policy)
    run_b, _, given_b, metrics_b = _captured_update(monkeypatch, corrected, tiny_policy)
    assert given_a == [None] and not any(k.startswith("sampling/") for k in metrics_a)
    # the copy's forward runs without autograd, the learner's with it: on some CPUs (AMD
    # EPYC with AVX512-BF16) float32 kernels then sum in another order, ~1e-7 apart
    assert torch.allclose(given_b[0], torch.ones_like(given_b[0]), rtol=0, atol=1e-5)
    assert metrics_b["sampling/sampling_logp_difference/max"] < 1e-5
    assert metrics_b["sampling/dropped_token_share"] == 0.0
    assert metrics_a["loss"] == pytest.approx(metrics_b["loss"], abs=1e-6)
    assert torch.allclose(weights(run_a.model), weights(run_b.model), rtol=0, atol=1e-6)


def test_measuring_logs_the_mismatch_without_weights(tiny_policy, monkeypatch):
    cfg = config(sampling_dtype="bfloat16", sampling_correction="measure")
    _, batch, given, metrics = _captured_update(monkeypatch, cfg, tiny_policy)
    assert given == [None] and batch.sampler_logps is not None
    assert metrics["sampling/sampling_logp_difference/mean"] > 0
    assert "sampling/importance_sampling_ratio/mean" not in metrics


@pytest.mark.skipif(not packing_available(), reason="no oneDNN packing here")
def test_a_packed_float32_copy_gives_the_learners_log_probs(new_tiny_policy, monkeypatch):
    """The cpu profile's packed copy: its forward pass is the learner's up to float rounding,
    so the correction has (almost) nothing to correct."""
    model, tokenizer = new_tiny_policy(layers=2)
    cfg = config(sampling_dtype="float32", sampling_packed=True, sampling_correction="measure")
    _, _, _, metrics = _captured_update(monkeypatch, cfg, (model, tokenizer))
    assert 0 <= metrics["sampling/sampling_logp_difference/max"] < 1e-4


@pytest.mark.parametrize(("overrides", "message"), [
    ({"sampling_correction": "sequence_mask"}, "set sampling_dtype"),
    ({"sampling_correction": "tokens", "sampling_dtype": "bfloat16"}, "sampling_correction must"),
    ({"sampling_correction": "token_mask", "sampling_dtype": "bfloat16",
      "sampling_correction_cap": 0.0}, "cap must be > 0"),
])
def test_bad_correction_settings_are_explained(overrides, message):
    with pytest.raises(ValueError, match=message):
        config(**overrides).validate()


def test_a_resumed_run_samples_from_the_checkpoints_weights(new_tiny_policy, tmp_path):
    model, tokenizer = new_tiny_policy()
    settings = {"sampling_dtype": "bfloat16", "max_steps": 2, "save_checkpoint": True}
    train(model, tokenizer, PROMPTS, by_position, config(**settings), tmp_path, progress=False)
    fresh, _ = new_tiny_policy()
    from grpo_core.checkpoints import restore_checkpoint
    from grpo_core.loop import _start

    run = _start(fresh, tokenizer, PROMPTS, [by_position], config(**settings), None)
    restore_checkpoint(tmp_path, run.model, run.optimizer)
    run.refresh_sampler()
    for copied, weight in zip(run.sampler.parameters(), model.parameters(), strict=True):
        assert torch.equal(copied, weight.detach().to(torch.bfloat16))


@pytest.mark.skipif(not packing_available(), reason="this torch cannot pack weights")
def test_a_packed_sampling_copy_samples_what_the_policy_would_and_follows_every_update(
        new_tiny_policy):
    from grpo_core.loop import _start, make_rollout, update
    from grpo_core.packed import PackedLinear

    model, tokenizer = new_tiny_policy(layers=2)
    plain, _ = new_tiny_policy(layers=2)
    settings = config(sampling_dtype="float32", sampling_packed=True)
    run = _start(model, tokenizer, PROMPTS, [by_position], settings, None)
    assert any(isinstance(m, PackedLinear) for m in run.sampler.modules())
    assert not any(isinstance(m, PackedLinear) for m in run.model.modules())  # policy untouched
    ids = tokenizer(["abc de", "fg hij"], return_tensors="pt").input_ids

    def logits(m):
        with torch.no_grad():
            return m(ids).logits

    before = logits(run.sampler)
    batch = make_rollout(run, 1)
    plain_run = _start(plain, tokenizer, PROMPTS, [by_position], config(), None)
    # the same seed draws the same completions from the packed copy as from the policy
    assert torch.equal(batch.rollout.completion_ids, make_rollout(plain_run, 1).rollout.completion_ids)
    update(run, batch)
    torch.testing.assert_close(logits(run.sampler), logits(run.model), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(logits(run.sampler), before, atol=1e-4)  # the update reached it
    run.release_sampler()
    assert all(m.released for m in run.sampler.modules() if isinstance(m, PackedLinear))
    run.refresh_sampler()
    torch.testing.assert_close(logits(run.sampler), logits(run.model), atol=1e-5, rtol=1e-5)


def test_sharing_the_prompt_pass_leaves_the_update_as_it_was(new_tiny_policy):
    """Two runs from the same weights and seed, one with the prompt pass shared by each
    group's rows (the default) and one without: the same loss, and weights equal to float
    rounding after two updates."""
    results = {}
    for share in (True, False):
        model, tokenizer = new_tiny_policy(layers=2)
        result = train(model, tokenizer, PROMPTS, by_position,
                       config(max_steps=2, share_prompt_pass=share), progress=False)
        results[share] = (result.metrics, [p.detach().clone() for p in model.parameters()])
    (shared_metrics, shared), (full_metrics, full) = results[True], results[False]
    for got, want in zip(shared_metrics, full_metrics, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], abs=1e-6)
    initial = [p.detach() for p in new_tiny_policy(layers=2)[0].parameters()]
    assert any(not torch.allclose(a, b) for a, b in zip(shared, initial, strict=True))  # it learned
    for got, want in zip(shared, full, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(not packing_available(), reason="this torch cannot pack weights")
def test_a_resumed_run_packs_the_checkpoints_weights(new_tiny_policy, tmp_path):
    from grpo_core.checkpoints import restore_checkpoint
    from grpo_core.loop import _start

    settings = {"sampling_dtype": "float32", "sampling_packed": True, "max_steps": 2,
                "save_checkpoint": True}
    model, tokenizer = new_tiny_policy()
    train(model, tokenizer, PROMPTS, by_position, config(**settings), tmp_path, progress=False)
    fresh, _ = new_tiny_policy()
    run = _start(fresh, tokenizer, PROMPTS, [by_position], config(**settings), None)
    restore_checkpoint(tmp_path, run.model, run.optimizer)
    run.refresh_sampler()  # not released since it was packed: the trained weights must reach it
    ids = tokenizer(["abc de"], return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(run.sampler(ids).logits, model(ids).logits, atol=1e-5,
                                   rtol=1e-5)


def test_packing_needs_a_sampling_copy():
    with pytest.raises(ValueError, match="sampling_packed packs the sampling copy"):
        config(sampling_packed=True).validate()


def test_the_bf16_autocast_loss_matches_float32_on_a_fixed_batch(smoke_policy):
    """The course's CPU precision changes the numbers by rounding only. On one fixed batch of
    the real model: token log-probs within 0.05 nats on average (bfloat16 keeps 8 bits of
    mantissa), and the loss and its gradient's direction close to float32's (loss within
    0.01 of a loss of about 0.04; gradient cosine above 0.95). The rounding depends on the
    CPU's bfloat16 kernels: measured 0.034 nats and a loss 0.0036 off on an AMD EPYC with
    AVX512-BF16 and no AMX, less on an Intel CPU with AMX."""
    from grpo_core.loop import _start, make_rollout

    model, tokenizer = smoke_policy
    torch.manual_seed(0)
    run = _start(model, tokenizer, PROMPTS, [by_position], config(max_new_tokens=8), None)
    batch = make_rollout(run, 1)
    mask = batch.rollout.completion_mask
    results = {}
    for dtype in (None, "bfloat16"):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            logps = token_logprobs(model, batch.input_ids, batch.attention_mask, batch.width)
        if dtype is None:  # a rollout one update old: ratios away from 1, a non-zero loss
            old = logps.detach() - 0.05 * batch.advantages[:, None]
        loss, _ = grpo_loss(logps.float(), old, batch.advantages, mask)
        loss.backward()
        gradient = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results[dtype] = (logps.detach().float(), loss.item(), gradient)
    model.zero_grad(set_to_none=True)
    (logps32, loss32, grad32), (logps16, loss16, grad16) = results[None], results["bfloat16"]
    assert ((logps16 - logps32).abs() * mask).sum() / mask.sum() < 0.05
    assert abs(loss32) > 0.02
    assert loss16 == pytest.approx(loss32, abs=0.01)
    assert torch.nn.functional.cosine_similarity(grad16.float(), grad32.float(), dim=0) > 0.95


def test_a_bad_precision_name_is_explained():
    with pytest.raises(ValueError, match="sampling_dtype must be None or one of"):
        config(sampling_dtype="bf16").validate()


def test_the_log_prob_passes_use_the_configured_attention_and_restore_it(tiny_policy):
    from grpo_core.loop import _start, make_rollout, update

    model, tokenizer = tiny_policy
    model.set_attn_implementation("sdpa")
    seen = []
    forward = model.forward

    def recorded(*args, **kwargs):
        seen.append(model.config._attn_implementation)
        return forward(*args, **kwargs)

    model.forward = recorded
    losses = {}
    for kernel in (None, "eager"):
        run = _start(model, tokenizer, PROMPTS, [by_position],
                     config(attn_implementation=kernel, learning_rate=0.0, num_iterations=2), None)
        batch = make_rollout(run, 1)
        seen.clear()
        losses[kernel] = update(run, batch)["loss"]
        # one micro-batch: the groups' shared prompt pass, then the completions on its cache
        assert seen == ["sdpa" if kernel is None else "eager"] * 2
        assert model.config._attn_implementation == "sdpa"  # and back for sampling
    assert losses["eager"] == pytest.approx(losses[None], abs=1e-6)


def test_the_optimizer_is_adamw_in_its_fused_kernel_on_cpu(tiny_policy):
    from grpo_core.loop import _start

    model, tokenizer = tiny_policy
    run = _start(model, tokenizer, PROMPTS, [by_position], config(), None)
    assert isinstance(run.optimizer, torch.optim.AdamW)
    assert run.optimizer.defaults["fused"] is True


# ================================================================================================
# The loop's behaviour as a learner meets it, on a tiny random Llama with the offline model's
# tokenizer (moved from tests/test_train.py): the reference model and its KL, a reused rollout
# and the clip, an interrupted run and its resume, groups with no signal, a reward function
# that fails, settings refused before any work, and the evaluate hook.
# ================================================================================================

import json  # noqa: E402

from grpo_core.loop import make_reference  # noqa: E402
from grpo_core.provenance import code_version, draws_fingerprint  # noqa: E402
from grpo_core.rewards import length_reward  # noqa: E402
from grpo_core.run_files import read_jsonl  # noqa: E402
from grpo_core.scoring import RewardError  # noqa: E402


@pytest.fixture
def smoke_tokenizer_policy(smoke_policy):
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


def test_beta_zero_creates_no_reference_model(smoke_policy):
    model, _ = smoke_policy
    assert make_reference(model, 0.0) is None
    reference = make_reference(model, 0.04)
    assert reference is not model and not any(p.requires_grad for p in reference.parameters())


def test_beta_positive_logs_kl(smoke_tokenizer_policy, smoke_profile):
    model, tokenizer = smoke_tokenizer_policy
    result = train(model, tokenizer, PROMPTS, length_reward,
                   tiny(smoke_profile, beta=0.04, max_steps=1), progress=False)
    assert result.ref_model is not None
    assert result.metrics[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # the policy starts at the reference


def test_reusing_a_rollout_moves_the_ratio_and_fires_the_clip(smoke_tokenizer_policy, smoke_profile):
    model, tokenizer = smoke_tokenizer_policy
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


def test_interrupted_run_keeps_metrics_and_resumes_the_step_count(smoke_tokenizer_policy,
                                                                   smoke_profile, tmp_path):
    model, tokenizer = smoke_tokenizer_policy
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
    recorded = json.loads((tmp_path / "config.json").read_text())
    assert recorded["resumed_from_step"] == 1
    assert (weight.detach() - at_checkpoint).abs().max() < 0.01  # one small step away, not +1
    # the run names the code that made it and what decides its draws (grpo_core.provenance)
    assert recorded["code"] == code_version()
    draws = recorded["draws"]
    assert draws == draws_fingerprint({key: value for key, value in draws.items() if key != "id"})
    assert draws["torch"] == torch.__version__ and draws["device"] == "cpu"
    assert draws["cpu_kernels"] == torch.backends.cpu.get_cpu_capability()
    assert draws["onednn_max_isa"] == os.environ.get("ONEDNN_MAX_CPU_ISA")
    assert draws["precision"]["sampling_dtype"] == config.sampling_dtype
    assert draws["sampler"].startswith("grpo_core.rollout.decode_until from ")


@pytest.mark.skipif(not packing_available("float32"), reason="no oneDNN packing on this CPU")
def test_the_draws_name_the_sampling_copy_and_its_decoding_step(tiny_policy):
    from types import SimpleNamespace

    from grpo_core.loop import draw_parts, make_sampler

    model, _ = tiny_policy

    def parts(dtype, packed):
        sampler = make_sampler(model, dtype, packed)
        config = SimpleNamespace(sampling_dtype=dtype, sampling_packed=packed,
                                 autocast_dtype=None, loss_scaling=False,
                                 attn_implementation=None)
        return draw_parts(SimpleNamespace(model=model, sampler=sampler, config=config,
                                          sampling_model=sampler or model))

    assert parts(None, False)["sampler"] == ("grpo_core.rollout.decode_until from the policy; "
                                             "decoding step: the model's forward")
    assert parts("float32", True)["sampler"] == (
        "grpo_core.rollout.decode_until from a packed float32 copy; decoding step: written out "
        "(grpo_core.packed_decoder)")
    assert parts("float32", True)["precision"]["sampling_packed"] is True


def test_all_equal_rewards_log_zero_std_and_carry_on(smoke_tokenizer_policy, smoke_profile):
    model, tokenizer = smoke_tokenizer_policy

    def constant(completions, **kwargs):
        return [1.0] * len(completions)

    result = train(model, tokenizer, PROMPTS, constant, tiny(smoke_profile, max_new_tokens=3),
                   progress=False)
    assert [r["frac_reward_zero_std"] for r in result.metrics] == [1.0, 1.0]
    assert all(r["loss"] == 0.0 and r["grad_norm"] == 0.0 for r in result.metrics)


def test_an_error_in_a_reward_function_keeps_the_metrics(smoke_tokenizer_policy, smoke_profile,
                                                         tmp_path):
    model, tokenizer = smoke_tokenizer_policy
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


def test_evaluate_hook_joins_the_metrics_of_its_steps(smoke_tokenizer_policy, smoke_profile):
    model, tokenizer = smoke_tokenizer_policy
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


def test_evaluate_must_return_finite_numbers(smoke_tokenizer_policy, smoke_profile):
    model, tokenizer = smoke_tokenizer_policy
    with pytest.raises(ValueError, match="finite"):
        train(model, tokenizer, PROMPTS, length_reward, tiny(smoke_profile, eval_every=1),
              evaluate=lambda *_: {"eval/x": float("nan")}, progress=False)
