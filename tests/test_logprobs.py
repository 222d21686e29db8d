"""grpo_core.logprobs: masks, selective log-softmax against the naive formula, a tiny causal LM."""

from __future__ import annotations

import math
import os

import pytest
import torch

from grpo_core.logprobs import (
    completion_mask,
    logprobs_from_logits,
    sequence_logprob,
    shared_prompt_logits,
    token_entropy,
    token_logprobs,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 32
EOS, PAD = 1, 0


def naive_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """The textbook formula: full log-softmax, then pick the label."""
    return (
        torch.log_softmax(logits.double() / temperature, dim=-1)
        .gather(-1, labels.unsqueeze(-1))
        .squeeze(-1)
    )


# --- completion mask and sequence log-prob ----------------------------------------------------


def test_completion_mask_keeps_tokens_up_to_and_including_the_first_eos():
    ids = torch.tensor([[5, EOS, PAD, PAD], [5, 6, 7, 8], [EOS, PAD, PAD, PAD], [5, 6, EOS, EOS]])
    expected = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]])
    mask = completion_mask(ids, EOS)
    assert mask.dtype == torch.long
    assert torch.equal(mask, expected)


def test_completion_mask_with_several_eos_ids_and_zero_width():
    ids = torch.tensor([[5, 2, 7], [5, 6, EOS]])
    assert torch.equal(completion_mask(ids, [EOS, 2]), torch.tensor([[1, 1, 0], [1, 1, 1]]))
    assert completion_mask(torch.zeros(3, 0, dtype=torch.long), EOS).shape == (3, 0)


def test_sequence_logprob_is_the_masked_sum_and_ignores_junk_in_padding():
    token_logps = torch.tensor(
        [[-1.0, -2.0, float("-inf")], [-0.5, float("nan"), -3.0], [-1.0, -1.0, -1.0]]
    )
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert torch.equal(sequence_logprob(token_logps, mask), torch.tensor([-3.0, -0.5, 0.0]))


# --- selective log-softmax ----------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk_size", [1, 3, 512])
def test_logprobs_from_logits_match_the_naive_formula(temperature, chunk_size):
    generator = torch.Generator().manual_seed(0)
    logits = 4 * torch.randn(3, 5, VOCAB, generator=generator)
    labels = torch.randint(VOCAB, (3, 5), generator=generator)
    logps = logprobs_from_logits(logits, labels, temperature, chunk_size)
    assert logps.dtype == torch.float32
    torch.testing.assert_close(
        logps.double(), naive_logprobs(logits, labels, temperature), atol=1e-6, rtol=1e-6
    )


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_from_logits_gradient_matches_autograd(temperature):
    generator = torch.Generator().manual_seed(1)
    logits = (3 * torch.randn(2, 4, 7, generator=generator, dtype=torch.float64)).requires_grad_()
    labels = torch.randint(7, (2, 4), generator=generator)
    assert torch.autograd.gradcheck(
        lambda x: logprobs_from_logits(x, labels, temperature, 3).double(), (logits,)
    )
    upstream = torch.randn(2, 4, generator=generator, dtype=torch.float64)
    (ours,) = torch.autograd.grad(
        (logprobs_from_logits(logits, labels, temperature, 3) * upstream).sum(), logits
    )
    (naive,) = torch.autograd.grad(
        (naive_logprobs(logits, labels, temperature) * upstream).sum(), logits
    )
    torch.testing.assert_close(ours.double(), naive, atol=1e-6, rtol=1e-6)


def test_bf16_logits_give_float32_logprobs_and_bf16_gradients():
    generator = torch.Generator().manual_seed(2)
    logits = (4 * torch.randn(2, 6, VOCAB, generator=generator)).to(torch.bfloat16).requires_grad_()
    labels = torch.randint(VOCAB, (2, 6), generator=generator)
    logps = logprobs_from_logits(logits, labels)
    assert logps.dtype == torch.float32
    # exact to float32 precision for the bf16 values given (a bf16 log-softmax would be off by ~1e-2)
    torch.testing.assert_close(
        logps.double(), naive_logprobs(logits.detach(), labels), atol=1e-5, rtol=1e-6
    )
    logps.sum().backward()
    assert logits.grad.dtype == torch.bfloat16


