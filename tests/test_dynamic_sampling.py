"""grpo_core.dynamic_sampling: which groups are sampled again, the cap, the batch put together
from refills, the counts, and the loop's use of it (``TrainConfig.dynamic_sampling``)."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.advantages import group_advantages
from grpo_core.dynamic_sampling import (
    RefillCounts,
    expected_groups_until_signal,
    groups_to_refill,
    refill_seed,
    sample_with_refills,
)
from grpo_core.loop import TrainConfig, train
from grpo_core.rollout import Rollout, take_groups

K = 3
PAD = 9


def fake_rollout(groups: list[int], round_: int, widths: tuple[int, int]) -> Rollout:
    """Rows whose tokens name their group and round: ``[1 + g, 10 + round_]`` prompt tokens
    (left-padded to ``widths[0]``), completions ``[100 * round_ + 10 * g + j + 1]`` right-padded to
    ``widths[1]``."""
    rows = len(groups) * K
    prompt_ids = torch.zeros(rows, widths[0], dtype=torch.long)
    prompt_mask = torch.zeros(rows, widths[0], dtype=torch.long)
    completion_ids = torch.zeros(rows, widths[1], dtype=torch.long)
    completion_mask = torch.zeros(rows, widths[1], dtype=torch.long)
    texts, prompts = [], []
    for place, g in enumerate(groups):
        for j in range(K):
            row = place * K + j
            prompt_ids[row, -2:] = torch.tensor([1 + g, 10 + round_])
            prompt_mask[row, -2:] = 1
            completion_ids[row, 0] = 100 * round_ + 10 * g + j + 1
            completion_mask[row, 0] = 1
            texts.append(f"g{g}r{round_}s{j}")
            prompts.append(f"prompt {g}")
    return Rollout(prompt_ids, prompt_mask, completion_ids, completion_mask, texts,
                   torch.zeros(rows, dtype=torch.bool), prompts, K)


class FakeSampler:
    """Samples groups whose rewards come from ``table[(group, round)]`` (a group not in the
    table is flat at 0), recording every call."""

    def __init__(self, table: dict[tuple[int, int], list[float]]):
        self.table, self.calls, self.returned = table, [], []

    def __call__(self, groups, round_):
        self.calls.append((list(groups), round_))
        rollout = fake_rollout(groups, round_, widths=(2 + round_, 1 + round_))
        self.returned.append(rollout)
        total = torch.tensor([v for g in groups for v in self.table.get((g, round_), [0.0] * K)])
        return rollout, total, {"score": total * 2}


def test_the_expected_groups_until_signal_is_one_over_the_chance_of_signal():
    assert expected_groups_until_signal(0.5, 2) == pytest.approx(2.0)  # signal 1 - 1/4 - 1/4
    assert expected_groups_until_signal(0.1, 4) == pytest.approx(1 / (1 - 0.1**4 - 0.9**4))
    assert expected_groups_until_signal(0.0, 8) == math.inf
    assert expected_groups_until_signal(1.0, 8) == math.inf
    assert expected_groups_until_signal(0.2, 16) < expected_groups_until_signal(0.2, 2)
    with pytest.raises(ValueError, match="k >= 2"):
        expected_groups_until_signal(0.5, 1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_groups_until_signal(1.5, 4)


def test_refill_seeds_differ_by_round_step_and_seed_and_never_take_round_zero():
    seeds = {refill_seed(s, t, r) for s in range(3) for t in range(1, 40) for r in range(1, 5)}
    assert len(seeds) == 3 * 39 * 4
    firsts = {s * 1_000_003 + t for s in range(3) for t in range(1, 40)}
    assert not seeds & firsts  # never a first round's seed
    with pytest.raises(ValueError, match="from 1"):
        refill_seed(0, 1, 0)


def test_the_refill_seed_is_this_formula_so_recorded_runs_replay():
    assert refill_seed(0, 1, 1) == 1 * 1_009 + 1
    assert refill_seed(2, 3, 4) == (2 * 1_000_003 + 3) * 1_009 + 4
    assert isinstance(refill_seed(2, 3, 4), int)


def test_only_flat_groups_are_chosen_as_far_as_the_cap_pays():
    flat = torch.tensor([True, False, True, True])
    assert groups_to_refill(flat, 9, 3) == [0, 2, 3]
    assert groups_to_refill(flat, 8, 3) == [0, 2]  # whole groups only
    assert groups_to_refill(flat, 2, 3) == []
    assert groups_to_refill(torch.zeros(4, dtype=torch.bool), 99, 3) == []
    assert groups_to_refill(flat, 2, 1) == [0, 2]  # a group of one is still a group
    with pytest.raises(ValueError):
        groups_to_refill(flat, -1, 3)


def test_a_group_with_signal_is_never_sampled_again_and_flat_ones_are_refilled():
    table = {(0, 0): [1, 0, 0], (1, 0): [0, 0, 0], (2, 0): [1, 1, 1],  # group 0 has signal
             (1, 1): [0, 0, 0], (2, 1): [1, 0, 1],  # round 1: group 2 gets signal, 1 not
             (1, 2): [0, 1, 0]}  # round 2: group 1 gets signal
    sampler = FakeSampler(table)
    rollout, total, per_fn, counts = sample_with_refills(sampler, 3, K, 99, PAD)
    assert sampler.calls == [([0, 1, 2], 0), ([1, 2], 1), ([1], 2)]
    assert rollout.texts == [f"g0r0s{j}" for j in range(K)] + [f"g1r2s{j}" for j in range(K)] \
        + [f"g2r1s{j}" for j in range(K)]
    assert total.tolist() == [1, 0, 0, 0, 1, 0, 1, 0, 1]
    assert per_fn["score"].tolist() == [2 * v for v in total.tolist()]
    assert counts == RefillCounts(generations=18, refill_groups=3, groups_refilled=2,
                                  zero_std_before=pytest.approx(2 / 3), zero_std_after=0.0)
    assert counts.metrics()["sampling/generations"] == 18.0


@pytest.mark.parametrize("cap, refills", [(0, 0), (2, 0), (3, 1), (8, 2), (9, 3), (30, 10)])
def test_the_cap_on_extra_generations_is_respected_exactly(cap, refills):
    sampler = FakeSampler({})  # every group flat in every round: only the cap stops it
    rollout, total, _, counts = sample_with_refills(sampler, 2, K, cap, PAD)
    assert counts.generations - 2 * K == refills * K <= cap
    assert counts.refill_groups == refills and counts.groups_refilled == 0
    assert counts.zero_std_before == counts.zero_std_after == 1.0
    assert rollout.texts == [f"g{g}r0s{j}" for g in range(2) for j in range(K)]  # round 0 kept
    assert total.tolist() == [0.0] * 2 * K


def test_a_refilled_batch_has_the_advantages_and_tokens_of_its_groups_sampled_directly():
    table = {(0, 0): [0, 0, 0], (1, 0): [0.5, 1, 0], (0, 1): [1, 0, 0.25]}
    rollout, total, _, _ = sample_with_refills(FakeSampler(table), 2, K, 99, PAD)
    advantages = group_advantages(total, K)
    for g, round_ in [(0, 1), (1, 0)]:
        direct, direct_total, _ = FakeSampler(table)([g], round_)
        rows = slice(g * K, (g + 1) * K)
        torch.testing.assert_close(advantages[rows], group_advantages(direct_total, K))
        assert rollout.texts[rows] == direct.texts
        # the same tokens under the same masks, whatever padding joined them
        for name in ("prompt", "completion"):
            ids, mask = getattr(rollout, f"{name}_ids")[rows], getattr(rollout, f"{name}_mask")[rows]
            want_ids, want_mask = getattr(direct, f"{name}_ids"), getattr(direct, f"{name}_mask")
            assert ids[mask.bool()].tolist() == want_ids[want_mask.bool()].tolist()
    assert rollout.prompt_ids.shape == (2 * K, 3) and rollout.completion_ids.shape == (2 * K, 2)
    # group 1 (round 0, the narrower rollout) is padded with the pad id given
    assert rollout.prompt_ids[K:, 0].tolist() == [PAD] * K
    assert rollout.completion_ids[K:, 1].tolist() == [PAD] * K


def test_without_refills_the_first_rounds_rollout_is_the_batch():
    sampler = FakeSampler({(0, 0): [1, 0, 0], (1, 0): [0, 1, 1]})
    rollout, _, _, counts = sample_with_refills(sampler, 2, K, 99, PAD)
    assert counts.refill_groups == 0 and rollout is sampler.returned[0]  # nothing rebuilt


def test_take_groups_pads_prompts_left_and_completions_right_and_checks_its_input():
    wide, narrow = fake_rollout([0, 1], 1, (3, 2)), fake_rollout([5], 0, (2, 1))
    joined = take_groups([(narrow, 0), (wide, 1)], pad_token_id=7)
    assert joined.prompt_ids[:K, 0].tolist() == [7] * K and joined.prompt_mask[:K, 0].sum() == 0
    assert joined.completion_ids[:K, 1].tolist() == [7] * K
    assert joined.completion_mask[:K].sum() == K and joined.texts[K:] == wide.texts[K:]
    assert joined.prompts == ["prompt 5"] * K + ["prompt 1"] * K
    with pytest.raises(ValueError, match="not in a rollout"):
        take_groups([(narrow, 1)], 0)
    with pytest.raises(ValueError, match="at least one"):
        take_groups([], 0)


# --- in the loop ----------------------------------------------------------------------------

PROMPTS = ["Say hello.", "Name a colour.", "Describe the sea."]


def dynamic_run(new_tiny_policy, **overrides):
    model, tokenizer = new_tiny_policy()
    values = {"group_size": 4, "prompts_per_step": 3, "max_new_tokens": 6, "max_steps": 2,
              "learning_rate": 1e-2, "seed": 0, "save_checkpoint": False,
              "dynamic_sampling": True, **overrides}
    rows = [{"prompt": p} for p in PROMPTS]
    return train(model, tokenizer, rows, constant_for_first_prompt, TrainConfig(**values),
                 progress=False).metrics


def constant_for_first_prompt(completions, prompts, **kwargs):
    """0 for every completion of 'Say hello.' (always flat: a prompt the model never solves),
    else 1 for completions with an even number of characters."""
    return [0.0 if p == "Say hello." else float(len(c) % 2 == 0)
            for c, p in zip(completions, prompts, strict=True)]


def test_the_loop_logs_what_it_sampled_and_is_deterministic(new_tiny_policy):
    first = dynamic_run(new_tiny_policy, max_refill_generations=8)
    again = dynamic_run(new_tiny_policy, max_refill_generations=8)
    assert without_times(first) == without_times(again)
    for record in first:
        extra = record["sampling/generations"] - 12
        assert extra == 4 * record["sampling/refill_groups"] <= 8
        # 'Say hello.' is flat in every round: refilled only while the cap lasts
        assert record["sampling/zero_std_before"] >= 1 / 3
        assert record["sampling/refill_groups"] >= 2 and record["frac_reward_zero_std"] >= 1 / 3
        assert record["sampling/zero_std_after"] == pytest.approx(record["frac_reward_zero_std"])
        assert record["sampling/groups_refilled"] <= record["sampling/refill_groups"]
    plain = dynamic_run(new_tiny_policy, dynamic_sampling=False)
    assert not any(key.startswith("sampling/") for record in plain for key in record)


def without_times(records):
    return [{k: v for k, v in r.items() if not k.startswith("time") and k != "step_time"}
            for r in records]


def test_the_first_round_is_the_plain_loops_rollout(new_tiny_policy):
    """With nothing flat to refill, dynamic sampling trains exactly what the plain loop does."""
    def varied(completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]  # every group has signal

    results = []
    for dynamic in (False, True):
        model, tokenizer = new_tiny_policy()
        config = TrainConfig(group_size=4, prompts_per_step=2, max_new_tokens=6, max_steps=2,
                             learning_rate=1e-2, seed=0, save_checkpoint=False,
                             dynamic_sampling=dynamic)
        result = train(model, tokenizer, PROMPTS, varied, config, progress=False)
        results.append((result.last_texts, [r["loss"] for r in result.metrics],
                        [p.detach().clone() for p in result.model.parameters()]))
    (texts, losses, params), (texts_d, losses_d, params_d) = results
    assert texts == texts_d and losses == losses_d
    for a, b in zip(params, params_d, strict=True):
        assert torch.equal(a, b)


def test_a_bad_refill_cap_is_explained():
    with pytest.raises(ValueError, match="max_refill_generations"):
        TrainConfig(max_refill_generations=-1).validate()
    assert TrainConfig(group_size=4, prompts_per_step=3).refill_cap == 12
    assert TrainConfig(max_refill_generations=5).refill_cap == 5


class TickingClock:
    """``time`` for the loop with a ``perf_counter`` that advances by exactly 1 per call: each
    difference of two consecutive readings in ``make_rollout`` is one second."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now

    def __getattr__(self, name):
        import time

        return getattr(time, name)


