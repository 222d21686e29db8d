"""Calling reward functions (grpo_core.scoring): a bad reward raises RewardError naming the
function; a reward gets the prompt rows' columns and may return numpy numbers or tensors."""

from __future__ import annotations

import pytest
import torch

from grpo_core.scoring import RewardError, call_reward


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
