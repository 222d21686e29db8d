"""Which KL estimator gives the right gradient, to move by hand: the distance between the policy
and the reference, and how many tokens a step samples. :func:`kl_gradient_errors` is pure
(``grpo_core.kl_gradients``, exact on a small vocabulary); :func:`kl_gradient_widget` wires it
to two sliders."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from grpo_core.kl_gradients import ESTIMATORS, exact_gradients, exact_kl, gradient_moments
from grpo_core.kl_gradients import policy_pair as make_policy_pair
from grpo_core.widgets._base import CurvesView, _draw, _ipywidgets, wrapping_row

LABELS = {"k1": "k1", "k2": "k2", "k3": "k3", "ratio_k3": "ratio·k3 (the course's, TRL's)"}
SAMPLE_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class KLGradientErrors:
    """Each estimator's gradient error against the exact gradient of KL(pi || pi_ref).

    Attributes:
        kl: the exact KL between the two policies.
        samples: the number of sampled tokens the table is for.
        relative_bias: ``{estimator: |E[g] - grad KL| / |grad KL|}``, whatever ``samples`` is.
        relative_error: ``{estimator: sqrt(bias^2 + variance / samples) / |grad KL|}``, the
            root-mean-square error of an ``samples``-token gradient.
        curves: ``{estimator: [relative error at each of SAMPLE_COUNTS]}``.
        value_bias: ``{estimator: E[estimator] - KL}``, the bias of the value.
        message: the verdict in words.
    """

    kl: float
    samples: int
    relative_bias: dict[str, float]
    relative_error: dict[str, float]
    curves: dict[str, list[float]]
    value_bias: dict[str, float]
    message: str


def kl_gradient_errors(distance: float = 1.0, samples: int = 16, vocab: int = 50,
                       seed: int = 0) -> KLGradientErrors:
    """The estimators' gradient errors for a policy ``distance`` away from its reference on a
    ``vocab``-token distribution (``grpo_core.kl_gradients.policy_pair``).

    Args:
        distance: how far the policy's logits are from the reference's (> 0).
        samples: tokens sampled per gradient (>= 1).
        vocab, seed: the toy distribution.

    Returns:
        a :class:`KLGradientErrors`.
    """
    if distance <= 0:
        raise ValueError(f"distance must be > 0 (at 0 every gradient is 0), got {distance}")
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    logits, ref_logits = make_policy_pair(vocab, distance, seed)
    scale = exact_gradients(logits, ref_logits)["kl"].norm().item()
    moments = {name: gradient_moments(name, logits, ref_logits) for name in ESTIMATORS}

    def error(name: str, n: int) -> float:
        bias, variance = moments[name]["bias"], moments[name]["variance"]
        return (bias**2 + variance / n) ** 0.5 / scale

    k3_bias = moments["k3"]["relative_bias"]
    message = (f"k1's gradient averages to 0: it never learns the KL. k3's averages to the "
               f"reverse KL's, {k3_bias:.0%} off here, however many tokens are sampled. k2 and "
               f"ratio·k3 have the same gradient token by token, and it is the KL's: their "
               f"error falls as 1/sqrt(samples).")
    return KLGradientErrors(
        kl=exact_kl(logits, ref_logits).item(), samples=int(samples),
        relative_bias={name: m["relative_bias"] for name, m in moments.items()},
        relative_error={name: error(name, samples) for name in ESTIMATORS},
        curves={name: [error(name, n) for n in SAMPLE_COUNTS] for name in ESTIMATORS},
        value_bias={name: m["value_bias"] for name, m in moments.items()},
        message=message)


def kl_gradient_html(errors: KLGradientErrors) -> str:
    """The table under the widget's plot: bias, error at ``samples`` tokens, value bias."""
    rows = "".join(
        f"<tr><td>{html.escape(LABELS[name])}</td><td>{errors.relative_bias[name]:.1%}</td>"
        f"<td>{errors.relative_error[name]:.1%}</td><td>{errors.value_bias[name]:+.2g}</td></tr>"
        for name in ESTIMATORS)
    return (f"<p>KL(π ‖ π_ref) = {errors.kl:.4f}</p><table><tr><th>estimator</th>"
            f"<th>gradient bias</th><th>gradient error, {errors.samples} tokens</th>"
            f"<th>value bias</th></tr>{rows}</table><p><i>{html.escape(errors.message)}</i></p>")


def plot_kl_gradient_errors(axis: Any, errors: KLGradientErrors) -> None:
    """Relative gradient error against the number of sampled tokens, one line per estimator."""
    styles = {"k1": ("#777", "--"), "k2": ("#1b5e20", "-"), "k3": ("#c62828", "-"),
              "ratio_k3": ("#6a1b9a", ":")}
    for name in ESTIMATORS:
        colour, style = styles[name]
        axis.plot(SAMPLE_COUNTS, errors.curves[name], style, color=colour, lw=2,
                  label=LABELS[name])
    axis.axvline(errors.samples, color="#333", lw=0.8)
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("tokens sampled per gradient")
    axis.set_ylabel("|gradient error| / |∇KL|")
    axis.set_title(f"KL = {errors.kl:.3g}")
    axis.legend(loc="best", fontsize=8)


def kl_gradient_widget(distance: float = 1.0, samples: int = 16) -> CurvesView:
    """Distance and samples -> each estimator's gradient error (view over
    :func:`kl_gradient_errors`)."""
    if samples not in SAMPLE_COUNTS:
        raise ValueError(f"samples must be one of {SAMPLE_COUNTS}, got {samples}")
    w = _ipywidgets()
    distance_slider = w.FloatSlider(value=distance, min=0.1, max=4.0, step=0.1,
                                    description="distance")
    samples_slider = w.SelectionSlider(options=list(SAMPLE_COUNTS), value=samples,
                                       description="tokens")
    output, table = w.Output(), w.HTML()
    view = CurvesView(controls={"distance": distance_slider, "samples": samples_slider,
                                "output": output, "table": table})

    def refresh(_change: Any = None) -> None:
        view.curves = kl_gradient_errors(distance_slider.value, samples_slider.value)
        table.value = kl_gradient_html(view.curves)
        _draw(view, output, lambda axis: plot_kl_gradient_errors(axis, view.curves))

    distance_slider.observe(refresh, names="value")
    samples_slider.observe(refresh, names="value")
    refresh()
    view.widget = w.VBox([wrapping_row(w, [distance_slider, samples_slider]), output, table])
    return view
