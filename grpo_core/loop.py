"""The GRPO training loop: prompts -> rollouts -> rewards -> advantages -> log-probs -> loss -> step.

Lecture, "One GRPO training round", run for many rounds (notebook 07). One *step* is one
optimizer update, as in TRL: a fresh rollout is sampled every ``num_iterations`` steps and
reused for the steps in between (the old log-probs are computed once, when it is sampled).

Each step appends one line of metrics, under TRL's names (docs/design.md, "Metrics"), to
``<out_dir>/metrics.jsonl`` and flushes it at once; a held-out evaluation adds a ``"step": 0``
line first (the base model, before any update). Every completion, trained on or held out, goes
to ``<out_dir>/samples.jsonl`` (``grpo_core.run_files.sample_record``; ``keep_samples=False``
turns it off). Ctrl-C stops the run cleanly: the metrics are kept, a checkpoint is saved in
``<out_dir>/checkpoint/``, and ``train(..., resume=True)`` continues from it with the next step
number. An exception (e.g. in a reward function) also saves a checkpoint, then propagates.

The loop keeps the step and builds the rows; ``grpo_core.run_files`` writes the run folder's
files (and reads them back) and ``grpo_core.checkpoints`` the checkpoint. Imports the math,
rollouts, rewards (``grpo_core.scoring`` calls them), the evaluator's protocol and profiles;
never the plots (a plot is passed in as a callback).
"""

from __future__ import annotations

import copy
import math
import numbers
import os
import random
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_core.advantages import SCALES, flat_groups, group_advantages
from grpo_core.checkpoints import checkpoint_step, restore_checkpoint, save_checkpoint
from grpo_core.dynamic_sampling import refill_seed, sample_with_refills
from grpo_core.evaluation import Evaluator, as_evaluator
from grpo_core.logprobs import token_logprobs
from grpo_core.lora import adapter_disabled, add_lora, has_adapter
from grpo_core.loss import LOSS_TYPES, grpo_loss, masked_mean
from grpo_core.packed import PackedLinear, pack_linears
from grpo_core.packed_decoder import can_decode
from grpo_core.precision import HALF_DTYPES, SAMPLING_DTYPES, config_fields, precision_plan
from grpo_core.profiles import Profile
from grpo_core.provenance import CODE_KEY, DRAWS_KEY, code_version, draws_fingerprint
from grpo_core.rewards import RewardFn
from grpo_core.rollout import Rollout, chat_prompt, sample_group, stop_rule
from grpo_core.run_files import (
    EVAL_STATE_FILE,
    METRICS_FILE,
    SAMPLES_FILE,
    JsonlLog,
    read_eval_state,
    sample_record,
    write_config,
    write_eval_state,
)
from grpo_core.sampling_correction import MODES as CORRECTION_MODES
from grpo_core.sampling_correction import TRL_DEFAULT_CLIP_MAX, mismatch_summary, sampler_weights
from grpo_core.scoring import compute_rewards, group_columns, reward_list, reward_name

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Callback = Callable[[dict[str, Any]], Any]

CORRECTION_CHOICES = ("measure", *CORRECTION_MODES)  # "measure": the metrics, no weights


