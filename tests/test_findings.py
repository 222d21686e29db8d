"""grpo_core.findings: a Finding and a Diagnosis, their text, and the one HTML renderer and
palette that a notebook's diagnosis table and the run explorer both use."""

from __future__ import annotations

import html

import pytest

from grpo_core.findings import (
    FLAGGED,
    NOT_MEASURED,
    OK,
    STATUS_COLOURS,
    STATUSES,
    TRANSIENT,
    Diagnosis,
    Finding,
    count_noun,
    diagnosis_html,
    finding_item,
    finding_row,
    format_steps,
    status_badge,
)

FLAG = Finding("hacking", FLAGGED, "reward vs eval/x", (3, 4, 5, 9), 0.4,
               "the proxy climbs <fast> & the true score falls", "fix the reward")
CLEAR = Finding("collapse", OK, "entropy", (), None, "entropy stays", "a higher temperature")


def test_a_finding_checks_its_status_and_prints_its_fix_only_when_in_trouble():
    with pytest.raises(ValueError, match="status must be one of"):
        Finding("hacking", "bad", "m")
    assert STATUSES == (FLAGGED, TRANSIENT, OK, NOT_MEASURED)
    assert FLAG.flagged and not CLEAR.flagged
    assert str(FLAG) == ("[FLAGGED] hacking: the proxy climbs <fast> & the true score falls"
                         "\n    fix: fix the reward")
    assert str(CLEAR) == "[OK] collapse: entropy stays"


def test_a_diagnosis_reads_by_symptom_and_says_which_exist():
    diagnosis = Diagnosis([FLAG, CLEAR], run="exp3", steps=1, notes=["a note"])
    assert diagnosis["hacking"] is FLAG and diagnosis[1] is CLEAR and len(diagnosis) == 2
    assert diagnosis.flagged == [FLAG] and diagnosis.symptoms == ["hacking"]
    with pytest.raises(KeyError, match=r"'truncation'; symptoms: \['hacking', 'collapse'\]"):
        diagnosis["truncation"]
    assert str(diagnosis).splitlines()[:2] == ["exp3: 1 step, flagged: hacking", "a note"]
    assert diagnosis.to_rows()[0]["steps"] == "3-5, 9" and diagnosis.to_rows()[1]["fix"] == ""


def test_steps_and_counts_print_compactly():
    assert format_steps([9, 1, 2, 3, 7, 3]) == "1-3, 7, 9" and format_steps([]) == ""
    assert format_steps([9, 1, 2, 3, 7, 10]) == "1-3, 7, 9-10"
    assert count_noun(1) == "1 step" and count_noun(3, "run") == "3 runs"


def test_one_palette_colours_the_table_and_the_explorers_list():
    for status, (colour, background) in STATUS_COLOURS.items():
        badge = status_badge(status)
        assert f"color:{colour};background:{background}" in badge
        assert status.upper() in badge
    row = finding_row(FLAG)
    assert status_badge(FLAGGED) in row and "<b>fix:</b> fix the reward" in row
    assert html.escape(FLAG.evidence) in row and "<fast>" not in row  # escaped, never raw
    assert "fix:" not in finding_row(CLEAR)
    item = finding_item(FLAG)
    assert f'style="color:{STATUS_COLOURS[FLAGGED][0]}"' in item
    assert "(flagged, steps 3-5, 9)" in item and "<fast>" not in item
    transient = Finding("truncation", TRANSIENT, "completions/clipped_ratio", (1,), None, "early")
    assert STATUS_COLOURS[TRANSIENT][0] in finding_item(transient)


def test_a_diagnosis_shows_as_its_html_table_in_a_notebook():
    diagnosis = Diagnosis([FLAG, CLEAR], run="exp<3>", steps=30)
    page = diagnosis._repr_html_()
    assert page == diagnosis_html(diagnosis)
    assert "<b>exp&lt;3&gt;</b>: 30 steps, flagged: <b>hacking</b>" in page
    assert page.count('<tr class="grpo-finding">') == 2
