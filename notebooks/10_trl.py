# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · The same loop in TRL, and the path past one machine
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/10_trl.ipynb)
#
# **Needs:** a laptop CPU (offline) or a Colab GPU. **Takes:** a few minutes in `cpu`: a short
# `GRPOTrainer` run and one fixed batch through both loops. The start page lists its measured
# time and peak memory (`cpu` profile, with the machine it was measured on); `smoke` runs
# every cell in seconds. Not yet measured on a GPU.
#
# Nine notebooks built GRPO from scratch. Hugging Face's TRL library packs the same loop into
# two objects, `GRPOConfig` and `GRPOTrainer`; the lecture shows it in five lines:
#
# ```python
# trainer = GRPOTrainer(
#     model="Qwen/Qwen3-0.6B",
#     reward_funcs=[format_reward, accuracy_reward],
#     args=GRPOConfig(num_generations=8, beta=0.0),
#     train_dataset=dataset,
# )
# ```
#
# Five lines hide every other setting at its default. In this notebook you
# 1. line up TRL's defaults with our loop's and the GRPO paper's, and see which ones differ;
# 2. run experiment 1 through `GRPOTrainer` with the **same reward function** and the **same
#    live plot** as notebook 07, every setting that matters written out;
# 3. push one fixed batch through `grpo_core` and through TRL and get the same loss;
# 4. see how the course guards against TRL changing under it;
# 5. take the loop past one machine: several processes with `accelerate launch`, vLLM for
#    generation, DeepSpeed or FSDP, and Hugging Face Jobs.

# %%
# Colab only: fetch the course and install what the runtime lacks, keeping every package Colab
# installed (notebook 10 alone changes two, and says why). Everywhere else this cell does
# nothing: `make lab` installed it all.
import os
import signal
import subprocess
import sys

