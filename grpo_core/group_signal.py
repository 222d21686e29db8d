"""Does the task give signal? The check to run before training (notebook 08).

Lecture, experiment 2: "If every attempt in a group gets the same reward, the advantage is 0
-> nothing to learn. You want the task at the edge of the model's ability." Before training
Qwen3-0.6B on MBPP, k = 4 attempts per prompt gave a mean reward of 0.22 and 10 of 20 groups
*mixed* (not all equal). This module measures that for any model, dataset, reward and k:

- :func:`signal_check` samples k completions per prompt and scores them
  (``grpo_core.evaluation.score_samples``), then calls
- :func:`summarize_groups`, a pure function of the ``[N, k]`` score table: mean reward, each
  group's mean and spread, which groups are mixed, and the pass probability ``p``;
- :func:`expected_zero_std_fraction` is the analytic chance that a group of k has no spread
  when each sample passes with probability p, ``p^k + (1 - p)^k`` (notebook 08, eq. (8.2));
  :func:`zero_std_chance` is its per-problem version for any reward values;
- :func:`plot_signal` draws a report (the k sweep's training curves are
  ``grpo_core.plots.compare_runs``).

Everything but :func:`signal_check` is a pure function of tensors or metric records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from grpo_core.advantages import flat_groups
from grpo_core.evaluation import score_samples
from grpo_core.plots import DPI
from grpo_core.scoring import reward_list, weighted_total


def expected_zero_std_fraction(p: float | Tensor, k: int) -> float | Tensor:
    """The chance that a group of ``k`` pass/fail rewards has zero spread (eq. (8.2)).

    ``p^k + (1 - p)^k``: all k samples pass, or all k fail, when each sample passes
    independently with probability ``p``. One minus it is the chance the group is mixed.

    Args:
        p: the pass probability, a float or a tensor of them (any shape), in [0, 1].
        k: the group size, >= 1.

    Returns:
        the same type and shape as ``p``.
    """
    if k < 1:
        raise ValueError(f"the group size k must be >= 1, got {k}")
    values = torch.as_tensor(p, dtype=torch.float64)
    if values.numel() and (values.min() < 0 or values.max() > 1):
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    result = values**k + (1 - values) ** k
    return result if isinstance(p, Tensor) else float(result)


def zero_std_chance(scores: Tensor, k: int) -> Tensor:
    """Per problem, the chance that a group of ``k`` samples all score the same (eq. (8.3)).

    With pass/fail rewards and a true pass rate p_i this is ``p_i^k + (1 - p_i)^k``; with
    partial scores (a fraction of asserts) it also counts groups that all score, say, 1/3.
    Estimated from the n samples already scored, of which c_iv scored exactly v:

    - ``k <= n``: ``sum_v C(c_iv, k) / C(n, k)``, the chance that k of the n samples picked
      at random all agree. Unbiased, and at ``k = n`` it is exactly the measured indicator
      "this group had zero spread";
    - ``k > n``: the plug-in ``sum_v (c_iv / n)^k``. Biased: a problem whose n samples all
      failed gives 1 at every k, though a larger group would sometimes hold a pass.

    Args:
        scores: ``[N, n]`` float, n samples for each of N problems.
        k: the group size to predict for (need not equal n).

    Returns:
        ``[N]`` float64.
    """
    scores = _check_scores(scores)
    if k < 1:
        raise ValueError(f"the group size k must be >= 1, got {k}")
    n = scores.shape[1]
    chances = []
    for row in scores.to(torch.float64):
        counts = torch.unique(row, return_counts=True)[1].tolist()
        if k <= n:
            chances.append(sum(math.comb(c, k) for c in counts) / math.comb(n, k))
        else:
            chances.append(sum((c / n) ** k for c in counts))
    return torch.tensor(chances, dtype=torch.float64)


def simulate_scores(pass_probs: Sequence[float] | Tensor, k: int, seed: int = 0) -> Tensor:
    """A fake policy with known pass probabilities: ``[N, k]`` scores, 1 with probability p_i.

    What a real model's scores would look like if problem i were solved independently with
    probability ``pass_probs[i]`` at every attempt (for tests and the notebook's toy).
    """
    probs = torch.as_tensor(pass_probs, dtype=torch.float64).reshape(-1, 1).expand(-1, k)
    generator = torch.Generator().manual_seed(seed)
    return torch.bernoulli(probs, generator=generator).to(torch.float32)


@dataclass(frozen=True)
class SignalReport:
    """What the signal check measured. ``N`` groups (prompts) of ``k`` scored samples.

    Attributes:
        scores: ``[N, k]`` the samples' rewards, one row per prompt.
        group_means: ``[N]`` each group's mean reward (its baseline, notebook 03).
        group_stds: ``[N]`` each group's std, Bessel-corrected as in training.
        mixed: ``[N]`` bool, the group's rewards are not all equal (std > 0): the groups
            that give a learning signal.
        pass_rates: ``[N]`` p_i, the fraction of the group's samples that pass.
        pass_threshold: a sample *passes* when its reward is >= this (1.0: every test passes).
        labels: a name per group (task ids); texts: the ``N * k`` completions, group after group.
    """

    scores: Tensor
    group_means: Tensor
    group_stds: Tensor
    mixed: Tensor
    pass_rates: Tensor
    pass_threshold: float
    labels: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @property
    def num_groups(self) -> int:
        return self.scores.shape[0]

    @property
    def k(self) -> int:
        return self.scores.shape[1]

    @property
    def mixed_groups(self) -> int:
        """How many groups give a signal (the lecture's "10 of 20 groups mixed")."""
        return int(self.mixed.sum())

    @property
    def mean_reward(self) -> float:
        """The mean over all N * k samples (the lecture's 0.22)."""
        return self.scores.mean().item()

    @property
    def zero_std_fraction(self) -> float:
        """The measured share of groups with no spread: what training logs as
        ``frac_reward_zero_std``."""
        return 1.0 - self.mixed_groups / self.num_groups

    @property
    def p(self) -> float:
        """The pooled pass probability: the share of all samples that pass."""
        return (self.scores >= self.pass_threshold).float().mean().item()

    @property
    def p_definition(self) -> str:
        """How ``p`` is defined, in words."""
        if self.pass_threshold >= 1.0:
            return "p = the chance that one sample passes all of its tests (reward 1)"
        return f"p = the chance that one sample scores at least {self.pass_threshold:g}"

    def expected_zero_std(self, k: int | None = None) -> dict[str, float]:
        """The predicted ``frac_reward_zero_std`` at group size ``k`` (default: this check's).

        Three estimates, from the crudest to the closest to what training measures:

        - ``"pooled p"``: ``p^k + (1-p)^k`` with one p for every problem (eq. (8.2));
        - ``"per-problem p_i"``: ``mean_i [p_i^k + (1-p_i)^k]`` (eq. (8.3)), each sample
          counted as pass or fail only;
        - ``"per-problem scores"``: the same with every distinct reward value, partial scores
          included: at this check's own k it equals the measured ``zero_std_fraction``.

        Both per-problem estimates use :func:`zero_std_chance` (unbiased for k <= this check's
        k, a plug-in above it).
        """
        k = self.k if k is None else k
        passed = (self.scores >= self.pass_threshold).float()
        return {
            "pooled p": float(expected_zero_std_fraction(self.p, k)),
            "per-problem p_i": zero_std_chance(passed, k).mean().item(),
            "per-problem scores": zero_std_chance(self.scores, k).mean().item(),
        }

    def summary(self) -> str:
        """One paragraph: mean reward, mixed groups, p and what that predicts at this k."""
        expected = self.expected_zero_std()
        return (
            f"k = {self.k} samples for each of {self.num_groups} prompts: mean reward "
            f"{self.mean_reward:.3f}; {self.mixed_groups} of {self.num_groups} groups mixed "
            f"(zero-std fraction {self.zero_std_fraction:.2f}); {self.p_definition}: "
            f"p = {self.p:.3f}, so p^k + (1-p)^k = {expected['pooled p']:.2f} "
            f"(per problem: {expected['per-problem p_i']:.2f})"
        )

    def rows(self) -> list[dict[str, Any]]:
        """One dict per group (for a table): label, scores, mean, std, p_i, mixed."""
        return [
            {"group": label, "scores": [round(s, 3) for s in row.tolist()],
             "mean": round(mean.item(), 3), "std": round(std.item(), 3),
             "p_i": round(rate.item(), 3), "mixed": bool(mixed)}
            for label, row, mean, std, rate, mixed in zip(
                self.labels, self.scores, self.group_means, self.group_stds, self.pass_rates,
                self.mixed, strict=True)
        ]


def _check_scores(scores: Tensor | Sequence[Sequence[float]]) -> Tensor:
    scores = torch.as_tensor(scores, dtype=torch.float32)
    if scores.dim() != 2 or scores.shape[0] < 1 or scores.shape[1] < 1:
        raise ValueError(f"scores must be [N groups, k samples] with N, k >= 1, "
                         f"got shape {tuple(scores.shape)}")
    if not torch.isfinite(scores).all():
        raise ValueError("scores must be finite numbers (no NaN or inf)")
    return scores


def summarize_groups(
    scores: Tensor | Sequence[Sequence[float]],
    *,
    pass_threshold: float = 1.0,
    labels: Sequence[Any] | None = None,
    texts: Sequence[str] | None = None,
) -> SignalReport:
    """The signal check's numbers from a score table (a pure function).

    Args:
        scores: ``[N, k]``, row i holds the k rewards of prompt i's group; k >= 2 (a group of
            one has no spread to measure).
        pass_threshold: a sample passes when its reward is >= this; defines ``p`` and ``p_i``.
        labels: N names for the groups (default ``"0"``, ``"1"``, ...).
        texts: the N * k completions, kept for inspection.

    Returns:
        a :class:`SignalReport`. A group is mixed when its rewards are not all equal
        (``grpo_core.advantages.flat_groups``, as the training loop's ``frac_reward_zero_std``).
    """
    scores = _check_scores(scores)
    if scores.shape[1] < 2:
        raise ValueError("a group needs k >= 2 samples to have a spread")
    labels = [str(i) for i in range(scores.shape[0])] if labels is None else \
        [str(label) for label in labels]
    if len(labels) != scores.shape[0]:
        raise ValueError(f"{len(labels)} labels for {scores.shape[0]} groups")
    texts = list(texts or [])
    if texts and len(texts) != scores.numel():
        raise ValueError(f"{len(texts)} texts for {scores.numel()} samples")
    stds = scores.std(dim=1)
    mixed = ~flat_groups(scores.reshape(-1), scores.shape[1])
    return SignalReport(
        scores=scores, group_means=scores.mean(dim=1), group_stds=stds, mixed=mixed,
        pass_rates=(scores >= pass_threshold).float().mean(dim=1),
        pass_threshold=float(pass_threshold), labels=labels, texts=texts)


def signal_check(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]],
    k: int = 4,
    *,
    max_new_tokens: int,
    reward_weights: Sequence[float] | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    pass_threshold: float = 1.0,
    prompts_per_batch: int = 4,
    stop_at: str | None = None,
    progress: Callable[[int, int], Any] | None = None,
) -> SignalReport:
    """Sample k completions per prompt with the model as it is, score them, summarize.

    Run it before training, on a few prompts of the training set, with the reward and
    sampling settings training will use: if almost no group is mixed, training has nothing to
    compare, whatever the learning rate (too hard: all fail; too easy: all pass).

    Args:
        rows: dataset rows ``{"prompt": user message, <columns the rewards read>}``
            (e.g. ``tests`` and ``setup_code`` for ``unit_test_reward``), any dataset.
        reward_funcs: one TRL-style reward function or several; several are summed with
            ``reward_weights`` (default all 1), as training sums them.
        k: samples per prompt (the group size), >= 2.
        max_new_tokens, temperature, top_p, seed, prompts_per_batch, stop_at, progress: as
            in ``grpo_core.evaluation.score_samples`` (``stop_at``: the experiment's stop rule,
            ``TrainConfig.stop_at``).
        pass_threshold: see :func:`summarize_groups`.

    Returns:
        a :class:`SignalReport`; its ``scores`` are ``[len(rows), k]``.
    """
    missing = [i for i, row in enumerate(rows) if "prompt" not in row]
    if missing:
        raise ValueError(f"rows {missing[:5]} have no 'prompt' column; build one first "
                         "(e.g. grpo_core.mbpp.format_code_prompt(row['text'], row['tests']))")
    if k < 2:
        raise ValueError("the signal check needs k >= 2 samples per prompt")
    funcs, weights = reward_list(reward_funcs, reward_weights)
    per_fn, texts = score_samples(model, tokenizer, rows, funcs, samples_per_prompt=k,
                                  max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, seed=seed, prompts_per_batch=prompts_per_batch,
                                  stop_at=stop_at, progress=progress)
    total = weighted_total(per_fn.values(), weights)
    labels = [row.get("task_id", i) for i, row in enumerate(rows)]
    return summarize_groups(total, pass_threshold=pass_threshold, labels=labels, texts=texts)


