"""grpo_core.preference: the DPO loss by hand, its gradient's direction, and pairs from groups."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.preference import dpo_loss, preference_pairs


def test_dpo_loss_by_hand():
    chosen, rejected = torch.tensor([-10.0, -5.0]), torch.tensor([-12.0, -4.0])
    ref_chosen, ref_rejected = torch.tensor([-11.0, -5.0]), torch.tensor([-11.0, -5.0])
    loss, metrics = dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta=0.5)
    margins = [0.5 * ((-10 + 11) - (-12 + 11)), 0.5 * ((-5 + 5) - (-4 + 5))]  # 1.0, -0.5
    expected = sum(math.log1p(math.exp(-m)) for m in margins) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert metrics["rewards/margins"] == pytest.approx(0.25)
    assert metrics["rewards/accuracies"] == 0.5
    assert metrics["rewards/chosen"] == pytest.approx(0.25)
    assert metrics["rewards/rejected"] == pytest.approx(0.0)


def test_dpo_loss_at_the_reference_is_log_2_and_its_gradient_separates_the_pair():
    chosen = torch.tensor([-3.0, -7.0], requires_grad=True)
    rejected = torch.tensor([-4.0, -2.0], requires_grad=True)
    loss, metrics = dpo_loss(chosen, rejected, chosen.detach(), rejected.detach(), beta=0.1)
    assert loss.item() == pytest.approx(math.log(2))
    assert metrics["rewards/margins"] == 0.0
    loss.backward()
    # descending the loss raises the chosen log-prob and lowers the rejected one
    assert torch.all(chosen.grad < 0) and torch.all(rejected.grad > 0)
    assert torch.allclose(chosen.grad, torch.full((2,), -0.1 * 0.5 / 2))


def test_dpo_loss_rejects_bad_input():
    one = torch.zeros(2)
    with pytest.raises(ValueError, match=r"\[N\]"):
        dpo_loss(one, torch.zeros(3), one, one)
    with pytest.raises(ValueError, match=r"\[N\]"):
        dpo_loss(torch.zeros(0), torch.zeros(0), torch.zeros(0), torch.zeros(0))
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(one, one, one, one, beta=0.0)


def test_preference_pairs_best_against_worst_and_skips_ties():
    rewards = torch.tensor([0.0, 2.0, 1.0, 2.0,  # best: first 2 at row 1; worst: row 0
                            3.0, 3.0, 3.0, 3.0,  # no variation: no pair
                            -1.0, -5.0, 4.0, -5.0])
    chosen, rejected = preference_pairs(rewards, group_size=4)
    assert chosen.tolist() == [1, 10] and rejected.tolist() == [0, 9]
    assert chosen.dtype == torch.int64


def test_preference_pairs_checks_the_layout():
    with pytest.raises(ValueError, match="multiple"):
        preference_pairs([1.0, 2.0, 3.0], group_size=2)
    with pytest.raises(ValueError, match="group_size"):
        preference_pairs([1.0, 2.0], group_size=1)
    chosen, rejected = preference_pairs([1.0, 1.0], group_size=2)
    assert chosen.numel() == 0 and rejected.numel() == 0
