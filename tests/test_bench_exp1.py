"""benchmarks/bench_exp1.py's arithmetic: the step at which a run reaches experiment 1's target,
and the line that sums up the seeds' times to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_exp1 import first_step_at_target, summarize_times  # noqa: E402


def test_the_target_needs_five_steps_whose_mean_distance_is_at_most_ten():
    assert first_step_at_target([-30.0] * 4 + [-10.0] * 5) == 9
    assert first_step_at_target([-12.0, -8.0, -10.0, -10.0, -10.0]) == 5  # the mean, not each
    assert first_step_at_target([-10.5] * 8) is None
    assert first_step_at_target([-1.0] * 4) is None  # fewer steps than the window


def test_the_summary_gives_median_range_and_a_t_interval_over_the_seeds_that_reached_it():
    line = summarize_times([281.0, 207.0, None, 150.0, 259.0])
    # reached: 150, 207, 259, 281; mean 224.25, sd 58.4, sem 29.2, t(0.975, 3) = 3.182
    assert line.startswith("target reached in 4 of 5 seeds; time to it: median 233 s, "
                           "range 150-281 s; mean 224 s, 95 % t-interval ")
    low, high = (float(x) for x in line.rpartition("t-interval ")[2].removesuffix(" s").split("-"))
    assert low == pytest.approx(224.25 - 3.1824 * 29.21, abs=1)
    assert high == pytest.approx(224.25 + 3.1824 * 29.21, abs=1)


def test_the_summary_says_when_there_is_no_useful_interval():
    assert summarize_times([None, None]) == "target not reached in any of 2 seeds"
    assert summarize_times([100.0, None]).endswith("mean 100 s, one seed: no interval")
    assert "2 seeds: no useful interval" in summarize_times([100.0, 120.0])


def test_times_are_read_back_from_the_scripts_own_output():
    from bench_exp1 import times_in_output

    output = ("CPU: AMD EPYC\nexperiment 1, cpu profile, 30 steps; target: ...\n"
              "float32, seed 0: reached at step 28, 281 s after the start; first step logged at 44 s\n"
              "float32, seed 4: not reached; first step logged at 23 s, median step 7.0 s\n"
              "default, seed 1: reached at step 21, 115 s after the start; first step logged at 14 s\n"
              " float32: target reached in 1 of 2 seeds; time to it: median 281 s\n")
    assert times_in_output(output) == {"float32": [281.0, None], "default": [115.0]}
