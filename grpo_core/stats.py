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

Across seeds the unit is the run, and there are few (2 to 5): a mean over seeds gets a Student's
t interval (:func:`seed_interval`, none with one seed, a useless one with two), and two setups'
seeds are compared with Welch's t-test (:func:`welch_test`), not with the normal |z| >= 2. The
t distribution is computed here too (:func:`student_t_cdf`, :func:`student_t_quantile`, through
the incomplete beta function), so the package needs no scipy.
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
                              power: float = 0.8, comparisons: int = 1,
                              df: float | None = None) -> float:
    """The smallest true difference between two setups that ``runs_per_side`` runs of each
    detect with probability ``power`` at two-sided level ``alpha`` (Bonferroni over
    ``comparisons``), when one run's result has standard deviation ``sd`` (notebook 12,
    eq. (12.5))::

        (q_{1 - alpha / (2 m)} + q_power) * sd * sqrt(2 / n)

    with ``q`` the normal quantile when ``df`` is None (``sd`` known), else Student's t with
    ``df`` degrees of freedom (``sd`` estimated from the compared seeds: ``2 n - 2``; the usual
    approximation of the noncentral t's power). ``sd`` is the run-to-run spread of what is
    compared (for a held-out change: the spread over seeds).
    """
    if runs_per_side < 1 or not sd >= 0 or not 0 < power < 1:
        raise ValueError(f"need runs_per_side >= 1, sd >= 0 and 0 < power < 1, got "
                         f"{runs_per_side}, {sd}, {power}")
    if df is None:
        factor = bonferroni_z(comparisons, alpha) + NormalDist().inv_cdf(power)
    else:
        factor = (bonferroni_t_quantile(comparisons, df, 1 - alpha)
                  + student_t_quantile(power, df))
    return factor * sd * math.sqrt(2 / runs_per_side)


def sampling_standard_error(scores: Mapping[Any, Sequence[float]]) -> float:
    """The standard error of a mean over problems that comes from sampling alone, the
    problems held fixed (notebook 12, eq. (12.2b))::

        sqrt( sum_i s_i^2 / m_i ) / N

    ``scores``: each problem's sampled scores at one evaluation (``m_i >= 2`` each; ``s_i^2``
    their variance, ddof = 1). Seeds scored on the same problems share the problems'
    difficulty, so only this part of an evaluation's noise reaches their spread.

    Raises ValueError for no problems or a problem with fewer than 2 scores.
    """
    if not scores:
        raise ValueError("no problems")
    few = [problem for problem, values in scores.items() if len(values) < 2]
    if few:
        raise ValueError(f"problems {few[:5]} have fewer than 2 scores: no spread to measure")
    within = math.fsum(standard_error(list(values)) ** 2 for values in scores.values())
    return math.sqrt(within) / len(scores)


@dataclass(frozen=True)
class MixSplit:
    """A mean score's change split into a change of mix and changes within kinds
    (:func:`mix_split`; notebook 08's "what k = 8 learned").

    Attributes:
        share_before, share_after: the share of items of the first kind (e.g. fenced).
        in_before, in_after: the mean score of the first kind (0 where it has no item).
        out_before, out_after: the mean score of the rest (0 where it has no item).
    """

    share_before: float
    share_after: float
    in_before: float
    in_after: float
    out_before: float
    out_after: float

    @property
    def change(self) -> float:
        """The mean score after minus before."""
        after = self.share_after * self.in_after + (1 - self.share_after) * self.out_after
        before = self.share_before * self.in_before + (1 - self.share_before) * self.out_before
        return after - before

    @property
    def mix_part(self) -> float:
        """What the change of mix alone gives, at the scores before:
        ``(share_after - share_before) * (in_before - out_before)``."""
        return (self.share_after - self.share_before) * (self.in_before - self.out_before)

    @property
    def format_part(self) -> float:
        """:attr:`mix_part`, named for notebook 08 (the kind is the requested format)."""
        return self.mix_part

    @property
    def within_part(self) -> float:
        """What the scores within each kind give, at the mix after:
        ``share_after * (in_after - in_before) + (1 - share_after) * (out_after - out_before)``;
        ``mix_part + within_part == change`` exactly."""
        return (self.share_after * (self.in_after - self.in_before)
                + (1 - self.share_after) * (self.out_after - self.out_before))


