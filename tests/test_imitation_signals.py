"""grpo_core.imitation_signals: per-token cross-entropy and KL against the textbook formulas."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.imitation_signals import feedback_counts, token_cross_entropy, token_kl


def test_cross_entropy_matches_torch_per_position():
    torch.manual_seed(0)
    logits, targets = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    expected = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 11), targets.reshape(-1), reduction="none").view(2, 5)
    assert torch.allclose(token_cross_entropy(logits, targets), expected, atol=1e-6)


def test_cross_entropy_by_hand_and_mask():
    logits = torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]]))
    losses = token_cross_entropy(logits, torch.tensor([[0, 2]]), torch.tensor([[1, 0]]))
    assert losses[0, 0].item() == pytest.approx(math.log(2), abs=1e-6)
    assert losses[0, 1].item() == 0.0


def test_cross_entropy_has_a_gradient():
    logits = torch.randn(1, 3, 7, requires_grad=True)
    token_cross_entropy(logits, torch.tensor([[1, 2, 3]])).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_kl_matches_the_textbook_formula():
    torch.manual_seed(1)
    student, teacher = torch.randn(2, 4, 9), torch.randn(2, 4, 9)
    q = torch.softmax(teacher.double() / 0.5, -1)
    p = torch.softmax(student.double(), -1)
    expected = (q * (q.log() - p.log())).sum(-1)
    got = token_kl(student, teacher, teacher_temperature=0.5)
    assert got.dtype == torch.float32
    assert torch.allclose(got.double(), expected, atol=1e-5)
    assert torch.all(got >= -1e-6)


def test_kl_is_zero_for_the_same_distribution_and_masked_positions():
    torch.manual_seed(2)
    logits = torch.randn(1, 3, 5)
    assert torch.allclose(token_kl(logits, logits.clone()), torch.zeros(1, 3), atol=1e-6)
    kl = token_kl(logits, torch.randn(1, 3, 5), torch.tensor([[1, 1, 0]]))
    assert kl[0, 2].item() == 0.0 and kl[0, :2].min().item() > 0


def test_kl_rejects_bad_input():
    with pytest.raises(ValueError, match="same|both"):
        token_kl(torch.randn(1, 3, 5), torch.randn(1, 3, 6))
    with pytest.raises(ValueError, match="temperature"):
        token_kl(torch.randn(1, 3, 5), torch.randn(1, 3, 5), teacher_temperature=0)
    with pytest.raises(ValueError, match="mask"):
        token_cross_entropy(torch.randn(1, 3, 5), torch.zeros(1, 3, dtype=torch.long),
                            torch.ones(1, 2))


def test_feedback_counts():
    assert feedback_counts(10, 100) == {"sft": 10, "distillation": 1000, "rl": 1}
    assert feedback_counts(10, 100, num_attempts=4) == {"sft": 40, "distillation": 4000, "rl": 4}
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"num_tokens must be an int >= 1, got {bad}"):
            feedback_counts(bad, 100)
