"""Per-token log-probabilities of the completion tokens, and what the lecture builds from them.

Lecture box "The whole update is a few lines": ``token_logp`` is the log-probability the policy
gives each completion token, ``comp_mask`` marks the real completion tokens, and

    seq_logp = (token_logp * comp_mask).sum(dim=1)

is the log-probability of the whole completion (notebook 02, eqs. (2.1)-(2.3)).

The model is called but never loaded here: this module imports only torch (no transformers,
no I/O). Log-probs and entropies are always float32, even when the model runs in bf16/fp16.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import torch
from torch import Tensor

DEFAULT_CHUNK_SIZE = 512  # completion positions per float32 block: bounds the temporary memory


def completion_mask(completion_ids: Tensor, eos_token_ids: int | Sequence[int]) -> Tensor:
    """Mark the completion tokens up to and including the first EOS (notebook 02, eq. (2.2)).

    What comes after the first EOS is padding (or text the model wrote after it should have
    stopped) and must not be scored. A row with no EOS was cut at the length limit: all of it
    counts. Same rule as TRL's ``_generate_single_turn`` (``completion_mask = idx <= eos_idx``).
    Meant for ``model.generate``'s output, where a row that stopped early is EOS then padding;
    lists padded by hand without an EOS need a mask built from their lengths instead.

    Args:
        completion_ids: ``[B, C]`` int, the sampled tokens, right-padded.
        eos_token_ids: one id or several (e.g. the tokenizer's and the generation config's).

    Returns:
        ``[B, C]`` int64, 1 on scored tokens, 0 after the first EOS.
    """
    if completion_ids.dim() != 2:
        raise ValueError(f"completion_ids must be [B, C], got shape {tuple(completion_ids.shape)}")
    eos = torch.as_tensor(eos_token_ids, device=completion_ids.device).reshape(-1)
    if eos.numel() == 0:
        raise ValueError("eos_token_ids must name at least one token id")
    width = completion_ids.size(1)
    if width == 0:
        return torch.zeros_like(completion_ids, dtype=torch.long)
    positions = torch.arange(width, device=completion_ids.device).expand_as(completion_ids)
    is_eos = torch.isin(completion_ids, eos)
    first_eos = torch.where(is_eos, positions, width).min(dim=1, keepdim=True).values
    return (positions <= first_eos).long()


def sequence_logprob(token_logps: Tensor, mask: Tensor) -> Tensor:
    """Log-probability of each whole completion: the sum of its token log-probs.

    The lecture's ``seq_logp = (token_logp * comp_mask).sum(dim=1)`` (notebook 02, eq. (2.3)).
    Masked positions are dropped with ``masked_fill`` rather than multiplied by 0, so a ``-inf``
    or NaN left in the padding cannot turn the sum into NaN.

    Args:
        token_logps: ``[B, T]`` float.
        mask: ``[B, T]`` 0/1 (bool, int or float).

    Returns:
        ``[B]`` float; 0 for an all-masked (empty) row.
    """
    if token_logps.dim() != 2 or mask.shape != token_logps.shape:
        raise ValueError(
            f"token_logps must be [B, T] and mask the same shape, got {tuple(token_logps.shape)} "
            f"and {tuple(mask.shape)}"
        )
    return token_logps.masked_fill(~mask.bool(), 0.0).sum(dim=1)


def scored_positions(sequence_length: int, completion_width: int, device: Any = None) -> Tensor:
    """``[C]`` the positions whose logits predict the ``C`` completion tokens: position t - 1
    predicts token t, so ``L - C - 1 ... L - 2`` of a length-``L`` sequence.

    An index tensor for HF's ``logits_to_keep``, not its int form: the int form slices the last
    hidden states into a strided view, and a bfloat16 matmul on a CPU then copies the whole
    vocabulary matrix once per row (about 2 s for 16 rows of SmolLM2); indices gather a
    contiguous block instead.
    """
    return torch.arange(sequence_length - completion_width - 1, sequence_length - 1,
                        device=device)


@overload
def token_logprobs(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    logits_to_keep: int,
    *,
    temperature: float = ...,
    return_entropy: Literal[False] = ...,
    chunk_size: int = ...,
    share_prompts: bool = ...,
) -> Tensor: ...
@overload
def token_logprobs(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    logits_to_keep: int,
    *,
    temperature: float = ...,
    return_entropy: Literal[True],
    chunk_size: int = ...,
    share_prompts: bool = ...,
) -> tuple[Tensor, Tensor]: ...
def token_logprobs(
    model: Any,
    input_ids: Tensor,
    attention_mask: Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    return_entropy: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    share_prompts: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Per-token log-probs of the last ``logits_to_keep`` tokens under a causal LM (notebook 02, eq. (2.1)).

    ``log pi(y_t | x, y_<t) = log_softmax(logits_{t-1} / temperature)[y_t]``, as TRL's
    ``GRPOTrainer._get_per_token_logps_and_entropies`` computes it: the logits are divided by
    the sampling temperature, and padded completion positions get 0. Like TRL, no
    ``position_ids`` are passed, so the model numbers positions 0..P+C-1, left padding included.
    Gradients flow to the model unless the call is wrapped in ``torch.no_grad()`` (old and
    reference log-probs).

    Memory: the model is asked for the ``C`` positions that predict the completion only
    (:func:`scored_positions`, HF's ``logits_to_keep``),
    and the float32 softmax is computed ``chunk_size`` positions at a time; backward keeps the
    logits in the model's dtype, never a float32 copy of the whole ``[B, C, V]`` block.

    Args:
        model: a causal LM (HF style: ``model(input_ids=, attention_mask=, logits_to_keep=)``
            returns ``.logits``).
        input_ids: ``[B, P + C]`` int, left-padded prompt ids then right-padded completion ids.
        attention_mask: ``[B, P + C]`` 0/1, the prompt mask then the completion mask.
        logits_to_keep: ``C``, the completion width (``completion_ids.size(1)``).
        temperature: the sampling temperature (> 0).
        return_entropy: also return the per-token entropy (no gradient), for the metrics.
        chunk_size: positions per float32 block.
        share_prompts: run the prompt part once per distinct prompt (a group's k rows hold
            the same one) and the completions on top of its key/value cache
            (:func:`shared_prompt_logits`): the same log-probs up to float rounding, fewer
            multiply-adds. Ignored where no two neighbouring rows share a prompt or the model
            recomputes activations (gradient checkpointing keeps no cache).

    Returns:
        ``[B, C]`` float32 log-probs; with ``return_entropy``, also ``[B, C]`` float32 entropies.
    """
    completion_width = _check_model_inputs(input_ids, attention_mask, logits_to_keep, temperature)
    if completion_width == 0:
        empty = input_ids.new_zeros((input_ids.size(0), 0), dtype=torch.float32)
        return (empty, empty.clone()) if return_entropy else empty
    logits = None
    if share_prompts and not _recomputes_activations(model):
        logits = shared_prompt_logits(model, input_ids, attention_mask, completion_width)
    if logits is None:
        logits = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            logits_to_keep=scored_positions(input_ids.size(1), completion_width, input_ids.device),
            use_cache=False,
        ).logits  # [B, C, V]
    labels = input_ids[:, -completion_width:]
    padding = attention_mask[:, -completion_width:] == 0
    logps = logprobs_from_logits(logits, labels, temperature, chunk_size).masked_fill(padding, 0.0)
    if not return_entropy:
        return logps
    with torch.no_grad():
        entropy = token_entropy(logits, temperature, chunk_size).masked_fill(padding, 0.0)
    return logps, entropy