def _kind_means(is_kind: Sequence[bool], scores: Sequence[float]) -> tuple[float, float, float]:
    if len(is_kind) != len(scores) or not scores:
        raise ValueError(f"need as many kinds as scores, and some: {len(is_kind)} and "
                         f"{len(scores)}")
    inside = [s for k, s in zip(is_kind, scores, strict=True) if k]
    rest = [s for k, s in zip(is_kind, scores, strict=True) if not k]
    return (len(inside) / len(scores), mean(inside) if inside else 0.0,
            mean(rest) if rest else 0.0)


def mix_split(before: tuple[Sequence[bool], Sequence[float]],
              after: tuple[Sequence[bool], Sequence[float]]) -> MixSplit:
    """Split the change of a mean score between two evaluations into the change of mix (how
    many items are of one kind, e.g. completions in the requested format) and the change
    within each kind, exactly (a shift-share decomposition):

        change = (f_1 - f_0)(a_0 - b_0) + f_1 (a_1 - a_0) + (1 - f_1)(b_1 - b_0)

    with ``f`` the kind's share, ``a`` its mean score and ``b`` the rest's, at evaluations 0
    and 1. ``before`` and ``after``: each item's kind (True: the kind) and score.
    """
    share_before, in_before, out_before = _kind_means(*before)
    share_after, in_after, out_after = _kind_means(*after)
    return MixSplit(share_before, share_after, in_before, in_after, out_before, out_after)


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


# --- few values: Student's t ----------------------------------------------------------------
# Across seeds the unit of independence is the run, and there are few of them (2 to 5): the
# sample standard deviation of so few values is itself far from the true spread, so |z| >= 2
# (the normal bar) claims far more than the data hold. Student's t with n - 1 degrees of
# freedom accounts for it: its 97.5 % point is 12.71 with 2 seeds, 4.30 with 3, 2.78 with 5,
# and reaches the normal 1.96 only as the seeds grow many.

# the continued fraction needs O(sqrt(max(a, b))) terms at worst (Numerical Recipes); a few
# hundred were the most seen, for a, b up to 10^9
_CF_MAX_TERMS = 10_000
_CF_TOLERANCE = 1e-15  # stop when a term changes the fraction by less (a few rounding steps)
_CF_TINY = 1e-300  # Lentz: a denominator that reaches 0 is replaced by this
_STIRLING_FROM = 30.0  # ln B(a, b) from Stirling's series once the larger argument reaches this
# From this df on, Student's t is taken as the normal: their quantiles differ by less than
# 2e-8 relative (p from 1e-12 to 1 - 1e-12), their tails up to |t| = 5 by 2e-7, and the
# continued fraction, which loses about df * 4e-17 of its relative precision for |t| > 1.7,
# would do no better.
_NORMAL_FROM_DF = 1e9


def _stirling_correction(z: float) -> float:
    """``lgamma(z) - ((z - 1/2) ln z - z + ln(2 pi) / 2)``, Stirling's series to z^-7 (error
    below 1e-16 for z >= 30)."""
    z2 = z * z
    return (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * z2)) / z2) / z2) / z


def _log_beta(a: float, b: float) -> float:
    """``ln B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)``.

    When one argument is large (Student's t: ``df / 2`` and ``1/2``), ``lgamma(a)`` and
    ``lgamma(a + b)`` are large and nearly equal: with df = 10^6 each is about 6e6, and their
    difference keeps only 9 digits. Stirling's series for the two large terms gives the
    difference itself, to full precision."""
    small, large = min(a, b), max(a, b)
    if large < _STIRLING_FROM:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    # lgamma(large) - lgamma(large + small), each written as Stirling's series
    return (math.lgamma(small) - (large - 0.5) * math.log1p(small / large)
            - small * math.log(large + small) + small
            + _stirling_correction(large) - _stirling_correction(large + small))


