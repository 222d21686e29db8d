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
# # 07 · Experiment 1: reward a length of 20 characters
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/07_exp1_length.ipynb)
#
# **Needs:** a laptop CPU (offline) or a Colab GPU. **Takes:** the longest of the first half:
# 30 training steps of experiment 1 with live plots. Do not want to wait? The section "A run
# recorded earlier", near the end, shows the curves of a finished `cpu` run without training
# anything. The start page lists its measured time and peak memory (`cpu` profile, with the
# machine it was measured on); `smoke` runs every cell in seconds. Not yet measured on a GPU.
#
# The lecture's smallest GRPO example: before any real task, reward the completion for being
# **close to 20 characters long**. Nothing in the reward says *what* to write, only how long
# it should be, so whatever the model learns here it learns from that one number.
# "GRPO optimizes exactly the number you return": a real model finds out quickly.
#
# In this notebook you
# 1. read the reward and score a few strings by hand;
# 2. look at the model's completions before training (about ten times too long);
# 3. train it with the course's GRPO loop while a live plot draws reward and length;
# 4. compare completions after training;
# 5. flip the reward's sign, as a famous public example once did by mistake, and watch the
#    length run the other way.

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
                            "--notebook", "07_exp1_length"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## The reward
#
# $$ r(y) = -\,\bigl|\,\mathrm{len}(y) - 20\,\bigr| $$
#
# - $y$: one completion, as text (the chat template and the prompt are not part of it);
# - $\mathrm{len}(y)$: its length in **characters** (not tokens);
# - $r(y)$: its reward, at most 0, reached exactly at 20 characters; every character too many
#   or too few costs 1.
#
# The sign matters: the minus makes *distance from 20* a cost. Drop it and the reward pays
# for distance from the target: within a group the completion farthest from 20 characters
# (for this base model's long texts, the longest) wins. That is the bug a well-known
# public GRPO example shipped with; the last section of this notebook reproduces it.
#
# The function has TRL's reward signature (`completions` plus any dataset columns as keyword
# arguments), so the same function plugs into our loop and into `GRPOTrainer` (notebook 10):

# %%
import inspect

from grpo_core.rewards import length_reward, make_length_reward

print(inspect.getsource(make_length_reward))

# %% [markdown]
# A toy group of four completions for one prompt: the reward of each, and the advantage GRPO
# gives it, $A_i = (r_i - \mathrm{mean}(r)) / (\mathrm{std}(r) + 10^{-4})$ (notebook 03).
# Every completion whose reward beats the group's mean is pushed up, here three of the four,
# the one closest to 20 characters the hardest; only the 86-character one, far below the mean,
# is pushed down.

# %%
# NBVAL_CHECK_OUTPUT
import pandas as pd

from grpo_core.advantages import group_advantages

toy = [
    "Hi!",
    "The ocean is vast.",
    "The ocean covers most of the planet.",
    "The ocean covers about seventy percent of Earth's surface and holds most of its water.",
]
rewards = length_reward(toy)
table = pd.DataFrame({
    "completion": toy,
    "characters": [len(t) for t in toy],
    "reward": rewards,
    "advantage": group_advantages(rewards, group_size=4).tolist(),
})
print(table.round(3).to_string(index=False))

# %% [markdown]
# ## The model and the prompts
#
# The profile decides the model and the scale (notebook 00). The prompts are ordinary
# questions from `grpo_core/data/prompts_exp1.jsonl`; none of them asks for a short answer.

# %%
import torch

from grpo_core.models import load_policy
from grpo_core.profiles import get_profile
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

profile = get_profile()
print(f"profile {profile.name} ({profile.reason}): {profile.model_id}, "
      f"{profile.prompts_per_step} prompts x {profile.group_size} completions per step, "
      f"{profile.max_new_tokens} new tokens, {profile.max_steps} steps, lr {profile.learning_rate}")
model, tokenizer = load_policy(profile)
prompts = read_jsonl(EXP1_PROMPTS)
print(f"{len(prompts)} prompts, e.g. {[row['prompt'] for row in prompts[:3]]}")

# %% [markdown]
# ## Before training
#
# A group of completions for two prompts, sampled as the training loop samples them. The mean
# distance from 20 characters, $\overline{|\mathrm{len}-20|}$, is minus the mean reward.

# %%
from grpo_core.rollout import chat_prompt, sample_for_profile

probe = [chat_prompt(tokenizer, "Tell me about the ocean."),
         chat_prompt(tokenizer, "Describe a train journey.")]


