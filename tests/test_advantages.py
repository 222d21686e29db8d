"""grpo_core.advantages: the lecture's groups by hand, invariances by hypothesis, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.advantages import group_advantages

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True)


# --- the lecture's three groups ("The reward must create variation") -------------------------


def test_usable_group_0_1_1_2_by_hand():
    # mean 1, Bessel std sqrt(2/3) = 0.8165; A = (r - 1) / (0.8165 + 1e-4)
    edge = 1 / (math.sqrt(2 / 3) + 1e-4)
    expected = torch.tensor([-edge, 0.0, 0.0, edge])
    assert edge == pytest.approx(1.224595, abs=1e-6)
    torch.testing.assert_close(group_advantages([0.0, 1.0, 1.0, 2.0], 4), expected)


@pytest.mark.parametrize("rewards", [[0.0] * 4, [2.0] * 4], ids=["too_hard", "too_easy"])
def test_groups_without_variation_give_exactly_zero(rewards):
    for scale in ("group", "batch", "none"):
        advantages = group_advantages(rewards, 4, scale=scale)
        assert torch.equal(advantages, torch.zeros(4)), scale


def test_all_equal_group_is_zero_even_when_the_mean_rounds():
    # intended difference from TRL: 0.1 * 7 / 7 is not 0.1 in float32, so TRL's (r - mean)
    # / (0 + 1e-4) can leak ~1e-8 / 1e-4 here; grpo_core forces such a group to exactly 0
    rewards = torch.full((7,), 0.1)
    assert torch.equal(group_advantages(rewards, 7), torch.zeros(7))


def test_two_sample_group_is_plus_minus_one_over_sqrt2():
    # mean 2, Bessel std sqrt(2): any two different rewards give +-1/sqrt(2), whatever the gap
    edge = 1 / (math.sqrt(2) + 1e-4)  # [1, 3]: (3 - 2) / (sqrt(2) + 1e-4)
    for gap in (1.0, 2.0, 10.0):
        rewards = torch.tensor([2.0 - gap / 2, 2.0 + gap / 2])
        expected = torch.tensor([-1.0, 1.0]) * (gap / 2) / (gap / math.sqrt(2) + 1e-4)
        torch.testing.assert_close(group_advantages(rewards, 2), expected)
    torch.testing.assert_close(group_advantages([1.0, 3.0], 2), torch.tensor([-edge, edge]))


def test_batch_and_none_scales_by_hand():
    rewards = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    centered = torch.tensor([-1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    batch_std = math.sqrt(4.0 / 7.0)  # whole batch: mean 1.5, squared deviations sum to 4, N-1 = 7
    torch.testing.assert_close(
        group_advantages(rewards, 4, scale="batch"), centered / (batch_std + 1e-4)
    )
    torch.testing.assert_close(group_advantages(rewards, 4, scale="none"), centered)


def test_groups_are_independent_and_dtype_is_kept():
    rewards = torch.tensor([0.0, 1.0, 1.0, 2.0, 5.0, 5.0, 5.0, 9.0], dtype=torch.float64)
    advantages = group_advantages(rewards, 4)
    assert advantages.dtype == torch.float64
    torch.testing.assert_close(advantages[:4], group_advantages(rewards[:4], 4))
    torch.testing.assert_close(advantages[4:], group_advantages(rewards[4:], 4))


def test_integer_rewards_become_float32():
    assert group_advantages(torch.tensor([0, 1, 1, 2]), 4).dtype == torch.float32


# --- properties -----------------------------------------------------------------------------

REWARD_VALUES = st.floats(-10, 10, allow_nan=False)


@st.composite
def grouped_rewards(draw):
    """(rewards [B] float64, group_size): 1-4 groups of 2-6 rewards."""
    size, groups = draw(st.integers(2, 6)), draw(st.integers(1, 4))
    rewards = draw(st.lists(REWARD_VALUES, min_size=size * groups, max_size=size * groups))
    return torch.tensor(rewards, dtype=torch.float64), size


@PROPERTY
@given(grouped_rewards(), st.sampled_from(["group", "batch", "none"]))
def test_advantages_have_zero_mean_per_group(rewards_and_size, scale):
    rewards, size = rewards_and_size
    advantages = group_advantages(rewards, size, scale=scale)
    torch.testing.assert_close(
        advantages.view(-1, size).mean(dim=1),
        torch.zeros(len(rewards) // size, dtype=torch.float64),
        atol=1e-9,
        rtol=0,
    )


@PROPERTY
@given(
    grouped_rewards(),
    st.floats(-100, 100, allow_nan=False),
    st.sampled_from(["group", "batch", "none"]),
)
def test_adding_a_constant_to_a_group_changes_nothing(rewards_and_size, shift, scale):
    rewards, size = rewards_and_size
    shifted = rewards.clone()
    shifted[:size] += shift  # only the first group moves
    if scale == "batch":  # the batch std sees the shift unless every group moves together
        shifted = rewards + shift
    torch.testing.assert_close(
        group_advantages(shifted, size, scale=scale),
        group_advantages(rewards, size, scale=scale),
        atol=1e-6,
        rtol=0,
    )


@PROPERTY
@given(grouped_rewards(), st.floats(0.01, 100))
def test_multiplying_by_a_positive_constant_changes_nothing_up_to_eps(rewards_and_size, factor):
    rewards, size = rewards_and_size
    # (k r - k m) / (k s + k eps) = (r - m) / (s + eps): exact once eps scales with the rewards
    scaled = group_advantages(rewards * factor, size, eps=1e-4 * factor)
    torch.testing.assert_close(scaled, group_advantages(rewards, size), atol=1e-6, rtol=1e-6)


def test_multiplying_with_the_default_eps_moves_advantages_by_about_eps_over_std():
    rewards = torch.tensor([0.0, 1.0, 1.0, 2.0], dtype=torch.float64)
    plain, scaled = group_advantages(rewards, 4), group_advantages(rewards * 10, 4)
    assert (scaled - plain).abs().max() < 2e-4  # |A| * eps / std, with std = 0.82


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("group_size", [1, 0, -2, 2.0, True, None])
def test_group_size_must_be_an_int_of_at_least_2(group_size):
    with pytest.raises(ValueError, match="group_size must be an int >= 2"):
        group_advantages([0.0, 1.0, 1.0, 2.0], group_size)


def test_batch_must_be_a_multiple_of_group_size():
    with pytest.raises(
        ValueError, match=r"number of rewards \(5\) must be a positive multiple of group_size \(4\)"
    ):
        group_advantages([0.0, 1.0, 1.0, 2.0, 3.0], 4)
    with pytest.raises(ValueError, match="positive multiple"):
        group_advantages(torch.zeros(0), 2)


def test_unknown_scale():
    with pytest.raises(
        ValueError, match=r"scale must be one of \('group', 'batch', 'none'\), got 'std'"
    ):
        group_advantages([0.0, 1.0], 2, scale="std")


def test_rewards_must_be_1d_and_finite():
    # intended difference from TRL, which treats NaN ("None") rewards as unscorable and gives A = 0
    with pytest.raises(ValueError, match=r"1-D tensor \[B\]"):
        group_advantages(torch.zeros(2, 2), 2)
    with pytest.raises(ValueError, match="finite"):
        group_advantages([0.0, float("nan")], 2)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_an_all_equal_group_is_exactly_zero_beside_a_group_that_varies(scale):
    # seven 0.7s: their float mean rounds to 0.7 + 6e-8, which / (0 + eps) would leak ~6e-4
    rewards = torch.tensor([0.7] * 7 + [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    advantages = group_advantages(rewards, 7, scale=scale)
    assert advantages[:7].tolist() == [0.0] * 7
    assert (advantages[7:] != 0).sum() == 6  # the middle of 0..6 is its mean: exactly 0
