"""The clip, to move by hand (notebook 04): epsilon, epsilon_high, a ratio range and the sign of
A -> the unclipped and clipped surrogate as curves of the ratio, with the zero-gradient region
(lecture: "Reusing a rollout adds a clip"). :func:`clip_curves` is pure (``grpo_core.loss``);
:func:`clip_widget` wires it to sliders."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import torch

from grpo_core.loss import clipped_surrogate
from grpo_core.widgets._base import CurvesView, _draw, _ipywidgets, wrapping_row


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


def plot_clip_curves(axis: Any, curves: ClipCurves) -> None:
    """Draw :class:`ClipCurves` on a matplotlib axis."""
    axis.plot(curves.ratio, curves.unclipped, "--", color="#777", label=r"unclipped  $\rho A$")
    axis.plot(curves.ratio, curves.clipped, color="#1565c0", lw=2.2,
              label=r"clipped  $\min(\rho A,\ \mathrm{clip}(\rho)\,A)$")
    for i, (start, end) in enumerate(curves.zero_regions):
        axis.axvspan(
            start, end, color="#ef9a9a", alpha=0.35, label="zero gradient" if i == 0 else None
        )
    for edge in curves.band:
        axis.axvline(edge, color="#999", lw=0.8, ls=":")
    axis.axvline(1.0, color="#333", lw=0.8)
    axis.set_xlabel(r"ratio $\rho = \pi / \pi_{\mathrm{old}}$")
    axis.set_ylabel("objective (maximised)")
    band = f"$[{curves.band[0]:.2f},\\ {curves.band[1]:.2f}]$"
    axis.set_title(f"$A = {curves.advantage:+g}$, clip band {band}")
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
        value=(0.5, 1.5), min=0.05, max=3.0, step=0.05, description="ratio range",
        readout_format=".2f", layout=w.Layout(width="440px"),
        style={"description_width": "initial"},  # room for "0.50 – 1.50", not cut off
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
        if same.value and eps_high.value != eps.value:
            # tied: the greyed slider shows the ε in use, and unticking starts from it;
            # setting it calls refresh again, which then draws
            eps_high.value = eps.value
            return
        high = None if same.value else eps_high.value
        view.curves = clip_curves(eps.value, high, tuple(ratio.value), sign.value)
        text.value = f"<i>{html.escape(view.curves.message)}</i>"
        _draw(view, output, lambda axis: plot_clip_curves(axis, view.curves))

    for control in (eps, eps_high, same, ratio, sign):
        control.observe(refresh, names="value")
    refresh()
    view.widget = w.VBox(
        [wrapping_row(w, [w.VBox([eps, eps_high, same]), w.VBox([ratio, sign])]), text, output]
    )
    return view
