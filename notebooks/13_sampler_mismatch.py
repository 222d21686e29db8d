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
# # 13 · When the sampler is not the learner
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/13_sampler_mismatch.ipynb)
#
# **Needs:** a laptop CPU. Section 2 loads the model and samples a few groups in two
# precision plans; the bfloat16 plan runs on any CPU, slowly where the CPU has no bfloat16
# instructions. Sections 3 and 4 read hand-made tensors and the runs recorded in
# `data/runs/`. **Takes:** a minute or two. The start page lists its measured time and peak
# memory (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in
# seconds. Not yet measured on a GPU.
#
# Beyond the lecture. Notebook 02's update assumes that the completions were drawn from the
# policy being trained. In this course they are not quite: on a CPU the loop samples from a
# **copy** of the policy (packed for oneDNN's kernel, in bfloat16 where the CPU has bfloat16
# instructions) and computes the loss with the float32 master weights. Libraries go further:
# TRL and verl sample with vLLM, a separate engine with its own kernels, and asynchronous
# trainers sample with weights one or more updates old. The tokens come from one
# distribution, the gradient assumes another. This notebook asks:
#
# 1. what the **importance weight** is, and why it puts the expectation back (eqs. (13.1)
#    to (13.3));
# 2. **how far apart** the sampling copy and the learner are in each precision plan, token
#    by token, on real rollouts;
# 3. the **correction** TRL and verl apply, written from scratch, on a hand-made example;
# 4. what the correction **changes** in a real run: experiment 1 with and without it, four
#    seeds each.

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
                            "--notebook", "13_sampler_mismatch"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %%
import inspect
import math

import pandas as pd
import torch
from IPython.display import Image, display

from grpo_core.plots import figure_png
from grpo_core.profiles import get_profile
from grpo_core.tables import plain_table, show_table

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason})")

# %% [markdown]
# ## 1. The importance weight
#
# The policy gradient of notebook 02 is an expectation over completions drawn from the
# policy $\pi_\theta$. When they are drawn from a sampler $\pi_s$ instead, multiplying by
# the ratio of the two probabilities gives the same expectation:
#
# $$ \mathbb{E}_{y \sim \pi_\theta}\big[A(y)\, \nabla_\theta \log \pi_\theta(y)\big]
#    = \mathbb{E}_{y \sim \pi_s}\big[w(y)\, A(y)\, \nabla_\theta \log \pi_\theta(y)\big],
#    \qquad w(y) = \frac{\pi_\theta(y)}{\pi_s(y)} = \exp\Big(\sum_t \delta_t\Big) \tag{13.1} $$
#
# $$ \delta_t = \log \pi_\theta(y_t \mid x, y_{<t}) - \log \pi_s(y_t \mid x, y_{<t}) \tag{13.2} $$
#
# A completion's weight is the exponential of a **sum** over its tokens, so small per-token
# differences add up on long completions, and a few completions can carry most of the
# batch's weight (a high-variance estimate). Practice bounds it. TRL
# (`vllm_importance_sampling_mode`) and verl (`docs/algo/rollout_corr.md`) offer the same
# four ways, per token ($w_t = e^{\delta_t}$) or per completion ($w = e^{\sum_t \delta_t}$),
# with a band $[c_\text{min}, c_\text{max}]$:
#
# $$ \text{truncate: } \min\big(\max(w, c_\text{min}), c_\text{max}\big), \qquad
#    \text{mask: } w \cdot \mathbb{1}\big[c_\text{min} \le w \le c_\text{max}\big] \tag{13.3} $$
#
# The weight multiplies each token's policy term in the loss (before the KL term is added),
# with no gradient of its own.
#
# | symbol | meaning |
# |---|---|
# | $\pi_\theta$ | the learner: the float32 master weights, under the plan's autocast |
# | $\pi_s$ | the sampler: the copy the completions were drawn from |
# | $\delta_t$ | token $t$'s log ratio, learner minus sampler (nats) |
# | $w$, $w_t$ | a completion's, a token's importance weight |
# | $c_\text{max}$ | the band's top: TRL's `vllm_importance_sampling_cap`, 3 by default; $c_\text{min}$ unset |
#
# ## 2. How far apart, per precision plan
#
# A plan (`grpo_core.precision`, notebook 00) decides the sampling copy: on a CPU a packed
# float32 copy (the same weights, another kernel, so only the order of sums differs) or a
# packed bfloat16 copy (weights rounded to bfloat16 and every matmul in bfloat16,
# while the learner runs bfloat16 autocast, which keeps some operations in float32).
# `measure_mismatch` samples groups from a plan's copy and scores every sampled token under
# both:

# %%
from grpo_core.mismatch import measure_mismatch

