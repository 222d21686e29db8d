"""Rollouts: the policy's own attempts, sampled as groups (lecture: "RL in three functions").

One ``generate`` call samples ``group_size`` completions for each prompt. The batch is laid
out group after group, ``[p0 x k, p1 x k, ...]``, which is the layout ``group_advantages``
expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from grpo_core.logprobs import completion_mask
from grpo_core.profiles import Profile

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass
class Rollout:
    """A batch of sampled completions, ``B = len(prompts) * group_size`` rows.

    Attributes:
        prompt_ids: ``[B, P]`` left-padded prompt token ids.
        prompt_mask: ``[B, P]`` 1 for real prompt tokens, 0 for padding.
        completion_ids: ``[B, C]`` sampled token ids, right-padded after the first EOS.
        completion_mask: ``[B, C]`` 1 up to and including the first EOS, else 0.
        texts: ``B`` decoded completions (special tokens removed).
        truncated: ``[B]`` bool, True where the completion hit ``max_new_tokens`` without EOS.
        prompts: ``B`` prompt strings, each repeated ``group_size`` times.
        group_size: completions per prompt (k).
    """

    prompt_ids: Tensor
    prompt_mask: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    texts: list[str]
    truncated: Tensor
    prompts: list[str]
    group_size: int

    @property
    def lengths(self) -> Tensor:
        """``[B]`` completion lengths in tokens (EOS included)."""
        return self.completion_mask.sum(dim=1)


def chat_prompt(
    tokenizer: PreTrainedTokenizerBase,
    user_message: str,
    *,
    system_message: str | None = None,
    enable_thinking: bool = False,
) -> str:
    """Wrap ``user_message`` in the model's chat template, ready for the assistant's reply.

    ``enable_thinking=False`` turns Qwen3's thinking block off; templates without that
    switch ignore it.
    """
    messages = [{"role": "user", "content": user_message}]
    if system_message is not None:
        messages.insert(0, {"role": "system", "content": system_message})
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
    )


def _eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured is not None:
        ids.update(configured)
    return sorted(i for i in ids if i is not None)


@torch.no_grad()
def sample_group(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: str | list[str],
    group_size: int,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
) -> Rollout:
    """Sample ``group_size`` completions for each prompt in one batched ``generate`` call.

    Args:
        prompts: one prompt or a list, already formatted (see :func:`chat_prompt`).
        group_size: completions per prompt, k >= 1.
        max_new_tokens: the completion budget; longer completions are cut and flagged
            ``truncated``.
        seed: seeds torch's generator first, so the same call gives the same samples.

    Returns:
        A :class:`Rollout` with ``B = len(prompts) * group_size`` rows, group after group.
    """
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts:
        raise ValueError("sample_group needs at least one prompt")
    if group_size < 1 or max_new_tokens < 1:
        raise ValueError(
            f"group_size and max_new_tokens must be >= 1, got {group_size} and {max_new_tokens}"
        )
    if tokenizer.padding_side != "left":
        raise ValueError("batched generation needs tokenizer.padding_side == 'left'")
    repeated = [p for p in prompts for _ in range(group_size)]
    encoded = tokenizer(repeated, return_tensors="pt", padding=True, add_special_tokens=False)
    encoded = encoded.to(model.device)
    if seed is not None:
        torch.manual_seed(seed)
    was_training = model.training
    model.eval()  # no dropout while sampling
    try:
        output = model.generate(
            **encoded,
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            top_k=0,
            max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
        )
    finally:
        model.train(was_training)
    prompt_len = encoded["input_ids"].shape[1]
    completion_ids = output[:, prompt_len:]
    eos_ids = _eos_token_ids(model, tokenizer)
    mask = completion_mask(completion_ids, eos_ids).to(torch.long)
    has_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))
    truncated = ~has_eos.any(dim=1)
    completion_ids = completion_ids.masked_fill(mask == 0, tokenizer.pad_token_id)
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    return Rollout(
        prompt_ids=encoded["input_ids"],
        prompt_mask=encoded["attention_mask"],
        completion_ids=completion_ids,
        completion_mask=mask,
        texts=texts,
        truncated=truncated,
        prompts=repeated,
        group_size=group_size,
    )


def sample_for_profile(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: str | list[str],
    profile: Profile,
    group_size: int | None = None,
    seed: int | None = None,
) -> Rollout:
    """:func:`sample_group` with the profile's group size, length budget and sampling settings."""
    return sample_group(
        model,
        tokenizer,
        prompts,
        group_size or profile.group_size,
        max_new_tokens=profile.max_new_tokens,
        temperature=profile.temperature,
        top_p=profile.top_p,
        seed=profile.seed if seed is None else seed,
    )
