"""Scoring a model's own samples on a fixed set of prompts, outside training.

Two uses: the signal check before training (notebook 08: does the task give the group
something to compare?), and a held-out measure logged beside the training reward
(notebooks 08 and 09: does what was learned carry over to unseen problems, is the reward still
the task?). Both sample ``k`` completions per prompt with ``sample_group`` and score them with
TRL-style reward functions; nothing here updates weights.

The held-out measure, :class:`HeldOutEvaluator` (docs/design.md, "Held-out evaluation"), is
``train``'s ``evaluate`` hook. ``train`` calls it at step 0 (the base model, before any
update), every ``eval_every`` steps and after the last step, always on the same prompts with
the same sampling seed, so two evaluations differ only because the weights changed. For each
reward function ``fn`` it logs:

- ``eval/<fn>``: the mean score over every held-out sample;
- ``eval/<fn>/sem``: its standard error, computed over problems (the samples of one problem
  are not independent): each problem's mean over its ``k`` samples, then the sample standard
  deviation of those means (ddof = 1) divided by sqrt(number of problems);
- ``eval/<fn>/delta_sem``: the standard error of the per-problem change against step 0 (each
  problem's mean now minus its mean at step 0; std (ddof = 1) / sqrt(problems)). It is paired:
  a problem that is hard at step 0 stays hard, so this is usually much smaller than
  ``sem`` and the right yardstick for "did the score move": ``z = (eval now - eval at step 0)
  / delta_sem``. At step 0 it is logged as exactly 0.0 (the change of the base model against
  itself); it is left out when the evaluator never saw step 0 (called outside ``train``).
- ``eval/<fn>/pass@1`` and ``eval/<fn>/pass@<k>`` (k = samples per problem, when above 1),
  each with ``/sem`` over problems, for the reward functions named pass/fail
  (``pass_fail``: a sample passes when it scores ``PASS_SCORE``, every assert): the unbiased
  estimate of "at least one of k samples passes" (``grpo_core.stats.pass_at_k``). pass@1 rising
  more than pass@k means training sharpened what the model could already do; pass@k rising
  means it solves problems none of its samples solved before.

The standard errors need at least two problems; with one they are left out.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from grpo_core.rewards import RewardFn
from grpo_core.rollout import chat_prompt, sample_group
from grpo_core.scoring import call_reward, group_columns, reward_list, reward_name
from grpo_core.stats import PASS_SCORE, mean, problem_means, problem_pass_at_k, standard_error


@runtime_checkable
class Evaluator(Protocol):
    """``train``'s ``evaluate`` hook: held-out measures (e.g. the true score beside a proxy
    reward) that join the metrics of the steps they ran after.

    :class:`HeldOutEvaluator` is one; a plain ``evaluate(model, tokenizer, step)`` function
    becomes one through :func:`as_evaluator`."""

    def __call__(self, model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        """Evaluate ``model`` after ``step`` (0: the weights passed to ``train``)."""

    def bind(self, config: Any) -> None:
        """Take the run's sampling settings (its ``TrainConfig``) before the first call."""

    def sample_rows(self, per_problem: int | None) -> list[dict[str, Any]]:
        """The last call's completions for ``samples.jsonl`` (``per_problem`` of each
        problem; None: all): ``{"prompt_id", "sample", "completion", "truncated", <fn>: value}``."""

    def state_dict(self) -> dict[str, Any] | None:
        """What a resumed run needs (``eval_state.json``); None: nothing to keep."""

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore :meth:`state_dict`'s state; False when it does not fit this evaluator."""