if "google.colab" in sys.modules:
    COURSE_REPO, COURSE_DIR = "https://github.com/grpo-from-scratch/grpo-course", "/content/grpo-course"
    print(f"cloning {COURSE_REPO} ...", flush=True)
    clone = subprocess.run(["git", "clone", "-q", "--depth=1", COURSE_REPO, COURSE_DIR],
                           capture_output=True, text=True)
    if clone.returncode and not os.path.isdir(f"{COURSE_DIR}/.git"):
        raise RuntimeError(f"could not clone {COURSE_REPO}: {clone.stderr.strip()}")
    # the setup is told what this kernel imported; status 3: an upgrade needs a fresh kernel,
    # which Colab starts by itself once this one ends (then run this cell again)
    setup = subprocess.run([sys.executable, f"{COURSE_DIR}/tools/colab_setup.py",
                            "--notebook", "10_trl"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## Defaults: TRL, our loop, the paper
#
# `GRPOConfig` is a dataclass; its defaults can be read without building one. Next to them,
# the defaults of our loop's `TrainConfig` (notebook 07) and what the GRPO paper (DeepSeekMath,
# Shao et al. 2024) used. Three rows matter most:
#
# - **`loss_type`**: TRL's default is `"dapo"`, not `"grpo"`. Both average the per-token loss
#   $\ell_{i,t}$, but differently (next section). Ours and the paper's is `"grpo"`.
# - **`beta`**: TRL's default is 0: no KL penalty, and no reference model in memory
#   (notebook 04). The paper used 0.04. Ours is 0 too.
# - **`num_iterations`** ($\mu$, updates per batch of samples): 1 in TRL, in our loop, and in
#   the paper's runs ("a single update following each exploration stage"). With one update,
#   the ratio $\rho = \pi_\theta / \pi_{\theta_\text{old}}$ is exactly 1 when the loss is
#   computed, so **the clip never fires** (notebook 04): TRL's `clip_ratio/*` curves stay at 0.
#
# Smaller traps: the learning rate decays linearly to 0 by default (ours is constant);
# `logging_steps=10` (a 5-step run would log nothing); `bf16` turns itself on, which fails on a
# CPU-only machine; gradient checkpointing is on (a waste for a small model).

# %% [markdown]
# **Which TRL.** This notebook was run with TRL 1.16 (every install file bounds TRL below
# TRL 1.17: `trl>=1.16.0,<1.17`; `trl.__version__` says which one you have). If you have a newer
# TRL (TRL 1.17, TRL 1.18 or TRL 1.19), expect these differences here;
# [`docs/trl_versions.md`](../docs/trl_versions.md) has the sources, and what could not be
# checked (no change to `GRPOConfig`'s defaults after TRL 1.16 could be verified or ruled out):
#
# - **The table below** prints *your* TRL's defaults, so its "TRL default" column can differ
#   from the prose, which describes TRL 1.16. The `GRPOTrainer` run further down writes out the
#   settings that matter, so a changed default of those cannot change it; a renamed one raises
#   a `TypeError`.
# - **The defaults the run leaves to TRL** (`epsilon_high`, `importance_sampling_level`,
#   `mask_truncated_completions`, `top_k`, `delta`, `disable_dropout`, `top_entropy_quantile`,
#   `entropy_coef`, `off_policy_mask_threshold`) follow your TRL: a changed one changes the
#   numbers.
# - **Metric names.** TRL 1.18 made `AsyncGRPOTrainer` stable (imported from `trl`; the
#   submodules of `trl.experimental.async_grpo` are gone) and renamed *its* metrics to
#   `GRPOTrainer`'s. This notebook uses only `GRPOTrainer`; if a newer TRL renamed one of its
#   metrics, the step-by-step cell below fails with a `KeyError`.
# - **The same batch, the same loss** feeds `GRPOTrainer.compute_loss` a batch in TRL 1.16's
#   internal layout, and the guard's cell prints how many fields `GRPOConfig` has: both can
#   differ on a newer TRL.
#
# To run what this notebook ran: `pip install "trl>=1.16.0,<1.17"`.

# %%
# NBVAL_CHECK_OUTPUT
import dataclasses

import pandas as pd
import trl
from trl import GRPOConfig

from grpo_core.loop import TrainConfig

# our TrainConfig field -> the GRPOConfig field that means the same thing
OURS_TO_TRL = {
    "loss_type": "loss_type", "beta": "beta", "num_iterations": "num_iterations",
    "epsilon": "epsilon", "epsilon_high": "epsilon_high", "scale": "scale_rewards",
    "group_size": "num_generations", "max_new_tokens": "max_completion_length",
    "temperature": "temperature", "learning_rate": "learning_rate",
    "max_grad_norm": "max_grad_norm", "weight_decay": "weight_decay",
}
PAPER = {"loss_type": "grpo", "beta": 0.04, "num_iterations": 1, "num_generations": 64,
         "max_completion_length": 1024, "learning_rate": 1e-6}

trl_defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
ours = TrainConfig()
rows = [(theirs, trl_defaults[theirs], getattr(ours, mine), PAPER.get(theirs, ""))
        for mine, theirs in OURS_TO_TRL.items()]
rows += [(name, trl_defaults[name], value, "")
         for name, value in [("lr_scheduler_type", "constant"), ("logging_steps", 1),
                             ("bf16", "the precision plan"), ("gradient_checkpointing", False)]]
table = pd.DataFrame(
    [(name, str(theirs), str(mine), str(paper), "<--" if str(theirs) != str(mine) else "")
     for name, theirs, mine, paper in rows],
    columns=["GRPOConfig field", "TRL default", "our loop", "paper", "differs"])
print(table.to_string(index=False))

# %% [markdown]
# (`bf16=None` means "decide in `__post_init__`": True unless fp16 is asked for. The
# `num_generations`, `max_completion_length` and `learning_rate` of our loop come from the
# profile; the table shows `TrainConfig`'s own defaults.)
#
# ## What TRL's default loss computes
#
# Both loss types start from the same per-token term (notebook 04). With one update per batch
# the ratio is 1, the clip is inactive, and each token's term is the lecture's policy gradient
# term (how the terms are averaged is where the lecture's sum and the loss types differ:
# notebook 04, section 6):
#
# $$ \ell_{i,t} = -\min\bigl(\rho_{i,t} A_i,\ \mathrm{clip}(\rho_{i,t}, 1-\varepsilon, 1+\varepsilon) A_i\bigr)
#    \;\overset{\rho = 1}{=}\; -A_i $$
#
# They differ in how the $\ell_{i,t}$ are averaged:
#
# $$ L_\text{grpo} = \frac{1}{G}\sum_{i=1}^{G} \frac{1}{|o_i|}\sum_{t=1}^{|o_i|} \ell_{i,t}
#    \qquad\qquad
#    L_\text{dapo} = \frac{1}{\sum_{i} |o_i|}\sum_{i=1}^{G}\sum_{t=1}^{|o_i|} \ell_{i,t} $$
#
# - $G$: completions in the batch (TRL: `per_device_train_batch_size`, summed over processes);
# - $o_i$: completion $i$, $|o_i|$ its length in tokens (EOS included);
# - $\ell_{i,t}$: the per-token loss above; $A_i$: completion $i$'s advantage;
# - $\rho_{i,t}$, $\varepsilon$: the ratio and the clip width (`epsilon`, 0.2).
#
# `grpo` gives every *completion* the same total weight, however long; `dapo` gives every
# *token* the same weight, so a long completion counts more. In `grpo_core` both are
# `aggregate_loss`:

# %%
import inspect

from grpo_core.loss import aggregate_loss

print(inspect.getsource(aggregate_loss))

# %% [markdown]
# A toy batch by hand: a short good answer (2 tokens, $A=+1$) and a long bad one
# (6 tokens, $A=-1$). With $\rho=1$, $\ell_{i,t}=-A_i$: $-1$ on the 2 good tokens, $+1$ on the
# 6 bad ones.
#
# - `grpo`: $\tfrac12\,(\tfrac{-1-1}{2} + \tfrac{6}{6}) = 0$; each token of the short answer
#   is pushed up with weight $\tfrac{1}{2\cdot 2}=0.25$, each of the long one down with $\tfrac{1}{2\cdot 6}\approx 0.083$.
# - `dapo`: $\tfrac{-2 + 6}{8} = 0.5$; every token has weight $\tfrac18$, so the long answer
#   gets three times the total push of the short one.
#
# The gradient with respect to each token's log-prob, from `grpo_loss` itself:

# %%
# NBVAL_CHECK_OUTPUT
import torch

from grpo_core.loss import grpo_loss

toy_mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
toy_advantages = torch.tensor([1.0, -1.0])
for loss_type in ("grpo", "dapo"):
    toy_logps = torch.zeros(2, 6, requires_grad=True)  # values do not matter: rho = 1
    loss, _ = grpo_loss(toy_logps, None, toy_advantages, toy_mask, loss_type=loss_type)
    loss.backward()
    print(f"{loss_type}: loss {loss.item():+.3f}; d loss / d logp per token:")
    print(toy_logps.grad.numpy().round(3))

# %% [markdown]
# ## Experiment 1 in `GRPOTrainer`
#
# The model, the prompts and the reward are those of notebook 07: `length_reward`,
# $r = -|\mathrm{len}(y) - 20|$, passed to TRL unchanged (its signature is TRL's,
# `fn(completions, **columns)`). The prompts become a `datasets.Dataset` with one
# conversational `prompt` column, so TRL applies the chat template just as our loop does.

# %%
from datasets import Dataset

from grpo_core.models import load_policy
from grpo_core.precision import precision_plan
from grpo_core.profiles import get_profile
from grpo_core.rewards import length_reward
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

profile = get_profile()
precision = precision_plan(profile)  # the plan our loop uses too (notebook 00)
model, tokenizer = load_policy(profile)  # float32 master weights, whatever the device
prompts = read_jsonl(EXP1_PROMPTS)
dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": row["prompt"]}]}
                             for row in prompts])
