"""Widgets a learner can move: the group baseline (notebook 03) and the two guardrails (notebook 04).

Every widget is a thin view over a pure function that computes what it shows:

- :func:`group_summary` -> :func:`group_variation_widget`: k rewards -> mean, std, advantages,
  and whether the group gives any learning signal (lecture: "The reward must create variation");
- :func:`clip_curves` -> :func:`clip_widget`: epsilon, epsilon_high, a ratio range and the sign of
  A -> the unclipped and clipped surrogate as curves of the ratio, with the zero-gradient region
  (lecture: "Reusing a rollout adds a clip");
- :func:`kl_curves` -> :func:`kl_widget`: the k1 and k3 estimators over the log-ratio, times beta
  (lecture: "Two guardrails, two time scales");
- :func:`kl_gradient_errors` -> :func:`kl_gradient_widget` (``kl_gradient``): how far each KL
  estimator's sampled gradient is from the KL's exact gradient, by distance and tokens sampled.

The pure functions call the update math (``grpo_core.advantages``, ``grpo_core.loss``) and
import only torch, so tests drive them without ipywidgets or a browser. The ``*_widget``
functions import ipywidgets (and matplotlib) lazily; each returns a view object whose controls
are attributes, so a test can set a control's value and read the computed output.

- :func:`step_view` -> :func:`run_explorer` (``explorer``): a recorded run, a step slider, its
  curves with a cursor, that step's groups from ``samples.jsonl`` and ``diagnose``'s findings
  at that step (notebook 11);
- :func:`token_logprob_change` -> :func:`token_change_html` (``tokens``): after one update,
  each completion's tokens coloured by how much their log-probability moved (notebook 02).

One module per widget (``group``, ``clip``, ``kl``, ``kl_gradient``, ``explorer``, ``tokens``), the group widget's HTML/SVG in ``render``
and what the views share in ``_base``; every name is importable from ``grpo_core.widgets``.
"""

from grpo_core.widgets.clip import ClipCurves, clip_curves, clip_widget, plot_clip_curves
from grpo_core.widgets.explorer import (
    NO_SAMPLES_MESSAGE,
    RunExplorerView,
    StepView,
    run_explorer,
    step_view,
    step_view_html,
)
from grpo_core.widgets.group import (
    NO_SIGNAL_MESSAGE,
    PRESET_NAMES,
    STD_CONVENTIONS,
    GroupSummary,
    GroupVariationView,
    group_summary,
    group_variation_widget,
    parse_rewards,
    preset_rewards,
)
from grpo_core.widgets.kl import KLCurves, kl_curves, kl_widget, plot_kl_curves
from grpo_core.widgets.kl_gradient import (
    KLGradientErrors,
    kl_gradient_errors,
    kl_gradient_html,
    kl_gradient_widget,
    plot_kl_gradient_errors,
)
from grpo_core.widgets.render import group_summary_html
from grpo_core.widgets.tokens import (
    TokenChangeRow,
    token_change_html,
    token_change_summary,
    token_logprob_change,
)

__all__ = [
    "NO_SIGNAL_MESSAGE", "PRESET_NAMES", "STD_CONVENTIONS", "ClipCurves", "GroupSummary",
    "GroupVariationView", "KLCurves", "clip_curves", "clip_widget", "group_summary",
    "group_summary_html", "group_variation_widget", "kl_curves", "kl_widget", "parse_rewards",
    "plot_clip_curves", "plot_kl_curves", "preset_rewards",
    # the run explorer (notebook 11)
    "NO_SAMPLES_MESSAGE", "RunExplorerView", "StepView", "run_explorer", "step_view",
    "step_view_html",
    # the token view (notebook 02)
    "TokenChangeRow", "token_change_html", "token_change_summary", "token_logprob_change",
    # the KL estimators' gradients
    "KLGradientErrors", "kl_gradient_errors", "kl_gradient_html", "kl_gradient_widget",
    "plot_kl_gradient_errors",
]
