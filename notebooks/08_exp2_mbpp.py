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
# # 08 · Experiment 2: unit-test rewards, the signal check, and the group size k
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/08_exp2_mbpp.ipynb)
#
# **Needs:** a laptop CPU (offline) or a Colab GPU. **Takes:** sections 1-2 (the reward, toy
# groups, the fake policy) run in seconds; section 3 samples from the model; sections 4-5 read
# recorded runs instead of training for an hour. The start page lists its measured time and
# peak memory (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in
# seconds. Not yet measured on a GPU.
#
# Lecture part: "GRPO for coding example (exp 2)", "Does the task give signal?", "Three
# different versions". The model writes a Python function; we run the problem's asserts in the
# sandbox; **the reward is the fraction that pass**. No reward model, no human labels: this
# is RLVR, reinforcement learning with verifiable rewards.
#
# The lecture's main practical advice comes before any training: *check that the task gives
# signal*. If every attempt in a group gets the same reward, every advantage is 0 and the step
# learns nothing (notebook 03). "You want the task at the edge of the model's ability."
# Before training Qwen3-0.6B on MBPP, the lecture sampled k = 4 attempts for 20 problems: mean
# reward 0.22, and 10 of the 20 groups *mixed* (not all equal).
#
# In this notebook you
# 1. score a few hand-written solutions with the unit-test reward;
# 2. learn the signal check and the formula behind it, $p^k + (1-p)^k$, on a fake policy
#    whose pass probabilities you choose;
# 3. run the signal check on the real model, on the problems it will train on, and on real
#    MBPP (the lecture's "too hard" case for a small model);
# 4. compare training with k = 2, 8 and 16 at the same number of completions per step: the
#    held-out score of each recorded run from step 0 on, with its standard error, whether
#    the differences between k are themselves beyond noise, and the measured share of
#    zero-spread groups against the formula;
# 5. train for a couple of steps yourself.
#
# **Data in each profile.** `gpu`: MBPP's train split from the Hub, as in the lecture.
# `cpu` and `smoke`: the course's own problems (`grpo_core/data/problems.jsonl`, written in MBPP's
# format: a statement, a function name, asserts) stand in for MBPP, because real MBPP is far
# beyond a 135M-parameter model (section 3 shows it). Training uses the *very easy* and
# *easy* ones.

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
                            "--notebook", "08_exp2_mbpp"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %%
import inspect
import time

import pandas as pd
import torch
from IPython.display import Image, display

from grpo_core.plots import figure_png
from grpo_core.profiles import get_profile
from grpo_core.tables import plain_table, show_table

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); data: {profile.data_source}")

# %% [markdown]
# ## 1. The reward: the fraction of asserts that pass
#
# $$ r(y) = \frac{\#\{\text{asserts of the problem that pass when run after } \mathrm{code}(y)\}}
#               {\#\{\text{asserts of the problem}\}} \tag{8.1}$$
#
# | symbol | meaning |
# |---|---|
# | $y$ | one completion: text, usually with a fenced ```` ```python ```` block |
# | $\mathrm{code}(y)$ | the code pulled out of it (`extract_code`), run in the sandbox (notebook 05) |
# | $r(y)$ | between 0 and 1: **partial credit**, 1 only when every assert passes |
#
# `unit_test_reward` (its source is in notebook 05) does this for a batch, with TRL's
# signature: the completions plus the dataset's `tests` and `setup_code` columns. Four
# hand-written answers to one of the course's problems:

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.mbpp import format_code_prompt, read_problems
from grpo_core.rewards import unit_test_reward

problem = next(row for row in read_problems() if row["entry_point"] == "subtract")
print(format_code_prompt(problem["text"], problem["tests"]), "\n")
print("all tests:", problem["tests"], "\n")
answers = {
    "correct": "```python\ndef subtract(a, b):\n    return a - b\n```",
    "backwards": "```python\ndef subtract(a, b):\n    return b - a\n```",
    "only the shown test": "```python\ndef subtract(a, b):\n    return 2\n```",
    "no code": "You subtract b from a.",
}
scores = unit_test_reward(list(answers.values()), tests=[problem["tests"]] * len(answers),
                          setup_code=[problem["setup_code"]] * len(answers))
for name, score in zip(answers, scores, strict=True):
    print(f"{name:<20} reward {score:.2f}")

# %% [markdown]
# `b - a` still passes `subtract(0, 0) == 0`: one assert of three, reward 1/3. Hard-coding the
# visible test earns just that test. A reward with partial credit matters below: two
# completions that both fail can still differ (0 and 1/3), and that difference is signal too.

# %% [markdown]
# ## 2. The signal check, on a fake policy first
#
# Sample k completions for each of N prompts with the model as it is, score them, and count
# the groups that are **mixed** (their rewards are not all equal). Only mixed groups have
# non-zero advantages, so only they move the weights. A group has zero spread when all its
# samples are equal; with pass/fail rewards that means all pass or all fail:
#
# $$ P(\text{zero spread}) = p^k + (1-p)^k \tag{8.2}$$
#
# Problems differ: problem $i$ has its own $p_i$, so over a set of $N$ problems
#
# $$ \text{expected frac\_reward\_zero\_std} = \frac1N \sum_{i=1}^{N} \bigl[p_i^k + (1-p_i)^k\bigr]
#    \;=\; \frac1N \sum_{i=1}^{N} \sum_{v} q_{iv}^{\,k} \tag{8.3}$$
#
# | symbol | meaning |
# |---|---|
# | $k$ | the group size: completions sampled per prompt (`num_generations` in TRL) |
# | $p$ | the chance that one sample **passes all of its tests** (reward 1); with partial scores we still define $p$ this way, so (8.2) counts "all pass" and "all fail" only |
# | $p_i$ | that chance for problem $i$ (estimated from the check's samples of problem $i$) |
# | $q_{iv}$ | the share of problem $i$'s samples that scored exactly $v$; with pass/fail rewards the inner sum is $p_i^k + (1-p_i)^k$, with partial scores it also counts a group that all scored, say, 1/3 |
# | frac\_reward\_zero\_std | what training logs each step: the share of the step's groups with zero spread |
#
# Why three estimates: one pooled $p$ in (8.2) ignores that some problems are hopeless and
# others trivial; since $p^k + (1-p)^k$ is convex, mixing easy and hard problems *raises*
# the zero-spread share above what the pooled $p$ predicts. Partial scores work the other
# way: two failing samples with scores 0 and 1/3 form a mixed group that (8.2) calls
# "all fail". The right-hand form of (8.3), with every reward value, is what the training
# loop actually measures (`frac_reward_zero_std` compares the rewards themselves, not
# pass/fail). `SignalReport.expected_zero_std(k)` returns all three.
#
# The code, in `grpo_core.group_signal`: a pure function of the `[N, k]` score table, and the
# formula.

# %%
from grpo_core.group_signal import (
    expected_zero_std_fraction,
    plot_signal,
    signal_check,
    simulate_scores,
    summarize_groups,
    zero_std_chance,
)

print(inspect.getsource(expected_zero_std_fraction))
print(inspect.getsource(zero_std_chance))
print(inspect.getsource(summarize_groups))

# %% [markdown]
# A hand-made table of five groups of k = 4 (rows are prompts):

# %%
# NBVAL_CHECK_OUTPUT
toy = summarize_groups([[0, 0, 0, 0],          # too hard: no signal
                        [1, 0, 0, 0],          # one success: mixed
                        [1 / 3, 1 / 3, 1 / 3, 1 / 3],  # the same partial score: no signal
                        [0, 1 / 3, 0, 0],      # fails, but partial credit makes it mixed
                        [1, 1, 1, 1]],         # too easy: no signal
                       labels=["hard", "edge", "stuck", "partial", "easy"])
print(plain_table(pd.DataFrame(toy.rows()), index=False))
print()
print(toy.summary())
for k in (4, 16):
    print(f"predicted zero-spread share at k = {k}:",
          {name: round(value, 3) for name, value in toy.expected_zero_std(k).items()})

