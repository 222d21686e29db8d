"""grpo_core.loss: hand values, the lecture's claims as tests, NaN safety, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.advantages import group_advantages
from grpo_core.loss import (
    LOSS_TYPES,
    aggregate_loss,
    clip_metrics,
    clipped_surrogate,
    grpo_loss,
    kl_k3,
    policy_gradient_loss,
)

PROPERTY = settings(max_examples=30, deadline=None, derandomize=True)


def leaf(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


def grad_of(loss: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    (gradient,) = torch.autograd.grad(loss, tensor)
    return gradient


@st.composite
def logp_batches(draw, max_rows=6, max_width=5):
    """(token_logps [B, T], mask [B, T]) with random lengths, some rows possibly empty."""
    rows, width = draw(st.integers(1, max_rows)), draw(st.integers(1, max_width))
    values = draw(st.lists(st.floats(-12.0, -1e-3), min_size=rows * width, max_size=rows * width))
    lengths = draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows))
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    return torch.tensor(values).view(rows, width), mask


# --- the lecture's first box: one step per rollout -----------------------------------------------


def test_policy_gradient_loss_on_the_usable_group_by_hand():
    advantages = group_advantages([0.0, 1.0, 1.0, 2.0], 4)  # [-a, 0, 0, a], a = 1.2246
    token_logps = leaf([[-1.0, -2.0], [-0.5, -0.5], [-3.0, -1.0], [-0.25, -9.0]])
    mask = torch.tensor([[1, 1], [1, 1], [1, 0], [1, 0]])
    edge = advantages[3].item()
    # seq_logp = [-3, -1, -3, -0.25]; loss = -(-a * -3 + a * -0.25) / 4
    loss = policy_gradient_loss(token_logps, mask, advantages)
    assert loss.item() == pytest.approx(-(3 * edge - 0.25 * edge) / 4, rel=1e-6)
    # d loss / d logp_it = -A_i / B on completion tokens: the worse answer is pushed down
    expected = -advantages[:, None] / 4 * mask
    torch.testing.assert_close(grad_of(loss, token_logps), expected)


@pytest.mark.parametrize("rewards", [[0.0] * 4, [2.0] * 4], ids=["too_hard", "too_easy"])
def test_groups_without_variation_move_nothing(rewards):
    token_logps = leaf([[-1.0, -2.0], [-0.5, -0.5], [-3.0, -1.0], [-0.25, -9.0]])
    loss = policy_gradient_loss(token_logps, torch.ones(4, 2), group_advantages(rewards, 4))
    assert torch.equal(grad_of(loss, token_logps), torch.zeros(4, 2))


@PROPERTY
@given(logp_batches(), st.sampled_from(LOSS_TYPES), st.booleans())
def test_zero_advantage_gives_exactly_zero_policy_gradient(batch, loss_type, reuse):
    token_logps, mask = batch
    token_logps.requires_grad_()
    zero = torch.zeros(token_logps.size(0))
    assert torch.equal(
        grad_of(policy_gradient_loss(token_logps, mask, zero), token_logps),
        torch.zeros_like(token_logps),
    )
    old = token_logps.detach() - 0.3 if reuse else None
    loss, _ = grpo_loss(token_logps, old, zero, mask, loss_type=loss_type)
    assert torch.equal(grad_of(loss, token_logps), torch.zeros_like(token_logps))


# --- the lecture's second box: reusing a rollout adds a clip --------------------------------------


def test_clipped_surrogate_by_hand():
    # ratios 1.5, 0.5, 1.1, 1.5, 0.5 against A = +1, -1, +1, -1, +1
    old = torch.zeros(5, 1)
    token_logps = torch.log(torch.tensor([[1.5], [0.5], [1.1], [1.5], [0.5]]))
    advantages = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    surrogate = clipped_surrogate(token_logps, old, advantages, epsilon=0.2)
    # -min(rho A, clip(rho) A): capped at 1.2 / 0.8 only on the side A pushes
    torch.testing.assert_close(surrogate, torch.tensor([[-1.2], [0.8], [-1.1], [1.5], [-0.5]]))
    with_high = clipped_surrogate(token_logps, old, advantages, epsilon=0.2, epsilon_high=0.28)
    torch.testing.assert_close(with_high[0], torch.tensor([-1.28]))


@PROPERTY
@given(logp_batches(), st.lists(st.floats(-3, 3), min_size=6, max_size=6))
def test_at_ratio_one_the_clip_does_nothing(batch, advantage_values):
    token_logps, mask = batch
    token_logps.requires_grad_()
    advantages = torch.tensor(advantage_values[: token_logps.size(0)])
    surrogate = clipped_surrogate(token_logps, None, advantages)
    # value: exactly -A on every token (rho = exp(logp - logp.detach()) = 1)
    assert torch.equal(surrogate, (-advantages[:, None]).expand_as(surrogate))
    # gradient: the plain policy gradient, token for token
    summed = (surrogate * mask).sum(dim=1).mean()
    plain = policy_gradient_loss(token_logps, mask, advantages)
    torch.testing.assert_close(
        grad_of(summed, token_logps), grad_of(plain, token_logps), atol=1e-7, rtol=0
    )
    metrics = clip_metrics(torch.ones_like(token_logps), advantages, mask)
    assert set(metrics.values()) == {0.0}


@pytest.mark.parametrize("epsilon_high", [None, 0.28])
def test_a_token_clipped_on_the_side_its_advantage_pushes_gets_no_gradient(epsilon_high):
    high = 0.2 if epsilon_high is None else epsilon_high
    # ratios: above the band, below it, inside it (1.25 is inside only when epsilon_high = 0.28)
    ratios = torch.tensor([[1.0 + high + 0.05, 0.7, 1.25], [1.0 + high + 0.05, 0.7, 1.25]])
    old = torch.full((2, 3), -2.0)
    token_logps = (old + ratios.log()).requires_grad_()
    advantages = torch.tensor([1.0, -1.0])
    surrogate = clipped_surrogate(
        token_logps, old, advantages, epsilon=0.2, epsilon_high=epsilon_high
    )
    gradient = grad_of(surrogate.sum(), token_logps)
    # A > 0 above the band and A < 0 below it: clipped, zero gradient
    assert gradient[0, 0] == 0 and gradient[1, 1] == 0
    # the other side is never clipped (the min keeps the pessimistic, unclipped term)
    assert gradient[0, 1] != 0 and gradient[1, 0] != 0
    assert (gradient[0, 2] == 0) == (epsilon_high is None)
    metrics = clip_metrics(
        ratios, advantages, torch.ones(2, 3), epsilon=0.2, epsilon_high=epsilon_high
    )
    clipped_high = 2 if epsilon_high is None else 1
    assert metrics["clip_ratio/low_mean"] == pytest.approx(1 / 6)
    assert metrics["clip_ratio/high_mean"] == pytest.approx(clipped_high / 6)
    assert metrics["clip_ratio/region_mean"] == pytest.approx((1 + clipped_high) / 6)


# --- the KL guardrail ------------------------------------------------------------------------------


def test_kl_k3_by_hand():
    token_logps = torch.tensor([[-1.0, -2.0]])
    ref = token_logps + torch.tensor([[math.log(2.0), 0.0]])
    torch.testing.assert_close(kl_k3(token_logps, ref), torch.tensor([[1.0 - math.log(2.0), 0.0]]))


@PROPERTY
@given(logp_batches(), logp_batches())
def test_kl_k3_is_nonnegative_and_zero_where_reference_equals_policy(first, second):
    token_logps, _ = first
    ref = second[0]
    rows, width = min(token_logps.size(0), ref.size(0)), min(token_logps.size(1), ref.size(1))
    token_logps, ref = token_logps[:rows, :width], ref[:rows, :width]
    assert (kl_k3(token_logps, ref) >= 0).all()
    assert torch.equal(kl_k3(token_logps, token_logps), torch.zeros_like(token_logps))


def test_on_policy_kl_gradient_includes_the_ratio_correction():
    # rho * k3 at rho = 1: d/dlogp = k3 + (1 - e^d) = -d = logp - ref  (TRL's use_bias_correction_kl)
    token_logps = leaf([[-1.0, -2.0, -0.5]])
    ref = torch.tensor([[-1.0 + math.log(2.0), -2.5, -0.5]])
    loss, metrics = grpo_loss(
        token_logps,
        None,
        torch.zeros(1),
        torch.ones(1, 3),
        ref_token_logps=ref,
        beta=0.04,
        loss_type="bnpo",
    )
    expected_gradient = 0.04 * (token_logps.detach() - ref) / 3
    torch.testing.assert_close(grad_of(loss, token_logps), expected_gradient)
    k3 = kl_k3(token_logps.detach(), ref)
    assert loss.item() == pytest.approx(0.04 * k3.mean().item(), rel=1e-6)
    assert metrics["kl"] == pytest.approx(k3.mean().item(), rel=1e-6)


# --- grpo_loss: TRL's four aggregations by hand ----------------------------------------------------


@pytest.mark.parametrize(
    ("loss_type", "kwargs", "expected"),
    [
        ("grpo", {}, (-1.0 + 3.0 + 0.0) / 3),  # mean over rows of row means; the empty row counts
        ("bnpo", {}, (-2.0 + 3.0) / 3),  # token mean over the batch
        ("dr_grpo", {"max_completion_length": 4}, (-2.0 + 3.0) / (3 * 4)),
        ("dr_grpo", {}, (-2.0 + 3.0) / (3 * 3)),  # default: the padded width
        ("dapo", {}, (-2.0 + 3.0) / 3),  # default: this batch's tokens
        ("dapo", {"num_items_in_batch": 10}, (-2.0 + 3.0) / 10),
        ("dapo", {"num_items_in_batch": torch.tensor(10)}, (-2.0 + 3.0) / 10),
    ],
)
def test_grpo_loss_aggregations_by_hand(loss_type, kwargs, expected):
    # on-policy, each token's loss is -A: rows of length 2, 1, 0 with A = 1, -3, 5
    token_logps = leaf([[-1.0, -2.0, -3.0], [-0.5, -1.0, -1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    loss, metrics = grpo_loss(
        token_logps, None, torch.tensor([1.0, -3.0, 5.0]), mask, loss_type=loss_type, **kwargs
    )
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert "kl" not in metrics and metrics["clip_ratio/region_mean"] == 0.0


def test_aggregate_loss_matches_grpo_loss():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert aggregate_loss(per_token, mask, "grpo").item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate_loss(per_token, mask, "bnpo").item() == pytest.approx(10.0 / 4)


# --- never NaN ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("width", [0, 3])
def test_empty_rows_and_junk_padding_never_give_nan(loss_type, width):
    token_logps = torch.full((2, width), float("-inf")).requires_grad_()  # nothing is a real token
    mask = torch.zeros(2, width, dtype=torch.long)
    old = torch.full((2, width), float("nan"))
    ref = torch.full((2, width), float("inf"))
    loss, metrics = grpo_loss(
        token_logps,
        old,
        torch.tensor([1.0, -1.0]),
        mask,
        ref_token_logps=ref,
        beta=0.04,
        loss_type=loss_type,
    )
    assert loss.item() == 0.0
    assert all(math.isfinite(value) for value in metrics.values())
    assert torch.isfinite(grad_of(loss, token_logps)).all()


def test_junk_in_padding_does_not_change_the_result():
    # intended difference from TRL, which multiplies by the mask: 0 * inf would be NaN there
    token_logps = leaf([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    old, ref = token_logps.detach() - 0.1, token_logps.detach() + 0.2
    junk = torch.tensor([[0.0, 0.0, float("nan")], [0.0, float("-inf"), float("inf")]])
    clean_loss, clean_metrics = grpo_loss(
        token_logps, old, torch.tensor([1.0, -1.0]), mask, ref_token_logps=ref, beta=0.1
    )
    junk_loss, junk_metrics = grpo_loss(
        token_logps + junk,
        old + junk,
        torch.tensor([1.0, -1.0]),
        mask,
        ref_token_logps=ref - junk,
        beta=0.1,
    )
    assert junk_loss.item() == clean_loss.item() and junk_metrics == clean_metrics


# --- bad input ------------------------------------------------------------------------------------------


def test_bad_inputs_raise_value_errors():
    token_logps, mask, advantages = torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2)
    with pytest.raises(
        ValueError, match=r"old_token_logps must have token_logps' shape \(2, 3\), got \(2, 4\)"
    ):
        grpo_loss(token_logps, torch.zeros(2, 4), advantages, mask)
    with pytest.raises(ValueError, match="mask must have token_logps' shape"):
        grpo_loss(token_logps, None, advantages, torch.ones(3, 3))
    with pytest.raises(
        ValueError, match=r"advantages must be \[B\] with B = token_logps.size\(0\) = 2"
    ):
        grpo_loss(token_logps, None, torch.zeros(2, 1), mask)
    with pytest.raises(ValueError, match=r"token_logps must be \[B, T\]"):
        grpo_loss(torch.zeros(2), None, advantages, torch.ones(2))
    with pytest.raises(
        ValueError,
        match=r"loss_type must be one of \('grpo', 'bnpo', 'dr_grpo', 'dapo'\), got 'ppo'",
    ):
        grpo_loss(token_logps, None, advantages, mask, loss_type="ppo")
    with pytest.raises(ValueError, match="needs ref_token_logps"):
        grpo_loss(token_logps, None, advantages, mask, beta=0.04)
    with pytest.raises(ValueError, match="ref_token_logps must have token_logps' shape"):
        grpo_loss(token_logps, None, advantages, mask, beta=0.04, ref_token_logps=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="epsilon and epsilon_high must be >= 0"):
        grpo_loss(token_logps, None, advantages, mask, epsilon_high=-0.1)
    with pytest.raises(ValueError, match="max_completion_length must be a positive int"):
        grpo_loss(token_logps, None, advantages, mask, loss_type="dr_grpo", max_completion_length=0)
    with pytest.raises(ValueError, match="batch is empty"):
        grpo_loss(torch.zeros(0, 3), None, torch.zeros(0), torch.ones(0, 3))
    with pytest.raises(ValueError, match=r"advantages must be \[B\]"):
        policy_gradient_loss(token_logps, mask, torch.zeros(3))
    with pytest.raises(ValueError, match="ref_token_logps must have"):
        kl_k3(token_logps, torch.zeros(3, 3))


# --- defaults, band edges and single tokens -------------------------------------------------------

RATIOS = torch.tensor([[0.5, 0.875, 1.0, 1.125, 1.5]])


def logps_for(ratios: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(token_logps, old_token_logps)`` whose ratio is ``ratios``."""
    old = torch.full_like(ratios, -2.0)
    return old + ratios.log(), old


