"""``diagnose``'s findings as HTML for a notebook: one row per symptom, coloured by status.

In a notebook a :class:`~grpo_core.diagnosis.Diagnosis` shows this (its ``_repr_html_``), so
long evidence wraps between words at the page's width instead of as fixed-width text cut
mid-word; ``print(diagnosis)`` and a terminal keep the plain text. Pure string building from
the findings: no pandas, no matplotlib.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grpo_core.diagnosis import Diagnosis, Finding

# status -> (text colour, background): red flags, orange passing trouble, green clear, grey unknown
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "flagged": ("#b71c1c", "#ffebee"),
    "transient": ("#e65100", "#fff3e0"),
    "ok": ("#1b5e20", "#e8f5e9"),
    "not measured": ("#616161", "#f5f5f5"),
}
CELL = "padding:.3em .6em;vertical-align:top;text-align:left;border-bottom:1px solid #ddd"


def status_badge(status: str) -> str:
    """The status as a coloured label, e.g. ``FLAGGED`` in red on pink."""
    colour, background = STATUS_COLOURS.get(status, ("#000", "#fff"))
    return (f'<span class="grpo-status grpo-status-{status.replace(" ", "-")}" '
            f'style="color:{colour};background:{background};font-weight:bold;'
            f'padding:0 .4em;border-radius:3px;white-space:nowrap">{html.escape(status.upper())}'
            "</span>")


def finding_row(finding: Finding) -> str:
    """One table row: symptom, status, steps, evidence and (when there is trouble) the fix."""
    from grpo_core.diagnosis import format_steps

    fix = ""
    if finding.status in ("flagged", "transient") and finding.fix:
        fix = f'<div style="margin-top:.2em"><b>fix:</b> {html.escape(finding.fix)}</div>'
    return (f'<tr class="grpo-finding"><td style="{CELL};white-space:nowrap">'
            f"<b>{html.escape(finding.symptom)}</b></td>"
            f'<td style="{CELL}">{status_badge(finding.status)}</td>'
            f'<td style="{CELL};white-space:nowrap">{html.escape(format_steps(finding.steps))}</td>'
            f'<td style="{CELL}">{html.escape(finding.evidence)}{fix}</td></tr>')


def diagnosis_html(diagnosis: Diagnosis) -> str:
    """The whole diagnosis: a heading (run, steps, what is flagged), its notes, the table."""
    from grpo_core.diagnosis import _count

    flagged = ", ".join(diagnosis.symptoms) or "nothing"
    notes = "".join(f'<div style="color:#555">{html.escape(note)}</div>'
                    for note in diagnosis.notes)
    header = "".join(f'<th style="{CELL}">{name}</th>'
                     for name in ("symptom", "status", "steps", "evidence"))
    rows = "".join(finding_row(finding) for finding in diagnosis)
    return (f'<div class="grpo-diagnosis"><div><b>{html.escape(diagnosis.run or "run")}</b>: '
            f"{html.escape(_count(diagnosis.steps))}, flagged: <b>{html.escape(flagged)}</b>"
            f'</div>{notes}<table style="border-collapse:collapse;margin-top:.3em">'
            f"<thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table></div>")