# %% [markdown]
# At the check's own k = 4, the estimate with every reward value is exactly the measured
# share (3 of 5 groups had zero spread); counting only pass/fail it is 4 of 5, because it
# calls the "partial" group all-fail. The pooled $p = 0.25$ gives 0.32: it spreads the five
# successes over all five problems, while really they sit in two.
#
# Now a **fake policy** whose pass probabilities we choose: 20 problems, each sample passes
# problem $i$ with probability $p_i$, independently. First every $p_i = 0.22$ (the lecture's
# mean reward, read as a pass rate), then a spread of easy and hopeless problems with the
# same mean. Same mean, different number of mixed groups: the average alone does not tell
# you whether training will learn.

# %%
# NBVAL_CHECK_OUTPUT
k_check = 4
flat = torch.full((20,), 0.22)
spread = torch.tensor([0.0] * 10 + [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8])
for name, probs in [("every p_i = 0.22", flat), ("p_i spread out", spread)]:
    expected_mixed = (1 - expected_zero_std_fraction(probs, k_check)).sum().item()
    draws = [summarize_groups(simulate_scores(probs, k_check, seed=s)).mixed_groups
             for s in range(2000)]
    print(f"{name:<17} mean p {probs.mean():.2f}: expected mixed groups "
          f"{expected_mixed:4.1f} of 20 (eq. 8.3); fake policy, 2000 checks: "
          f"{sum(draws) / len(draws):5.2f} on average, {min(draws)}-{max(draws)}")

# %% [markdown]
# With every problem at $p = 0.22$ you would expect about 12.6 of 20 groups mixed; half the
# problems out of reach and the rest spread out gives about 6.5. The lecture's 10 of 20 sits
# between: MBPP mixes problems the model always fails with ones it sometimes solves (and
# partial credit adds mixed groups that no sample fully solved). A single check of 20 groups
# is noisy too: the same fake policy gives anything in the range shown.

# %%
fake = summarize_groups(simulate_scores(spread, k_check, seed=0))
display(Image(figure_png(plot_signal(fake, title="fake policy, p_i spread out"))))

# %% [markdown]
# Right panel: the predicted zero-spread share as k grows, at this fake policy's pooled $p$
# (in its title). Larger groups are more often mixed, and the harder the problem, the more
# k matters; for one hard problem:

# %%
# NBVAL_CHECK_OUTPUT
for p_hard in (0.05, fake.p):
    mixed = {k: 1 - expected_zero_std_fraction(p_hard, k) for k in (2, 16)}
    print(f"p = {p_hard:.2f}: a group of 2 is mixed {mixed[2]:.0%} of the time, "
          f"a group of 16 {mixed[16]:.0%}")

# %% [markdown]
# That is the argument for larger k on hard tasks, and the reason for section 4.

# %% [markdown]
# ## 3. The signal check on the real model
#
# `signal_check` is the same summary after sampling with the model (it calls
# `grpo_core.evaluation.score_samples`): any model, any rows with a `prompt` column, any
# TRL-style reward functions, any k.

# %%
print(inspect.getsource(signal_check))

# %% [markdown]
# The problems, the reward and the sampling settings are exactly what training will use:
# `mbpp_experiment(profile)` builds the rows (`prompt`, `tests`, `setup_code`) and the
# reward functions that `python -m grpo_core mbpp` trains on. We check 20 of them
# (spread over the set), with the lecture's k = 4.

# %%
from grpo_core.models import load_policy
from grpo_core.experiments import mbpp_experiment

experiment = mbpp_experiment(profile)
new_tokens = experiment.overrides.get("max_new_tokens", profile.max_new_tokens)
n_check = 2 if profile.name == "smoke" else 20  # the lecture's 20; smoke: seconds only