def distinct_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The distinct rows of a grouped batch of ``[B, P]`` prompts (rows come group after
    group, so identical ones are neighbours): ``([D, P] ids, [D, P] mask, [B] copy_of)``, where
    row ``i`` of the batch is distinct row ``copy_of[i]``."""
    width = prompt_ids.size(1)
    distinct, copy_of = torch.unique_consecutive(torch.cat([prompt_ids, prompt_mask], dim=1),
                                                 dim=0, return_inverse=True)
    return distinct[:, :width], distinct[:, width:], copy_of


def shared_prompt_logits(
    model: Any, input_ids: Tensor, attention_mask: Tensor, completion_width: int
) -> Tensor | None:
    """``[B, C, V]`` the logits that predict the completion tokens, with the prompt pass run
    once per distinct prompt; None when no two neighbouring rows share their prompt.

    A group's k rows hold the same (left-padded) prompt, so the full pass computes the
    prompt's hidden states k times. Here the distinct prompts go through the model once
    (``use_cache=True``), their key/value cache is copied to every row of their group, and a
    second pass runs the completions on top of it: the last prompt position's logits predict
    the first completion token, the second pass's the rest. Positions are numbered as in the
    full pass (0..P+C-1, left padding included: no ``position_ids``), the attention masks are
    the same, and gradients reach the prompt pass through the copied cache, summed over the
    group's rows. At 2 prompts x 8 completions the prompt's rows drop from 16 to 2.

    Args:
        model: an HF-style causal LM that returns its key/value ``cache`` with
            ``use_cache=True`` and accepts it back (``cache=``).
        input_ids, attention_mask: ``[B, P + C]``, rows grouped (identical prompts adjacent).
        completion_width: ``C`` (>= 1).
    """
    prompt_width = input_ids.size(1) - completion_width
    prompt_ids, prompt_mask, copy_of = distinct_prompts(input_ids[:, :prompt_width],
                                                        attention_mask[:, :prompt_width])
    if prompt_ids.size(0) == input_ids.size(0):
        return None
    last = torch.tensor([prompt_width - 1], device=input_ids.device)  # see scored_positions
    first = model(input_ids=prompt_ids, attention_mask=prompt_mask, logits_to_keep=last,
                  use_cache=True)
    first_logits = first.logits.index_select(0, copy_of)  # [B, 1, V]
    if completion_width == 1:
        return first_logits
    cache = first.cache
    _copy_rows(cache, copy_of)
    rest = model(input_ids=input_ids[:, prompt_width:-1], attention_mask=attention_mask[:, :-1],
                 cache=cache, use_cache=True).logits  # [B, C - 1, V]
    return torch.cat([first_logits, rest], dim=1)


def logprobs_from_logits(
    logits: Tensor, labels: Tensor, temperature: float = 1.0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """Selective log-softmax: ``log_softmax(logits / temperature).gather(-1, labels)`` in float32.

    Same values as TRL's ``selective_log_softmax`` (notebook 02, eq. (2.1)), without the full
    log-softmax: ``logit[label] / T - logsumexp(logits / T)``, ``chunk_size`` positions at a time.
    A custom backward recomputes the softmax from the saved logits and logsumexp, so autograd
    never holds a float32 ``[B, C, V]`` tensor.

    Args:
        logits: ``[B, C, V]`` float (any float dtype; any strides, e.g. a slice of the model's output).
        labels: ``[B, C]`` int, the tokens whose log-probs we want.
        temperature: divides the logits (> 0).
        chunk_size: positions per float32 block.

    Returns:
        ``[B, C]`` float32 (float64 if the logits are float64).
    """
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be [B, C, V] and labels [B, C], got {tuple(logits.shape)} and {tuple(labels.shape)}"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    return _SelectiveLogSoftmax.apply(logits, labels, float(temperature), int(chunk_size))


def token_entropy(
    logits: Tensor, temperature: float = 1.0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Tensor:
    """Entropy of the next-token distribution at each position, in nats, float32 (notebook 11, eq. (11.1)).

    ``H_t = -sum_v p_v log p_v`` with ``p = softmax(logits_t / temperature)``, as TRL's
    ``entropy`` metric (at the sampling temperature). Computed ``chunk_size`` positions at a time.

    Args:
        logits: ``[..., V]`` float.
        temperature: divides the logits (> 0).
        chunk_size: positions per float32 block.

    Returns:
        ``logits.shape[:-1]`` float32 (float64 if the logits are float64).
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    # a [B, C, V] slice of the model's output is walked in place: reshaping it would copy it
    grid = logits if logits.dim() == 3 else logits.reshape(1, -1, logits.size(-1))
    entropy = torch.empty(grid.shape[:2], dtype=_compute_dtype(logits), device=logits.device)
    for row, start, stop in _blocks(grid.shape[:2], chunk_size):
        block_logps = torch.log_softmax(grid[row, start:stop].to(entropy.dtype) / temperature, -1)
        entropy[row, start:stop] = -(block_logps.exp() * block_logps).sum(dim=-1)
    return entropy.view(logits.shape[:-1])


class _SelectiveLogSoftmax(torch.autograd.Function):
    """``logits[label]/T - logsumexp(logits/T)`` with a backward that recomputes the softmax.

    d logp / d logits = (onehot(label) - softmax(logits / T)) / T.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, labels: Tensor, temperature: float, chunk_size: int
    ) -> Tensor:
        dtype = _compute_dtype(logits)
        chosen = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1).to(dtype) / temperature
        logsumexp = torch.empty(labels.shape, dtype=dtype, device=logits.device)
        for row, start, stop in _blocks(labels.shape, chunk_size):
            block = logits[row, start:stop].to(dtype) / temperature
            logsumexp[row, start:stop] = torch.logsumexp(block, dim=-1)
        ctx.save_for_backward(logits, labels, logsumexp)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        return chosen - logsumexp

    @staticmethod
    def backward(ctx: Any, grad_logps: Tensor) -> tuple[Tensor, None, None, None]:
        logits, labels, logsumexp = ctx.saved_tensors
        temperature = ctx.temperature
        grad_logits = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        grad_logps = grad_logps.to(logsumexp.dtype)
        for row, start, stop in _blocks(labels.shape, ctx.chunk_size):
            block = logits[row, start:stop].to(logsumexp.dtype) / temperature
            probs = torch.exp(block - logsumexp[row, start:stop, None])
            upstream = grad_logps[row, start:stop, None]
            block_grad = -probs * upstream
            block_grad.scatter_add_(-1, labels[row, start:stop, None], upstream)
            grad_logits[row, start:stop] = block_grad / temperature
        return grad_logits, None, None, None


def _compute_dtype(logits: Tensor) -> torch.dtype:
    """float32, or float64 when the logits already are (bf16/fp16 are upcast)."""
    return torch.promote_types(logits.dtype, torch.float32)


def _blocks(shape: torch.Size, chunk_size: int):
    """(row, start, stop) triples covering a ``[B, C]`` grid, ``chunk_size`` positions each."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    rows, width = shape
    for row in range(rows):
        for start in range(0, width, chunk_size):
            yield row, start, min(start + chunk_size, width)


def _copy_rows(cache: Any, rows: Tensor) -> None:
    """Make row ``i`` of every layer's keys and values the old row ``rows[i]``, in place.

    ``index_select``, not indexing (which HF's ``batch_select_indices`` uses): the backward of
    ``tensor[rows]`` accumulates repeated rows in an order torch's CPU kernel does not fix, so
    two runs with one seed would train slightly different weights; ``index_select``'s
    backward adds them in order."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, rows)
        layer.values = layer.values.index_select(0, rows)


def _recomputes_activations(model: Any) -> bool:
    """Whether ``model`` uses activation (gradient) checkpointing, which keeps no cache."""
    value = getattr(model, "is_activation_checkpointing", None)  # transformers' new name
    if value is None:
        value = getattr(model, "is_gradient_checkpointing", False)
    return bool(value)


def _check_model_inputs(
    input_ids: Tensor, attention_mask: Tensor, logits_to_keep: int, temperature: float
) -> int:
    """Validate ``token_logprobs``' inputs; return the completion width ``C``."""
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"input_ids and attention_mask must both be [B, P + C], got {tuple(input_ids.shape)} "
            f"and {tuple(attention_mask.shape)}"
        )
    width = int(logits_to_keep)
    if not 0 <= width < input_ids.size(1):
        raise ValueError(
            f"logits_to_keep must be the completion width C, with 0 <= C < sequence length "
            f"{input_ids.size(1)} (at least one prompt token), got {logits_to_keep!r}"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    return width