@dataclass
class TrainConfig:
    """Every knob of the loop. ``TrainConfig.from_profile(profile, beta=0.04)`` takes the sizes
    from a profile; the rest are the loop's own defaults (TRL's, except ``loss_type``).

    Attributes:
        group_size: completions per prompt (k, TRL's ``num_generations``), at least 2.
        prompts_per_step: prompts sampled per rollout.
        max_new_tokens: completion budget (TRL's ``max_completion_length``).
        stop_at: a ``grpo_core.rollout.STOP_RULES`` name: a completion also ends with the token
            that meets it (``"code_block"``: the close of its first fenced code block; the
            code experiments set it), and is then not truncated. None: EOS and the budget.
        temperature, top_p: sampling settings; log-probs are taken at the same temperature.
        max_steps: optimizer steps in the whole run (a resumed run continues up to it).
        learning_rate: AdamW's, constant (no schedule).
        seed: seeds torch, the prompt choice and the sampling of every step.
        beta: KL weight; a reference model is created only when ``beta > 0``.
        num_iterations: updates per rollout (TRL's ``num_iterations``, PPO's epochs).
        loss_type: ``grpo`` (the GRPO paper's: each sequence's token mean), ``bnpo``,
            ``dr_grpo`` or ``dapo`` (TRL's default).
        scale: advantage scaling, ``group``, ``batch`` or ``none``.
        epsilon, epsilon_high: the clip band ``[1 - epsilon, 1 + epsilon_high]``.
        max_grad_norm: gradient clipping (None: no clipping); ``grad_norm`` is logged before it.
        weight_decay, adam_betas: AdamW's.
        micro_batch_size: rows per forward/backward (gradient accumulation); None = the whole
            batch. Must divide ``prompts_per_step * group_size``.
        save_every: also save a checkpoint every N steps (0: only at the end or when stopped).
        eval_every: call ``train``'s ``evaluate`` at step 0 (before any update: its own
            ``"step": 0`` metrics line), after every N-th step and after the last step (0:
            never); its numbers join that step's metrics.
        keep_samples: write ``samples.jsonl`` beside ``metrics.jsonl`` (needs an ``out_dir``):
            every training completion, and the held-out completions of each evaluation.
        samples_max_chars: a completion in ``samples.jsonl`` is cut after this many characters
            (its row then says ``"cut": true`` and keeps the full length in ``chars``).
        samples_eval_per_problem: held-out completions kept per problem and evaluation (the
            first ones); None keeps them all. A row is at most about ``samples_max_chars +
            250`` bytes, so a file holds at most about ``(max_steps * batch_size +
            evaluations * problems * min(k, this)) * (samples_max_chars + 250)`` bytes:
            2.2 MB for 60 steps of 16 completions and seven evaluations of 115 problems x 2
            with every completion past 600 characters (about 1.2 MB when every completion
            fills the cpu profile's 64 tokens, some 220 characters).
        save_checkpoint: False never writes a checkpoint (tests, throwaway runs).
        autocast_dtype: e.g. ``"bfloat16"`` on a GPU with float32 weights; None: no autocast.
        sampling_dtype: e.g. ``"bfloat16"``: sample rollouts (and held-out evaluations) from a
            copy of the policy in this dtype, refreshed after every update. On a CPU, decoding
            reads every weight once per token, so half the bytes is close to half the time;
            the log-probs and the update still use the float32 weights (under autocast).
            ``"float32"`` makes a full-precision copy (useful with ``sampling_packed``).
            None samples from the policy itself.
        sampling_packed: pack the sampling copy's linear layers once per refresh for the
            CPU's oneDNN kernel (``grpo_core.packed``): about a third less time per decoding
            step in float32 on a CPU. Needs ``sampling_dtype`` and a CPU model.
        attn_implementation: the attention kernel of the log-prob passes (forward and
            backward), e.g. ``"eager"``; None keeps the model's. Sampling keeps the model's.
            On a CPU, plain matmuls (``"eager"``) run the backward of these short sequences
            faster than SDPA's flash kernel (docs/performance.md, "Where the time goes").
        loss_scaling: scale the loss before backward (``torch.amp.GradScaler``), for float16
            autocast, whose small range would underflow small gradients.
        gradient_checkpointing: recompute each layer's activations in the backward pass
            (less memory, about a third more compute; ``grpo_core.hardware.memory_plan``).
        share_prompt_pass: the log-prob passes run each group's prompt once and its k
            completions on top of its key/value cache (``logprobs.shared_prompt_logits``):
            the same log-probs and gradients up to float rounding, fewer multiply-adds. Off
            under gradient checkpointing, which keeps no cache.
        lora_rank: 0 trains every weight; r >= 1 adds LoRA adapters of rank r
            (``grpo_core.lora``) and trains only them. With beta > 0 the reference is then the
            base model with the adapters switched off: no second copy.
        lora_alpha: LoRA's scale numerator (default ``2 * lora_rank``).
        lora_targets: the module names to adapt, or ``"all-linear"``.
        system_message: optional system prompt for the chat template.
        enable_thinking: passed to the chat template (Qwen3; off in the course).
        dynamic_sampling: sample the step's groups that gave no signal again, until every
            group has signal or ``max_refill_generations`` extra completions were sampled
            (``grpo_core.dynamic_sampling``; logs ``sampling/...``). Off: TRL's behaviour.
        max_refill_generations: the cap on extra completions per step under
            ``dynamic_sampling`` (whole groups: at most ``cap // group_size`` refills);
            None: ``batch_size``, at most twice the plain step's sampling.
        sampling_correction: one of ``grpo_core.sampling_correction.MODES`` (TRL's
            ``vllm_importance_sampling_mode``): weight each completion's policy term by the
            learner's probability over the sampling copy's, truncated or masked outside
            ``[0, sampling_correction_cap]`` (notebook 13); ``"measure"`` only logs the
            ``sampling/`` mismatch metrics (the control arm of a comparison). Either costs one
            forward pass of the copy over the rollout per step. None: neither. Needs
            ``sampling_dtype``.
        sampling_correction_cap: the band's top (TRL's ``vllm_importance_sampling_cap``, 3).
    """

    group_size: int = 8
    prompts_per_step: int = 2
    max_new_tokens: int = 64
    stop_at: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_steps: int = 30
    learning_rate: float = 2e-5
    seed: int = 0
    beta: float = 0.0
    num_iterations: int = 1
    loss_type: str = "grpo"
    scale: str = "group"
    epsilon: float = 0.2
    epsilon_high: float | None = None
    max_grad_norm: float | None = 1.0
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    micro_batch_size: int | None = None
    save_every: int = 0
    eval_every: int = 0
    keep_samples: bool = True
    samples_max_chars: int = 600
    samples_eval_per_problem: int | None = 2
    save_checkpoint: bool = True
    autocast_dtype: str | None = None
    sampling_dtype: str | None = None
    sampling_packed: bool = False
    attn_implementation: str | None = None
    loss_scaling: bool = False
    gradient_checkpointing: bool = False
    share_prompt_pass: bool = True
    lora_rank: int = 0
    lora_alpha: float | None = None
    lora_targets: str | tuple[str, ...] = "all-linear"
    system_message: str | None = None
    enable_thinking: bool = False
    dynamic_sampling: bool = False
    max_refill_generations: int | None = None
    sampling_correction: str | None = None
    sampling_correction_cap: float = TRL_DEFAULT_CLIP_MAX

    @classmethod
    def from_profile(cls, profile: Profile, **overrides: Any) -> TrainConfig:
        """Sizes, sampling settings, steps, learning rate and seed from ``profile``, and the
        precision plan's autocast, loss scaling and sampling copy
        (``grpo_core.precision.precision_plan``: the same plan ``load_policy`` applies to the
        model), then ``overrides``."""
        names = ("group_size", "prompts_per_step", "max_new_tokens", "temperature", "top_p",
                 "max_steps", "learning_rate", "seed", "enable_thinking")
        values = {name: getattr(profile, name) for name in names}
        values.update(config_fields(precision_plan(profile)))
        values.update(overrides)
        return cls(**values)

    @property
    def batch_size(self) -> int:
        """Completions per rollout: ``prompts_per_step * group_size``."""
        return self.prompts_per_step * self.group_size

    @property
    def refill_cap(self) -> int:
        """Extra completions dynamic sampling may sample per step (``max_refill_generations``,
        else ``batch_size``)."""
        cap = self.max_refill_generations
        return self.batch_size if cap is None else cap

    def validate(self) -> TrainConfig:
        """Raise ``ValueError`` with a clear message for settings that cannot work."""
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(
                f"group_size must be an int >= 2: a completion needs at least one sibling to be "
                f"compared with (the group is the baseline), got {self.group_size!r}"
            )
        _positive_int("prompts_per_step", self.prompts_per_step)
        _positive_int("max_new_tokens", self.max_new_tokens)
        if self.stop_at is not None:
            stop_rule(self.stop_at)  # an unknown name says which ones exist
        _positive_int("num_iterations", self.num_iterations)
        _positive_int("samples_max_chars", self.samples_max_chars)
        if self.samples_eval_per_problem is not None:
            _positive_int("samples_eval_per_problem", self.samples_eval_per_problem)
        if not isinstance(self.lora_rank, int) or self.lora_rank < 0:
            raise ValueError(f"lora_rank must be an int >= 0 (0: no LoRA), got {self.lora_rank!r}")
        if not isinstance(self.eval_every, int) or self.eval_every < 0:
            raise ValueError(f"eval_every must be an int >= 0, got {self.eval_every!r}")
        cap = self.max_refill_generations
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 0):
            raise ValueError(f"max_refill_generations must be None or an int >= 0, got {cap!r}")
        if not isinstance(self.max_steps, int) or self.max_steps < 0:
            raise ValueError(f"max_steps must be an int >= 0, got {self.max_steps!r}")
        if self.micro_batch_size is not None:
            _positive_int("micro_batch_size", self.micro_batch_size)
            if self.batch_size % self.micro_batch_size:
                raise ValueError(
                    f"prompts_per_step x group_size = {self.prompts_per_step} x {self.group_size} "
                    f"= {self.batch_size} completions do not fit micro-batches of "
                    f"{self.micro_batch_size}: the batch must be a whole number of micro-batches"
                )
        for name, allowed in (("autocast_dtype", HALF_DTYPES), ("sampling_dtype", SAMPLING_DTYPES)):
            if getattr(self, name) not in (None, *allowed):
                raise ValueError(f"{name} must be None or one of {allowed}, "
                                 f"got {getattr(self, name)!r}")
        if self.sampling_packed and self.sampling_dtype is None:
            raise ValueError("sampling_packed packs the sampling copy's layers: set "
                             "sampling_dtype too (e.g. 'float32')")
        if self.sampling_correction not in (None, *CORRECTION_CHOICES):
            raise ValueError(f"sampling_correction must be None or one of "
                             f"{CORRECTION_CHOICES}, got {self.sampling_correction!r}")
        if self.sampling_correction and self.sampling_dtype is None:
            raise ValueError("sampling_correction weighs the sampling copy's completions: set "
                             "sampling_dtype too (without a copy the sampler is the learner)")
        if not self.sampling_correction_cap > 0:
            raise ValueError(f"sampling_correction_cap must be > 0, got "
                             f"{self.sampling_correction_cap!r}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")
        if self.beta < 0 or not self.learning_rate >= 0 or not self.temperature > 0:
            raise ValueError("beta and learning_rate must be >= 0 and temperature > 0")
        return self


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