# ----------------------------------------------------------------------------- plots


def plot_signal(report: SignalReport, ks: Sequence[int] = (2, 4, 8, 16), *,
                title: str | None = None):
    """Two panels: every group's scores (mixed groups coloured), and the predicted
    zero-std fraction against the group size k, with this check's measurement.

    Returns:
        a ``matplotlib.figure.Figure`` (object API: no pyplot, no window).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6), dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[3, 2])
    order = torch.argsort(report.group_means, descending=True, stable=True).tolist()
    for x, index in enumerate(order):
        colour = "tab:green" if report.mixed[index] else "tab:gray"
        values = report.scores[index].tolist()
        jitter = [x + (j - (len(values) - 1) / 2) * 0.08 for j in range(len(values))]
        left.scatter(jitter, values, s=14, color=colour, alpha=0.8)
        left.hlines(report.group_means[index].item(), x - 0.35, x + 0.35, color=colour)
    left.set_xticks(range(len(order)), [report.labels[i] for i in order], rotation=90,
                    fontsize=7)
    left.set_xlabel("prompt (sorted by group mean)", fontsize=8)
    left.set_ylabel("reward of each sample", fontsize=8)
    left.set_title(f"k = {report.k}: {report.mixed_groups} of {report.num_groups} groups mixed "
                   f"(green), mean reward {report.mean_reward:.2f}", fontsize=10)
    left.set_ylim(-0.05, max(1.05, report.scores.max().item() + 0.05))

    grid = sorted({*ks, report.k})
    curves = {name: [report.expected_zero_std(k)[name] for k in grid]
              for name in ("pooled p", "per-problem p_i", "per-problem scores")}
    # distinct markers, the second hollow: curves that coincide (pass/fail scores make the
    # two per-problem ones equal) stay visible, and the legend says they coincide
    styles = {"pooled p": ("-", "o", 4), "per-problem p_i": ("--", "s", 8),
              "per-problem scores": (":", "x", 6)}
    drawn: dict[str, list[float]] = {}
    for name, values in curves.items():
        line, marker, size = styles[name]
        same = [other for other, seen in drawn.items()
                if all(abs(a - b) < 1e-9 for a, b in zip(seen, values, strict=True))]
        label = f"{name} (= {same[0]})" if same else name
        right.plot(grid, values, line, marker=marker, markersize=size, label=label,
                   markerfacecolor="none" if name == "per-problem p_i" else None)
        drawn[name] = values
    right.scatter([report.k], [report.zero_std_fraction], color="black", zorder=3,
                  label=f"measured at k = {report.k}")
    right.set_xscale("log", base=2)
    right.set_xticks(grid, [str(k) for k in grid])
    right.set_ylim(-0.02, 1.02)
    right.set_xlabel("group size k", fontsize=8)
    right.set_ylabel("share of groups with zero spread", fontsize=8)
    right.set_title(f"predicted frac_reward_zero_std (p = {report.p:.2f})", fontsize=10)
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.tick_params(labelsize=8)
    if title:
        fig.suptitle(title)
    return fig
