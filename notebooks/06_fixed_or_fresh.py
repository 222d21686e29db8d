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
# # 06 · Fixed preferences or fresh samples
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/06_fixed_or_fresh.ipynb)
#
# **Needs:** a laptop CPU (the memory goes to a policy, its reference and AdamW's moments) or a
# Colab GPU. **Takes:** a few minutes in `cpu`: a small DPO run and a small GRPO run. The start
# page lists its measured time and peak memory (`cpu` profile, with the machine it was measured
# on); `smoke` runs every cell in seconds. Not yet measured on a GPU.
#
# Lecture part: "Fixed preferences or fresh samples".
#
# Two ways to learn from "this answer is better than that one":
#
# - **fixed preference pairs**, collected once and trained on offline, with DPO's loss;
# - **fresh samples**, GRPO's way: at every step the model writes a new group, the reward
#   scores it, and the update uses those scores.
#
# This notebook puts them side by side on the same prompts and the same reward (experiment 1's
# length reward), first on a toy policy you can read at a glance, then with a small run of each
# on the real model. It is kept short: the point is what each one uses as its signal, and
# what follows from that.

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
                            "--notebook", "06_fixed_or_fresh"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %%
import copy
import inspect
import time

import pandas as pd
import torch

from grpo_core.profiles import get_profile

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); group size k = {profile.group_size}, "
      f"{profile.max_new_tokens} new tokens, learning rate {profile.learning_rate}")
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 60)

# %% [markdown]
# ## 1. Two signals
#
# **DPO** (direct preference optimization) trains on pairs (x, y_w, y_l): for prompt x,
# completion y_w was preferred to y_l. The pairs come from people, or from a reward applied to
# samples of some earlier model; either way they are collected **once**. The loss raises
# y_w's log-probability relative to y_l's, each measured against a frozen reference model:
#
# $$\mathcal{L}_{\text{DPO}} = -\log\sigma\Bigl(\beta\bigl[\log\tfrac{\pi_\theta(y_w\mid x)}{\pi_{\text{ref}}(y_w\mid x)} - \log\tfrac{\pi_\theta(y_l\mid x)}{\pi_{\text{ref}}(y_l\mid x)}\bigr]\Bigr) \tag{6.1}$$
#
# **GRPO** trains on a group the policy samples **now**, y₁ … y_k ~ π_θ(· ∣ x), scored by the
# reward and compared within the group (notebooks 02–03):
#
# $$\mathcal{L}_{\text{GRPO}} = -\frac{1}{k}\sum_{i=1}^{k} A_i \log\pi_\theta(y_i\mid x), \qquad A_i = \frac{r(y_i) - \operatorname{mean}(r)}{\operatorname{std}(r) + \varepsilon} \tag{6.2}$$
#
# | symbol | meaning |
# |---|---|
# | y_w, y_l | the preferred ("winner") and the other ("loser") completion of a pair |
# | π_ref | the frozen reference, usually the model before training; with fixed pairs its log-probs are computed once |
# | β | the weight of DPO's implicit KL to π_ref: a **larger** β keeps the policy **closer** to the reference, a smaller one lets it move further (the implicit reward is β·log(π_θ/π_ref)) |
# | σ | the logistic function |
# | yᵢ ~ π_θ | completions sampled from the current policy, at this step |
# | r, Aᵢ | the reward and the group advantage, as in notebooks 02–03 |
#
# Eq. (6.2) is the lecture's box: a sum over each completion's tokens. The toy below runs it as
# written (`policy_gradient_loss`); the small GRPO run of the real model further down uses
# `loss_type="grpo"`, each completion's token mean, as every training run does (notebook 04,
# section 6: the two differ by 1/|yᵢ| per completion).
#
# | | DPO on fixed pairs | GRPO on fresh samples |
# |---|---|---|
# | signal | "y_w beats y_l", for texts written before training | rewards of texts the model writes at this step |
# | needs at training time | the pairs and π_ref's log-probs of them | a reward function and a sampler |
# | generation during training | none: cheap, every step is a forward and backward pass | a group per prompt per step: the slow part |
# | can learn | to prefer what the pairs prefer, about as far as they reach | whatever the reward pays for, as far as the model's own samples reach |
# | cannot learn | anything about completions the pairs do not contain, such as what the model writes once it has changed | anything the model never samples (a group without variation teaches nothing) |
#
# The code. `preference_pairs` builds pairs from scored groups (best against worst), so both
# methods can start from the same samples and the same reward:

