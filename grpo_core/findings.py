"""What ``diagnose`` finds, and how it is shown: :class:`Finding` (one symptom's verdict),
:class:`Diagnosis` (a run's findings), their text and their HTML.

One renderer and one palette for a finding wherever it appears: a :class:`Diagnosis` in a
notebook (its ``_repr_html_``: a table whose long evidence wraps between words at the page's
width instead of as fixed-width text cut mid-word; ``print`` keeps the plain text) and the
findings at one step of the run explorer (``grpo_core.widgets.explorer``). Pure string
building from the findings: no pandas (but in ``to_table``), no matplotlib, nothing from the
rest of the package.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

FLAGGED, TRANSIENT, OK, NOT_MEASURED = "flagged", "transient", "ok", "not measured"
STATUSES = (FLAGGED, TRANSIENT, OK, NOT_MEASURED)

# status -> (text colour, background): red flags, orange passing trouble, green clear, grey unknown
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    FLAGGED: ("#b71c1c", "#ffebee"),
    TRANSIENT: ("#e65100", "#fff3e0"),
    OK: ("#1b5e20", "#e8f5e9"),
    NOT_MEASURED: ("#616161", "#f5f5f5"),
}
CELL = "padding:.3em .6em;vertical-align:top;text-align:left;border-bottom:1px solid #ddd"


@dataclass(frozen=True)
class Finding:
    """One symptom's verdict on one run.

    Attributes:
        symptom: a key of ``grpo_core.diagnosis.SYMPTOMS``.
        status: ``"flagged"``, ``"transient"`` (seen early, gone by the end), ``"ok"`` or
            ``"not measured"`` (the metric was not logged, or too few steps).
        metric: the metric(s) read.
        steps: the steps where the symptom shows (empty when it does not).
        value: the telling number (a peak, a last-fifth mean...), or None.
        evidence: one sentence with the numbers.
        fix: the usual fix (``grpo_core.diagnosis.SYMPTOMS``).
    """

    symptom: str
    status: str
    metric: str
    steps: tuple[int, ...] = ()
    value: float | None = None
    evidence: str = ""
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def flagged(self) -> bool:
        return self.status == FLAGGED

    def __str__(self) -> str:
        line = f"[{self.status.upper()}] {self.symptom}: {self.evidence}"
        return line + (f"\n    fix: {self.fix}" if self.status in (FLAGGED, TRANSIENT) else "")


@dataclass
class Diagnosis:
    """The findings of ``grpo_core.diagnosis.diagnose``, one per symptom, in ``SYMPTOMS`` order.

    ``diagnosis["hacking"]`` is one finding, ``diagnosis.flagged`` the flagged ones,
    ``diagnosis.to_table()`` a pandas DataFrame for a notebook. ``steps`` counts the training
    steps read (a ``"step": 0`` evaluation record is not one).
    """

    findings: list[Finding]
    run: str = ""
    steps: int = 0
    notes: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __getitem__(self, symptom: str | int) -> Finding:
        if isinstance(symptom, int):
            return self.findings[symptom]
        for finding in self.findings:
            if finding.symptom == symptom:
                return finding
        raise KeyError(f"no finding for {symptom!r}; symptoms: "
                       f"{[finding.symptom for finding in self.findings]}")

    @property
    def flagged(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.flagged]

    @property
    def symptoms(self) -> list[str]:
        """The flagged symptoms' names."""
        return [finding.symptom for finding in self.flagged]

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per finding (``steps`` as text, e.g. ``"1-4, 9"``)."""
        return [{"run": self.run, "symptom": f.symptom, "status": f.status, "metric": f.metric,
                 "steps": format_steps(f.steps), "value": f.value, "evidence": f.evidence,
                 "fix": f.fix if f.status in (FLAGGED, TRANSIENT) else ""}
                for f in self.findings]

    def to_table(self):
        """The findings as a ``pandas.DataFrame``, one row per symptom."""
        import pandas as pd

        return pd.DataFrame(self.to_rows())

    def __str__(self) -> str:
        flagged = ", ".join(self.symptoms) or "nothing"
        head = f"{self.run or 'run'}: {count_noun(self.steps)}, flagged: {flagged}"
        return "\n".join([head, *self.notes, *(str(finding) for finding in self.findings)])

    def __repr__(self) -> str:
        return f"Diagnosis(run={self.run!r}, steps={self.steps}, flagged={self.symptoms})"

    def _repr_html_(self) -> str:
        """In a notebook: a table coloured by status (:func:`diagnosis_html`)."""
        return diagnosis_html(self)


def count_noun(n: int, noun: str = "step") -> str:
    """``1`` -> ``"1 step"``, ``3`` -> ``"3 steps"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def format_steps(steps: Sequence[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` -> ``"1-3, 7, 9-10"``."""
    parts: list[str] = []
    ordered = sorted(set(steps))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def _span(pair: tuple[int, int]) -> str:
    return f"step {pair[0]}" if pair[0] == pair[1] else f"steps {pair[0]}-{pair[1]}"


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}"


# ----------------------------------------------------------------------------- HTML


def status_badge(status: str) -> str:
    """The status as a coloured label, e.g. ``FLAGGED`` in red on pink."""
    colour, background = STATUS_COLOURS.get(status, ("#000", "#fff"))
    return (f'<span class="grpo-status grpo-status-{status.replace(" ", "-")}" '
            f'style="color:{colour};background:{background};font-weight:bold;'
            f'padding:0 .4em;border-radius:3px;white-space:nowrap">{html.escape(status.upper())}'
            "</span>")


def _fix_html(finding: Finding) -> str:
    if finding.status in (FLAGGED, TRANSIENT) and finding.fix:
        return f'<div style="margin-top:.2em"><b>fix:</b> {html.escape(finding.fix)}</div>'
    return ""


def finding_row(finding: Finding) -> str:
    """One table row: symptom, status, steps, evidence and (when there is trouble) the fix."""
    return (f'<tr class="grpo-finding"><td style="{CELL};white-space:nowrap">'
            f"<b>{html.escape(finding.symptom)}</b></td>"
            f'<td style="{CELL}">{status_badge(finding.status)}</td>'
            f'<td style="{CELL};white-space:nowrap">{html.escape(format_steps(finding.steps))}</td>'
            f'<td style="{CELL}">{html.escape(finding.evidence)}{_fix_html(finding)}</td></tr>')


def finding_item(finding: Finding) -> str:
    """One list item, for a narrow panel (the run explorer): the symptom, its status and
    steps, and the evidence, in the status's colour."""
    colour = STATUS_COLOURS.get(finding.status, ("#000", "#fff"))[0]
    return (f'<li class="grpo-finding" style="color:{colour}"><b>{html.escape(finding.symptom)}'
            f"</b> ({html.escape(finding.status)}, steps "
            f"{html.escape(format_steps(finding.steps))}): {html.escape(finding.evidence)}</li>")


def diagnosis_html(diagnosis: Diagnosis) -> str:
    """The whole diagnosis: a heading (run, steps, what is flagged), its notes, the table."""
    flagged = ", ".join(diagnosis.symptoms) or "nothing"
    notes = "".join(f'<div style="color:#555">{html.escape(note)}</div>'
                    for note in diagnosis.notes)
    header = "".join(f'<th style="{CELL}">{name}</th>'
                     for name in ("symptom", "status", "steps", "evidence"))
    rows = "".join(finding_row(finding) for finding in diagnosis)
    return (f'<div class="grpo-diagnosis"><div><b>{html.escape(diagnosis.run or "run")}</b>: '
            f"{html.escape(count_noun(diagnosis.steps))}, flagged: <b>{html.escape(flagged)}</b>"
            f'</div>{notes}<table style="border-collapse:collapse;margin-top:.3em">'
            f"<thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table></div>")
