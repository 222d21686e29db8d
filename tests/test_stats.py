"""grpo_core.stats against hand computations: problem means, standard errors over problems,
paired differences and z, pass@k, ranks with ties, Spearman, trends."""

from __future__ import annotations

import math

import pytest

from grpo_core.stats import (
    bonferroni_z,
    format_number,
    format_span,
    mean,
    minimum_detectable_change,
    paired_difference,
    pass_at_k,
    problem_means,
    problem_pass_at_k,
    ranks,
    spearman,
    standard_error,
    subsampled_standard_errors,
    trend,
    z_score,
)


def test_the_mean_is_exact_and_refuses_no_values():
    assert mean([0.1] * 10) == 0.1  # fsum: no 0.9999999999999999
    assert mean(iter([1.0, 2.0, 6.0])) == 3.0
    with pytest.raises(ValueError, match="no values"):
        mean([])


def test_problem_means_average_each_problems_samples():
    assert problem_means({"a": [1.0, 0.0], "b": [1.0, 1.0, 1.0], 7: [0.25]}) == {
        "a": 0.5, "b": 1.0, 7: 0.25}
    with pytest.raises(ValueError, match=r"problems \['c'\] have no samples"):
        problem_means({"a": [1.0], "c": []})


def test_the_standard_error_is_the_sample_std_over_the_root_of_n():
    # values 1, 2, 3, 6: mean 3, squared deviations 4 + 1 + 0 + 9 = 14, ddof 1: 14 / 3
    assert standard_error([1.0, 2.0, 3.0, 6.0]) == pytest.approx(math.sqrt(14 / 3 / 4))
    assert standard_error([0.5, 0.5]) == 0.0
    assert math.isnan(standard_error([0.3])) and math.isnan(standard_error([]))


def test_z_is_the_change_in_standard_errors_and_none_without_an_error():
    assert z_score(0.3, 0.1) == pytest.approx(3.0)
    assert z_score(-0.2, 0.1) == pytest.approx(-2.0)
    assert z_score(0.3, 0.0) is None
    assert z_score(0.3, math.nan) is None


def test_a_paired_difference_by_hand():
    a = {"p1": 1.0, "p2": 0.5, "p3": 0.0, "p4": 1.0}
    b = {"p1": 0.5, "p2": 0.5, "p3": 0.0, "p4": 0.0}
    diff = paired_difference(a, b)  # differences 0.5, 0, 0, 1: mean 0.375
    spread = ((0.125 ** 2) + 2 * (0.375 ** 2) + (0.625 ** 2)) / 3
    assert (diff.mean, diff.problems) == (0.375, 4)
    assert diff.sem == pytest.approx(math.sqrt(spread / 4))
    assert diff.z == pytest.approx(0.375 / math.sqrt(spread / 4))
    assert paired_difference(b, a).mean == -0.375
    assert paired_difference({1: 0.5, 2: 0.5}, {1: 0.25, 2: 0.25}).z is None  # no spread


def test_a_paired_difference_needs_the_same_problems_at_least_two():
    with pytest.raises(ValueError, match=r"only one has \['p3'\]"):
        paired_difference({"p1": 1.0, "p2": 0.0}, {"p1": 1.0, "p2": 0.0, "p3": 1.0})
    with pytest.raises(ValueError, match="at least 2 problems"):
        paired_difference({"p1": 1.0}, {"p1": 0.0})


def test_ranks_share_ties_and_spearman_reads_them():
    assert ranks([10.0, 30.0, 20.0, 20.0]) == [0.0, 3.0, 1.5, 1.5]
    assert ranks([]) == []
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0 and spearman([1], [2]) == 0.0
    # ranks of y: 0, 2, 1: d = (0, -1, 1); rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert spearman([1, 2, 3], [1.0, 9.0, 4.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="differ in length"):
        spearman([1, 2], [1])


def test_a_trend_averages_fifths_or_thirds_of_a_short_series():
    steps = list(range(1, 11))
    long = trend(steps, [float(s) for s in steps])  # fifths of 10 values: 2 at each end
    assert (long.first, long.last, long.n, long.first_steps, long.last_steps) == (
        1.5, 9.5, 10, (1, 2), (9, 10))
    assert long.change == 8.0 and long.rho == pytest.approx(1.0)
    short = trend([0, 10, 20, 30, 40], [0.2, 0.1, 0.3, 0.4, 0.5])  # thirds: round(5 / 3) = 2
    assert (short.first, short.last) == (pytest.approx(0.15), pytest.approx(0.45))
    assert short.describe("eval/x") == ("eval/x 0.15 (steps 0-10) -> 0.45 (steps 30-40), "
                                        "Spearman(step, value) +0.90")
    with pytest.raises(ValueError, match="empty"):
        trend([], [])


def test_numbers_and_spans_print_as_the_evidence_reads_them():
    assert format_number(0.123456) == "0.123" and format_number(1234.5, 2) == "1.2e+03"
    assert format_span((3, 3)) == "step 3" and format_span((1, 4)) == "steps 1-4"


# ----------------------------------------------------------------------------- moved with the code from diagnosis


