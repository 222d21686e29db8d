"""The reserved key/value cache holds what HF's DynamicCache holds, without copying on each token."""

import pytest
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from grpo_core.kv_cache import ReservedLayer, reserved_cache


def _states(batch: int, positions: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(batch, 2, positions, 4, generator=generator)
    return keys, torch.randn(batch, 2, positions, 3, generator=generator)  # values: other width


def _same(ours: ReservedLayer, theirs: DynamicLayer) -> bool:
    return torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)


def test_updates_row_selection_and_cropping_hold_what_a_dynamic_layer_holds():
    ours, theirs = ReservedLayer(reserve=2), DynamicLayer()
    steps = [("update", 2, 5), ("select", torch.tensor([0, 0, 1, 1])), ("update", 4, 1),
             ("update", 4, 1), ("update", 4, 1), ("select", torch.tensor([1, 3])),
             ("update", 2, 1), ("crop", -2), ("update", 2, 3)]
    for seed, (what, *args) in enumerate(steps):
        if what == "update":
            batch, positions = args
            returned = [layer.update(*_states(batch, positions, seed)) for layer in (ours, theirs)]
            assert all(torch.equal(a, b) for a, b in zip(*returned, strict=True))
        elif what == "select":
            for layer in (ours, theirs):
                layer.batch_select_indices(args[0])
        else:
            for layer in (ours, theirs):
                layer.crop(args[0])
        assert _same(ours, theirs), f"after step {seed}: {what}"
        assert ours.get_seq_length() == theirs.get_seq_length()


def test_a_token_within_the_reserve_is_written_in_place():
    layer = ReservedLayer(reserve=3)
    layer.update(*_states(2, 5, 0))
    start = layer.keys.data_ptr(), layer.values.data_ptr()
    for seed in range(1, 4):  # three more positions: all inside the room reserved
        layer.update(*_states(2, 1, seed))
        assert (layer.keys.data_ptr(), layer.values.data_ptr()) == start
    assert layer.get_seq_length() == 8
    layer.update(*_states(2, 1, 9))  # beyond the reserve: a larger buffer, same contents
    assert layer.get_seq_length() == 9 and layer.keys.data_ptr() != start[0]


def test_rows_leaving_the_batch_never_widen_the_room():
    layer = ReservedLayer(reserve=3)
    layer.update(*_states(4, 5, 0))  # room for 8 positions
    layer.update(*_states(4, 1, 1))
    layer.update(*_states(4, 1, 2))
    layer.batch_select_indices(torch.tensor([1, 2]))
    layer.update(*_states(2, 1, 3))  # the eighth position: the room is exactly full
    assert layer.keys.untyped_storage().nbytes() == 2 * 2 * 8 * 4 * 4  # rows x heads x 8 x dim
    layer.update(*_states(2, 1, 4))  # the ninth: 3 more reserved
    assert layer.keys.untyped_storage().nbytes() == 2 * 2 * 12 * 4 * 4


def test_with_no_reserve_every_token_widens_the_room_and_nothing_is_lost():
    ours, theirs = ReservedLayer(reserve=0), DynamicLayer()
    for seed, positions in enumerate([3, 1, 1]):
        for layer in (ours, theirs):
            layer.update(*_states(2, positions, seed))
        assert _same(ours, theirs)
        assert ours.keys.untyped_storage().nbytes() == 2 * 2 * ours.get_seq_length() * 4 * 4


def test_reset_empties_the_layer():
    layer = ReservedLayer(reserve=3)
    layer.update(*_states(2, 5, 0))
    layer.reset()
    keys, _ = layer.update(*_states(1, 2, 1))
    assert keys.shape == (1, 2, 2, 4)


def test_a_negative_reserve_is_refused():
    with pytest.raises(ValueError, match="reserve"):
        ReservedLayer(reserve=-1)


def test_the_model_computes_the_same_logits_with_either_cache(tiny_policy):
    """Left-padded prompts, a prompt pass copied to two rows each, then tokens one at a time with a
    row leaving the batch: every step's logits equal DynamicCache's exactly."""
    model, _ = tiny_policy
    ids = torch.tensor([[0, 5, 6, 7], [8, 9, 10, 11]])
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    caches = [reserved_cache(model.config, reserve=4), DynamicCache(config=model.config)]
    assert len(caches[0].layers) == model.config.num_hidden_layers
    assert all(isinstance(layer, ReservedLayer) for layer in caches[0].layers)
    with torch.no_grad():
        logits = [model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True).logits
                  for cache in caches]
        assert torch.equal(*logits)
        rows = torch.tensor([0, 0, 1, 1])
        for cache in caches:
            cache.batch_select_indices(rows)
        mask = mask[rows]
        for step, token in enumerate([12, 13, 14, 15, 16, 17]):  # two more than the reserve
            if step == 3:  # row 1 ends
                kept = torch.tensor([0, 2, 3])
                for cache in caches:
                    cache.batch_select_indices(kept)
                mask = mask[kept]
            mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=1)
            tokens = torch.full((mask.size(0), 1), token)
            logits = [model(input_ids=tokens, attention_mask=mask, cache=cache,
                            use_cache=True).logits for cache in caches]
            assert torch.equal(*logits), f"step {step}"


def test_a_sliding_window_layer_keeps_its_own_class():
    """Only full-attention layers are reserved: a sliding-window layer (a subclass of
    DynamicLayer that drops old positions) stays what the model asked for."""
    from transformers import Qwen3Config
    from transformers.cache_utils import DynamicSlidingWindowLayer

    config = Qwen3Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                         use_sliding_window=True, sliding_window=4,
                         layer_types=["full_attention", "sliding_attention"])
    kinds = [type(layer) for layer in reserved_cache(config, reserve=4).layers]
    assert kinds == [ReservedLayer, DynamicSlidingWindowLayer]
