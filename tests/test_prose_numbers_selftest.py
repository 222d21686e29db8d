"""The prose-number checker (``tools/prose_numbers.py``) catches what it is there to catch.

The main test: in scratch copies of the course's notebooks and docs, one digit of each of a
fixed sample of prose numbers that the checker accepts today (printed by a cell of the same
section, or recorded in a file the paragraph names) is changed, and the checker must report
each changed number. A change that happens to give another number the same section prints is
not an error of the checker; those are counted, and must stay under a quarter (they were 6 of
40 when this test was written: sections that print tables of steps, lengths and rewards show
many integers and one-decimal numbers).
"""

from __future__ import annotations

import random
import subprocess

import nbformat
import pytest

from tests.test_prose_numbers import PENDING_REBUILD, QUOTED
from tools.prose_numbers import (
    ROOT,
    Quote,
    Section,
    check,
    check_markdown,
    check_notebook,
    check_sections,
    claims,
    document_id,
    documents,
    mask,
    matches,
    printed_numbers,
    without_comments,
)

ENOUGH = 60  # printed results in the prose to change, at the least
SEED = 45


def _accepted(kinds):
    """(path, where, Number) for every prose number accepted in one of these ways."""
    found = []
    for path in documents():
        name = document_id(path)
        if name in PENDING_REBUILD or name == "START_HERE":
            continue
        report = check(path, QUOTED.get(name, []))
        for kind in kinds:
            found += [(path, where, number) for _section, where, number in
                      report.accepted.get(kind, [])]
    return found


def _change_one_digit(text: str, rng: random.Random) -> str:
    positions = [i for i, c in enumerate(text) if c.isdigit()
                 and not (i == 0 and len(text) > 1 and text[1:2].isdigit())]  # no leading 0s
    i = rng.choice(positions)
    choices = [d for d in "0123456789" if d != text[i] and not (d == "0" and i == 0
                                                                and text[1:2].isdigit())]
    return text[:i] + rng.choice(choices) + text[i + 1:]


def _is_result(number) -> bool:
    """A decimal, a percentage or an integer of 10 or more. Almost every section prints some
    integers 0-9 (counts, indices, table rows), so a changed small integer is often another one
    the section prints: those are sampled apart (``test_small_integers_...``)."""
    return number.decimals != 0 or number.percent or number.value >= 10


def _mutate(sample, rng, tmp_path):
    """Change one digit of each sampled number in a scratch copy; returns (caught, collisions,
    missed): collisions are changes the checker accepts because the section shows the new
    number too, missed ones it accepts for no such reason (a checker error)."""
    caught, collisions, missed = 0, [], []
    for path, where, number in sample:
        name = document_id(path)
        written = (nbformat.read(path, as_version=4).cells[int(where.split()[1])].source
                   if path.suffix == ".ipynb" else path.read_text())
        old = written[number.start:number.end]
        new = _change_one_digit(old, rng)
        changed = written[:number.start] + new + written[number.end:]
        if path.suffix == ".ipynb":
            notebook = nbformat.read(path, as_version=4)
            notebook.cells[int(where.split()[1])].source = changed
            copy = tmp_path / path.name
            nbformat.write(notebook, copy)
            report = check_notebook(copy, QUOTED.get(name, []))
        else:
            report = check_markdown(path, QUOTED.get(name, []), text=changed)
        if any(p.where == where and p.start == number.start for p in report.problems):
            caught += 1
            continue
        how = [kind for kind, found in report.accepted.items()
               for _s, w, n in found if w == where and n.start == number.start]
        (collisions if how else missed).append(f"{name} {where}: {old!r} -> {new!r} ({how})")
    return caught, collisions, missed


def test_a_one_digit_change_of_a_printed_result_is_reported(tmp_path, record_property):
    """Every printed result in the prose (not a sample: the count drifted with each rebuild),
    one digit changed at a time."""
    rng = random.Random(SEED)
    candidates = [c for c in _accepted(("printed",)) if _is_result(c[2])]
    assert len(candidates) >= ENOUGH
    caught, collisions, missed = _mutate(candidates, rng, tmp_path)
    summary = (f"prose-number self-test: {caught} of {len(candidates)} one-digit changes of "
               f"printed results caught; {len(collisions)} gave another number the section "
               f"prints: {collisions}")
    print("\n" + summary)
    record_property("prose_number_selftest", summary)
    assert not missed, missed
    assert caught + len(collisions) == len(candidates)
    # measured: 26 of 108 (seed 45); sections that print tables of steps, lengths and rewards
    # show many integers and one-decimal numbers, so a changed digit often gives one of them.
    # A ratchet: more collisions means the matching got looser.
    assert len(collisions) <= len(candidates) // 3, summary


def test_small_integers_are_checked_but_often_collide(tmp_path, record_property):
    rng = random.Random(SEED)
    candidates = [c for c in _accepted(("printed",)) if not _is_result(c[2])]
    sample = rng.sample(candidates, min(20, len(candidates)))
    caught, collisions, missed = _mutate(sample, rng, tmp_path)
    summary = (f"prose-number self-test, integers 0-9: {caught} of {len(sample)} one-digit "
               f"changes caught, {len(collisions)} gave another integer the section prints")
    print("\n" + summary)
    record_property("prose_number_selftest_small", summary)
    assert not missed, missed


