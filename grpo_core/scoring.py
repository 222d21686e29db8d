"""Calling reward functions: one place for the loop, the held-out evaluator and the signal check.

Reward functions have TRL's signature, ``fn(completions, **columns) -> list[float]``
(``grpo_core.rewards``). Everything that scores completions goes through this module, so a
reward that raises, returns NaN or returns the wrong number of values fails the same way,
with the same message naming it, in training, in a held-out evaluation and before training.

Imports torch and nothing of the model or the loop.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from grpo_core.rewards import RewardFn


class RewardError(ValueError):
    """A reward function failed or returned something unusable; the message names it."""


def reward_name(fn: Callable[..., Any]) -> str:
    """The name TRL logs a reward function under (``rewards/<name>/mean``)."""
    inner = getattr(fn, "func", fn)  # functools.partial
    return getattr(inner, "__name__", type(inner).__name__)


def reward_list(
    reward_funcs: RewardFn | Sequence[RewardFn], reward_weights: Sequence[float] | None = None
) -> tuple[list[RewardFn], list[float]]:
    """One function or several, and their weights (default 1.0 each), as two lists.

    Raises:
        ValueError: no function, or not one weight per function.
    """
    funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    if not funcs:
        raise ValueError("at least one reward function is needed")
    weights = [1.0] * len(funcs) if reward_weights is None else [float(w) for w in reward_weights]
    if len(weights) != len(funcs):
        raise ValueError(f"{len(weights)} reward weights for {len(funcs)} reward functions")
    return funcs, weights


def group_columns(rows: Sequence[dict[str, Any]], group_size: int) -> dict[str, list[Any]]:
    """The rows' columns as reward-function keyword arguments, each value repeated once per
    completion of its group (``[r0 x k, r1 x k, ...]``); ``prompt`` becomes TRL's ``prompts``."""
    columns = {key: [row[key] for row in rows for _ in range(group_size)] for key in rows[0]}
    columns["prompts"] = columns.pop("prompt")
    return columns


def call_reward(fn: RewardFn, completions: list[str], columns: dict[str, list[Any]]) -> Tensor:
    """Call one reward function with TRL's signature and check what it returns.

    ``fn(completions=[...], prompts=[...], **other_columns)`` must return one finite number
    per completion.

    Returns:
        ``[B]`` float32.

    Raises:
        RewardError: it raised, returned the wrong number of values, or a value that is not a
            finite number (NaN, None, a string...). The message names the function.
    """
    name = reward_name(fn)
    try:
        values = fn(completions=completions, **columns)
    except Exception as error:
        raise RewardError(f"reward function {name!r} raised {type(error).__name__}: {error}") from error
    try:
        values = list(values)
    except TypeError:
        raise RewardError(
            f"reward function {name!r} must return a list of numbers, got {type(values).__name__}"
        ) from None
    if len(values) != len(completions):
        raise RewardError(
            f"reward function {name!r} returned {len(values)} values for {len(completions)} "
            "completions: it must return exactly one number per completion"
        )
    floats = []
    for index, value in enumerate(values):
        if isinstance(value, Tensor) and value.numel() == 1:
            value = value.item()
        if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise RewardError(
                f"reward function {name!r} returned {value!r} for completion {index}: every "
                "reward must be a finite number (no NaN, inf, None or strings)"
            )
        floats.append(float(value))
    return torch.tensor(floats, dtype=torch.float32)


def compute_rewards(
    reward_funcs: Sequence[RewardFn],
    weights: Sequence[float],
    completions: list[str],
    columns: dict[str, list[Any]],
) -> tuple[Tensor, dict[str, Tensor]]:
    """Weighted sum of several reward functions, as TRL's ``reward_weights``.

    Returns:
        ``(total [B], {name: raw [B]})``.
    """
    per_fn = {reward_name(fn): call_reward(fn, completions, columns) for fn in reward_funcs}
    return weighted_total(per_fn.values(), weights), per_fn


def weighted_total(per_fn: Sequence[Tensor] | Any, weights: Sequence[float]) -> Tensor:
    """``sum_j w_j * r_j`` over reward functions; every ``r_j`` has the same shape."""
    return sum(w * r for w, r in zip(weights, per_fn, strict=True))
