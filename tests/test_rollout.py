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
