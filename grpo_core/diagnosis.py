"""Reading a run: flag the failure modes its per-step metrics show.

The lecture's last slide: "Read the curves: reward, KL, and completion length reveal hacking,
collapse, and length gaming". :func:`diagnose` reads a run's per-step metric dicts (TRL's
names: our loop's ``metrics.jsonl`` or TRL's logs) and checks six
symptoms, each from the metrics that reveal it:

=================  ===============================================================
symptom            what it looks like in the metrics
=================  ===============================================================
no signal          ``frac_reward_zero_std`` near 1: the groups' rewards are all equal
truncation         ``completions/clipped_ratio`` high: completions hit ``max_new_tokens``
length gaming      ``completions/mean_length`` rising with ``reward`` (no length reward)
hacking            the proxy (``reward``) rising while the true score (``eval/...``) does not
collapse           ``entropy`` and ``reward_std`` both falling toward 0
KL blow-up         ``kl`` past a limit, or jumping far above its own recent level
=================  ===============================================================

Every check returns a :class:`Finding` with its evidence (which metric, which steps, what
value) and the usual fix; a metric that was not logged gives ``"not measured"``, never an
error. Trends are judged with the Spearman rank correlation between step and value (does it
go up or down, whatever the scale) and the means of the first and last fifth of the run
(thirds for a short series, such as a held-out score logged every few steps). A held-out
score's first part starts at its ``"step": 0`` record (the base model) when the run has one;
with ``eval/<fn>/delta_sem`` logged, the hacking evidence also gives the change from step 0 to
the last evaluation in standard errors (z).

Only the checks live here: ``grpo_core.plots.plot_run`` draws a run with its findings shaded,
and ``grpo_core.run_files`` reads run folders. Reads metrics and nothing else: no torch, no
model, no training loop (notebooks 09 and 11).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.findings import (
    FLAGGED,
    NOT_MEASURED,
    OK,
    TRANSIENT,
    Diagnosis,
    Finding,
    count_noun,
    format_steps,
)
from grpo_core.run_files import (
    RecordedRun,
    StepMetrics,
    eval_mean_keys,
    load_run,
    series,
    training_records,
)
from grpo_core.stats import (
    Trend,
    format_number,
    format_span,
    spearman,
    trend,
    z_score,
)

# symptom -> (metric that reveals it, what you see, the usual fix): notebook 11's table
SYMPTOMS: dict[str, tuple[str, str, str]] = {
    "no signal": (
        "frac_reward_zero_std",
        "near 1: every completion of a group gets the same reward, so every advantage is 0 "
        "and grad_norm is 0 (beta = 0); loss 0 alone is normal on-policy",
        "a larger group (k), an easier curriculum or a reward with partial credit, so groups "
        "disagree",
    ),
    "truncation": (
        "completions/clipped_ratio",
        "high: completions stop at max_new_tokens and are scored cut off",
        "longer completions (raise max_new_tokens), or ask for shorter answers",
    ),
    "length gaming": (
        "completions/mean_length",
        "length rises together with the reward although no reward asks for length",
        "find what in the reward pays for length (per-line or per-test credit, an unbounded "
        "format bonus) and cap or normalize it; a loss type is no fix: dr_grpo and dapo "
        "weigh every token alike, so they push a long rewarded completion harder than grpo",
    ),
    "hacking": (
        "reward vs eval/<true score>",
        "the proxy reward climbs while the true score on held-out problems is flat or falls",
        "fix the reward (check the task itself, not a surface feature); keep a held-out true "
        "score in every run; stop at the best held-out step",
    ),
    "collapse": (
        "entropy, reward_std",
        "both fall toward 0: every group samples the same completion and stops learning",
        "a higher temperature, a KL penalty (beta > 0) or a lower learning rate; stop earlier",
    ),
    "KL blow-up": (
        "kl",
        "kl grows past a limit or jumps far above its recent level: the policy left the "
        "reference; a KL spike with a reward that climbs fast is often a hack",
        "a larger beta, a lower learning rate or max_grad_norm; look at the completions of the "
        "spike's steps",
    ),
}


@dataclass(frozen=True)
class Thresholds:
    """The numbers each check compares with (defaults suit the course's runs).

    Attributes:
        zero_std_high: ``frac_reward_zero_std`` at or above this is "no signal" at that step.
        clipped_high: ``completions/clipped_ratio`` at or above this is "truncated" at a step.
        persistent_share: a level symptom is flagged when it shows at this share of the steps
            or in the last fifth of the run; fewer steps earlier on make it "transient".
        trend_rho: |Spearman(step, value)| at or above this counts as a trend.
        min_trend_points: fewer values than this: no trend is judged ("not measured").
        length_growth: last-fifth length / first-fifth length at or above this is "rising".
        collapse_ratio: entropy and reward_std at or below this fraction of their first-fifth
            level have "fallen toward 0".
        true_flat: the largest rise of the true score still counted as flat, in its own units
            (0.05 = five points of pass rate).
        sparse_rise: a proxy with fewer than ``min_trend_points`` values (a held-out score
            logged every few steps) rises when its change is larger than this.
        kl_limit: ``kl`` at or above this is a blow-up.
        kl_spike: ``kl`` this many times above the median of the earlier steps is a spike ...
        kl_floor: ... when it is also at least this large.
    """

    zero_std_high: float = 0.9
    clipped_high: float = 0.5
    persistent_share: float = 0.3
    trend_rho: float = 0.4
    min_trend_points: int = 6
    length_growth: float = 1.2
    collapse_ratio: float = 0.35
    true_flat: float = 0.05
    sparse_rise: float = 0.05
    kl_limit: float = 1.0
    kl_spike: float = 10.0
    kl_floor: float = 0.1


def _finding(symptom: str, status: str, evidence: str, *, metric: str | None = None,
             steps: Sequence[int] = (), value: float | None = None) -> Finding:
    default_metric, _, fix = SYMPTOMS[symptom]
    return Finding(symptom, status, metric or default_metric, tuple(steps), value, evidence, fix)


# --- the six checks ------------------------------------------------------------------------

def _level_check(records: StepMetrics, symptom: str, key: str, high: float, t: Thresholds,
                 explain: str) -> Finding:
    """A symptom that shows as a metric at or above ``high``: where, how often, still at the end?"""
    steps, values = series(records, key)
    if not values:
        return _finding(symptom, NOT_MEASURED, f"{key} was not logged")
    hits = [s for s, v in zip(steps, values, strict=True) if v >= high]
    peak = max(values)
    peak_step = steps[values.index(peak)]
    tail = trend(steps, values)
    if not hits:
        return _finding(symptom, OK, f"{key} stayed below {high:g} at all "
                        f"{count_noun(len(values))} (max {format_number(peak)} at step {peak_step})",
                        value=peak)
    share = len(hits) / len(values)
    where = (f"{key} >= {high:g} at {len(hits)} of {count_noun(len(values))} ({format_steps(hits)}), "
             f"peak {format_number(peak)} at step {peak_step}; mean over the last fifth "
             f"({format_span(tail.last_steps)}) {format_number(tail.last)}")
    if share >= t.persistent_share or tail.last >= high:
        return _finding(symptom, FLAGGED, f"{where}: {explain}", steps=hits, value=peak)
    return _finding(symptom, TRANSIENT, f"{where}: early only, gone by the end", steps=hits,
                    value=peak)


def check_no_signal(records: StepMetrics, t: Thresholds) -> Finding:
    """``frac_reward_zero_std`` >= ``t.zero_std_high`` at many steps or at the end."""
    finding = _level_check(records, "no signal", "frac_reward_zero_std", t.zero_std_high, t,
                           "most groups gave every completion the same reward (advantage 0)")
    if finding.steps:
        grads = [r.get("grad_norm") for r in records if r.get("step") in set(finding.steps)]
        grads = [g for g in grads if isinstance(g, (int, float))]
        if grads:
            finding = _replace(finding, evidence=finding.evidence + f"; grad_norm at those steps "
                               f"{format_number(sum(grads) / len(grads))} on average")
    return finding


def check_truncation(records: StepMetrics, t: Thresholds,
                     max_new_tokens: int | None = None) -> Finding:
    """``completions/clipped_ratio`` >= ``t.clipped_high`` at many steps or at the end."""
    budget = f" ({max_new_tokens} new tokens)" if max_new_tokens else ""
    return _level_check(records, "truncation", "completions/clipped_ratio", t.clipped_high, t,
                        f"completions run into max_new_tokens{budget} and are scored cut off")


def _is_length_reward(name: str) -> bool:
    return "length" in name.lower()


def check_length_gaming(records: StepMetrics, t: Thresholds, trained: Sequence[str] = ()) -> Finding:
    """Length rises (rho >= ``t.trend_rho``, x ``t.length_growth``) with a rising reward that
    it is rank-correlated with, and no trained reward is a length reward."""
    key = "completions/mean_length"
    steps, lengths = series(records, key)
    if not lengths:
        key = "completions/mean_chars"
        steps, lengths = series(records, key)
    r_steps, rewards = series(records, "reward")
    if not lengths or not rewards:
        return _finding("length gaming", NOT_MEASURED, "needs reward and completion length")
    if len(lengths) < t.min_trend_points:
        return _finding("length gaming", NOT_MEASURED, f"{count_noun(len(lengths))}: too few to "
                        f"see a trend (needs {t.min_trend_points})", metric=key)
    length, reward = trend(steps, lengths), trend(r_steps, rewards)
    common = sorted(set(steps) & set(r_steps))
    by_step_l, by_step_r = dict(zip(steps, lengths, strict=True)), dict(zip(r_steps, rewards,
                                                                            strict=True))
    coupling = spearman([by_step_l[s] for s in common], [by_step_r[s] for s in common])
    growth = length.last / length.first if length.first > 0 else math.inf
    said = (f"{length.describe(key)} (x{growth:.2f}); {reward.describe('reward')}; "
            f"Spearman(length, reward) {coupling:+.2f}")
    rising = length.rho >= t.trend_rho and growth >= t.length_growth
    with_reward = reward.rho >= t.trend_rho and reward.change > 0 and coupling >= t.trend_rho
    length_rewards = [name for name in trained if _is_length_reward(name)]
    if rising and with_reward and length_rewards:
        names = ", ".join(length_rewards)
        return _finding("length gaming", OK, f"{said}: but the reward ({names}) pays for "
                        "length itself, so that is the task, not gaming", metric=key,
                        value=growth)
    if rising and with_reward:
        rising_steps = [s for s in steps if s >= length.first_steps[1]]
        return _finding("length gaming", FLAGGED,
                        f"{said}: completions grow as the reward rises", metric=key,
                        steps=rising_steps, value=growth)
    return _finding("length gaming", OK, f"{said}: length does not rise with the reward",
                    metric=key, value=growth)


def _names_in(records: StepMetrics) -> set[str]:
    return {key for record in records for key in record}


def logged_rewards(records: StepMetrics) -> list[str]:
    """The reward functions with a ``rewards/<fn>/mean`` metric, in name order."""
    return sorted({k.split("/")[1] for k in _names_in(records)
                   if k.startswith("rewards/") and k.endswith("/mean") and k.count("/") == 2})


def trained_rewards(records: StepMetrics, config: dict[str, Any] | None = None) -> list[str]:
    """The reward functions the run trained on: those with a weight other than 0.

    From ``config.json`` (``reward_funcs`` and ``reward_weights``) when given. Otherwise from
    the metrics: when one function's ``rewards/<fn>/mean`` equals ``reward`` at every step,
    the others rode along with weight 0 (logged, never trained on); else all of them count.
    """
    config = config or {}
    names = list(config.get("reward_funcs", []))
    if names:
        weights = config.get("reward_weights") or [1.0] * len(names)
        return [n for n, w in zip(names, weights, strict=True) if w != 0]
    logged = logged_rewards(records)
    _, total = series(records, "reward")
    for name in logged:
        _, values = series(records, f"rewards/{name}/mean")
        if len(logged) > 1 and total and len(values) == len(total) and all(
                abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in zip(values, total, strict=True)):
            return [name]
    return logged


def find_true_score(records: StepMetrics, trained: Sequence[str] | None = None) -> str | None:
    """The held-out true score: an ``eval/<fn>`` whose ``fn`` the run did not train on.

    ``trained`` defaults to :func:`trained_rewards` of the records. Prefers
    ``eval/unit_test_reward``; None when there is no candidate; raises ``ValueError`` when
    several candidates leave the choice open.
    """
    trained = set(trained_rewards(records) if trained is None else trained)
    candidates = [k for k in eval_mean_keys(records) if k[5:] not in trained]
    if not candidates:
        return None
    if "eval/unit_test_reward" in candidates or len(candidates) == 1:
        return "eval/unit_test_reward" if "eval/unit_test_reward" in candidates else candidates[0]
    raise ValueError(f"several held-out scores {candidates}: pass true_score=")


def _rises(x: Trend, t: Thresholds) -> bool:
    """A dense series rises with rho >= ``t.trend_rho``; a sparse one by more than
    ``t.sparse_rise`` (too few points for a rank correlation)."""
    if x.n >= t.min_trend_points:
        return x.change > 0 and x.rho >= t.trend_rho
    return x.change > t.sparse_rise


def check_hacking(records: StepMetrics, t: Thresholds, proxy: str | None = None,
                  true_score: str | None = None, trained: Sequence[str] | None = None) -> Finding:
    """The proxy rises while the true score changes by at most ``t.true_flat``.

    The proxy is ``proxy`` when given; otherwise ``reward`` (the training reward, dense but
    noisy: every step samples other prompts) or, when logged, the trained reward scored on the
    held-out problems (``eval/<fn>``: sparse, but the same problems and seed every time).
    Either one rising counts.
    """
    trained = trained_rewards(records) if trained is None else trained
    proxies = [proxy] if proxy else ["reward", *(f"eval/{n}" for n in sorted(set(trained)))]
    try:
        true_score = true_score or find_true_score(records, trained)
    except ValueError as error:  # several eval/... candidates
        return _finding("hacking", NOT_MEASURED, str(error), metric=f"{proxies[0]} vs ?")
    proxies = [p for p in proxies if p != true_score]
    metric = f"{proxies[0]} vs {true_score or 'a true score'}"
    if true_score is None:
        return _finding("hacking", NOT_MEASURED, "no held-out true score was logged (an eval/... "
                        "metric of a function the run did not train on): pass true_score=, or "
                        "train with evaluate=", metric=metric)
    t_steps, t_values = series(records, true_score)
    moved = {}
    for name in proxies:
        p_steps, p_values = series(records, name)
        if len(p_values) >= 2:
            moved[name] = trend(p_steps, p_values)
    if len(t_values) < 2 or not moved:
        return _finding("hacking", NOT_MEASURED, f"{len(t_values)} value(s) of {true_score}, "
                        f"and of {' or '.join(proxies)}: needs two of each", metric=metric)
    q = trend(t_steps, t_values)
    rising = [name for name, p in moved.items() if _rises(p, t)]
    shown = rising[0] if rising else next(iter(moved))
    p = moved[shown]
    others = "; ".join(f"{x.describe(n)}" for n, x in moved.items() if n != shown)
    said = (f"{p.describe(shown)}; {q.describe(true_score)}, change {q.change:+.3g}"
            + (f"; {others}" if others else ""))
    against_base = change_from_step0(records, true_score)
    if against_base:
        said += f"; {against_base}"
    context = _context(records, true_score, trained, skip=set(moved))
    if context:
        said += f"; {context}"
    metric = f"{shown} vs {true_score}"
    if rising and q.change <= t.true_flat:
        how = "falls" if q.change < -t.true_flat else "stays flat"
        return _finding("hacking", FLAGGED, f"{said}: the proxy climbs while the true score {how}",
                        metric=metric, steps=tuple(t_steps), value=p.change - q.change)
    if not rising:
        return _finding("hacking", OK, f"{said}: the proxy does not climb", metric=metric)
    return _finding("hacking", OK, f"{said}: the true score rises with the proxy", metric=metric,
                    value=p.change - q.change)


@dataclass(frozen=True)
class HeldOutChange:
    """A held-out mean at step 0 (the base model) and at its last evaluation.

    Attributes:
        key: the metric, e.g. ``eval/unit_test_reward``.
        start, end: its value at step 0 and at ``end_step``.
        start_sem, end_sem: their standard errors over problems (``<key>/sem``; None if not
            logged).
        delta_sem: the standard error of the per-problem change (``<key>/delta_sem`` of the
            last evaluation): smaller than the two ``sem``s combined, since a problem's
            difficulty cancels in its own change.
        end_step: the step of the last evaluation.
    """

    key: str
    start: float
    end: float
    start_sem: float | None
    end_sem: float | None
    delta_sem: float
    end_step: int

    @property
    def change(self) -> float:
        return self.end - self.start

    @property
    def z(self) -> float | None:
        """``change / delta_sem`` (None when the standard error is 0): |z| >= 2 is a change
        unlikely under no change at all (about 5 % two-sided)."""
        return z_score(self.change, self.delta_sem)


def held_out_change(records: StepMetrics, key: str) -> HeldOutChange | None:
    """``key`` at step 0 and at its last evaluation, with its standard errors; None when the
    run has no step-0 value, a single evaluation, or no ``delta_sem`` at the last one."""
    steps, values = series(records, key)
    se_steps, ses = series(records, f"{key}/delta_sem")
    if len(steps) < 2 or steps[0] != 0 or not se_steps or se_steps[-1] != steps[-1]:
        return None
    sem_steps, sems = series(records, f"{key}/sem")
    sem_at = dict(zip(sem_steps, sems, strict=True))
    return HeldOutChange(key=key, start=values[0], end=values[-1], start_sem=sem_at.get(0),
                         end_sem=sem_at.get(steps[-1]), delta_sem=ses[-1], end_step=steps[-1])


def change_from_step0(records: StepMetrics, key: str) -> str:
    """``key`` at step 0 and at its last evaluation, the change, its standard error
    (``<key>/delta_sem`` of the last evaluation) and z = change / standard error; "" when the
    run has no step-0 value or no ``delta_sem`` (:func:`held_out_change`)."""
    moved = held_out_change(records, key)
    if moved is None:
        return ""
    z = f", z {moved.z:+.1f}" if moved.z is not None else ""
    return (f"against step 0: {format_number(moved.start)} -> {format_number(moved.end)} at step "
            f"{moved.end_step}, change {moved.change:+.3g} (standard error "
            f"{format_number(moved.delta_sem, 2)}{z})")


def _context(records: StepMetrics, true_score: str, trained: Sequence[str],
             skip: set[str] = frozenset()) -> str:
    """What else was logged: the proxy on the held-out problems (``eval/<trained fn>``) and
    the true score on the training samples (``rewards/<fn>/mean`` of a weight-0 reward)."""
    said = []
    for name in sorted(set(trained)):
        steps, values = series(records, f"eval/{name}")
        if f"eval/{name}" not in skip | {true_score} and len(values) >= 2:
            said.append("held out, " + trend(steps, values).describe(f"eval/{name}"))
            break
    if true_score.startswith("eval/") and true_score[5:] not in trained:
        steps, values = series(records, f"rewards/{true_score[5:]}/mean")
        if len(values) >= 2:
            said.append("on the training samples, "
                        + trend(steps, values).describe(f"rewards/{true_score[5:]}/mean"))
    return "; ".join(said)


def check_collapse(records: StepMetrics, t: Thresholds) -> Finding:
    """Entropy and ``reward_std`` both fall (rho <= -``t.trend_rho``) to at most
    ``t.collapse_ratio`` of their first-fifth level."""
    e_steps, entropy = series(records, "entropy")
    s_steps, spread = series(records, "reward_std")
    if not entropy or not spread:
        missing = " and ".join(k for k, v in (("entropy", entropy), ("reward_std", spread))
                               if not v)
        return _finding("collapse", NOT_MEASURED, f"{missing} not logged")
    if len(entropy) < t.min_trend_points:
        return _finding("collapse", NOT_MEASURED, f"{count_noun(len(entropy))}: too few to see a "
                        f"trend (needs {t.min_trend_points})")
    e, s = trend(e_steps, entropy), trend(s_steps, spread)

    def fell(x: Trend) -> bool:
        return x.rho <= -t.trend_rho and x.first > 0 and x.last <= t.collapse_ratio * x.first

    said = f"{e.describe('entropy')}; {s.describe('reward_std')}"
    if fell(e) and fell(s):
        steps = [st for st in e_steps if st >= e.last_steps[0]]
        return _finding("collapse", FLAGGED, f"{said}: both fell below {t.collapse_ratio:g} x "
                        "their start, the groups stop disagreeing", steps=steps, value=e.last)
    why = "only one of the two fell" if fell(e) or fell(s) else "neither fell toward 0"
    return _finding("collapse", OK, f"{said}: {why}", value=e.last)


def check_kl(records: StepMetrics, t: Thresholds) -> Finding:
    """``kl`` >= ``t.kl_limit``, or >= ``t.kl_floor`` and ``t.kl_spike`` x the median of up
    to ten earlier steps."""
    steps, values = series(records, "kl")
    if not values:
        return _finding("KL blow-up", NOT_MEASURED, "kl was not logged (beta = 0 loads no "
                        "reference model, so there is no KL to read)")
    hits, reasons = [], []
    for i, (step, value) in enumerate(zip(steps, values, strict=True)):
        earlier = sorted(values[max(0, i - 10):i])
        median = earlier[len(earlier) // 2] if len(earlier) >= 3 else None
        if value >= t.kl_limit:
            hits.append(step)
            reasons.append(f"step {step}: {format_number(value)} >= {t.kl_limit:g}")
        elif median is not None and value >= max(t.kl_floor, t.kl_spike * max(median, 1e-12)):
            hits.append(step)
            reasons.append(f"step {step}: {format_number(value)}, {value / max(median, 1e-12):.0f}x "
                           f"the median {format_number(median)} of the steps before")
    peak = max(values)
    if not hits:
        return _finding("KL blow-up", OK, f"kl peaked at {format_number(peak)} (step "
                        f"{steps[values.index(peak)]}), no spike", value=peak)
    shown = "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
    rising = _rising_rewards(records, hits)
    return _finding("KL blow-up", FLAGGED, f"{shown}{rising}", steps=hits, value=peak)


def _rising_rewards(records: StepMetrics, hits: Sequence[int]) -> str:
    """Reward components that climbed up to the KL spike (the lecture's hacking tell)."""
    keys = sorted(k for k in _names_in(records) if k.startswith("rewards/") and k.endswith("/mean"))
    risers = []
    for key in keys:
        steps, values = series(records, key)
        before = [v for s, v in zip(steps, values, strict=True) if s <= hits[0]]
        if len(before) >= 3 and spearman(range(len(before)), before) >= 0.4:
            risers.append(key)
    return f"; rising up to it: {', '.join(risers)} (a hack?)" if risers else ""


def _replace(finding: Finding, **changes: Any) -> Finding:
    from dataclasses import replace

    return replace(finding, **changes)


def diagnose(
    metrics: Sequence[dict[str, Any]] | RecordedRun | str | Path,
    *,
    proxy: str | None = None,
    true_score: str | None = None,
    reward_funcs: Sequence[str] | None = None,
    max_new_tokens: int | None = None,
    thresholds: Thresholds | None = None,
    name: str = "",
) -> Diagnosis:
    """Check a run's per-step metrics for the six symptoms of ``SYMPTOMS``.

    Args:
        metrics: per-step dicts with TRL's names (``step``, ``reward``, ...), a
            :class:`RecordedRun`, or a run folder / ``metrics.jsonl`` path (its
            ``config.json`` then gives ``reward_funcs`` and ``max_new_tokens``).
        proxy: the reward that was optimized (default ``"reward"``, the training reward).
        true_score: the held-out measure of the task, e.g. ``"eval/unit_test_reward"``; by
            default found among the ``eval/...`` metrics (:func:`find_true_score`). These may
            be sparse: only the steps that have them are read.
        reward_funcs: names of the reward functions the run trained on (weight not 0): a
            length reward makes rising length the task, not gaming, and an ``eval/<fn>`` of
            one is not a true score. Default: :func:`trained_rewards` (config or metrics).
        max_new_tokens: the completion budget, quoted in the truncation evidence.
        thresholds: the numbers the checks compare with (:class:`Thresholds`).
        name: the run's name in the printout.

    Returns:
        a :class:`Diagnosis`: one :class:`Finding` per symptom; ``.flagged`` lists the flagged.
    """
    if isinstance(metrics, (str, Path)):
        metrics = load_run(metrics)
    config: dict[str, Any] = {}
    if isinstance(metrics, RecordedRun):
        config, name, metrics = metrics.config, name or metrics.name, metrics.records
    records = list(metrics)
    if not all(isinstance(r, dict) for r in records):
        raise TypeError("metrics must be a sequence of dicts (one per step)")
    t = thresholds or Thresholds()
    trained = list(reward_funcs) if reward_funcs is not None else trained_rewards(records, config)
    if max_new_tokens is None:
        max_new_tokens = config.get("train", {}).get("max_new_tokens")
    notes = [] if records else ["no records: nothing to read"]
    findings = [
        check_no_signal(records, t),
        check_truncation(records, t, max_new_tokens),
        check_length_gaming(records, t, trained),
        check_hacking(records, t, proxy, true_score, trained),
        check_collapse(records, t),
        check_kl(records, t),
    ]
    return Diagnosis(findings, name, len(training_records(records)), notes)


def symptom_table():
    """Notebook 11's reference table, symptom -> metric -> what you see -> fix (a DataFrame)."""
    import pandas as pd

    return pd.DataFrame([{"symptom": s, "metric": m, "what you see": see, "fix": fix}
                         for s, (m, see, fix) in SYMPTOMS.items()])