def test_each_round_samples_with_its_own_seed_is_timed_and_padded_with_the_tokenizers_pad(
        new_tiny_policy, monkeypatch):
    from grpo_core import loop
    from grpo_core.dynamic_sampling import sample_with_refills as real_refills

    seeds, pads = [], []

    def recording_sample_group(*args, seed=None, **kwargs):
        seeds.append(seed)
        return real_sample_group(*args, seed=seed, **kwargs)

    def recording_refills(sample, groups, group_size, cap, pad_token_id):
        pads.append(pad_token_id)
        return real_refills(sample, groups, group_size, cap, pad_token_id)

    real_sample_group = loop.sample_group
    monkeypatch.setattr(loop, "sample_group", recording_sample_group)
    monkeypatch.setattr(loop, "sample_with_refills", recording_refills)
    monkeypatch.setattr(loop, "time", TickingClock())
    model, tokenizer = new_tiny_policy()
    config = TrainConfig(group_size=4, prompts_per_step=3, max_new_tokens=6, max_steps=1,
                         learning_rate=1e-2, seed=5, save_checkpoint=False,
                         dynamic_sampling=True, max_refill_generations=8)
    rows = [{"prompt": p} for p in PROMPTS]
    (record,) = train(model, tokenizer, rows, constant_for_first_prompt, config,
                      progress=False).metrics
    # 'Say hello.' is flat in every round: two refills of one group each, then the cap
    assert seeds == [5 * 1_000_003 + 1, refill_seed(5, 1, 1), refill_seed(5, 1, 2)]
    assert record["sampling/refill_groups"] == 2
    assert record["time/generate"] == 3.0 and record["time/reward"] == 3.0  # every round
    assert pads == [tokenizer.pad_token_id]