# %%
from grpo_core.preference import dpo_loss, preference_pairs

print(inspect.getsource(dpo_loss))
print(inspect.getsource(preference_pairs))

# %% [markdown]
# ## 2. A toy you can read at a glance
#
# A "policy" that only chooses a length L between 0 and 120 characters, a bell shape around a
# learnable centre μ (start: μ = 80, the base model writes too much). The reward is
# experiment 1's, r = −|L − 20|. Both methods get 16 groups of 8 samples from the start
# policy. DPO turns them into 16 fixed pairs (best against worst of each group) and trains on
# them; GRPO uses them for its first step and samples 16 new groups of 8 at every later step.

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.advantages import group_advantages
from grpo_core.loss import policy_gradient_loss

lengths = torch.arange(0, 121).float()


def length_logps(mu, width=8.0):
    """log-probabilities of every length 0..120 under a bell shape centred on mu: [121]."""
    return torch.log_softmax(-(lengths - mu) ** 2 / (2 * width**2), dim=-1)


def toy_reward(length):
    return -(length - 20).abs()


def describe(mu):
    probs = length_logps(mu).exp()
    return (f"mean length {(probs * lengths).sum():5.1f}, "
            f"expected reward {(probs * toy_reward(lengths)).sum():6.1f}")


generator = torch.Generator().manual_seed(0)
k, groups, mu_start = 8, 16, torch.tensor(80.0)
with torch.no_grad():
    first = torch.multinomial(length_logps(mu_start).exp(), groups * k, replacement=True,
                              generator=generator)
    chosen, rejected = preference_pairs(toy_reward(lengths[first]), k)
    y_w, y_l = first[chosen], first[rejected]
    ref = length_logps(mu_start)  # the reference: the start policy, computed once
print(f"{len(chosen)} fixed pairs; preferred lengths {int(y_w.min())}-{int(y_w.max())}, "
      f"the others {int(y_l.min())}-{int(y_l.max())}")

mu_dpo = mu_start.clone().requires_grad_(True)
mu_grpo = mu_start.clone().requires_grad_(True)
opt_dpo = torch.optim.Adam([mu_dpo], lr=0.5)
opt_grpo = torch.optim.Adam([mu_grpo], lr=0.5)
samples = first
for step in range(1, 301):
    logps = length_logps(mu_dpo)  # DPO: the same pairs at every step
    loss, metrics = dpo_loss(logps[y_w], logps[y_l], ref[y_w], ref[y_l], beta=0.1)
    opt_dpo.zero_grad()
    loss.backward()
    opt_dpo.step()

    if step > 1:  # GRPO: a fresh group from the current policy at every step
        with torch.no_grad():
            samples = torch.multinomial(length_logps(mu_grpo).exp(), groups * k,
                                        replacement=True, generator=generator)
    advantages = group_advantages(toy_reward(lengths[samples]), k)
    sample_logps = length_logps(mu_grpo)[samples].unsqueeze(1)  # [128, 1]
    grpo = policy_gradient_loss(sample_logps, torch.ones_like(sample_logps), advantages)
    opt_grpo.zero_grad()
    grpo.backward()
    opt_grpo.step()
    if step in (1, 50, 100, 150, 200, 300):
        print(f"step {step:3}  DPO: {describe(mu_dpo.detach())} (pairs ranked right: "
              f"{metrics['rewards/accuracies']:.0%})   GRPO: {describe(mu_grpo.detach())}")