def test_the_default_clip_band_is_0_2_on_both_sides():
    logps, old = logps_for(torch.tensor([[0.5, 1.5], [0.5, 1.5]]))
    advantages, mask = torch.tensor([1.0, -1.0]), torch.ones(2, 2)
    explicit = clipped_surrogate(logps, old, advantages, epsilon=0.2, epsilon_high=0.2)
    torch.testing.assert_close(clipped_surrogate(logps, old, advantages), explicit)
    # A > 0 stops at 1.2 once rho > 1.2; A < 0 stops at 0.8 once rho < 0.8
    torch.testing.assert_close(explicit, torch.tensor([[-0.5, -1.2], [0.8, 1.5]]))
    loss, metrics = grpo_loss(logps, old, advantages, mask)
    same, same_metrics = grpo_loss(logps, old, advantages, mask, epsilon=0.2, epsilon_high=0.2,
                                   loss_type="grpo")
    assert loss.item() == same.item() and metrics == same_metrics
    assert clip_metrics((logps - old).exp(), advantages, mask) == same_metrics
    assert metrics["clip_ratio/region_mean"] == 0.5


def test_clipped_surrogate_uses_epsilon_high_above_and_epsilon_below():
    logps, old = logps_for(torch.tensor([[0.5, 1.5]]))
    up = clipped_surrogate(logps, old, torch.tensor([1.0]), epsilon=0.25, epsilon_high=0.375)
    down = clipped_surrogate(logps, old, torch.tensor([-1.0]), epsilon=0.25, epsilon_high=0.375)
    torch.testing.assert_close(up, torch.tensor([[-0.5, -1.375]]))
    torch.testing.assert_close(down, torch.tensor([[0.75, 1.5]]))
    with pytest.raises(ValueError, match=r"^old_token_logps must have token_logps' shape"):
        clipped_surrogate(logps, torch.zeros(1, 3), torch.tensor([1.0]))