def show_samples(model, title: str, seed: int = 0) -> float:
    """Sample a group per probe prompt; print each completion's length; return mean |len - 20|."""
    rollout = sample_for_profile(model, tokenizer, probe, profile, seed=seed)
    distances = [-r for r in length_reward(rollout.texts)]
    print(f"{title}: mean |len - 20| = {sum(distances) / len(distances):.1f} characters")
    for text in rollout.texts[:: max(1, profile.group_size // 4)]:
        print(f"  {len(text):4d} chars | {text[:90]!r}")
    return sum(distances) / len(distances)


before = show_samples(model, "before training")

# %% [markdown]
# ## Train it yourself
#
# `grpo_core.loop.train` runs the round of notebook 02 over and over: choose prompts, sample a
# group for each (eval mode), score them, turn scores into advantages, take the log-probs
# of the sampled tokens (train mode), the GRPO loss, one AdamW step. The settings:
#
# | setting | value | why |
# |---|---|---|
# | `loss_type` | `"grpo"` | the GRPO paper's: each completion's token log-probs averaged over its tokens, then over completions. The lecture's box *sums* the tokens instead; the gradients differ by 1/\|oᵢ\| per completion, by the ratio of a group's longest to its shortest completion (notebook 04, section 6). TRL's default is `"dapo"` |
# | `beta` | 0 | no KL penalty, so no reference model is loaded (notebook 04) |
# | `num_iterations` | 1 | one update per rollout: the ratio is 1 and the clip never fires |
# | sizes, steps, learning rate | from the profile | `cpu`: 2 prompts x 8, 64 new tokens, 30 steps, 2e-5 |
#
# The live plot redraws every step: reward (with the batch's spread), completion length in
# tokens and characters (dashed: the 20-character target), the fraction of groups whose
# rewards were all equal, KL (not logged at beta = 0), the clip ratio and the entropy.
# Interrupt the kernel whenever you like: `train` stops cleanly and returns what it has.

# %%
# NBVAL_IGNORE_OUTPUT
from grpo_core.loop import TrainConfig, train
from grpo_core.plots import LivePlot

config = TrainConfig.from_profile(profile, loss_type="grpo", beta=0.0, num_iterations=1)
plot = LivePlot(every=1, title=f"experiment 1 live ({profile.name})",
                targets={"completions/mean_chars": 20})
result = train(model, tokenizer, prompts, length_reward, config, callbacks=[plot])
plot.close()
print(f"{result.stopped} after {result.step} steps, "
      f"{sum(r['step_time'] for r in result.metrics) / 60:.1f} min")

# %% [markdown]
# ## After training
#
# The same prompts and the same sampling seed as before training:

# %%
after = show_samples(model, "after training")
print(f"mean |len - 20|: {before:.1f} -> {after:.1f} characters")

# %% [markdown]
# Look at *what* it writes, not only how long. Nothing in the reward asks for an answer to
# the question, so nothing keeps one: the model has learned exactly the number it was given.
# The reward would not object either if every completion, whatever the prompt, became the
# same short phrase: it would be satisfied and the model useless. That is **collapse**. The
# curves that show it are the entropy falling toward zero and `frac_reward_zero_std` rising toward one
# (every completion of a group the same, so every reward ties); `diagnose` reads both
# (notebook 11). They show it once it is under way, not long before: in the 30-step run
# recorded at the end of this notebook `frac_reward_zero_std` is zero at every step (the
# lengths still differ within every group, so no rewards tie), and the entropy first *rises*
# as the model leaves its usual answers, then falls to end below where it started. The
# recorded run's cell prints both.

# %% [markdown]
# ## The sign flip: GRPO optimizes exactly the number you return
#
# Now give the trained model the reward with its sign flipped, $+|\mathrm{len}(y) - 20|$, the
# bug TRL's own `GRPOTrainer` quick-start example once shipped with: its `reward_len` returned
# `abs(20 - len(completion))`, which pays completions for being *far* from 20 characters
# ([huggingface/trl#2771](https://github.com/huggingface/trl/issues/2771), fixed in the docs by
# [#2777](https://github.com/huggingface/trl/pull/2777)). Nothing else changes. Which way
# does the length go? $+|\mathrm{len}(y) - 20|$ is V-shaped: it pays for being far from 20
# characters in *either* direction (an empty completion earns 20, as much as one of twice the
# target's length, and a longer one earns more).
# From the base model, whose answers run long, the longest completion of a group wins. From
# a policy trained to about 20 characters both ways are open: each step pushes toward
# whichever samples of its groups strayed furthest, short or long, and once one side pulls
# ahead the next groups lean that way too. Either can happen; the cell after the plot prints
# which way this run went. The optimizer takes whichever direction is cheaper from where the
# policy is: it does not know what you *meant*, only which completions in each group scored
# higher.

# %%
# NBVAL_IGNORE_OUTPUT
from grpo_core.experiments import negated

flip_steps = {"smoke": 1, "cpu": 6}.get(profile.name, 20)
flipped_plot = LivePlot(every=1, title="sign flipped: reward +|len - 20|")
flipped = train(model, tokenizer, prompts, negated(length_reward),
                TrainConfig.from_profile(profile, max_steps=flip_steps), callbacks=[flipped_plot])
flipped_plot.close()

# %%
chars = [r["completions/mean_chars"] for r in flipped.metrics]
print(f"mean characters per completion, step by step: {[round(c) for c in chars]}")
empty = sum(not text.strip() for text in flipped.last_texts)
print(f"{'shorter' if chars[-1] < chars[0] else 'longer'} by {abs(chars[-1] - chars[0]):.0f} "
      f"characters from the first flipped step to the last; {empty} of "
      f"{len(flipped.last_texts)} completions of the last step are empty")
_ = show_samples(model, "after the flipped reward")

# %% [markdown]
# ## A run recorded earlier
#
# The curves of a `cpu`-profile run of experiment 1, made with the same code from the command line
# (`python -m grpo_core length --profile cpu --out data/runs/exp1-length-cpu`):

# %%
from pathlib import Path

from IPython.display import Image, display

from grpo_core.plots import figure_png, plot_metrics
from grpo_core.run_files import read_jsonl, runs_dir

recorded_dir = runs_dir() / "exp1-length-cpu"
if (recorded_dir / "metrics.jsonl").exists():
    recorded = read_jsonl(recorded_dir / "metrics.jsonl")
    distance = [-r["rewards/length_reward/mean"] for r in recorded]
    print(f"{len(recorded)} steps; mean |len - 20| over the first 5 steps "
          f"{sum(distance[:5]) / 5:.1f}, over the last 5 {sum(distance[-5:]) / 5:.1f} characters")
    entropy = [r["entropy"] for r in recorded]
    zero_std = [r["frac_reward_zero_std"] for r in recorded]
    print(f"entropy: step 1 {entropy[0]:.2f}, highest {max(entropy):.2f} (step "
          f"{entropy.index(max(entropy)) + 1}), mean over the last 5 steps "
          f"{sum(entropy[-5:]) / 5:.2f}; frac_reward_zero_std: largest {max(zero_std):.2f}")
    display(Image(figure_png(plot_metrics(recorded, title="recorded cpu run",
                                          targets={"completions/mean_chars": 20}))))
else:
    print(f"no recorded run at {recorded_dir}")

# %% [markdown]
# ## β on a real run: what the KL penalty bounds
#
# The lecture: "beta bounds the whole run". Every run so far used β = 0, so no KL was ever
# computed. Three recorded `cpu`-profile runs of this experiment differ only in β, with the
# same seed, prompts and 30 steps:
#
# ```bash
# python -m grpo_core length --profile cpu --steps 30 --no-checkpoint --out data/runs/exp1-length-cpu
# python -m grpo_core length --profile cpu --beta 0.04 --out data/runs/exp1-beta-0.04-cpu --quiet
# python -m grpo_core length --profile cpu --steps 30 --beta 0.2 --out data/runs/exp1-beta-0.2-cpu --quiet
# ```
#
# (as each run's `config.json` records them; 30 steps is the profile's default.)
#
# With β > 0 the loop keeps a frozen copy of the starting model and logs `kl`, the mean k3
# per completion token (eq. (4.3), times ρ = 1 in value) of the policy against it. How far
# the policy drifts shows in the KL itself and in what the reward cannot see: completion
# length, the reward, and the entropy of the sampled tokens. Each figure below is the mean
# over the first and the last 5 steps ± its standard error over those steps; one seed per β,
# so read differences smaller than a few standard errors as noise.

# %%
import matplotlib.pyplot as plt

from grpo_core.diagnosis import diagnose
from grpo_core.plots import DPI
from grpo_core.run_files import load_run, series
from grpo_core.tables import show_table

BETA_RUNS = {0.0: "exp1-length-cpu", 0.04: "exp1-beta-0.04-cpu", 0.2: "exp1-beta-0.2-cpu"}


def mean_and_sem(values):
    """Mean of ``values`` and its standard error (sample std / sqrt n; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    spread = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return mean, spread / n**0.5


def first_and_last(records, key, span=5):
    _, values = series(records, key)
    if not values:
        return "not logged"
    (a, a_sem), (b, b_sem) = mean_and_sem(values[:span]), mean_and_sem(values[-span:])
    return f"{a:.3g} ± {a_sem:.2g} -> {b:.3g} ± {b_sem:.2g}"


beta_runs = {beta: load_run(name) for beta, name in BETA_RUNS.items()
             if (runs_dir() / name / "metrics.jsonl").exists()}
missing = [name for beta, name in BETA_RUNS.items() if beta not in beta_runs]
if missing:
    print("not recorded in data/runs/ yet:", ", ".join(missing))
drift = pd.DataFrame({
    beta: {"kl (first 5 -> last 5 steps)": first_and_last(run.records, "kl"),
           "reward": first_and_last(run.records, "reward"),
           "completion tokens": first_and_last(run.records, "completions/mean_length"),
           "entropy": first_and_last(run.records, "entropy"),
           "diagnose: KL": diagnose(run)["KL blow-up"].evidence}
    for beta, run in beta_runs.items()}).rename(columns=lambda beta: f"beta = {beta:g}")
# one row per beta: an HTML table here, blocks that fit 100 columns as text (grpo_core.tables)
display(show_table(drift.T))
print(f"\nthe live beta = 0 run of this notebook ({profile.name} profile, {len(result.metrics)} "
      f"steps): entropy {first_and_last(result.metrics, 'entropy')}")

# %%
if beta_runs:
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.0), dpi=DPI)
    for key, axis in zip(("kl", "reward", "completions/mean_length", "entropy"), axes, strict=True):
        for color, (beta, run) in enumerate(beta_runs.items()):
            steps, values = series(run.records, key)
            if values:  # one colour per beta, also where beta = 0 has no KL
                axis.plot(steps, values, color=f"C{color}", label=f"β = {beta:g}")
        axis.set(title=key, xlabel="step")
    axes[0].set_yscale("symlog", linthresh=1e-3)  # the KL starts at exactly 0
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# How to read it. The KL is a per-token average of k3 against the starting model: 0 at the
# first step, growing as the policy moves away. These are single runs, one seed each: only
# differences of several standard errors count, and a second seed moves a run by more than
# the ± above, which are the spread of five steps within one run (notebook 12 measures the
# spread between seeds). At β = 0.04 the KL rises as the length falls, and `diagnose` flags
# it as a blow-up (its rule: 1 per token, or ten times the recent median), naming the length
# reward as rising with it. Here that is the intended move, not a hack: the reward asks for
# texts more than ten times shorter than the model's habit, far from the reference by
# construction, and the KL measures exactly how far. Against β = 0 the reward ends lower and, in these two
# runs, the entropy higher; read that entropy gap as one run's, not as an effect of β: the
# line under the table prints the live β = 0 run of this notebook (same setting, today's
# build), whose entropy need not end where the recorded β = 0 run's does. At
# β = 0.2, a five times stronger pull toward the reference, the KL stays low over the whole
# run and the drift is bounded: the completions stay far longer than the target and the
# reward far lower (the table's last column): within 30 steps the penalty holds the policy
# short of the reward's target, the lecture's "beta bounds the whole run" seen on a real run.
# That is a trade-off, not a fix (notebook 11 comes back to it). At β = 0 there is no KL to
# read at all, which is why TRL's default, β = 0, leaves only the learning rate and the clip
# to keep a long run near where it started.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. Without running the model: what reward does `length_reward` give the completion
#    `"Hello there, friend!"`, and what does it give a completion of 35 characters?

# %%
from grpo_core.exercises import check

my_answers = ...  # your answer here: a list of two numbers

check("07.length_rewards", my_answers)

# %% [markdown]
# 2. A group of four completions has lengths 12, 19, 26 and 60 characters. Which one (0-3)
#    gets the largest advantage, and is any other advantage positive (True/False)?

# %%
my_best = ...  # your answer here
my_other_positive = ...  # your answer here

check("07.best_in_group", (my_best, my_other_positive))

# %% [markdown]
# 3. The inverted reward, `abs(len - 20)` (no minus): write it as a reward function with TRL's
#    signature. Which completion of the group above would it push up hardest?

# %%
def inverted_length_reward(completions, **kwargs):
    return ...  # your code here: one number per completion


check("07.inverted_reward", inverted_length_reward)

# %% [markdown]
# ## What this notebook showed
#
# - Experiment 1: GRPO moves the completion length to 20 characters, and the samples show what
#   the reward did not ask for.
# - With the reward's sign flipped, the optimizer follows the number, whichever way is cheaper
#   from where the policy is.
# - β trades reward against distance from the reference: the recorded runs put the KL and the
#   reward side by side.
#
# **Next:** [08 · Experiment 2: unit-test rewards, the signal check, and the group size k](08_exp2_mbpp.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
