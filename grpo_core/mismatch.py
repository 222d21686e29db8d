"""Notebook 13: how far a precision plan's sampling copy is from the learner, token by token.

A plan (``grpo_core.precision``) samples rollouts from a copy of the policy (a packed bfloat16
or float32 copy on a CPU) and computes the loss with the float32 master weights under its
autocast. :func:`measure_mismatch` does what one training step does up to the loss, and keeps
what the loop only summarises: every completion token's log-probability under the copy that
drew it and under the learner, for the histograms and tables of notebook 13, section 2.

What this leaves out, as the loop does (``loop.sampler_logps``): the copy's log-probabilities
come from one forward pass over the finished completion, not from the decoding steps that
drew the tokens (same weights and dtype, another order of sums).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from grpo_core.logprobs import token_logprobs
from grpo_core.loop import make_sampler
from grpo_core.precision import Precision
from grpo_core.rollout import chat_prompt, sample_group
from grpo_core.sampling_correction import log_ratios, mismatch_summary


@dataclass
class Mismatch:
    """One plan's sampled completions, scored by the copy that drew them and by the learner.

    Attributes:
        plan: the plan's one-line description (``Precision.describe``).
        learner, sampler: ``[B, C]`` float32 log-probs of the sampled tokens.
        mask: ``[B, C]`` the completion mask.
    """

    plan: str
    learner: Tensor
    sampler: Tensor
    mask: Tensor

    def token_log_ratios(self) -> Tensor:
        """``[N]`` ``log pi_learner - log pi_sampler`` of every completion token (eq. 13.1)."""
        return log_ratios(self.learner, self.sampler, self.mask)[self.mask.bool()]

    def sequence_log_ratios(self) -> Tensor:
        """``[B]`` each completion's summed log ratio: the log of its sequence weight."""
        return log_ratios(self.learner, self.sampler, self.mask).sum(dim=-1)

    def summary(self, threshold: float = 2.0) -> dict[str, float]:
        """``sampling_correction.mismatch_summary`` of these completions."""
        return mismatch_summary(self.learner, self.sampler, self.mask, threshold)


def plan_to_measure(plan: Precision, device: str) -> Precision | None:
    """The plan whose sampling copy :func:`measure_mismatch` compares with the learner.

    A CPU plan with a copy is measured as it is; a CPU plan without one (float16) samples from
    the policy itself and gives None. A GPU plan always samples from the policy, so there the
    copy measured is one in the plan's autocast dtype (float32 without autocast), unpacked:
    what a separate sampling engine holding the same weights in that dtype would draw from.
    """
    if plan.sampling_dtype is not None:
        return plan
    if device == "cpu":
        return None
    return replace(plan, sampling_dtype=plan.autocast or "float32", sampling_packed=False)


def _autocast(model: Any, dtype: str | None):
    if dtype is None:
        return nullcontext()
    return torch.autocast(next(model.parameters()).device.type, dtype=getattr(torch, dtype))


@torch.no_grad()
def measure_mismatch(model: Any, tokenizer: Any, prompts: list[str], plan: Precision, *,
                     group_size: int, max_new_tokens: int, seed: int = 0,
                     temperature: float = 1.0) -> Mismatch:
    """Sample ``group_size`` completions per prompt from ``plan``'s sampling copy of ``model``
    and score them under the copy and under the learner (the float32 ``model`` under the
    plan's autocast), as the loop does at its first step.

    Args:
        model: the policy, float32 master weights.
        prompts: user messages (formatted with :func:`rollout.chat_prompt` here).
        plan: a precision plan with a sampling copy (``plan.sampling_dtype`` set).

    Raises:
        ValueError: the plan samples from the policy itself, so there is no copy to measure.
    """
    if plan.sampling_dtype is None:
        raise ValueError(f"this plan has no sampling copy ({plan.describe()}): rollouts come "
                         "from the policy itself, so sampler and learner are one model")
    sampler = make_sampler(model, plan.sampling_dtype, plan.sampling_packed)
    texts = [chat_prompt(tokenizer, prompt) for prompt in prompts]
    rollout = sample_group(sampler, tokenizer, texts, group_size, max_new_tokens=max_new_tokens,
                           temperature=temperature, seed=seed)
    width = rollout.completion_ids.size(1)
    scored_by_sampler = token_logprobs(sampler, rollout.input_ids, rollout.attention_mask, width,
                                       temperature=temperature).float()
    del sampler
    with _autocast(model, plan.autocast):
        scored_by_learner = token_logprobs(model, rollout.input_ids, rollout.attention_mask,
                                           width, temperature=temperature).float()
    return Mismatch(plan.describe(), scored_by_learner, scored_by_sampler,
                    rollout.completion_mask)