def test_spearman_and_trend_on_hand_made_series():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0
    assert spearman([1, 2, 3, 4], [1, 2, 2, 3]) == pytest.approx(0.9486833, rel=1e-6)
    sparse = trend([1, 5, 10, 15, 20, 25, 30], [0.2, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    assert (sparse.first, sparse.last) == pytest.approx((0.19, 0.065))  # thirds: 2 values
    assert sparse.first_steps == (1, 5) and sparse.last_steps == (25, 30)
    five = trend([1, 5, 10, 15, 20], [0.1, 0.3, 0.2, 0.2, 0.0])  # five evaluations: 2 per end
    assert (five.first, five.last) == pytest.approx((0.2, 0.1))
    dense = trend(list(range(1, 31)), list(range(30)))
    assert (dense.first, dense.last, dense.rho) == pytest.approx((2.5, 26.5, 1.0))  # fifths


def test_spearman_on_two_values_and_on_ties():
    assert spearman([1, 2], [3, 5]) == 1.0
    assert spearman([1, 2], [5, 3]) == -1.0
    assert spearman([1], [2]) == 0.0
    assert spearman([1, 2, 3, 4], [1, 1, 1, 2]) == pytest.approx(0.7745967, rel=1e-6)
    assert spearman([1, 2, 3], [2, 1, 1]) == pytest.approx(-0.8660254, rel=1e-6)
    with pytest.raises(ValueError, match="x and y differ in length: 2 vs 3"):
        spearman([1, 2], [1, 2, 3])


def test_trend_uses_fifths_from_10_values_and_thirds_below():
    ten = trend(list(range(1, 11)), [float(v) for v in range(10)])
    assert (ten.first, ten.last, ten.first_steps, ten.last_steps) == (0.5, 8.5, (1, 2), (9, 10))
    nine = trend(list(range(1, 10)), [float(v) for v in range(9)])
    assert (nine.first, nine.last, nine.first_steps, nine.last_steps) == (1.0, 7.0, (1, 3), (7, 9))
    one = trend([4], [2.0])
    assert (one.first, one.last, one.change, one.n) == (2.0, 2.0, 0.0, 1)
    assert one.describe("kl") == "kl 2 (step 4) -> 2 (step 4), Spearman(step, value) +0.00"
    assert ten.describe("x", digits=2) == ("x 0.5 (steps 1-2) -> 8.5 (steps 9-10), "
                                          "Spearman(step, value) +1.00")


def test_describe_rounds_to_the_digits_asked():
    pair = trend([1, 2], [0.12345, 0.5])
    assert pair.describe("x") == "x 0.123 (step 1) -> 0.5 (step 2), Spearman(step, value) +1.00"
    assert pair.describe("x", digits=2).startswith("x 0.12 (step 1)")


def test_paired_difference_against_a_hand_computation():
    a = {1: 0.5, 2: 1.0, 3: 0.0, 4: 0.25}
    b = {1: 0.25, 2: 0.5, 3: 0.0, 4: 0.5}
    moved = paired_difference(a, b)  # differences 0.25, 0.5, 0, -0.25: mean 0.125
    assert moved.mean == pytest.approx(0.125) and moved.problems == 4
    spread = ((0.125 ** 2) + (0.375 ** 2) + (0.125 ** 2) + (0.375 ** 2)) / 3
    assert moved.sem == pytest.approx(math.sqrt(spread / 4))
    assert moved.z == pytest.approx(0.125 / math.sqrt(spread / 4))
    assert paired_difference(b, a).mean == pytest.approx(-0.125)  # a - b, not |a - b|
    # the same shift on every problem: no spread, so no z (not an infinite one)
    assert paired_difference({1: 0.5, 2: 0.75}, {1: 0.25, 2: 0.5}).z is None
    with pytest.raises(ValueError, match="must score the same problems; only one has \\[3\\]"):
        paired_difference({1: 0.5, 2: 0.5, 3: 0.5}, {1: 0.5, 2: 0.5})
    with pytest.raises(ValueError, match="need at least 2 problems"):
        paired_difference({1: 0.5}, {1: 0.0})
    # the message names five unpaired problems, ids of any kind (ordered as text)
    with pytest.raises(ValueError, match=r"only one has \[0, 1, 10, 11, 12\]$"):
        paired_difference({p: 0.5 for p in range(7)}, {p: 0.5 for p in range(10, 17)})
    with pytest.raises(ValueError, match=r"only one has \[1, 'x'\]$"):
        paired_difference({1: 0.5, 2: 0.5}, {"x": 0.5, 2: 0.5})


# --- pass@k ---------------------------------------------------------------------------------


def test_pass_at_k_matches_hand_computations():
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)  # pass@1 is the fraction that passed
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)
    # 1 - C(3, 2) / C(5, 2) = 1 - 3/10: a pair drawn from 5 with 2 passing holds one
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # 1 - C(4, 3) / C(6, 3) = 1 - 4/20
    assert pass_at_k(6, 2, 3) == pytest.approx(0.8)
    assert pass_at_k(3, 1, 3) == 1.0 and pass_at_k(3, 0, 3) == 0.0  # k = n: any pass
    assert pass_at_k(4, 4, 2) == 1.0 and pass_at_k(4, 0, 1) == 0.0  # all right, all wrong
    assert pass_at_k(4, 3, 2) == 1.0  # fewer failures than k: every draw holds a pass
    # the estimate never falls as k grows
    values = [pass_at_k(8, 2, k) for k in range(1, 9)]
    assert values == sorted(values) and values[0] == 0.25 and values[-1] == 1.0


