"""Training curves from per-step metrics: reward, completion length, zero-std groups, KL, clip.

Reads metric dicts (TRL's names) and nothing else, so the same plot serves
our loop (``metrics.jsonl``, or a live callback) and TRL's ``GRPOTrainer`` (its ``on_log``).

- :func:`plot_metrics` draws a figure from a list of records;
- :func:`save_curves` writes it to a PNG (``curves.png``);
- :func:`plot_run` draws a recorded run with ``diagnose``'s findings shaded in the panel that
  revealed them; :func:`compare_runs` puts several runs' curves side by side;
- :func:`plot_seed_changes` draws each setup's seeds, their mean and its Student's t
  interval, beside a margin of indifference around one of them;
- :class:`LivePlot` redraws every N steps: in a notebook it updates one image in place,
  elsewhere it rewrites a PNG. It is a callback for ``grpo_core.loop.train`` (called with each
  step's dict) and duck-types a transformers ``TrainerCallback`` for TRL (``on_log``).

A held-out mean (``eval/<fn>``) is drawn with bars of +-2 standard errors where its
``eval/<fn>/sem`` was logged; its curve starts at the ``"step": 0`` record (the base model),
which has no training metrics and so adds nothing to the other panels.

matplotlib is used through its object API (``Figure``, no pyplot), so nothing here depends on
the backend, opens a window, or leaks figures.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_core.diagnosis import find_true_score, trained_rewards
from grpo_core.findings import Diagnosis
from grpo_core.run_files import RecordedRun, StepMetrics, eval_mean_keys, load_run, series
from grpo_core.stats import seed_interval

# panel titles that say what a metric means beside its TRL name: `completions/clipped_ratio`
# (completions cut by the token budget) and `clip_ratio` (tokens PPO's clip cut) are unrelated
ZERO_STD_TITLE = "groups with no signal (frac_reward_zero_std)"
CLIP_TITLE = "PPO clip: tokens clipped (clip_ratio)"
CUT_TITLE = "cut off by the token budget (clipped_ratio)"
# (title, metric keys on the left axis, metric key on a right axis or None)
PANELS: list[tuple[str, list[str], str | None]] = [
    ("reward", ["reward"], None),
    ("completion length", ["completions/mean_length"], "completions/mean_chars"),
    (ZERO_STD_TITLE, ["frac_reward_zero_std"], None),
    ("KL to the reference", ["kl"], None),
    (CLIP_TITLE, ["clip_ratio/region_mean"], None),
    ("entropy", ["entropy"], None),
]
# compare_runs' panel titles: what each metric is, then its name
METRIC_TITLES = {
    "reward": "reward (training batch)",
    "frac_reward_zero_std": ZERO_STD_TITLE,
    "completions/clipped_ratio": "cut off by the token budget (completions/clipped_ratio)",
    "clip_ratio/region_mean": "PPO clip: tokens clipped (clip_ratio/region_mean)",
    "completions/mean_length": "completion length, tokens (completions/mean_length)",
    "grad_norm": "gradient norm before clipping (grad_norm)",
    "kl": "KL to the reference per token (kl)",
    "entropy": "entropy of the sampled tokens (entropy)",
    "completions/mean_chars": "completion length, characters (completions/mean_chars)",
    "sampling/sampling_logp_difference/mean":
        "learner - sampler, mean |delta| per token (sampling/sampling_logp_difference/mean)",
}
DPI = 120  # readable on a laptop screen without zooming
# the true score and the proxy trained on: one colour each in every figure (notebooks 09, 11)
ROLE_COLOURS = {"true score": "tab:green", "trained on": "tab:red"}
FONT_TITLE, FONT_SMALL = 11, 9
# what a panel says, instead of a flat line, when its metric was exactly 0 at every step
ZERO_AT_EVERY_STEP = {
    "clip_ratio/region_mean": "0 at every step: the clip never acted\n(as with one update per "
                              "batch,\nwhere the ratio stays 1)",
    "kl": "0 at every step: no KL term in this run",
}
LABELS = {
    "completions/mean_length": "tokens",
    "completions/mean_chars": "characters",
    "clip_ratio/region_mean": "region",
}


def plot_metrics(
    records: Sequence[dict[str, Any]],
    *,
    title: str | None = None,
    targets: dict[str, float] | None = None,
    panels: Sequence[tuple[str, list[str], str | None]] = PANELS,
    labels: Mapping[str, str] | None = None,
):
    """A grid of curves, one panel per metric group, with the step on the x axis.

    Args:
        records: per-step metric dicts (``step`` plus TRL's names); missing keys are skipped
            (the ``"step": 0`` evaluation record has only ``eval/...`` and ``time/eval``).
        title: a figure title.
        targets: ``{metric: value}`` drawn as dashed horizontal lines (e.g. 20 characters).
        panels: ``(title, left keys, right key)`` triples; ``PANELS`` by default. A panel
            whose metrics never appear (``kl`` when beta = 0) is left out, so no panel is
            empty; with nothing logged yet the first panel stays and says so.
        labels: legend labels for metric keys, over ``LABELS`` (e.g. "(true score)").

    Returns:
        a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    targets = targets or {}
    labels = {**LABELS, **(labels or {})}
    panels = logged_panels(records, panels)
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig = Figure(figsize=(4.2 * columns, 3.0 * rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (name, left_keys, right_key) in zip(axes, panels, strict=False):
        _draw_panel(ax, records, name, left_keys, right_key, targets, labels)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return fig


def logged_panels(records: StepMetrics, panels: Sequence[tuple[str, list[str], str | None]]
                  ) -> list[tuple[str, list[str], str | None]]:
    """The panels with at least one of their metrics in ``records`` (all of them missing:
    the first panel, which then says nothing is logged yet)."""
    logged = [panel for panel in panels
              if any(series(records, key)[0] for key in [*panel[1], panel[2]] if key)]
    return logged or list(panels[:1])


def style_axis(ax) -> None:
    """What every panel shares: integer steps on the x axis (a 2-step run reads 1, 2, not
    0.96-1.04) and readable tick labels."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("step", fontsize=FONT_SMALL)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=FONT_SMALL)


def whole_step_limits(ax) -> None:
    """Whole steps on the x axis of a panel with one step drawn (a live plot after its first
    step): matplotlib's integer locator falls back to 0.945-1.065 when the range is below one
    step, so the limits go one step beyond it on each side."""
    if not ax.has_data():
        return
    low, high = ax.dataLim.intervalx
    if high - low < 1:
        ax.set_xlim(low - 1, high + 1)


def role_colour(label: str, index: int) -> str:
    """A line's colour: the true score and the reward trained on keep one colour each in
    every figure (a legend label ending "(true score)" or "(trained on)"); other lines take
    the colour cycle in order."""
    for role, colour in ROLE_COLOURS.items():
        if label.endswith(f"({role})"):
            return colour
    return f"C{index % 10}"


def _draw_panel(ax, records, name, left_keys, right_key, targets, labels) -> None:
    ax.set_title(name, fontsize=FONT_TITLE)
    style_axis(ax)
    if _say_zero(ax, records, left_keys, right_key):
        return
    drawn = 0
    for index, key in enumerate(left_keys):
        steps, values = series(records, key)
        if steps:
            label, sems = labels.get(key, key), sem_at(records, key, steps)
            colour = role_colour(label, index)
            if sems is None:
                ax.plot(steps, values, marker=".", label=label, color=colour)
            else:
                ax.errorbar(steps, values, yerr=[2 * s for s in sems], marker=".", capsize=2,
                            label=f"{label} (±2 s.e.)", color=colour)
            drawn += 1
        if key in targets:
            ax.axhline(targets[key], linestyle="--", color="gray", linewidth=1)
    if drawn > 1:  # below the panel, not over its data
        ax.legend(fontsize=FONT_SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                  ncols=1, frameon=False)
    if right_key is not None:
        steps, values = series(records, right_key)
        if steps:
            twin = ax.twinx()
            twin.plot(steps, values, color="tab:orange", marker=".",
                      label=labels.get(right_key, right_key))
            twin.set_ylabel(labels.get(right_key, right_key), color="tab:orange",
                            fontsize=FONT_SMALL)
            twin.tick_params(labelsize=FONT_SMALL)
            if right_key in targets:
                twin.axhline(targets[right_key], linestyle="--", color="tab:orange", linewidth=1)
            ax.set_ylabel(labels.get(left_keys[0], ""), color="tab:blue", fontsize=FONT_SMALL)
            drawn += 1
    if name == "reward":
        steps, means = series(records, "reward")
        _, stds = series(records, "reward_std")
        if steps and len(stds) == len(means):
            low = [m - s for m, s in zip(means, stds, strict=True)]
            high = [m + s for m, s in zip(means, stds, strict=True)]
            # a spread, not a range: it can pass the reward's own bounds (a unit-test reward
            # in [0, 1] with a batch std of 0.45 draws a band from -0.2 to 1.1)
            ax.fill_between(steps, low, high, alpha=0.2, label="± batch std (a spread)")
    if not drawn:
        ax.text(0.5, 0.5, "nothing logged yet", ha="center", va="center",
                transform=ax.transAxes, fontsize=FONT_SMALL, color="gray")
    whole_step_limits(ax)


def _say_zero(ax, records, left_keys, right_key) -> bool:
    """For a one-metric panel in :data:`ZERO_AT_EVERY_STEP` whose metric was 0 at every
    logged step: the sentence instead of a flat line (True), else nothing (False)."""
    if right_key is not None or len(left_keys) != 1 or left_keys[0] not in ZERO_AT_EVERY_STEP:
        return False
    steps, values = series(records, left_keys[0])
    if not steps or any(value != 0 for value in values):
        return False
    ax.text(0.5, 0.5, ZERO_AT_EVERY_STEP[left_keys[0]], ha="center", va="center",
            transform=ax.transAxes, fontsize=FONT_SMALL, color="gray")
    ax.set_yticks([])
    ax.set_xlim(min(steps) - 1, max(steps) + 1)
    return True


def sem_at(records: StepMetrics, key: str, steps: Sequence[int]) -> list[float] | None:
    """``<key>/sem`` at exactly ``steps`` (a held-out mean's standard errors), else None."""
    if not key.startswith("eval/"):
        return None
    sem_steps, sems = series(records, f"{key}/sem")
    return sems if sem_steps == list(steps) else None


def figure_png(fig, palette: bool = True) -> bytes:
    """The figure as PNG bytes.

    ``palette``: stored with 256 colours (fast octree quantization, no dithering): about a
    third of a full-colour PNG's size and the same picture for line plots, so a committed
    notebook with a dozen figures stays small.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    if not palette:
        return buffer.getvalue()
    from PIL import Image

    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    reduced = image.quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                             dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    reduced.save(buffer, format="png")
    return buffer.getvalue()


def save_curves(
    records: Sequence[dict[str, Any]],
    path: str | Path,
    *,
    title: str | None = None,
    targets: dict[str, float] | None = None,
) -> Path:
    """Plot ``records`` and write the PNG to ``path`` (e.g. ``<run>/curves.png``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(figure_png(plot_metrics(records, title=title, targets=targets)))
    return path


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, Colab), False in a script or plain IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class LivePlot:
    """Redraw the curves every ``every`` steps while a run trains.

    In a notebook one image is updated in place (``IPython.display``); otherwise, or also when
    ``path`` is given, the PNG at ``path`` is rewritten. Call it with each step's metrics (our
    loop does), or pass it to ``GRPOTrainer(callbacks=[plot])``: it answers TRL's ``on_log``
    and ignores the other ``TrainerCallback`` events.

    Args:
        every: redraw every N records (the last record is always drawn by :meth:`close`).
        path: a PNG to write (``curves.png``); None in a notebook means "only show it".
        title, targets: as in :func:`plot_metrics`.
        show: force (True) or forbid (False) notebook display; None detects a notebook.
        records: steps drawn before any :meth:`update` (a resumed run's earlier steps).
    """

    def __init__(
        self,
        every: int = 1,
        path: str | Path | None = None,
        *,
        title: str | None = None,
        targets: dict[str, float] | None = None,
        show: bool | None = None,
        records: StepMetrics = (),
    ):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.title, self.targets = every, title, targets
        self.path = None if path is None else Path(path)
        self.show = in_notebook() if show is None else show
        self.records: list[dict[str, Any]] = [dict(record) for record in records]
        self._handle = None
        self._drawn = 0

    def __call__(self, record: dict[str, Any]) -> None:
        self.update(record)

    def update(self, record: dict[str, Any]) -> None:
        """Add one step's metrics; redraw when ``every`` records have arrived since the last."""
        self.records.append(dict(record))
        if len(self.records) - self._drawn >= self.every:
            self.draw()

    def draw(self) -> None:
        """Redraw now: update the notebook image and/or write the PNG."""
        self._drawn = len(self.records)
        fig = plot_metrics(self.records, title=self.title, targets=self.targets)
        png = figure_png(fig)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(png)
        if self.show:
            from IPython.display import Image, display

            if self._handle is None:
                self._handle = display(Image(data=png), display_id=True)
            else:
                self._handle.update(Image(data=png))

    def close(self) -> None:
        """Draw whatever has not been drawn yet."""
        if self.records and self._drawn < len(self.records):
            self.draw()

    # --- transformers / TRL TrainerCallback protocol (duck-typed: no import needed) ---

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any):
        """TRL's per-log hook: ``logs`` holds the same metric names as our loop's records."""
        if logs and any(key in logs for _, keys, right in PANELS for key in [*keys, right]):
            self.update({"step": getattr(state, "global_step", len(self.records) + 1), **logs})
        return None

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any):
        self.close()
        return None

    def __getattr__(self, name: str):
        if name.startswith("on_"):  # every other TrainerCallback event: nothing to do
            return _ignore_event
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")


def _ignore_event(*args: Any, **kwargs: Any) -> None:
    return None


# --- reading a run: its curves with the findings marked, and runs side by side -------------

# the live plot's panels plus the two that reading a run needs: truncation and grad_norm
READING_PANELS: list[tuple[str, list[str], str | None]] = [
    ("reward", ["reward"], None),
    ("completion length", ["completions/mean_length"], "completions/mean_chars"),
    (CUT_TITLE, ["completions/clipped_ratio"], None),
    (ZERO_STD_TITLE, ["frac_reward_zero_std"], None),
    (METRIC_TITLES["grad_norm"], ["grad_norm"], None),
    ("entropy", ["entropy"], None),
    ("KL to the reference", ["kl"], None),
    (CLIP_TITLE, ["clip_ratio/region_mean"], None),
]
HELD_OUT_PANEL = "held-out evaluation"
# symptom -> the panel where its steps are shaded
SYMPTOM_PANELS = {
    "no signal": ZERO_STD_TITLE,
    "truncation": CUT_TITLE,
    "length gaming": "completion length",
    "hacking": HELD_OUT_PANEL,
    "collapse": "entropy",
    "KL blow-up": "KL to the reference",
}
COMPARE_KEYS = ("frac_reward_zero_std", "completions/clipped_ratio", "entropy",
                "completions/mean_length", "grad_norm", "kl")


def metric_title(key: str, width: int = 36) -> str:
    """A panel title for ``key``: what it means (``METRIC_TITLES``; a held-out mean is
    "held-out <fn>") with its name, wrapped between words at ``width`` characters."""
    text = f"held-out {key[5:]} ({key})" if key.startswith("eval/") else METRIC_TITLES.get(key, key)
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def panels_for(records: StepMetrics) -> list[tuple[str, list[str], str | None]]:
    """``READING_PANELS``, plus a panel of the held-out means (``eval/<fn>``, with their
    standard errors as bars) when the run has any."""
    evals = eval_mean_keys(records)
    return [*READING_PANELS, *([(HELD_OUT_PANEL, evals, None)] if evals else [])]


def plot_run(
    metrics: StepMetrics | RecordedRun | str | Path,
    diagnosis: Diagnosis | None = None,
    *,
    title: str | None = None,
    targets: dict[str, float] | None = None,
):
    """The run's curves (:func:`plot_metrics`, the live plot's code) with the steps of each
    flagged (red) or transient (orange) finding of ``diagnosis`` shaded in its panel.

    Returns a ``matplotlib.figure.Figure``.
    """
    if isinstance(metrics, (str, Path)):
        metrics = load_run(metrics)
    config = None
    if isinstance(metrics, RecordedRun):
        title = title or metrics.name
        config = metrics.config
        metrics = metrics.records
    records = list(metrics)
    fig = plot_metrics(records, title=title, targets=targets, panels=panels_for(records),
                       labels=held_out_labels(records, config))
    if diagnosis is not None:
        axes = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
        for finding in diagnosis:
            ax = axes.get(SYMPTOM_PANELS.get(finding.symptom, ""))
            if ax is None or not finding.steps or finding.status not in ("flagged", "transient"):
                continue
            color = "tab:red" if finding.flagged else "tab:orange"
            for start, end in _spans(finding.steps):
                ax.axvspan(start - 0.5, end + 0.5, color=color, alpha=0.15, linewidth=0)
            ax.set_title(f"{ax.get_title()}\n{finding.symptom}: {finding.status}",
                         fontsize=FONT_TITLE - 1, color=color)
    return fig


def held_out_labels(records: StepMetrics, config: Mapping[str, Any] | None = None
                    ) -> dict[str, str]:
    """Legend labels for the held-out means that say which one is the true score (a reward
    the run did not train on) and which the run trained on: ``{"eval/unit_test_reward":
    "unit_test_reward (true score)", ...}``. ``config``: the run's ``config.json``, which
    names the rewards trained on (else they are read from the metrics)."""
    trained = trained_rewards(records, dict(config) if config else None)
    try:
        true_score = find_true_score(records, trained)
    except ValueError:  # several candidates: name none of them the true score
        true_score = None
    labels = {}
    for key in eval_mean_keys(records):
        name = key.removeprefix("eval/")
        role = ("true score" if key == true_score else "trained on" if name in set(trained)
                else "not trained on")
        labels[key] = f"{name} ({role})"
    return labels


def _spans(steps: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive steps as ``(first, last)`` spans: ``[1, 2, 3, 7]`` -> ``[(1, 3), (7, 7)]``."""
    spans: list[tuple[int, int]] = []
    for step in sorted(steps):
        if spans and step == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], step)
        else:
            spans.append((step, step))
    return spans


def compare_runs(
    runs: Mapping[str, StepMetrics] | Sequence[RecordedRun],
    keys: Sequence[str] = COMPARE_KEYS,
    *,
    expected: Mapping[str, Mapping[str, float]] | None = None,
    window: int = 1,
    title: str | None = "recorded runs side by side",
):
    """Several runs' curves side by side: one panel per metric, one line (one colour) per run,
    one legend for the figure. Metrics no run logged get no panel.

    Args:
        runs: ``{label: per-step records}``, or recorded runs (labelled by their names).
        keys: the metrics to draw (TRL's names). Rewards are not in the default: each
            experiment has its own scale.
        expected: ``{metric: {label: value}}`` drawn as a dashed line in the run's colour
            (e.g. the predicted zero-std fraction of each k).
        window: a trailing moving average over this many logged values (1: raw values).
            With 1, a held-out mean (``eval/<fn>``) with its ``/sem`` logged gets a band of
            +-2 standard errors in the run's colour.

    Returns:
        a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if not isinstance(runs, Mapping):
        runs = {run.name: run.records for run in runs}
    expected = expected or {}
    keys = [key for key in keys if any(series(records, key)[0] for records in runs.values())]
    if not keys:
        raise ValueError("none of the runs logged any of the metrics asked for")
    fig = Figure(figsize=(4.2 * min(len(keys), 3), 3.0 * -(-len(keys) // 3)), dpi=DPI,
                 layout="constrained")
    axes = fig.subplots(-(-len(keys) // 3), min(len(keys), 3), squeeze=False).ravel()
    for ax, key in zip(axes, keys, strict=False):
        for index, (label, records) in enumerate(runs.items()):
            # ten colours, then the same ten dashed, then dotted: 30 runs stay apart
            colour, style = f"C{index % 10}", ("-", "--", ":")[index // 10 % 3]
            steps, values = series(records, key)
            if not steps:
                continue
            smooth = [sum(values[max(0, i - window + 1):i + 1]) / len(values[max(0, i - window + 1):i + 1])
                      for i in range(len(values))]
            ax.plot(steps, smooth, color=colour, linestyle=style, label=label)
            sems = sem_at(records, key, steps) if window == 1 else None
            if sems is not None:
                ax.fill_between(steps, [v - 2 * e for v, e in zip(values, sems, strict=True)],
                                [v + 2 * e for v, e in zip(values, sems, strict=True)],
                                color=colour, alpha=0.15, linewidth=0)
            if label in expected.get(key, {}):
                ax.axhline(expected[key][label], color=colour, linestyle="--", linewidth=1)
        ax.set_title(metric_title(key) + (f"\n{window}-step mean" if window > 1 else ""),
                     fontsize=FONT_TITLE)
        style_axis(ax)
        whole_step_limits(ax)
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    legend: dict[str, Any] = {}  # one entry per run, from whichever panel has its line
    for ax in axes[:len(keys)]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="outside lower center",
               ncols=min(len(legend), 4), fontsize=FONT_SMALL)
    if title:
        fig.suptitle(title)
    return fig


def plot_seed_changes(
    changes: Mapping[str, Sequence[float]],
    *,
    reference: str | None = None,
    margin: float | None = None,
    ylabel: str = "held-out change (last evaluation - step 0)",
    title: str | None = None,
):
    """Several setups' seeds side by side (notebook 08, "Is two enough?"): one column per
    setup, a dot per seed, the mean as a bar, and its 95 % Student's t interval
    (:func:`grpo_core.stats.seed_interval`) as a line. A setup with 2 seeds gets no line
    (its interval, 12.7 times the seeds' gap, says nothing) and says so; one with a single
    seed shows its dot. With ``reference`` and ``margin``, a band of ``reference``'s mean
    +- ``margin`` shows what "the same within the margin" would cover.

    Returns a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    if not changes or any(len(values) == 0 for values in changes.values()):
        raise ValueError("need at least one setup, each with at least one seed")
    if reference is not None and reference not in changes:
        raise ValueError(f"reference {reference!r} is not one of {list(changes)}")
    fig = Figure(figsize=(1.6 + 1.4 * len(changes), 3.4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    if reference is not None and margin is not None:
        centre = seed_interval(changes[reference]).mean
        ax.axhspan(centre - margin, centre + margin, color="0.85", linewidth=0,
                   label=f"{reference}'s mean +- {margin:g}")
    for x, values in enumerate(changes.values()):
        colour = f"C{x % 10}"
        # seeds spread sideways so that equal values stay visible
        offsets = [(i - (len(values) - 1) / 2) * 0.08 for i in range(len(values))]
        ax.plot([x + o for o in offsets], values, "o", color=colour, alpha=0.7, markersize=5)
        interval = seed_interval(values)
        ax.plot([x - 0.25, x + 0.25], [interval.mean] * 2, color=colour, linewidth=2.5)
        if interval.reason is None:
            ax.plot([x, x], [interval.low, interval.high], color=colour, linewidth=1.2)
        elif interval.n > 1:
            ax.annotate("2 seeds:\nno interval", (x, interval.mean), xytext=(0, -22),
                        textcoords="offset points", ha="center", fontsize=FONT_SMALL)
    ax.set_xticks(range(len(changes)), [f"{label}\n({len(v)} seed{'s' if len(v) > 1 else ''})"
                                        for label, v in changes.items()])
    ax.tick_params(labelsize=FONT_SMALL)
    ax.set_xlim(-0.6, len(changes) - 0.4)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set_ylabel(textwrap.fill(ylabel, 30), fontsize=FONT_SMALL)
    if reference is not None and margin is not None:
        ax.legend(fontsize=FONT_SMALL, loc="best")
    ax.set_title(title or "each seed (dots), mean (bar), 95 % t-interval (line)",
                 fontsize=FONT_TITLE)
    return fig


def plot_log_ratio_histograms(
    log_ratios: Mapping[str, Sequence[float]],
    *,
    cap: float | None = None,
    title: str = "learner - sampler, per completion token",
    xlabel: str = "log pi_learner(y_t) - log pi_sampler(y_t)  (nats)",
):
    """Notebook 13's picture of the sampler/learner mismatch: one histogram per precision plan
    of its tokens' log ratios (eq. 13.1), counts on a log scale so the rare large ones show,
    and with ``cap`` the band ``[-log cap, log cap]`` outside which a truncating correction
    changes a token's weight.

    Returns a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    if not log_ratios or any(len(values) == 0 for values in log_ratios.values()):
        raise ValueError("need at least one plan, each with at least one token")
    fig = Figure(figsize=(6.4, 3.2), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    widest = max(max(abs(v) for v in values) for values in log_ratios.values())
    edge = max(widest, math.log(cap) if cap else 0.0, 1e-6) * 1.05
    bins = [-edge + 2 * edge * i / 80 for i in range(81)]
    for index, (plan, values) in enumerate(log_ratios.items()):
        ax.hist(list(values), bins=bins, histtype="step", linewidth=1.5, color=f"C{index}",
                label=f"{plan} ({len(values)} tokens)")
    if cap:
        for side in (-1, 1):
            ax.axvline(side * math.log(cap), color="0.4", linestyle="--", linewidth=0.9)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel, fontsize=FONT_SMALL)
    ax.set_ylabel("tokens", fontsize=FONT_SMALL)
    ax.tick_params(labelsize=FONT_SMALL)
    ax.legend(fontsize=FONT_SMALL, loc="upper right")
    ax.set_title(title, fontsize=FONT_TITLE)
    return fig
