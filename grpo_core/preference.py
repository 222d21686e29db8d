"""Fixed preference pairs and the DPO loss: the offline alternative to GRPO's fresh samples.

Lecture, "Fixed preferences or fresh samples" (notebook 06). DPO (Rafailov et al., 2023) trains
on pairs ``(x, y_w, y_l)`` collected once: ``y_w`` was preferred to ``y_l``. Its loss

    -log sigmoid(beta * [(log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) - log pi_ref(y_l|x))])

(notebook 06, eq. (6.1)) -> ``dpo_loss``; ``preference_pairs`` turns a scored group of samples
into such pairs (best against worst), so both methods can share the same prompts and reward.
Imports only torch: pure functions, no model, no I/O.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_core.advantages import as_reward_tensor, check_grouping


def dpo_loss(
    chosen_logps: Tensor,
    rejected_logps: Tensor,
    ref_chosen_logps: Tensor,
    ref_rejected_logps: Tensor,
    beta: float = 0.1,
) -> tuple[Tensor, dict[str, float]]:
    """The DPO loss of a batch of pairs, averaged over pairs (notebook 06, eq. (6.1)).

    TRL's ``DPOTrainer`` default (``loss_type="sigmoid"``). The reference log-probs are
    constants: for fixed pairs they can be computed once, before training, and the reference
    model freed.

    Args:
        chosen_logps: ``[N]`` float, ``log pi(y_w | x)`` (sum over the completion's tokens,
            ``sequence_logprob``), with gradient.
        rejected_logps: ``[N]`` float, ``log pi(y_l | x)``, with gradient.
        ref_chosen_logps, ref_rejected_logps: ``[N]`` float, the same under the frozen
            reference (no gradient needed).
        beta: the weight of the KL penalty DPO is derived from (> 0). The larger beta, the
            *closer* the policy stays to the reference: the loss saturates once
            ``beta * margin`` is a few units, so a large beta stops pushing after a small
            move (the optimum it targets is ``pi_ref * exp(reward / beta)``).

    Returns:
        ``(loss, metrics)``: a scalar, and TRL's names ``rewards/chosen``, ``rewards/rejected``
        (the implicit rewards ``beta * (log pi - log pi_ref)``, averaged), ``rewards/margins``
        and ``rewards/accuracies`` (the fraction of pairs whose chosen reward is higher).
    """
    inputs = (chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps)
    if chosen_logps.dim() != 1 or chosen_logps.numel() == 0 or any(
        t.shape != chosen_logps.shape for t in inputs
    ):
        raise ValueError(
            "the four log-prob tensors must all be [N] with N >= 1 pairs, got shapes "
            f"{[tuple(t.shape) for t in inputs]}"
        )
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    chosen_rewards = beta * (chosen_logps - ref_chosen_logps)
    rejected_rewards = beta * (rejected_logps - ref_rejected_logps)
    margins = chosen_rewards - rejected_rewards
    loss = -F.logsigmoid(margins).mean()
    with torch.no_grad():
        metrics = {
            "rewards/chosen": chosen_rewards.mean().item(),
            "rewards/rejected": rejected_rewards.mean().item(),
            "rewards/margins": margins.mean().item(),
            "rewards/accuracies": (margins > 0).float().mean().item(),
        }
    return loss, metrics


def preference_pairs(rewards: Tensor | list[float], group_size: int) -> tuple[Tensor, Tensor]:
    """Best against worst in each group: one ``(chosen, rejected)`` pair per group with variation.

    Rewards are laid out group after group (``[p0 x k, p1 x k, ...]``, as ``sample_group``
    returns them). A group whose rewards are all equal states no preference and gives no pair.
    Ties for best or worst go to the first such completion.

    Args:
        rewards: ``[B]`` float, ``B = num_prompts * group_size``.
        group_size: completions per prompt, at least 2.

    Returns:
        ``(chosen, rejected)``: ``[N]`` int64 row indices into the batch each, ``N`` <= the
        number of groups.
    """
    rewards = as_reward_tensor(rewards)
    size = check_grouping(rewards, group_size, "group")
    grouped = rewards.view(-1, size)
    offsets = torch.arange(grouped.size(0)) * size
    varied = grouped.max(dim=1).values > grouped.min(dim=1).values
    chosen = grouped.argmax(dim=1) + offsets
    rejected = grouped.argmin(dim=1) + offsets
    return chosen[varied], rejected[varied]
