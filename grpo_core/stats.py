"""The course's statistics, in one place: problem means, standard errors, paired differences,
z-scores, pass@k, rank correlation and trends.

Every held-out figure the course reports (the evaluator's ``eval/<fn>/sem`` and
``delta_sem``, ``diagnose``'s hacking evidence, notebooks 08 and 09, ``tools/run_summary.py``)
comes from these functions, so the headline z-scores have one implementation. Plain Python
floats (``math.fsum``): no torch, no numpy, nothing from the rest of the package.

The unit of independence is the **problem**: the samples of one problem share its difficulty,
so a problem's samples are first averaged (:func:`problem_means`), and the standard error is
taken over problems (:func:`standard_error`). A change between two evaluations of the same
problems is **paired** (:func:`paired_difference`): each problem's difficulty cancels in its
own change, so the change's standard error is smaller than the two scores' errors combined.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any


def mean(values: Iterable[float]) -> float:
    """The mean, summed exactly (``math.fsum``). Raises ValueError for no values."""
    values = list(values)
    if not values:
        raise ValueError("the mean of no values")
    return math.fsum(values) / len(values)


def problem_means(scores: Mapping[Any, Sequence[float]]) -> dict[Any, float]:
    """``{problem: its samples' scores}`` -> ``{problem: mean over its samples}``.

    Raises:
        ValueError: a problem with no samples.
    """
    empty = [problem for problem, values in scores.items() if len(values) == 0]
    if empty:
        raise ValueError(f"problems {empty[:5]} have no samples")
    return {problem: mean(values) for problem, values in scores.items()}


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of independent ``values``: std (ddof = 1) / sqrt(N).

    NaN for fewer than two values (no spread to measure)."""
    n = len(values)
    if n < 2:
        return math.nan
    centre = mean(values)
    variance = math.fsum((value - centre) ** 2 for value in values) / (n - 1)
    return math.sqrt(variance / n)


def z_score(change: float, error: float) -> float | None:
    """``change / error``: how many standard errors a change is (None when the error is 0
    or not a number). |z| >= 2 is a change unlikely under no change at all, about 5 %
    two-sided, for one comparison; several comparisons need a stricter bar."""
    return change / error if error > 0 else None


def bonferroni_z(comparisons: int, alpha: float = 0.05) -> float:
    """The |z| a difference must reach to count at two-sided level ``alpha`` when it is one of
    ``comparisons`` made at once (Bonferroni: each is tested at ``alpha / comparisons``).

    One comparison: 1.96; six (every pair of four runs): 2.64. Looking at many differences and
    reporting the largest finds a |z| >= 2 by chance far more often than 5 % of the time.
    """
    if comparisons < 1 or not 0 < alpha < 1:
        raise ValueError(f"need comparisons >= 1 and 0 < alpha < 1, got {comparisons}, {alpha}")
    return NormalDist().inv_cdf(1 - alpha / (2 * comparisons))


@dataclass(frozen=True)
class PairedDifference:
    """The mean of per-problem differences ``a - b`` over the same held-out problems.

    Attributes:
        mean: the mean difference over the problems (notebook 08, eq. 8.5).
        sem: its standard error, std (ddof = 1) of the differences / sqrt(problems): each
            problem is one independent draw, and its difficulty cancels in its own difference.
        problems: how many problems were paired.
    """

    mean: float
    sem: float
    problems: int

    @property
    def z(self) -> float | None:
        """``mean / sem`` (None when the standard error is 0)."""
        return z_score(self.mean, self.sem)


def paired_difference(a: Mapping[Any, float], b: Mapping[Any, float]) -> PairedDifference:
    """``a[p] - b[p]`` averaged over the problems ``p``, with its standard error.

    ``a`` and ``b``: each problem's score, ``{problem id: mean over its samples}`` (two runs'
    held-out scores at the same step, or one run's at two steps: ``Samples.problem_means``).
    They must hold the same problems, at least two: a difference of different problems is not
    paired.
    """
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b), key=str)[:5]
        raise ValueError(f"a and b must score the same problems; only one has {only}")
    if len(a) < 2:
        raise ValueError(f"need at least 2 problems to pair, got {len(a)}")
    differences = [a[p] - b[p] for p in a]
    return PairedDifference(mean=mean(differences), sem=standard_error(differences),
                            problems=len(differences))


PASS_SCORE = 1.0  # a pass/fail reward's score for a sample that passes (every assert)


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of one problem, ``correct`` of which
    passed: the chance that at least one of ``k`` samples drawn without replacement from the
    ``n`` passes (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", their
    eq. 1; notebooks 08 and 12)::

        pass@k = 1 - C(n - correct, k) / C(n, k)

    Exact (integer binomials). pass@1 is ``correct / n``; pass@n is 1 when any sample passed.
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= correct <= n:
        raise ValueError(f"correct must be in [0, n={n}], got {correct}")
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


