"""Notebook 13's measurement: a plan's sampling copy against the learner, token by token."""

from __future__ import annotations

import pytest
import torch

from grpo_core.logprobs import token_logprobs
from grpo_core.loop import make_sampler
from grpo_core.mismatch import Mismatch, measure_mismatch
from grpo_core.precision import Precision

PROMPTS = ["abc", "de"]


def plan(sampling_dtype, autocast=None) -> Precision:
    return Precision(autocast, False, "a test plan", sampling_dtype=sampling_dtype)


def measure(model, tokenizer, chosen: Precision, seed: int = 0) -> Mismatch:
    return measure_mismatch(model, tokenizer, PROMPTS, chosen, group_size=3, max_new_tokens=6,
                            seed=seed)


def test_a_float32_copy_of_float32_weights_does_not_differ(tiny_policy):
    model, tokenizer = tiny_policy
    found = measure(model, tokenizer, plan("float32"))
    assert found.learner.shape == found.sampler.shape == found.mask.shape == (6, 6)
    assert found.token_log_ratios().numel() == int(found.mask.sum())
    assert torch.equal(found.token_log_ratios(), torch.zeros(int(found.mask.sum())))
    assert found.summary()["mean_abs"] == 0


def test_a_bfloat16_copy_differs_by_rounding_and_its_sums_are_the_sequence_weights(tiny_policy):
    model, tokenizer = tiny_policy
    found = measure(model, tokenizer, plan("bfloat16", autocast="bfloat16"))
    assert found.sampler.dtype == found.learner.dtype == torch.float32
    assert 0 < found.summary()["mean_abs"] < 0.5  # rounding, not another model
    sums = (found.learner - found.sampler).mul(found.mask).sum(dim=-1)
    assert torch.allclose(found.sequence_log_ratios(), sums, atol=1e-6)


def test_the_same_seed_draws_the_same_tokens_and_only_the_learner_takes_the_autocast(tiny_policy):
    model, tokenizer = tiny_policy
    chosen = plan("bfloat16", autocast="bfloat16")
    found, again = measure(model, tokenizer, chosen), measure(model, tokenizer, chosen)
    assert torch.equal(found.learner, again.learner) and torch.equal(found.sampler, again.sampler)
    without_autocast = measure(model, tokenizer, plan("bfloat16"))
    assert torch.equal(found.sampler, without_autocast.sampler)
    assert not torch.equal(found.learner, without_autocast.learner)


def test_the_numbers_are_those_of_token_logprobs(tiny_policy, monkeypatch):
    import grpo_core.mismatch as mismatch

    model, tokenizer = tiny_policy
    seen = {}
    original = mismatch.sample_group

    def keep(*args, **kwargs):
        seen["rollout"] = original(*args, **kwargs)
        return seen["rollout"]

    monkeypatch.setattr(mismatch, "sample_group", keep)
    found = measure(model, tokenizer, plan("bfloat16"))
    rollout = seen["rollout"]
    width = rollout.completion_ids.size(1)
    with torch.no_grad():
        learner = token_logprobs(model, rollout.input_ids, rollout.attention_mask, width)
        sampler = token_logprobs(make_sampler(model, "bfloat16"), rollout.input_ids,
                                 rollout.attention_mask, width).float()
    assert torch.equal(found.learner, learner)
    assert torch.equal(found.sampler, sampler)
    assert torch.equal(found.mask, rollout.completion_mask)


def test_a_plan_without_a_copy_is_refused(tiny_policy):
    model, tokenizer = tiny_policy
    with pytest.raises(ValueError, match="no sampling copy"):
        measure(model, tokenizer, plan(None, autocast="float16"))


def test_the_plan_measured_is_the_cpu_plans_own_copy_or_on_a_gpu_a_copy_in_its_dtype():
    from grpo_core.mismatch import plan_to_measure
    from grpo_core.precision import choose_precision

    cpu = choose_precision("cpu", bf16_supported=True, requested="bfloat16",
                           packing=frozenset({"bfloat16"}))
    assert plan_to_measure(cpu, "cpu") is cpu
    assert plan_to_measure(choose_precision("cpu", requested="float16"), "cpu") is None
    for requested, dtype in (("bfloat16", "bfloat16"), ("float16", "float16"),
                             ("float32", "float32")):
        gpu = choose_precision("cuda", capability=(8, 0), bf16_supported=True,
                               requested=requested)
        assert gpu.sampling_dtype is None
        measured = plan_to_measure(gpu, "cuda")
        assert (measured.sampling_dtype, measured.sampling_packed) == (dtype, False)
        assert measured.autocast == gpu.autocast
