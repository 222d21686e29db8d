"""A decoding step of a Llama model written out, for the packed CPU sampling copy (notebook 04, section 6).

A decoding step feeds one token per row through every layer. Hugging Face's forward does that
for any model: module calls, the attention-mask builder, the cache's bookkeeping, the rotary
module, ``repeat_kv``-style dispatch, a dozen small tensor operations per layer around the
weight products. On two CPU cores in float32 (an AMD EPYC with AVX2 only, SmolLM2-135M, 16 rows)
that came to about a quarter of a step: the products alone took 60-84 ms of an 88-131 ms step
(the machine's speed moved during the day; docs/performance.md).

:class:`PackedDecoder` computes the same function with the same packed products
(:mod:`grpo_core.packed`) and fewer operations around them, layer by layer (one position per
row):

- ``h <- h + W_o attn(rope(W_q x), rope(W_k x), W_v x)`` with ``x = rmsnorm(h)``: one
  ``torch.rms_norm``; rotary position embedding as one ``addcmul`` per tensor
  (``rotate_half(x) * sin`` is ``roll(x) * sin`` with the sign folded into the first half of
  ``sin``); the new keys and values written in place into a buffer with room for the
  completion; attention as one ``scaled_dot_product_attention`` whose "query length" is the
  ``G`` query heads sharing a key/value head (grouped-query attention without repeating the
  keys); the residual added by the product itself (``PackedLinear.product(x, h)``, oneDNN's
  ``add`` post-op);
- ``h <- h + W_down (silu(W_gate x) * W_up x)`` with ``x = rmsnorm(h)``, the residual again
  added by the product.

It writes out the float32 copy and the bfloat16 one (the plan's copy on a CPU with bfloat16
instructions, where the operations around the products were a larger share of a step: 53 ms
a decoding step against 9-10 ms of reading the weights or of their arithmetic, issue 47).
The logits equal the model's own forward's to float rounding (tests compare them at every
step, with left padding and rows leaving the batch): float32's, and bfloat16's, where the
norms and the rotary embedding round at other places than Hugging Face's (``torch.rms_norm``
rounds once after the weight, Hugging Face before and after it). What it leaves out: any
architecture but Llama's (SmolLM2 is one; Qwen3's extra query/key norms are not written out),
biases, float16, and LoRA adapters: for all of these :func:`can_decode` says no and the
decoding loop calls the model's forward as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional

from grpo_core.packed import PackedLinear

# the sampling copies it writes out: the float32 plan's and the bfloat16 plan's
DTYPES = (torch.float32, torch.bfloat16)
_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def can_decode(model: Any) -> bool:
    """Whether :class:`PackedDecoder` computes ``model``'s decoding step: a Llama whose every
    weight product is a :class:`~grpo_core.packed.PackedLinear` without bias in the dtype of
    its embeddings (float32 or bfloat16: one of :data:`DTYPES`), with SiLU gates (Llama has no
    sliding-window layers)."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) != "llama" or getattr(config, "hidden_act", None) != "silu":
        return False
    try:
        layers = list(model.model.layers)
        products = [layer.get_submodule(name) for layer in layers for name in _PROJECTIONS]
        products.append(model.lm_head)
    except AttributeError:
        return False
    dtype = model.model.embed_tokens.weight.dtype
    return bool(layers) and dtype in DTYPES and all(
        isinstance(product, PackedLinear) and product.bias is None
        and product.dtype == dtype for product in products)