print(f"profile {profile.name}: {profile.model_id}, {profile.prompts_per_step} prompts x "
      f"{profile.group_size} completions per step, {profile.max_new_tokens} new tokens")
print(f"precision: {precision.describe()}")
print(f"{len(dataset)} prompts, e.g. {dataset[0]['prompt']}")

# %% [markdown]
# Every setting from the table above is written out, so that the run means the same as our
# loop's whatever TRL's defaults become. The sizes come from the profile, the precision from
# the same plan our loop follows (`bf16`/`fp16`: autocast over float32 weights, or neither in
# float32). Two settings only make TRL run here: `use_cpu=True` on a CPU (with its default
# `bf16=True` and no GPU, TRL refuses to start unless told it is on a CPU), and
# `processing_class=tokenizer` because we pass a model *object*, not a Hub name (TRL would
# otherwise load a tokenizer again from wherever the model's config says the model came from;
# for a model built in memory that is nowhere, and it fails).
#
# The run is short in the `cpu` profile (6 steps: enough to see the reward move, not to reach
# 20 characters); notebook 07 runs experiment 1 to the end with our loop.
#
# The live plot is the same `LivePlot` object our loop calls after every step. To TRL it is a
# `TrainerCallback`: the trainer calls its `on_log` with each step's metrics, under the same
# names our loop logs (TRL's names, by design).

