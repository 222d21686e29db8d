"""The signal check: mixed groups, pass probabilities and the analytic zero-std fraction."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.group_signal import (
    expected_zero_std_fraction,
    plot_signal,
    signal_check,
    simulate_scores,
    summarize_groups,
    zero_std_chance,
)
from grpo_core.plots import compare_runs as plot_runs

# a fake policy: the chance that one sample solves each problem (too hard ... too easy)
PASS_PROBS = [0.0, 0.02, 0.1, 0.22, 0.5, 0.8, 0.97, 1.0]


def test_expected_zero_std_fraction_by_hand():
    assert expected_zero_std_fraction(0.0, 4) == 1.0
    assert expected_zero_std_fraction(1.0, 16) == 1.0
    assert expected_zero_std_fraction(0.5, 2) == pytest.approx(0.5)
    assert expected_zero_std_fraction(0.22, 4) == pytest.approx(0.22**4 + 0.78**4)
    values = expected_zero_std_fraction(torch.tensor([[0.0, 0.5]]), 3)
    assert values.shape == (1, 2) and values.tolist() == [[1.0, 0.25]]


@pytest.mark.parametrize("p, k", [(-0.1, 4), (1.5, 4), (0.5, 0)])
def test_expected_zero_std_fraction_rejects_bad_input(p, k):
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\]|group size k must be >= 1"):
        expected_zero_std_fraction(p, k)


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_mixed_groups_match_the_binomial_expectation(k):
    """Many problems of known pass probability: the mixed-group count is binomial-like."""
    probs = torch.tensor(PASS_PROBS * 250, dtype=torch.float64)  # 2000 groups
    report = summarize_groups(simulate_scores(probs, k, seed=k))
    chance_mixed = 1 - expected_zero_std_fraction(probs, k)
    expected = chance_mixed.sum().item()
    spread = math.sqrt((chance_mixed * (1 - chance_mixed)).sum().item())
    assert abs(report.mixed_groups - expected) < 4 * spread, (report.mixed_groups, expected)
    assert report.p == pytest.approx(probs.mean().item(), abs=4 * math.sqrt(0.25 / probs.numel() / k))
    # with one pass probability for every problem, the pooled formula predicts the count
    same = summarize_groups(simulate_scores([0.22] * 2000, k, seed=100 + k))
    chance = 1 - expected_zero_std_fraction(0.22, k)
    assert abs(same.mixed_groups - 2000 * chance) < 4 * math.sqrt(2000 * chance * (1 - chance))
    assert same.expected_zero_std()["pooled p"] == pytest.approx(1 - chance, abs=0.05)


def test_per_problem_prediction_from_many_samples_matches_the_truth():
    """Estimated from 200 samples per problem, the per-problem formula predicts k = 4."""
    probs = torch.tensor(PASS_PROBS, dtype=torch.float64)
    report = summarize_groups(simulate_scores(probs, 200, seed=1))
    truth = expected_zero_std_fraction(probs, 4).mean().item()
    predicted = report.expected_zero_std(4)
    assert predicted["per-problem p_i"] == pytest.approx(truth, abs=0.05)
    assert predicted["per-problem scores"] == pytest.approx(predicted["per-problem p_i"])
    # different p_i per problem: one pooled p over-predicts the mixed groups (Jensen)
    assert predicted["pooled p"] < truth - 0.1


def test_summary_of_a_hand_made_table():
    scores = [[0.0, 0.0, 0.0, 0.0],   # too hard: no signal
              [1.0, 0.0, 0.0, 0.0],   # mixed
              [0.5, 0.5, 0.5, 0.5],   # the same partial score: no signal, yet no sample passes
              [0.0, 0.25, 0.0, 0.0],  # partial credit makes it mixed, no sample passes
              [1.0, 1.0, 1.0, 1.0]]   # too easy: no signal
    report = summarize_groups(scores, labels=["a", "b", "c", "d", "e"], texts=["x"] * 20)
    assert report.mixed.tolist() == [False, True, False, True, False]
    assert (report.mixed_groups, report.num_groups, report.k) == (2, 5, 4)
    assert report.zero_std_fraction == pytest.approx(0.6)
    assert report.mean_reward == pytest.approx(sum(map(sum, scores)) / 20)
    assert report.pass_rates.tolist() == [0.0, 0.25, 0.0, 0.0, 1.0]
    assert report.p == pytest.approx(5 / 20)
    assert report.group_stds[0] == 0 and report.group_stds[1] == pytest.approx(0.5)
    at_4 = report.expected_zero_std()  # at the check's own k: the measured groups
    assert at_4["per-problem p_i"] == pytest.approx(4 / 5)  # pass/fail: only "b" is mixed
    assert at_4["per-problem scores"] == pytest.approx(report.zero_std_fraction)
    at_2 = report.expected_zero_std(2)  # pairs out of 4: "b" and "d" agree in 3 of 6 pairs
    assert at_2["per-problem p_i"] == pytest.approx((4 + 0.5) / 5)
    assert at_2["per-problem scores"] == pytest.approx((3 + 0.5 + 0.5) / 5)
    at_8 = report.expected_zero_std(8)  # beyond the check's k: plug-in (q_iv)^k
    assert at_8["per-problem scores"] == pytest.approx((3 + 2 * (0.75**8 + 0.25**8)) / 5)
    assert [row["group"] for row in report.rows()] == ["a", "b", "c", "d", "e"]
    assert "2 of 5 groups mixed" in report.summary() and "passes all of its tests" in \
        report.summary()
    assert "at least 0.5" in summarize_groups(scores, pass_threshold=0.5).p_definition


def test_zero_std_chance_counts_agreeing_subsets_then_plugs_in():
    scores = simulate_scores([0.3, 0.6, 0.0], 10, seed=3)
    p_i = scores.mean(dim=1).double()
    for k in (1, 2, 5, 10):  # k <= n: k of the n samples, picked at random, all agree
        passes = (scores == 1).sum(dim=1).tolist()
        exact = [(math.comb(c, k) + math.comb(10 - c, k)) / math.comb(10, k) for c in passes]
        assert zero_std_chance(scores, k).tolist() == pytest.approx(exact)
    for k in (11, 16):  # k > n: the plug-in p_i^k + (1 - p_i)^k
        assert torch.allclose(zero_std_chance(scores, k), expected_zero_std_fraction(p_i, k))


def test_zero_std_chance_is_unbiased_where_the_plug_in_is_not():
    """From 4 samples per problem of true p = 0.3, predict groups of 2: p^2 + (1-p)^2."""
    scores = simulate_scores([0.3] * 4000, 4, seed=11)
    truth = 0.3**2 + 0.7**2
    assert zero_std_chance(scores, 2).mean().item() == pytest.approx(truth, abs=0.015)
    plug_in = expected_zero_std_fraction(scores.mean(dim=1).double(), 2).mean().item()
    assert plug_in > truth + 0.08  # biased up by 2 Var(p_hat) = 2 * 0.21 / 4


@pytest.mark.parametrize("scores, kwargs, message", [
    ([1.0, 0.0], {}, "N groups, k samples"),
    ([[1.0], [0.0]], {}, "k >= 2"),
    ([[1.0, float("nan")]], {}, "finite"),
    ([[1.0, 0.0]], {"labels": ["a", "b"]}, "2 labels for 1 groups"),
    ([[1.0, 0.0]], {"texts": ["only one"]}, "1 texts for 2 samples"),
])
def test_summarize_groups_rejects_bad_input(scores, kwargs, message):
    with pytest.raises(ValueError, match=message):
        summarize_groups(scores, **kwargs)


def test_signal_check_samples_k_per_prompt_and_sums_weighted_rewards(smoke_policy):
    model, tokenizer = smoke_policy
    rows = [{"prompt": "Say hi.", "task_id": 7, "bonus": 1.0},
            {"prompt": "Say bye.", "task_id": 9, "bonus": 0.0}]

    def constant(completions, bonus, **kwargs):
        return list(bonus)

    def lengthy(completions, **kwargs):
        return [float(len(c) > 0) for c in completions]

    report = signal_check(model, tokenizer, rows, [constant, lengthy], k=3, max_new_tokens=4,
                          reward_weights=[2.0, 0.0], seed=5, prompts_per_batch=1)
    assert report.scores.tolist() == [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    assert report.labels == ["7", "9"] and len(report.texts) == 6
    assert report.mixed_groups == 0 and report.pass_rates.tolist() == [1.0, 0.0]
    again = signal_check(model, tokenizer, rows, lengthy, k=3, max_new_tokens=4, seed=5,
                         prompts_per_batch=1)
    assert again.texts == report.texts  # same seed, same samples


def test_signal_check_needs_prompts_and_two_samples(smoke_policy):
    model, tokenizer = smoke_policy
    with pytest.raises(ValueError, match="no 'prompt' column"):
        signal_check(model, tokenizer, [{"text": "add two numbers"}], len, max_new_tokens=2)
    with pytest.raises(ValueError, match="k >= 2"):
        signal_check(model, tokenizer, [{"prompt": "hi"}], len, k=1, max_new_tokens=2)
    with pytest.raises(ValueError, match="1 reward weights for 2"):
        signal_check(model, tokenizer, [{"prompt": "hi"}], [len, len], reward_weights=[1.0],
                     max_new_tokens=2)


def test_plots_draw_reports_and_runs():
    report = summarize_groups(simulate_scores(PASS_PROBS, 4, seed=0))
    fig = plot_signal(report, title="fake policy")
    assert len(fig.axes) == 2 and "groups mixed" in fig.axes[0].get_title()
    runs = {"k=2": [{"step": 1, "reward": 0.1, "frac_reward_zero_std": 0.5},
                    {"step": 2, "reward": 0.3, "frac_reward_zero_std": 0.25}],
            "k=8": [{"step": 1, "reward": 0.2}]}
    fig = plot_runs(runs, ("reward", "frac_reward_zero_std"),
                    expected={"frac_reward_zero_std": {"k=2": 0.4}}, window=2)
    reward_ax, zero_ax = fig.axes
    assert len(reward_ax.get_lines()) == 2 and len(zero_ax.get_lines()) == 2  # k=8 has no key
    assert reward_ax.get_lines()[0].get_ydata().tolist() == pytest.approx([0.1, 0.2])
    with pytest.raises(ValueError, match="window"):
        plot_runs(runs, window=0)
