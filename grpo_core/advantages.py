"""Group-relative advantages: the group is the baseline.

Lecture, "The group is the baseline" and the first box of "The whole update is a few lines":

    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)

applied to each group of completions sampled from the same prompt (notebook 03, eq. (3.1)).
Imports only torch: no model, no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch
from torch import Tensor

SCALES = ("group", "batch", "none")


def group_advantages(
    rewards: Tensor | Sequence[float],
    group_size: int,
    scale: str = "group",
    eps: float = 1e-4,
) -> Tensor:
    """Turn rewards into advantages, one group of ``group_size`` completions at a time.

    Implements notebook 03, eq. (3.1), ``A_i = (r_i - mean_g(r)) / (std_g(r) + eps)``, and the
    two variants TRL's ``GRPOConfig.scale_rewards`` offers:

    - ``"group"``: divide by the group's std, Bessel-corrected (N-1) as ``torch.std`` and TRL;
    - ``"batch"``: subtract the group mean, divide by the std of the whole batch (N-1);
    - ``"none"``: Dr. GRPO, subtract the group mean and do not divide.

    Args:
        rewards: ``[B]`` float, laid out group after group (``B = num_prompts * group_size``).
        group_size: completions per prompt, at least 2.
        scale: ``"group"``, ``"batch"`` or ``"none"``.
        eps: added to the std (not a clamp), 1e-4 as in the lecture and TRL.

    Returns:
        ``[B]`` float advantages. A group whose rewards are all equal gets exactly 0, never NaN.

    Intended difference from TRL: for an all-equal group TRL returns ``(r - mean)/(0 + eps)``,
    which is 0 whenever the float mean is exact and a tiny number (~1e-8/1e-4) when it rounds;
    here such a group is set to exactly 0. TRL also accepts NaN ("unscorable") rewards; here
    they raise, because every course reward function returns a float.
    """
    rewards = as_reward_tensor(rewards)
    group_size = check_grouping(rewards, group_size, scale)
    grouped = rewards.view(-1, group_size)
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    # rounding in the mean must not leak a signal out of a group with no variation
    centered = centered.masked_fill(_flat(grouped).unsqueeze(1), 0.0)
    if scale == "group":
        centered = centered / (grouped.std(dim=1, keepdim=True) + eps)
    elif scale == "batch":
        centered = centered / (rewards.std() + eps)
    return centered.reshape(-1)


def flat_groups(rewards: Tensor | Sequence[float], group_size: int) -> Tensor:
    """Which groups have no variation: every reward in the group is the same number.

    The one definition of a group with no signal, used for the advantages (such a group gets
    exactly 0), the loop's ``frac_reward_zero_std``, the signal check and the group widget.
    TRL tests ``std`` against 0 with ``atol=1e-8``; the two agree unless two rewards of a group
    differ by less than about 1e-8.

    Args:
        rewards: ``[B]``, group after group.
        group_size: completions per prompt (k), at least 2.

    Returns:
        ``[B // group_size]`` bool.
    """
    rewards = as_reward_tensor(rewards)
    return _flat(rewards.view(-1, check_grouping(rewards, group_size, "group")))


def _flat(grouped: Tensor) -> Tensor:
    """``[G, k]`` -> ``[G]`` bool: every reward of the row equals its first."""
    return (grouped == grouped[:, :1]).all(dim=1)


def as_reward_tensor(rewards: Tensor | Sequence[float]) -> Tensor:
    """``rewards`` as a 1-D floating tensor (integer or list input becomes float32)."""
    tensor = torch.as_tensor(rewards)
    if not tensor.is_floating_point():
        tensor = tensor.to(torch.float32)
    if tensor.dim() != 1:
        raise ValueError(f"rewards must be a 1-D tensor [B], got shape {tuple(tensor.shape)}")
    if not torch.isfinite(tensor).all():
        raise ValueError("rewards must all be finite numbers (no NaN or inf)")
    return tensor


def check_grouping(rewards: Tensor, group_size: int, scale: str) -> int:
    """Check that ``rewards`` ``[B]`` holds whole groups of ``group_size`` (laid out group after
    group) and that ``scale`` is one of :data:`SCALES`; return ``group_size`` as a plain int.

    Raises:
        ValueError: a group size below 2, a batch that is not whole groups, an unknown scale.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    try:
        size = operator.index(group_size)
    except TypeError:
        size = None
    if size is None or isinstance(group_size, bool) or size < 2:
        raise ValueError(
            f"group_size must be an int >= 2 (a group needs a sibling to compare with), got {group_size!r}"
        )
    if rewards.numel() == 0 or rewards.numel() % size != 0:
        raise ValueError(
            f"the number of rewards ({rewards.numel()}) must be a positive multiple of "
            f"group_size ({size}): rewards are laid out group after group"
        )
    return size
