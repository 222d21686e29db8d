"""Training curves from per-step metrics: reward, completion length, zero-std groups, KL, clip.

Reads metric dicts (TRL's names, COURSE.md section 3) and nothing else, so the same plot serves
our loop (``metrics.jsonl``, or a live callback) and TRL's ``GRPOTrainer`` (its ``on_log``).

- :func:`plot_metrics` draws a figure from a list of records;
- :func:`save_curves` writes it to a PNG (``curves.png``);
- :class:`LivePlot` redraws every N steps: in a notebook it updates one image in place,
  elsewhere it rewrites a PNG. It is a callback for ``grpo_core.loop.train`` (called with each
  step's dict) and duck-types a transformers ``TrainerCallback`` for TRL (``on_log``).

matplotlib is used through its object API (``Figure``, no pyplot), so nothing here depends on
the backend, opens a window, or leaks figures.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# (title, metric keys on the left axis, metric key on a right axis or None)
PANELS: list[tuple[str, list[str], str | None]] = [
    ("reward", ["reward"], None),
    ("completion length", ["completions/mean_length"], "completions/mean_chars"),
    ("frac_reward_zero_std", ["frac_reward_zero_std"], None),
    ("KL to the reference", ["kl"], None),
    ("clip ratio", ["clip_ratio/region_mean"], None),
    ("entropy", ["entropy"], None),
]
LABELS = {
    "completions/mean_length": "tokens",
    "completions/mean_chars": "characters",
    "clip_ratio/region_mean": "region",
}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file, in order."""
    text = Path(path).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _series(records: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    steps, values = [], []
    for index, record in enumerate(records, start=1):
        value = record.get(key)
        if isinstance(value, (int, float)) and value == value:  # skips None and NaN
            steps.append(record.get("step", index))
            values.append(value)
    return steps, values


def plot_metrics(
    records: Sequence[dict[str, Any]],
    *,
    title: str | None = None,
    targets: dict[str, float] | None = None,
    panels: Sequence[tuple[str, list[str], str | None]] = PANELS,
):
    """A grid of curves, one panel per metric group, with the step on the x axis.

    Args:
        records: per-step metric dicts (``step`` plus TRL's names); missing keys are skipped.
        title: a figure title.
        targets: ``{metric: value}`` drawn as dashed horizontal lines (e.g. 20 characters).
        panels: ``(title, left keys, right key)`` triples; ``PANELS`` by default. A panel
            whose metrics never appear (``kl`` when beta = 0) says so instead of plotting.

    Returns:
        a ``matplotlib.figure.Figure``.
    """
    from matplotlib.figure import Figure

    targets = targets or {}
    columns = 3
    rows = -(-len(panels) // columns)
    fig = Figure(figsize=(4.2 * columns, 2.8 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (name, left_keys, right_key) in zip(axes, panels, strict=False):
        _draw_panel(ax, records, name, left_keys, right_key, targets)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return fig


def _draw_panel(ax, records, name, left_keys, right_key, targets) -> None:
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("step", fontsize=8)
    ax.tick_params(labelsize=8)
    drawn = False
    for key in left_keys:
        steps, values = _series(records, key)
        if steps:
            ax.plot(steps, values, marker=".", label=LABELS.get(key, key))
            drawn = True
        if key in targets:
            ax.axhline(targets[key], linestyle="--", color="gray", linewidth=1)
    if right_key is not None:
        steps, values = _series(records, right_key)
        if steps:
            twin = ax.twinx()
            twin.plot(steps, values, color="tab:orange", marker=".", label=LABELS.get(right_key))
            twin.set_ylabel(LABELS.get(right_key, right_key), color="tab:orange", fontsize=8)
            twin.tick_params(labelsize=8)
            if right_key in targets:
                twin.axhline(targets[right_key], linestyle="--", color="tab:orange", linewidth=1)
            ax.set_ylabel(LABELS.get(left_keys[0], ""), color="tab:blue", fontsize=8)
            drawn = True
    if name == "reward":
        steps, means = _series(records, "reward")
        _, stds = _series(records, "reward_std")
        if steps and len(stds) == len(means):
            low = [m - s for m, s in zip(means, stds, strict=True)]
            high = [m + s for m, s in zip(means, stds, strict=True)]
            ax.fill_between(steps, low, high, alpha=0.2, label="± batch std")
    if not drawn:
        ax.text(0.5, 0.5, "not logged\n(e.g. kl needs beta > 0)", ha="center", va="center",
                transform=ax.transAxes, fontsize=8, color="gray")


def figure_png(fig) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
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
    """

    def __init__(
        self,
        every: int = 1,
        path: str | Path | None = None,
        *,
        title: str | None = None,
        targets: dict[str, float] | None = None,
        show: bool | None = None,
    ):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.title, self.targets = every, title, targets
        self.path = None if path is None else Path(path)
        self.show = in_notebook() if show is None else show
        self.records: list[dict[str, Any]] = []
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