def test_grpo_loss_reads_the_old_logprobs_and_both_band_edges():
    logps, old = logps_for(RATIOS)
    mask = torch.ones_like(RATIOS)
    for advantage, clipped in ((1.0, [0, 0, 0, 0, 1]), (-1.0, [1, 0, 0, 0, 0])):
        loss, metrics = grpo_loss(logps, old, torch.tensor([advantage]), mask,
                                  epsilon=0.25, epsilon_high=0.25)
        expected_low = sum(clipped) / 5 if advantage < 0 else 0.0
        expected_high = sum(clipped) / 5 if advantage > 0 else 0.0
        assert metrics["clip_ratio/low_mean"] == pytest.approx(expected_low)
        assert metrics["clip_ratio/high_mean"] == pytest.approx(expected_high)
        objective = torch.minimum(RATIOS * advantage, RATIOS.clamp(0.75, 1.25) * advantage)
        assert loss.item() == pytest.approx(-objective.mean().item(), rel=1e-6)
    wide, _ = grpo_loss(logps, old, torch.tensor([1.0]), mask, epsilon=0.25, epsilon_high=0.5)
    assert wide.item() == pytest.approx(-(0.5 + 0.875 + 1.0 + 1.125 + 1.5) / 5, rel=1e-6)


def test_clip_metrics_count_only_tokens_the_advantage_pushes_out_of_the_band():
    ratios, mask = torch.tensor([[0.5, 1.5], [0.5, 1.5], [0.5, 1.5]]), torch.ones(3, 2)
    metrics = clip_metrics(ratios, torch.tensor([0.0, 0.5, -0.5]), mask, epsilon=0.25)
    # A = 0 is never clipped; A = 0.5 only above the band, A = -0.5 only below it
    assert metrics == {"clip_ratio/low_mean": pytest.approx(1 / 6),
                       "clip_ratio/high_mean": pytest.approx(1 / 6),
                       "clip_ratio/region_mean": pytest.approx(2 / 6)}
    band_edges = clip_metrics(torch.tensor([[0.75, 1.25]]), torch.tensor([1.0]), torch.ones(1, 2),
                              epsilon=0.25)
    assert band_edges["clip_ratio/region_mean"] == 0.0
    one_token = clip_metrics(torch.tensor([[1.5, 1.0]]), torch.tensor([1.0]),
                             torch.tensor([[1, 0]]), epsilon=0.25)
    assert one_token["clip_ratio/high_mean"] == 1.0  # one token of one: the mean is 1