print(inspect.getsource(measure_mismatch))

# %%
# NBVAL_IGNORE_OUTPUT
import time

from grpo_core.experiments import length_experiment
from grpo_core.models import load_policy
from grpo_core.mismatch import plan_to_measure
from grpo_core.precision import detect_precision

model, tokenizer = load_policy(profile)
experiment = length_experiment(profile)
prompts = [row["prompt"] for row in experiment.prompts[:4]]
measured, seconds = {}, {}
for requested in ("float32", "bfloat16", "float16"):
    plan = plan_to_measure(detect_precision(profile.device, requested), profile.device)
    if plan is None:
        print(f"{requested}: {detect_precision(profile.device, requested).describe()}: "
              "no copy, nothing to measure")
        continue
    started = time.perf_counter()
    measured[requested] = measure_mismatch(model, tokenizer, prompts, plan,
                                           group_size=profile.group_size,
                                           max_new_tokens=profile.max_new_tokens, seed=0)
    seconds[requested] = time.perf_counter() - started
    print(f"{requested}: {plan.describe()}: {seconds[requested]:.1f} s")

# %% [markdown]
# (A float16 plan samples from the policy itself under autocast, so on a CPU it has no copy
# to measure. On a GPU no plan has one: there `plan_to_measure` makes a copy in the plan's
# dtype, what a separate engine holding those weights would sample from.) For each plan with a
# copy: the mean and the
# largest $|\delta_t|$, the share of tokens whose weight $e^{\delta_t}$ is off by more than
# 10 %, the spread of the completions' summed log ratios $\sum_t \delta_t$, and the share of
# completions whose weight $w$ leaves TRL's band (above 3, or below a third):

# %%
CAP = 3.0  # TRL's vllm_importance_sampling_cap (grpo_core.sampling_correction.TRL_DEFAULT_CLIP_MAX)
rows = []
for requested, found in measured.items():
    summary = found.summary(threshold=1.1)
    sequence = found.sequence_log_ratios()
    rows.append({"plan": requested, "tokens": int(summary["tokens"]),
                 "mean |delta|": f"{summary['mean_abs']:.2e}",
                 "largest |delta|": f"{summary['max_abs']:.2e}",
                 "tokens off > 10 %": f"{summary['share_past']:.1%}",
                 "sd of sum delta": f"{summary['sequence_log_ratio_sd']:.3f}",
                 "completions outside [1/3, 3]": f"{(sequence.abs() > math.log(CAP)).float().mean():.1%}"})
display(show_table(pd.DataFrame(rows), index=False))

# %%
from grpo_core.plots import plot_log_ratio_histograms

figure = plot_log_ratio_histograms(
    {plan: found.token_log_ratios().tolist() for plan, found in measured.items()})
display(Image(figure_png(figure)))

# %%
float32_mean = measured["float32"].summary()["mean_abs"]
bfloat16_mean = measured["bfloat16"].summary()["mean_abs"]
print(f"mean |delta| per token: bfloat16 copy {bfloat16_mean:.2e}, float32 copy "
      f"{float32_mean:.2e} nats: the bfloat16 copy is "
      + (f"{bfloat16_mean / float32_mean:.0f} times further from the learner"
         if float32_mean > 0 else "the only one that differs at all"))
longest = max(found.mask.sum(dim=-1).max().item() for found in measured.values())
print(f"completions of up to {longest} tokens: a sum of that many deltas decides each "
      "completion's weight")

# %% [markdown]
# The float32 copy differs from the learner by float rounding only: its weights are the
# learner's, and only the order of the sums differs. The bfloat16 copy is another model, a
# little: a typical token's weight is a few percent from 1 (the table's mean), a minority of
# tokens are further off, and the weights of whole completions, products over their tokens,
# spread much wider (the spread of the summed deltas, in log space). That spread is what a
# sequence-level correction reads, and it grows with the completion's length.
#
# ## 3. The correction, from scratch
#
# `sampler_weights` implements (13.2) and (13.3) as TRL 1.16 defines them
# (`GRPOTrainer._generate_and_score_completions`): the per-token difference is taken on
# completion tokens only, a token the sampler reports no log-probability for counts as 0
# (weight 1), a sequence mode sums first:

# %%
from grpo_core.sampling_correction import log_ratios, sampler_weights

print(inspect.getsource(log_ratios))
print(inspect.getsource(sampler_weights))

# %% [markdown]
# `tests/test_trl_parity.py` cuts those lines out of TRL's installed source and runs them on
# the same tensors as `sampler_weights`, for all four modes and three bands: they agree
# exactly; it also checks that TRL's loss applies the weights where `grpo_loss` does.
#
# A hand-made example: two completions of three tokens (the second has padding at its last
# position), whose per-token deltas are chosen so that each mode does something different
# with a band of $[0.5, 1.5]$:

# %%
# NBVAL_CHECK_OUTPUT
mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
learner = torch.tensor([[-1.0, -2.0, -0.5], [-0.2, -3.0, 0.0]])
deltas = torch.tensor([[0.1, -0.9, 0.2], [0.3, 0.2, 0.0]])
sampler = (learner - deltas) * mask - 9.0 * (1 - mask)  # junk in the padding, as a batch has
print("deltas (learner - sampler), padding zeroed:")
print(log_ratios(learner, sampler, mask))
toy = {mode: sampler_weights(learner, sampler, mask, mode, clip_min=0.5, clip_max=1.5)
       for mode in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")}
print(plain_table(pd.DataFrame({mode: [" ".join(f"{w:.3f}" for w in row) for row in weights.tolist()]
                                for mode, weights in toy.items()},
                               index=["completion 1", "completion 2"]).T))

# %% [markdown]
# Read it column by column. Per token, completion 1's middle token ($e^{-0.9} = 0.41$, below
# the band) is raised to 0.5 by truncation and dropped by masking, while its other tokens
# keep their own weights. Per completion, completion 1's weight is $e^{0.1 - 0.9 + 0.2}$, in
# the band, and completion 2's $e^{0.5}$, above it: truncation caps it at 1.5, masking drops
# the whole completion. A sequence mode gives one weight to all of a completion's tokens.
#
# On the bfloat16 copy's real completions of section 2, with TRL's band (no bottom, top 3):

# %%
found = measured["bfloat16"]
token_counts = found.mask.sum(dim=-1)
unbounded = {"token": torch.exp(found.token_log_ratios()),
             "sequence": torch.exp(found.sequence_log_ratios()).repeat_interleave(token_counts)}
share = {}
for mode in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
    weights = sampler_weights(found.learner, found.sampler, found.mask, mode, None, CAP)
    on_tokens = weights.expand_as(found.mask)[found.mask.bool()]
    changed = on_tokens != unbounded[mode.split("_")[0]]
    share[mode] = {"weight min": f"{on_tokens.min():.3f}", "weight max": f"{on_tokens.max():.3f}",
                   "tokens whose weight the band changed": f"{changed.float().mean():.1%}"}
display(show_table(pd.DataFrame(share).T))

# %% [markdown]
# ## 4. With and without, in a real run
#
# Does the correction change what training does at this mismatch? Experiment 1 (the length
# reward, notebook 07's 30 steps) in the bfloat16 plan, four seeds, each seed twice: once
# with TRL's default correction (`--sampling-correction sequence_mask`, top 3) and once
# without it (`--sampling-correction measure`: the same extra pass and metrics, no weights).
# A seed's two runs draw the same first rollout and part only through the update, so their
# difference is paired. All eight were recorded by one commit with
# `tools/record_correction_runs.sh`:

# %%
from grpo_core.run_files import load_run, runs_dir, series
from grpo_core.stats import seed_interval

SEEDS = range(4)
ARMS = {"without": "plain", "with": "corrected"}
runs = {(arm, seed): load_run(runs_dir() / f"exp1-sampler-{name}-seed{seed}-cpu")
        for arm, name in ARMS.items() for seed in SEEDS}
commits = {run.config["code"]["commit"][:7] for run in runs.values()}
clean = all(run.config["code"]["clean"] for run in runs.values())
print(f"{len(runs)} runs, recorded by {sorted(commits)} (clean tree: {clean})")
print(f"plan: {runs['with', 0].config['precision']}")
print(f"steps per run: {runs['with', 0].config['train']['max_steps']}")
print(f"CPU kernels: {runs['with', 0].config['draws']['cpu_kernels']}")

# %%
LAST = 5  # the outcome: the training reward over the last 5 steps


def mean_of(run, key, steps=None):
    _, values = series(run.records, key)
    values = values if steps is None else values[-steps:]
    return sum(values) / len(values)


table, differences = [], []
for seed in SEEDS:
    without, with_ = runs["without", seed], runs["with", seed]
    first_equal = series(without.records, "reward")[1][0] == series(with_.records, "reward")[1][0]
    difference = mean_of(with_, "reward", LAST) - mean_of(without, "reward", LAST)
    differences.append(difference)
    table.append({"seed": seed, "step-1 reward equal": first_equal,
                  f"without: reward, last {LAST}": f"{mean_of(without, 'reward', LAST):.2f}",
                  f"with: reward, last {LAST}": f"{mean_of(with_, 'reward', LAST):.2f}",
                  "with - without": f"{difference:+.2f}",
                  "mean |delta| (with)": f"{mean_of(with_, 'sampling/sampling_logp_difference/mean'):.3f}",
                  "weight max": f"{max(series(with_.records, 'sampling/importance_sampling_ratio/max')[1]):.2f}",
                  "tokens dropped": f"{mean_of(with_, 'sampling/dropped_token_share'):.1%}"})
display(show_table(pd.DataFrame(table), index=False))

# %%
from grpo_core.plots import compare_runs, plot_seed_changes

display(Image(figure_png(compare_runs(
    {f"{arm}, seed {seed}": run.records for (arm, seed), run in runs.items() if seed < 2},
    keys=("reward", "completions/mean_chars", "sampling/sampling_logp_difference/mean"),
    window=3, title="experiment 1, bfloat16 plan: with and without the correction (seeds 0-1)"))))
display(Image(figure_png(plot_seed_changes(
    {"with - without": differences}, ylabel=f"reward over the last {LAST} steps, paired by seed",
    title="each seed, mean, 95 % t-interval"))))

# %%
effect = seed_interval(differences)
print(f"with - without, reward over the last {LAST} steps: {effect.describe()}")
if effect.low is not None and effect.low > 0:
    verdict = "the correction raised the reward at the end, across seeds"
elif effect.high is not None and effect.high < 0:
    verdict = "the correction lowered the reward at the end, across seeds"
else:
    verdict = (f"no effect is detectable: the interval holds 0, and any effect from "
               f"{effect.low:+.2f} to {effect.high:+.2f} is compatible with these {effect.n} seeds")
print(verdict)
dropped = [mean_of(runs["with", seed], "sampling/dropped_token_share") for seed in SEEDS]
print(f"tokens the correction dropped, mean over steps and seeds: {sum(dropped) / len(dropped):.1%}")

# %% [markdown]
# What the numbers above say, and what they cannot. A sequence weight multiplies a
# completion's whole contribution, so the correction reweights each group's completions (the
# table's largest weights sit just under the band's top) and drops the rare completion whose
# weight passes it. Whether that changes where experiment 1 ends is what the paired interval
# answers, and the verdict printed above is computed from it: with four seeds, only an effect
# larger than about the interval's half-width could be told from none. The first step's
# rewards are equal in every pair, as they must be: the correction only enters the update.
# A larger mismatch (another engine's kernels, a sampler several updates behind, a quantized
# sampler) drops more completions and has more room to matter.
#
# What this leaves out:
#
# - **the sampler's own numbers.** The copy's log-probabilities come from a second forward
#   pass over the finished completion, not from the decoding steps that drew it (the same
#   weights and dtype, another order of sums); TRL reads them from vLLM's sampler;
# - **the KL term.** TRL corrects neither the KL term nor the old-policy ratio for the
#   sampler, and neither does `grpo_loss`;
# - **verl's other modes**: the geometric mean of the token ratios per completion, and
#   rejecting a completion by its share of far-off tokens;
# - **a GPU.** On a GPU the course samples from the policy itself under autocast, so there is
#   no copy: the mismatch there is vLLM's, which this course does not use.
#
# ## Exercises
#
# Each cell holds `...` where your answer goes; `check` says *not attempted yet* until you
# replace it, gives a hint when the answer is off, and *correct* when it is right. Worked
# solutions: `solutions/exercises.py`.
#
# **1.** A completion's three tokens have deltas (13.2) of 0.4, 0.3 and 0.5. What is its
# weight under `sequence_truncate` with TRL's band (top 3), and does `sequence_mask` keep it?

# %%
from grpo_core.exercises import check

my_weight, kept = ..., ...  # a number, and True or False
check("13.sequence_weight", (my_weight, kept))

# %% [markdown]
# **2.** Write `token_truncate` yourself: the per-token weights (13.3) of a batch, from the
# learner's and the sampler's log-probs, the completion mask and the band's top. The check
# runs it on a batch with junk in its padding.

# %%
def my_token_truncate(learner_logps, sampler_logps, mask, cap):
    return ...  # your code here: a [B, T] tensor of weights


check("13.token_truncate", my_token_truncate)

# %% [markdown]
# ## What this notebook showed
#
# - An importance weight, a product over a completion's tokens (13.1), puts a sampler's
#   completions back under the learner; TRL and verl bound it per token or per completion.
# - The float32 copy differs from the learner by rounding only; the bfloat16 copy's tokens
#   differ by a few percent, and whole completions' weights spread much wider.
# - Experiment 1 with and without TRL's default correction, four seeds each, paired by seed:
#   the interval printed in section 4 says what the correction changed at that mismatch.
#
# This is the course's last notebook: back to the [start page](START_HERE.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*): it
# holds the model in memory.
