"""HTML and SVG for the group-variation widget: what it shows, apart from how it is wired.

Pure string building from a :class:`GroupSummary` (what ``grpo_core.widgets.group`` computes),
so a committed notebook, a test or a static page can show the same picture without a kernel.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class GroupSummary:
    """What the group-variation widget shows, computed by ``grpo_core.widgets.group.group_summary``.

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


def format_number(value: float, sign: bool = True) -> str:
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
        f'<td class="grpo-adv" style="padding:0 .6em;text-align:right">{format_number(a)}</td>'
        for a in summary.advantages
    )
    rewards = "".join(
        f'<td style="padding:0 .6em;text-align:right">{format_number(r, sign=False)}</td>'
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
            + ", ".join(format_number(r, sign=False) for r in summary.batch)
            + "</div>"
        )
    return (
        '<div class="grpo-group" style="font-family:monospace">'
        f'<div>mean <b class="grpo-mean">{format_number(summary.mean, sign=False)}</b> &nbsp; '
        f'{std_label} <b class="grpo-std">{format_number(std_value, sign=False)}</b></div>{batch}'
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
        f"rewards (dashed: mean {format_number(summary.mean, sign=False)})",
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
