"""The GRPO update: the lecture's two boxes, the KL guardrail, and TRL's four aggregations.

Lecture box "The whole update is a few lines":

- ONE STEP PER ROLLOUT: ``loss = -(advantages * seq_logp).mean()``   -> ``policy_gradient_loss``
- REUSING A ROLLOUT ADDS A CLIP: ``-min(ratio * A, clamp(ratio, 1-eps, 1+eps) * A)`` -> ``clipped_surrogate``

plus "Two guardrails, two time scales": the KL penalty (k3 estimator, weight beta) -> ``kl_k3``,
all assembled exactly as TRL 1.16's ``GRPOTrainer._compute_loss`` does -> ``grpo_loss``.
Imports only torch: pure functions, no model, no I/O.
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_core.logprobs import sequence_logprob

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
# the lecture's box, -(advantages * seq_logp).mean() with seq_logp a sum over tokens, beside them
WEIGHTINGS = ("sum", *LOSS_TYPES)


def policy_gradient_loss(token_logps: Tensor, mask: Tensor, advantages: Tensor) -> Tensor:
    """The lecture's one-step loss, ``-(advantages * seq_logp).mean()`` (notebook 02, eq. (2.4)).

    Its gradient is ``-(1/B) sum_i A_i grad log pi(y_i | x_i)``: a positive advantage raises the
    completion's log-probability, a negative one lowers it, the size sets how hard, and A = 0
    gives exactly zero gradient.

    Args:
        token_logps: ``[B, T]`` float, with gradient.
        mask: ``[B, T]`` 0/1, the completion mask.
        advantages: ``[B]`` float.

    Returns:
        scalar.
    """
    _check_advantages(advantages, token_logps)
    return -(advantages * sequence_logprob(token_logps, mask)).mean()


def clipped_surrogate(
    token_logps: Tensor,
    old_token_logps: Tensor | None,
    advantages: Tensor,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> Tensor:
    """Per-token PPO-clip loss, ``-min(rho * A, clip(rho, 1 - eps, 1 + eps_high) * A)`` (notebook 04, eq. (4.2)).

    The lecture's second box, with ``rho = exp(logp - old_logp)`` (eq. (4.1)). ``epsilon_high``
    (DAPO's asymmetric clip, 0.28 in the paper) defaults to ``epsilon``. At the first step after
    sampling ``rho`` is exactly 1 and the clip does nothing; once the rollout is reused and
    ``rho`` leaves the band on the side the advantage pushes, that token's gradient is zero.

    Args:
        token_logps: ``[B, T]`` float, with gradient.
        old_token_logps: ``[B, T]`` float, the log-probs at sampling time; ``None`` means
            on-policy (``token_logps.detach()``).
        advantages: ``[B]`` float.
        epsilon, epsilon_high: the clip band ``[1 - epsilon, 1 + epsilon_high]``.

    Returns:
        ``[B, T]`` float, unmasked: padded positions hold whatever the inputs give there.
    """
    _check_same_shape("old_token_logps", old_token_logps, token_logps)
    _check_advantages(advantages, token_logps)
    low, high = _clip_band(epsilon, epsilon_high)
    old = token_logps.detach() if old_token_logps is None else old_token_logps
    ratio = torch.exp(token_logps - old)
    return _clipped_objective(ratio, advantages.unsqueeze(1), low, high)


def kl_k3(token_logps: Tensor, ref_token_logps: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi || pi_ref): ``exp(d) - d - 1``, ``d = ref - logp`` (notebook 04, eq. (4.3)).

    Always >= 0, and exactly 0 where the policy equals the reference. Its expectation under
    the policy is the true KL (an unbiased estimate of the *value*); it is the estimator TRL
    uses. Its gradient as a loss is not the KL's gradient: on sampled tokens its mean is the
    gradient of KL(pi_ref || pi). ``grpo_loss`` multiplies it by the ratio, as TRL does, which
    makes the gradient that of KL(pi || pi_ref), on-policy too (notebook 04).

    Args:
        token_logps: ``[B, T]`` float, the policy's log-probs (with gradient).
        ref_token_logps: ``[B, T]`` float, the frozen reference model's.

    Returns:
        ``[B, T]`` float, unmasked.
    """
    _check_same_shape("ref_token_logps", ref_token_logps, token_logps)
    delta = ref_token_logps - token_logps
    return torch.exp(delta) - delta - 1


def grpo_loss(
    token_logps: Tensor,
    old_token_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    ref_token_logps: Tensor | None = None,
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    loss_type: str = "grpo",
    max_completion_length: int | None = None,
    num_items_in_batch: int | Tensor | None = None,
    sampler_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """The whole GRPO loss of one micro-batch, as TRL 1.16's ``GRPOTrainer._compute_loss`` (notebook 04, eq. (4.4)).

    ``l_t = -min(rho_t A, clip(rho_t) A) + beta * rho_t * k3_t``, then aggregated by
    ``aggregate_loss`` according to ``loss_type``. The same inputs give TRL's loss and gradient
    (one process, no gradient accumulation, token-level ratios; tested to 1e-6).

    - ``old_token_logps=None`` is on-policy: ``rho = exp(logp - logp.detach())``, exactly 1 in
      value, so the clip never fires while the gradient is the policy gradient.
    - The KL term is multiplied by ``rho`` (TRL's default ``use_bias_correction_kl=True``): the
      value is unchanged on-policy but the gradient gains ``k3 * grad logp``. The ``kl`` metric
      is this product's masked mean, as TRL logs it.
    - Masked positions are filled with 0 before any arithmetic, so ``-inf``/NaN padding and
      all-masked rows never produce NaN (TRL multiplies by the mask instead; the results are the
      same whenever the padding is finite).
    - ``loss_type`` defaults to ``"grpo"``, the GRPO paper's per-sequence token mean (every run
      of the course uses it); TRL 1.16's default is ``"dapo"``. The lecture's box sums the
      tokens instead (``policy_gradient_loss``); ``token_weights`` compares all of them.

    Args:
        token_logps: ``[B, T]`` float, current policy, with gradient.
        old_token_logps: ``[B, T]`` float at sampling time, or ``None`` (on-policy).
        advantages: ``[B]`` float, from ``group_advantages``.
        mask: ``[B, T]`` 0/1, the completion mask.
        ref_token_logps: ``[B, T]`` float from the reference model; required when ``beta != 0``.
        beta: weight of the KL penalty; 0 needs no reference model.
        epsilon, epsilon_high: the clip band ``[1 - epsilon, 1 + epsilon_high]``.
        loss_type: ``"grpo"``, ``"bnpo"``, ``"dr_grpo"`` or ``"dapo"`` (see ``aggregate_loss``).
        max_completion_length: ``dr_grpo``'s constant (TRL: the config's); default ``T``.
        num_items_in_batch: ``dapo``'s denominator, completion tokens in the whole generation
            batch; default this batch's ``mask.sum()``.
        sampler_weights: ``[B, T]`` or ``[B, 1]`` importance weights of the sampling copy's
            completions (``grpo_core.sampling_correction.sampler_weights``), multiplying the
            policy term before the KL term is added, as TRL's ``importance_sampling_ratio``;
            ``None``: no correction.

    Returns:
        ``(loss, metrics)``: a scalar with gradient, and floats under TRL's names
        ``clip_ratio/low_mean``, ``clip_ratio/high_mean``, ``clip_ratio/region_mean`` and, when
        ``beta != 0``, ``kl``.
    """
    _check_loss_inputs(
        token_logps, old_token_logps, advantages, mask, ref_token_logps, beta, loss_type
    )
    low, high = _clip_band(epsilon, epsilon_high)
    keep = mask.bool()
    logps = token_logps.masked_fill(~keep, 0.0)
    old = logps.detach() if old_token_logps is None else old_token_logps.masked_fill(~keep, 0.0)
    ratio = torch.exp(logps - old)
    advantages = advantages.unsqueeze(1)
    per_token_loss = _clipped_objective(ratio, advantages, low, high)
    metrics = clip_metrics(
        ratio.detach(), advantages, mask, epsilon=epsilon, epsilon_high=epsilon_high
    )
    if sampler_weights is not None:
        if sampler_weights.shape not in ((mask.shape[0], 1), tuple(mask.shape)):
            raise ValueError(f"sampler_weights must be [B, T] or [B, 1] for a [B, T] = "
                             f"{tuple(mask.shape)} batch, got {tuple(sampler_weights.shape)}")
        per_token_loss = torch.where(keep, per_token_loss * sampler_weights.detach(), 0.0)
    if beta != 0.0:
        kl = kl_k3(logps, ref_token_logps.masked_fill(~keep, 0.0)) * ratio
        per_token_loss = per_token_loss + beta * kl
        metrics["kl"] = masked_mean(kl.detach(), mask).item()
    loss = aggregate_loss(
        per_token_loss,
        mask,
        loss_type,
        max_completion_length=max_completion_length,
        num_items_in_batch=num_items_in_batch,
    )
    return loss, metrics


def aggregate_loss(
    per_token_loss: Tensor,
    mask: Tensor,
    loss_type: str = "grpo",
    *,
    max_completion_length: int | None = None,
    num_items_in_batch: int | Tensor | None = None,
) -> Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar, as TRL does for each ``loss_type`` (notebook 04, eq. (4.4)).

    - ``grpo``: mean over sequences of each sequence's token mean (short answers weigh more per token);
    - ``bnpo``: token mean over this batch;
    - ``dr_grpo``: token sum / (B * max_completion_length), a constant normaliser;
    - ``dapo``: token sum / num_items_in_batch (tokens of the whole generation batch).

    Empty rows count in ``B`` for ``grpo`` and ``dr_grpo`` (TRL's ``clamp(min=1)``), and no
    denominator is ever 0.

    Args:
        per_token_loss: ``[B, T]`` float, finite at masked positions.
        mask: ``[B, T]`` 0/1.
        loss_type, max_completion_length, num_items_in_batch: as in ``grpo_loss``.

    Returns:
        scalar.
    """
    _check_loss_type(loss_type)
    mask = mask.to(per_token_loss.dtype)
    masked = per_token_loss * mask
    if loss_type == "grpo":
        return (masked.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            return masked.sum() / (per_token_loss.size(0) * max(per_token_loss.size(1), 1))
        if int(max_completion_length) < 1:
            raise ValueError(
                f"max_completion_length must be a positive int, got {max_completion_length!r}"
            )
        return masked.sum() / (per_token_loss.size(0) * int(max_completion_length))
    tokens = mask.sum() if num_items_in_batch is None else num_items_in_batch
    tokens = torch.as_tensor(tokens, dtype=per_token_loss.dtype, device=per_token_loss.device)
    return masked.sum() / tokens.clamp(min=1.0)


def token_weights(
    mask: Tensor,
    loss_type: str = "grpo",
    *,
    max_completion_length: int | None = None,
    num_items_in_batch: int | Tensor | None = None,
) -> Tensor:
    """How much each token counts in the loss: ``w`` with ``loss = sum_{i,t} w_{i,t} l_{i,t}`` (notebook 04, eq. (4.5)).

    On-policy with beta = 0 the per-token loss is ``l_{i,t} = -A_i log pi(o_{i,t})`` in
    gradient, so ``d loss / d log pi(o_{i,t}) = -A_i w_{i,t}``: the weight is how hard a unit of
    advantage pushes that token, and ``w_{i,t}`` summed over t how hard it pushes completion i.

    - ``sum``: the lecture's box, ``-(A * (logp * mask).sum(1)).mean()``: ``1/B`` per token, so
      a completion counts in proportion to its length |o_i|;
    - ``grpo``: ``1/(B |o_i|)``: every completion counts ``1/B`` whatever its length;
    - ``bnpo``: ``1/N``, N the batch's completion tokens;
    - ``dr_grpo``: ``1/(B L)``, L = ``max_completion_length`` (default T);
    - ``dapo``: ``1/num_items_in_batch`` (default N, as ``bnpo``).

    Args:
        mask: ``[B, T]`` 0/1, the completion mask.
        loss_type: one of ``WEIGHTINGS``; the others as in ``aggregate_loss``.

    Returns:
        ``[B, T]`` float, 0 at masked positions; ``aggregate_loss(l, mask, loss_type)`` equals
        ``(token_weights(mask, loss_type) * l).sum()``.
    """
    if loss_type not in WEIGHTINGS:
        raise ValueError(f"loss_type must be one of {WEIGHTINGS}, got {loss_type!r}")
    mask = mask.float()
    rows, width = mask.shape
    if loss_type == "sum":
        return mask / rows
    if loss_type == "grpo":
        return mask / (rows * mask.sum(dim=1, keepdim=True).clamp(min=1.0))
    if loss_type == "dr_grpo":
        return mask / (rows * (width if max_completion_length is None else max_completion_length))
    tokens = mask.sum() if loss_type == "bnpo" or num_items_in_batch is None else num_items_in_batch
    return mask / torch.as_tensor(tokens, dtype=mask.dtype).clamp(min=1.0)


def clip_metrics(
    ratio: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> dict[str, float]:
    """How often the clip fired, as TRL logs it (notebook 04, "watch the clip fire").

    A token is *low-clipped* when ``rho < 1 - epsilon`` and ``A < 0``, *high-clipped* when
    ``rho > 1 + epsilon_high`` and ``A > 0``: exactly the tokens whose gradient the clip zeroes.
    Each fraction is a masked mean over all completion tokens (0 when there are none).

    Args:
        ratio: ``[B, T]`` float, ``exp(logp - old_logp)``.
        advantages: ``[B]`` or ``[B, 1]`` float.
        mask: ``[B, T]`` 0/1.

    Returns:
        ``clip_ratio/low_mean``, ``clip_ratio/high_mean``, ``clip_ratio/region_mean`` as floats.
    """
    low, high = _clip_band(epsilon, epsilon_high)
    advantages = advantages.reshape(-1, 1)
    is_low = (ratio < 1 - low) & (advantages < 0)
    is_high = (ratio > 1 + high) & (advantages > 0)
    fractions = torch.stack(
        [masked_mean(flags.float(), mask) for flags in (is_low, is_high, is_low | is_high)]
    )
    low_mean, high_mean, region_mean = fractions.tolist()  # one device sync for all three
    return {
        "clip_ratio/low_mean": low_mean,
        "clip_ratio/high_mean": high_mean,
        "clip_ratio/region_mean": region_mean,
    }


def _clipped_objective(ratio: Tensor, advantages: Tensor, low: float, high: float) -> Tensor:
    """``-min(rho A, clamp(rho, 1 - low, 1 + high) A)``, written as TRL writes it so gradients match bit for bit."""
    clipped = torch.clamp(ratio, 1 - low, 1 + high)
    return -torch.min(ratio * advantages, clipped * advantages)


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values`` over the positions where ``mask`` is 1 (0 for an empty mask).

    Args:
        values: ``[B, T]``; mask: ``[B, T]`` of 0/1 (bool, int or float).

    Returns:
        a scalar tensor.
    """
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def _clip_band(epsilon: float, epsilon_high: float | None) -> tuple[float, float]:
    high = epsilon if epsilon_high is None else epsilon_high
    if not (epsilon >= 0 and high >= 0):
        raise ValueError(
            f"epsilon and epsilon_high must be >= 0, got {epsilon!r} and {epsilon_high!r}"
        )
    return float(epsilon), float(high)


def _check_loss_type(loss_type: str) -> None:
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def _check_same_shape(name: str, tensor: Tensor | None, like: Tensor) -> None:
    if like.dim() != 2:
        raise ValueError(f"token_logps must be [B, T], got shape {tuple(like.shape)}")
    if tensor is not None and tensor.shape != like.shape:
        raise ValueError(
            f"{name} must have token_logps' shape {tuple(like.shape)}, got {tuple(tensor.shape)}"
        )


def _check_advantages(advantages: Tensor, token_logps: Tensor) -> None:
    if advantages.dim() != 1 or advantages.size(0) != token_logps.size(0):
        raise ValueError(
            f"advantages must be [B] with B = token_logps.size(0) = {token_logps.size(0)}, "
            f"got shape {tuple(advantages.shape)}"
        )


def _check_loss_inputs(
    token_logps: Tensor,
    old_token_logps: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    ref_token_logps: Tensor | None,
    beta: float,
    loss_type: str,
) -> None:
    _check_loss_type(loss_type)
    _check_same_shape("old_token_logps", old_token_logps, token_logps)
    _check_same_shape("mask", mask, token_logps)
    _check_same_shape("ref_token_logps", ref_token_logps, token_logps)
    _check_advantages(advantages, token_logps)
    if token_logps.size(0) == 0:
        raise ValueError("the batch is empty: token_logps must have at least one row")
    if beta != 0.0 and ref_token_logps is None:
        raise ValueError(
            f"beta={beta} needs ref_token_logps (the reference model's [B, T] log-probs)"
        )
