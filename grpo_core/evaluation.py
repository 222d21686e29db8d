"""Scoring a model's own samples on a fixed set of prompts, outside training.

Two uses: the signal check before training (notebook 08: does the task give the group
something to compare?), and a held-out measure logged beside a proxy reward while training
(notebook 09: is the reward still the task?). Both sample ``k`` completions per prompt with
``sample_group`` and score them with TRL-style reward functions; nothing here updates weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from grpo_core.rewards import RewardFn
from grpo_core.rollout import chat_prompt, sample_group
from grpo_core.scoring import call_reward, group_columns, reward_list, reward_name

# evaluate(model, tokenizer, step) -> {"eval/<name>": value}: held-out measures (e.g. the true
# score beside a proxy reward) that join the metrics of the steps they ran after (``train``'s
# ``evaluate`` hook)
Evaluator = Callable[[Any, Any, int], dict[str, float]]


@torch.no_grad()
def score_samples(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    reward_funcs: RewardFn | Sequence[RewardFn],
    *,
    samples_per_prompt: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    prompts_per_batch: int = 4,
    progress: Callable[[int, int], Any] | None = None,
) -> tuple[dict[str, Tensor], list[str]]:
    """Sample ``samples_per_prompt`` completions for every row and score each one.

    Args:
        rows: dataset rows ``{"prompt": user message, <columns for the rewards>}``.
        reward_funcs: TRL-style ``fn(completions, **columns) -> list[float]``.
        prompts_per_batch: prompts per ``generate`` call (memory vs speed).
        progress: called as ``progress(done_prompts, total_prompts)`` after each batch.

    Returns:
        ``({reward name: [N, k] scores}, texts)``: row ``i`` of each tensor holds prompt
        ``i``'s k scores; ``texts`` are the ``N * k`` completions, group after group.
    """
    funcs, _ = reward_list(reward_funcs)
    if samples_per_prompt < 1 or not rows:
        raise ValueError("score_samples needs rows and samples_per_prompt >= 1")
    scores: dict[str, list[Tensor]] = {reward_name(fn): [] for fn in funcs}
    texts: list[str] = []
    for start in range(0, len(rows), prompts_per_batch):
        chunk = list(rows[start:start + prompts_per_batch])
        prompts = [chat_prompt(tokenizer, row["prompt"]) for row in chunk]
        rollout = sample_group(model, tokenizer, prompts, samples_per_prompt,
                               max_new_tokens=max_new_tokens, temperature=temperature,
                               top_p=top_p, seed=seed * 1_000_003 + start)
        columns = group_columns(chunk, samples_per_prompt)
        for fn in funcs:
            values = call_reward(fn, rollout.texts, columns)
            scores[reward_name(fn)].append(values.view(len(chunk), samples_per_prompt))
        texts.extend(rollout.texts)
        if progress is not None:
            progress(min(start + prompts_per_batch, len(rows)), len(rows))
    return {name: torch.cat(parts) for name, parts in scores.items()}, texts


def held_out_evaluator(
    rows: Sequence[dict[str, Any]],
    reward_funcs: Sequence[RewardFn],
    *,
    samples_per_prompt: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    seed: int = 0,
    prefix: str = "eval",
) -> Evaluator:
    """An ``evaluate`` hook for ``train``: mean score of each reward function on ``rows``.

    Every evaluation samples with the same seed, so two evaluations differ only because the
    weights changed. Logged as ``<prefix>/<reward name>`` (e.g. ``eval/unit_test_reward``).
    """

    def evaluate(model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        scores, _ = score_samples(model, tokenizer, rows, reward_funcs,
                                  samples_per_prompt=samples_per_prompt,
                                  max_new_tokens=max_new_tokens, temperature=temperature,
                                  seed=seed)
        return {f"{prefix}/{name}": values.mean().item() for name, values in scores.items()}

    return evaluate