# ---------------------------------------------------------------------------------------------
# Hand-made inputs


def _section(heading, markdown, printed="", code=""):
    section = Section(heading, printed=printed, code=code)
    section.prose.append(("cell 0", markdown, 0))
    return section


def test_a_number_printed_only_in_another_section_is_reported():
    sections = [_section("1. One", "The run ends at 0.357.", printed="reward 0.412"),
                _section("2. Two", "Here it is 0.412.", printed="reward 0.357")]
    report = check_sections("toy", sections, files=False)
    assert [p.number for p in report.problems] == ["0.357", "0.412"]


def test_a_number_in_a_code_comment_is_not_a_value_the_code_states():
    code = "run(steps=40)  # notebook 10 says why\nlabel = '# 7 is in a string'\n"
    report = check_sections("toy", [_section("1", "It takes 40 steps; 10 of them mixed; 7 left.",
                                             code=code)], files=False)
    assert [p.number for p in report.problems] == ["10"]
    assert without_comments(code) == "run(steps=40)  \nlabel = '# 7 is in a string'\n"
    unfinished = 'x = 1  # 3\ntext = """not closed\n'
    assert without_comments(unfinished) == unfinished


def test_a_quoted_entry_that_matches_nothing_is_stale():
    quote = Quote("0.5", "at temperature 0.5", "example", "a setting")
    report = check_sections("toy", [_section("1", "The teacher runs at temperature 0.7.")],
                            [quote], files=False)
    assert {p.section for p in report.problems} == {"1", "QUOTED"}
    stale = [p for p in report.problems if p.section == "QUOTED"]
    assert "stale" in stale[0].context


def test_a_quoted_source_that_does_not_hold_the_number_is_reported():
    sections = [_section("1", "The group size is 8 here, and the rate 0.3.")]
    quotes = [Quote("8", "group size is 8", "setting",
                    "grpo_core.profiles._PROFILES['cpu'].prompts_per_step"),
              Quote("0.3", "the rate 0.3", "link", "https://example.org/rate")]
    report = check_sections("toy", sections, quotes, files=False)
    assert [p.number for p in report.problems] == ["8", "0.3"]
    assert all("quoted source fails" in p.context for p in report.problems)


def test_a_quoted_setting_is_read_from_the_code():
    from grpo_core.profiles import _PROFILES

    size = _PROFILES["cpu"].group_size
    sections = [_section("1", f"Groups of {size} completions.")]
    quotes = [Quote(str(size), f"Groups of {size}", "setting",
                    "grpo_core.profiles._PROFILES['cpu'].group_size")]
    assert not check_sections("toy", sections, quotes, files=False).problems


def test_numbers_match_at_their_boundaries_only():
    def shown(prose, output):
        return any(matches(claims(prose)[0], n) for n in printed_numbers(output))

    assert not shown("0.15", "0.154 and 0.1549")
    assert shown("0.15", "mean 0.150") and not shown("0.15", "mean 0.152")  # no rounding
    assert not shown("3", "13 steps, 3.5 and exp3")
    assert shown("3", "(3 steps)")
    assert shown("62 %", "62%") and shown("62 %", "62 %") and shown("62 %", "0.615")
    assert shown("62 %", "0.62") and not shown("62 %", "62") and not shown("62 %", "0.6")
    assert shown("0.06", "change -0.060") and not shown("0.060", "0.06")
    assert shown("1,000", "1000 rows") and shown("49 152", "vocab 49152")


def test_structural_numbers_formulas_and_code_are_not_claims():
    markdown = ("## 3. Section\n\nThe run ends at 0.357 ± 0.031, 12 % cut; see (8.4), eq. 8.2, "
                "§7, notebook 04, sections 1-3 and step 20, `lr 2e-5`, $p = 0.22$, "
                "[x 0.9](a/1.5.html), Qwen3-0.6B in float32 (torch 2.13.0, TRL 1.16, 2024), "
                "x − 1, 1/k, 10⁻⁴.\n1. a list item\n")
    assert [n.text for n in claims(markdown)] == ["0.357", "0.031", "12%"]
    assert mask("abc") == "abc" and len(mask(markdown)) == len(markdown)


@pytest.mark.parametrize("kind", ["file", "lecture"])
def test_file_and_lecture_quotes_need_the_number_in_their_source(kind):
    source = "pyproject.toml" if kind == "file" else "the lecture says 0.22"
    good = Quote("0.22" if kind == "lecture" else "3.10", "x", kind, source)
    bad = Quote("0.987654", "x", kind, source)
    assert bad.verify("", ROOT) is not None
    assert good.verify("", ROOT) is None or kind == "lecture"


def test_a_number_only_in_a_file_git_ignores_is_not_recorded(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("local/\n")
    for folder in ("local", "kept"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "figures.txt").write_text("steps 4137\n")
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nThe run took 4137 steps (`local/figures.txt`).\n\n"
                   "The other took 4137 steps (`kept/figures.txt`).\n")
    report = check_markdown(doc, root=tmp_path)
    # only the paragraph that names the ignored file fails: a clean clone would not have it
    assert [p.number for p in report.problems] == ["4137"]
    assert "local/figures.txt" in next(p.context for p in report.problems)
