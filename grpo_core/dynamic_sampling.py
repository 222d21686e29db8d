"""Dynamic sampling: sample again for the groups that gave no signal (notebook 08, section 7).

A group whose k completions all got the same reward has advantage 0 on every row (eq. (8.1)):
it costs its sampling and its forward and backward passes, and teaches nothing. DAPO (Yu et
al. 2025, "DAPO: an open-source LLM reinforcement learning system at scale", section 3.2)
keeps sampling until the batch is full of groups that do carry signal. With
``TrainConfig.dynamic_sampling`` the loop does that for the prompts of its step:

1. sample a group for every prompt of the step (round 0: exactly what the loop samples
   without dynamic sampling, with the same seed);
2. the groups with zero spread (``grpo_core.advantages.flat_groups``) are sampled again, each
   round with a seed of its own (:func:`refill_seed`), as many as the cap on extra
   generations still allows (:func:`groups_to_refill`); a refill that has signal replaces
   its flat group, one that is flat again is dropped;
3. until every group has signal or the cap is reached. A group with signal is never
   sampled again, so the batch keeps its shape (``prompts_per_step`` groups of k).

A prompt whose pass rate is p gives a group of k no signal with probability
``p^k + (1 - p)^k`` (eq. (8.2)), so it takes on average ``1 / (1 - p^k - (1 - p)^k)`` groups
to draw one with signal (eq. (8.6), :func:`expected_groups_until_signal`).

What this leaves out: DAPO over-samples *new prompts* and keeps the first groups with
signal; here the step's own prompts are sampled again, so a prompt the model never (or
always) solves stays flat whatever the cap, and the cap is what stops the spending. The
comparison that matters is at equal generations sampled, not at equal steps (notebook 08).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from grpo_core.advantages import flat_groups
from grpo_core.rollout import Rollout, take_groups

# what a round samples and scores: (the batch's group indices to sample, round) ->
# (rollout of those groups in that order, [len * k] total reward, {name: [len * k]} per function)
Sampler = Callable[[list[int], int], tuple[Rollout, Tensor, dict[str, Tensor]]]


def expected_groups_until_signal(p: float, k: int) -> float:
    """The expected number of groups of ``k`` drawn until one has signal, when each sample
    passes with probability ``p`` (eq. (8.6)): ``1 / (1 - p^k - (1 - p)^k)``, a geometric
    count. ``inf`` when ``p`` is 0 or 1 (no group ever has signal)."""
    if k < 2:
        raise ValueError(f"a group needs k >= 2 to have a spread, got {k}")
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    signal = 1 - p**k - (1 - p) ** k
    return math.inf if signal <= 0 else 1 / signal


def refill_seed(seed: int, step: int, round_: int) -> int:
    """The sampling seed of refill round ``round_`` (>= 1) of ``step``: apart from every
    step's first round (``seed * 1_000_003 + step``), and the same on every run."""
    if round_ < 1:
        raise ValueError(f"refill rounds count from 1, got {round_}")
    return (seed * 1_000_003 + step) * 1_009 + round_


def groups_to_refill(flat: Tensor, remaining: int, group_size: int) -> list[int]:
    """The groups to sample again this round: the flat ones (``flat``: ``[G]`` bool), in
    order, as many as ``remaining`` extra generations pay for (``remaining // group_size``)."""
    if remaining < 0 or group_size < 1:
        raise ValueError(f"remaining must be >= 0 and group_size >= 1, got {remaining}, "
                         f"{group_size}")
    return [int(i) for i in flat.nonzero().flatten()][: remaining // group_size]


@dataclass(frozen=True)
class RefillCounts:
    """What one step's dynamic sampling did.

    Attributes:
        generations: completions sampled, refills included.
        refill_groups: groups sampled again (each ``group_size`` completions).
        groups_refilled: flat groups of the batch that a refill with signal replaced.
        zero_std_before: the fraction of flat groups in the first round.
        zero_std_after: the fraction of flat groups in the batch trained on.
    """

    generations: int
    refill_groups: int
    groups_refilled: int
    zero_std_before: float
    zero_std_after: float

    def metrics(self) -> dict[str, float]:
        """The step's ``sampling/...`` metrics."""
        return {"sampling/generations": float(self.generations),
                "sampling/refill_groups": float(self.refill_groups),
                "sampling/groups_refilled": float(self.groups_refilled),
                "sampling/zero_std_before": self.zero_std_before,
                "sampling/zero_std_after": self.zero_std_after}


def sample_with_refills(sample: Sampler, groups: int, group_size: int,
                        max_extra_generations: int, pad_token_id: int
                        ) -> tuple[Rollout, Tensor, dict[str, Tensor], RefillCounts]:
    """Sample ``groups`` groups, then sample the flat ones again (module docstring) until
    every group has signal or the extra generations would pass ``max_extra_generations``.

    Returns:
        ``(rollout, total, per_fn, counts)``: the batch trained on (``groups * group_size``
        rows, group ``g`` the first of its samples with signal, else its round-0 group), its
        total reward ``[B]`` and each function's ``{name: [B]}``, and :class:`RefillCounts`.
    """
    rollout, total, per_fn = sample(list(range(groups)), 0)
    parts = [(rollout, g) for g in range(groups)]
    totals = list(total.view(groups, group_size))
    per_fns = {name: list(values.view(groups, group_size)) for name, values in per_fn.items()}
    flat = flat_groups(total, group_size).cpu()
    before = flat.float().mean().item()
    extra = refilled = refill_groups = 0
    round_ = 0
    while flat.any():
        chosen = groups_to_refill(flat, max_extra_generations - extra, group_size)
        if not chosen:
            break
        round_ += 1
        again, again_total, again_fns = sample(chosen, round_)
        extra += len(chosen) * group_size
        refill_groups += len(chosen)
        again_flat = flat_groups(again_total, group_size).cpu()
        for place, g in enumerate(chosen):
            if again_flat[place]:
                continue  # flat again: the round-0 group stays, and is tried again
            parts[g] = (again, place)
            totals[g] = again_total.view(-1, group_size)[place]
            for name in per_fns:
                per_fns[name][g] = again_fns[name].view(-1, group_size)[place]
            flat[g] = False
            refilled += 1
    counts = RefillCounts(generations=groups * group_size + extra, refill_groups=refill_groups,
                          groups_refilled=refilled, zero_std_before=before,
                          zero_std_after=flat.float().mean().item())
    batch = take_groups(parts, pad_token_id) if round_ else rollout
    return (batch, torch.cat(totals),
            {name: torch.cat(values) for name, values in per_fns.items()}, counts)
