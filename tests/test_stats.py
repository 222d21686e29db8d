"""grpo_core.stats against hand computations: problem means, standard errors over problems,
paired differences and z, ranks with ties, Spearman, trends."""

from __future__ import annotations

import math

import pytest

from grpo_core.stats import (
    format_number,
    format_span,
    mean,
    paired_difference,
    problem_means,
    ranks,
    spearman,
    standard_error,
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
