"""The token view (notebook 02): after one update, each completion's tokens coloured by how much
their log-probability moved, beside the completion's advantage.

Eq. (2.4)'s gradient is ``-1/k sum_i A_i sum_t grad log pi(y_i,t | x, y_i,<t)``: every token
of a completion is pushed the same way, up when ``A_i > 0``, down when ``A_i < 0``. The token
view shows whether it went that way, token by token:

- :func:`token_logprob_change`: ``[B, C]`` per-token log-probs before and after the step and the
  completion mask -> the change, 0 outside the mask (pure, torch only);
- :func:`token_change_summary`: per completion, how many of its tokens moved with the sign of
  its advantage;
- :func:`token_change_html`: the coloured tokens (green: the token's log-prob rose, red: fell,
  the stronger the colour the larger the change) beside each completion's advantage.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

UP, DOWN, SAME = "grpo-up", "grpo-down", "grpo-same"


def token_logprob_change(before: torch.Tensor, after: torch.Tensor,
                         mask: torch.Tensor) -> torch.Tensor:
    """``after - before`` per token, exactly 0 where ``mask`` is 0 (padding after a completion).

    Args:
        before: ``[B, C]`` the completions' per-token log-probs before the step.
        after: ``[B, C]`` the same tokens' log-probs after it.
        mask: ``[B, C]`` 1 for a completion's tokens, 0 for padding.

    Returns:
        ``[B, C]`` float tensor, detached.
    """
    if before.shape != after.shape or before.shape != mask.shape:
        raise ValueError(f"before {tuple(before.shape)}, after {tuple(after.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same [B, C] shape")
    keep = mask.bool()
    change = (after.detach().float() - before.detach().float())
    return torch.where(keep, change, torch.zeros_like(change))


def change_class(value: float) -> str:
    """``grpo-up`` (the log-prob rose), ``grpo-down`` (fell) or ``grpo-same`` (exactly 0)."""
    if value > 0:
        return UP
    return DOWN if value < 0 else SAME


@dataclass(frozen=True)
class TokenChangeRow:
    """One completion's tokens after the step, from :func:`token_change_summary`.

    Attributes:
        advantage: the completion's advantage A_i.
        tokens: how many tokens the completion has (mask 1).
        with_advantage: how many of them moved the way A_i pushes (up for A > 0, down for A < 0;
            0 when A = 0).
        total_change: the completion's summed change, its sequence log-prob's change.
    """

    advantage: float
    tokens: int
    with_advantage: int
    total_change: float

    @property
    def share(self) -> float:
        """``with_advantage / tokens`` (0 for an empty completion)."""
        return self.with_advantage / self.tokens if self.tokens else 0.0


def token_change_summary(change: torch.Tensor, mask: torch.Tensor,
                         advantages: torch.Tensor | Sequence[float]) -> list[TokenChangeRow]:
    """Per completion: its tokens, how many moved with its advantage's sign, the summed change.

    Args:
        change: ``[B, C]`` from :func:`token_logprob_change`.
        mask: ``[B, C]`` the completion mask.
        advantages: ``[B]`` each completion's advantage.
    """
    advantages = torch.as_tensor(advantages, dtype=torch.float32)
    keep = mask.bool()
    rows = []
    for i in range(change.size(0)):
        a = float(advantages[i])
        moved = change[i][keep[i]]
        agree = int((torch.sign(moved) == (1 if a > 0 else -1)).sum()) if a != 0 else 0
        rows.append(TokenChangeRow(advantage=a, tokens=int(keep[i].sum()), with_advantage=agree,
                                   total_change=float(moved.sum())))
    return rows


def token_texts(tokenizer: Any, completion_ids: torch.Tensor,
                mask: torch.Tensor) -> list[list[str]]:
    """Each completion's tokens as text, one string per token inside the mask (``[B, C]`` ids)."""
    return [[tokenizer.decode([int(t)]) for t, m in zip(row, row_mask, strict=True) if m]
            for row, row_mask in zip(completion_ids.tolist(), mask.tolist(), strict=True)]


def _background(value: float, scale: float) -> str:
    strength = min(1.0, abs(value) / scale) if scale > 0 else 0.0
    rgb = "46,125,50" if value > 0 else "198,40,40"
    return f"rgba({rgb},{0.08 + 0.72 * strength:.2f})" if value != 0 else "transparent"


def token_change_html(tokens: Sequence[Sequence[str]], change: torch.Tensor, mask: torch.Tensor,
                      advantages: torch.Tensor | Sequence[float], *,
                      scale: float | None = None) -> str:
    """The token view: one row per completion, its advantage then its tokens, each token's
    background green (its log-prob rose) or red (fell), stronger for a larger change.

    Args:
        tokens: each completion's token strings, the mask's tokens in order
            (:func:`token_texts`).
        change: ``[B, C]`` from :func:`token_logprob_change`.
        mask: ``[B, C]`` the completion mask.
        advantages: ``[B]`` the completions' advantages.
        scale: the |change| drawn at full colour (default: the largest |change| in the batch).

    Stable CSS classes for tests: ``grpo-token-row`` (one per completion), ``grpo-token`` with
    ``grpo-up``/``grpo-down``/``grpo-same``, ``grpo-token-adv`` with ``grpo-pos``/
    ``grpo-neg``/``grpo-zero``; each token's ``title`` gives its change.
    """
    advantages = torch.as_tensor(advantages, dtype=torch.float32)
    keep = mask.bool()
    if scale is None:
        scale = float(change.abs().max()) if change.numel() else 0.0
    rows = []
    for i, summary in enumerate(token_change_summary(change, mask, advantages)):
        values = change[i][keep[i]].tolist()
        if len(values) != len(tokens[i]):
            raise ValueError(f"completion {i}: {len(tokens[i])} token strings for "
                             f"{len(values)} tokens in the mask")
        a = summary.advantage
        sign = "grpo-pos" if a > 0 else "grpo-neg" if a < 0 else "grpo-zero"
        colour = {"grpo-pos": "#1b5e20", "grpo-neg": "#b00020", "grpo-zero": "#616161"}[sign]
        spans = "".join(
            f'<span class="grpo-token {change_class(v)}" title="{v:+.3f}" '
            f'style="background:{_background(v, scale)};white-space:pre">{html.escape(text)}</span>'
            for text, v in zip(tokens[i], values, strict=True))
        rows.append(
            f'<div class="grpo-token-row" style="margin:3px 0;font-family:monospace;font-size:12px">'
            f'<span class="grpo-token-adv {sign}" style="display:inline-block;width:12em;'
            f'color:{colour}">A = {a:+.2f}, {summary.with_advantage}/{summary.tokens} with A'
            f'</span>{spans}</div>')
    legend = ('<div style="font-size:11px;color:#555">green: the token\'s log-probability rose '
              'after the step; red: it fell; full colour = a change of '
              f'{scale:.3g} nats or more. "n/m with A": tokens that moved the way the advantage '
              'pushes</div>')
    return '<div class="grpo-token-view">' + legend + "".join(rows) + "</div>"