def test_a_zero_wide_band_is_allowed():
    logps, old = logps_for(torch.tensor([[0.5, 1.5]]))
    loss, metrics = grpo_loss(logps, old, torch.tensor([1.0]), torch.ones(1, 2), epsilon=0.0,
                              epsilon_high=0.0)
    assert loss.item() == pytest.approx(-(0.5 + 1.0) / 2)
    assert metrics["clip_ratio/high_mean"] == 0.5


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_a_single_token_batch_is_that_tokens_loss(loss_type):
    logps, old = logps_for(torch.tensor([[1.5, 1.0, 1.0]]))
    mask = torch.tensor([[1, 0, 0]])
    loss, _ = grpo_loss(logps, old, torch.tensor([-2.0]), mask, loss_type=loss_type,
                        max_completion_length=1, num_items_in_batch=1)
    assert loss.item() == pytest.approx(3.0)  # -min(1.5 * -2, 1.2 * -2)


def test_bnpo_ignores_num_items_in_batch_and_dapo_divides_by_it():
    logps, old = logps_for(torch.tensor([[1.0, 1.0], [1.0, 1.0]]))
    mask, advantages = torch.tensor([[1, 1], [1, 0]]), torch.tensor([1.0, 1.0])
    bnpo, _ = grpo_loss(logps, old, advantages, mask, loss_type="bnpo", num_items_in_batch=30)
    dapo, _ = grpo_loss(logps, old, advantages, mask, loss_type="dapo", num_items_in_batch=30)
    assert bnpo.item() == pytest.approx(-1.0)  # -3 / the batch's own 3 tokens
    assert dapo.item() == pytest.approx(-3 / 30)


