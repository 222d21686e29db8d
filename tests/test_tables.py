"""Tables for learners: HTML for the front end, text that fits 100 columns for the rest."""

from __future__ import annotations

import pandas as pd
import pytest

from grpo_core.tables import WIDTH, plain_table, show_table

EVIDENCE = ("kl rose from 0.0012 to 0.0480 over the last 10 steps while the reward stayed "
            "within one batch standard deviation of where it started; that is the pattern of a "
            "KL blow-up, not of learning")


def wide_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "beta = 0": {"reward": "-35.2 ± 3.1 -> -4.1 ± 0.8", "diagnose: KL": "not logged"},
        "beta = 0.04": {"reward": "-35.0 ± 2.9 -> -9.7 ± 1.1", "diagnose: KL": EVIDENCE},
    }).T


def test_a_table_that_fits_is_pandas_own():
    frame = pd.DataFrame({"k": [2, 8, 16], "groups with no signal": [0.41, 0.12, 0.03]})
    assert plain_table(frame) == frame.to_string()


def test_a_wide_table_fits_the_width_and_keeps_every_word_in_order():
    frame = wide_frame()
    assert max(len(line) for line in frame.to_string().splitlines()) > WIDTH
    text = plain_table(frame)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    blocks = text.split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["beta = 0", "beta = 0.04"]
    assert " ".join(blocks[1].split()).endswith("diagnose: KL: " + " ".join(EVIDENCE.split()))
    assert "  reward: -35.2 ± 3.1 -> -4.1 ± 0.8" in blocks[0].splitlines()
    narrow = plain_table(frame, width=40)
    assert max(len(line) for line in narrow.splitlines()) <= 40


def test_a_word_longer_than_the_width_is_cut_not_left_over():
    frame = pd.DataFrame({"path": ["data/runs/" + "x" * 150]})
    assert max(len(line) for line in plain_table(frame).splitlines()) <= WIDTH


def test_the_front_end_gets_html_and_text_gets_the_plain_form():
    from IPython.core.formatters import DisplayFormatter

    formats, _ = DisplayFormatter().format(show_table(wide_frame()))
    assert formats["text/html"].lstrip().startswith("<table")
    assert "beta = 0.04" in formats["text/html"]
    assert formats["text/plain"] == plain_table(wide_frame())


def test_a_width_too_small_for_a_label_is_refused():
    with pytest.raises(ValueError, match="at least 20"):
        plain_table(wide_frame(), width=10)


def test_the_width_is_kept_to_the_character():
    frame = pd.DataFrame({"note": ["x" * 30]})
    exact = len(max(frame.to_string().splitlines(), key=len))
    assert plain_table(frame, width=exact) == frame.to_string()  # exactly the width: as is
    assert plain_table(frame, width=exact - 1) != frame.to_string()
    assert plain_table(frame, width=20)  # the narrowest accepted
    with pytest.raises(ValueError):
        plain_table(frame, width=19)


def test_blocks_wrap_between_words_with_an_indent_and_keep_long_labels_whole():
    label = "a row label of more than seventy characters, which a default wrap would split"
    value = "word-with-hyphens " * 12
    frame = pd.DataFrame({"why": {label: value}, "more": {label: "x" * 150}})
    lines = plain_table(frame).splitlines()
    assert lines[0] == label  # 78 characters, within the width of 100: one line
    why = [line for line in lines if "word-with-hyphens" in line]
    assert len(why) > 1 and why[0].startswith("  why: ")
    assert all(line.startswith("      ") for line in why[1:])
    assert all(w == "word-with-hyphens" for line in why for w in line.split()[1 if line.startswith("  why") else 0:])


def test_an_empty_label_starts_its_block_with_an_empty_line():
    frame = pd.DataFrame({"note": {"": "y " * 80}})
    assert plain_table(frame).splitlines()[0] == ""


def test_the_displayed_table_keeps_its_width():
    from IPython.core.formatters import DisplayFormatter

    formats, _ = DisplayFormatter().format(show_table(wide_frame(), width=40))
    assert max(len(line) for line in formats["text/plain"].splitlines()) <= 40


def test_a_hyphenated_word_at_the_end_of_a_line_is_not_split():
    frame = pd.DataFrame({"why": {"row": "x" * 83 + " sampler-learner-mismatch"},
                          "more": {"row": "y" * 150}})
    lines = plain_table(frame).splitlines()
    assert "      sampler-learner-mismatch" in lines
    assert not [line for line in lines if line.endswith("-")]


def test_without_the_index_the_first_cell_names_each_block():
    frame = wide_frame().reset_index().rename(columns={"index": "run"})
    assert plain_table(frame.head(0), index=False) == frame.head(0).to_string(index=False)
    small = pd.DataFrame({"k": [2, 8], "share": [0.4, 0.1]})
    assert plain_table(small, index=False) == small.to_string(index=False)
    assert "0 " not in plain_table(small, index=False).splitlines()[1][:2]
    blocks = plain_table(frame, index=False).split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["run: beta = 0", "run: beta = 0.04"]
    assert all("  run:" not in block for block in blocks)
    assert "<th>0</th>" not in show_table(frame, index=False)._repr_html_()
    assert "<th>0</th>" in show_table(frame)._repr_html_()
