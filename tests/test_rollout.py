"""Rollouts on the real offline model: a group of 8, its masks, and the batch layout."""

from __future__ import annotations

import pytest
import torch

from grpo_core.rollout import chat_prompt, sample_for_profile, sample_group


@pytest.fixture(scope="module")
def group_of_8(smoke_policy):
    model, tokenizer = smoke_policy
    prompt = chat_prompt(tokenizer, "Write one word.")
    return sample_group(model, tokenizer, prompt, 8, max_new_tokens=10, seed=0)


def test_group_of_8_shapes(group_of_8):
    rollout = group_of_8
    assert rollout.completion_ids.shape[0] == 8
    assert rollout.completion_mask.shape == rollout.completion_ids.shape
    assert rollout.completion_ids.shape[1] <= 10
    assert rollout.prompt_ids.shape == rollout.prompt_mask.shape
    assert len(rollout.texts) == len(rollout.prompts) == 8
    assert rollout.truncated.shape == (8,)


def test_mask_is_ones_then_zeros_and_ends_at_eos(group_of_8, smoke_policy):
    _, tokenizer = smoke_policy
    rollout = group_of_8
    mask = rollout.completion_mask
    assert torch.all(mask[:, 1:] <= mask[:, :-1])
    for row in range(8):
        length = int(mask[row].sum())
        assert length >= 1
        last = int(rollout.completion_ids[row, length - 1])
        if rollout.truncated[row]:
            assert length == mask.shape[1]  # cut at the budget: every token counts
        else:
            assert last == tokenizer.eos_token_id  # the EOS itself is kept


def test_texts_match_the_masked_tokens(group_of_8, smoke_policy):
    _, tokenizer = smoke_policy
    for row, text in enumerate(group_of_8.texts):
        ids = group_of_8.completion_ids[row][group_of_8.completion_mask[row].bool()]
        assert text == tokenizer.decode(ids, skip_special_tokens=True)


def test_same_seed_same_samples(smoke_policy):
    model, tokenizer = smoke_policy
    prompt = chat_prompt(tokenizer, "Count to three.")
    first = sample_group(model, tokenizer, prompt, 2, max_new_tokens=6, seed=123)
    second = sample_group(model, tokenizer, prompt, 2, max_new_tokens=6, seed=123)
    assert torch.equal(first.completion_ids, second.completion_ids)


def test_groups_are_laid_out_one_after_another(smoke_policy, smoke_profile):
    model, tokenizer = smoke_policy
    prompts = [chat_prompt(tokenizer, "Say yes."), chat_prompt(tokenizer, "Say no, please.")]
    rollout = sample_for_profile(model, tokenizer, prompts, smoke_profile, group_size=3)
    assert rollout.prompts == [prompts[0]] * 3 + [prompts[1]] * 3
    assert rollout.group_size == 3
    # left padding: the shorter prompt is padded on the left, so every prompt ends in the last column
    assert torch.all(rollout.prompt_mask[:, -1] == 1)
    assert rollout.prompt_mask[0].sum() < rollout.prompt_mask[3].sum()


def test_sampling_leaves_the_model_in_its_previous_mode(smoke_policy):
    model, tokenizer = smoke_policy
    model.train()
    try:
        sample_group(model, tokenizer, "Hi", 2, max_new_tokens=2, seed=0)
        assert model.training
    finally:
        model.eval()


def test_chat_prompt_ends_ready_for_the_assistant(smoke_policy):
    _, tokenizer = smoke_policy
    prompt = chat_prompt(tokenizer, "What is 2+2?", enable_thinking=False)
    assert "What is 2+2?" in prompt
    assert prompt.rstrip().endswith("assistant")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompts": [], "group_size": 2}, "at least one prompt"),
        ({"prompts": "x", "group_size": 0}, "group_size"),
    ],
)
def test_bad_arguments_are_explained(smoke_policy, kwargs, message):
    model, tokenizer = smoke_policy
    with pytest.raises(ValueError, match=message):
        sample_group(model, tokenizer, max_new_tokens=4, **kwargs)


def test_right_padding_is_refused(smoke_policy):
    model, tokenizer = smoke_policy
    tokenizer.padding_side = "right"
    try:
        with pytest.raises(ValueError, match="left"):
            sample_group(model, tokenizer, "x", 2, max_new_tokens=2)
    finally:
        tokenizer.padding_side = "left"