@dataclass
class RunResult:
    """What ``train`` returns.

    Attributes:
        model: the trained policy (eval mode); with ``lora_rank`` the ``peft`` model that
            wraps the one passed in.
        ref_model: the frozen reference model, or None (always None when ``beta == 0``).
        metrics: one dict per step of this call (resumed steps included only if logged now),
            led by the ``"step": 0`` evaluation when this call ran it (no ``reward`` in it).
        step: the last completed step number (steps count from 1).
        stopped: ``"finished"``, ``"interrupted"`` (Ctrl-C) or ``"error"``.
        out_dir: where metrics, config and checkpoint went (None: nothing written).
        last_texts: the completions of the last rollout.
    """

    model: Any
    ref_model: Any
    metrics: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    stopped: str = "finished"
    out_dir: Path | None = None
    last_texts: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- one rollout


@dataclass
class Batch:
    """One rollout and everything computed from it before the updates (``B`` rows)."""

    rollout: Rollout
    input_ids: Tensor  # [B, P + C]
    attention_mask: Tensor  # [B, P + C]
    advantages: Tensor  # [B]
    old_logps: Tensor | None  # [B, C], only when the rollout is reused
    ref_logps: Tensor | None  # [B, C], only when beta > 0
    metrics: dict[str, float]  # reward and completion metrics of this rollout
    prompt_rows: list[dict[str, Any]] = field(default_factory=list)  # the chosen rows
    total: Tensor | None = None  # [B] weighted reward
    per_fn: dict[str, Tensor] = field(default_factory=dict)  # {name: [B]} each function's
    sampler_logps: Tensor | None = None  # [B, C], the sampling copy's, when there is one

    @property
    def width(self) -> int:
        return self.rollout.completion_ids.size(1)


def choose_prompts(rows: list[dict[str, Any]], count: int, seed: int, step: int) -> list[dict[str, Any]]:
    """``count`` distinct rows for ``step``: the same seed and step always give the same rows."""
    if count > len(rows):
        raise ValueError(f"prompts_per_step={count} but only {len(rows)} prompts are available")
    return random.Random(f"{seed}-{step}").sample(rows, count)