def test_dr_grpo_divides_by_rows_times_max_completion_length():
    logps, old = logps_for(torch.ones(2, 3))
    mask, advantages = torch.tensor([[1, 1, 1], [1, 0, 0]]), torch.tensor([1.0, 1.0])
    loss, _ = grpo_loss(logps, old, advantages, mask, loss_type="dr_grpo",
                        max_completion_length=5)
    assert loss.item() == pytest.approx(-4 / (2 * 5))
    one, _ = grpo_loss(logps, old, advantages, mask, loss_type="dr_grpo",
                       max_completion_length=1)
    assert one.item() == pytest.approx(-4 / 2)


def test_grpo_loss_counts_clipped_tokens_with_its_own_asymmetric_band():
    logps, old = logps_for(RATIOS)
    mask = torch.ones_like(RATIOS)
    _, up = grpo_loss(logps, old, torch.tensor([1.0]), mask, epsilon=0.1, epsilon_high=0.3)
    _, down = grpo_loss(logps, old, torch.tensor([-1.0]), mask, epsilon=0.1, epsilon_high=0.3)
    assert up["clip_ratio/high_mean"] == pytest.approx(1 / 5)  # only 1.5 > 1.3
    assert down["clip_ratio/low_mean"] == pytest.approx(2 / 5)  # 0.5 and 0.875 < 0.9


