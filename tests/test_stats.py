"""grpo_core.stats against hand computations: problem means, standard errors over problems,
paired differences and z, pass@k, ranks with ties, Spearman, trends; and the small-sample
statistics (Student's t, the across-seed interval, Welch's test) against closed forms,
textbook values and, where it is installed, scipy."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from grpo_core.stats import (
    SeedInterval,
    bonferroni_t_quantile,
    bonferroni_z,
    compare_setups,
    format_number,
    format_span,
    mean,
    minimum_detectable_change,
    mix_split,
    paired_difference,
    pass_at_k,
    problem_means,
    problem_pass_at_k,
    ranks,
    regularized_incomplete_beta,
    sampling_standard_error,
    seed_interval,
    spearman,
    standard_error,
    student_t_cdf,
    student_t_pdf,
    student_t_quantile,
    subsampled_standard_errors,
    trend,
    welch_test,
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


# --- small samples: Student's t, across-seed intervals, Welch's test -------------------------
# Closed forms first (they need nothing installed), then scipy where it is installed (the
# `test` extra): its t and its Welch test are the reference the course's own are held to.

DFS = [1, 1.35, 2, 3, 7.5, 30, 1e6]  # Welch's df is fractional; 1e6 is nearly the normal
TS = [-40.0, -8.0, -3.0, -2.0, -1.0, -0.3, 0.0, 1e-3, 0.5, 1.7, 2.5, 5.0, 12.0]
PS = [1e-10, 1e-4, 0.025, 0.1, 0.4, 0.6, 0.9, 0.975, 0.9999, 1 - 1e-10]


def _scipy_stats():
    return pytest.importorskip("scipy.stats")


def _cauchy_cdf(t):  # Student's t with 1 df
    return 0.5 + math.atan(t) / math.pi


def _t2_cdf(t):  # Student's t with 2 df
    return 0.5 + t / (2 * math.sqrt(2 + t * t))


def test_the_t_cdf_matches_its_closed_forms_for_1_and_2_df():
    for t in TS:
        assert student_t_cdf(t, 1) == pytest.approx(_cauchy_cdf(t), rel=1e-13, abs=1e-16)
        assert student_t_cdf(t, 2) == pytest.approx(_t2_cdf(t), rel=1e-13, abs=1e-16)
    # far in the lower tail the probability keeps its digits: 1 / (pi |t|) for the Cauchy
    assert student_t_cdf(-1e8, 1) == pytest.approx(1 / (math.pi * 1e8), rel=1e-12)
    assert student_t_cdf(-1e8, 2) == pytest.approx(0.5 / 1e16, rel=1e-10)
    assert student_t_cdf(0.0, 3) == 0.5
    assert student_t_cdf(-math.inf, 3) == 0.0 and student_t_cdf(math.inf, 3) == 1.0


def test_the_t_cdf_beyond_where_t_squared_overflows_keeps_its_tail():
    # |t| > 1e154: the leading term of the tail, exact there (scipy returns 0 here)
    assert student_t_cdf(-1e160, 1) == pytest.approx(1 / (math.pi * 1e160), rel=1e-13)
    assert student_t_cdf(-1e155, 2) == pytest.approx(0.5e-310, rel=1e-6)  # a subnormal
    # with df near 0 the tail at 1e200 is not small at all: 0.0049, not 0
    assert student_t_cdf(-1e200, 0.01) == pytest.approx(0.004852632857558691, rel=1e-12)
    assert student_t_cdf(1e200, 0.01) == pytest.approx(1 - 0.004852632857558691, rel=1e-12)


def test_the_t_density_matches_its_closed_forms():
    for t in TS:
        assert student_t_pdf(t, 1) == pytest.approx(1 / (math.pi * (1 + t * t)), rel=1e-13)
        assert student_t_pdf(t, 2) == pytest.approx((2 + t * t) ** -1.5, rel=1e-13)
    assert student_t_pdf(0.0, 30) < NormalDist().pdf(0.0)  # heavier tails, a lower centre
    assert student_t_pdf(1e200, 0.5) == 0.0  # t^2 / df overflows: below 1e-154 there


def test_t_quantiles_match_the_textbook_and_the_closed_forms():
    assert student_t_quantile(0.975, 1) == pytest.approx(12.7062047, abs=1e-7)
    assert student_t_quantile(0.975, 2) == pytest.approx(4.3026527, abs=1e-7)
    assert student_t_quantile(0.975, 3) == pytest.approx(3.1824463, abs=1e-7)
    assert student_t_quantile(0.975, 30) == pytest.approx(2.0422725, abs=1e-7)
    assert student_t_quantile(0.95, 7) == pytest.approx(1.8945786, abs=1e-7)
    assert student_t_quantile(0.025, 1) == pytest.approx(-12.7062047, abs=1e-7)
    for p in PS + [1e-300]:
        # 1 df: tan(pi (p - 1/2)), written -1 / tan(pi p) to keep the digits of a small p;
        # 2 df: (2p - 1) / sqrt(2 p (1 - p))
        cauchy = -1 / math.tan(math.pi * p) if p < 0.5 else 1 / math.tan(math.pi * (1 - p))
        assert student_t_quantile(p, 1) == pytest.approx(cauchy, rel=1e-11)
        assert student_t_quantile(p, 2) == pytest.approx(
            (2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)
    assert student_t_quantile(0.5, 3) == 0.0 and student_t_quantile(0.5, 0.5) == 0.0


def test_the_t_quantile_inverts_the_cdf_and_grows_as_df_falls():
    for df in DFS + [0.3]:
        for p in PS:
            t = student_t_quantile(p, df)
            assert student_t_cdf(t, df) == pytest.approx(p, rel=1e-10)
    factors = [student_t_quantile(0.975, df) for df in (1, 2, 4, 10, 100, 1e5)]
    assert factors == sorted(factors, reverse=True) and factors[-1] > 1.959964


def test_a_quantile_beyond_the_largest_float_is_infinite():
    # df near 0: the tails are so heavy that the 1e-5 point lies beyond 1e308
    assert student_t_quantile(1e-5, 0.01) == -math.inf
    assert student_t_quantile(1 - 1e-5, 0.01) == math.inf
    # far out but finite, where the density underflows and bisection finishes the search
    t = student_t_quantile(1e-20, 0.1)
    assert 1e155 < -t < 1e300 and student_t_cdf(t, 0.1) == pytest.approx(1e-20, rel=1e-9)


def test_from_1e9_df_on_and_at_infinity_the_t_is_the_normal():
    normal = NormalDist()
    for df in (1e9, 1e12, math.inf):
        for t in (-3.0, -1.0, 0.0, 0.4, 2.0):
            assert student_t_cdf(t, df) == pytest.approx(normal.cdf(t), abs=1e-16)
            assert student_t_pdf(t, df) == normal.pdf(t)
        for p in PS:
            assert student_t_quantile(p, df) == normal.inv_cdf(p)
    # the normal tail keeps its digits where NormalDist().cdf returns 0
    assert student_t_cdf(-10.0, math.inf) == pytest.approx(7.6198530241605e-24, rel=1e-12)
    assert student_t_cdf(10.0, 1e9) == 1.0
    # just below, the t, which differs from the normal by less than 2e-8 there
    assert student_t_quantile(0.975, 5e8) != normal.inv_cdf(0.975)
    assert student_t_quantile(0.975, 5e8) == pytest.approx(normal.inv_cdf(0.975), rel=2e-8)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, -math.inf])
def test_the_t_functions_refuse_a_df_that_is_not_positive(bad):
    for call in (lambda: student_t_cdf(1.0, bad), lambda: student_t_pdf(1.0, bad),
                 lambda: student_t_quantile(0.9, bad)):
        with pytest.raises(ValueError, match="degrees of freedom must be > 0"):
            call()


def test_the_t_functions_refuse_nan_and_p_outside_0_1():
    for call in (lambda: student_t_cdf(math.nan, 3), lambda: student_t_pdf(math.nan, 3)):
        with pytest.raises(ValueError, match="t is NaN"):
            call()
    for p in (0.0, 1.0, -0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="need 0 < p < 1"):
            student_t_quantile(p, 3)


def test_the_incomplete_beta_by_hand_and_its_range():
    # I_x(1, 1) = x, I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b, I_x(2, 2) = 3x^2 - 2x^3
    for x in (0.0, 0.1, 0.37, 0.5, 0.9, 1.0):
        assert regularized_incomplete_beta(x, 1, 1) == pytest.approx(x, abs=1e-15)
        assert regularized_incomplete_beta(x, 3.5, 1) == pytest.approx(x ** 3.5, abs=1e-15)
        assert regularized_incomplete_beta(x, 1, 0.25) == pytest.approx(
            1 - (1 - x) ** 0.25, abs=1e-15)
        assert regularized_incomplete_beta(x, 2, 2) == pytest.approx(3 * x * x - 2 * x ** 3,
                                                                     abs=1e-15)
    assert regularized_incomplete_beta(0.2, 5, 5) + regularized_incomplete_beta(0.8, 5, 5) == \
        pytest.approx(1.0, abs=1e-15)  # symmetry I_x(a, b) = 1 - I_{1-x}(b, a)
    # a tiny x and a large b: (1 - x)^b must come from log1p(-x), not from log(1 - x), whose
    # rounding b multiplies (1e-10 off here)
    x = 1.234567e-7
    assert regularized_incomplete_beta(x, 1, 1e6) == pytest.approx(
        -math.expm1(1e6 * math.log1p(-x)), rel=1e-13)
    for bad in [(-0.1, 1, 1), (1.1, 1, 1), (0.5, 0, 1), (0.5, 1, 0), (0.5, 1, -2),
                (math.nan, 1, 1), (0.5, math.nan, 1), (0.5, 1, math.nan)]:
        with pytest.raises(ValueError, match="need 0 <= x <= 1, a > 0 and b > 0"):
            regularized_incomplete_beta(*bad)


def test_bonferroni_t_quantile_is_the_t_at_the_split_level():
    assert bonferroni_t_quantile(1, 2) == pytest.approx(4.3026527, abs=1e-7)
    assert bonferroni_t_quantile(1, 2) == student_t_quantile(0.975, 2)
    assert bonferroni_t_quantile(6, 2) == pytest.approx(10.8858666, abs=1e-6)  # 1 - 0.05 / 12
    assert bonferroni_t_quantile(3, 4) == student_t_quantile(1 - 0.05 / 6, 4)
    assert bonferroni_t_quantile(2, 5, confidence=0.9) == student_t_quantile(1 - 0.1 / 4, 5)
    assert bonferroni_t_quantile(6, math.inf) == pytest.approx(bonferroni_z(6), abs=1e-12)
    for bad in [(0, 3, 0.95), (2, 3, 0.0), (2, 3, 1.0)]:
        with pytest.raises(ValueError, match="comparisons >= 1 and 0 < confidence < 1"):
            bonferroni_t_quantile(*bad)
    with pytest.raises(ValueError, match="degrees of freedom"):
        bonferroni_t_quantile(2, 0)


# --- against scipy --------------------------------------------------------------------------


@pytest.mark.parametrize("df", DFS)
def test_the_t_cdf_density_and_quantile_match_scipy(df):
    stats = _scipy_stats()
    # relative, so the far tails count: 1e-12, 1e-10 at df = 1e6 (see student_t_cdf)
    rel = 1e-10 if df > 1000 else 1e-12
    for t in TS:
        assert student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), rel=rel, abs=0)
        assert student_t_pdf(t, df) == pytest.approx(stats.t.pdf(t, df), rel=1e-12, abs=0)
    for p in PS:
        assert student_t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-10)


def test_below_t_squared_equal_3_the_cdf_keeps_its_digits_at_any_df():
    stats = _scipy_stats()
    # there x = df / (df + t^2) is near 1: its complement and the beta's log are taken
    # directly (t^2 / (df + t^2), Stirling's series), not as a difference of nearly equal
    # numbers, which would keep only 8 digits at df = 1e8
    for df in (1e4, 1e6, 1e8):
        for t in (-1.7, -1.0, -0.2, -1e-5):
            assert student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), rel=1e-13)
            assert student_t_pdf(-t, df) == pytest.approx(stats.t.pdf(t, df), rel=1e-13)


def test_the_incomplete_beta_matches_scipy():
    special = pytest.importorskip("scipy.special")
    for x, a, b in [(0.3, 2, 3), (0.01, 0.1, 0.1), (0.5, 40, 35), (0.95, 0.5, 60),
                    (0.999999, 5e5, 0.5), (0.4, 3.5, 1e4), (0.7, 0.5, 29.5), (0.2, 31, 0.5),
                    (1.234567e-7, 2, 1e6)]:
        assert regularized_incomplete_beta(x, a, b) == pytest.approx(special.betainc(a, b, x),
                                                                     rel=1e-13)


WELCH_CASES = [
    ([0.31, 0.12, 0.25], [0.05, 0.11, -0.02, 0.09, 0.0]),
    ([0.2, 0.25], [0.1, 0.4]),  # two seeds a side: df near 1
    ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 2.5, 2.25]),
    ([0.5, 0.5, 0.5], [0.1, 0.3, 0.2, 0.6]),  # no spread in a: df = n_b - 1
    ([-3.0, 4.0], [10.0, 11.0, 9.5]),
]


@pytest.mark.filterwarnings("ignore:Precision loss")  # scipy, on the group without spread
@pytest.mark.parametrize("a, b", WELCH_CASES)
def test_welch_matches_scipy_ttest_ind(a, b):
    stats = _scipy_stats()
    ref = stats.ttest_ind(a, b, equal_var=False)
    test = welch_test(a, b)
    assert test.t == pytest.approx(ref.statistic, rel=1e-12)
    assert test.df == pytest.approx(ref.df, rel=1e-12)
    assert test.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert test.difference == pytest.approx(float(sum(a)) / len(a) - sum(b) / len(b))


# --- the across-seed interval and Welch's test, by hand --------------------------------------


def test_one_seed_gives_no_interval_and_says_so():
    one = seed_interval([0.241])
    assert one == SeedInterval(mean=0.241, n=1, df=0, sem=None, t=None, low=None, high=None,
                               confidence=0.95, reason="one seed: no interval")
    assert one.describe() == "mean +0.241, one seed: no interval"
    assert seed_interval([3]).mean == 3.0 and isinstance(seed_interval([3]).mean, float)


def test_two_seeds_give_the_interval_but_say_it_is_no_use():
    two = seed_interval([0.2, 0.3])  # mean 0.25, sd 0.0707, sem 0.05, t_0.975,1 = 12.706
    assert (two.n, two.df, two.mean) == (2, 1, 0.25)
    assert two.sem == pytest.approx(0.05) and two.t == pytest.approx(12.7062047, abs=1e-7)
    assert (two.low, two.high) == (pytest.approx(0.25 - 12.7062047 * 0.05),
                                   pytest.approx(0.25 + 12.7062047 * 0.05))
    assert two.high - two.low == pytest.approx(12.7062047 * 0.1)  # 12.7 times the gap
    assert two.reason == "2 seeds: no useful interval (1 degree of freedom, t = 12.71)"
    assert two.describe() == ("mean +0.25, 2 seeds: no useful interval "
                              "(1 degree of freedom, t = 12.71)")
    assert seed_interval([0.2, 0.3], confidence=0.9).reason.endswith("t = 6.31)")


def test_three_seeds_give_a_t_interval():
    three = seed_interval([0.1, 0.3, 0.323])  # mean 0.241, sd 0.12265, sem 0.070812
    assert (three.n, three.df, three.reason, three.confidence) == (3, 2, None, 0.95)
    assert three.mean == pytest.approx(0.241)
    assert three.sem == pytest.approx(standard_error([0.1, 0.3, 0.323]))
    assert three.t == pytest.approx(4.3026527, abs=1e-7)
    assert three.low == pytest.approx(0.241 - three.t * three.sem)
    assert three.high == pytest.approx(0.241 + three.t * three.sem)
    assert three.describe() == "mean +0.241, 95 % t-interval [-0.0637, +0.546] (n = 3 seeds, 2 df)"
    assert three.describe(digits=2) == ("mean +0.24, 95 % t-interval [-0.064, +0.55] "
                                        "(n = 3 seeds, 2 df)")
    ninety = seed_interval([0.1, 0.3, 0.323, 0.2], confidence=0.9)
    assert ninety.t == pytest.approx(2.3533634, abs=1e-7) and ninety.df == 3
    assert ninety.describe().startswith("mean +0.231, 90 % t-interval [")
    assert ninety.describe().endswith("(n = 4 seeds, 3 df)")


def test_identical_seeds_have_no_spread_not_a_rounding_error():
    # fsum's mean of three 0.1s is 0.10000000000000002, which would leave a sem of 2e-17
    same = seed_interval([0.1, 0.1, 0.1])
    assert (same.mean, same.sem, same.low, same.high) == (0.1, 0.0, 0.1, 0.1)
    assert standard_error([0.1, 0.1, 0.1]) > 0  # what the plain standard error gives


def test_a_seed_interval_refuses_no_seeds_non_numbers_and_bad_confidence():
    with pytest.raises(ValueError, match="no seeds"):
        seed_interval([])
    with pytest.raises(ValueError, match=r"^values holds \[nan\], not finite numbers"):
        seed_interval([0.1, math.nan, 0.2])
    with pytest.raises(ValueError, match=r"^values holds \[inf, -inf\]"):
        seed_interval([math.inf, 0.1, -math.inf])
    for confidence in (0.0, 1.0, 95):
        with pytest.raises(ValueError, match="need 0 < confidence < 1"):
            seed_interval([0.1, 0.2, 0.3], confidence=confidence)


def test_welch_by_hand_is_a_minus_b():
    a, b = [0.31, 0.12, 0.25], [0.05, 0.11, -0.02, 0.09, 0.0]
    test = welch_test(a, b)
    va, vb = standard_error(a) ** 2, standard_error(b) ** 2  # s^2 / n of each group
    assert (test.n_a, test.n_b) == (3, 5)
    assert test.mean_a == pytest.approx(0.68 / 3) and test.mean_b == pytest.approx(0.046)
    assert test.difference == pytest.approx(0.68 / 3 - 0.046)  # a - b, as paired_difference
    assert test.sem == pytest.approx(math.sqrt(va + vb))
    assert test.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 4))
    assert test.t == pytest.approx(test.difference / test.sem)
    assert test.p_value == pytest.approx(2 * student_t_cdf(-test.t, test.df))
    swapped = welch_test(b, a)
    assert (swapped.t, swapped.df, swapped.p_value) == (
        pytest.approx(-test.t), pytest.approx(test.df), pytest.approx(test.p_value))
    assert test.describe() == ("a - b +0.181 ± 0.0614 (Welch t = +2.94, 2.8 df, two-sided "
                               "p = 0.065; n = 3 and 5 seeds)")
    assert swapped.describe(digits=2).startswith("a - b -0.18 ± 0.061 (Welch t = -2.94")


def test_welch_with_equal_means_has_p_1_and_with_one_flat_group_its_df_is_the_others():
    even = welch_test([1.0, 3.0], [0.0, 2.0, 4.0])
    assert even.t == 0.0 and even.p_value == 1.0
    flat = welch_test([0.5, 0.5, 0.5], [0.1, 0.3, 0.2, 0.6])
    assert flat.df == pytest.approx(3.0) and flat.sem == pytest.approx(
        standard_error([0.1, 0.3, 0.2, 0.6]))


def test_welch_without_spread_in_either_group_gives_a_limit_not_nan():
    apart = welch_test([0.1, 0.1], [0.2, 0.2, 0.2])
    assert (apart.sem, apart.df, apart.t, apart.p_value) == (0.0, None, None, 0.0)
    assert (apart.mean_a, apart.mean_b) == (0.1, 0.2)
    assert apart.describe() == ("a - b -0.1, no spread in either group (p = 0 by convention; "
                                "n = 2 and 3 seeds)")
    # the same value everywhere: equal means exactly, though fsum's mean of 0.1s rounds
    same = welch_test([0.1, 0.1], [0.1, 0.1, 0.1])
    assert (same.difference, same.t, same.p_value) == (0.0, None, 1.0)
    assert same.describe() == ("a - b +0, no spread in either group (p = 1 by convention; "
                               "n = 2 and 3 seeds)")


def test_welch_needs_two_finite_values_a_group_and_says_which():
    with pytest.raises(ValueError, match="group a has 1 value.*at least 2 in each group"):
        welch_test([0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="group b has 0 value"):
        welch_test([0.3, 0.4], [])
    with pytest.raises(ValueError, match=r"group b holds \[nan\], not finite numbers"):
        welch_test([0.3, 0.4], [0.1, math.nan])
    with pytest.raises(ValueError, match="group a holds"):
        welch_test([math.inf, 0.4], [0.1, 0.2])


def test_the_detectable_change_with_estimated_spread_uses_students_t():
    # 2 runs a side, 2 df: t_{0.975, 2} = 4.302653, t_{0.8, 2} = 1.060660
    assert minimum_detectable_change(0.05, 2, df=2) == pytest.approx(
        (4.302653 + 1.060660) * 0.05, rel=1e-5)
    # three comparisons: t_{1 - 0.05/6, 6} = 3.287455, t_{0.8, 6} = 0.905703
    assert minimum_detectable_change(0.05, 4, comparisons=3, df=6) == pytest.approx(
        (3.287455 + 0.905703) * 0.05 * math.sqrt(0.5), rel=1e-5)
    # many degrees of freedom: the normal quantiles again
    assert minimum_detectable_change(0.05, 4, df=1e9) == pytest.approx(
        minimum_detectable_change(0.05, 4), rel=1e-7)
    assert minimum_detectable_change(0.05, 2, df=2) > 1.9 * minimum_detectable_change(0.05, 2)


def test_sampling_noise_with_the_problems_fixed_by_hand():
    # problem a: scores 0, 1 (variance 0.5, over 2 samples: 0.25); b: 1, 1, 1 (0)
    assert sampling_standard_error({"a": [0.0, 1.0], "b": [1.0, 1.0, 1.0]}) == pytest.approx(
        math.sqrt(0.25) / 2)
    # c: 0, 0.5, 1 (variance 0.25, over 3 samples)
    assert sampling_standard_error({"a": [0.0, 1.0], "c": [0.0, 0.5, 1.0]}) == pytest.approx(
        math.sqrt(0.25 + 0.25 / 3) / 2)
    with pytest.raises(ValueError, match=r"problems \['x'\] have fewer than 2 scores"):
        sampling_standard_error({"a": [0.0, 1.0], "x": [1.0]})
    with pytest.raises(ValueError, match="no problems"):
        sampling_standard_error({})


def test_a_mean_scores_change_splits_exactly_into_mix_and_within_kinds():
    # before: 1 of 4 fenced (score 1.0), the rest 0, 0, 0.5; after: 3 of 4 fenced
    before = ([True, False, False, False], [1.0, 0.0, 0.0, 0.5])
    after = ([True, True, True, False], [1.0, 0.5, 0.0, 1.0])
    split = mix_split(before, after)
    assert (split.share_before, split.share_after) == (0.25, 0.75)
    assert split.in_before == 1.0 and split.out_before == pytest.approx(0.5 / 3)
    assert split.in_after == pytest.approx(0.5) and split.out_after == 1.0
    assert split.change == pytest.approx(2.5 / 4 - 1.5 / 4)
    assert split.mix_part == pytest.approx(0.5 * (1.0 - 0.5 / 3)) == split.format_part
    assert split.within_part == pytest.approx(0.75 * (0.5 - 1.0) + 0.25 * (1.0 - 0.5 / 3))
    assert split.mix_part + split.within_part == pytest.approx(split.change)
    # no item of the kind at all: its mean is taken as 0, and the split still adds up
    none = mix_split(([False, False], [0.0, 1.0]), ([True, False], [1.0, 1.0]))
    assert none.in_before == 0.0 and none.mix_part + none.within_part == pytest.approx(
        none.change) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="as many kinds as scores"):
        mix_split(([True], [1.0, 0.0]), after)
    with pytest.raises(ValueError, match="as many kinds as scores"):
        mix_split(([], []), after)


# --- two setups with a margin: higher, lower, equivalent or undecided (eq. (8.9)) -------------


@pytest.mark.filterwarnings("ignore:Precision loss")
@pytest.mark.parametrize("a, b", [case for case in WELCH_CASES if len(set(case[0])) > 1])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_the_comparisons_intervals_match_scipy(a, b, confidence):
    stats = _scipy_stats()
    ref = stats.ttest_ind(a, b, equal_var=False)
    found = compare_setups(a, b, margin=0.1, confidence=confidence)
    outer = ref.confidence_interval(confidence_level=confidence)
    inner = ref.confidence_interval(confidence_level=1 - 2 * (1 - confidence))
    assert (found.low, found.high) == (pytest.approx(outer.low, rel=1e-9),
                                       pytest.approx(outer.high, rel=1e-9))
    assert (found.inner_low, found.inner_high) == (pytest.approx(inner.low, rel=1e-9),
                                                   pytest.approx(inner.high, rel=1e-9))
    assert found.test == welch_test(a, b)


def test_a_clear_difference_is_a_or_b_higher_whatever_the_margin():
    a, b = [0.30, 0.32, 0.31, 0.33], [0.10, 0.12, 0.11, 0.13]
    assert compare_setups(a, b, margin=0.5).verdict == "a higher"
    assert compare_setups(b, a, margin=0.5).verdict == "b higher"
    assert compare_setups(b, a, margin=0.01).verdict == "b higher"


def test_tight_seeds_close_together_are_equivalent_and_wide_ones_undecided():
    close = compare_setups([0.200, 0.204, 0.198, 0.202], [0.201, 0.199, 0.203, 0.197],
                           margin=0.01)
    assert close.verdict == "equivalent"
    assert close.inner_low > -0.01 and close.inner_high < 0.01
    assert close.low < close.inner_low < 0 < close.inner_high < close.high
    # the same means, seeds spread over 0.1: no difference found, and none ruled out
    wide = compare_setups([0.15, 0.25, 0.10, 0.30], [0.22, 0.18, 0.28, 0.12], margin=0.01)
    assert wide.test.p_value > 0.5 and wide.verdict == "undecided"
    assert compare_setups([0.15, 0.25, 0.10, 0.30], [0.22, 0.18, 0.28, 0.12],
                          margin=1.0).verdict == "equivalent"


def test_equivalence_needs_the_inner_interval_strictly_inside_the_margin():
    a, b = [0.0, 0.2], [0.1, 0.1, 0.1]  # df = 1, difference 0
    found = compare_setups(a, b, margin=1.0)
    half = student_t_quantile(0.95, 1) * found.test.sem
    assert found.inner_high == pytest.approx(half) and found.inner_low == pytest.approx(-half)
    assert compare_setups(a, b, margin=half * 1.001).verdict == "equivalent"
    assert compare_setups(a, b, margin=half * 0.999).verdict == "undecided"


def test_seeds_without_spread_compare_their_values_alone():
    apart = compare_setups([0.1, 0.1], [0.2, 0.2, 0.2], margin=0.05)
    assert (apart.low, apart.high, apart.verdict) == (
        pytest.approx(-0.1), pytest.approx(-0.1), "b higher")
    same = compare_setups([0.1, 0.1], [0.1, 0.1, 0.1], margin=0.05)
    assert (same.low, same.high, same.verdict) == (0.0, 0.0, "equivalent")


def test_the_comparison_says_its_interval_and_verdict_in_one_line():
    found = compare_setups([0.15, 0.25, 0.10, 0.30], [0.22, 0.18, 0.28, 0.12], margin=0.05)
    assert found.describe() == (
        f"a - b {found.test.difference:+.2g}, 95 % interval [{found.low:+.2g}, "
        f"{found.high:+.2g}], 90 % [{found.inner_low:+.2g}, {found.inner_high:+.2g}]: "
        "undecided at a margin of 0.05")


def test_a_comparison_refuses_a_bad_margin_or_confidence():
    for margin in (0.0, -0.1, math.nan):
        with pytest.raises(ValueError, match="need a margin > 0"):
            compare_setups([0.1, 0.2], [0.3, 0.4], margin=margin)
    for confidence in (0.5, 1.0, 0.3):
        with pytest.raises(ValueError, match="need 0.5 < confidence < 1"):
            compare_setups([0.1, 0.2], [0.3, 0.4], margin=0.1, confidence=confidence)
    with pytest.raises(ValueError, match="group a has 1 value"):
        compare_setups([0.1], [0.3, 0.4], margin=0.1)
