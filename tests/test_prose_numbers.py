"""Every measured-looking number in a notebook's prose is printed by one of its cells.

A rebuild changes what the cells print; prose typed for an earlier build then contradicts
them (issue 34 found 11 such statements). So a decimal or a percentage in a markdown cell
must appear in the notebook's own outputs, or be listed below as **quoted**: the lecture's
figures, an outside source's (with its link in the prose), a setting or a hand-made example.
Numbers inside formulas (``$...$``), code spans, links and equation or section references
are not read as claims.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tools.notebooks import paired_scripts

SCRIPTS = paired_scripts()

# notebook -> {number as written: why it is not printed by a cell}
QUOTED: dict[str, dict[str, str]] = {
    "00_setup": {
        "1.5": "float32 spacing example: 1 + 2^-23 vs bfloat16's 2^-7 steps, settings",
        "0.02": "a hand-made example: a typical weight's size, next to which bfloat16's spacing is shown",
    },
    "01_from_imitation_to_reward": {
        "70 %": "a hand-made example in the prose (the toy game's move 3)",
        "0.5": "a hand-made example (the student's probability of 'cat') and a setting (the "
               "teacher's temperature)",
        "0.693": "arithmetic on the hand-made example: -log 0.5",
    },
    "02_policy_rollout_reward": {
        "1.16": "TRL's version number",
    },
    "04_guardrails": {
        "0.6": "a hand-made example: a token's probability under the policy",
        "2.4": "arithmetic: Qwen3-0.6B's 0.6 billion float32 weights at 4 bytes each",
    },
    "03_group_baseline": {
        "0.999": "AdamW's beta2, a setting",
    },
    "08_exp2_mbpp": {
        "0.22": "the lecture's mean reward on MBPP",
        "0.418": "arithmetic in the statistics primer's hand-made example: the sd of its five "
                 "problem means, sqrt(0.7 / 4) (the cell prints the standard error, 0.187)",
        "0.3": "the primer's hand-made example: the mean of its changes 0.5, 0.5, 0, 0, 0.5 "
               "(the cell prints it as +0.30)",
    },
    "09_exp3_reward_hacking": {
        **dict.fromkeys(["0.4", "0.9", "0.10", "0.12", "0.09", "0.11"],
                        "exercise 3's made-up run, whose records the learner builds"),
    },
    "10_trl": {
        "1.16": "TRL's version number",
    },
    "12_noise_floor": {
        "0.03": "a learner's question, a made-up difference (and the checklist's example)",
        "0.1": "the checklist's made-up example of a comparison's smallest detectable change",
        "2.64": "the Bonferroni bar of six comparisons (stats.bonferroni_z(6)), printed in 08",
    },
    "11_reading_the_run": {
        "7.5": "the T4's CUDA capability (a device fact)",
        "8.9": "the L4's CUDA capability (a device fact)",
    },
}

NUMBER = re.compile(r"(?<![\w.\-−+/])[-+−]?\d+\.\d+(?:\s?%)?(?![\w.]*\d)|(?<![\w.])\d+\s?%")


def prose(markdown: str) -> str:
    """``markdown`` without what is not a claim: formulas, code, links' targets, equation and
    section references, indented code blocks, the heading line."""
    text = re.sub(r"\$\$.*?\$\$", " ", markdown, flags=re.S)
    text = re.sub(r"\$[^$\n]*\$", " ", text)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"https?://\S+", " ", text)
    text = re.sub(r"\((?:eq\.\s*)?\d+\.\d+\)", " ", text)  # (8.4), (eq. 8.4)
    text = re.sub(r"(?:eq\.|eqs?\.|equation|§)\s*\(?\d+\.\d+\)?", " ", text)
    return re.sub(r"^ {4}.*$", " ", text, flags=re.M)


def printed(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's code cells printed or displayed as text."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(output.get("text", ""))
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def claims(notebook: nbformat.NotebookNode) -> list[str]:
    """The decimals and percentages of the notebook's markdown, as written."""
    found = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            found += [m.group(0).strip() for m in NUMBER.finditer(prose(cell.source))]
    return found


def shown(number: str, output: str) -> bool:
    """Whether ``output`` prints ``number`` (sign, spacing and a percent's form aside)."""
    bare = number.replace("−", "-").lstrip("+-").replace(" ", "")
    forms = [bare.rstrip("%")]
    if bare.endswith("%"):
        value = float(bare.rstrip("%"))
        forms += [f"{value / 100:.2f}", f"{value / 100:.3f}".rstrip("0")]
    return any(re.search(rf"(?<![\d.]){re.escape(form)}(?!\d)", output) for form in forms)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_number_in_the_prose_is_printed_or_quoted(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    output = printed(notebook)
    quoted = QUOTED.get(script.stem, {})
    unprinted = [n for n in claims(notebook) if n not in quoted and not shown(n, output)]
    assert not unprinted, (
        f"{script.stem}: numbers in the prose that no cell prints: {unprinted}. Print them "
        f"from a cell (or assert the quoted value), or list them in QUOTED with their source")


def test_the_scan_finds_typed_numbers_and_ignores_formulas():
    markdown = ("The run ends at 0.357 ± 0.031, 12 % cut; see (8.4) and eq. 8.2, "
                "`lr 2e-5`, $p = 0.22$, [x](a/1.5.html), k = 8.")
    assert [n for n in NUMBER.findall(prose(markdown))] == ["0.357", "0.031", "12 %"]
    assert shown("12 %", "cut off: 12%") and shown("56 %", "zero-std 0.56")
    assert shown("-0.060", "change -0.060 ± 0.03") and not shown("0.06", "0.060")
    assert not shown("3.6", "entropy 13.6")