def make_rollout(run: _Run, step: int) -> Batch:
    """Sample prompts and a group per prompt, score them (sampling again for the groups with
    no signal under ``dynamic_sampling``), and compute advantages (and the old and reference
    log-probs when they are needed)."""
    cfg = run.config
    chosen = choose_prompts(run.rows, cfg.prompts_per_step, cfg.seed, step)
    texts = [
        chat_prompt(run.tokenizer, row["prompt"], system_message=cfg.system_message,
                    enable_thinking=cfg.enable_thinking)
        for row in chosen
    ]
    seconds = {"time/generate": 0.0, "time/reward": 0.0}

    def sample(groups: list[int], round_: int) -> tuple[Rollout, Tensor, dict[str, Tensor]]:
        started = time.perf_counter()
        with run.sampling_context():
            rollout = sample_group(
                run.sampling_model, run.tokenizer, [texts[g] for g in groups], cfg.group_size,
                max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                seed=cfg.seed * 1_000_003 + step if round_ == 0
                else refill_seed(cfg.seed, step, round_),
                stop_at=cfg.stop_at)
        sampled = time.perf_counter()
        columns = group_columns([chosen[g] for g in groups], cfg.group_size)
        total, per_fn = compute_rewards(run.reward_funcs, run.reward_weights, rollout.texts,
                                        columns)
        seconds["time/generate"] += sampled - started
        seconds["time/reward"] += time.perf_counter() - sampled
        return rollout, total, per_fn

    refills = None
    if cfg.dynamic_sampling:
        rollout, total, per_fn, refills = sample_with_refills(
            sample, len(chosen), cfg.group_size, cfg.refill_cap, run.tokenizer.pad_token_id)
    else:
        rollout, total, per_fn = sample(list(range(len(chosen))), 0)
    scored = time.perf_counter()
    advantages = group_advantages(total, cfg.group_size, scale=cfg.scale)
    device = rollout.completion_ids.device
    batch = Batch(rollout, rollout.input_ids, rollout.attention_mask, advantages.to(device),
                  None, None,
                  rollout_metrics(rollout, total, per_fn, cfg.group_size), chosen, total, per_fn)
    if refills is not None:
        batch.metrics.update(refills.metrics())
    if cfg.sampling_correction:
        batch.sampler_logps = sampler_logps(run, batch)
    if cfg.num_iterations > 1:
        batch.old_logps = frozen_logps(run, run.model, batch)
    if run.ref_model is not None:
        batch.ref_logps = frozen_logps(run, run.ref_model, batch)
    elif cfg.beta > 0 and has_adapter(run.model):  # the base model is the reference
        with adapter_disabled(run.model):
            batch.ref_logps = frozen_logps(run, run.model, batch)
    batch.metrics.update({**seconds, "time/frozen_logps": time.perf_counter() - scored})
    return batch


def rollout_metrics(
    rollout: Rollout, total: Tensor, per_fn: dict[str, Tensor], group_size: int
) -> dict[str, float]:
    """TRL's generation metrics for one rollout (plus ``completions/mean_chars``)."""
    lengths = rollout.lengths.float()
    metrics = {"reward": total.mean().item(), "reward_std": total.std().item()}
    for name, values in per_fn.items():
        metrics[f"rewards/{name}/mean"] = values.mean().item()
        metrics[f"rewards/{name}/std"] = values.std().item()
    metrics["frac_reward_zero_std"] = flat_groups(total, group_size).float().mean().item()
    metrics["completions/mean_length"] = lengths.mean().item()
    metrics["completions/min_length"] = lengths.min().item()
    metrics["completions/max_length"] = lengths.max().item()
    metrics["completions/clipped_ratio"] = rollout.truncated.float().mean().item()
    metrics["completions/mean_chars"] = sum(map(len, rollout.texts)) / len(rollout.texts)
    return metrics


@torch.no_grad()
def frozen_logps(run: _Run, model: Any, batch: Batch) -> Tensor:
    """``[B, C]`` log-probs without gradient (old policy or reference), micro-batch by micro-batch."""
    parts = []
    for rows in run.micro_batches():
        with run.autocast(), run.attention(model):
            parts.append(token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows],
                                        batch.width, temperature=run.config.temperature,
                                        share_prompts=run.config.share_prompt_pass))
    return torch.cat(parts)


@torch.no_grad()
def sampler_logps(run: _Run, batch: Batch) -> Tensor:
    """``[B, C]`` float32 log-probs of the sampled tokens under the sampling copy (its own
    dtype, no autocast), micro-batch by micro-batch: what a vLLM sampler reports to TRL.

    What this leaves out: the copy's numbers come from one forward pass over the finished
    completion, not from the decoding steps that drew it (which read the key/value cache):
    the same weights and dtype, a different order of sums.
    """
    parts = []
    with run.sampling_context():
        for rows in run.micro_batches():
            parts.append(token_logprobs(run.sampler, batch.input_ids[rows],
                                        batch.attention_mask[rows], batch.width,
                                        temperature=run.config.temperature).float())
    return torch.cat(parts)


def sampler_metrics(learner: Tensor, sampler: Tensor, mask: Tensor,
                    weights: Tensor | None) -> dict[str, float]:
    """TRL's ``sampling/`` metrics for one micro-batch: the per-token log-prob difference
    (learner - sampling copy; ``mean`` of its absolute value, ``max``) and, under a
    correction, the importance weights' extremes and mean and the share of completion tokens
    they drop (weight 0)."""
    summary = mismatch_summary(learner, sampler, mask)
    found = {"sampling/sampling_logp_difference/mean": summary["mean_abs"],
             "sampling/sampling_logp_difference/max": summary["max_abs"]}
    if weights is not None:
        values = weights.expand_as(mask)[mask.bool()]  # a sequence's weight on each token
        found.update({"sampling/importance_sampling_ratio/min": values.min().item(),
                      "sampling/importance_sampling_ratio/mean": values.mean().item(),
                      "sampling/importance_sampling_ratio/max": values.max().item(),
                      "sampling/dropped_token_share": (values == 0).float().mean().item()})
    return found


# ----------------------------------------------------------------------------- one update