def test_band_edges_are_inside_on_both_sides():
    edges, mask = torch.tensor([[0.75, 1.25]]), torch.ones(1, 2)
    for advantage in (1.0, -1.0):
        metrics = clip_metrics(edges, torch.tensor([advantage]), mask, epsilon=0.25)
        assert metrics["clip_ratio/region_mean"] == 0.0


def test_aggregate_loss_defaults_to_grpo_and_dr_grpo_to_the_width():
    per_token, mask = torch.tensor([[1.0, 2.0], [3.0, 0.0]]), torch.tensor([[1, 1], [1, 0]])
    assert aggregate_loss(per_token, mask).item() == aggregate_loss(per_token, mask, "grpo").item()
    one_wide = torch.tensor([[2.0], [4.0]])
    assert aggregate_loss(one_wide, torch.ones(2, 1), "dr_grpo").item() == pytest.approx(3.0)


# ------------------------------------------------------------- token_weights ("Which loss?")

def _ragged_mask() -> torch.Tensor:
    lengths = torch.tensor([5, 1, 3, 8])
    return (torch.arange(8)[None, :] < lengths[:, None]).long()


@pytest.mark.parametrize("loss_type,kwargs", [
    ("grpo", {}), ("bnpo", {}), ("bnpo", {"num_items_in_batch": 40}), ("dr_grpo", {}),
    ("dr_grpo", {"max_completion_length": 12}), ("dapo", {}), ("dapo", {"num_items_in_batch": 40}),
])
def test_token_weights_are_the_gradient_of_aggregate_loss(loss_type, kwargs):
    from grpo_core.loss import token_weights

    mask = _ragged_mask()
    per_token_loss = torch.randn(4, 8, generator=torch.Generator().manual_seed(1),
                                 requires_grad=True)
    aggregate_loss(per_token_loss, mask, loss_type, **kwargs).backward()
    weights = token_weights(mask, loss_type, **kwargs)
    assert torch.allclose(per_token_loss.grad, weights)
    assert torch.allclose((weights * per_token_loss).sum(),
                          aggregate_loss(per_token_loss, mask, loss_type, **kwargs))