def _away_from_zero(value: float) -> float:
    """Lentz's guard: a denominator at 0 is replaced by a tiny number, not divided by."""
    return value if abs(value) >= _CF_TINY else _CF_TINY


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (Numerical Recipes' ``betacf``), evaluated by
    the modified Lentz method; converges fast for ``x < (a + 1) / (a + b + 2)``, the only
    ``x`` it is called with."""
    c = 1.0
    # above 2 / (a + b + 2) for the x it is called with: no guard needed
    d = 1.0 / (1.0 - (a + b) * x / (a + 1))
    fraction = d
    for m in range(1, _CF_MAX_TERMS + 1):
        # each step adds an even term, then an odd one
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 / _away_from_zero(1.0 + numerator * d)
            c = _away_from_zero(1.0 + numerator / c)
            fraction *= c * d
        if abs(c * d - 1.0) < _CF_TOLERANCE:
            return fraction
    raise ArithmeticError(f"the incomplete beta fraction did not converge for x={x}, a={a}, "
                          f"b={b}")


def _incomplete_beta(x: float, y: float, a: float, b: float) -> float:
    """``I_x(a, b)`` given ``x`` and ``y = 1 - x`` both, so that neither loses its digits when
    the other is near 1 (Student's t with a large df has x = df / (df + t^2) near 1)."""
    if x == 0.0 or y == 0.0:
        return 0.0 if x == 0.0 else 1.0
    log_x = math.log(x) if x <= 0.5 else math.log1p(-y)
    log_y = math.log(y) if y <= 0.5 else math.log1p(-x)
    front = math.exp(a * log_x + b * log_y - _log_beta(a, b))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_continued_fraction(x, a, b) / a
    # the fraction converges slowly here: use I_x(a, b) = 1 - I_{1-x}(b, a)
    return 1.0 - front * _beta_continued_fraction(y, b, a) / b


def regularized_incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function
    ``I_x(a, b) = B(x; a, b) / B(a, b)``, for ``0 <= x <= 1`` and real ``a, b > 0``: the
    probability that a Beta(a, b) variable is at most ``x``. Student's t cdf is one
    (:func:`student_t_cdf`).

    Computed as in Numerical Recipes (``betai`` and ``betacf``: a continued fraction,
    evaluated by the modified Lentz method), with ``math.lgamma``: about 1e-14 relative while
    a and b stay below a few hundred; the precision falls as they grow (1e-12 when both are
    1000, 1e-9 when both are 10^5; Student's t, with b = 1/2: :func:`student_t_cdf`).
    Raises ValueError for arguments outside those ranges (NaN included), and ArithmeticError
    if the fraction has not converged after 10 000 terms (never seen for a, b up to 10^9).
    """
    if not (0.0 <= x <= 1.0 and a > 0 and b > 0):
        raise ValueError(f"need 0 <= x <= 1, a > 0 and b > 0, got x={x}, a={a}, b={b}")
    return _incomplete_beta(x, 1.0 - x, a, b)


def _check_df(df: float) -> None:
    if not df > 0:  # NaN fails this too
        raise ValueError(f"degrees of freedom must be > 0, got {df}")


def student_t_pdf(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees of freedom (real, > 0; from 10^9 on,
    ``math.inf`` included: the standard normal's)::

        f(t) = (1 + t^2 / df) ** (-(df + 1) / 2) / (sqrt(df) * B(df / 2, 1 / 2))

    0 where ``t^2 / df`` overflows (|t| above 1e154 sqrt(df), where it is below 1e-154).
    """
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t is NaN")
    if df >= _NORMAL_FROM_DF:
        return NormalDist().pdf(t)
    return math.exp(-(df + 1) / 2 * math.log1p(t * t / df) - 0.5 * math.log(df)
                    - _log_beta(df / 2, 0.5))


def student_t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` degrees of freedom: real ``df > 0``, since
    Welch's df is fractional (:func:`welch_test`). From df = 10^9 on (``math.inf`` included)
    the standard normal's (see ``_NORMAL_FROM_DF``).

    Through the incomplete beta function: ``P(T > |t|) = I_x(df / 2, 1 / 2) / 2`` with
    ``x = df / (df + t^2)``; about 1e-14 relative up to df = 1000, 1e-10 at df = 10^6 (for
    |t| < 1.7 about 1e-14 at any df). Raises ValueError for ``df <= 0`` or NaN arguments.
    """
    _check_df(df)
    if math.isnan(t):
        raise ValueError("t is NaN")
    if df >= _NORMAL_FROM_DF:
        return 0.5 * math.erfc(-t / math.sqrt(2))  # NormalDist().cdf(-10) is 0: 1 + erf loses it
    t2 = t * t
    if t2 == math.inf:
        # |t| > 1e154: x = df / t^2 underflows, but the tail's leading term,
        # df^(df/2) |t|^-df / (df B(df/2, 1/2)), is exact to float precision there (with a
        # df near 0 it is far from 0)
        tail = math.exp((df / 2 - 1) * math.log(df) - df * math.log(abs(t))
                        - _log_beta(df / 2, 0.5))
    else:
        # x and 1 - x each computed directly, so that neither loses its digits near 1
        tail = 0.5 * _incomplete_beta(df / (df + t2), t2 / (df + t2), df / 2, 0.5)
    return tail if t < 0 else 1.0 - tail  # tail = P(T > |t|)


def student_t_quantile(p: float, df: float) -> float:
    """The ``t`` with ``P(T <= t) = p`` for Student's t with ``df`` degrees of freedom (real,
    > 0), ``0 < p < 1``: the inverse of :func:`student_t_cdf`, to about 1e-12 relative
    (1e-10 for df near 10^6, 1e-8 near 10^9). From df = 10^9 on (``math.inf`` included) the
    normal quantile (``statistics.NormalDist``).

    ``student_t_quantile(0.975, 1)`` is 12.706, ``(0.975, 2)`` 4.303, ``(0.975, 30)`` 2.042:
    the factor a 95 % interval puts on a standard error from n = df + 1 values.

    Solved by bisection on the cdf, until no float lies between the bracket's ends (about 60
    halvings: a millisecond). A quantile beyond the largest float (a df near 0 and a p near
    0 or 1) is returned as -inf or +inf. Raises ValueError for p outside (0, 1), df <= 0, or
    NaN.
    """
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"need 0 < p < 1, got {p}")
    if df >= _NORMAL_FROM_DF:
        return NormalDist().inv_cdf(p)
    if p == 0.5:
        return 0.0  # the centre (bisection would creep down to the smallest float above it)
    # solve P(T > t) = tail for t >= 0; the distribution is symmetric
    tail = min(p, 1.0 - p)
    lo, hi = 0.0, 1.0
    while student_t_cdf(-hi, df) > tail:  # the answer lies beyond hi (up to hi = inf)
        lo, hi = hi, 2.0 * hi
    while (middle := (lo + hi) / 2) not in (lo, hi):
        if student_t_cdf(-middle, df) > tail:
            lo = middle
        else:
            hi = middle
    return math.copysign(hi, p - 0.5)


def bonferroni_t_quantile(comparisons: int, df: float, confidence: float = 0.95) -> float:
    """Student's t counterpart of :func:`bonferroni_z`: the |t| (``df`` degrees of freedom) a
    difference must reach to count at two-sided level ``1 - confidence`` when it is one of
    ``comparisons`` made at once (each at ``(1 - confidence) / comparisons``), and the factor
    on the standard error of ``comparisons`` simultaneous intervals.

    With 3 seeds (2 df) and one comparison: 4.30 (the normal 1.96); with six comparisons
    (every pair of four setups): 10.89 (the normal 2.64).
    """
    if comparisons < 1 or not 0 < confidence < 1:
        raise ValueError(f"need comparisons >= 1 and 0 < confidence < 1, got {comparisons}, "
                         f"{confidence}")
    return student_t_quantile(1 - (1 - confidence) / (2 * comparisons), df)


def _mean_and_error(values: Sequence[float]) -> tuple[float, float]:
    """:func:`mean` and :func:`standard_error`, exact for identical values: their mean can
    round off them (three 0.1s: 0.10000000000000002), which would leave a standard error of
    2e-17 and make a t of 10^16, or a difference from another 0.1, out of no spread at all."""
    if len(set(values)) == 1:
        return float(values[0]), 0.0
    return mean(values), standard_error(values)


def _check_finite(values: Sequence[float], name: str) -> None:
    bad = [value for value in values if not math.isfinite(value)]
    if bad:
        raise ValueError(f"{name} holds {bad[:3]}, not finite numbers")


@dataclass(frozen=True)
class SeedInterval:
    """The across-seed mean of a figure with its Student's t confidence interval
    (:func:`seed_interval`).

    Attributes:
        mean: the mean over the seeds.
        n: how many seeds.
        df: the degrees of freedom, ``n - 1`` (0 for one seed).
        sem: the standard error over seeds, std (ddof = 1) / sqrt(n); None for one seed.
        t: the t quantile the interval is ``mean ± t * sem`` with, for ``confidence``; None
            for one seed.
        low, high: the interval's ends; None for one seed. With 2 seeds they are given (as
            the formula makes them) though they say little: see ``reason``.
        confidence: the interval's coverage, e.g. 0.95.
        reason: None when the interval is worth quoting; otherwise why it is not, as
            :meth:`describe` prints it ("one seed: no interval", or with 2 seeds "2 seeds: no
            useful interval (1 degree of freedom, t = 12.71)").
    """

    mean: float
    n: int
    df: int
    sem: float | None
    t: float | None
    low: float | None
    high: float | None
    confidence: float
    reason: str | None

    def describe(self, digits: int = 3) -> str:
        """One line: ``mean +0.241, 95 % t-interval [-0.0637, +0.546] (n = 3 seeds, 2 df)``,
        or the mean and the reason there is no (useful) interval."""
        return f"mean {self.mean:+.{digits}g}, {self.bounds(digits)}"

    def bounds(self, digits: int = 3) -> str:
        """:meth:`describe` without the mean: the interval, or why there is none."""
        if self.reason is not None:
            return self.reason
        return (f"{self.confidence * 100:g} % t-interval [{self.low:+.{digits}g}, "
                f"{self.high:+.{digits}g}] (n = {self.n} seeds, {self.df} df)")


def seed_interval(values: Sequence[float], confidence: float = 0.95) -> SeedInterval:
    """The mean of ``values``, one per seed (each seed's held-out change, say), with its
    ``confidence`` Student's t interval ``mean ± t_{(1 + confidence) / 2, n - 1} * sem``
    (``sem`` = std (ddof = 1) / sqrt(n), :func:`standard_error`): across seeds there are few
    values, so the normal factor (1.96) would give an interval far too narrow. Meant for the
    across-seed figures (:mod:`grpo_core.seeds`, notebook 12).

    - one seed: no spread to measure, so no interval: ``sem``, ``t``, ``low`` and ``high``
      are None and ``reason`` says "one seed: no interval";
    - two seeds: the interval is computed and returned (``low``, ``high``), but with 1
      degree of freedom t is 12.71 at 95 %: the interval is 12.7 times as wide as the two
      values are apart, and ``reason`` (and :meth:`SeedInterval.describe`) says
      "2 seeds: no useful interval (1 degree of freedom, t = 12.71)";
    - three seeds or more: the interval, ``reason`` None.

    Raises ValueError for no values, a value that is not a finite number, or a confidence
    outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"need 0 < confidence < 1, got {confidence}")
    n = len(values)
    if n == 0:
        raise ValueError("an interval of no seeds")
    _check_finite(values, "values")
    centre, sem = _mean_and_error(values)
    if n < 2:
        return SeedInterval(mean=centre, n=n, df=0, sem=None, t=None, low=None, high=None,
                            confidence=confidence, reason="one seed: no interval")
    t = student_t_quantile((1 + confidence) / 2, n - 1)
    reason = (f"2 seeds: no useful interval (1 degree of freedom, t = {t:.2f})" if n == 2
              else None)
    return SeedInterval(mean=centre, n=n, df=n - 1, sem=sem, t=t, low=centre - t * sem,
                        high=centre + t * sem, confidence=confidence, reason=reason)


@dataclass(frozen=True)
class WelchTest:
    """Welch's t-test of two groups' means (:func:`welch_test`): two setups, a few seeds each.

    Attributes:
        mean_a, mean_b: each group's mean.
        n_a, n_b: how many values (seeds) each group has.
        sem: the standard error of ``mean_a - mean_b``, sqrt(s_a^2 / n_a + s_b^2 / n_b).
        df: the Welch-Satterthwaite degrees of freedom (fractional); None when neither group
            has any spread.
        t: ``(mean_a - mean_b) / sem``; None when ``sem`` is 0.
        p_value: the two-sided p-value, ``P(|T| >= |t|)`` with ``df`` degrees of freedom.
            When ``sem`` is 0 (every seed of a gave one value, every seed of b another) it is
            0 for different means and 1 for equal ones: a limit, not evidence; seeds that
            agree exactly usually share more than the setup (the same seed twice).
    """

    mean_a: float
    mean_b: float
    n_a: int
    n_b: int
    sem: float
    df: float | None
    t: float | None
    p_value: float

    @property
    def difference(self) -> float:
        """``mean_a - mean_b`` (a minus b, as :func:`paired_difference`)."""
        return self.mean_a - self.mean_b

    def describe(self, digits: int = 3) -> str:
        """One line: ``a - b +0.12 ± 0.0451 (Welch t = +2.66, 3.9 df, two-sided p = 0.058;
        n = 3 and 4 seeds)``."""
        seeds = f"n = {self.n_a} and {self.n_b} seeds"
        if self.t is None:  # so is df
            return (f"a - b {self.difference:+.{digits}g}, no spread in either group "
                    f"(p = {self.p_value:g} by convention; {seeds})")
        return (f"a - b {self.difference:+.{digits}g} ± {self.sem:.{digits}g} (Welch t = "
                f"{self.t:+.2f}, {self.df:.1f} df, two-sided p = {self.p_value:.2g}; {seeds})")


def welch_test(a: Sequence[float], b: Sequence[float]) -> WelchTest:
    """Welch's two-sample t-test of ``mean(a) - mean(b)`` (a minus b, as
    :func:`paired_difference`): two setups' figures, one value per seed, the groups
    independent and their spreads not assumed equal (meant for :mod:`grpo_core.seeds` and
    notebook 12)::

        sem = sqrt(s_a^2 / n_a + s_b^2 / n_b)
        df  = sem^4 / ((s_a^2 / n_a)^2 / (n_a - 1) + (s_b^2 / n_b)^2 / (n_b - 1))
        t   = (mean_a - mean_b) / sem,   p = P(|T_df| >= |t|)

    When only one group has a spread, df is that group's n - 1. When neither has (sem 0), t
    and df are None and the p-value is 0 for different means, 1 for equal ones (see
    :class:`WelchTest`). Raises ValueError when a group has fewer than 2 values (its spread
    cannot be measured) or a value that is not a finite number.
    """
    for name, group in (("a", a), ("b", b)):
        if len(group) < 2:
            raise ValueError(f"group {name} has {len(group)} value(s): Welch's test needs at "
                             "least 2 in each group to measure its spread")
        _check_finite(group, f"group {name}")
    # each group's s^2 / n is its squared standard error
    (mean_a, sem_a), (mean_b, sem_b) = _mean_and_error(a), _mean_and_error(b)
    var_a, var_b = sem_a ** 2, sem_b ** 2
    sem = math.sqrt(var_a + var_b)
    if sem == 0:
        return WelchTest(mean_a=mean_a, mean_b=mean_b, n_a=len(a), n_b=len(b), sem=0.0,
                         df=None, t=None, p_value=1.0 if mean_a == mean_b else 0.0)
    df = (var_a + var_b) ** 2 / (var_a ** 2 / (len(a) - 1) + var_b ** 2 / (len(b) - 1))
    t = (mean_a - mean_b) / sem
    return WelchTest(mean_a=mean_a, mean_b=mean_b, n_a=len(a), n_b=len(b), sem=sem, df=df,
                     t=t, p_value=2 * student_t_cdf(-abs(t), df))


@dataclass(frozen=True)
class SetupComparison:
    """Two setups' seeds compared with a margin of indifference (:func:`compare_setups`,
    notebook 08, eq. (8.9)).

    Attributes:
        test: Welch's test of ``a - b`` (:class:`WelchTest`).
        margin: the largest difference (either way) counted as "no practical difference".
        confidence: the two-sided interval's coverage, e.g. 0.95; the equivalence check uses
            the ``1 - 2 (1 - confidence)`` interval (90 % for 0.95), as the two one-sided
            tests (TOST) do.
        low, high: the two-sided ``confidence`` interval of ``a - b`` (Welch's df).
        inner_low, inner_high: the ``1 - 2 (1 - confidence)`` interval of ``a - b``.
        verdict: ``"a higher"`` or ``"b higher"`` when the ``confidence`` interval leaves out
            0; ``"equivalent"`` when it does not and the inner interval lies inside
            ``(-margin, +margin)``; ``"undecided"`` otherwise (the seeds can tell neither).
    """

    test: WelchTest
    margin: float
    confidence: float
    low: float
    high: float
    inner_low: float
    inner_high: float
    verdict: str

    def describe(self, digits: int = 2) -> str:
        """One line: ``a - b -0.012, 95 % interval [-0.094, +0.07], 90 % [-0.071, +0.047]:
        undecided at a margin of 0.05``."""
        inner = 1 - 2 * (1 - self.confidence)
        return (f"a - b {self.test.difference:+.{digits}g}, {self.confidence * 100:g} % "
                f"interval [{self.low:+.{digits}g}, {self.high:+.{digits}g}], "
                f"{inner * 100:g} % [{self.inner_low:+.{digits}g}, "
                f"{self.inner_high:+.{digits}g}]: {self.verdict} at a margin of "
                f"{self.margin:g}")


def _welch_interval(test: WelchTest, confidence: float) -> tuple[float, float]:
    """``a - b ± t_{(1 + confidence) / 2, df} * sem``; the difference itself without spread."""
    if test.df is None:
        return test.difference, test.difference
    half = student_t_quantile((1 + confidence) / 2, test.df) * test.sem
    return test.difference - half, test.difference + half


def compare_setups(a: Sequence[float], b: Sequence[float], margin: float,
                   confidence: float = 0.95) -> SetupComparison:
    """Does setup ``a`` (one value per seed) do better than ``b``, worse, or the same within
    ``margin``? Notebook 08, eq. (8.9): Welch's test (:func:`welch_test`) answers "is there a
    difference"; "is there none worth having" needs its own test, the two one-sided tests
    (TOST): the ``1 - 2 (1 - confidence)`` interval of ``a - b`` inside ``(-margin, +margin)``.
    A p-value above 0.05 alone is not evidence of no difference: with few seeds the interval
    is wide and the verdict is "undecided". See :class:`SetupComparison`.

    Raises ValueError for ``margin <= 0``, a confidence outside (0.5, 1), or what
    :func:`welch_test` refuses.
    """
    if not margin > 0:
        raise ValueError(f"need a margin > 0, got {margin}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"need 0.5 < confidence < 1, got {confidence}")
    test = welch_test(a, b)
    low, high = _welch_interval(test, confidence)
    inner_low, inner_high = _welch_interval(test, 1 - 2 * (1 - confidence))
    if low > 0 or high < 0:
        verdict = "a higher" if low > 0 else "b higher"
    elif -margin < inner_low and inner_high < margin:
        verdict = "equivalent"
    else:
        verdict = "undecided"
    return SetupComparison(test=test, margin=margin, confidence=confidence, low=low, high=high,
                           inner_low=inner_low, inner_high=inner_high, verdict=verdict)
