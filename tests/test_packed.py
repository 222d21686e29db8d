"""Prepacked linear layers (grpo_core.packed): the same products as ``nn.Linear``, every
linear layer of a model replaced, released and repacked, and a clear answer where torch
cannot pack."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grpo_core import packed
from grpo_core.packed import PackedLinear, pack_linears, packing_available

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch cannot pack weights")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 12), (2, 3, 12)])
def test_a_packed_layer_computes_what_linear_computes(bias, shape):
    torch.manual_seed(0)
    linear = nn.Linear(12, 7, bias=bias)
    x = torch.randn(*shape)
    got = PackedLinear(linear)(x)
    assert got.shape == (*shape[:-1], 7)
    torch.testing.assert_close(got, linear(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_a_residual_is_added_by_the_packed_product(bias):
    torch.manual_seed(0)
    linear = nn.Linear(12, 7, bias=bias)
    x, residual = torch.randn(5, 12), torch.randn(5, 7)
    got = PackedLinear(linear).product(x, residual)
    torch.testing.assert_close(got, linear(x) + residual, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not packing_available("bfloat16"), reason="no packed bfloat16 kernel here")
def test_a_packed_bfloat16_layer_rounds_like_a_bfloat16_linear():
    torch.manual_seed(0)
    linear = nn.Linear(64, 32).to(torch.bfloat16)
    x = torch.randn(16, 64, dtype=torch.bfloat16)
    got = PackedLinear(linear)(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), linear(x).float(), atol=0.05, rtol=0.02)


def test_a_released_layer_refuses_to_run_until_repacked_with_new_weights():
    torch.manual_seed(0)
    linear = nn.Linear(6, 4)
    layer = PackedLinear(linear)
    layer.release()
    assert layer.released and layer.packed.numel() == 0
    with pytest.raises(RuntimeError, match="repack"):
        layer(torch.randn(2, 6))
    new_weight, new_bias = torch.randn(4, 6), torch.randn(4)
    layer.repack(new_weight, new_bias)
    x = torch.randn(3, 6)
    torch.testing.assert_close(layer(x), x @ new_weight.T + new_bias, atol=1e-5, rtol=1e-5)


def test_every_linear_of_a_model_is_packed_and_its_logits_stay(new_tiny_policy):
    model, tokenizer = new_tiny_policy(layers=2)
    ids = tokenizer(["abc de", "fg hij"], return_tensors="pt").input_ids
    with torch.no_grad():
        before = model(ids).logits
    linears = {name for name, m in model.named_modules() if type(m) is nn.Linear}
    replaced = pack_linears(model)
    assert set(replaced) == linears and "lm_head" in replaced  # the tied head too
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert all(isinstance(model.get_submodule(name), PackedLinear) for name in replaced)
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, before, atol=1e-5, rtol=1e-5)


def test_packing_is_refused_where_the_library_is_missing_or_disagrees(monkeypatch):
    packing_available.cache_clear()
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert not packing_available()
    packing_available.cache_clear()
    monkeypatch.undo()
    monkeypatch.setattr(packed, "_pack", lambda weight, rows: weight.detach() * 2)
    assert not packing_available()  # a wrong product is caught, not trusted
    packing_available.cache_clear()
    monkeypatch.undo()
    assert packing_available()