def problem_pass_at_k(passed: Mapping[Any, Sequence[bool]], k: int) -> dict[Any, float]:
    """``{problem: each sample passed?}`` -> ``{problem: its pass@k}`` (:func:`pass_at_k`).
    Average them with :func:`mean`, and take :func:`standard_error` over problems, as for a
    score."""
    empty = [problem for problem, values in passed.items() if len(values) == 0]
    if empty:
        raise ValueError(f"problems {empty[:5]} have no samples")
    return {problem: pass_at_k(len(values), sum(bool(v) for v in values), k)
            for problem, values in passed.items()}


def minimum_detectable_change(sd: float, runs_per_side: int, alpha: float = 0.05,
                              power: float = 0.8, comparisons: int = 1) -> float:
    """The smallest true difference between two setups that ``runs_per_side`` runs of each
    detect with probability ``power`` at two-sided level ``alpha`` (Bonferroni over
    ``comparisons``), when one run's result has standard deviation ``sd`` (notebook 12)::

        (z_{1 - alpha / (2 m)} + z_power) * sd * sqrt(2 / n)

    ``sd`` is the run-to-run spread of what is compared (for a held-out change: the spread
    over seeds, which holds the evaluation's own noise too).
    """
    if runs_per_side < 1 or not sd >= 0 or not 0 < power < 1:
        raise ValueError(f"need runs_per_side >= 1, sd >= 0 and 0 < power < 1, got "
                         f"{runs_per_side}, {sd}, {power}")
    return (bonferroni_z(comparisons, alpha) + NormalDist().inv_cdf(power)) * sd * math.sqrt(
        2 / runs_per_side)


def subsampled_standard_errors(values: Sequence[float], sizes: Sequence[int], draws: int = 200,
                               seed: int = 0) -> dict[int, float]:
    """For each size ``n`` in ``sizes``: the standard deviation, over ``draws`` random subsets
    of ``n`` of ``values`` (without replacement), of the subset's mean: what the standard
    error of a held-out score would be with only ``n`` problems (notebook 12). Compare
    :func:`standard_error` of the whole, which estimates the same for ``n = len(values)``
    (this one is 0 there: every subset is the whole)."""
    if any(not 2 <= n <= len(values) for n in sizes) or draws < 2:
        raise ValueError(f"sizes must lie in [2, {len(values)}] and draws >= 2")
    rng = random.Random(seed)
    spread = {}
    for n in sizes:
        means = [mean(rng.sample(list(values), n)) for _ in range(draws)]
        spread[n] = math.sqrt(math.fsum((m - mean(means)) ** 2 for m in means) / (draws - 1))
    return spread


def ranks(values: Sequence[float]) -> list[float]:
    """Each value's rank from 0, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranked = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranked[order[k]] = (i + j) / 2
        i = j + 1
    return ranked


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation in [-1, 1]; 0 when either side is constant or too short."""
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length: {len(x)} vs {len(y)}")
    if len(x) < 2:
        return 0.0
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return 0.0 if vx == 0 or vy == 0 else cov / math.sqrt(vx * vy)


def format_number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, as the evidence texts print it."""
    return f"{value:.{digits}g}"


def format_span(pair: tuple[int, int]) -> str:
    """``(3, 3)`` -> ``"step 3"``, ``(1, 4)`` -> ``"steps 1-4"``."""
    return f"step {pair[0]}" if pair[0] == pair[1] else f"steps {pair[0]}-{pair[1]}"


@dataclass(frozen=True)
class Trend:
    """How a series moved: means of its first and last part (:func:`trend`), and
    Spearman(step, value)."""

    first: float
    last: float
    rho: float
    n: int
    first_steps: tuple[int, int]
    last_steps: tuple[int, int]

    @property
    def change(self) -> float:
        return self.last - self.first

    def describe(self, key: str, digits: int = 3) -> str:
        return (f"{key} {format_number(self.first, digits)} ({format_span(self.first_steps)}) "
                f"-> {format_number(self.last, digits)} ({format_span(self.last_steps)}), "
                f"Spearman(step, value) {self.rho:+.2f}")


def trend(steps: Sequence[int], values: Sequence[float]) -> Trend:
    """Means of the first and last fifth of the values and Spearman(step, value).

    A short series (fewer than 10 values: a sparse held-out score) uses thirds instead
    (rounded), so each end averages two values as soon as there are five.
    """
    if not values:
        raise ValueError("trend of an empty series")
    n = len(values)
    window = max(1, n // 5 if n >= 10 else round(n / 3))
    return Trend(first=sum(values[:window]) / window, last=sum(values[-window:]) / window,
                 rho=spearman(list(steps), list(values)), n=len(values),
                 first_steps=(steps[0], steps[window - 1]),
                 last_steps=(steps[-window], steps[-1]))
