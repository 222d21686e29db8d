"""Widgets a learner can move: the group baseline (notebook 03) and the two guardrails (notebook 04).

Every widget is a thin view over a pure function that computes what it shows:

- :func:`group_summary` -> :func:`group_variation_widget`: k rewards -> mean, std, advantages,
  and whether the group gives any learning signal (lecture: "The reward must create variation");
- :func:`clip_curves` -> :func:`clip_widget`: epsilon, epsilon_high, a ratio range and the sign of
  A -> the unclipped and clipped surrogate as curves of the ratio, with the zero-gradient region
  (lecture: "Reusing a rollout adds a clip");
- :func:`kl_curves` -> :func:`kl_widget`: the k1 and k3 estimators over the log-ratio, times beta
  (lecture: "Two guardrails, two time scales").

The pure functions call the update math (``grpo_core.advantages``, ``grpo_core.loss``) and
import only torch, so tests drive them without ipywidgets or a browser. The ``*_widget``
functions import ipywidgets (and matplotlib) lazily; each returns a view object whose controls
are attributes, so a test can set a control's value and read the computed output.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grpo_core.advantages import SCALES, group_advantages
from grpo_core.loss import clipped_surrogate, kl_k3

STD_CONVENTIONS = ("sample", "population")
"""``sample``: divide by N-1 (Bessel, ``torch.std``, TRL); ``population``: divide by N (``numpy.std``)."""

NO_SIGNAL_MESSAGE = "no learning signal"

PRESET_NAMES = ("custom", "too hard", "too easy", "usable")


def preset_rewards(name: str, k: int = 4) -> list[float]:
    """The lecture's three groups ("The reward must create variation"), for any group size ``k``.

    ``too hard``: every attempt scores 0; ``too easy``: every attempt scores 2; ``usable``: the
    lecture's ``0, 1, 1, 2`` (repeated to fill ``k``, then sorted).
    """
    if k < 2:
        raise ValueError(f"a group needs k >= 2 completions, got {k}")
    if name == "too hard":
        return [0.0] * k
    if name == "too easy":
        return [2.0] * k
    if name == "usable":
        pattern = [0.0, 1.0, 1.0, 2.0]
        return sorted((pattern * math.ceil(k / 4))[:k])
    raise ValueError(f"unknown preset {name!r}; presets: {PRESET_NAMES[1:]}")


def parse_rewards(text: str) -> list[float]:
    """``"0, 1, 1, 2"`` (commas and/or spaces) -> ``[0.0, 1.0, 1.0, 2.0]``.

    Raises:
        ValueError: a word is not a finite number.
    """
    words = text.replace(",", " ").split()
    try:
        values = [float(word) for word in words]
    except ValueError:
        raise ValueError(
            f"type numbers separated by commas, e.g. 0, 1, 1, 2 (got {text!r})"
        ) from None
    if not all(math.isfinite(v) for v in values):
        raise ValueError("rewards must be finite numbers")
    return values


@dataclass(frozen=True)
class GroupSummary:
    """What the group-variation widget shows, computed by :func:`group_summary`.

    Attributes:
        rewards: the group's k rewards.
        mean: the group mean (the baseline).
        std: the standard deviation the advantages are divided by (the group's or the batch's,
            N-1 or N; 0.0 with ``scale="none"``, which divides by nothing).
        group_std: this group's own std in the chosen convention (shown even when not used).
        advantages: k advantages, eq. (3.1).
        no_signal: True when every advantage is exactly 0: the policy gradient is exactly 0.
        scale, std_convention, eps: the settings used.
        batch: every reward in the batch (this group first), when ``scale="batch"``.
        message: one plain sentence for the learner.
        what_changes: what the chosen ``scale`` and std convention do, in words.
    """

    rewards: tuple[float, ...]
    mean: float
    std: float
    group_std: float
    advantages: tuple[float, ...]
    no_signal: bool
    scale: str
    std_convention: str
    eps: float
    batch: tuple[float, ...] = ()
    message: str = ""
    what_changes: str = ""


def group_summary(
    rewards: Sequence[float],
    *,
    scale: str = "group",
    std_convention: str = "sample",
    eps: float = 1e-4,
    other_groups: Sequence[Sequence[float]] = (),
) -> GroupSummary:
    """Advantages of one group, and whether it gives a learning signal (notebook 03, eq. (3.1)).

    ``A_i = (r_i - mean(r)) / (std + eps)``. With ``std_convention="sample"`` this is exactly
    :func:`grpo_core.advantages.group_advantages` (N-1, as ``torch.std`` and TRL); with
    ``"population"`` the centred rewards from ``group_advantages(..., scale="none")`` are divided by
    the N-convention std instead. ``scale="batch"`` divides by the std of the whole batch: this
    group followed by ``other_groups`` (each of the same size k).

    Args:
        rewards: ``[k]`` the group's rewards, k >= 2.
        scale: ``"group"``, ``"batch"`` or ``"none"`` (Dr. GRPO: no division).
        std_convention: ``"sample"`` (N-1) or ``"population"`` (N).
        eps: added to the std.
        other_groups: the rest of the batch, used only by ``scale="batch"``.

    Returns:
        a :class:`GroupSummary`.
    """
    if std_convention not in STD_CONVENTIONS:
        raise ValueError(f"std_convention must be one of {STD_CONVENTIONS}, got {std_convention!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    group = [float(r) for r in rewards]
    k = len(group)
    if k < 2:
        raise ValueError(f"a group needs at least 2 rewards to compare, got {k}")
    others = [[float(r) for r in g] for g in other_groups] if scale == "batch" else []
    if any(len(g) != k for g in others):
        raise ValueError(f"every group in the batch must have k = {k} rewards")
    batch = torch.tensor(group + [r for g in others for r in g], dtype=torch.float64)
    unbiased = std_convention == "sample"
    group_std = float(batch[:k].std(unbiased=unbiased))
    if scale == "group":
        divisor = group_std
    elif scale == "batch":
        divisor = float(batch.std(unbiased=unbiased))
    else:
        divisor = 0.0
    if unbiased:  # the contract's function, exactly
        advantages = group_advantages(batch, k, scale=scale, eps=eps)[:k]
    else:
        centred = group_advantages(batch, k, scale="none", eps=eps)[:k]
        advantages = centred if scale == "none" else centred / (divisor + eps)
    values = tuple(float(a) for a in advantages)
    no_signal = all(a == 0.0 for a in values)
    return GroupSummary(
        rewards=tuple(group),
        mean=float(batch[:k].mean()),
        std=divisor,
        group_std=group_std,
        advantages=values,
        no_signal=no_signal,
        scale=scale,
        std_convention=std_convention,
        eps=eps,
        batch=tuple(float(r) for r in batch) if scale == "batch" else (),
        message=_signal_message(group, values, no_signal),
        what_changes=_what_changes(scale, std_convention, k),
    )


def _signal_message(rewards: list[float], advantages: tuple[float, ...], no_signal: bool) -> str:
    if no_signal:
        return (
            f"{NO_SIGNAL_MESSAGE}: every reward is {_fmt(rewards[0], sign=False)}, so every "
            "attempt sits on the mean, every advantage is exactly 0 and the policy gradient is 0."
        )
    up = sum(a > 0 for a in advantages)
    down = sum(a < 0 for a in advantages)
    return (
        f"signal: {up} attempt(s) beat the mean and get pushed up, {down} fall short and get "
        f"pushed down, {len(advantages) - up - down} sit on the mean."
    )


def _what_changes(scale: str, std_convention: str, k: int) -> str:
    factor = math.sqrt((k - 1) / k)
    if scale == "none":
        return (
            "scale = none (Dr. GRPO): advantages are reward minus the group mean, not divided by "
            "any std, so they keep the reward's units and a group with a small spread gives a small "
            "push; the std convention does not matter here."
        )
    where = (
        "this group's std"
        if scale == "group"
        else "the std of the whole batch (this group and the other groups shown)"
    )
    convention = (
        f"N-1 (Bessel, torch.std and TRL); the N convention would multiply every advantage by "
        f"sqrt((k-1)/k) = {factor:.3f}"
        if std_convention == "sample"
        else f"N (numpy.std); torch.std and TRL use N-1, which gives advantages "
        f"{factor:.3f} times these"
    )
    scale_note = (
        "Every group with any spread gets advantages of about the same size, however small the spread."
        if scale == "group"
        else "A group with a small spread keeps small advantages; a noisy batch shrinks every group's."
    )
    return f"scale = {scale}: divide by {where}, std with {convention}. {scale_note}"


def _fmt(value: float, sign: bool = True) -> str:
    """Two decimals; an exact zero prints as ``0.00`` (never ``+0.00`` or ``-0.00``)."""
    if value == 0.0:
        return "0.00"
    return f"{value:+.2f}" if sign else f"{value:.2f}"


def group_summary_html(summary: GroupSummary) -> str:
    """The HTML the group-variation widget shows: the numbers, a bar chart (SVG) and the message.

    Stable CSS classes for tests: ``grpo-mean``, ``grpo-std``, ``grpo-adv`` (one per advantage),
    ``grpo-message`` (plus ``grpo-no-signal`` when the group gives no learning signal).
    """
    advantages = "".join(
        f'<td class="grpo-adv" style="padding:0 .6em;text-align:right">{_fmt(a)}</td>'
        for a in summary.advantages
    )
    rewards = "".join(
        f'<td style="padding:0 .6em;text-align:right">{_fmt(r, sign=False)}</td>'
        for r in summary.rewards
    )
    std_label = "std used" if summary.scale != "none" else "std (not used)"
    std_value = summary.std if summary.scale != "none" else summary.group_std
    message_class = "grpo-message grpo-no-signal" if summary.no_signal else "grpo-message"
    colour = "#b00020" if summary.no_signal else "#1b5e20"
    batch = ""
    if summary.batch:
        batch = (
            '<div style="color:#555">batch (this group first): '
            + ", ".join(_fmt(r, sign=False) for r in summary.batch)
            + "</div>"
        )
    return (
        '<div class="grpo-group" style="font-family:monospace">'
        f'<div>mean <b class="grpo-mean">{_fmt(summary.mean, sign=False)}</b> &nbsp; '
        f'{std_label} <b class="grpo-std">{_fmt(std_value, sign=False)}</b></div>{batch}'
        '<table style="border-collapse:collapse"><tr><th style="text-align:left">reward</th>'
        f'{rewards}</tr><tr><th style="text-align:left">advantage</th>{advantages}</tr></table>'
        f"{_bars_svg(summary)}"
        f'<div class="{message_class}" style="color:{colour};font-weight:bold">'
        f"{html.escape(summary.message)}</div>"
        f'<div class="grpo-what-changes" style="color:#555">{html.escape(summary.what_changes)}</div>'
        "</div>"
    )


def _bars_svg(summary: GroupSummary, width: int = 420, height: int = 150) -> str:
    """Two bar charts side by side: rewards with the mean line, advantages around 0."""
    k = len(summary.rewards)
    half = width // 2 - 10
    top, bottom = 18, height - 18
    parts = [f'<svg width="{width}" height="{height}" style="display:block;margin:.3em 0">']

    def panel(x0, title, values, low, high, base, line, colour_of) -> None:
        span = (high - low) or 1.0

        def y(v: float) -> float:
            return bottom - (v - low) / span * (bottom - top)

        slot = half / k
        parts.append(f'<text x="{x0}" y="12" font-size="11">{title}</text>')
        for i, v in enumerate(values):
            y0, y1 = sorted((y(base), y(v)))
            parts.append(
                f'<rect x="{x0 + i * slot + slot * 0.15:.1f}" y="{y0:.1f}" width="{slot * 0.7:.1f}" '
                f'height="{max(y1 - y0, 1):.1f}" fill="{colour_of(v)}"/>'
            )
        parts.append(
            f'<line x1="{x0}" x2="{x0 + half}" y1="{y(line):.1f}" y2="{y(line):.1f}" '
            'stroke="#333" stroke-dasharray="4 2"/>'
        )

    r_low = min(0.0, *summary.rewards)
    r_high = 1.2 * max(summary.rewards + (r_low + 1.0,))  # headroom above the tallest bar
    panel(
        0,
        f"rewards (dashed: mean {_fmt(summary.mean, sign=False)})",
        summary.rewards,
        r_low,
        r_high,
        r_low,
        summary.mean,
        lambda v: "#7986cb",
    )
    bound = max([1.5] + [abs(a) for a in summary.advantages])
    panel(
        half + 20,
        "advantages (dashed: 0)",
        summary.advantages,
        -bound,
        bound,
        0.0,
        0.0,
        lambda v: "#2e7d32" if v > 0 else ("#c62828" if v < 0 else "#9e9e9e"),
    )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class ClipCurves:
    """The clipped surrogate over a range of ratios, computed by :func:`clip_curves`.

    The *objective* is what the update maximises, ``min(rho A, clip(rho) A)``: minus
    :func:`grpo_core.loss.clipped_surrogate`. All lists have one entry per ratio.

    Attributes:
        ratio: the ratios rho = pi / pi_old.
        unclipped: ``rho * A``.
        clipped: ``min(rho A, clip(rho, 1 - eps, 1 + eps_high) A)``.
        gradient: d clipped / d rho (autograd through ``clipped_surrogate``).
        zero_gradient: True where the clip has cut the gradient to exactly 0.
        zero_regions: the ratio intervals where ``zero_gradient`` holds, as (start, end).
        band: ``(1 - eps, 1 + eps_high)``.
        advantage: the A used (+1 or -1 times its size).
        message: where the gradient is zero, in words.
    """

    ratio: list[float]
    unclipped: list[float]
    clipped: list[float]
    gradient: list[float]
    zero_gradient: list[bool]
    zero_regions: list[tuple[float, float]]
    band: tuple[float, float]
    advantage: float
    message: str = ""


def clip_curves(
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    ratio_range: tuple[float, float] = (0.5, 1.5),
    advantage: float = 1.0,
    points: int = 201,
) -> ClipCurves:
    """The clipped and unclipped surrogate as curves of the ratio (notebook 04, eqs. (4.1)-(4.2)).

    Evaluates :func:`grpo_core.loss.clipped_surrogate` at ``points`` ratios, one token each, with
    ``log rho`` as the "current" log-prob and 0 as the old one, and differentiates it with
    autograd: where the clip is active the gradient is exactly 0.

    Args:
        epsilon, epsilon_high: the clip band ``[1 - epsilon, 1 + epsilon_high]``.
        ratio_range: ``(low, high)`` ratios to draw, ``0 < low < high``.
        advantage: A, non-zero; its sign decides which side the clip acts on.
        points: how many ratios.

    Returns:
        a :class:`ClipCurves`.
    """
    low, high = (float(x) for x in ratio_range)
    if not 0 < low < high:
        raise ValueError(f"ratio_range must satisfy 0 < low < high, got {ratio_range!r}")
    if advantage == 0:
        raise ValueError("advantage must be non-zero: at A = 0 both curves are flat at 0")
    eps_high = epsilon if epsilon_high is None else epsilon_high
    ratio = torch.linspace(low, high, points, dtype=torch.float64).requires_grad_(True)
    log_ratio = torch.log(ratio).unsqueeze(0)  # [1, points]: one sequence, one token per ratio
    old = torch.zeros_like(log_ratio)
    adv = torch.tensor([float(advantage)], dtype=torch.float64)
    objective = -clipped_surrogate(log_ratio, old, adv, epsilon, epsilon_high)[0]
    (gradient,) = torch.autograd.grad(objective.sum(), ratio)
    ratios = ratio.detach()
    zero = (gradient == 0).tolist()
    regions = _runs(ratios.tolist(), zero)
    band = (1 - float(epsilon), 1 + float(eps_high))
    if advantage > 0:
        side = f"ratio > {band[1]:.2f}: A > 0 and the completion is already more likely than at sampling"
    else:
        side = f"ratio < {band[0]:.2f}: A < 0 and the completion is already less likely than at sampling"
    message = (
        f"zero gradient where {side}; the clip stops pushing further in the same direction. "
        "On the other side the unclipped term is smaller, min() picks it, and the gradient stays."
    )
    return ClipCurves(
        ratio=ratios.tolist(),
        unclipped=(ratios * float(advantage)).tolist(),
        clipped=objective.detach().tolist(),
        gradient=gradient.tolist(),
        zero_gradient=zero,
        zero_regions=regions,
        band=band,
        advantage=float(advantage),
        message=message,
    )


def _runs(xs: list[float], flags: list[bool]) -> list[tuple[float, float]]:
    """Maximal intervals of ``xs`` where ``flags`` is True."""
    runs: list[tuple[float, float]] = []
    start = None
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        if start is not None and (not flag or i == len(flags) - 1):
            end = i if flag else i - 1
            runs.append((xs[start], xs[end]))
            start = None
    return runs


@dataclass(frozen=True)
class KLCurves:
    """The two KL estimators over the log-ratio, computed by :func:`kl_curves`.

    ``log_ratio`` is ``log pi(y) - log pi_ref(y)`` for one sampled token. ``k1 = log_ratio``
    (unbiased, but negative for half the tokens), ``k3 = exp(-log_ratio) + log_ratio - 1``
    (:func:`grpo_core.loss.kl_k3`: unbiased too, and never negative). ``penalty_*`` are these
    times beta, what the loss adds per token.

    Attributes:
        log_ratio, k1, k3, penalty_k1, penalty_k3: one entry per point.
        gradient_k3: d (beta * k3) / d log pi, ``beta * (1 - exp(-log_ratio))``.
        beta: the weight.
        message: what beta does, in words.
    """

    log_ratio: list[float]
    k1: list[float]
    k3: list[float]
    penalty_k1: list[float]
    penalty_k3: list[float]
    gradient_k3: list[float]
    beta: float
    message: str = ""


def kl_curves(
    beta: float = 0.04, log_ratio_range: tuple[float, float] = (-2.0, 2.0), points: int = 201
) -> KLCurves:
    """k1 and k3 (times beta) as curves of the log-ratio (notebook 04, eq. (4.3)).

    Args:
        beta: the KL weight, >= 0.
        log_ratio_range: ``(low, high)`` values of ``log pi - log pi_ref``.
        points: how many values.

    Returns:
        a :class:`KLCurves`.
    """
    low, high = (float(x) for x in log_ratio_range)
    if not low < high:
        raise ValueError(f"log_ratio_range must satisfy low < high, got {log_ratio_range!r}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    x = torch.linspace(low, high, points, dtype=torch.float64)
    logp = x.clone().requires_grad_(True).unsqueeze(0)  # policy log-prob; the reference's is 0
    k3 = kl_k3(logp, torch.zeros_like(logp))
    (gradient,) = torch.autograd.grad((beta * k3).sum(), logp)
    k3 = k3.detach()[0]
    if beta == 0:
        message = (
            "beta = 0: the KL term is gone from the loss, and no reference model is needed "
            "(TRL then does not even load one)."
        )
    else:
        message = (
            f"beta = {beta:g}: each token adds beta * k3 to the loss, which pulls log pi back "
            "towards log pi_ref with a force beta * (1 - exp(-log_ratio)), 0 where they agree."
        )
    return KLCurves(
        log_ratio=x.tolist(),
        k1=x.tolist(),
        k3=k3.tolist(),
        penalty_k1=(beta * x).tolist(),
        penalty_k3=(beta * k3).tolist(),
        gradient_k3=gradient[0].tolist(),
        beta=float(beta),
        message=message,
    )


# ---------------------------------------------------------------------------------------------
# Views (ipywidgets imported lazily)


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the interactive widgets need ipywidgets (pip install ipywidgets); the functions "
            "group_summary, clip_curves and kl_curves work without it"
        ) from error
    return ipywidgets


@dataclass
class _View:
    """A widget tree plus its controls; displays as the tree in a notebook."""

    widget: Any = None
    controls: dict[str, Any] = field(default_factory=dict)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __getattr__(self, name: str) -> Any:
        controls = self.__dict__.get("controls", {})
        if name in controls:
            return controls[name]
        raise AttributeError(name)


class GroupVariationView(_View):
    """The group-variation widget. Controls: ``sliders``, ``preset``, ``text``, ``scale``,
    ``std_convention``; output: ``output`` (an HTML widget) and ``summary`` (the latest
    :class:`GroupSummary`)."""

    summary: GroupSummary


def group_variation_widget(
    k: int = 4,
    rewards: Sequence[float] | None = None,
    *,
    reward_range: tuple[float, float] = (0.0, 3.0),
    step: float = 0.5,
    other_groups: Sequence[Sequence[float]] = ((0.0, 0.0, 0.0, 3.0),),
) -> GroupVariationView:
    """k reward sliders (or a typed group) -> mean, std, advantages, a bar chart, and the verdict.

    A view over :func:`group_summary`. Presets: ``too hard`` (all 0), ``too easy`` (all 2),
    ``usable`` (0, 1, 1, 2). Toggles: the std convention (N-1 or N) and ``scale`` (group, batch,
    none); with ``batch`` the batch is this group plus ``other_groups`` (repeated or cut to k).
    """
    w = _ipywidgets()
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    start = list(rewards) if rewards is not None else preset_rewards("usable", k)
    if len(start) != k:
        raise ValueError(f"rewards must have k = {k} values")
    others = [(list(g) * math.ceil(k / len(g)))[:k] for g in other_groups]
    sliders = [
        w.FloatSlider(
            value=float(r),
            min=reward_range[0],
            max=reward_range[1],
            step=step,
            description=f"r{i}",
            readout_format=".1f",
            continuous_update=True,
            layout=w.Layout(width="320px"),
        )
        for i, r in enumerate(start)
    ]
    preset = w.Dropdown(options=list(PRESET_NAMES), value="custom", description="preset")
    text = w.Text(
        value=", ".join(f"{r:g}" for r in start),
        description="or type",
        placeholder="e.g. 0, 1, 1, 2",
        continuous_update=False,
        layout=w.Layout(width="320px"),
    )
    scale = w.ToggleButtons(options=list(SCALES), value="group", description="scale")
    std = w.ToggleButtons(
        options=[("N-1 (torch, TRL)", "sample"), ("N (numpy)", "population")],
        value="sample",
        description="std",
    )
    output = w.HTML()
    error = w.HTML()
    view = GroupVariationView(
        controls={
            "sliders": sliders,
            "preset": preset,
            "text": text,
            "scale": scale,
            "std_convention": std,
            "output": output,
            "error": error,
        }
    )
    busy = {"on": False}

    def refresh(_change: Any = None) -> None:
        values = [s.value for s in sliders]
        view.summary = group_summary(
            values, scale=scale.value, std_convention=std.value, other_groups=others
        )
        output.value = group_summary_html(view.summary)
        if not busy["on"]:
            busy["on"] = True
            try:
                text.value = ", ".join(f"{v:g}" for v in values)
                matching = [n for n in PRESET_NAMES[1:] if preset_rewards(n, k) == values]
                preset.value = matching[0] if matching else "custom"
            finally:
                busy["on"] = False

    def set_values(values: list[float]) -> None:
        busy["on"] = True
        try:
            for slider, value in zip(sliders, values, strict=True):
                slider.value = value
        finally:
            busy["on"] = False
        refresh()

    def on_preset(change: Any) -> None:
        if busy["on"] or change["new"] == "custom":
            return
        error.value = ""
        set_values(preset_rewards(change["new"], k))

    def on_text(change: Any) -> None:
        if busy["on"]:
            return
        try:
            values = parse_rewards(change["new"])
            if len(values) != k:
                raise ValueError(f"type exactly k = {k} rewards, got {len(values)}")
            low, high = reward_range
            if not all(low <= v <= high for v in values):
                raise ValueError(f"each reward must lie in [{low:g}, {high:g}]")
        except ValueError as problem:
            error.value = f'<span style="color:#b00020">{html.escape(str(problem))}</span>'
            return
        error.value = ""
        set_values(values)

    for slider in sliders:
        slider.observe(refresh, names="value")
    scale.observe(refresh, names="value")
    std.observe(refresh, names="value")
    preset.observe(on_preset, names="value")
    text.observe(on_text, names="value")
    refresh()
    view.widget = w.VBox(
        [
            w.HBox([preset, text]),
            w.HBox([w.VBox(sliders), w.VBox([scale, std])]),
            error,
            output,
        ]
    )
    return view


class CurvesView(_View):
    """A curves widget (clip or KL). ``curves`` holds the latest computed curves and ``figure``
    the latest matplotlib figure; ``output`` is the ``Output`` widget it is drawn in."""

    curves: Any
    figure: Any


def _draw(view: CurvesView, output: Any, plot) -> None:
    import matplotlib.pyplot as plt
    from IPython.display import display

    figure, axis = plt.subplots(figsize=(6.4, 3.4))
    plot(axis)
    figure.tight_layout()
    plt.close(figure)  # shown once, in the Output widget, not again at the end of the cell
    view.figure = figure
    with output:
        output.clear_output(wait=True)
        display(figure)


def plot_clip_curves(axis: Any, curves: ClipCurves) -> None:
    """Draw :class:`ClipCurves` on a matplotlib axis."""
    axis.plot(curves.ratio, curves.unclipped, "--", color="#777", label="unclipped  ρ·A")
    axis.plot(
        curves.ratio, curves.clipped, color="#1565c0", lw=2.2, label="clipped  min(ρA, clip(ρ)A)"
    )
    for i, (start, end) in enumerate(curves.zero_regions):
        axis.axvspan(
            start, end, color="#ef9a9a", alpha=0.35, label="zero gradient" if i == 0 else None
        )
    for edge in curves.band:
        axis.axvline(edge, color="#999", lw=0.8, ls=":")
    axis.axvline(1.0, color="#333", lw=0.8)
    axis.set_xlabel("ratio ρ = π / π_old")
    axis.set_ylabel("objective (maximised)")
    band = f"[{curves.band[0]:.2f}, {curves.band[1]:.2f}]"
    axis.set_title(f"A = {curves.advantage:+g}, clip band {band}")
    axis.legend(loc="best", fontsize=8)


def clip_widget(epsilon: float = 0.2, epsilon_high: float | None = None) -> CurvesView:
    """ε, ε_high, a ratio range and the sign of A -> the surrogate curves (view over :func:`clip_curves`)."""
    w = _ipywidgets()
    eps = w.FloatSlider(value=epsilon, min=0.0, max=0.5, step=0.01, description="ε")
    eps_high = w.FloatSlider(
        value=epsilon if epsilon_high is None else epsilon_high,
        min=0.0,
        max=0.5,
        step=0.01,
        description="ε_high",
    )
    same = w.Checkbox(value=epsilon_high is None, description="ε_high = ε")
    ratio = w.FloatRangeSlider(
        value=(0.5, 1.5), min=0.05, max=3.0, step=0.05, description="ratio range"
    )
    sign = w.ToggleButtons(
        options=[("A > 0", 1.0), ("A < 0", -1.0)], value=1.0, description="sign of A"
    )
    output = w.Output()
    text = w.HTML()
    view = CurvesView(
        controls={
            "epsilon": eps,
            "epsilon_high": eps_high,
            "same": same,
            "ratio_range": ratio,
            "sign": sign,
            "output": output,
            "text": text,
        }
    )

    def refresh(_change: Any = None) -> None:
        eps_high.disabled = same.value
        high = None if same.value else eps_high.value
        view.curves = clip_curves(eps.value, high, tuple(ratio.value), sign.value)
        text.value = f"<i>{html.escape(view.curves.message)}</i>"
        _draw(view, output, lambda axis: plot_clip_curves(axis, view.curves))

    for control in (eps, eps_high, same, ratio, sign):
        control.observe(refresh, names="value")
    refresh()
    view.widget = w.VBox(
        [w.HBox([w.VBox([eps, eps_high, same]), w.VBox([ratio, sign])]), text, output]
    )
    return view


def plot_kl_curves(axis: Any, curves: KLCurves) -> None:
    """Draw :class:`KLCurves` on a matplotlib axis."""
    axis.plot(curves.log_ratio, curves.penalty_k1, "--", color="#777", label="β·k1 = β·log-ratio")
    axis.plot(
        curves.log_ratio,
        curves.penalty_k3,
        color="#6a1b9a",
        lw=2.2,
        label="β·k3 = β·(e^{-x} + x - 1)",
    )
    axis.axhline(0, color="#333", lw=0.8)
    axis.axvline(0, color="#333", lw=0.8)
    axis.set_xlabel("log-ratio x = log π − log π_ref")
    axis.set_ylabel("per-token penalty")
    axis.set_title(f"β = {curves.beta:g}")
    axis.legend(loc="best", fontsize=8)


def kl_widget(beta: float = 0.04) -> CurvesView:
    """β and a log-ratio range -> β·k1 and β·k3 as curves (view over :func:`kl_curves`)."""
    w = _ipywidgets()
    beta_slider = w.FloatSlider(value=beta, min=0.0, max=0.5, step=0.01, description="β")
    span = w.FloatRangeSlider(
        value=(-2.0, 2.0), min=-5.0, max=5.0, step=0.1, description="log-ratio"
    )
    output = w.Output()
    text = w.HTML()
    view = CurvesView(
        controls={"beta": beta_slider, "log_ratio_range": span, "output": output, "text": text}
    )

    def refresh(_change: Any = None) -> None:
        low, high = span.value
        if not low < high:
            text.value = "<i>pick a range with low &lt; high</i>"
            return
        view.curves = kl_curves(beta_slider.value, (low, high))
        text.value = f"<i>{html.escape(view.curves.message)}</i>"
        _draw(view, output, lambda axis: plot_kl_curves(axis, view.curves))

    beta_slider.observe(refresh, names="value")
    span.observe(refresh, names="value")
    refresh()
    view.widget = w.VBox([w.HBox([beta_slider, span]), text, output])
    return view
