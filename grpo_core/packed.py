"""Linear layers with prepacked weights, for the CPU sampling copy (notebook 04, section 6).

A decoding step multiplies a few rows (one new token per completion: 16 at 2 prompts x 8) by
every weight matrix of the model. With so few rows, how the weight is laid out in memory for
the kernel matters as much as the arithmetic. oneDNN, the library torch's CPU build ships,
can rearrange (pack) a weight once into the blocked layout its kernel reads
(``torch.ops.mkldnn._reorder_linear_weight``) and multiply by the packed copy from then on
(``torch.ops.mkldnn._linear_pointwise``): what ``torch.compile`` does for a frozen CPU model,
without needing a compiler. The sampling copy is frozen between two updates (the loop
refreshes it after each one), so it packs once per step and then decodes every token.

Measured on a 2-core AMD EPYC (AVX512-BF16), idle, SmolLM2-135M, 16 rows, a 32-token
decode: a float32 decoding step 105 ms -> 71 ms packed; bfloat16 66 ms -> 52 ms (the numbers
``benchmarks/bench_step.py`` reports for the whole step are in docs/performance.md).

What it leaves out: the training pass keeps ``nn.Linear`` (its weights change at every step,
its products have thousands of rows, and it needs gradients; packing there was not tried);
the ops are private
to torch (:func:`packing_available` checks them, and the plan falls back to sampling from the
policy itself where they are missing or disagree with ``linear``).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

# the rows the kernels are packed for: a decoding step's batch (prompts x group size)
ROWS_HINT = 16


def _pack(weight: Tensor, rows: int) -> Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)


def _packed_rows(rows: Tensor, packed: Tensor, bias: Tensor | None,
                 residual: Tensor | None = None) -> Tensor:
    """``[N, in]`` -> ``[N, out]``: ``rows @ W.T + b`` with ``W`` prepacked by :func:`_pack`,
    plus ``[N, out]`` ``residual`` when given, added inside the kernel (oneDNN's ``add``
    post-op: no separate pass over the output)."""
    if residual is None:
        return torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [], "")
    return torch.ops.mkldnn._linear_pointwise.binary(rows, residual, packed, bias, "add")


class PackedLinear(nn.Module):
    """An inference-only ``nn.Linear`` whose weight is packed once for oneDNN's kernel.

    Holds no parameters (the packed weight is a plain tensor): the sampling copy is refreshed
    from the policy with :meth:`repack` and emptied with :meth:`release`.
    """

    def __init__(self, linear: nn.Linear, rows: int = ROWS_HINT) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.rows = rows
        self.dtype = linear.weight.dtype
        self.packed = _pack(linear.weight, rows)
        self.bias = None if linear.bias is None else linear.bias.detach().clone()

    @property
    def released(self) -> bool:
        return self.packed.numel() == 0

    @torch.no_grad()
    def repack(self, weight: Tensor, bias: Tensor | None = None) -> None:
        """Pack ``weight`` (``[out, in]``, cast to this layer's dtype) in place of the old one."""
        self.packed = _pack(weight.to(self.dtype), self.rows)
        if bias is not None:
            self.bias = bias.detach().to(self.dtype).clone()

    def release(self) -> None:
        """Free the packed weight until the next :meth:`repack`."""
        self.packed = self.packed.new_empty(0)

    def product(self, rows: Tensor, residual: Tensor | None = None) -> Tensor:
        """``[N, in]`` -> ``[N, out]``, plus ``residual`` when given (added by the kernel
        itself): :meth:`forward` without the module call and the reshapes, 10-20 µs less per
        product (16 rows, 576 -> 192, AVX2-only AMD EPYC), and
        :mod:`grpo_core.packed_decoder` calls it 211 times a decoding step."""
        if self.released:
            raise RuntimeError("this packed layer was released: repack it before sampling")
        return _packed_rows(rows, self.packed, self.bias, residual)

    def forward(self, x: Tensor) -> Tensor:
        """``[..., in]`` -> ``[..., out]``: ``x @ W.T + b``."""
        out = self.product(x.reshape(-1, x.size(-1)))
        return out.reshape(*x.shape[:-1], out.size(-1))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={self.dtype}, packed for {self.rows} rows")


def pack_linears(model: nn.Module, rows: int = ROWS_HINT) -> list[str]:
    """Replace every ``nn.Linear`` of ``model`` (in place) by a :class:`PackedLinear` of the
    same weight; returns the replaced modules' names (``model.named_modules()`` names)."""
    replaced = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if type(child) is nn.Linear:  # not subclasses (adapters' layers wrap their own)
                setattr(parent, child_name, PackedLinear(child, rows))
                replaced.append(f"{parent_name}.{child_name}" if parent_name else child_name)
    return replaced


@functools.cache
def packing_available(dtype: str = "float32") -> bool:
    """Whether this torch can pack ``dtype`` linear weights for its CPU kernel, and the packed
    product agrees with ``linear`` on a small case (to float32's or bfloat16's rounding)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        generator = torch.Generator().manual_seed(0)
        x, weight, bias = (torch.randn(*shape, generator=generator).to(getattr(torch, dtype))
                           for shape in ((3, 8), (5, 8), (5,)))
        got = _packed_rows(x, _pack(weight, 3), bias).float()
        want = nn.functional.linear(x, weight, bias).float()
        return bool(torch.allclose(got, want, atol=1e-5 if dtype == "float32" else 5e-2))
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
