"""The written-out decoding step (grpo_core.packed_decoder): which models it takes, the model's
own logits at every step (left padding, grouped-query attention, rows leaving), the decoding
loop's tokens unchanged, and clear errors."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from grpo_core.packed import pack_linears, packing_available
from grpo_core.packed_decoder import DecodeCache, PackedDecoder, can_decode
from grpo_core.rollout import _positions, decode_until

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch cannot pack weights")


def llama(**overrides) -> LlamaForCausalLM:
    """Two layers, 4 query heads sharing 2 key/value heads (G = 2), random weights."""
    torch.manual_seed(0)
    settings = dict(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                    tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    return LlamaForCausalLM(LlamaConfig(**{**settings, **overrides})).eval()


def packed_copy(model):
    sampler = copy.deepcopy(model)
    pack_linears(sampler)
    return sampler


def test_only_a_packed_llama_in_one_dtype_without_biases_is_written_out():
    model = llama()
    assert not can_decode(model)  # nn.Linear: the model's own forward
    assert can_decode(packed_copy(model))
    mixed = packed_copy(model)
    mixed.model.layers[1].mlp.down_proj.dtype = torch.bfloat16  # one layer is enough
    assert not can_decode(mixed)  # (packing bfloat16 needs instructions CI may not have)
    mixed.model.embed_tokens.to(torch.bfloat16)  # the rest of the copy is still float32
    assert not can_decode(mixed)
    half = packed_copy(model)
    half.to(torch.float16)  # a float16 embedding, float32 products
    assert not can_decode(half)
    assert not can_decode(packed_copy(llama(attention_bias=True)))
    assert not can_decode(packed_copy(llama(hidden_act="gelu")))
    qwen3 = Qwen3ForCausalLM(Qwen3Config(vocab_size=50, hidden_size=32, intermediate_size=48,
                                         num_hidden_layers=1, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=8))
    assert not can_decode(packed_copy(qwen3))  # its query/key norms are not written out
    assert not can_decode(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="PackedLinear"):
        PackedDecoder(model)


def prompt_pass(model, ids, mask):
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask), cache=cache,
              use_cache=True)
    return cache


BFLOAT16 = pytest.param(torch.bfloat16, 3e-2, marks=pytest.mark.skipif(
    not packing_available("bfloat16"), reason="this CPU cannot pack bfloat16 weights"))


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), BFLOAT16])
def test_every_step_gives_the_models_logits_with_padding_and_rows_leaving(dtype, tolerance):
    model = llama().to(dtype)
    sampler = packed_copy(model)
    assert can_decode(sampler)
    ids = torch.tensor([[0, 0, 5, 6], [7, 8, 9, 10], [0, 11, 12, 13]])
    mask = (ids != 0).long()
    reference = prompt_pass(model, ids, mask)
    cache = DecodeCache.from_layers([(layer.keys, layer.values) for layer in
                                     prompt_pass(sampler, ids, mask).layers], mask, reserve=6)
    assert cache.filled == 4 and cache.room == 6 and cache.keys[0].shape == (3, 2, 10, 8)
    assert cache.attends[:, :4].tolist() == mask.bool().tolist() and cache.attends[:, 4:].all()
    decoder = PackedDecoder(sampler)
    positions = _positions(mask)[:, -1]
    tokens = torch.tensor([14, 15, 16])
    full_mask = mask
    for step in range(5):
        if step == 2:  # row 1 ends: it leaves both caches
            kept = torch.tensor([0, 2])
            reference.batch_select_indices(kept)
            cache.keep_rows(kept)
            tokens, positions, full_mask = tokens[kept], positions[kept], full_mask[kept]
        positions = positions + 1
        full_mask = torch.cat([full_mask, full_mask.new_ones(full_mask.size(0), 1)], dim=1)
        got = decoder.step(tokens, positions, cache)
        with torch.no_grad():
            want = model(input_ids=tokens[:, None], attention_mask=full_mask,
                         position_ids=positions[:, None], cache=reference,
                         use_cache=True).logits[:, -1]
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance)
        assert cache.filled == 5 + step
        tokens = want.argmax(-1)
    close = {} if dtype == torch.float32 else {"atol": tolerance, "rtol": tolerance}
    for layer, (keys, values) in enumerate(zip(cache.keys, cache.values, strict=True)):
        torch.testing.assert_close(keys[:, :, :cache.filled], reference.layers[layer].keys,
                                   **close)
        torch.testing.assert_close(values[:, :, :cache.filled], reference.layers[layer].values,
                                   **close)


def test_the_decoding_loop_draws_the_same_tokens_from_the_written_out_step(new_tiny_policy):
    model, tokenizer = new_tiny_policy(layers=2)
    sampler = packed_copy(model)
    assert can_decode(sampler)
    encoded = tokenizer(["abc de", "abc de", "fg", "fg"], return_tensors="pt", padding=True)
    results = []
    for m in (model, sampler):
        torch.manual_seed(3)
        results.append(decode_until(m, encoded["input_ids"], encoded["attention_mask"],
                                    max_new_tokens=12, eos_token_ids=[1], pad_token_id=0,
                                    next_token=lambda logits: torch.multinomial(
                                        logits.softmax(-1), 1)[:, 0]))
    (ours, _), (theirs, _) = results
    assert torch.equal(ours, theirs)
    assert (ours == 0).any(dim=1).any() or ours.size(1) == 12  # rows end or run the budget


def test_a_full_cache_a_wrong_batch_and_a_released_layer_are_refused():
    sampler = packed_copy(llama())
    ids = torch.tensor([[5, 6], [7, 8]])
    mask = torch.ones_like(ids)
    layers = [(layer.keys, layer.values) for layer in prompt_pass(sampler, ids, mask).layers]
    decoder = PackedDecoder(sampler)
    cache = DecodeCache.from_layers(layers, mask, reserve=1)
    decoder.step(torch.tensor([3, 4]), torch.tensor([2, 2]), cache)
    with pytest.raises(ValueError, match="full"):
        decoder.step(torch.tensor([3, 4]), torch.tensor([3, 3]), cache)
    cache = DecodeCache.from_layers(layers, mask, reserve=1)
    with pytest.raises(ValueError, match="3 tokens for a cache of 2 rows"):
        decoder.step(torch.tensor([3, 4, 5]), torch.tensor([2, 2, 2]), cache)
    with pytest.raises(ValueError, match="reserve"):
        DecodeCache.from_layers(layers, mask, reserve=-1)
    assert DecodeCache.from_layers(layers, mask, reserve=0).room == 0  # a prompt alone is fine
    with pytest.raises(ValueError, match="holds 2 positions, the mask 3"):
        DecodeCache.from_layers(layers, torch.ones(2, 3, dtype=torch.long), reserve=1)
    sampler.lm_head.release()
    with pytest.raises(RuntimeError, match="repack"):
        decoder.step(torch.tensor([3, 4]), torch.tensor([2, 2]), cache)


def test_greedy_decoding_of_the_packed_course_model_matches_generate(smoke_policy):
    """SmolLM2's own shape (30 layers, 9 query heads on 3 key/value heads, its rotary base):
    with argmax, the written-out step writes ``generate``'s tokens, row by row."""
    from grpo_core.logprobs import completion_mask
    from grpo_core.rollout import _eos_token_ids, chat_prompt

    model, tokenizer = smoke_policy
    sampler = packed_copy(model)
    assert can_decode(sampler)
    texts = ["Say hi.", "Count to three, please."]
    encoded = tokenizer([chat_prompt(tokenizer, t) for t in texts], return_tensors="pt",
                        padding=True, add_special_tokens=False)
    assert encoded["attention_mask"][0].eq(0).any()  # left padding is exercised
    eos = _eos_token_ids(model, tokenizer)
    ours, _ = decode_until(sampler, encoded["input_ids"], encoded["attention_mask"],
                           max_new_tokens=16, eos_token_ids=eos,
                           pad_token_id=tokenizer.pad_token_id,
                           next_token=lambda logits: logits.argmax(-1))
    theirs = model.generate(**encoded, do_sample=False, max_new_tokens=16,
                            pad_token_id=tokenizer.pad_token_id)[:, encoded["input_ids"].shape[1]:]
    for row in range(2):
        ended = completion_mask(ours[row:row + 1], eos)[0].bool()
        assert torch.equal(ours[row][ended], theirs[row][: int(ended.sum())])
