"""What each kind of post-training signal gives the model, position by position (notebook 01).

Lecture, "What changes today: the signal":

- SFT: a target token at every position, the per-token cross-entropy ``-log p(y_t)``
  -> ``token_cross_entropy`` (notebook 01, eq. (1.1));
- distillation: the teacher's whole distribution at every position, the per-token
  ``KL(teacher || student)`` -> ``token_kl`` (eq. (1.2));
- RL: one number per attempt, the reward (a plain function, ``grpo_core.rewards``);

and ``feedback_counts`` counts the numbers each one hands the learner (eq. (1.3)).
Imports only torch: pure functions, no model, no I/O.
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_core.logprobs import logprobs_from_logits


def token_cross_entropy(logits: Tensor, targets: Tensor, mask: Tensor | None = None) -> Tensor:
    """SFT's loss at every position: ``-log softmax(logits_t)[y_t]`` (notebook 01, eq. (1.1)).

    ``torch.nn.functional.cross_entropy(..., reduction="none")`` in float32; its mean over the
    real positions is the usual SFT loss.

    Args:
        logits: ``[B, T, V]`` float, the logits that *predict* each target (already shifted:
            ``logits[:, t]`` predicts ``targets[:, t]``).
        targets: ``[B, T]`` int, the demonstration's tokens.
        mask: optional ``[B, T]`` 0/1; masked positions get 0.

    Returns:
        ``[B, T]`` float32, >= 0.
    """
    losses = -logprobs_from_logits(logits, targets)
    if mask is not None:
        _check_mask(mask, losses)
        losses = losses.masked_fill(~mask.bool(), 0.0)
    return losses


def token_kl(
    student_logits: Tensor,
    teacher_logits: Tensor,
    mask: Tensor | None = None,
    *,
    student_temperature: float = 1.0,
    teacher_temperature: float = 1.0,
) -> Tensor:
    """Distillation's loss at every position: ``KL(teacher || student)`` (notebook 01, eq. (1.2)).

    ``sum_v q_t(v) (log q_t(v) - log p_t(v))`` with ``q = softmax(teacher_logits / T_q)`` and
    ``p = softmax(student_logits / T_p)``: the forward KL of classic distillation, which pulls
    the student's probability of *every* vocabulary entry towards the teacher's. Computed in
    float32 over the whole ``[B, T, V]`` block at once: meant for short texts.

    Args:
        student_logits: ``[B, T, V]`` float.
        teacher_logits: ``[B, T, V]`` float, same shape (the teacher must share the vocabulary).
        mask: optional ``[B, T]`` 0/1; masked positions get 0.
        student_temperature, teacher_temperature: divide each model's logits (> 0).

    Returns:
        ``[B, T]`` float32, >= 0 (up to rounding), 0 where the two distributions are equal.
    """
    if student_logits.dim() != 3 or teacher_logits.shape != student_logits.shape:
        raise ValueError(
            f"student and teacher logits must both be [B, T, V], got "
            f"{tuple(student_logits.shape)} and {tuple(teacher_logits.shape)}"
        )
    if not (student_temperature > 0 and teacher_temperature > 0):
        raise ValueError(
            f"temperatures must be > 0, got {student_temperature!r} and {teacher_temperature!r}"
        )
    dtype = torch.promote_types(student_logits.dtype, torch.float32)
    student = torch.log_softmax(student_logits.to(dtype) / student_temperature, dim=-1)
    teacher = torch.log_softmax(teacher_logits.to(dtype) / teacher_temperature, dim=-1)
    kl = (teacher.exp() * (teacher - student)).sum(dim=-1)
    if mask is not None:
        _check_mask(mask, kl)
        kl = kl.masked_fill(~mask.bool(), 0.0)
    return kl


def feedback_counts(num_tokens: int, vocab_size: int, num_attempts: int = 1) -> dict[str, int]:
    """How many numbers each kind of signal hands the learner (notebook 01, eq. (1.3)).

    For ``num_attempts`` completions of ``num_tokens`` tokens each, over a vocabulary of
    ``vocab_size`` entries:

    - ``"sft"``: one target token id per position, ``num_attempts * num_tokens``;
    - ``"distillation"``: a probability per vocabulary entry per position,
      ``num_attempts * num_tokens * vocab_size``;
    - ``"rl"``: one reward per attempt, ``num_attempts``.

    A count of numbers, not of information: a target id is one of ``vocab_size`` choices, a
    probability is a real number, a pass/fail reward is one bit.
    """
    for name, value in (("num_tokens", num_tokens), ("vocab_size", vocab_size),
                        ("num_attempts", num_attempts)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return {
        "sft": num_attempts * num_tokens,
        "distillation": num_attempts * num_tokens * vocab_size,
        "rl": num_attempts,
    }


def _check_mask(mask: Tensor, values: Tensor) -> None:
    if mask.shape != values.shape:
        raise ValueError(f"mask must be [B, T] {tuple(values.shape)}, got {tuple(mask.shape)}")