# %%
import tempfile

from grpo_core.plots import LivePlot

trl_steps = {"smoke": 1, "cpu": 6}.get(profile.name, profile.max_steps)
on_cpu = profile.device == "cpu"
config = GRPOConfig(
    output_dir=tempfile.mkdtemp(prefix="grpo-trl-"),
    # the algorithm, as in our loop (and not TRL's defaults)
    loss_type="grpo",  # TRL: "dapo"
    beta=0.0,  # no KL penalty, no reference model
    num_iterations=1,  # one update per batch: rho = 1, the clip never fires
    epsilon=0.2,
    scale_rewards="group",
    # sizes and sampling, from the profile
    num_generations=profile.group_size,
    per_device_train_batch_size=profile.prompts_per_step * profile.group_size,  # completions
    gradient_accumulation_steps=1,
    max_completion_length=profile.max_new_tokens,  # TRL: 512
    temperature=profile.temperature,
    top_p=profile.top_p,
    chat_template_kwargs={"enable_thinking": profile.enable_thinking},
    # the optimizer, as in our loop
    max_steps=trl_steps,
    learning_rate=profile.learning_rate,  # TRL: 1e-6
    lr_scheduler_type="constant",  # TRL: "linear" (decays to 0)
    warmup_steps=0,
    weight_decay=0.0,
    max_grad_norm=1.0,
    seed=profile.seed,
    # the machine and the logs
    # the course's precision plan: autocast over the float32 weights (fp16 brings TRL's loss
    # scaling); TRL's default bf16=True would autocast to bfloat16 even where that is slow
    bf16=precision.autocast == "bfloat16",
    fp16=precision.autocast == "float16",
    use_cpu=on_cpu,
    activation_checkpointing=False,  # TRL: on
    logging_steps=1,  # TRL: 10
    report_to="none",
    save_strategy="no",
)
plot = LivePlot(every=1, title=f"experiment 1 in GRPOTrainer ({profile.name})")
trainer = trl.GRPOTrainer(
    model=model,
    reward_funcs=[length_reward],
    args=config,
    train_dataset=dataset,
    processing_class=tokenizer,
    callbacks=[plot],
)
print({name: getattr(config, name) for name in OURS_TO_TRL.values()})

# %%
# NBVAL_IGNORE_OUTPUT
import warnings

# TRL 1.16 calls a helper that transformers 5 deprecated; nothing a learner can act on
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
trainer.train()
trl_records = plot.records
print(f"{len(trl_records)} steps; TRL's step_time per step (s): "
      f"{[round(r['step_time'], 1) for r in trl_records]}")

# %% [markdown]
# The curves have the same panels as notebook 07's, because TRL logs the same names. As
# there, the KL panel is left out (β = 0 computes no `kl`, so none is logged), and the clip
# ratio is 0 at every step (ρ = 1, nothing to clip). Step by step, the reward (minus
# the mean distance from 20 characters) and the completion length in tokens:

# %%
for record in trl_records:
    print(f"step {record['step']:3d}: reward {record['reward']:8.2f}, "
          f"length {record['completions/mean_length']:5.1f} tokens, "
          f"clip ratio {record['clip_ratio/region_mean']}, kl {record.get('kl', 'not logged')}")

# %% [markdown]
# ## The same batch, the same loss
#
# Same settings should mean the same update. To check, take **one fixed batch**: sample a group
# per prompt with `grpo_core`, score it with `length_reward`, and compute the advantages. Then
# compute the loss twice, on the same model and the same tokens:
#
# - **ours**: `token_logprobs` (notebook 02) then `grpo_loss`;
# - **TRL's**: `GRPOTrainer.compute_loss`, fed the batch in the layout its own sampler
#   produces (left-padded prompt ids, right-padded completion ids, masks, advantages). It
#   computes the log-probs itself, through its fused, chunked LM head.
#
# Then compare the losses, and the gradients they put on every weight of the model.

# %%
import time

from grpo_core.advantages import group_advantages
from grpo_core.logprobs import token_logprobs
from grpo_core.rollout import chat_prompt, sample_group

fixed_rows = prompts[: profile.prompts_per_step]
rollout = sample_group(
    model, tokenizer, [chat_prompt(tokenizer, row["prompt"]) for row in fixed_rows],
    profile.group_size, max_new_tokens=profile.max_new_tokens,
    temperature=profile.temperature, top_p=profile.top_p, seed=1234)