# %% [markdown]
# Both move towards shorter texts at first, at about the same speed. Then they part:
#
# - **DPO overshoots.** Every pair says "shorter beats longer", because every pair was drawn
#   around 80 characters, far above 20. Nothing in the pairs says *stop at 20*: the loss keeps
#   falling as the policy gets shorter, past 20 and on towards 0, while the expected reward
#   gets worse. The pairs cannot react to what the policy writes now.
# - **GRPO settles near 20.** Once its samples straddle 20, a group contains texts that are too
#   short, and the reward ranks them below the ones near 20. The signal is about the current
#   samples, so it changes as the policy changes.
#
# Does β hold the overshoot back? Less than one might hope, with pairs like these. Here the
# preferred completion of a pair is the group's best and the other its worst, so it wins every
# time: a deterministic preference. Then −log σ(β·margin) keeps falling as the margin grows,
# its minimum lies at an infinite margin whatever β is, and β sets only how fast the gradient
# fades, not where the policy stops. Azar et al. (2023, "A General Theoretical Paradigm to
# Understand Learning from Human Preferences") show that with deterministic preferences DPO's
# KL regularisation toward π_ref is in effect ignored, and propose IPO, which fits the margin
# to a finite target, 1/(2β), instead. With noisy preferences (people who disagree, a sigmoid
# of a reward gap) a larger β does keep DPO closer to the reference. What stops the overshoot
# here in practice is stopping early, an IPO-style loss, or refreshing the pairs: sample the
# current model again, score, pair, train (iterative or "online" DPO). That is a step towards
# GRPO's fresh samples.

# %% [markdown]
# ## 3. A small run of each on the real model
#
# The same prompts (experiment 1's) and the same reward (−|characters − 20|). The two methods
# get the **same number of sampled completions**, because generation is the slow part:
#
# - **fixed pairs**: the base model samples a group of k for each prompt, once; each group
#   with variation gives one pair (best against worst); DPO then trains on those pairs for a
#   few epochs, with π_ref's log-probs computed once, before training;
# - **GRPO**: `grpo_core.loop.train` for a few steps, each sampling k completions for
#   `profile.prompts_per_step` of the prompts.
#
# The run lengths are kept small so that the notebook takes minutes on a laptop; neither
# method gets anywhere near 20 characters in so few steps (notebook 07 trains GRPO for
# `profile.max_steps` steps). Read the results as what they are: a few steps of each.

# %%
from grpo_core.logprobs import sequence_logprob, token_logprobs
from grpo_core.models import load_policy
from grpo_core.rollout import chat_prompt, sample_group
from grpo_core.rewards import length_reward
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

grpo_steps = {"smoke": profile.max_steps, "cpu": 4}.get(profile.name, 20)
all_rows = read_jsonl(EXP1_PROMPTS)
rows = all_rows[: min(len(all_rows), grpo_steps * profile.prompts_per_step)]
k = profile.group_size
print(f"{len(rows)} prompts, e.g. {[row['prompt'] for row in rows[:3]]}")
print(f"sampled completions: fixed pairs {len(rows)} x {k} = {len(rows) * k} (once); "
      f"GRPO {grpo_steps} steps x {profile.prompts_per_step} x {k} = "
      f"{grpo_steps * profile.prompts_per_step * k} (fresh)")

start = time.perf_counter()
base, tokenizer = load_policy(profile)
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")
prompts = [chat_prompt(tokenizer, row["prompt"]) for row in rows]

# %% [markdown]
# ### The fixed pairs
#
# Sampled once from the base model and scored by the reward. From here on DPO never samples
# again.

# %%
start = time.perf_counter()
collected = sample_group(base, tokenizer, prompts, k, max_new_tokens=profile.max_new_tokens,
                         temperature=profile.temperature, top_p=profile.top_p,
                         seed=profile.seed)
collected_rewards = torch.tensor(length_reward(collected.texts))  # [len(rows) * k]
chosen, rejected = preference_pairs(collected_rewards, k)  # [N] row indices each
print(f"sampled {len(collected.texts)} completions in {time.perf_counter() - start:.1f} s; "
      f"{len(chosen)} pairs (groups whose rewards all tie give none)")
