"""The group baseline, to move by hand (notebook 03): k rewards -> mean, std, advantages, and
whether the group gives any learning signal (lecture: "The reward must create variation").

:func:`group_summary` is a pure function over the update math (``grpo_core.advantages``);
:class:`GroupVariationView` wires it to sliders, presets and a text box, and
``grpo_core.widgets.render`` draws what it shows.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import torch

from grpo_core.advantages import SCALES, flat_groups, group_advantages
from grpo_core.widgets._base import _ipywidgets, _View, wrapping_row
from grpo_core.widgets.render import GroupSummary, format_number, group_summary_html

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
    no_signal = bool(flat_groups(batch[:k], k)[0])  # equal rewards: every advantage is 0
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
            f"{NO_SIGNAL_MESSAGE}: every reward is {format_number(rewards[0], sign=False)}, so every "
            "attempt sits on the mean, every advantage is exactly 0 and the policy gradient is 0."
        )
    up = sum(a > 0 for a in advantages)
    down = sum(a < 0 for a in advantages)
    level = len(advantages) - up - down
    return (
        f"signal: {_attempts(up)} {'beats' if up == 1 else 'beat'} the mean and "
        f"{'gets' if up == 1 else 'get'} pushed up, {down} {'falls' if down == 1 else 'fall'} "
        f"short and {'gets' if down == 1 else 'get'} pushed down, {level} "
        f"{'sits' if level == 1 else 'sit'} on the mean."
    )


def _attempts(count: int) -> str:
    """``1 attempt``, ``2 attempts``: the message reads as a sentence, not "attempt(s)"."""
    return f"{count} attempt" if count == 1 else f"{count} attempts"


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


class GroupVariationView(_View):
    """The group-variation widget: k reward sliders (or a typed group) -> mean, std,
    advantages, a bar chart, and the verdict.

    A view over :func:`group_summary`. Presets: ``too hard`` (all 0), ``too easy`` (all 2),
    ``usable`` (0, 1, 1, 2). Toggles: the std convention (N-1 or N) and ``scale`` (group,
    batch, none); with ``batch`` the batch is this group plus ``other_groups`` (repeated or cut
    to k). Controls: ``sliders``, ``preset``, ``text``, ``scale``, ``std_convention``; outputs:
    ``output`` and ``error`` (HTML widgets) and ``summary`` (the latest :class:`GroupSummary`).
    """

    def __init__(self, k: int, start: Sequence[float], reward_range: tuple[float, float],
                 step: float, others: list[list[float]]):
        w = _ipywidgets()
        super().__init__(controls=self._controls(w, start, reward_range, step))
        self.k, self.reward_range, self.others = k, reward_range, others
        self._busy = False  # True while the view sets its own controls
        for slider in self.sliders:
            slider.observe(self.refresh, names="value")
        self.scale.observe(self.refresh, names="value")
        self.std_convention.observe(self.refresh, names="value")
        self.preset.observe(self.on_preset, names="value")
        self.text.observe(self.on_text, names="value")
        self.refresh()
        self.widget = w.VBox([
            wrapping_row(w, [self.preset, self.text]),
            wrapping_row(w, [w.VBox(self.sliders), w.VBox([self.scale, self.std_convention])]),
            self.error,
            self.output,
        ])

    @staticmethod
    def _controls(w: Any, start: Sequence[float], reward_range: tuple[float, float],
                  step: float) -> dict[str, Any]:
        sliders = [
            w.FloatSlider(value=float(r), min=reward_range[0], max=reward_range[1], step=step,
                          description=f"r{i}", readout_format=".1f", continuous_update=True,
                          layout=w.Layout(width="320px"))
            for i, r in enumerate(start)
        ]
        return {
            "sliders": sliders,
            "preset": w.Dropdown(options=list(PRESET_NAMES), value="custom", description="preset"),
            "text": w.Text(value=", ".join(f"{r:g}" for r in start), description="or type",
                           placeholder="e.g. 0, 1, 1, 2", continuous_update=False,
                           layout=w.Layout(width="320px")),
            "scale": w.ToggleButtons(options=list(SCALES), value="group", description="scale"),
            "std_convention": w.ToggleButtons(
                options=[("N-1 (torch, TRL)", "sample"), ("N (numpy)", "population")],
                value="sample", description="std"),
            "output": w.HTML(),
            "error": w.HTML(),
        }

    def refresh(self, _change: Any = None) -> None:
        """Recompute the summary from the sliders and toggles; keep the text box, the preset
        and the error message in step with them."""
        values = [s.value for s in self.sliders]
        self.summary = group_summary(values, scale=self.scale.value,
                                     std_convention=self.std_convention.value,
                                     other_groups=self.others)
        self.output.value = group_summary_html(self.summary)
        if not self._busy:
            self._busy = True
            try:
                self.error.value = ""  # the sliders hold valid values now
                self.text.value = ", ".join(f"{v:g}" for v in values)
                matching = [n for n in PRESET_NAMES[1:] if preset_rewards(n, self.k) == values]
                self.preset.value = matching[0] if matching else "custom"
            finally:
                self._busy = False

    def set_values(self, values: Sequence[float]) -> None:
        """Move every slider at once, then refresh once."""
        self._busy = True
        try:
            for slider, value in zip(self.sliders, values, strict=True):
                slider.value = value
        finally:
            self._busy = False
        self.refresh()

    def on_preset(self, change: Any) -> None:
        if self._busy or change["new"] == "custom":
            return
        self.set_values(preset_rewards(change["new"], self.k))

    def on_text(self, change: Any) -> None:
        if self._busy:
            return
        try:
            values = self.check_typed(change["new"])
        except ValueError as problem:
            self.error.value = f'<span style="color:#b00020">{html.escape(str(problem))}</span>'
            return
        self.set_values(values)

    def check_typed(self, text: str) -> list[float]:
        """The typed rewards, or ``ValueError`` saying what is wrong with them."""
        values = parse_rewards(text)
        if len(values) != self.k:
            raise ValueError(f"type exactly k = {self.k} rewards, got {len(values)}")
        low, high = self.reward_range
        if not all(low <= v <= high for v in values):
            raise ValueError(f"each reward must lie in [{low:g}, {high:g}]")
        return values


def group_variation_widget(
    k: int = 4,
    rewards: Sequence[float] | None = None,
    *,
    reward_range: tuple[float, float] = (0.0, 3.0),
    step: float = 0.5,
    other_groups: Sequence[Sequence[float]] = ((0.0, 0.0, 0.0, 3.0),),
) -> GroupVariationView:
    """The group-variation widget (:class:`GroupVariationView`) for k rewards, starting at
    ``rewards`` (default: the ``usable`` preset)."""
    _ipywidgets()  # a clear ImportError before anything else
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    start = list(rewards) if rewards is not None else preset_rewards("usable", k)
    if len(start) != k:
        raise ValueError(f"rewards must have k = {k} values")
    others = [(list(g) * math.ceil(k / len(g)))[:k] for g in other_groups]
    return GroupVariationView(k, start, reward_range, step, others)