# ---------------------------------------------------------------- our decoding loop


def test_sample_next_token_follows_the_softmax():
    """Inverse-CDF sampling: frequencies over many draws match softmax(logits / T)."""
    from grpo_core.rollout import sample_next_token

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]])
    torch.manual_seed(0)
    draws = sample_next_token(logits.expand(40_000, -1), temperature=0.7)
    frequencies = torch.bincount(draws, minlength=5).float() / draws.numel()
    expected = torch.softmax(logits[0] / 0.7, dim=-1)
    assert torch.allclose(frequencies, expected, atol=0.01)
    assert frequencies[4] == 0  # a token of probability ~1e-19 is never drawn


def test_sample_next_token_keeps_to_the_top_p_nucleus():
    from grpo_core.rollout import sample_next_token

    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    torch.manual_seed(0)
    draws = sample_next_token(probs.log().expand(30_000, -1), top_p=0.8)
    frequencies = torch.bincount(draws, minlength=4).float() / draws.numel()
    # the nucleus is {0.5, 0.3} (they reach 0.8), renormalised to 5/8 and 3/8
    assert torch.allclose(frequencies, torch.tensor([0.625, 0.375, 0.0, 0.0]), atol=0.01)
    one = sample_next_token(probs.log().expand(50, -1), top_p=0.3)
    assert one.eq(0).all()  # a nucleus smaller than the top token keeps the top token


def test_greedy_decode_matches_transformers_generate(smoke_policy):
    """The loop is ``generate``'s algorithm: with argmax it writes the same tokens."""
    from grpo_core.rollout import _eos_token_ids, decode_until

    model, tokenizer = smoke_policy
    prompts = [chat_prompt(tokenizer, text) for text in ("Name a colour.", "Count to three, please.")]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert encoded["attention_mask"][0].eq(0).any()  # left padding is exercised
    ours, _ = decode_until(model, encoded["input_ids"], encoded["attention_mask"],
                           max_new_tokens=12, eos_token_ids=_eos_token_ids(model, tokenizer),
                           pad_token_id=tokenizer.pad_token_id,
                           next_token=lambda logits: logits.argmax(-1))
    theirs = model.generate(**encoded, do_sample=False, max_new_tokens=12,
                            pad_token_id=tokenizer.pad_token_id)[:, encoded["input_ids"].shape[1]:]
    assert torch.equal(ours, theirs[:, : ours.shape[1]])


def test_greedy_decode_of_a_group_matches_generate_row_by_row(smoke_policy):
    """One prompt pass per distinct prompt, copied to its group, and rows that leave the batch
    once they end: with argmax, each row still writes ``generate``'s tokens."""
    from grpo_core.logprobs import completion_mask
    from grpo_core.rollout import _eos_token_ids, decode_until

    model, tokenizer = smoke_policy
    texts = ["Say hi.", "Say hi.", "Count to three, please.", "Count to three, please."]
    encoded = tokenizer([chat_prompt(tokenizer, t) for t in texts], return_tensors="pt",
                        padding=True, add_special_tokens=False)
    eos = _eos_token_ids(model, tokenizer)
    ours, _ = decode_until(model, encoded["input_ids"], encoded["attention_mask"],
                           max_new_tokens=40, eos_token_ids=eos,
                           pad_token_id=tokenizer.pad_token_id,
                           next_token=lambda logits: logits.argmax(-1))
    assert torch.equal(ours[0], ours[1]) and torch.equal(ours[2], ours[3])
    for row in (0, 2):  # each alone: no batch to leave, no copy of a prompt pass
        theirs = model.generate(input_ids=encoded["input_ids"][row:row + 1],
                                attention_mask=encoded["attention_mask"][row:row + 1],
                                do_sample=False, max_new_tokens=40,
                                pad_token_id=tokenizer.pad_token_id)[0, encoded["input_ids"].shape[1]:]
        ended = completion_mask(ours[row:row + 1], eos)[0].bool()
        assert torch.equal(ours[row][ended], theirs[: int(ended.sum())])