pairs = pd.DataFrame({
    "prompt": [rows[int(i) // k]["prompt"] for i in chosen],
    "preferred (chars)": [len(collected.texts[int(i)]) for i in chosen],
    "other (chars)": [len(collected.texts[int(i)]) for i in rejected],
    "preferred completion": [collected.texts[int(i)].replace("\n", " ") for i in chosen],
})
pairs

# %% [markdown]
# π_ref's sequence log-probs of every completion in the pairs, computed once with the base
# model. After this, DPO needs no reference model in memory.

# %%
input_ids, attention_mask = collected.input_ids, collected.attention_mask  # prompt + completion
width = collected.completion_ids.size(1)


def seq_logps(model, index):
    """Sequence log-probs [len(index)] of the collected completions at these rows (eq. (2.3))."""
    token_logps = token_logprobs(model, input_ids[index], attention_mask[index], width,
                                 temperature=profile.temperature)
    return sequence_logprob(token_logps, collected.completion_mask[index])


with torch.no_grad():
    ref_chosen, ref_rejected = seq_logps(base, chosen), seq_logps(base, rejected)
print(f"ref log-probs: chosen {tuple(ref_chosen.shape)}, rejected {tuple(ref_rejected.shape)}")

# %% [markdown]
# ### DPO on the fixed pairs
#
# The DPO loop is short enough to write out: a batch of pairs, the four log-probs of
# eq. (6.1), `dpo_loss`, one AdamW step, with the same learning rate and gradient clipping
# as GRPO's loop.

# %%
dpo_epochs = {"smoke": 1}.get(profile.name, 3)
pairs_per_step = profile.prompts_per_step
beta = 0.1
dpo_model = copy.deepcopy(base).train()
optimizer = torch.optim.AdamW(dpo_model.parameters(), lr=profile.learning_rate, weight_decay=0.0)
dpo_log = []
start = time.perf_counter()
for epoch in range(dpo_epochs):
    for first_pair in range(0, len(chosen), pairs_per_step):
        batch = slice(first_pair, first_pair + pairs_per_step)
        loss, metrics = dpo_loss(seq_logps(dpo_model, chosen[batch]),
                                 seq_logps(dpo_model, rejected[batch]),
                                 ref_chosen[batch], ref_rejected[batch], beta=beta)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(dpo_model.parameters(), 1.0)
        optimizer.step()
        dpo_log.append({"epoch": epoch + 1, "loss": loss.item(), **metrics})
dpo_model.eval()
del optimizer
print(f"DPO: {len(dpo_log)} steps ({dpo_epochs} epochs over {len(chosen)} pairs) in "
      f"{time.perf_counter() - start:.1f} s")
print(pd.DataFrame(dpo_log).groupby("epoch").mean().round(3).to_string())

# %% [markdown]
# ### GRPO on fresh samples
#
# The course's loop (notebook 07), from the same base weights, on the same prompts and reward.

# %%
from grpo_core.loop import TrainConfig, train

grpo_model = copy.deepcopy(base)
config = TrainConfig.from_profile(profile, max_steps=grpo_steps, loss_type="grpo", beta=0.0,
                                  save_checkpoint=False)
start = time.perf_counter()
result = train(grpo_model, tokenizer, rows, length_reward, config, progress=False)
print(f"GRPO: {result.step} steps in {time.perf_counter() - start:.1f} s")
print(pd.DataFrame(result.metrics)[["step", "reward", "completions/mean_chars",
                                    "frac_reward_zero_std"]].round(2).to_string(index=False))

# %% [markdown]
# The `completions/mean_chars` column is GRPO's signal moving with the model: each step's
# completions were written by the policy as it was at that step. DPO's data stayed the pairs
# above, written by the base model, at every step of every epoch.
#
# ### What each model now writes
#
# Fresh samples from the base, the DPO and the GRPO model, for the same prompts with the same
# sampling seed, scored by the same reward. Neither training run saw these samples.

# %%
eval_prompts = prompts[: min(len(prompts), 4)]


def fresh_scores(model):
    rollout = sample_group(model, tokenizer, eval_prompts, k,
                           max_new_tokens=profile.max_new_tokens,
                           temperature=profile.temperature, top_p=profile.top_p,
                           seed=profile.seed + 1000)
    rewards = torch.tensor(length_reward(rollout.texts))
    return {"mean reward": round(rewards.mean().item(), 2),
            "mean characters": round(sum(map(len, rollout.texts)) / len(rollout.texts), 1),
            "hit the length limit": f"{rollout.truncated.float().mean().item():.0%}",
            "example": rollout.texts[0].replace("\n", " ")[:60]}


start = time.perf_counter()
scores = pd.DataFrame({name: fresh_scores(model) for name, model in
                       (("base", base), ("DPO, fixed pairs", dpo_model),
                        ("GRPO, fresh samples", grpo_model))}).T
print(f"{len(eval_prompts)} prompts x {k} samples per model, in "
      f"{time.perf_counter() - start:.1f} s")
scores

# %% [markdown]
# Both runs are a few steps long and each row is one sample of a few prompts, so this table
# cannot say whether a small difference between the rows is more than sampling noise (try
# another seed in `fresh_scores` and see how much the rows move). What the table can show is whether each
# method moved the model towards shorter texts at all, and how far from 20 characters both
# still are.
#
# The structural difference does not depend on these numbers. Look at the fixed pairs once
# more: their preferred completions are the shortest the base model happened to write. Once
# the model writes shorter texts than those, no pair says anything about the texts it writes;
# training on the same pairs longer only pushes the same way (the toy's overshoot). GRPO's next
# step would score whatever the model writes then.

# %%
with torch.no_grad():
    after_chosen, after_rejected = seq_logps(dpo_model, chosen), seq_logps(dpo_model, rejected)
print("log-probs of the fixed pairs under the DPO model, minus the base model's (mean):")
print(f"  preferred {(after_chosen - ref_chosen).mean().item():+.2f}, "
      f"other {(after_rejected - ref_rejected).mean().item():+.2f}, "
      f"margin {((after_chosen - ref_chosen) - (after_rejected - ref_rejected)).mean().item():+.2f}")

# %% [markdown]
# DPO widens the margin between the two completions of each pair, which is all its loss asks.
# In this run the preferred completions rose (+23.72 on average) and the others fell much
# further (−75.53). The loss does not control that split, only the difference: lowering both
# completions, the preferred one less, would satisfy it as well (a common observation in DPO
# runs).

# %%
del dpo_model, grpo_model, result

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# **1.** At the start of DPO the policy *is* the reference, so every log-ratio in eq. (6.1) is
# 0. What is the loss then, whatever the pairs?

# %%
from grpo_core.exercises import check

my_start_loss = ...  # your answer here

check("06.dpo_start_loss", my_start_loss)

# %% [markdown]
# **2.** A group of four completions has rewards (−5, −5, −5, −5), another (−40, −3, −12, −3).
# How many pairs does `preference_pairs` make from the two groups, and which row (0–7) is the
# preferred completion of the pair it makes?

# %%
my_number_of_pairs = ...  # your answer here
my_preferred_row = ...  # your answer here

check("06.preference_pairs", (my_number_of_pairs, my_preferred_row))

# %% [markdown]
# **3.** Eq. (6.1) in your own lines: write `my_dpo_loss` from the `[N]` sequence log-probs of
# the chosen and rejected completions under the policy and the reference, and β; it returns
# the loss averaged over pairs. The check compares it with `dpo_loss` at two values of β.

# %%
def my_dpo_loss(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    return ...  # your code here: a scalar


check("06.dpo_loss", my_dpo_loss)

# %% [markdown]
# ## What this notebook showed
#
# - DPO learns from pairs collected once; GRPO samples fresh completions from the current policy
#   every step.
# - Fixed pairs stop saying anything once the policy writes past them; fresh samples score
#   whatever the policy writes now.
# - DPO widens each pair's margin, which is all its loss asks; how it does so is not controlled.
#
# **Next:** [07 · Experiment 1: reward a length of 20 characters](07_exp1_length.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
