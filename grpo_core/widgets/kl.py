"""The KL penalty, to move by hand (notebook 04): the k1 and k3 estimators over the log-ratio,
times beta (lecture: "Two guardrails, two time scales"). :func:`kl_curves` is pure
(``grpo_core.loss``); :func:`kl_widget` wires it to a slider."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import torch

from grpo_core.loss import kl_k3
from grpo_core.widgets._base import CurvesView, _draw, _ipywidgets, wrapping_row


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


def plot_kl_curves(axis: Any, curves: KLCurves) -> None:
    """Draw :class:`KLCurves` on a matplotlib axis."""
    axis.plot(curves.log_ratio, curves.penalty_k1, "--", color="#777",
              label=r"$\beta\,k_1 = \beta\,x$")
    axis.plot(curves.log_ratio, curves.penalty_k3, color="#6a1b9a", lw=2.2,
              label=r"$\beta\,k_3 = \beta\,(e^{-x} + x - 1)$")
    axis.axhline(0, color="#333", lw=0.8)
    axis.axvline(0, color="#333", lw=0.8)
    axis.set_xlabel(r"log-ratio $x = \log \pi - \log \pi_{\mathrm{ref}}$")
    axis.set_ylabel("per-token penalty")
    axis.set_title(f"$\\beta = {curves.beta:g}$")
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
    view.widget = w.VBox([wrapping_row(w, [beta_slider, span]), text, output])
    return view
