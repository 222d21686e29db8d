"""Importance weights for a sampler that is not the learner: TRL's four modes, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.loss import grpo_loss
from grpo_core.sampling_correction import (
    MODES,
    log_ratios,
    mismatch_summary,
    sampler_weights,
)

# two completions: 3 tokens, then 2 (one padding position)
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
LEARNER = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -3.0, 0.0]])
# sampler - learner per token: +0.1, -1.5, +0.2 | -0.9, nan (no sampler log-prob), padding
SAMPLER = torch.tensor([[-1.1, -0.5, -0.7], [0.7, float("nan"), -9.0]])


def test_log_ratios_are_learner_minus_sampler_on_completion_tokens_only():
    expected = torch.tensor([[0.1, -1.5, 0.2], [-0.9, 0.0, 0.0]])
    assert torch.allclose(log_ratios(LEARNER, SAMPLER, MASK), expected, atol=1e-6)


def test_token_modes_clip_or_drop_each_token():
    ratios = torch.exp(torch.tensor([[0.1, -1.5, 0.2], [-0.9, 0.0, 0.0]]))
    truncated = sampler_weights(LEARNER, SAMPLER, MASK, "token_truncate", clip_min=0.5,
                                clip_max=1.2)
    assert torch.allclose(truncated, ratios.clamp(0.5, 1.2))
    masked = sampler_weights(LEARNER, SAMPLER, MASK, "token_mask", clip_min=0.5, clip_max=1.2)
    expected = torch.where((ratios < 0.5) | (ratios > 1.2), torch.zeros_like(ratios), ratios)
    assert torch.allclose(masked, expected)
    assert masked[0, 1] == 0 and masked[1, 0] == 0 and masked[0, 0] > 0  # e^-1.5, e^-0.9 out


def test_sequence_modes_use_one_ratio_per_completion():
    sums = torch.tensor([[0.1 - 1.5 + 0.2], [-0.9]])
    truncated = sampler_weights(LEARNER, SAMPLER, MASK, "sequence_truncate", clip_max=3.0)
    assert truncated.shape == (2, 1)
    assert torch.allclose(truncated, torch.exp(sums))
    masked = sampler_weights(LEARNER, SAMPLER, MASK, "sequence_mask", clip_min=0.4)
    assert masked[0, 0] == 0  # e^-1.2 = 0.30 below 0.4: the whole completion drops
    assert masked[1, 0] == pytest.approx(math.exp(-0.9), rel=1e-6)


def test_identical_policies_need_no_correction_in_any_mode():
    for mode in MODES:
        weights = sampler_weights(LEARNER, LEARNER.clone(), MASK, mode)
        assert torch.all(weights == 1), mode


def test_the_summary_counts_only_completion_tokens():
    summary = mismatch_summary(LEARNER, SAMPLER, MASK, threshold=2.0)
    assert summary["tokens"] == 5
    assert summary["mean_abs"] == pytest.approx((0.1 + 1.5 + 0.2 + 0.9 + 0.0) / 5, rel=1e-5)
    assert summary["max_abs"] == pytest.approx(1.5, rel=1e-5)
    assert summary["share_past"] == pytest.approx(2 / 5)  # 1.5 and 0.9 pass log 2 = 0.69
    assert summary["sequence_log_ratio_sd"] == pytest.approx(
        torch.tensor([-1.2, -0.9]).std().item(), rel=1e-5)


def test_the_summary_at_a_threshold_below_one_of_the_tokens():
    summary = mismatch_summary(LEARNER, SAMPLER, MASK, threshold=math.exp(0.15))
    assert summary["share_past"] == pytest.approx(3 / 5)  # 1.5, 0.2 and 0.9 pass 0.15


def test_weights_of_one_leave_the_loss_unchanged_and_weights_scale_the_policy_term():
    token_logps = LEARNER.clone().requires_grad_()
    advantages = torch.tensor([1.0, -1.0])
    plain, _ = grpo_loss(token_logps, None, advantages, MASK)
    ones, _ = grpo_loss(token_logps, None, advantages, MASK, sampler_weights=torch.ones(2, 1))
    assert torch.equal(plain, ones)
    half, _ = grpo_loss(token_logps, None, advantages, MASK,
                        sampler_weights=torch.full((2, 3), 0.5))
    assert torch.allclose(half, plain / 2)
    # the KL term is not weighted
    ref = LEARNER - 0.3
    with_kl, _ = grpo_loss(token_logps, None, torch.zeros(2), MASK, ref_token_logps=ref,
                           beta=0.1, sampler_weights=torch.zeros(2, 3))
    without, _ = grpo_loss(token_logps, None, torch.zeros(2), MASK, ref_token_logps=ref,
                           beta=0.1)
    assert torch.allclose(with_kl, without) and with_kl > 0
    # junk under the padding does not reach the loss
    junk = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, float("nan")]])
    assert torch.equal(grpo_loss(token_logps, None, advantages, MASK, sampler_weights=junk)[0],
                       plain)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown mode"):
        sampler_weights(LEARNER, SAMPLER, MASK, "token")
    with pytest.raises(ValueError, match="clip_min"):
        sampler_weights(LEARNER, SAMPLER, MASK, "token_mask", clip_min=2.0, clip_max=1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        log_ratios(LEARNER, SAMPLER[:, :2], MASK)
    with pytest.raises(ValueError, match="threshold"):
        mismatch_summary(LEARNER, SAMPLER, MASK, threshold=1.0)
    with pytest.raises(ValueError, match="no token"):
        mismatch_summary(LEARNER, SAMPLER, torch.zeros_like(MASK))
    with pytest.raises(ValueError, match="sampler_weights"):
        grpo_loss(LEARNER.clone().requires_grad_(), None, torch.ones(2), MASK,
                  sampler_weights=torch.ones(3))


def test_the_band_is_closed_and_either_side_may_be_open():
    same = LEARNER.clone()  # every ratio exactly 1
    for mode in ("token_mask", "sequence_mask"):
        assert torch.all(sampler_weights(LEARNER, same, MASK, mode, clip_min=1.0,
                                         clip_max=1.0) == 1), mode  # on the edge: kept
    open_top = sampler_weights(LEARNER, SAMPLER, MASK, "token_mask", clip_min=0.5, clip_max=None)
    assert open_top[0, 2] == pytest.approx(math.exp(0.2)) and open_top[0, 1] == 0


def test_the_summary_defaults_to_a_factor_of_two_and_the_edge_is_not_past_it():
    learner = torch.tensor([[math.log(2.0), 0.0]], dtype=torch.float64)
    sampler = torch.zeros(1, 2, dtype=torch.float64)
    mask = torch.ones(1, 2)
    summary = mismatch_summary(learner, sampler, mask)
    assert summary["share_past"] == 0.0  # a ratio of exactly 2 is inside [1/2, 2]
    assert summary == mismatch_summary(learner, sampler, mask, threshold=2.0)
    assert summary["sequence_log_ratio_sd"] == 0.0  # one completion: no spread
    assert mismatch_summary(learner * 1.01, sampler, mask)["share_past"] == 0.5