def test_decode_pads_after_eos_and_stops_when_every_row_is_done(tiny_policy):
    from grpo_core.rollout import decode_until

    model, tokenizer = tiny_policy
    ids = torch.tensor([[5, 6, 7], [0, 8, 9]])
    mask = torch.tensor([[1, 1, 1], [0, 1, 1]])
    script = iter([torch.tensor([11, 3]), torch.tensor([3, 12]), torch.tensor([13, 14])])
    out, _ = decode_until(model, ids, mask, max_new_tokens=10, eos_token_ids=[3], pad_token_id=0,
                          next_token=lambda logits: next(script))
    # row 1 ends at step 1, row 0 at step 2: the loop stops there, row 1 padded after its EOS
    assert out.tolist() == [[11, 3], [3, 0]]


@pytest.mark.parametrize(("kwargs", "message"), [({"temperature": 0.0}, "temperature"),
                                                 ({"top_p": 0.0}, "top_p"),
                                                 ({"top_p": 1.5}, "top_p")])
def test_bad_sampling_settings_are_explained(smoke_policy, kwargs, message):
    model, tokenizer = smoke_policy
    with pytest.raises(ValueError, match=message):
        sample_group(model, tokenizer, "x", 2, max_new_tokens=2, **kwargs)


# --- the stop rule: a completion is over where its first code block closes ---------------------

@pytest.mark.parametrize(("text", "closed"), [
    ("```python\ndef f():\n    return 1\n```", True),
    ("Here it is:\n\n```py\nx = 1\n```\nThis sets x.", True),
    ("```\nx = 1\n```", True),  # no label
    ("```python\ndef f():\n    return 1\n", False),  # still open
    ("```python\ndef f():\n    return 1\n``", False),  # two backticks are not a fence
    ("```python", False),
    ("def f():\n    return 1\n```", False),  # a lone fence opens, it does not close
    ("Use `x` and ``y``.", False),  # inline code
    ("```python\n```", False),  # an empty block: nothing was written yet
])
def test_code_block_closed_needs_an_opening_and_a_closing_fence(text, closed):
    from grpo_core.rollout import code_block_closed

    assert code_block_closed(text) is closed


def test_an_unknown_stop_rule_is_named():
    from grpo_core.rollout import stop_rule

    with pytest.raises(ValueError, match="unknown stop rule 'code'.*code_block"):
        stop_rule("code")


def test_stop_at_code_block_ends_each_completion_at_its_closing_fence(smoke_policy):
    model, tokenizer = smoke_policy
    prompt = chat_prompt(tokenizer, "Write a Python function add(a, b) that returns a + b. "
                                    "Answer with the function in a ```python code block.")
    free = sample_group(model, tokenizer, prompt, 4, max_new_tokens=80, seed=3)
    stopped = sample_group(model, tokenizer, prompt, 4, max_new_tokens=80, seed=3,
                           stop_at="code_block")
    from grpo_core.rollout import code_block_closed

    ended_by_rule = 0
    # an ended row leaves the batch (rollout._decode), and a float32 matrix product of fewer
    # rows may round differently in the last bit: the two runs draw the same random numbers,
    # and their batches are the same, until the first row of either run ends
    same_until = min([int(r.completion_mask[row].sum()) for r in (free, stopped) for row in range(4)
                      if int(r.completion_mask[row].sum()) < r.completion_ids.shape[1]]
                     or [free.completion_ids.shape[1]])
    for row in range(4):
        length = int(stopped.completion_mask[row].sum())
        ids = stopped.completion_ids[row, :length]
        # the same draws until the stop: the stopped completion is a prefix of the free one
        # (to the last bit while both batches hold the same rows)
        shared = min(length, same_until)
        assert torch.equal(ids[:shared], free.completion_ids[row, :shared])
        assert stopped.completion_mask[row, length:].sum() == 0
        text = stopped.texts[row]
        if code_block_closed(text):
            ended_by_rule += 1
            assert not stopped.truncated[row]
            assert text.rstrip().endswith("```")
            # it was complete one token earlier than its end, not sooner
            assert not code_block_closed(tokenizer.decode(ids[:-1], skip_special_tokens=True))
        elif length <= same_until:  # no closed block: EOS or the budget, as without the rule
            assert torch.equal(ids, free.completion_ids[row][free.completion_mask[row].bool()])
            assert bool(stopped.truncated[row]) == bool(free.truncated[row])
    assert ended_by_rule >= 1, stopped.texts  # this prompt and seed close a block
    assert stopped.completion_ids.shape[1] <= free.completion_ids.shape[1]