def spread_over(rows: list, n: int) -> list:
    """``n`` rows spread evenly over ``rows`` (all difficulties, not only the first ones)."""
    return [rows[i * len(rows) // n] for i in range(min(n, len(rows)))]


check_rows = spread_over(experiment.prompts, n_check)
source = "MBPP (train split)" if profile.data_source == "hub" else "the course's own problems"
print(f"{len(experiment.prompts)} training problems from {source}; checking {len(check_rows)} "
      f"(task ids {[row['task_id'] for row in check_rows]}), k = {k_check}, "
      f"{new_tokens} new tokens, temperature {profile.temperature}")
print("\nthe first prompt:\n" + check_rows[0]["prompt"])
model, tokenizer = load_policy(profile)

# %%
# NBVAL_IGNORE_OUTPUT
started = time.perf_counter()
report = signal_check(model, tokenizer, check_rows, experiment.reward_funcs, k=k_check,
                      max_new_tokens=new_tokens, temperature=profile.temperature,
                      top_p=profile.top_p, seed=0, prompts_per_batch=10,
                      stop_at=experiment.overrides.get("stop_at"))
print(f"{time.perf_counter() - started:.0f} s")
print(report.summary())
display(show_table(pd.DataFrame([
    {"check": f"this notebook: {profile.model_id}, {source}", "k": report.k,
     "problems": report.num_groups, "mean reward": round(report.mean_reward, 2),
     "groups mixed": f"{report.mixed_groups} of {report.num_groups}"},
    {"check": "the lecture's: Qwen3-0.6B, MBPP (quoted, not measured here)", "k": 4,
     "problems": 20, "mean reward": 0.22, "groups mixed": "10 of 20"},
]).set_index("check")))
display(Image(figure_png(plot_signal(report, title=f"signal check: {source}, {profile.name}"))))

# %%
display(show_table(pd.DataFrame(report.rows()), index=False))
best = int(report.scores.flatten().argmax())
print(f"\nthe best-scoring sample (reward {report.scores.flatten()[best]:.2f}):\n"
      f"{report.texts[best][:400]}")

# %% [markdown]
# Read it like the lecture does. A mean reward far from 0 and 1 is not enough: what matters
# is how many *groups* are mixed. Groups of all-0 rewards (too hard) and all-1 rewards (too
# easy) are both dead weight for the step that samples them.
#
# ### The "too hard" case, on real MBPP
#
# The same check on 20 problems of real MBPP (train split), where Qwen3-0.6B averaged a
# reward of 0.22; this model has about a fifth of its parameters. The cell runs when a local copy of
# MBPP is available (`GRPO_MBPP_DIR`, or a `shared/mbpp` folder next to the repository, see
# `grpo_core.mbpp.local_mbpp_file`); otherwise it says so and skips. In the `gpu` profile the
# check above already ran on MBPP.

# %%
# NBVAL_IGNORE_OUTPUT
from grpo_core.mbpp import local_mbpp_file, read_mbpp_file
from grpo_core.experiments import code_row

mbpp_file = local_mbpp_file("full")
mbpp_report = None
if profile.data_source == "hub":
    print("gpu profile: the check above already ran on MBPP.")
elif mbpp_file is None:
    print("Skipped: no local MBPP file (set GRPO_MBPP_DIR to a folder holding mbpp.jsonl "
          "from https://github.com/google-research/google-research/tree/master/mbpp).")
else:
    mbpp_rows = [code_row(row)  # the same columns as the training rows
                 for row in spread_over(read_mbpp_file(mbpp_file, "full", "train"), n_check)]
    started = time.perf_counter()
    mbpp_report = signal_check(model, tokenizer, mbpp_rows, experiment.reward_funcs,
                               k=k_check, max_new_tokens=new_tokens,
                               temperature=profile.temperature, top_p=profile.top_p, seed=0,
                               prompts_per_batch=10, stop_at=experiment.overrides.get("stop_at"))
    print(f"{time.perf_counter() - started:.0f} s")
    print("real MBPP:", mbpp_report.summary())
    print("ours:     ", report.summary())
    for name, checked in [("real MBPP", mbpp_report), ("ours", report)]:
        all_zero = int((checked.scores.max(dim=1).values == 0).sum())
        print(f"{name:<9}: {all_zero} of {checked.num_groups} groups scored 0 on every "
              f"sample (too hard), {checked.mixed_groups} mixed")
    display(Image(figure_png(plot_signal(mbpp_report, title=f"signal check: MBPP, "
                                                            f"{profile.name}"))))

# %% [markdown]
# Compare the two lines above. Every all-zero group is a prompt on which a training step
# would compute advantages of exactly 0 and learn nothing; the more of them, the more of the
# step's compute is wasted. For a small model MBPP is mostly the *too hard* case, which is
# why the `cpu` profile trains on easier problems: the task has to sit at the edge of the
# *model's* ability, not the lecture's.

# %% [markdown]
# ### Interlude: the statistics of a held-out score, by hand
#
# Section 4 compares runs by their held-out scores, with standard errors and z. Four ideas
# carry it; here they are on a table small enough to check by hand: five held-out problems,
# two samples each, scored before and after training (1 = every assert passed).
#
# 1. **The unit is the problem.** Two samples of one problem share its difficulty, so they
#    are not two independent measurements. Average each problem's samples first, then take the
#    spread of those problem means: the **standard error** of the score is
#    $\mathrm{sd}_i(y_i)/\sqrt N$ over the $N$ problems.
# 2. **The change is paired.** Both scores are taken on the same problems, and a hard problem
#    stays hard: subtract problem by problem, $d_i = y_i^\text{after} - y_i^\text{before}$, and
#    take the standard error of the $d_i$. The difficulty cancels inside each $d_i$, so this is
#    smaller than the two scores' standard errors combined.
# 3. **z** is the change in units of its standard error. With no real change, |z| ≥ 2 happens
#    about 5 % of the time (two-sided): a single |z| ≥ 2 is unlikely to be chance alone.
# 4. **Several comparisons need a stricter bar.** Look at six differences at once and the
#    chance that *some* |z| reaches 2 by luck alone is far above 5 %. Bonferroni's fix: test each
#    at 5 % / 6, which puts the bar at |z| ≥ 2.64.

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.stats import bonferroni_z, paired_difference, problem_means, standard_error

before = {"p1": [0, 0], "p2": [1, 0], "p3": [0, 0], "p4": [1, 1], "p5": [0, 0]}
after = {"p1": [1, 0], "p2": [1, 1], "p3": [0, 0], "p4": [1, 1], "p5": [1, 0]}
means_before, means_after = problem_means(before), problem_means(after)
print("problem means before:", means_before)
print("problem means after: ", means_after)
se_before = standard_error(list(means_before.values()))
se_after = standard_error(list(means_after.values()))
as_if_independent = standard_error([v for values in after.values() for v in values])
print(f"score after {sum(means_after.values()) / 5:.2f} ± {se_after:.3f} over problems "
      f"(treating the 10 samples as independent would say ± {as_if_independent:.3f})")
change = paired_difference(means_after, means_before)
unpaired = (se_before**2 + se_after**2) ** 0.5
print(f"change {change.mean:+.2f} ± {change.sem:.3f} paired (the two errors combined: "
      f"± {unpaired:.3f}), z = {change.z:+.2f}")
print(f"the bar for one comparison: |z| >= {bonferroni_z(1):.2f}; "
      f"for six at once: |z| >= {bonferroni_z(6):.2f}")

# %% [markdown]
# By hand: the problem means after training are 0.5, 1, 0, 1, 0.5 (mean 0.6); their
# deviations from 0.6 are −0.1, 0.4, −0.6, 0.4, −0.1, whose squares sum to 0.7, so
# $\mathrm{sd} = \sqrt{0.7/4} \approx 0.418$ and the standard error is $0.418/\sqrt5 \approx
# 0.187$. The changes $d_i$ are 0.5, 0.5, 0, 0, 0.5 (mean 0.3, sd ≈ 0.274, standard error ≈
# 0.122): smaller than the two errors combined (0.274), because p3 and p4 changed by nothing. Five problems
# are far too few for a verdict (the z printed above would not pass the bar for six
# comparisons); section 4's runs score every held-out problem.
#
# How often does chance alone pass the bar? Six comparisons in which nothing differs,
# simulated many times: how often at least one |z| reaches 1.96, and how often 2.64:

# %%
# NBVAL_CHECK_OUTPUT
generator = torch.Generator().manual_seed(0)
null_z = torch.randn(100_000, 6, generator=generator)  # six z's with no real difference
for bar in (bonferroni_z(1), bonferroni_z(6)):
    false_alarm = (null_z.abs() >= bar).any(dim=1).float().mean().item()
    print(f"|z| >= {bar:.2f} somewhere among 6: {false_alarm:.1%} of the time")

# %% [markdown]
# ## 4. Group size: k = 2, 8 and 16 at the same cost per step
#
# The lecture trained three versions that differ only in `num_generations`. To compare them
# fairly, every version samples **the same number of completions per step** (so the same
# compute): a larger k means fewer prompts per step.
#
# $$ \text{prompts per step} \times k = \text{completions per step} \quad(\text{fixed}) $$
#
# - k = 2 compares each attempt with a single sibling: cheap, but on a hard task both often
#   fail together, and the group says nothing;
# - k = 16 compares against a crowd: one success among 16 is enough for a signal, but a step
#   sees few distinct prompts.

# %%
from grpo_core.experiments import completions_per_step, k_sweep_sizes

print(inspect.getsource(k_sweep_sizes))
K_SWEEP = (2, 8, 16)
per_step = completions_per_step(profile)
sizes = {}
for k in K_SWEEP:
    try:
        sizes[k] = k_sweep_sizes(profile, k)
    except ValueError as error:
        print(f"k = {k}: {error}")
rows = [{"k": k, "prompts per step": s["prompts_per_step"], "completions per step": per_step,
         "predicted frac_reward_zero_std (pooled p)":
             round(report.expected_zero_std(k)["pooled p"], 2),
         "(per-problem p_i)": round(report.expected_zero_std(k)["per-problem p_i"], 2),
         "(per-problem scores)": round(report.expected_zero_std(k)["per-problem scores"], 2)}
        for k, s in sizes.items()]
print(f"\n{profile.name} profile, predictions from this notebook's signal check "
      f"({report.p_definition}, p = {report.p:.2f}):")
display(show_table(pd.DataFrame(rows), index=False))

# %% [markdown]
# A caveat about the per-problem columns: they come from the check's 4 samples per problem.
# Up to k = 4 the estimate is unbiased (the chance that k of the 4 samples, picked at random,
# all agree; at k = 4 it is exactly what the check measured). Beyond 4 it can only
# extrapolate: a problem whose 4 samples all failed counts as all-fail at every k, though a
# group of 16 would sometimes find a success. So at k = 8 and 16 the per-problem columns
# overstate the zero-spread share, while the pooled one, which spreads the successes evenly
# over every problem, understates it (convexity, section 2): the truth usually lies between.
#
# ### The recorded runs
#
# Training three versions takes a while, so the course ships `cpu`-profile runs of our own
# loop, each 40 steps of 16 completions, all recorded by one commit with
# `tools/record_runs.py`, which runs
#
#     python -m grpo_core mbpp --k 8 --profile cpu --max-new-tokens 192 --steps 40 \
#         --eval-every 20 --eval-samples 3 --samples-eval-per-problem 3 \
#         --precision float32 --save-every 5 --out data/runs/exp2-k8-cpu
#
# and the same command with `--k 2` and `--k 16`, each also with `--seed 1`, `2` and `3`
# (another draw of the training problems and samples: how much of a result is the seed?), in
# float32 on AVX2 kernels so that another CPU draws the same samples (`--save-every` lets a
# cut run go on with `--resume`; `config.json` names the commit).
# Every completion ends where its first code block closes (the experiment's stop rule), so
# the base model's habit of writing on after its function does not spend the 192-token
# budget. Each run trains on the course's very easy and easy training problems (the cell
# below prints each run's count from its `config.json`) and measures the unit-test
# reward on the **115 held-out problems** it never trains on, 3 samples each, at step 0
# (the base model), step 20 and step 40, with the same prompts and sampling seed every time
# (`eval/unit_test_reward`, with its standard error over problems `/sem` and the standard
# error of its change against step 0 `/delta_sem`). Each run also kept its completions
# (`samples.jsonl`). The cell below reads whichever runs exist:

# %%
from grpo_core.diagnosis import held_out_change
from grpo_core.plots import compare_runs
from grpo_core.stats import bonferroni_z, paired_difference, trend
from grpo_core.run_files import list_runs, load_run, runs_dir, series

EXP2_RUNS = {"k=2": "exp2-k2-cpu", "k=8": "exp2-k8-cpu", "k=16": "exp2-k16-cpu",
             "k=8, seed 1": "exp2-k8-seed1-cpu"}
HELD_OUT = "eval/unit_test_reward"
recorded = {}
for label, name in EXP2_RUNS.items():
    folder = runs_dir() / name
    if folder not in list_runs():
        print(f"missing: data/runs/{name} (not recorded yet)")
        continue
    run = load_run(folder)
    recorded[label] = run
    step_times = [r["step_time"] for r in run.records if "step_time" in r]
    eval_times = [r["time/eval"] for r in run.records if "time/eval" in r]
    print(f"{label:12} data/runs/{name}: {len(step_times)} of {run.config['train']['max_steps']} "
          f"steps on {run.config['num_prompts']} training problems "
          f"({run.config['train_split']}), {sum(step_times) / 60:.0f} min of steps + "
          f"{sum(eval_times) / 60:.0f} min of held-out evaluation ({len(eval_times)})")
print(f"recorded runs found: {list(recorded) or 'none'}")

# %% [markdown]
# Did the held-out score climb? Each run's score at step 0 and at its last evaluation $T$,
# and the change with its own standard error, computed from each problem's change (its
# difficulty cancels, so this is smaller than the two standard errors combined):
#
# $$ \Delta = \bar y_T - \bar y_0, \qquad
#    \mathrm{SE}(\Delta) = \frac{\mathrm{sd}_i\,(y_{iT} - y_{i0})}{\sqrt N}, \qquad
#    z = \frac{\Delta}{\mathrm{SE}(\Delta)} \tag{8.4}$$
#
# | symbol | meaning |
# |---|---|
# | $y_{it}$ | problem $i$'s mean unit-test reward over its 3 held-out samples after $t$ steps |
# | $\bar y_t$ | the mean over the $N = 115$ held-out problems: `eval/unit_test_reward` |
# | $\mathrm{sd}_i$ | the standard deviation over problems (ddof = 1) |
# | $z$ | $\lvert z \rvert \ge 2$: a change that "no change at all" gives less than about 5 % of the time |
#
# Beside it, the training side of each run: the reward over the first and the last fifth of
# the steps, the share of completions the budget cut over the last fifth, and the zero-std
# share measured over all steps against (8.2)-(8.3)'s predictions from this notebook's
# signal check.

# %%
table = []
for label, run in recorded.items():
    config = run.config["train"]
    k = config["group_size"]
    moved = held_out_change(run.records, HELD_OUT)
    steps, reward = series(run.records, "reward")
    _, zero = series(run.records, "frac_reward_zero_std")
    cut = trend(*series(run.records, "completions/clipped_ratio"))
    row = {"run": label, "prompts x k": f"{config['prompts_per_step']} x {k}", "steps": len(steps)}
    if moved is not None:
        row |= {"held out, step 0": f"{moved.start:.3f} ± {moved.start_sem:.3f}",
                f"step {moved.end_step}": f"{moved.end:.3f} ± {moved.end_sem:.3f}",
                "change": f"{moved.change:+.3f} ± {moved.delta_sem:.3f}",
                "z": round(moved.z, 1) if moved.z is not None else None,
                # every k trains on the same completions per step: per completion = per step
                "change per 1000 completions": round(
                    1000 * moved.change / (moved.end_step * config["prompts_per_step"] * k), 3)}
    row |= {"reward, first -> last fifth": f"{trend(steps, reward).first:.3f} -> "
                                            f"{trend(steps, reward).last:.3f}",
            "cut off, last fifth": f"{cut.last:.0%}",
            "zero-std, measured": round(sum(zero) / len(zero), 2),
            "predicted (pooled p)": round(report.expected_zero_std(k)["pooled p"], 2),
            "(per-problem scores)": round(report.expected_zero_std(k)["per-problem scores"], 2)}
    table.append(row)
if table:
    print(f"predictions from this notebook's signal check ({profile.name} profile, "
          f"{report.num_groups} problems, p = {report.p:.2f}); the runs are cpu-profile runs")
    display(show_table(pd.DataFrame(table).set_index("run").T))
else:
    print("no recorded runs to compare yet")

# %% [markdown]
# The held-out curves with their ±2 standard-error bands (left), and the training curves
# (a 5-step moving average; dashed: the zero-std share (8.3) predicts for each k):

# %%
if recorded:
    curves = {label: run.records for label, run in recorded.items()}
    display(Image(figure_png(compare_runs(
        curves, (HELD_OUT, "completions/clipped_ratio"),
        title="experiment 2, cpu: held-out unit-test reward (±2 s.e.) and truncation"))))
    predicted = {"frac_reward_zero_std": {
        label: report.expected_zero_std(run.config["train"]["group_size"])["per-problem scores"]
        for label, run in recorded.items()}}
    display(Image(figure_png(compare_runs(
        curves, ("reward", "frac_reward_zero_std", "completions/mean_length"),
        expected=predicted, window=5,
        title="experiment 2, cpu: training curves, 5-step average (dashed: predicted zero-std)"))))

# %% [markdown]
# Is one k better than another, or is the gap noise? All runs are scored on the same 115
# held-out problems with the same sampling seed, so compare them **problem by problem**: for
# two runs $a$ and $b$ at their last evaluation,
#
# $$ \bar d = \frac1N \sum_{i=1}^{N} (y^{a}_{iT} - y^{b}_{iT}), \qquad
#    \mathrm{SE}(\bar d) = \frac{\mathrm{sd}_i\,(y^{a}_{iT} - y^{b}_{iT})}{\sqrt N}
#    \tag{8.5}$$
#
# (`paired_difference`, from the per-problem means the runs kept in `samples.jsonl`; a
# problem's difficulty cancels in its own difference). The same formula against step 0 is
# (8.4) again, so the first rows check that the kept samples give back the logged change;
# against step 20 it asks whether the second half of each run still moved the score.

# %%
print(inspect.getsource(paired_difference))

# %%
ends = {}
for label, run in recorded.items():
    held = run.samples(split="held_out")
    if len(held.steps) >= 2:  # step 0 and at least one evaluation after training
        ends[label] = held.problem_means("unit_test_reward", held.steps[-1])
        for earlier in held.steps[:-1]:  # against step 0, then against the middle evaluation
            moved = paired_difference(ends[label], held.problem_means("unit_test_reward", earlier))
            z = f"z {moved.z:+.1f}" if moved.z is not None else "no spread"
            print(f"{label:12} step {held.steps[-1]} - step {earlier}: {moved.mean:+.3f} ± "
                  f"{moved.sem:.3f} ({z}), from the kept samples")
pairs = [(a, b) for i, a in enumerate(ends) for b in list(ends)[i + 1:]]
bar = bonferroni_z(len(pairs)) if pairs else None
comparison = []
for a, b in pairs:
    gap = paired_difference(ends[a], ends[b])
    comparison.append({"a - b": f"{a} - {b}", "difference": f"{gap.mean:+.3f} ± {gap.sem:.3f}",
                       "z": round(gap.z, 1) if gap.z is not None else None,
                       f"beyond |z| >= {bar:.2f}": gap.z is not None and abs(gap.z) >= bar})
if comparison:
    print(f"{len(pairs)} comparisons at once: each must reach |z| >= {bar:.2f} (Bonferroni, "
          f"5 % two-sided over all of them), not 1.96")
    display(show_table(pd.DataFrame(comparison).set_index("a - b")))

# %% [markdown]
# What did the lead run (k = 8) learn? Its held-out completions at each evaluation: how many
# open with the code fence the prompt asks for, how long they are, how many the budget cut,
# and the unit-test score of those that open with the fence and of the rest (a completion
# whose code the reward cannot find scores 0, however right the function). Then the held-out
# problem whose score rose most, its first sample before training and after:

# %%
def mean_score(group: list) -> float | None:
    """The mean unit-test reward of ``group`` (None when it is empty)."""
    return round(sum(r["unit_test_reward"] for r in group) / len(group), 3) if group else None


lead = recorded.get("k=8")
if lead is not None and lead.has_samples:
    held = lead.samples(split="held_out")
    learned = []
    for step in held.steps:
        rows = held.select(step=step).rows
        fenced = [r for r in rows if r["completion"].lstrip().startswith("```")]
        rest = [r for r in rows if not r["completion"].lstrip().startswith("```")]

        learned.append({"step": step, "completions": len(rows),
                        "open with ```": f"{len(fenced) / len(rows):.0%}",
                        "mean characters": round(sum(r["chars"] for r in rows) / len(rows)),
                        "cut by the budget": f"{sum(r['truncated'] for r in rows) / len(rows):.0%}",
                        "score, fenced": mean_score(fenced), "score, the rest": mean_score(rest)})
    display(show_table(pd.DataFrame(learned).set_index("step")))
    before = held.problem_means("unit_test_reward", held.steps[0])
    after = held.problem_means("unit_test_reward", held.steps[-1])
    print(f"per problem, step {held.steps[0]} -> {held.steps[-1]}: rose on "
          f"{sum(after[p] > before[p] for p in before)}, fell on "
          f"{sum(after[p] < before[p] for p in before)} of {len(before)}")
    most = max(before, key=lambda p: (after[p] - before[p], -before[p]))
    for step in (held.steps[0], held.steps[-1]):
        row = held.select(step=step, prompt_id=most).rows[0]
        print(f"\n=== held-out problem {most}, step {step}: unit_test_reward "
              f"{row['unit_test_reward']:.2f}, {row['chars']} characters")
        print(row["completion"])

# %% [markdown]
# ### The same comparison over seeds
#
# The table above compares one run of each k (and a second seed of k = 8, to show how far
# one run's seed can move its result). Each setting was recorded with several seeds
# (`tools/record_runs.py`: the same command with `--seed 1`, `2`, ...), and
# `grpo_core.seeds` groups the runs that differ in nothing but the seed (it refuses runs that
# differ in more). Per k: each seed's held-out change with its z, and the mean change with
# its standard error **over seeds** (notebook 12 explains why this, not a single run's z, is
# the yardstick for "k = 8 learns more than k = 2").
#
# Two things decide how far that yardstick can be trusted:
#
# - **Are the runs one measurement?** Every seed starts from the same base model, problems
#   and evaluation seed, so its step-0 score should be *the same draw*. Runs recorded by other
#   code or on another machine sample other step-0 completions: then they are the same
#   distribution, other draws, and the table prints every step-0 score. `config.json` names
#   the commit and the draws' fingerprint of each run (`grpo_core.provenance`); `seed_group`
#   refuses such runs unless told `other_draws=True`, as here.
# - **How many seeds?** With $n$ seeds the standard error over seeds has $n - 1$ degrees of
#   freedom, so an interval uses Student's t, not the normal 1.96:
#
# $$ \bar\Delta \pm t_{0.975,\,n-1}\,\frac{\mathrm{sd}_s(\Delta_s)}{\sqrt n}
#    \tag{8.7}$$
#
# | symbol | meaning |
# |---|---|
# | $\Delta_s$ | seed $s$'s held-out change (step $T$ minus step 0), eq. (8.4) |
# | $\mathrm{sd}_s$ | their standard deviation over the $n$ seeds (ddof = 1) |
# | $t_{0.975,\,n-1}$ | Student's t quantile (`grpo_core.stats.student_t_quantile`; the cell below prints it for 2 to 4 seeds) |
#
# With 2 seeds no useful interval exists (one degree of freedom); the table says so.

# %%
from grpo_core.seeds import group_by_setup, seed_group
from grpo_core.stats import student_t_quantile

plain_runs = [path for path in list_runs()
              if path.name.startswith("exp2-k") and "dynamic" not in path.name]
by_k = {}
for group in group_by_setup(plain_runs):
    by_k[group[0].config["train"]["group_size"]] = seed_group(group, other_draws=True)
seed_rows = []
for k, summary in sorted(by_k.items()):
    seed_rows.append({"k": k, "seeds": len(summary.seeds),
                      "step-0 scores": ", ".join(f"{start:.3f}" for start in summary.starts),
                      "step 0": "one draw" if summary.same_draws else "other draws",
                      "each seed: change (z)": "; ".join(
                          f"{c.change:+.3f} ({c.z:+.1f})" for c in summary.changes),
                      "mean ± SE over seeds, (8.7)": summary.interval().describe()
                      if len(summary.seeds) < 2 else
                      f"{summary.mean_change:+.3f} ± {summary.seed_sem:.3f}; "
                      + summary.interval().bounds()})
if seed_rows:
    display(show_table(pd.DataFrame(seed_rows).set_index("k")))
for k, summary in sorted(by_k.items()):
    for said in summary.other_draws:
        print(f"k = {k}: {said}")
print("t_0.975 with n - 1 degrees of freedom: "
      + ", ".join(f"{student_t_quantile(0.975, n - 1):.2f} for {n} seeds" for n in (2, 3, 4))
      + f" (normal: {student_t_quantile(0.975, float('inf')):.2f})")

# %% [markdown]
# Two group sizes, each with a few seeds: is the difference of their mean changes more than
# the seeds' spread? **Welch's t-test** compares two groups of seeds without assuming equal
# spreads:
#
# $$ t = \frac{\bar\Delta_a - \bar\Delta_b}{\sqrt{s_a^2/n_a + s_b^2/n_b}}, \qquad
#    \nu = \frac{(s_a^2/n_a + s_b^2/n_b)^2}{\frac{(s_a^2/n_a)^2}{n_a - 1} + \frac{(s_b^2/n_b)^2}{n_b - 1}}
#    \tag{8.8}$$
#
# | symbol | meaning |
# |---|---|
# | $\bar\Delta_a, s_a, n_a$ | group size $a$'s mean held-out change over its seeds, their sd (ddof = 1), how many seeds |
# | $\nu$ | the Welch-Satterthwaite degrees of freedom: at most $n_a + n_b - 2$, fewer when one group's spread dominates |
#
# The p-value comes from Student's t with $\nu$ degrees of freedom (`grpo_core.stats.welch_test`).
# Several pairs compared at once: each must reach p < 0.05 / (number of pairs) (Bonferroni).

# %%
from grpo_core.stats import welch_test

print(inspect.getsource(welch_test))
ks = [k for k, summary in sorted(by_k.items()) if len(summary.seeds) > 1]
k_pairs = [(a, b) for i, a in enumerate(ks) for b in ks[i + 1:]]
k_tests = {(a, b): welch_test([c.change for c in by_k[a].changes],
                              [c.change for c in by_k[b].changes]) for a, b in k_pairs}
alpha = 0.05 / len(k_pairs) if k_pairs else None
for (a, b), test in k_tests.items():
    verdict = "below" if test.p_value < alpha else "not below"
    print(f"k = {a} - k = {b}: {test.describe()}; p {verdict} {alpha:.3g} "
          f"(5 % over {len(k_pairs)} comparisons)")
if not k_pairs:
    print("fewer than two group sizes have two seeds: no comparison over seeds yet")


# %% [markdown]
# ### Is two enough?
#
# [It Takes Two: Your GRPO Is Secretly DPO](https://arxiv.org/abs/2510.00977) argues that
# GRPO's group works as a contrast between the better and the worse completions of a prompt,
# as DPO's pairs do, so that a group of two already gives the whole signal; it reports
# two-completion GRPO close to sixteen-completion GRPO on reasoning benchmarks with a fraction
# of the rollouts. The sweep above asks a neighbouring question at equal cost: every run
# samples the same number of completions per step, so k = 2 spreads them over more prompts
# (the cell prints how many) where k = 16 spends them all on one.
#
# Welch's test (8.8) asks "is there a difference?", and not finding one is not evidence that
# there is none: with few seeds the interval is wide. "k = 2 is as good" needs a margin
# $\delta$, a difference too small to matter, fixed in the code below, and its own test, the
# **two one-sided tests** (TOST): the two setups are equivalent when the 90 % interval of the
# difference lies inside $(-\delta, +\delta)$.
#
# $$ \text{verdict} = \begin{cases}
#    \text{a higher (b higher)} & \text{the 95 \% interval of } \bar\Delta_a - \bar\Delta_b \text{ lies above (below) } 0\\
#    \text{equivalent} & \text{else, if the 90 \% interval lies inside } (-\delta, +\delta)\\
#    \text{undecided} & \text{otherwise}
#    \end{cases} \tag{8.9}$$
#
# | symbol | meaning |
# |---|---|
# | $\bar\Delta_a - \bar\Delta_b$ | the difference of two group sizes' mean held-out changes over their seeds, with Welch's standard error and degrees of freedom (8.8) |
# | interval | $(\bar\Delta_a - \bar\Delta_b) \pm t_{q,\nu}\,\mathrm{SE}$, with $q$ = 0.975 for the 95 % interval and 0.95 for the 90 % one |
# | $\delta$ | the margin of indifference, in held-out score: chosen before the comparison, printed by the cell beside the mean gains it is small against |
#
# The figure shows every seed's change, each group size's mean and its 95 % t-interval, and
# the band of k = 2's mean ± $\delta$.

# %%
from grpo_core.plots import plot_seed_changes
from grpo_core.stats import compare_setups, minimum_detectable_change

print(inspect.getsource(compare_setups))
# a held-out difference smaller than this would not change which k a learner picks
EQUIVALENCE_MARGIN = 0.05
changes_by_k = {k: [c.change for c in summary.changes] for k, summary in sorted(by_k.items())}
two_verdicts = {}
if 2 in changes_by_k and len(changes_by_k[2]) > 1:
    per_step = {k: load_run(by_k[k].runs[0]).config["train"]["prompts_per_step"]
                for k in changes_by_k}
    print("prompts per step (completions per step): " + ", ".join(
        f"k = {k}: {n} ({n * k})" for k, n in per_step.items()))
    print("mean held-out change over seeds: " + ", ".join(
        f"k = {k}: {sum(v) / len(v):+.3f} ({len(v)} seeds)" for k, v in changes_by_k.items())
          + f"; margin delta = {EQUIVALENCE_MARGIN}")
    for k, values in changes_by_k.items():
        if k != 2 and len(values) > 1:
            two_verdicts[k] = compare_setups(changes_by_k[2], values, EQUIVALENCE_MARGIN)
            print(f"k = 2 vs k = {k}: {two_verdicts[k].describe(digits=2)}")
    display(Image(figure_png(plot_seed_changes(
        {f"k = {k}": v for k, v in changes_by_k.items()}, reference="k = 2",
        margin=EQUIVALENCE_MARGIN, title="held-out change per seed, by group size"))))
else:
    print("k = 2 has fewer than two seeds here: no comparison over seeds")

# %% [markdown]
# What the verdicts can and cannot say, computed from them:

# %%
if two_verdicts:
    spreads = {k: standard_error(v) * len(v) ** 0.5 for k, v in changes_by_k.items() if len(v) > 1}
    pooled_sd = (sum(sd ** 2 for sd in spreads.values()) / len(spreads)) ** 0.5
    n_seeds = min(len(changes_by_k[k]) for k in (2, *two_verdicts))
    detectable = minimum_detectable_change(pooled_sd, n_seeds, df=2 * n_seeds - 2)
    for k, verdict in two_verdicts.items():
        said = {"a higher": f"k = 2 learned more than k = {k}",
                "b higher": f"k = {k} learned more than k = 2",
                "equivalent": f"k = 2 matched k = {k} within {EQUIVALENCE_MARGIN}",
                "undecided": f"undecided: the interval reaches past +-{EQUIVALENCE_MARGIN}, so "
                             f"it shows neither a difference nor a match"}[verdict.verdict]
        print(f"k = 2 vs k = {k}: {said} (90 % interval [{verdict.inner_low:+.3f}, "
              f"{verdict.inner_high:+.3f}])")
    print(f"seed-to-seed sd of a run's change (pooled over k): {pooled_sd:.3f}; with {n_seeds} "
          f"seeds a side, a true difference of {detectable:.3f} is found 80 % of the time "
          f"(eq. 12.5, t with {2 * n_seeds - 2} df); smaller ones are mostly missed")
    base = load_run(by_k[2].runs[0]).config
    print(f"what these runs cannot say: how a larger model, a longer run or harder problems "
          f"behave ({base['model_id']}, {base['train']['max_steps']} steps, "
          f"{len(base['held_out_task_ids'])} held-out problems of the course's own set); other "
          f"budgets of completions per step; anything but the last evaluation's score")

# %% [markdown]
# ### pass@1 against pass@k: sharpening or new solutions?
#
# Each held-out problem has 3 samples, so besides the mean score (the share of asserts
# passed) the evaluation gives **pass@1**, the chance that one sample passes every assert, and
# **pass@3**, the chance that at least one of three does (Chen et al. 2021's unbiased
# estimator, `grpo_core.stats.pass_at_k`; notebook 12, eq. (12.4)). If training raised
# pass@1 but not pass@3, it made the model produce more reliably what it could already
# produce sometimes (*sharpening*); a rise in pass@3 means problems on which none of its
# samples passed before now have one that does. Per run, from step 0 to the last evaluation
# (from the kept samples; newer runs also log `eval/unit_test_reward/pass@1` and `pass@3`):

# %%
pass_rows = []
for k, summary in sorted(by_k.items()):
    for name in summary.runs:
        held = load_run(name).samples(split="held_out")
        if len(held.steps) < 2:
            continue
        first_step, last_step = held.steps[0], held.steps[-1]
        row = {"run": name, "k": k}
        for n_pass in (1, 3):
            before = held.problem_pass_at_k("unit_test_reward", first_step, n_pass)
            after = held.problem_pass_at_k("unit_test_reward", last_step, n_pass)
            moved = paired_difference(after, before)
            row[f"pass@{n_pass}: step 0 -> {last_step}"] = (
                f"{sum(before.values()) / len(before):.3f} -> "
                f"{sum(after.values()) / len(after):.3f}")
            row[f"pass@{n_pass} change (z)"] = f"{moved.mean:+.3f} ({moved.z:+.1f})"
        pass_rows.append(row)
if pass_rows:
    display(show_table(pd.DataFrame(pass_rows).set_index("run")))

# %% [markdown]
# ### What the runs show
#
# The summary below is written by the cell from the tables above, so a rebuild with other
# runs or more seeds cannot leave it saying something they do not show.

# %%
from IPython.display import Markdown

from grpo_core.stats import mix_split


def span(values: list, digits: int = 3, sign: bool = False) -> str:
    """'a' or 'a to b' for the smallest and largest of ``values``."""
    fmt = f"{{:{'+' if sign else ''}.{digits}f}}"
    low, high = min(values), max(values)
    return fmt.format(low) if low == high else f"{fmt.format(low)} to {fmt.format(high)}"


plain = [load_run(name) for summary in by_k.values() for name in summary.runs]
moves = {run.name: held_out_change(run.records, HELD_OUT) for run in plain}
moves = {name: moved for name, moved in moves.items() if moved is not None}
bullets = []
if moves:
    rose = [m for m in moves.values() if m.z is not None and m.z >= 2]
    # one base-model score per step-0 draw (runs recorded by other code draw other samples)
    draws = {}
    for m in moves.values():
        draws.setdefault(round(m.start, 6), []).append(m)
    base_each = [f"{ms[0].start:.3f} ± {ms[0].start_sem:.3f} ({len(ms)} run"
                 f"{'s' if len(ms) > 1 else ''})" for ms in draws.values()]
    base_said = (", ".join(base_each[:-1]) + " and " + base_each[-1] if len(base_each) > 1
                 else base_each[0])
    bullets.append(
        f"**Reward climbs, on problems never trained on.** {len(rose)} of {len(moves)} runs' "
        f"held-out scores rose by more than two standard errors: from the base model's "
        f"{base_said}"
        + (" (the same distribution, other draws of its step-0 completions)"
           if len(draws) > 1 else "")
        + f" to {span([m.end for m in moves.values()])} at "
        f"their last evaluation, changes of {span([m.change for m in moves.values()], 2, True)} "
        f"(z {span([m.z for m in moves.values()], 1, True)}).")
    late, rewards = [], []
    for run in plain:
        held = run.samples(split="held_out")
        if len(held.steps) >= 3:
            late.append(paired_difference(held.problem_means("unit_test_reward", held.steps[-1]),
                                          held.problem_means("unit_test_reward", held.steps[-2])))
        rewards.append(trend(*series(run.records, "reward")))
    quiet = [d for d in late if d.z is not None and abs(d.z) < 2]
    if late:
        bullets.append(
            f"**Most of it came early.** Between the last two evaluations {len(quiet)} of "
            f"{len(late)} runs moved by less than two standard errors, while the training "
            f"reward went from {span([r.first for r in rewards], 2)} over the first fifth of the "
            f"steps to {span([r.last for r in rewards], 2)} over the last: read alone, the "
            f"training reward overstates what the later steps taught about unseen problems.")
if lead is not None and lead.has_samples:
    held = lead.samples(split="held_out")
    first, last = (held.select(step=step).rows for step in (held.steps[0], held.steps[-1]))
    split = mix_split(*(([r["completion"].lstrip().startswith("```") for r in rows],
                         [r["unit_test_reward"] for r in rows]) for rows in (first, last)))
    share = split.format_part / split.change if split.change else 0.0
    headline = ("Much of what k = 8 learned is the format." if share >= 0.5 else
                "Most of what k = 8 learned is not the format.")
    bullets.append(
        f"**{headline}** Its held-out score moved {split.change:+.3f} from step "
        f"{held.steps[0]} to {held.steps[-1]}; completions opening with the code fence the "
        f"prompt asks for went from {split.share_before:.0%} to {split.share_after:.0%}, which "
        f"at step 0's scores accounts for {split.format_part:+.3f} ({share:.0%}); the scores "
        f"within each kind account for {split.within_part:+.3f} (fenced "
        f"{split.in_before:.3f} -> {split.in_after:.3f}; the rest "
        + (f"{split.out_before:.3f} -> {split.out_after:.3f}" if split.share_after < 1
           else f"{split.out_before:.3f} at step {held.steps[0]}, none left at "
                f"step {held.steps[-1]}") + ").")
if k_pairs:
    beyond = [(a, b) for (a, b), test in k_tests.items() if test.p_value < alpha]
    detail = "; ".join(f"k = {a} - k = {b}: {test.difference:+.3f} ± {test.sem:.3f}, "
                       f"p = {test.p_value:.2g} ({test.df:.1f} df)" if test.df is not None
                       else f"k = {a} - k = {b}: {test.difference:+.3f}"
                       for (a, b), test in k_tests.items())
    fewest = min(len(by_k[k].seeds) for k in ks)
    caveat = (f" With as few as {fewest} seeds a group, only a large difference could pass."
              if fewest < 4 else "")
    bullets.append(
        (f"**No k is shown to learn more than another.** Over seeds, Welch's test (8.8) "
         f"({detail}): no p below {alpha:.3g} (5 % over {len(k_pairs)} comparisons).{caveat}")
        if not beyond
        else f"**Group sizes differ.** Over seeds, Welch's test (8.8) ({detail}): "
             + ", ".join(f"k = {a} - k = {b}" for a, b in beyond)
             + f" below p = {alpha:.3g} (5 % over {len(k_pairs)} comparisons).{caveat}")
else:
    spread = next((s for s in by_k.values() if len(s.seeds) > 1), None)
    bullets.append(
        "**No ranking of k is possible yet.** Fewer than two group sizes have several seeds"
        + (f"; the {len(spread.seeds)} seeds of one setting differ by a standard deviation "
           f"of {spread.seed_sd:.3f} in their held-out change" if spread else "")
        + ".")
if two_verdicts:
    worded = {"a higher": "k = 2 learned more", "b higher": "k = 2 learned less",
              "equivalent": f"k = 2 matched it within {EQUIVALENCE_MARGIN}",
              "undecided": "undecided"}
    kinds = {v.verdict for v in two_verdicts.values()}
    headline = ("Two was enough here." if kinds == {"equivalent"} else
                "Two was not enough here." if "b higher" in kinds else
                "Two was at least as good here." if kinds <= {"a higher", "equivalent"} else
                "Two held its own against some group sizes; the others these seeds cannot "
                "decide." if kinds & {"a higher", "equivalent"} else
                "Whether two is enough, these seeds cannot tell.")
    bullets.append(
        f"**{headline}** At equal completions per step, k = 2 against "
        + "; ".join(f"k = {k}: {worded[v.verdict]} (difference {v.test.difference:+.3f}, 90 % "
                    f"interval [{v.inner_low:+.3f}, {v.inner_high:+.3f}])"
                    for k, v in two_verdicts.items())
        + f", by eq. (8.9) with a margin of {EQUIVALENCE_MARGIN}.")
zero = {k: [v for name in summary.runs for v in series(load_run(name).records,
                                                        "frac_reward_zero_std")[1]]
        for k, summary in sorted(by_k.items())}
shares = [sum(v) / len(v) for v in zero.values()]
falls = all(a > b for a, b in zip(shares, shares[1:], strict=False))
bullets.append(
    ("**The zero-spread share falls as k grows.**" if falls else "**The zero-spread share by k.**")
    + " Measured over all steps of all seeds: "
    + ", ".join(f"{sum(v) / len(v):.2f} at k = {k}" for k, v in zero.items())
    + "; predicted from this notebook's signal check (per-problem scores, eq. (8.3)): "
    + ", ".join(f"{report.expected_zero_std(k)['per-problem scores']:.2f}" for k in zero)
    + ". The prediction is for the base model; training moves the pass rates.")
display(Markdown("\n".join(f"- {bullet}" for bullet in bullets)))

# %% [markdown]
# ## 5. Refill the groups that gave no signal: dynamic sampling
#
# At k = 2 about half the groups of a step had zero spread (the table of section 4): half of
# every step's sampling and update taught nothing. DAPO's **dynamic sampling** (Yu et al.
# 2025) keeps sampling until the batch is full of groups with signal. The course's version,
# `TrainConfig.dynamic_sampling` (`--dynamic-sampling`), samples the step's flat groups again,
# round after round, until every group has signal or a cap on extra completions is reached
# (`max_refill_generations`, by default one more batch); a group with signal is never sampled
# again. If a prompt's samples pass with probability $p$, a group of $k$ has signal with
# probability $1 - p^k - (1-p)^k$ (one minus eq. (8.2)), so the number of groups drawn until
# one has signal is geometric:
#
# $$ \mathbb{E}[\text{groups drawn per group with signal}] = \frac{1}{1 - p^k - (1-p)^k} \tag{8.6}$$
#
# | symbol | meaning |
# |---|---|
# | $p$ | the chance that one sample of the prompt passes (pass/fail rewards) |
# | $k$ | the group size |
#
# At $p = 0.5$ and $k = 2$ that is 2 groups, twice the sampling; at $p = 0.05$, about ten
# (the table below).
# A prompt that is out of reach ($p = 0$) never gives signal: the cap is what stops the
# spending. The code, in `grpo_core.dynamic_sampling`:

# %%
from grpo_core.dynamic_sampling import expected_groups_until_signal, sample_with_refills

print(inspect.getsource(expected_groups_until_signal))
print(inspect.getsource(sample_with_refills))

# %% [markdown]
# By hand first, on the fake policy of section 2: for each of its problems, draw groups of 2
# until one has signal (at most 9 draws, like a cap), and compare the average number of draws
# with (8.6) at each problem's own $p$:

# %%
# NBVAL_CHECK_OUTPUT
generator = torch.Generator().manual_seed(0)
rows = []
for p_i in (0.05, 0.2, 0.5, 0.8):
    draws = []
    for _ in range(4000):
        draw = 1
        while draw < 9:
            group = torch.rand(2, generator=generator) < p_i
            if group.any() and not group.all():  # mixed: this group has signal
                break
            draw += 1
        draws.append(draw)
    rows.append({"p": p_i, "formula (8.6)": round(expected_groups_until_signal(p_i, 2), 2),
                 "simulated, cap 9": round(sum(draws) / len(draws), 2)})
print(plain_table(pd.DataFrame(rows), index=False))

# %% [markdown]
# (The cap cuts the long tail at $p = 0.05$: the simulation stops at 9 draws where the
# formula's geometric count goes on.) The recorded runs: k = 2 with dynamic sampling, its
# default cap (16 extra completions per step), evaluated every 10 steps, beside plain k = 2.
# Per step: the completions sampled, how many flat groups were sampled again and how many of
# them came back with signal, and the zero-spread share before the refills and in the batch
# trained on:

# %%
from grpo_core.run_files import training_records


def step_mean(records: list, key: str) -> float:
    """The mean of ``key`` over a run's training steps."""
    values = [record[key] for record in training_records(records)]
    return sum(values) / len(values)


dynamic_runs = [load_run(path) for path in list_runs() if path.name.startswith("exp2-k2-dynamic")]
for run in dynamic_runs:
    groups = run.config["train"]["prompts_per_step"]
    before, after = (step_mean(run.records, f"sampling/zero_std_{when}")
                     for when in ("before", "after"))
    again = step_mean(run.records, "sampling/refill_groups")
    print(f"{run.name}: {step_mean(run.records, 'sampling/generations'):.1f} completions "
          f"sampled per step (plain: {groups * 2}), {again:.1f} groups sampled again, "
          f"{step_mean(run.records, 'sampling/groups_refilled'):.1f} of them with signal; "
          f"zero-spread share {before:.2f} before the refills, {after:.2f} after")
    measured = (groups + again) / (groups * (1 - after))
    print(f"  groups drawn per group with signal: {measured:.2f} measured, {1 / (1 - before):.2f} "
          f"if every redraw had the first round's chance of signal")
if not dynamic_runs:
    print("no dynamic-sampling run recorded yet (tools/record_runs.py)")

# %% [markdown]
# The measured count is larger than the naive one wherever the flat groups are the hard (or
# trivially easy) prompts: their redraws come back flat again far more often than a fresh
# prompt would. That is the limit of sampling the *same* prompts again; DAPO draws new
# prompts instead.
#
# Is it worth it? A dynamic step samples more, so compare at **equal completions sampled**,
# not at equal steps: the held-out score against the completions each run had sampled by
# then, with ±2 standard-error bars:

# %%
from matplotlib.figure import Figure

from grpo_core.plots import DPI


def sampled_by_step(run) -> dict[int, int]:
    """``{step: completions sampled up to and including it}``: ``sampling/generations`` where
    the run logged it (dynamic sampling), else the batch size of every step."""
    batch = run.config["train"]["group_size"] * run.config["train"]["prompts_per_step"]
    sampled, total = {0: 0}, 0
    for record in training_records(run.records):
        total += int(record.get("sampling/generations", batch))
        sampled[record["step"]] = total
    return sampled


def held_out_by_sampling(run) -> list[tuple[int, float, float]]:
    """``(completions sampled, held-out score, its sem)`` at each evaluation."""
    sampled = sampled_by_step(run)
    steps, values = series(run.records, HELD_OUT)
    _, errors = series(run.records, f"{HELD_OUT}/sem")
    return [(sampled[s], v, e) for s, v, e in zip(steps, values, errors, strict=True)]


compared = [("plain", load_run(name)) for name in by_k[2].runs] if 2 in by_k else []
compared += [("dynamic", run) for run in dynamic_runs]
fig = Figure(figsize=(7.5, 3.4), dpi=DPI, layout="constrained")
axis = fig.subplots()
for kind, run in compared:
    points = held_out_by_sampling(run)
    axis.errorbar([x for x, _, _ in points], [y for _, y, _ in points],
                  yerr=[2 * e for _, _, e in points], capsize=3, alpha=0.85,
                  fmt="o-" if kind == "dynamic" else "s--",
                  color="C1" if kind == "dynamic" else "C0", label=f"{kind}: {run.name}")
axis.set(xlabel="completions sampled so far", ylabel="held-out unit-test reward",
         title="k = 2: plain against dynamic sampling, at equal sampling")
axis.legend(fontsize=7)
display(Image(figure_png(fig)))
plain_budget = min((sampled_by_step(run)[max(sampled_by_step(run))] for kind, run in compared
                    if kind == "plain"), default=None)
for kind, run in compared:
    within = [point for point in held_out_by_sampling(run) if point[0] <= (plain_budget or 0)]
    if within:
        done, score, error = within[-1]
        print(f"{kind:8} {run.name}: {score:.3f} ± {error:.3f} after {done} completions "
              f"(the last evaluation within plain k = 2's {plain_budget})")


# %% [markdown]
# Each line above is one seed; the seeds' spread, not the evaluation's standard error, is the
# yardstick for a training claim (notebook 12). Across the seeds of each kind, at equal
# completions sampled (the last evaluation within plain k = 2's budget) and at equal steps
# (the last step), with the standard error over seeds:

# %%
from grpo_core.stats import seed_interval


def across_seeds(kind: str, at_budget: bool) -> list[float]:
    """One kind's held-out score per seed, at its last evaluation (within plain k = 2's
    sampling budget where ``at_budget``)."""
    return [[y for x, y, _ in held_out_by_sampling(run) if not at_budget or x <= plain_budget][-1]
            for run_kind, run in compared if run_kind == kind]


if plain_budget and dynamic_runs:
    for label, at_budget in (("equal completions sampled", True), ("equal steps", False)):
        dynamic, plain_scores = across_seeds("dynamic", at_budget), across_seeds("plain", at_budget)
        if min(len(dynamic), len(plain_scores)) < 2:
            print(f"at {label}: {len(dynamic)} dynamic and {len(plain_scores)} plain seed(s), "
                  "too few for a comparison over seeds (Welch's test needs 2 on each side)")
            continue
        test = welch_test(dynamic, plain_scores)
        print(f"at {label}: dynamic {seed_interval(dynamic).describe()}; plain "
              f"{seed_interval(plain_scores).describe()}; dynamic - plain: {test.describe()}: "
              + ("a difference at the 5 % level" if test.p_value < 0.05 else
                 "not distinguishable from the seeds' noise at the 5 % level"))

# %% [markdown]
# ## 6. Train it yourself (a short live demo)
#
# A few steps of experiment 2 with this profile's sizes (`cpu`: 2 steps of 2 prompts x 8
# completions; `smoke`: 1 step of 1 x 4; `gpu`: the profile's full run), with the live plot
# of notebook 07. Each step logs the same metrics as the recorded runs, including the step's
# `frac_reward_zero_std`. For real curves, run the command-line version above for more steps
# (or use the `gpu` profile).

# %%
# NBVAL_IGNORE_OUTPUT
from grpo_core.loop import TrainConfig, train
from grpo_core.plots import LivePlot

demo_steps = {"smoke": 1, "cpu": 2}.get(profile.name, profile.max_steps)
config = TrainConfig.from_profile(profile, **{**experiment.overrides, "max_steps": demo_steps})
plot = LivePlot(every=1, title=f"{experiment.title}: live demo")
result = train(model, tokenizer, experiment.prompts, experiment.reward_funcs, config,
               callbacks=[plot])
plot.close()
for record in result.metrics:
    print(f"step {record['step']}: reward {record['reward']:.3f}, "
          f"frac_reward_zero_std {record['frac_reward_zero_std']:.2f}, "
          f"{record['completions/mean_length']:.0f} tokens, {record['step_time']:.0f} s")
print(f"predicted zero-std at k = {config.group_size}: "
      f"{report.expected_zero_std(config.group_size)['per-problem scores']:.2f}")

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. The lecture's numbers: if every one of 20 MBPP problems had the same pass probability
#    p = 0.22, how many of the 20 groups of k = 4 would you expect to be mixed? (The lecture
#    measured 10.)

# %%
from grpo_core.exercises import check

my_expected_mixed = ...  # your answer here

check("08.expected_mixed", my_expected_mixed)

# %% [markdown]
# 2. A signal check with k = 3 gave these rewards. How many groups are mixed, and what is
#    the pooled pass probability p (share of samples with reward 1)?
#
#        [1, 1, 1]   [0, 0, 0.5]   [0, 0, 0]   [1, 0, 1]

# %%
my_mixed = ...  # your answer here
my_p = ...  # your answer here

check("08.mixed_and_p", (my_mixed, my_p))

# %% [markdown]
# 3. Sixteen completions per step, and a hard task where every problem has pass
#    probability p. Write `mixed_per_step(p, k)`: the expected number of mixed groups per
#    step and of completions in mixed groups (the ones with a non-zero advantage), for
#    16 // k prompts of k completions. Then, for p = 0.1 and k = 2, 4, 8, 16, which k gives
#    the most mixed groups, and which the most completions in mixed groups?

# %%
def mixed_per_step(p: float, k: int, completions: int = 16) -> tuple[float, float]:
    """(expected mixed groups, expected completions in mixed groups) per step."""
    return ...  # your code here


my_most_groups = ...  # your answer here
my_most_completions = ...  # your answer here

check("08.mixed_per_step", (mixed_per_step, my_most_groups, my_most_completions))

# %% [markdown]
# ## What this notebook showed
#
# - Check for signal before training: the share of groups with zero spread, predicted by
#   $p^k + (1 - p)^k$.
# - Unit-test rewards raise the score on held-out problems the model never trained on, with a
#   standard error over problems.
# - Comparing group sizes needs several seeds and a stricter bar for several comparisons.
#
# **Next:** [09 · Experiment 3: the reward can be gamed](09_exp3_reward_hacking.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