def test_the_lectures_sum_weighs_a_completion_by_its_length_and_grpo_does_not():
    from grpo_core.loss import token_weights

    mask = _ragged_mask()
    token_logps = -torch.rand(4, 8, generator=torch.Generator().manual_seed(2))
    token_logps.requires_grad_(True)
    advantages = torch.tensor([1.0, -0.5, 2.0, -1.0])
    policy_gradient_loss(token_logps, mask, advantages).backward()
    # d loss / d log pi(o_it) = -A_i w_it under the lecture's sum
    assert torch.allclose(token_logps.grad, -advantages[:, None] * token_weights(mask, "sum"))
    per_completion = {kind: token_weights(mask, kind).sum(dim=1) for kind in ("sum", "grpo")}
    assert torch.allclose(per_completion["sum"], mask.sum(1) / 4.0)  # |o_i| / B
    assert torch.allclose(per_completion["grpo"], torch.full((4,), 0.25))  # 1 / B each
    # per token, the sum pushes a token of the 8-token completion as hard as one of the
    # 1-token completion; grpo pushes the short one's token 8 times harder
    grpo = token_weights(mask, "grpo")
    assert grpo[1, 0] / grpo[3, 0] == pytest.approx(8.0)


def test_token_weights_default_to_grpo_and_bnpo_counts_the_batchs_own_tokens():
    from grpo_core.loss import token_weights

    mask = _ragged_mask()  # 17 completion tokens
    assert torch.equal(token_weights(mask), token_weights(mask, "grpo"))
    # bnpo divides by this batch's tokens even when a count over several batches is given
    bnpo = token_weights(mask, "bnpo", num_items_in_batch=40)
    assert torch.allclose(bnpo, mask / 17.0)
    assert torch.allclose(token_weights(mask, "dapo", num_items_in_batch=40), mask / 40.0)


def test_token_weights_rejects_an_unknown_loss_type():
    from grpo_core.loss import token_weights

    with pytest.raises(ValueError, match="sum"):
        token_weights(_ragged_mask(), "mean")


@pytest.mark.parametrize("loss_type", ["sum", "grpo", "bnpo", "dr_grpo", "dapo"])
def test_token_weights_of_one_token_and_of_empty_rows(loss_type):
    from grpo_core.loss import token_weights

    one_token = torch.tensor([[1, 0]])
    # a single completion of a single token: the whole loss is that token's (dr_grpo: / L = 2)
    expected = 0.5 if loss_type == "dr_grpo" else 1.0
    assert token_weights(one_token, loss_type)[0, 0].item() == pytest.approx(expected)
    empty = torch.zeros(2, 3, dtype=torch.long)
    weights = token_weights(empty, loss_type)
    assert torch.equal(weights, torch.zeros(2, 3))  # never NaN, nothing to push