def update(run: _Run, batch: Batch) -> dict[str, float]:
    """One optimizer step on ``batch``: forward, ``grpo_loss``, backward, clip, AdamW.

    Returns the step's update metrics: ``loss``, ``grad_norm``, ``entropy``, the clip ratios,
    ``kl`` (beta > 0) and the ratio's extremes (``ratio/min``, ``ratio/max``; our own names).
    """
    cfg, model = run.config, run.model
    started = time.perf_counter()
    model.train()
    run.optimizer.zero_grad(set_to_none=True)
    run.release_sampler()
    mask = batch.rollout.completion_mask
    total_tokens = mask.sum().clamp(min=1)
    sums: dict[str, float] = {}
    loss_value, ratio_min, ratio_max = 0.0, math.inf, -math.inf
    for rows in run.micro_batches():
        with run.autocast(), run.attention(model):
            logps, entropy = token_logprobs(model, batch.input_ids[rows], batch.attention_mask[rows],
                                            batch.width, temperature=cfg.temperature,
                                            return_entropy=True,
                                            share_prompts=cfg.share_prompt_pass)
        old = None if batch.old_logps is None else batch.old_logps[rows]
        ref = None if batch.ref_logps is None else batch.ref_logps[rows]
        weights, mismatch = None, {}
        if batch.sampler_logps is not None:
            # TRL compares the sampler with the policy that sampled: the old log-probs
            learner = (logps if old is None else old).detach().float()
            if cfg.sampling_correction != "measure":
                weights = sampler_weights(learner, batch.sampler_logps[rows], mask[rows],
                                          cfg.sampling_correction, None,
                                          cfg.sampling_correction_cap)
            mismatch = sampler_metrics(learner, batch.sampler_logps[rows], mask[rows], weights)
        loss, metrics = grpo_loss(
            logps, old, batch.advantages[rows], mask[rows], ref_token_logps=ref, beta=cfg.beta,
            epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high, loss_type=cfg.loss_type,
            max_completion_length=cfg.max_new_tokens, num_items_in_batch=total_tokens,
            sampler_weights=weights)
        metrics.update(mismatch)
        share = 1.0 if cfg.loss_type == "dapo" else (rows.stop - rows.start) / mask.size(0)
        scaled = loss * share
        (scaled if run.scaler is None else run.scaler.scale(scaled)).backward()
        loss_value += loss.item() * share
        token_share = (mask[rows].sum() / total_tokens).item()
        metrics["entropy"] = masked_mean(entropy, mask[rows]).item()
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + value * token_share
        ratio_min, ratio_max = _ratio_extremes(logps, old, mask[rows], ratio_min, ratio_max)
    backward_done = time.perf_counter()
    max_norm = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm
    if run.scaler is not None:
        run.scaler.unscale_(run.optimizer)  # clip and log the true gradient, not the scaled one
    grad_norm = torch.nn.utils.clip_grad_norm_(run.params, max_norm)
    extra = {}
    if run.scaler is None:
        run.optimizer.step()
    else:  # skips the step when the scaled gradient overflowed, and adapts the scale
        run.scaler.step(run.optimizer)
        extra["loss_scale"] = run.scaler.get_scale()
        run.scaler.update()
    run.refresh_sampler()
    finished = time.perf_counter()
    extra.update({"time/forward_backward": backward_done - started,
                  "time/optimizer": finished - backward_done, "time/update": finished - started})
    return {**sums, "ratio/min": ratio_min, "ratio/max": ratio_max, "loss": loss_value,
            "grad_norm": grad_norm.item(), "learning_rate": cfg.learning_rate, **extra}


def _ratio_extremes(logps: Tensor, old: Tensor | None, mask: Tensor, low: float, high: float):
    if old is None:  # on-policy: the ratio is exactly 1
        return min(low, 1.0), max(high, 1.0)
    ratio = torch.exp(logps.detach() - old)[mask.bool()]
    if ratio.numel() == 0:
        return low, high
    return min(low, ratio.min().item()), max(high, ratio.max().item())


# ----------------------------------------------------------------------------- run state


@dataclass
class _Run:
    model: Any
    tokenizer: Any
    config: TrainConfig
    rows: list[dict[str, Any]]
    reward_funcs: list[RewardFn]
    reward_weights: list[float]
    optimizer: torch.optim.Optimizer
    params: list[Tensor]
    ref_model: Any = None
    evaluate: Evaluator | None = None
    scaler: Any = None  # torch.amp.GradScaler when config.loss_scaling
    sampler: Any = None  # the policy's copy in config.sampling_dtype, or None
    out_dir: Path | None = None

    @property
    def sampling_model(self) -> Any:
        """The model rollouts and evaluations sample from."""
        return self.model if self.sampler is None else self.sampler

    def sampling_context(self):
        """Autocast for sampling from the policy itself; nothing for the low-precision copy."""
        return self.autocast() if self.sampler is None else nullcontext()

    @torch.no_grad()
    def refresh_sampler(self) -> None:
        """Cast the policy's weights into the sampling copy (after every update and resume),
        and pack its packed layers' weights again."""
        if self.sampler is None:
            return
        weights = dict(self.model.named_parameters())
        for name, copied in self.sampler.named_parameters():
            weight = weights[name]
            if weight.requires_grad or copied.shape != weight.shape:
                copied.data = weight.detach().to(copied.dtype)
        sources = dict(self.model.named_modules())
        for name, layer in self.sampler.named_modules():
            if isinstance(layer, PackedLinear):
                source = sources[name]
                if source.weight.requires_grad or layer.released:
                    layer.repack(source.weight, source.bias)

    def release_sampler(self) -> None:
        """Free the sampling copy's weights until :meth:`refresh_sampler` casts them again.

        The update's autocast makes its own low-precision casts of the weights and keeps them
        for the backward pass, so during an update the copy would be a second one (270 MB for
        SmolLM2-135M, an eighth of the update's peak memory beyond the weights and AdamW)."""
        if self.sampler is None:
            return
        for copied in self.sampler.parameters():
            copied.data = copied.data.new_empty(0)
        for layer in self.sampler.modules():
            if isinstance(layer, PackedLinear):
                layer.release()

    def evaluates_at(self, step: int) -> bool:
        """Step 0 (the base model), every ``eval_every``-th step and the last step."""
        every = self.config.eval_every
        if self.evaluate is None or every == 0:
            return False
        return step % every == 0 or step == self.config.max_steps

    def prompt_id(self, row: dict[str, Any]) -> Any:
        """A chosen row's id in ``samples.jsonl``: its ``task_id``, else its index in ``rows``."""
        if "task_id" in row:
            return row["task_id"]
        for index, candidate in enumerate(self.rows):
            if candidate is row:
                return index
        return self.rows.index(row)

    def micro_batches(self) -> Iterable[slice]:
        size = self.config.micro_batch_size or self.config.batch_size
        return [slice(start, start + size) for start in range(0, self.config.batch_size, size)]

    @contextmanager
    def attention(self, model: Any):
        """Switch ``model`` to ``config.attn_implementation`` for one pass, then back."""
        wanted = self.config.attn_implementation
        current = getattr(getattr(model, "config", None), "_attn_implementation", None)
        if wanted is None or wanted == current:
            yield
            return
        model.set_attn_implementation(wanted)
        try:
            yield
        finally:
            model.set_attn_implementation(current)

    def autocast(self):
        if self.config.autocast_dtype is None:
            return nullcontext()
        device = next(self.model.parameters()).device.type
        return torch.autocast(device, dtype=getattr(torch, self.config.autocast_dtype))