@dataclass
class FunctionEvaluator:
    """A plain ``evaluate(model, tokenizer, step) -> {name: value}`` function as an
    :class:`Evaluator`: it keeps no completions and no state."""

    function: Callable[[Any, Any, int], dict[str, float]]

    def __call__(self, model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        return self.function(model, tokenizer, step)

    def bind(self, config: Any) -> None:
        return None

    def sample_rows(self, per_problem: int | None) -> list[dict[str, Any]]:
        return []

    def state_dict(self) -> dict[str, Any] | None:
        return None

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        return False


def as_evaluator(evaluate: Evaluator | Callable[[Any, Any, int], dict[str, float]]) -> Evaluator:
    """``evaluate`` itself when it is an :class:`Evaluator`, else wrapped as one."""
    if isinstance(evaluate, Evaluator):
        return evaluate
    if not callable(evaluate):
        raise TypeError(f"evaluate must be callable as evaluate(model, tokenizer, step), "
                        f"got {evaluate!r}")
    return FunctionEvaluator(evaluate)


@dataclass
class ScoredSamples:
    """Completions sampled for ``N`` prompts, ``k`` each, and their scores.

    Attributes:
        scores: ``{reward name: [N, k]}``; row ``i`` holds prompt ``i``'s k scores.
        texts: the ``N * k`` completions, group after group.
        truncated: ``[N * k]`` bool, True where a completion hit ``max_new_tokens``.
    """

    scores: dict[str, Tensor]
    texts: list[str]
    truncated: Tensor


@torch.no_grad()
def sample_and_score(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    reward_funcs: RewardFn | Sequence[RewardFn],
    *,
    samples_per_prompt: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    prompts_per_batch: int = 4,
    system_message: str | None = None,
    enable_thinking: bool = False,
    stop_at: str | None = None,
    progress: Callable[[int, int], Any] | None = None,
) -> ScoredSamples:
    """Sample ``samples_per_prompt`` completions for every row and score each one.

    Batch ``b`` (prompts ``start .. start + prompts_per_batch``) is sampled with the seed
    ``seed * 1_000_003 + start``: the same rows, batching and seed always give the same
    samples from the same weights.

    Args:
        rows: dataset rows ``{"prompt": user message, <columns for the rewards>}``.
        reward_funcs: TRL-style ``fn(completions, **columns) -> list[float]``.
        prompts_per_batch: prompts per decoding loop (memory vs speed); each batch holds
            ``prompts_per_batch * samples_per_prompt`` completions.
        system_message, enable_thinking: passed to the chat template (as in training).
        stop_at: the rollout's stop rule (``grpo_core.rollout.STOP_RULES``), as in training.
        progress: called as ``progress(done_prompts, total_prompts)`` after each batch.
    """
    funcs, _ = reward_list(reward_funcs)
    if samples_per_prompt < 1 or not rows:
        raise ValueError("score_samples needs rows and samples_per_prompt >= 1")
    if prompts_per_batch < 1:
        raise ValueError(f"prompts_per_batch must be >= 1, got {prompts_per_batch}")
    scores: dict[str, list[Tensor]] = {reward_name(fn): [] for fn in funcs}
    texts: list[str] = []
    truncated: list[Tensor] = []
    for start in range(0, len(rows), prompts_per_batch):
        chunk = list(rows[start:start + prompts_per_batch])
        prompts = [chat_prompt(tokenizer, row["prompt"], system_message=system_message,
                               enable_thinking=enable_thinking) for row in chunk]
        rollout = sample_group(model, tokenizer, prompts, samples_per_prompt,
                               max_new_tokens=max_new_tokens, temperature=temperature,
                               top_p=top_p, seed=seed * 1_000_003 + start, stop_at=stop_at)
        columns = group_columns(chunk, samples_per_prompt)
        for fn in funcs:
            values = call_reward(fn, rollout.texts, columns)
            scores[reward_name(fn)].append(values.view(len(chunk), samples_per_prompt))
        texts.extend(rollout.texts)
        truncated.append(rollout.truncated.cpu())
        if progress is not None:
            progress(min(start + prompts_per_batch, len(rows)), len(rows))
    return ScoredSamples({name: torch.cat(parts) for name, parts in scores.items()}, texts,
                         torch.cat(truncated))


def score_samples(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    reward_funcs: RewardFn | Sequence[RewardFn],
    *,
    samples_per_prompt: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    prompts_per_batch: int = 4,
    stop_at: str | None = None,
    progress: Callable[[int, int], Any] | None = None,
) -> tuple[dict[str, Tensor], list[str]]:
    """Sample ``samples_per_prompt`` completions for every row and score each one
    (:func:`sample_and_score` without the truncation flags).

    Returns:
        ``({reward name: [N, k] scores}, texts)``: row ``i`` of each tensor holds prompt
        ``i``'s k scores; ``texts`` are the ``N * k`` completions, group after group.
    """
    scored = sample_and_score(model, tokenizer, rows, reward_funcs,
                              samples_per_prompt=samples_per_prompt,
                              max_new_tokens=max_new_tokens, temperature=temperature,
                              top_p=top_p, seed=seed, prompts_per_batch=prompts_per_batch,
                              stop_at=stop_at, progress=progress)
    return scored.scores, scored.texts


# ----------------------------------------------------------------------------- standard errors


def matrix_problem_means(scores: Tensor) -> list[float]:
    """``[N, k]`` scores -> each problem's mean over its k samples (``stats.problem_means``)."""
    if scores.dim() != 2 or scores.numel() == 0:
        raise ValueError(f"scores must be a non-empty [problems, samples] matrix, got "
                         f"{tuple(scores.shape)}")
    return list(problem_means(dict(enumerate(scores.double().tolist()))).values())


def pass_at_k_metrics(matrix: Tensor, key: str) -> dict[str, float]:
    """``{"<key>/pass@1": ..., "<key>/pass@<k>": ...}`` (k = the matrix's columns, when above
    1), each with ``/sem`` over problems (two problems or more), from ``[N, k]`` scores of a
    pass/fail reward: a sample passes when it scores :data:`PASS_SCORE`."""
    if matrix.dim() != 2 or matrix.numel() == 0:
        raise ValueError(f"scores must be a non-empty [problems, samples] matrix, got "
                         f"{tuple(matrix.shape)}")
    passed = dict(enumerate((matrix >= PASS_SCORE).tolist()))
    metrics: dict[str, float] = {}
    for k in sorted({1, matrix.shape[1]}):
        per_problem = list(problem_pass_at_k(passed, k).values())
        metrics[f"{key}/pass@{k}"] = mean(per_problem)
        if len(per_problem) >= 2:
            metrics[f"{key}/pass@{k}/sem"] = standard_error(per_problem)
    return metrics


def eval_metrics(scores: dict[str, Tensor], baseline: dict[str, list[float]] | None = None,
                 prefix: str = "eval", pass_fail: Sequence[str] = ()) -> dict[str, float]:
    """The held-out metrics of one evaluation from its ``{name: [N, k]}`` score matrices.

    ``baseline``: ``{name: N floats}`` per-problem means at step 0 (same problems, same order);
    with it, ``delta_sem`` is logged. ``pass_fail``: the names whose scores are pass/fail
    (:func:`pass_at_k_metrics`). Returns ``{"<prefix>/<name>": mean, "<prefix>/<name>/sem":
    ..., "<prefix>/<name>/delta_sem": ..., "<prefix>/<name>/pass@1": ...}`` (the standard
    errors only with at least two problems).
    """
    unknown = sorted(set(pass_fail) - set(scores))
    if unknown:
        raise ValueError(f"pass_fail names {unknown}, which this evaluation did not score "
                         f"(it scored {sorted(scores)})")
    metrics: dict[str, float] = {}
    for name, matrix in scores.items():
        means = matrix_problem_means(matrix)
        key = f"{prefix}/{name}"
        metrics[key] = mean(matrix.double().flatten().tolist())
        if len(means) >= 2:
            metrics[f"{key}/sem"] = standard_error(means)
            if baseline is not None and name in baseline:
                before = baseline[name]
                if len(before) != len(means):
                    raise ValueError(f"the step-0 means of {name!r} cover {len(before)} "
                                     f"problems, this evaluation {len(means)}")
                metrics[f"{key}/delta_sem"] = standard_error(
                    [now - then for now, then in zip(means, before, strict=True)])
        if name in pass_fail:
            metrics.update(pass_at_k_metrics(matrix, key))
    return metrics


# ----------------------------------------------------------------------------- the evaluator


class HeldOutEvaluator:
    """An ``evaluate`` hook for ``train``: each reward function's mean on fixed held-out rows,
    with standard errors over problems (the module's docstring gives the metrics).

    Every call samples the same rows with the same seed and batching; the call at step 0 keeps
    each problem's mean (``baseline``) for ``delta_sem``. ``train`` saves that baseline in
    the run folder (``eval_state.json``, :meth:`state_dict`) and loads it on ``--resume``,
    and writes the completions of each call to ``samples.jsonl`` (:meth:`sample_rows`).

    Args:
        rows: the held-out rows ``{"prompt": ..., <reward columns>}``; a ``task_id`` column
            names each problem (else its index in ``rows``).
        reward_funcs: what to score (e.g. the true score and the proxy).
        samples_per_prompt: completions per problem (k).
        max_new_tokens, temperature, top_p, system_message, enable_thinking, stop_at:
            sampling settings; None (the default) takes the run's (``TrainConfig``, through
            :meth:`bind`), so the held-out samples are drawn exactly as the training ones.
        seed: the sampling seed of every evaluation.
        prefix: the metrics' prefix (``eval``).
        pass_fail: the reward functions (or their names) whose scores are pass/fail, for
            which pass@1 and pass@k are logged (the module's docstring).
        completions_per_batch: completions per decoding loop: ``completions_per_batch //
            samples_per_prompt`` prompts at a time (at least one).
    """

    def __init__(
        self,
        rows: Sequence[dict[str, Any]],
        reward_funcs: RewardFn | Sequence[RewardFn],
        *,
        samples_per_prompt: int,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        system_message: str | None = None,
        enable_thinking: bool | None = None,
        stop_at: str | None = None,
        seed: int = 0,
        prefix: str = "eval",
        pass_fail: Sequence[RewardFn | str] = (),
        completions_per_batch: int = 16,
    ):
        self.rows = [dict(row) for row in rows]
        if not self.rows:
            raise ValueError("a held-out evaluation needs at least one row")
        if not isinstance(samples_per_prompt, int) or samples_per_prompt < 1:
            raise ValueError(f"samples_per_prompt must be an int >= 1, got {samples_per_prompt!r}")
        self.reward_funcs, _ = reward_list(reward_funcs)
        self.pass_fail = [item if isinstance(item, str) else reward_name(item)
                          for item in pass_fail]
        scored = {reward_name(fn) for fn in self.reward_funcs}
        if not set(self.pass_fail) <= scored:
            raise ValueError(f"pass_fail names {sorted(set(self.pass_fail) - scored)}, which "
                             f"are not among the reward functions {sorted(scored)}")
        self.samples_per_prompt = samples_per_prompt
        self.seed, self.prefix = seed, prefix
        self.prompts_per_batch = max(1, completions_per_batch // samples_per_prompt)
        self.prompt_ids = [row.get("task_id", index) for index, row in enumerate(self.rows)]
        self.settings: dict[str, Any] = {
            "max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p,
            "system_message": system_message, "enable_thinking": enable_thinking,
            "stop_at": stop_at}
        self.bound: dict[str, Any] = {}
        self.baseline: dict[str, list[float]] | None = None  # per-problem means at step 0
        self.last: ScoredSamples | None = None
        self.last_step: int | None = None

    def bind(self, config: Any) -> None:
        """Take the sampling settings left as None from the run's ``TrainConfig``."""
        self.bound = {name: getattr(config, name) for name in self.settings}

    def sampling(self) -> dict[str, Any]:
        """The settings each evaluation samples with (explicit ones, else the bound run's)."""
        defaults = {"temperature": 1.0, "top_p": 1.0, "system_message": None,
                    "enable_thinking": False, "stop_at": None}
        chosen = {name: value if value is not None else self.bound.get(name, defaults.get(name))
                  for name, value in self.settings.items()}
        if chosen["max_new_tokens"] is None:
            raise ValueError("HeldOutEvaluator needs max_new_tokens: pass it, or let train "
                             "bind the run's settings")
        return chosen

    def __call__(self, model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        scored = sample_and_score(model, tokenizer, self.rows, self.reward_funcs,
                                  samples_per_prompt=self.samples_per_prompt, seed=self.seed,
                                  prompts_per_batch=self.prompts_per_batch, **self.sampling())
        self.last, self.last_step = scored, step
        if step == 0:
            self.baseline = {name: matrix_problem_means(values)
                             for name, values in scored.scores.items()}
        return eval_metrics(scored.scores, self.baseline, self.prefix, self.pass_fail)

    def sample_rows(self, per_problem: int | None = None) -> list[dict[str, Any]]:
        """The last evaluation's completions, ``per_problem`` (None: all) of each problem's
        first samples: ``{"prompt_id", "sample", "completion", "truncated", <fn>: value}``."""
        if self.last is None:
            return []
        k = self.samples_per_prompt
        kept = k if per_problem is None else min(k, per_problem)
        rows = []
        for i, prompt_id in enumerate(self.prompt_ids):
            for j in range(kept):
                row = {"prompt_id": prompt_id, "sample": j, "completion": self.last.texts[i * k + j],
                       "truncated": bool(self.last.truncated[i * k + j])}
                row.update({name: values[i, j].item() for name, values in self.last.scores.items()})
                rows.append(row)
        return rows

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs: the step-0 per-problem means, and what they were of."""
        return {"prompt_ids": list(self.prompt_ids), "samples_per_prompt": self.samples_per_prompt,
                "seed": self.seed,
                "baseline": None if self.baseline is None else
                {name: list(means) for name, means in self.baseline.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore the step-0 means of :meth:`state_dict`; False (with a warning, nothing
        changed) when they were computed on other problems, samples or seed."""
        same = (list(state.get("prompt_ids", [])) == list(self.prompt_ids)
                and state.get("samples_per_prompt") == self.samples_per_prompt
                and state.get("seed") == self.seed)
        if not same:
            warnings.warn("the saved held-out evaluation was of other problems, samples or seed: "
                          "its step-0 means are not used (no delta_sem)", stacklevel=2)
            return False
        baseline = state.get("baseline")
        self.baseline = None if baseline is None else {
            name: [float(value) for value in values] for name, values in baseline.items()}
        return True