@pytest.mark.parametrize("n, correct, k", [(3, 1, 0), (3, 1, 4), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_refuses_impossible_counts(n, correct, k):
    with pytest.raises(ValueError):
        pass_at_k(n, correct, k)


def test_problem_pass_at_k_is_taken_per_problem():
    passed = {"a": [True, False, False], "b": [False, False, False], "c": [True, True, True]}
    assert problem_pass_at_k(passed, 1) == pytest.approx({"a": 1 / 3, "b": 0.0, "c": 1.0})
    assert problem_pass_at_k(passed, 3) == {"a": 1.0, "b": 0.0, "c": 1.0}
    assert problem_pass_at_k({"a": [1, 0]}, 2) == {"a": 1.0}  # truthy values count as passes
    with pytest.raises(ValueError, match="no samples"):
        problem_pass_at_k({"a": []}, 1)


def test_bonferroni_z_is_the_two_sided_threshold_at_alpha_over_the_comparisons():
    assert bonferroni_z(1) == pytest.approx(1.959964, abs=1e-6)
    assert bonferroni_z(6) == pytest.approx(2.638257, abs=1e-6)  # 1 - 0.05 / 12
    assert bonferroni_z(3, alpha=0.1) == pytest.approx(2.128045, abs=1e-6)
    assert bonferroni_z(10) > bonferroni_z(6) > bonferroni_z(1)
    for bad in [(0, 0.05), (3, 0.0), (3, 1.0)]:
        with pytest.raises(ValueError, match="comparisons >= 1 and 0 < alpha < 1"):
            bonferroni_z(*bad)


def test_minimum_detectable_change_by_hand():
    # (1.959964 + 0.841621) * 0.05 * sqrt(2 / 1)
    assert minimum_detectable_change(0.05, 1) == pytest.approx(2.801585 * 0.05 * math.sqrt(2),
                                                               abs=1e-6)
    assert minimum_detectable_change(0.05, 4) == pytest.approx(
        minimum_detectable_change(0.05, 1) / 2)  # four runs a side: half the change
    assert minimum_detectable_change(0.05, 1, comparisons=3) > minimum_detectable_change(0.05, 1)
    assert minimum_detectable_change(0.0, 2) == 0.0
    # alpha reaches the Bonferroni bar: at 10 % the bar, and the change, are lower
    assert minimum_detectable_change(0.05, 1, alpha=0.1) == pytest.approx(
        (bonferroni_z(1, 0.1) + 0.841621) * 0.05 * math.sqrt(2), abs=1e-6)
    for bad in [dict(sd=0.05, runs_per_side=0), dict(sd=-0.1, runs_per_side=1),
                dict(sd=0.05, runs_per_side=1, power=0.0),
                dict(sd=0.05, runs_per_side=1, power=1.0),
                dict(sd=0.05, runs_per_side=1, power=1.5)]:
        with pytest.raises(ValueError, match="runs_per_side >= 1, sd >= 0"):
            minimum_detectable_change(**bad)


def test_subsampled_standard_errors_follow_the_finite_population_formula():
    values = [float(i % 7) / 6 for i in range(100)]
    spread = subsampled_standard_errors(values, [10, 40, 100], draws=4000, seed=1)
    assert spread[100] == 0.0  # every subset of all 100 is the whole set
    # sampling n of N without replacement: sd / sqrt(n) * sqrt((N - n) / (N - 1))
    sd = standard_error(values) * math.sqrt(100)
    for n in (10, 40):
        assert spread[n] == pytest.approx(sd / math.sqrt(n) * math.sqrt((100 - n) / 99), rel=0.06)
    assert subsampled_standard_errors(values, [10], draws=50, seed=3) == \
        subsampled_standard_errors(values, [10], draws=50, seed=3)
    with pytest.raises(ValueError):
        subsampled_standard_errors(values, [1])
    with pytest.raises(ValueError):
        subsampled_standard_errors(values, [10], draws=1)
    # the smallest subsets and the fewest draws allowed, and the default seed is 0
    assert set(subsampled_standard_errors(values, [2], draws=2)) == {2}
    assert subsampled_standard_errors(values, [5], draws=30) == \
        subsampled_standard_errors(values, [5], draws=30, seed=0)


def test_subsampled_standard_errors_by_hand_from_the_same_draws():
    import random
    import statistics

    values = [0.0, 0.0, 1.0, 1.0, 0.5, 0.25]
    rng = random.Random(7)
    means = [statistics.fmean(rng.sample(values, 3)) for _ in range(50)]
    assert subsampled_standard_errors(values, [3], draws=50, seed=7)[3] == pytest.approx(
        statistics.stdev(means))  # ddof = 1 over the draws