def as_rows(prompts: Sequence[str | dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompts as dataset rows: ``{"prompt": user_message, <other columns>...}``."""
    rows = [{"prompt": p} if isinstance(p, str) else dict(p) for p in prompts]
    if not rows:
        raise ValueError("train needs at least one prompt")
    bad = [i for i, row in enumerate(rows) if not isinstance(row.get("prompt"), str)]
    if bad:
        raise ValueError(f"every prompt row needs a 'prompt' string; rows {bad[:5]} have none")
    keys = set(rows[0])
    if any(set(row) != keys for row in rows):
        raise ValueError("every prompt row must have the same columns")
    return rows


def make_optimizer(params: list[Tensor], config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW, in its fused kernel where torch has one for these weights (one pass over each
    tensor instead of a dozen: about half the optimizer's time on a CPU), else the default."""
    settings = {"lr": config.learning_rate, "betas": config.adam_betas,
                "weight_decay": config.weight_decay}
    if params and all(p.dtype in (torch.float32, torch.float16, torch.bfloat16) for p in params):
        try:
            return torch.optim.AdamW(params, fused=True, **settings)
        except (RuntimeError, ValueError):  # no fused kernel for this device
            pass
    return torch.optim.AdamW(params, **settings)


def make_sampler(model: Any, dtype: str | None, packed: bool = False) -> Any:
    """A frozen copy of ``model`` in ``dtype`` to sample from, or None when ``dtype`` is None.

    ``packed``: its linear layers become :class:`grpo_core.packed.PackedLinear` (CPU only;
    a LoRA model keeps its layers, which the adapters wrap)."""
    if dtype is None:
        return None
    if packed and next(model.parameters()).device.type != "cpu":
        raise ValueError("sampling_packed packs weights for the CPU's kernel; this model is on "
                         f"{next(model.parameters()).device}")
    # deepcopy's memo hands it the converted weights, so no second float32 copy is ever made;
    # tied weights stay tied (one memo entry), buffers (rotary frequencies) stay float32. A
    # float32 copy of float32 weights shares their memory until its layers are packed.
    memo = {id(p): torch.nn.Parameter(p.detach().to(getattr(torch, dtype)), requires_grad=False)
            for p in model.parameters()}
    sampler = copy.deepcopy(model, memo).eval()
    if packed and not has_adapter(model):
        pack_linears(sampler)
    return sampler


def make_reference(model: Any, beta: float) -> Any:
    """A frozen copy of ``model`` when ``beta > 0``; None otherwise (no memory spent), and
    None for a LoRA model, whose reference is its base with the adapters off."""
    if beta == 0 or has_adapter(model):
        return None
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference


# ----------------------------------------------------------------------------- rows for the run folder


def training_sample_rows(run: _Run, batch: Batch, step: int) -> list[dict[str, Any]]:
    """The rollout's completions, sampled at ``step``, with their rewards and advantages:
    ``samples.jsonl`` rows (``grpo_core.run_files.sample_record``)."""
    rollout, k = batch.rollout, batch.rollout.group_size
    advantages = batch.advantages.detach().float().cpu().tolist()
    total = batch.total.tolist()
    per_fn = {name: values.tolist() for name, values in batch.per_fn.items()}
    rows = []
    for index, text in enumerate(rollout.texts):
        row = batch.prompt_rows[index // k]
        rows.append(sample_record(
            step, "train", run.prompt_id(row), index % k, text,
            truncated=bool(rollout.truncated[index]),
            values={name: values[index] for name, values in per_fn.items()},
            max_chars=run.config.samples_max_chars,
            prompt=None if "task_id" in row else row["prompt"],
            reward=total[index], advantage=advantages[index]))
    return rows


def held_out_sample_rows(run: _Run, step: int) -> list[dict[str, Any]]:
    """The completions of the evaluation that just ran (the evaluator's ``sample_rows``), as
    ``samples.jsonl`` rows."""
    rows = []
    for row in run.evaluate.sample_rows(run.config.samples_eval_per_problem):
        row = dict(row)
        fixed = {name: row.pop(name) for name in ("prompt_id", "sample", "completion",
                                                  "truncated")}
        rows.append(sample_record(step, "held_out", fixed["prompt_id"], fixed["sample"],
                                  fixed["completion"], truncated=fixed["truncated"],
                                  values=row, max_chars=run.config.samples_max_chars))
    return rows


def draw_parts(run: _Run) -> dict[str, Any]:
    """What decides a run's draws beside its seed (``grpo_core.provenance``): the sampler
    (which copy, which decoding step), the precision fields, the device and the CPU's kernel
    classes (torch's, and oneDNN's cap where one is set), the torch and transformers builds."""
    import transformers

    model = run.sampling_model
    copy_said = ("the policy" if run.sampler is None else
                 f"a {'packed ' if run.config.sampling_packed else ''}"
                 f"{run.config.sampling_dtype} copy")
    step = "written out (grpo_core.packed_decoder)" if can_decode(model) else "the model's forward"
    device = next(run.model.parameters()).device.type
    return {
        "sampler": f"grpo_core.rollout.decode_until from {copy_said}; decoding step: {step}",
        "precision": {name: getattr(run.config, name) for name in (
            "autocast_dtype", "loss_scaling", "sampling_dtype", "sampling_packed",
            "attn_implementation")},
        "device": device,
        "cpu_kernels": torch.backends.cpu.get_cpu_capability() if device == "cpu" else None,
        # oneDNN's own kernels (the packed products) follow this cap, not torch's
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA") if device == "cpu" else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def config_record(run: _Run, extra: dict[str, Any]) -> dict[str, Any]:
    """``config.json``'s content: the loop's settings, the reward functions, what the caller
    adds (``extra``), and the run's provenance: the code that ran and what decides its draws
    (``grpo_core.provenance``)."""
    return {
        **extra,
        "train": asdict(run.config),
        "reward_funcs": [reward_name(fn) for fn in run.reward_funcs],
        "reward_weights": run.reward_weights,
        "num_prompts": len(run.rows),
        "model": Path(getattr(run.model.config, "_name_or_path", "") or type(run.model).__name__).name,
        "torch": torch.__version__,
        CODE_KEY: code_version(),
        DRAWS_KEY: draws_fingerprint(draw_parts(run)),
    }


def save_run_checkpoint(run: _Run, out_dir: Path, step: int) -> Path:
    """The run's weights, tokenizer, optimizer and settings at ``step``
    (``grpo_core.checkpoints``)."""
    return save_checkpoint(out_dir, step, run.model, run.tokenizer, run.optimizer,
                           asdict(run.config))


# ----------------------------------------------------------------------------- the loop


def train(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str | dict[str, Any]],
    reward_funcs: RewardFn | Sequence[RewardFn],
    config: TrainConfig,
    out_dir: str | Path | None = None,
    *,
    reward_weights: Sequence[float] | None = None,
    callbacks: Sequence[Callback] = (),
    resume: bool = False,
    progress: bool = True,
    extra_config: dict[str, Any] | None = None,
    evaluate: Evaluator | None = None,
) -> RunResult:
    """Train ``model`` with GRPO on ``prompts`` for ``config.max_steps`` steps.

    Args:
        prompts: user messages, or rows ``{"prompt": ..., <columns>}`` whose other columns
            reach the reward functions as keyword arguments (TRL's dataset columns).
        reward_funcs: one function or several, ``fn(completions, **columns) -> list[float]``.
        config: see :class:`TrainConfig`.
        out_dir: where ``metrics.jsonl``, ``config.json`` and ``checkpoint/`` go; None writes
            nothing.
        reward_weights: one weight per function (default 1.0 each).
        callbacks: called with each step's metrics dict (e.g. a ``LivePlot``).
        resume: continue from ``<out_dir>/checkpoint`` if there is one: its weights and
            optimizer state are loaded into ``model`` and the step count goes on from its
            step (a reused rollout is not saved: the first resumed step samples a fresh one).
            The reference model (beta > 0) is copied from ``model`` *before* the checkpoint
            is loaded, so pass the base model.
        progress: show a tqdm bar with the step and the reward.
        extra_config: more fields for ``config.json`` (experiment name, profile...).
        evaluate: an ``grpo_core.evaluation.Evaluator`` (``HeldOutEvaluator``), or a plain
            ``evaluate(model, tokenizer, step) -> {name: value}`` function, run in eval mode
            without gradients on the sampling model (``sampling_dtype``'s copy, or the
            policy) at step 0, after every ``config.eval_every``-th step and after the last
            one. Step 0 is the model passed in, before any update and before a checkpoint is
            loaded: it gets its own ``{"step": 0, "eval/...": ..., "time/eval": ...}`` line
            first in ``metrics.jsonl``, which also reaches ``callbacks`` and
            ``RunResult.metrics`` (it has no ``reward``); a resumed run whose metrics have
            that line does not evaluate step 0 again. The other evaluations' values join
            their step's metrics. Its ``bind(config)`` is called first, ``sample_rows`` gives
            the completions for ``samples.jsonl``, and ``state_dict``/``load_state_dict`` keep
            its step-0 per-problem means in ``<out_dir>/eval_state.json`` across a resume (a
            plain function has none of these: ``evaluation.as_evaluator``).

    Returns:
        A :class:`RunResult`. Ctrl-C returns one with ``stopped="interrupted"``; any other
        exception saves what it can and propagates.
    """
    run = _start(model, tokenizer, prompts, reward_funcs, config, reward_weights)
    run.evaluate = None if evaluate is None else as_evaluator(evaluate)
    if run.evaluate is not None:
        run.evaluate.bind(config)
    out = None if out_dir is None else Path(out_dir)
    run.out_dir = out
    resume_from = 0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if resume:
            resume_from = checkpoint_step(out) or 0
        write_config(out, config_record(run, {**(extra_config or {}),
                                              "resumed_from_step": resume_from}))
    log = JsonlLog(None if out is None else out / METRICS_FILE, keep_up_to=resume_from)
    samples = JsonlLog(out / SAMPLES_FILE if out is not None and config.keep_samples else None,
                       keep_up_to=resume_from)
    if resume_from and run.evaluate is not None:
        _load_eval_state(run, out, log)
    result = RunResult(run.model, run.ref_model, step=0, out_dir=out)
    try:
        if run.evaluates_at(0) and not log.has_step(0):  # on the weights passed in
            _evaluate_base(run, result, log, samples, callbacks)
        if resume_from:  # result.step stays 0 until the weights are the checkpoint's
            result.step = restore_checkpoint(out, run.model, run.optimizer)
            run.refresh_sampler()
        _steps(run, result, log, samples, callbacks, progress)
    except KeyboardInterrupt:
        result.stopped = "interrupted"
    except BaseException:
        result.stopped = "error"
        try:  # keep what can be kept; never hide the original error behind a saving error
            _finish(run, result, (log, samples), out)
        except Exception as error:
            warnings.warn(f"could not save a checkpoint after the error: {error}", stacklevel=2)
        raise
    _finish(run, result, (log, samples), out)
    return result


def _evaluate_base(run: _Run, result: RunResult, log: JsonlLog, samples: JsonlLog,
                   callbacks) -> None:
    """Step 0: evaluate the weights passed in, and write the ``"step": 0`` line first."""
    record = {"step": 0, **evaluate_step(run, 0, samples)}
    log.write_first([record])
    result.metrics.append(record)
    for callback in callbacks:
        callback(record)


def evaluate_step(run: _Run, step: int, samples: JsonlLog) -> dict[str, float]:
    """:func:`run_evaluation`, then keep its completions (``samples.jsonl``) and its state
    (``eval_state.json``) when the evaluator has them."""
    values = run_evaluation(run, step)
    if samples.writing:
        for row in held_out_sample_rows(run, step):
            samples.write(row)
    state = run.evaluate.state_dict()
    if run.out_dir is not None and state is not None:
        write_eval_state(run.out_dir, state)
    return values


def _load_eval_state(run: _Run, out: Path, log: JsonlLog) -> None:
    """On resume: give the evaluator back its step-0 means (for ``delta_sem``)."""
    if run.evaluate.state_dict() is None:  # an evaluator that keeps no state
        return
    state = read_eval_state(out)
    if state is not None:
        run.evaluate.load_state_dict(state)
    elif log.has_step(0):
        warnings.warn(f"{out / EVAL_STATE_FILE} is missing: the held-out evaluator does not "
                      "know step 0's per-problem means, so delta_sem is not logged in this run",
                      stacklevel=3)


def _start(model, tokenizer, prompts, reward_funcs, config, reward_weights) -> _Run:
    config.validate()
    funcs, weights = reward_list(reward_funcs, reward_weights)
    rows = as_rows(prompts)
    if config.prompts_per_step > len(rows):
        raise ValueError(f"prompts_per_step={config.prompts_per_step} but only {len(rows)} prompts")
    torch.manual_seed(config.seed)
    if config.lora_rank:
        model = add_lora(model, config.lora_rank, config.lora_alpha, config.lora_targets)
    if config.gradient_checkpointing:  # transformers 5 renamed it; older releases have the old name
        enable = getattr(model, "activation_checkpointing_enable", None)
        (enable or model.gradient_checkpointing_enable)()
        if config.lora_rank:  # frozen embeddings: give the checkpointed blocks a grad path
            model.enable_input_require_grads()
    params = [p for p in model.parameters() if p.requires_grad]
    _require_float32_master_weights(params)
    optimizer = make_optimizer(params, config)
    scaler = None
    if config.loss_scaling:
        scaler = torch.amp.GradScaler(next(model.parameters()).device.type)
    return _Run(model, tokenizer, config, rows, funcs, weights, optimizer, params,
                make_reference(model, config.beta), scaler=scaler,
                sampler=make_sampler(model, config.sampling_dtype, config.sampling_packed))


def _require_float32_master_weights(params: list[Tensor]) -> None:
    """Refuse to train half-precision weights: an AdamW step of a small learning rate is below
    bfloat16's spacing (about 1e-4 near a weight of 0.02) and rounds away, and float16
    without a float32 copy loses small gradients too. Autocast gives the speed of half
    precision with float32 master weights (``grpo_core.precision``)."""
    half = sorted({str(p.dtype).removeprefix("torch.") for p in params
                   if p.dtype in (torch.bfloat16, torch.float16)})
    if half:
        raise ValueError(
            f"the trainable weights are {', '.join(half)}: train float32 master weights "
            "(load_policy(profile) gives them; grpo_core.precision.apply_to_model(model, plan) "
            "casts a model you loaded yourself) and set TrainConfig.autocast_dtype for "
            "half-precision matmuls")


def _steps(run: _Run, result: RunResult, log: JsonlLog, samples: JsonlLog, callbacks,
           progress: bool) -> None:
    from tqdm.auto import tqdm

    cfg = run.config
    bar = tqdm(total=cfg.max_steps, initial=result.step, desc="GRPO", disable=not progress,
               dynamic_ncols=True)
    batch = None
    run.model.train()  # sample_group switches to eval mode while sampling, then back
    try:
        for step in range(result.step + 1, cfg.max_steps + 1):
            started = time.perf_counter()
            iteration = (step - 1) % cfg.num_iterations
            fresh = batch is None or iteration == 0
            if fresh:
                batch = make_rollout(run, step)
            record = {"step": step, **batch.metrics, **update(run, batch), "iteration": iteration}
            record["step_time"] = time.perf_counter() - started
            if fresh and samples.writing:
                for row in training_sample_rows(run, batch, step):
                    samples.write(row)
            if run.evaluates_at(step):
                record.update(evaluate_step(run, step, samples))
            log.write(record)
            result.metrics.append(record)
            result.step, result.last_texts = step, batch.rollout.texts
            for callback in callbacks:
                callback(record)
            bar.update(1)
            bar.set_postfix(reward=f"{record['reward']:.3g}",
                            chars=f"{record['completions/mean_chars']:.0f}")
            if cfg.save_every and step % cfg.save_every == 0 and run.out_dir is not None:
                save_run_checkpoint(run, run.out_dir, step)
    finally:
        bar.close()


def run_evaluation(run: _Run, step: int) -> dict[str, float]:
    """Call the evaluator in eval mode without gradients; check it returns finite numbers."""
    run.model.eval()
    started = time.perf_counter()
    try:
        with torch.no_grad(), run.sampling_context():
            values = run.evaluate(run.sampling_model, run.tokenizer, step)
    finally:
        run.model.train()
    checked = {}
    for name, value in dict(values).items():
        if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise ValueError(f"evaluate returned {value!r} for {name!r}: values must be finite numbers")
        checked[str(name)] = float(value)
    checked["time/eval"] = time.perf_counter() - started
    return checked


def _finish(run: _Run, result: RunResult, logs: Sequence[JsonlLog], out: Path | None) -> None:
    for log in logs:
        log.close()
    run.model.eval()
    run.optimizer.zero_grad(set_to_none=True)
    if out is not None and run.config.save_checkpoint and result.step > 0:
        save_run_checkpoint(run, out, result.step)