advantages = group_advantages(length_reward(rollout.texts), profile.group_size).to(model.device)
fixed_batch = {
    "prompt_ids": rollout.prompt_ids, "prompt_mask": rollout.prompt_mask,
    "completion_ids": rollout.completion_ids, "completion_mask": rollout.completion_mask,
    "advantages": advantages, "num_items_in_batch": rollout.completion_mask.sum(),
}
print(f"fixed batch: {rollout.completion_ids.shape[0]} completions, "
      f"{int(rollout.completion_mask.sum())} completion tokens, "
      f"advantages {[round(a, 2) for a in advantages.tolist()]}")


def our_loss(model):
    """Our loop's loss on the fixed batch: log-probs, then grpo_loss (on-policy)."""
    logps = token_logprobs(model, rollout.input_ids, rollout.attention_mask,
                           rollout.completion_ids.size(1), temperature=profile.temperature)
    return grpo_loss(logps, None, advantages, rollout.completion_mask, loss_type="grpo")[0]


def trl_loss(model):
    """TRL's loss on the same batch, computed by GRPOTrainer itself."""
    trainer.current_gradient_accumulation_steps = 1  # as TRL's loop sets it, no accumulation
    return trainer.compute_loss(model, fixed_batch)


def loss_and_gradient(loss_fn):
    """(loss, the gradient of every weight, seconds for forward + backward)."""
    model.train()
    model.zero_grad(set_to_none=True)
    started = time.perf_counter()
    loss = loss_fn(model)
    loss.backward()
    seconds = time.perf_counter() - started
    gradients = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)  # the list keeps the tensors, the model lets go
    return loss.item(), gradients, seconds


# %%
# NBVAL_IGNORE_OUTPUT
our_value, our_gradients, our_seconds = loss_and_gradient(our_loss)
trl_value, trl_gradients, trl_seconds = loss_and_gradient(trl_loss)
pairs = [(a.float(), b.float()) for a, b in zip(our_gradients, trl_gradients, strict=True)
         if a is not None]
difference = sum(((a - b) ** 2).sum() for a, b in pairs).sqrt()
gradient_gap = (difference / sum((a**2).sum() for a, _ in pairs).sqrt()).item()
weights = sum(a.numel() for a, _ in pairs)
del our_gradients, trl_gradients, pairs
print(f"loss, grpo_core.loss.grpo_loss:       {our_value:+.8f}")
print(f"loss, GRPOTrainer.compute_loss:       {trl_value:+.8f}")
print(f"|difference|:                         {abs(our_value - trl_value):.1e}")
print(f"gradient over {weights / 1e6:.0f} M weights: |g_ours - g_TRL| / |g_ours| = "
      f"{gradient_gap:.1e}")
print(f"forward + backward on this batch: grpo_core {our_seconds:.2f} s, TRL {trl_seconds:.2f} s")
# float32 sums in another order stay far below 1e-3; under bfloat16 autocast (8 significant
# bits, which training left on the model's forward) each side rounds its matmuls its own way
tolerance = 1e-3 if precision.autocast is None else 5e-2
print(f"precision: {precision.describe()}; gradient tolerance {tolerance:g}")
assert abs(our_value - trl_value) <= 1e-5 * max(1.0, abs(our_value)), "the losses differ"
assert gradient_gap <= tolerance, "the gradients differ"

# %% [markdown]
# The two agree to the rounding of the precision they ran in: in float32, float32 sums in a
# different order (TRL's LM head works in chunks); under a bfloat16 plan the gap is larger,
# since bfloat16 keeps a much shorter significand than float32 and each side rounds its own
# matmuls (the cell prints the plan and the tolerance it checked). `tests/test_trl_parity.py`
# checks the same for every `loss_type`, with and without the KL term and the clip, to
# $10^{-6}$.
#
# The loss *value* is near 0 because on-policy it is $-\frac{1}{G}\sum_i A_i$ and the advantages of
# each group sum to 0: with one update per batch, the `loss` TRL logs hovers around 0 whatever
# the model learns. The *gradient* is what moves the model; read the reward curve instead.

# %% [markdown]
# ## A guard against TRL changing under us
#
# TRL moves fast. Between releases, arguments are renamed and removed and defaults change: the
# default loss became `dapo`, `beta` went from 0.04 to 0, and `max_prompt_length`, in every
# GRPO tutorial of early 2025, no longer exists:

# %%
# NBVAL_CHECK_OUTPUT
try:
    GRPOConfig(output_dir="unused", bf16=False, max_prompt_length=256)  # unknown on purpose
except TypeError as error:
    print(f"TypeError: {error}")

# %% [markdown]
# Two things keep this course honest about it:
#
# - every setting that matters is passed explicitly (above), so a changed *default* cannot
#   change what the course runs;
# - `tests/test_trl_args.py` reads this notebook and the scale-out script with Python's `ast`
#   module, collects every keyword passed to `GRPOConfig(...)` and `GRPOTrainer(...)`, and
#   checks that each still exists in the installed TRL (a field of the `GRPOConfig`
#   dataclass, a parameter of `GRPOTrainer.__init__`). A renamed argument fails `make test`,
#   not a learner's run. The README names the TRL version these checks last passed with.
#
# The check itself is two set differences; here it is for the call above:

# %%
# NBVAL_CHECK_OUTPUT
config_fields = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
trainer_parameters = set(inspect.signature(trl.GRPOTrainer.__init__).parameters) - {"self"}
print("GRPOConfig fields:", len(config_fields), "- GRPOTrainer parameters:", len(trainer_parameters))
print("unknown here:", sorted({"output_dir", "bf16", "max_prompt_length"} - config_fields))

# %% [markdown]
# ## Past one machine
#
# On one GPU, Qwen3-0.6B does the lecture's experiments. Bigger models, bigger groups or more
# steps need more GPUs, and TRL gets there without changing the loop:
#
# - **Data parallel** (`accelerate launch`, DDP): every process holds the whole model, samples
#   and scores its share of each batch, and the gradients are averaged before each step, so
#   all copies stay identical. `per_device_train_batch_size` counts *completions per
#   process*; a step uses that times the number of processes. A group may span processes:
#   TRL gathers all rewards before computing the advantages.
# - **vLLM** for sampling (`use_vllm=True`): on a GPU, generation is expected to take most
#   of a GRPO step (an argument, not a measurement here: the update's matrix products run far
#   faster there while decoding stays one token at a time; notebook 04 §6 measures the split
#   on this machine's CPU, where the update costs about as much), and vLLM's batched, paged
#   decoding is much faster than transformers' `generate()`. `vllm_mode="colocate"` runs it inside each training process and shares the
#   GPU; `"server"` puts it on GPUs of its own (`trl vllm-serve`).
# - **Sharding** (DeepSpeed ZeRO-2/3, FSDP): when the weights, gradients and AdamW's two
#   moments no longer fit on one GPU (about 16 bytes per parameter with AdamW in mixed precision), they are
#   split across GPUs. Only the accelerate config changes.
#
# The course ships `scripts/trl_mbpp.py`, experiment 2 (coding problems with the unit-test
# reward, `grpo_core.rewards.unit_test_reward`, run in the sandbox) through `GRPOTrainer`, and
# accelerate configs for each of these:

# %%
# NBVAL_CHECK_OUTPUT
from pathlib import Path

from accelerate.commands.config.config_args import load_config_from_file

from grpo_core.run_files import REPO_ROOT

repo = REPO_ROOT
for path in sorted((repo / "scripts" / "accelerate").glob("*.yaml")):
    launch = load_config_from_file(str(path))
    extra = launch.deepspeed_config.get("zero_stage", "") if launch.deepspeed_config else ""
    print(f"{path.name:15s} {launch.distributed_type.value:10s} {'ZeRO-' + str(extra) if extra else '':7s}"
          f" {launch.num_processes} processes, mixed precision {launch.mixed_precision}")

# %% [markdown]
# The commands (the README has them too):
#
# ```bash
# # two data-parallel processes on this CPU (gloo), the offline model: what the tests run
# accelerate launch --config_file scripts/accelerate/cpu_2proc.yaml \
#     scripts/trl_mbpp.py --profile smoke
# # 4 GPUs, DDP, vLLM sampling inside each process (pip install vllm)
# accelerate launch --config_file scripts/accelerate/ddp.yaml --num_processes 4 \
#     scripts/trl_mbpp.py --profile gpu --use-vllm
# # the same, sharded (pip install deepspeed for the ZeRO configs)
# accelerate launch --config_file scripts/accelerate/zero3.yaml --num_processes 4 \
#     scripts/trl_mbpp.py --profile gpu
# accelerate launch --config_file scripts/accelerate/fsdp.yaml --num_processes 4 \
#     scripts/trl_mbpp.py --profile gpu
# ```
#
# `tests/test_scale_out.py` runs the first command for 2 steps and checks that both processes
# sampled different completions yet finished with bit-identical weights (a SHA-256 of every
# parameter): the gradient averaging is what keeps them equal. The run is small: both
# processes import the libraries, load the model and train 2 steps of 2 completions x 8
# tokens each.
#
# Asked for something that is not installed (`--use-vllm` without vLLM, a ZeRO config
# without DeepSpeed), the script stops with one line saying what to install or drop. Its
# `--dry-run` prints the plan without loading a model; here for this notebook's profile:

# %%
script = repo / "scripts" / "trl_mbpp.py"
plan = subprocess.run([sys.executable, str(script), "--profile", profile.name, "--dry-run"],
                      capture_output=True, text=True, cwd=repo)
print(plan.stdout or plan.stderr)

# %% [markdown]
# ### Hugging Face Jobs
#
# No GPUs at hand? [Hugging Face Jobs](https://huggingface.co/docs/huggingface_hub/guides/jobs)
# rents them by the minute and runs a command in a Docker image: `hf jobs run` from the
# `huggingface_hub` CLI, after `hf auth login`. The job clones the course, installs it, and
# launches the same script on 4 GPUs; its disk is thrown away at the end, so the script pushes
# the trained model to the Hub (`--hub-model-id`):
#
# ```bash
# hf jobs run --flavor a100x4 --timeout 3h --secrets HF_TOKEN python:3.12 \
#   bash -c "git clone --depth=1 https://github.com/grpo-from-scratch/grpo-course && \
#            cd grpo-course && pip install -e . vllm && \
#            accelerate launch --config_file scripts/accelerate/ddp.yaml --num_processes 4 \
#              scripts/trl_mbpp.py --profile gpu --use-vllm --hub-model-id <you>/qwen3-0.6b-grpo-mbpp"
# ```
#
# `hf jobs ps` lists your jobs and `hf jobs logs <id>` follows one. `--flavor` picks the
# hardware (`hf jobs hardware` lists it, with prices); `--secrets HF_TOKEN` passes your token
# from the environment without writing it into the command.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. In the toy batch above, make the long completion good instead ($A = +1$ for both
#    completions). What do `grpo` and `dapo` return now? Compute them by hand first.

# %%
from grpo_core.exercises import check

my_grpo, my_dapo = ..., ...  # your answers here

check("10.both_good_losses", (my_grpo, my_dapo))

# %% [markdown]
# 2. A colleague's run of our loop used `TrainConfig(loss_type="dapo", beta=0.04,
#    num_iterations=2, epsilon_high=0.28, group_size=4)`. Write the `GRPOConfig` keywords that
#    make TRL run the same algorithm (the table `OURS_TO_TRL` above has the names). Which of
#    them lets the clip fire?

# %%
my_config = ...  # your answer here: a dict of GRPOConfig keywords

check("10.grpo_config", my_config)

# %% [markdown]
# 3. The lecture's scale, 8 prompts x 8 completions per step, on 4 GPUs with DDP. What is
#    `per_device_train_batch_size`, and how many prompts' groups does each GPU sample?

# %%
my_per_device, my_prompts_per_gpu = ..., ...  # your answers here

check("10.per_device", (my_per_device, my_prompts_per_gpu))

# %% [markdown]
# 4. `loss_type="grpo"` in your own lines: write `my_grpo_aggregation(per_token_loss, mask)`,
#    the reduction of a `[B, T]` per-token loss to a scalar that every run of this course
#    uses. The check compares it with `aggregate_loss(..., "grpo")` on completions of unequal
#    lengths.

# %%
def my_grpo_aggregation(per_token_loss, mask):
    return ...  # your code here: a scalar


check("10.grpo_aggregation", my_grpo_aggregation)

# %% [markdown]
# ## What this notebook showed
#
# - TRL's GRPOTrainer runs the same loop: the same reward function, the same plot, and the same
#   loss on a fixed batch.
# - Its defaults differ from the GRPO paper's in a few places, each written out here.
# - Past one machine: accelerate, vLLM for generation, DeepSpeed or FSDP, and a script for
#   Hugging Face Jobs.
#
# **Next:** [11 · Reading the run](11_reading_the_run.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
