"""The token view (notebook 02) on a fixed toy batch: colours follow the sign of each token's
log-prob change, and the advantage beside each completion."""

from __future__ import annotations

import re

import pytest
import torch

from grpo_core.widgets import token_change_html, token_change_summary, token_logprob_change
from grpo_core.widgets.tokens import change_class, token_texts

# two completions of up to 3 tokens; the second has one padding token
BEFORE = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, -9.0]])
AFTER = torch.tensor([[-0.5, -2.5, -0.5], [-3.2, -0.2, 5.0]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
ADVANTAGES = torch.tensor([0.7, -0.7])
TOKENS = [["Hi", " <b>", "!"], ["No", "pe"]]


def classes(page: str, name: str) -> list[str]:
    return re.findall(rf'class="{name} ([a-z-]+)"', page)


def test_change_is_after_minus_before_and_zero_outside_the_mask():
    change = token_logprob_change(BEFORE, AFTER, MASK)
    assert torch.allclose(change, torch.tensor([[0.5, -0.5, 0.0], [-0.2, 0.8, 0.0]]))
    assert change[1, 2].item() == 0.0  # the padding moved by 14 nats: not shown
    assert not change.requires_grad


def test_change_detaches_and_checks_shapes():
    before = BEFORE.clone().requires_grad_()
    assert not token_logprob_change(before, AFTER, MASK).requires_grad
    with pytest.raises(ValueError, match="same"):
        token_logprob_change(BEFORE, AFTER[:, :2], MASK)


@pytest.mark.parametrize(("value", "css"), [(0.1, "grpo-up"), (-1e-6, "grpo-down"),
                                            (0.0, "grpo-same")])
def test_change_class_is_the_sign(value, css):
    assert change_class(value) == css


def test_summary_counts_tokens_that_moved_with_the_advantage():
    rows = token_change_summary(token_logprob_change(BEFORE, AFTER, MASK), MASK, ADVANTAGES)
    assert [(r.tokens, r.with_advantage) for r in rows] == [(3, 1), (2, 1)]
    assert rows[0].total_change == pytest.approx(0.0)
    assert rows[1].total_change == pytest.approx(0.6)
    assert rows[1].share == 0.5
    flat = token_change_summary(torch.ones(1, 2), torch.ones(1, 2), [0.0])
    assert flat[0].with_advantage == 0  # A = 0 pushes nothing


def test_html_colours_each_token_by_its_change_and_each_row_by_its_advantage():
    change = token_logprob_change(BEFORE, AFTER, MASK)
    page = token_change_html(TOKENS, change, MASK, ADVANTAGES)
    assert classes(page, "grpo-token") == ["grpo-up", "grpo-down", "grpo-same",
                                           "grpo-down", "grpo-up"]
    assert classes(page, "grpo-token-adv") == ["grpo-pos", "grpo-neg"]
    assert page.count('class="grpo-token-row"') == 2
    assert " &lt;b&gt;</span>" in page and " <b></span>" not in page  # the text is escaped
    titles = re.findall(r'title="([^"]+)"', page)
    assert titles == ["+0.500", "-0.500", "+0.000", "-0.200", "+0.800"]
    assert "1/3 with A" in page and "1/2 with A" in page


def test_html_colour_strength_grows_with_the_change():
    change = token_logprob_change(BEFORE, AFTER, MASK)
    page = token_change_html(TOKENS, change, MASK, ADVANTAGES)
    alphas = [float(a) for a in re.findall(r"rgba\([0-9,]+,([0-9.]+)\)", page)]
    # tokens with a change: +0.5, -0.5, -0.2, +0.8 (largest: full colour)
    assert alphas == [pytest.approx(0.08 + 0.72 * 0.5 / 0.8, abs=0.01),
                      pytest.approx(0.08 + 0.72 * 0.5 / 0.8, abs=0.01),
                      pytest.approx(0.08 + 0.72 * 0.2 / 0.8, abs=0.01), 0.8]
    assert "transparent" in page  # the unchanged token


def test_html_rejects_token_strings_that_do_not_match_the_mask():
    change = token_logprob_change(BEFORE, AFTER, MASK)
    with pytest.raises(ValueError, match="completion 1"):
        token_change_html([TOKENS[0], ["only one"]], change, MASK, ADVANTAGES)


class CharTokenizer:
    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def test_token_texts_keep_the_masked_tokens_in_order():
    ids = torch.tensor([[72, 105, 0], [79, 0, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert token_texts(CharTokenizer(), ids, mask) == [["H", "i"], ["O"]]