def test_backward_keeps_no_float32_copy_of_the_vocabulary():
    logits = torch.randn(2, 8, 1000).to(torch.bfloat16).requires_grad_()
    labels = torch.randint(1000, (2, 8))
    saved = []

    def pack(tensor):
        saved.append((tensor.dtype, tuple(tensor.shape)))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logprobs_from_logits(logits, labels).sum()
    full_vocab_float32 = [
        entry for entry in saved if entry[0] == torch.float32 and entry[1][-1:] == (1000,)
    ]
    assert full_vocab_float32 == []


def test_token_entropy_matches_the_definition():
    generator = torch.Generator().manual_seed(3)
    logits = 3 * torch.randn(2, 5, VOCAB, generator=generator)
    probs = torch.softmax(logits.double() / 0.7, dim=-1)
    expected = -(probs * probs.log()).sum(-1)
    torch.testing.assert_close(
        token_entropy(logits, 0.7, chunk_size=3).double(), expected, atol=1e-5, rtol=1e-6
    )
    uniform = token_entropy(torch.zeros(1, 2, VOCAB, dtype=torch.bfloat16))
    assert uniform.dtype == torch.float32
    torch.testing.assert_close(uniform, torch.full((1, 2), math.log(VOCAB)))


# --- a real (tiny) causal LM -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm():
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=64,
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.fixture(scope="module")
def batch():
    """Left-padded prompts of widths 3, 2, 1 and right-padded completions of lengths 4, 2, 1."""
    prompt_ids = torch.tensor([[5, 6, 7], [PAD, 8, 9], [PAD, PAD, 10]])
    prompt_mask = (prompt_ids != PAD).long()
    completion_ids = torch.tensor([[11, 12, 13, EOS], [14, EOS, PAD, PAD], [EOS, PAD, PAD, PAD]])
    comp_mask = completion_mask(completion_ids, EOS)
    return (
        torch.cat([prompt_ids, completion_ids], 1),
        torch.cat([prompt_mask, comp_mask], 1),
        comp_mask,
    )


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_match_the_full_forward(tiny_lm, batch, temperature):
    input_ids, attention_mask, comp_mask = batch
    width = comp_mask.size(1)
    logps, entropy = token_logprobs(
        tiny_lm, input_ids, attention_mask, width, temperature=temperature, return_entropy=True
    )
    full_logits = tiny_lm(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1][
        :, -width:
    ]
    expected = naive_logprobs(full_logits, input_ids[:, -width:], temperature) * comp_mask
    assert logps.shape == entropy.shape == (3, width) and logps.dtype == torch.float32
    torch.testing.assert_close(logps.double(), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(
        entropy, token_entropy(full_logits, temperature) * comp_mask, atol=1e-6, rtol=1e-6
    )
    assert torch.equal(logps[comp_mask == 0], torch.zeros(int((comp_mask == 0).sum())))


def test_the_model_is_asked_for_the_completion_positions_only(tiny_lm, batch):
    # the memory promise: logits for the C positions that predict the completion, never for
    # the whole prompt
    input_ids, attention_mask, comp_mask = batch
    width = comp_mask.size(1)
    shapes = []
    hook = tiny_lm.register_forward_hook(
        lambda module, args, output: shapes.append(tuple(output.logits.shape)))
    try:
        with torch.no_grad():
            token_logprobs(tiny_lm, input_ids, attention_mask, width, return_entropy=True)
    finally:
        hook.remove()
    assert input_ids.size(1) > width + 1
    assert shapes == [(input_ids.size(0), width, VOCAB)]


def test_scored_positions_are_the_ones_that_predict_the_completion():
    from grpo_core.logprobs import scored_positions

    # a sequence of 7 with a completion of 3 (tokens 4, 5, 6): positions 3, 4, 5 predict them
    assert scored_positions(7, 3).tolist() == [3, 4, 5]
    assert scored_positions(5, 0).tolist() == []


def test_token_logprobs_gradient_reaches_the_model(tiny_lm, batch):
    input_ids, attention_mask, comp_mask = batch
    width = comp_mask.size(1)
    tiny_lm.zero_grad()
    sequence_logprob(
        token_logprobs(tiny_lm, input_ids, attention_mask, width), comp_mask
    ).sum().backward()
    ours = [p.grad.clone() for p in tiny_lm.parameters()]
    tiny_lm.zero_grad()
    full_logits = tiny_lm(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1][
        :, -width:
    ]
    (naive_logprobs(full_logits, input_ids[:, -width:]) * comp_mask).sum().backward()
    for mine, theirs in zip(ours, (p.grad for p in tiny_lm.parameters()), strict=True):
        torch.testing.assert_close(mine.double(), theirs.double(), atol=1e-6, rtol=1e-5)
    assert any(g.abs().sum() > 0 for g in ours)
    tiny_lm.zero_grad()


def test_token_logprobs_of_a_bf16_model_are_float32(tiny_lm, batch):
    import copy

    model = copy.deepcopy(tiny_lm).to(torch.bfloat16)
    input_ids, attention_mask, comp_mask = batch
    with torch.no_grad():
        logps = token_logprobs(model, input_ids, attention_mask, comp_mask.size(1))
    assert logps.dtype == torch.float32 and torch.isfinite(logps).all()


def test_zero_width_completion_gives_empty_tensors(tiny_lm, batch):
    input_ids, attention_mask, _ = batch
    logps, entropy = token_logprobs(tiny_lm, input_ids, attention_mask, 0, return_entropy=True)
    assert logps.shape == entropy.shape == (3, 0)


# --- bad input ----------------------------------------------------------------------------------


def test_bad_inputs_raise_value_errors(tiny_lm, batch):
    input_ids, attention_mask, _ = batch
    with pytest.raises(ValueError, match="must both be"):
        token_logprobs(tiny_lm, input_ids, attention_mask[:, 1:], 4)
    with pytest.raises(ValueError, match="logits_to_keep must be the completion width"):
        token_logprobs(tiny_lm, input_ids, attention_mask, input_ids.size(1))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_logprobs(tiny_lm, input_ids, attention_mask, 4, temperature=0.0)
    with pytest.raises(ValueError, match=r"logits must be \[B, C, V\]"):
        logprobs_from_logits(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="mask the same shape"):
        sequence_logprob(torch.zeros(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"completion_ids must be \[B, C\]"):
        completion_mask(torch.zeros(3, dtype=torch.long), EOS)


# --- dtypes, shapes and defaults ------------------------------------------------------------------


def test_the_completion_mask_is_long_whatever_the_id_dtype():
    ids = torch.tensor([[5, EOS, 7], [5, 6, 7]], dtype=torch.int32)
    assert completion_mask(ids, EOS).dtype == torch.long
    assert completion_mask(ids[:, :0], EOS).dtype == torch.long
    assert completion_mask(ids, [EOS]).tolist() == [[1, 1, 0], [1, 1, 1]]


def test_a_zero_width_completion_gives_float32_and_no_entropy_unless_asked(tiny_lm, batch):
    input_ids, attention_mask, _ = batch
    logps = token_logprobs(tiny_lm, input_ids, attention_mask, 0)
    assert isinstance(logps, torch.Tensor) and logps.shape == (3, 0)
    assert logps.dtype == torch.float32
    both = token_logprobs(tiny_lm, input_ids, attention_mask, 0, return_entropy=True)
    assert [t.dtype for t in both] == [torch.float32, torch.float32]


def test_float64_logits_stay_float64():
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 3, VOCAB, generator=generator, dtype=torch.float64)
    labels = torch.randint(VOCAB, (2, 3), generator=generator)
    assert logprobs_from_logits(logits, labels).dtype == torch.float64
    assert token_entropy(logits).dtype == torch.float64
    torch.testing.assert_close(logprobs_from_logits(logits, labels, 0.7),
                               naive_logprobs(logits, labels, 0.7))


def test_bf16_logits_at_a_temperature_are_divided_in_float32():
    generator = torch.Generator().manual_seed(5)
    logits = (4 * torch.randn(2, 6, VOCAB, generator=generator)).to(torch.bfloat16)
    labels = torch.randint(VOCAB, (2, 6), generator=generator)
    torch.testing.assert_close(logprobs_from_logits(logits, labels, 0.7).double(),
                               naive_logprobs(logits, labels, 0.7), atol=1e-5, rtol=1e-6)
    entropy = token_entropy(logits, 0.7)
    probs = torch.softmax(logits.double() / 0.7, dim=-1)
    torch.testing.assert_close(entropy.double(), -(probs * probs.log()).sum(-1),
                               atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("shape", [(VOCAB,), (7, VOCAB), (2, 3, VOCAB), (2, 2, 3, VOCAB)])
def test_token_entropy_takes_any_leading_shape(shape):
    generator = torch.Generator().manual_seed(6)
    logits = 3 * torch.randn(*shape, generator=generator)
    probs = torch.softmax(logits.double(), dim=-1)
    entropy = token_entropy(logits, chunk_size=2)  # default temperature: 1
    assert entropy.shape == shape[:-1]
    torch.testing.assert_close(entropy.double(), -(probs * probs.log()).sum(-1),
                               atol=1e-5, rtol=1e-6)


def test_the_default_temperature_is_1():
    generator = torch.Generator().manual_seed(7)
    logits = torch.randn(1, 4, VOCAB, generator=generator)
    labels = torch.randint(VOCAB, (1, 4), generator=generator)
    torch.testing.assert_close(logprobs_from_logits(logits, labels),
                               logprobs_from_logits(logits, labels, 1.0))
    torch.testing.assert_close(token_entropy(logits), token_entropy(logits, 1.0))
    assert not torch.equal(token_entropy(logits), token_entropy(logits, 2.0))


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan")])
def test_a_temperature_that_is_not_positive_is_refused_everywhere(temperature):
    logits, labels = torch.zeros(1, 2, VOCAB), torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        logprobs_from_logits(logits, labels, temperature)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_entropy(logits, temperature)


def test_a_chunk_size_below_1_is_refused():
    with pytest.raises(ValueError, match="chunk_size must be >= 1, got 0"):
        token_entropy(torch.zeros(1, 2, VOCAB), chunk_size=0)


def test_the_gradient_of_bf16_logits_at_a_temperature_is_computed_in_float32():
    generator = torch.Generator().manual_seed(8)
    logits = (4 * torch.randn(2, 6, VOCAB, generator=generator)).to(torch.bfloat16)
    labels = torch.randint(VOCAB, (2, 6), generator=generator)
    weights = torch.randn(2, 6, generator=generator)
    reference = logits.double().requires_grad_()
    (naive_logprobs(reference, labels, 0.7) * weights).sum().backward()
    leaf_logits = logits.clone().requires_grad_()
    (logprobs_from_logits(leaf_logits, labels, 0.7) * weights).sum().backward()
    # off by bf16's rounding of the result only (a bf16 softmax would be off by ~1e-2)
    torch.testing.assert_close(leaf_logits.grad.double(), reference.grad.to(torch.bfloat16).double(),
                               rtol=8e-3, atol=1e-4)


# --- the prompt pass shared by a group's rows ---------------------------------------------------


@pytest.fixture(scope="module")
def grouped_batch():
    """Two groups of three rows: the prompts of the first group left-padded by one, each row
    its own completion (right-padded after its EOS)."""
    prompts = torch.tensor([[PAD, 5, 6, 7]] * 3 + [[8, 9, 10, 11]] * 3)
    completions = torch.tensor([[11, 12, 13, EOS], [14, EOS, PAD, PAD], [15, 16, 17, 18],
                                [19, 20, EOS, PAD], [EOS, PAD, PAD, PAD], [21, 22, 23, 24]])
    comp_mask = completion_mask(completions, EOS)
    return (torch.cat([prompts, completions], 1),
            torch.cat([(prompts != PAD).long(), comp_mask], 1), comp_mask)


@pytest.mark.parametrize("width", [4, 1])
def test_sharing_the_prompt_pass_gives_the_full_pass_log_probs_and_gradients(tiny_lm,
                                                                            grouped_batch, width):
    input_ids, attention_mask, _ = grouped_batch
    if width == 1:
        input_ids, attention_mask = input_ids[:, :-3], attention_mask[:, :-3]
    results = {}
    for share in (False, True):
        tiny_lm.zero_grad(set_to_none=True)
        logps, entropy = token_logprobs(tiny_lm, input_ids, attention_mask, width,
                                        temperature=0.7, return_entropy=True,
                                        share_prompts=share)
        (logps * torch.arange(1.0, width + 1)).sum().backward()
        results[share] = (logps.detach(), entropy,
                          [p.grad.clone() for p in tiny_lm.parameters()])
    tiny_lm.zero_grad(set_to_none=True)
    (full, full_entropy, full_grads), (shared, shared_entropy, shared_grads) = results.values()
    torch.testing.assert_close(shared, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared_entropy, full_entropy, atol=1e-5, rtol=1e-5)
    for got, want in zip(shared_grads, full_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_the_prompt_pass_runs_once_per_group_and_the_completions_on_its_cache(tiny_lm,
                                                                             grouped_batch):
    input_ids, attention_mask, comp_mask = grouped_batch
    calls = []
    forward = tiny_lm.forward

    def recorded(*args, **kwargs):
        calls.append((tuple(kwargs["input_ids"].shape), kwargs.get("cache") is not None))
        return forward(*args, **kwargs)

    tiny_lm.forward = recorded
    try:
        logits = shared_prompt_logits(tiny_lm, input_ids, attention_mask, comp_mask.size(1))
    finally:
        del tiny_lm.forward
    assert calls == [((2, 4), False), ((6, 3), True)]  # 2 prompts, then 6 rows x (C - 1)
    assert logits.shape == (6, 4, VOCAB)


def test_rows_that_share_no_prompt_take_the_full_pass(tiny_lm, batch, grouped_batch):
    input_ids, attention_mask, comp_mask = batch
    assert shared_prompt_logits(tiny_lm, input_ids, attention_mask, comp_mask.size(1)) is None
    # two rows of width 8 (the check counts rows, not positions)
    input_ids, attention_mask, comp_mask = (t[[0, 3]] for t in grouped_batch)
    assert shared_prompt_logits(tiny_lm, input_ids, attention_mask, comp_mask.size(1)) is None


def test_the_full_pass_is_the_default(tiny_lm, grouped_batch, monkeypatch):
    import grpo_core.logprobs as logprobs

    monkeypatch.setattr(logprobs, "shared_prompt_logits",
                        lambda *a: pytest.fail("sharing is asked for, not the default"))
    input_ids, attention_mask, comp_mask = grouped_batch
    token_logprobs(tiny_lm, input_ids, attention_mask, comp_mask.size(1))


@pytest.mark.parametrize(("attributes", "recomputes"), [
    ({}, False),
    ({"is_gradient_checkpointing": True}, True),  # transformers' older name
    ({"is_gradient_checkpointing": False}, False),
    ({"is_activation_checkpointing": True}, True),
    ({"is_activation_checkpointing": False, "is_gradient_checkpointing": True}, False),
])
def test_activation_checkpointing_is_read_under_either_name(attributes, recomputes):
    from grpo_core.logprobs import _recomputes_activations

    model = type("Model", (), attributes)()
    assert _recomputes_activations(model) is recomputes


def test_a_model_that_recomputes_activations_is_not_asked_for_a_cache(grouped_batch,
                                                                      monkeypatch):
    import grpo_core.logprobs as logprobs

    class Checkpointed(torch.nn.Module):
        is_activation_checkpointing = True

    monkeypatch.setattr(logprobs, "shared_prompt_logits",
                        lambda *a: pytest.fail("a checkpointed model keeps no cache"))
    input_ids, attention_mask, comp_mask = grouped_batch
    model = Checkpointed()
    model.forward = lambda **kwargs: type("Out", (), {"logits": torch.zeros(
        input_ids.size(0), comp_mask.size(1), VOCAB)})()
    token_logprobs(model, input_ids, attention_mask, comp_mask.size(1), share_prompts=True)