def _rope(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """``[B, heads, D]`` rotated by ``[B, 1, D]`` tables: HF's ``x * cos + rotate_half(x) * sin``
    with ``rotate_half(x) = roll(x) * (-1 on the first half)`` folded into ``signed_sin``."""
    return torch.addcmul(x * cos, x.roll(x.size(-1) // 2, dims=-1), signed_sin)


@dataclass
class DecodeCache:
    """Every layer's keys and values with room for the positions still to come.

    Attributes:
        keys, values: per layer, ``[B, KV, W, D]`` buffers; positions ``< filled`` are set.
        attends: ``[B, W]`` bool, True where a row's token is real (False on left padding).
        filled: positions written so far (the same for every row: prompts are left-padded).
    """

    keys: list[Tensor]
    values: list[Tensor]
    attends: Tensor
    filled: int

    @classmethod
    def from_layers(cls, layers: list[tuple[Tensor, Tensor]], attention_mask: Tensor,
                    reserve: int) -> DecodeCache:
        """Copy ``[(keys, values)]`` of ``[B, KV, P, D]`` (a prompt pass's cache) into buffers
        with room for ``reserve`` more positions; ``attention_mask`` is the prompts' ``[B, P]``."""
        if reserve < 0:
            raise ValueError(f"reserve must be >= 0, got {reserve}")
        filled = attention_mask.size(1)
        keys, values = [], []
        for layer_keys, layer_values in layers:
            if layer_keys.size(2) != filled:
                raise ValueError(f"the cache holds {layer_keys.size(2)} positions, the mask "
                                 f"{filled}")
            for source, buffers in ((layer_keys, keys), (layer_values, values)):
                batch, heads, _, dim = source.shape
                buffer = source.new_empty((batch, heads, filled + reserve, dim))
                buffer[:, :, :filled] = source
                buffers.append(buffer)
        attends = attention_mask.new_ones((attention_mask.size(0), filled + reserve),
                                          dtype=torch.bool)
        attends[:, :filled] = attention_mask.bool()
        return cls(keys, values, attends, filled)

    @property
    def room(self) -> int:
        """Positions still free."""
        return self.attends.size(1) - self.filled

    def keep_rows(self, rows: Tensor) -> None:
        """Keep only ``rows`` (``[B']`` indices) in every buffer: rows that ended leave."""
        self.keys = [keys.index_select(0, rows) for keys in self.keys]
        self.values = [values.index_select(0, rows) for values in self.values]
        self.attends = self.attends.index_select(0, rows)


class PackedDecoder:
    """Decoding steps of a model :func:`can_decode` accepts, reading its packed layers at each
    call (so a sampling copy refreshed after an update is used as it is then)."""

    def __init__(self, model: Any) -> None:
        if not can_decode(model):
            raise ValueError("PackedDecoder needs a Llama whose linear layers are PackedLinear "
                             "without bias, in its embeddings' dtype, float32 or bfloat16 "
                             "(grpo_core.packed.pack_linears)")
        self.model = model
        self.eps = model.config.rms_norm_eps

    def _norm(self, hidden: Tensor, weight: Tensor) -> Tensor:
        return torch.rms_norm(hidden, weight.shape, weight, self.eps)

    @torch.inference_mode()
    def step(self, tokens: Tensor, positions: Tensor, cache: DecodeCache) -> Tensor:
        """``[B]`` tokens at ``[B]`` positions (rotary) -> ``[B, V]`` next-token logits; their
        keys and values are written at ``cache.filled``, which then grows by one."""
        if cache.room < 1:
            raise ValueError("the decode cache is full: build it with a larger reserve")
        if tokens.size(0) != cache.attends.size(0):
            raise ValueError(f"{tokens.size(0)} tokens for a cache of {cache.attends.size(0)} rows")
        model, at = self.model, cache.filled
        rows = tokens.size(0)
        hidden = model.model.embed_tokens(tokens)  # [B, hidden]
        cos, sin = model.model.rotary_emb(hidden, positions[:, None])  # [B, 1, D] each
        half = sin.size(-1) // 2
        signed_sin = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
        attends = cache.attends[:, None, None, :at + 1]  # [B, 1, 1, T]
        for index, layer in enumerate(model.model.layers):
            attention, mlp = layer.self_attn, layer.mlp
            kv_heads, _, dim = cache.keys[index].shape[1:]
            x = self._norm(hidden, layer.input_layernorm.weight)
            query = _rope(attention.q_proj.product(x).view(rows, -1, dim), cos, signed_sin)
            key = attention.k_proj.product(x).view(rows, kv_heads, dim)
            cache.keys[index][:, :, at] = _rope(key, cos, signed_sin)
            cache.values[index][:, :, at] = attention.v_proj.product(x).view(rows, kv_heads, dim)
            # [B, KV, G, D]: query heads h = kv * G + g share key/value head kv (repeat_kv's order)
            grouped = query.view(rows, kv_heads, -1, dim)
            mixed = functional.scaled_dot_product_attention(
                grouped, cache.keys[index][:, :, :at + 1], cache.values[index][:, :, :at + 1],
                attn_mask=attends, scale=attention.scaling)
            hidden = attention.o_proj.product(mixed.reshape(rows, -1), hidden)
            x = self._norm(hidden, layer.post_attention_layernorm.weight)
            gated = functional.silu(mlp.gate_proj.product(x)).mul_(mlp.up_proj.product(x))
            hidden = mlp.down_proj.product(gated, hidden)
        cache.filled += 1
        return model.lm_head.product(self._norm(hidden, model.model.norm.weight))
