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
# # 12 · The noise floor: is this difference real?
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/12_noise_floor.ipynb)
#
# **Needs:** a laptop CPU. Section 1 loads the model and trains two steps, twice; the rest
# reads the runs recorded in `data/runs/`. **Takes:** a minute or two: two training steps,
# three times; the rest reads recorded runs. The start page lists its measured time and peak
# memory (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in
# seconds. Not yet measured on a GPU.
#
# Lecture part: the recap, *"Read the curves"*, asked of every result: **is this difference
# real, or noise?** The question learners ask GRPO projects most often ("my reward went up
# 0.03, did anything happen?", "k = 8 beat k = 2, is k = 8 better?") has an answer only when
# you know how much the same measurement moves when nothing real changed. That amount is the
# **noise floor**. This notebook measures it for the course's own runs, from the runs
# themselves:
#
# 1. **replay** a run: the same seed gives the same numbers, bit for bit, on one CPU;
# 2. **two kinds of noise**: the evaluation's (which problems, which samples) and
#    training's (which seed); why a paired z over problems understates the second;
# 3. how the evaluation's standard error shrinks with the **number of held-out problems**;
# 4. **pass@1 against pass@k**: did training sharpen what the model could already do, or
#    teach it to solve new problems?
# 5. the **smallest change** this setup can detect, with one seed and with four;
# 6. a **checklist** to apply to any RL result you read.
#
# Notebook 08's statistics primer (section 4) is the background: a standard error over
# problems, a paired difference, z.

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
                            "--notebook", "12_noise_floor"],
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
from matplotlib.figure import Figure

from grpo_core.plots import DPI, figure_png
from grpo_core.profiles import get_profile
from grpo_core.tables import show_table

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason})")

# %% [markdown]
# ## 1. Same seed, same numbers
#
# Everything random in a run comes from one seed: which prompts each step draws
# (`choose_prompts`), every sampled token (`sample_group` seeds its generator with
# `seed * 1_000_003 + step`), and the held-out evaluation (its own fixed seed). So two runs
# with the same seed, code, model and machine should log the same numbers, not merely close
# ones. Two steps of experiment 1, from the same starting weights, twice with seed 0 and once
# with seed 1:

# %%
# NBVAL_IGNORE_OUTPUT
import copy
import time

from grpo_core.experiments import build_config, length_experiment
from grpo_core.loop import train
from grpo_core.models import load_policy

model, tokenizer = load_policy(profile)
experiment = length_experiment(profile)
start_weights = copy.deepcopy(model.state_dict())


def two_steps(seed: int) -> tuple[list[dict], list[str]]:
    """Two steps of experiment 1 from the starting weights: the logged numbers (timings
    left out: they are the machine's, not the run's) and the last step's completions."""
    model.load_state_dict(start_weights)
    config = build_config(profile, experiment, max_steps=2, seed=seed, save_checkpoint=False)
    result = train(model, tokenizer, experiment.prompts, experiment.reward_funcs, config,
                   progress=False)
    numbers = [{k: v for k, v in r.items() if not k.startswith("time") and k != "step_time"}
               for r in result.metrics]
    return numbers, result.last_texts


started = time.perf_counter()
first, again, other = two_steps(0), two_steps(0), two_steps(1)
model.load_state_dict(start_weights)
print(f"three runs of two steps in {time.perf_counter() - started:.0f} s")

# %%
compared = sum(len(record) for record in first[0])
print(f"seed 0 twice: all {compared} logged numbers equal: {first[0] == again[0]}; "
      f"the same completions: {first[1] == again[1]}")
changed = [key for key in first[0][0] if first[0][0][key] != other[0][0].get(key)]
print(f"seed 0 against seed 1: {len(changed)} of {len(first[0][0])} step-1 numbers differ, "
      f"e.g. reward {first[0][0]['reward']:.3f} against {other[0][0]['reward']:.3f}")

# %% [markdown]
# Bit for bit, on one machine. A test keeps it so (`tests/test_seeds.py`). What it does
# *not* promise: the same numbers on another CPU, another torch build or another precision
# plan (a different order of floating-point additions changes the last bits, and sampling
# amplifies that into other tokens within a few steps), nor on a GPU, where some kernels are
# not deterministic unless asked to be (`torch.use_deterministic_algorithms`). So a recorded
# run is replayable where it was made; everywhere else, a *re-run* is a new draw, which is
# exactly why the next sections need more than one run.
#
# ## 2. Two kinds of noise
#
# A run's headline number is its **held-out change**: the unit-test score on the 115
# held-out problems after training minus the same at step 0. Notebook 08 gives it a
# standard error from the per-problem changes (eq. (8.4)):
#
# $$ \Delta_s = \bar y_T - \bar y_0, \qquad z_s = \frac{\Delta_s}{\mathrm{SE}_\text{eval}(\Delta_s)} \tag{12.1} $$
#
# That standard error answers: *with these trained weights, how much would the change move
# with other held-out problems and other samples?* It cannot see training's own randomness:
# another seed draws other prompts in another order and other completions, and trains other
# weights. To see that, train the same setup with several seeds $s = 1 \dots n$ and look at
# their spread:
#
# $$ \bar\Delta = \frac1n\sum_{s=1}^{n}\Delta_s, \qquad
#    \mathrm{SE}_\text{seeds}(\bar\Delta) = \frac{\mathrm{sd}_s(\Delta_s)}{\sqrt n}, \qquad
#    \mathrm{sd}_s^2 \approx \sigma^2_\text{train} + \mathrm{SE}^2_\text{samples} \tag{12.2} $$
#
# | symbol | meaning |
# |---|---|
# | $\Delta_s$ | seed $s$'s held-out change (step $T$ minus step 0) |
# | $\mathrm{SE}_\text{eval}$ | its standard error over problems: `eval/unit_test_reward/delta_sem` |
# | $\mathrm{sd}_s$ | the standard deviation of the $\Delta_s$ over seeds (ddof = 1), $n - 1$ degrees of freedom |
# | $\sigma^2_\text{train}$ | the part of the spread that comes from training, not from the evaluation |
# | $\mathrm{SE}^2_\text{samples}$ | the evaluation's sampling noise with the problems held fixed, eq. (12.2b) |
#
# Which part of the evaluation's noise reaches the spread over seeds? Every seed is scored
# on **the same 115 problems**, so how hard those problems happen to be is shared by all
# seeds and cancels in their spread: $\mathrm{SE}_\text{eval}$, which holds the
# problem-to-problem spread, is *not* part of $\mathrm{sd}_s$. What does differ between
# seeds is which completions their weights sample on each problem:
#
# $$ \mathrm{SE}^2_\text{samples} = \frac{1}{N^2}\sum_{i=1}^{N}\frac{s_i^2}{m_i}
#    \quad\big(+\text{ the same at step 0 when the seeds' step-0 evaluations are other draws}\big)
#    \tag{12.2b} $$
#
# | symbol | meaning |
# |---|---|
# | $s_i^2$, $m_i$ | the variance (ddof = 1) of problem $i$'s $m_i$ sampled scores at one evaluation |
# | $N$ | the held-out problems |
#
# (`grpo_core.stats.sampling_standard_error`). So the spread over seeds can be *smaller* than
# one run's $\mathrm{SE}_\text{eval}$, and the table below checks (12.2b) against it. The
# consequence: $\mathrm{SE}_\text{seeds}$ is the yardstick for a claim about training on
# *these* problems ("this setting learns more here"); a claim about unseen problems must add
# the problems' part too. And $z_s$ from one run is only the yardstick for "this run's
# weights score differently from the base model's". The course's recorded runs, grouped by
# what differs only in the seed (`grpo_core.seeds`, which refuses runs that differ in
# anything else, and runs whose step-0 evaluations are other draws unless told
# `other_draws=True`, as here):

# %%
from grpo_core.run_files import list_runs
from grpo_core.seeds import group_by_setup, held_out_key, seed_group

print(inspect.getsource(seed_group))

# %%
from grpo_core.run_files import load_run
from grpo_core.stats import sampling_standard_error


def samples_error(summary, key: str) -> float | None:
    """(12.2b) for the summary's runs: the mean over its runs of the last evaluation's
    sampling variance, plus step 0's where the step-0 evaluations are other draws; None
    when a run kept no samples."""
    name = key.removeprefix("eval/")
    variances = []
    for run_name in summary.runs:
        held = load_run(run_name).samples(split="held_out")
        if len(held.steps) < 2:
            return None
        steps = held.steps[-1:] if summary.same_draws else [held.steps[0], held.steps[-1]]
        variances.append(sum(sampling_standard_error(
            {p: [float(r[name]) for r in held.select(step=s, prompt_id=p)]
             for p in {r["prompt_id"] for r in held.select(step=s)}}) ** 2 for s in steps))
    return math.sqrt(sum(variances) / len(variances))


summaries = []
for group in group_by_setup(list_runs()):
    if held_out_key(group[0]) is None:
        continue
    try:
        summaries.append(seed_group(group, other_draws=True))
    except ValueError as error:  # a run recorded before held-out evaluations had delta_sem
        print(f"left out: {error}")
rows = []
for summary in summaries:
    several = len(summary.seeds) > 1
    predicted = samples_error(summary, summary.key) if several else None
    rows.append({"runs": ", ".join(summary.runs), "seeds": len(summary.seeds),
                 "step 0": "one draw" if summary.same_draws else "other draws",
                 "each seed: change (z)": "; ".join(
                     f"{c.change:+.3f} ({c.z:+.1f})" for c in summary.changes),
                 "mean, 95 % t-interval": summary.interval().describe(),
                 "sd over seeds": round(summary.seed_sd, 3) if several else None,
                 "SE_samples (12.2b)": round(predicted, 3) if predicted is not None else None,
                 "mean SE_eval": round(summary.mean_delta_sem, 3)})
pd.set_option("display.max_colwidth", None)
display(show_table(pd.DataFrame(rows).set_index("runs")))
problems = {len(load_run(s.runs[0]).config.get("held_out_task_ids", [])) for s in summaries}
print(f"held-out problems per run: {', '.join(str(n) for n in sorted(problems))}")

# %% [markdown]
# Read the last three columns side by side: where a setup has several seeds, the spread over
# seeds, what (12.2b) says the evaluation's sampling alone would put into it, and the
# standard error one run reports for itself. The cell below checks (12.2) on every setup
# with several seeds: the spread should not fall far below the sampling part, and what lies
# above it is training's own spread, $\sigma_\text{train}$:

# %%
for summary in summaries:
    if len(summary.seeds) < 2:
        continue
    predicted = samples_error(summary, summary.key)
    if predicted is None:
        continue
    sd = summary.seed_sd
    train_part = math.sqrt(max(0.0, sd**2 - predicted**2))
    print(f"{summary.runs[0]} and {len(summary.seeds) - 1} more ({len(summary.seeds) - 1} df): "
          f"sd over seeds {sd:.3f}, SE_samples {predicted:.3f}, SE_eval "
          f"{summary.mean_delta_sem:.3f}; sd below SE_eval: {sd < summary.mean_delta_sem}; "
          + (f"training's part sqrt(sd² - SE_samples²) = {train_part:.3f}" if sd > predicted
             else "the spread is no larger than sampling alone explains (no training part "
                  "can be told apart with these seeds)"))

# %% [markdown]
# An sd from a handful of seeds is itself uncertain (it rests on $n - 1$ degrees of
# freedom), so read these as orders of magnitude, not as precise splits. Each dot below is one seed's change with its own ±2 $\mathrm{SE}_\text{eval}$
# bar; the grey band is the mean with its 95 % t-interval over seeds (8.7):

# %%
multi = [s for s in summaries if len(s.seeds) > 1] or summaries
fig = Figure(figsize=(9, 3.4), dpi=DPI, layout="constrained")
axis = fig.subplots()
for x, summary in enumerate(multi):
    changes = [c.change for c in summary.changes]
    bars = [2 * c.delta_sem for c in summary.changes]
    offsets = [x + 0.12 * (i - (len(changes) - 1) / 2) for i in range(len(changes))]
    axis.errorbar(offsets, changes, yerr=bars, fmt="o", color="C0", capsize=3,
                  label="one seed, ±2 SE_eval" if x == 0 else None)
    interval = summary.interval()
    if interval.reason is None:  # 3 seeds or more (two give no useful interval)
        axis.fill_between([x - 0.3, x + 0.3], interval.low, interval.high, color="0.85",
                          label="mean, 95 % t-interval over seeds" if x == 0 else None)
    if len(changes) > 1:
        axis.hlines(interval.mean, x - 0.3, x + 0.3, color="0.4")
axis.axhline(0, color="0.6", lw=0.8)
axis.set_xticks(range(len(multi)), ["\n".join(s.runs) for s in multi], fontsize=7)
axis.set_ylabel("held-out change (step T - step 0)")
axis.set_title("the same setup, several seeds: how far apart are they?")
axis.legend(fontsize=8)
display(Image(figure_png(fig)))

# %% [markdown]
# ## 3. How many held-out problems?
#
# The evaluation's standard error falls as one over the square root of the number of
# problems $N$: to halve it, four times the problems. Take one run's per-problem scores at its
# last evaluation, keep only $n$ of the 115 problems at random (many times over), and watch
# how much the mean moves between subsets:
#
# $$ \mathrm{SE}(n) \approx \frac{\mathrm{sd}_i(y_i)}{\sqrt n}\sqrt{\frac{N - n}{N - 1}} \tag{12.3} $$
#
# (the second factor: drawing $n$ of a fixed $N$ without replacement; at $n = N$ every subset
# is the whole set, and the spread is 0. The first factor alone is the standard error of a
# fresh set of $n$ problems.)

# %%
from grpo_core.run_files import load_run
from grpo_core.stats import standard_error, subsampled_standard_errors

lead = next((s for s in summaries if len(s.seeds) > 1), summaries[0] if summaries else None)
held = load_run(lead.runs[0]).samples(split="held_out") if lead is not None else None
if held is not None and len(held.steps) >= 2:
    end = held.problem_means("unit_test_reward", held.steps[-1])
    start = held.problem_means("unit_test_reward", held.steps[0])
    scores, changes = list(end.values()), [end[p] - start[p] for p in end]
    n_all = len(scores)
    sizes = [n for n in (10, 20, 40, 80) if n < n_all] + [n_all]
    measured = {name: subsampled_standard_errors(values, sizes, draws=400, seed=0)
                for name, values in (("score", scores), ("change", changes))}
    def formula(values: list, n: int) -> float:
        """(12.3): sd / sqrt(n), times the finite-population factor for n of N."""
        sd = standard_error(values) * math.sqrt(n_all)
        return sd / math.sqrt(n) * math.sqrt((n_all - n) / (n_all - 1))

    table = pd.DataFrame({
        "problems n": sizes,
        "score: SE by subsampling": [round(measured["score"][n], 4) for n in sizes],
        "score: (12.3)": [round(formula(scores, n), 4) for n in sizes],
        "score: sd / sqrt(n), a fresh set": [round(standard_error(scores) * math.sqrt(n_all / n), 4)
                                            for n in sizes],
        "change: SE by subsampling": [round(measured["change"][n], 4) for n in sizes],
        "change: (12.3)": [round(formula(changes, n), 4) for n in sizes]}).set_index("problems n")
    print(f"{lead.runs[0]}, held-out step {held.steps[-1]} (scores) and its change from "
          f"step {held.steps[0]}, {n_all} problems:")
    display(table)
    target = 0.01
    needed = math.ceil((standard_error(changes) * math.sqrt(n_all) / target) ** 2)
    print(f"for a standard error of {target} on the change, about {needed} problems "
          f"(this set has {n_all})")
else:
    print("no recorded run with held-out samples at two steps")

# %% [markdown]
# The subsampled spread follows (12.3), finite-population factor included; the column
# without it is the standard error of a *fresh* set of $n$ problems, which is what a
# held-out set of that size would give. More
# problems buy evaluation precision slowly, and only evaluation precision: no number of
# held-out problems removes the spread between seeds of section 2.
#
# ## 4. pass@1 against pass@k
#
# Each held-out problem has several samples. pass@k is the chance that at least one of $k$
# samples passes every test. From $n$ samples of which $c$ passed, the unbiased estimate
# (Chen et al. 2021, "Evaluating Large Language Models Trained on Code") is
#
# $$ \text{pass@}k = 1 - \binom{n - c}{k} \Big/ \binom{n}{k} \tag{12.4} $$
#
# averaged over problems, with a standard error over problems as for any score. pass@1 is
# the share of samples that pass; pass@n is the share of problems with at least one pass.
# The two answer different questions about training: **pass@1 rising** while pass@n stays
# means the model now produces, more reliably, solutions it could already find sometimes
# (*sharpening*); **pass@n rising** means it solves problems on which none of its samples
# did before. The held-out evaluator logs both (`eval/unit_test_reward/pass@1`, `pass@3`);
# runs recorded before that are read from their kept samples (a sample passes when its
# unit-test reward is 1.0):

# %%
from grpo_core.stats import mean, pass_at_k, paired_difference

print(inspect.getsource(pass_at_k))

# %%
# NBVAL_CHECK_OUTPUT
print("by hand: 3 samples, 1 passed:",
      {k: round(pass_at_k(3, 1, k), 4) for k in (1, 2, 3)})

# %%
pass_rows = []
for summary in summaries:
    for name in summary.runs:
        samples = load_run(name).samples(split="held_out")
        if len(samples.steps) < 2:
            continue
        first_step, last_step = samples.steps[0], samples.steps[-1]
        kept = samples.select(step=first_step)
        n = len(kept) // len({row["prompt_id"] for row in kept})  # samples kept per problem
        row = {"run": name, "n": n, "last step": last_step}
        for k, label in ((1, "pass@1"), (n, "pass@n")):
            before = samples.problem_pass_at_k("unit_test_reward", first_step, k)
            after = samples.problem_pass_at_k("unit_test_reward", last_step, k)
            moved = paired_difference(after, before)
            row[f"{label}: step 0 -> last"] = (
                f"{mean(before.values()):.3f} -> {mean(after.values()):.3f}")
            row[f"{label} change (z)"] = (f"{moved.mean:+.3f} ± {moved.sem:.3f} "
                                          f"({moved.z:+.1f})" if moved.z is not None else
                                          f"{moved.mean:+.3f}")
        pass_rows.append(row)
if pass_rows:
    display(show_table(pd.DataFrame(pass_rows).set_index("run")))
else:
    print("no recorded run kept its held-out samples at two steps")

# %% [markdown]
# Compare the two change columns of each run, in units of their standard errors. With only
# three samples per problem pass@3 is a coarse measure (a problem counts as solved after one
# lucky sample), so read a rise in pass@1 that pass@3 does not match as sharpening, and a
# rise in pass@3 as new problems within reach; notebook 08 reads the same table for the k
# sweep.
#
# ## 5. The smallest change this setup can detect
#
# Before comparing two settings, ask what difference the comparison *could* see. With $n$
# runs of each setting, the difference of their mean changes has standard error
# $\mathrm{sd}_s\sqrt{2/n}$; to find a true difference $\delta$ with probability 80 % at a
# two-sided 5 % level it must reach
#
# $$ \delta_\text{min} = \big(t_{1-\alpha/2m,\,\nu} + t_{0.8,\,\nu}\big)\,\mathrm{sd}_s\,\sqrt{2/n},
#    \qquad \nu = 2n - 2 \tag{12.5} $$
#
# with $m$ comparisons made at once (Bonferroni, as in notebook 08). The spread of each
# comparison's two groups of seeds is estimated from those seeds, with $\nu$ degrees of
# freedom, so Student's t replaces the normal quantiles $z$ (to which it tends as $n$ grows):
# with one run per setting ($\nu = 0$) no spread can be measured at all. `sd_s` is measured
# in section 2 from the setup with the most seeds.

# %%
from grpo_core.stats import minimum_detectable_change

print(inspect.getsource(minimum_detectable_change))

# %%
spread = next((s for s in sorted(summaries, key=lambda s: -len(s.seeds)) if len(s.seeds) > 1),
              None)
if spread is not None:
    sd = spread.seed_sd
    print(f"sd over seeds, from {len(spread.seeds)} seeds of {spread.runs[0]}: {sd:.3f} "
          f"(one run's own SE_eval: {spread.mean_delta_sem:.3f})")
    detectable = pd.DataFrame({
        f"{n} runs per setting ({2 * n - 2} df)": {
            "one comparison": round(minimum_detectable_change(sd, n, df=2 * n - 2), 3),
            "three settings, 3 comparisons": round(minimum_detectable_change(
                sd, n, comparisons=3, df=2 * n - 2), 3),
            "the same with normal quantiles": round(minimum_detectable_change(
                sd, n, comparisons=3), 3)}
        for n in (2, 4, 8)})
    display(detectable)
    naive = minimum_detectable_change(spread.mean_delta_sem / math.sqrt(2), 1)
    print(f"what one run's paired z would suggest instead (its SE_eval only, normal "
          f"quantiles): {naive:.3f}")
else:
    print("no setup has two seeds yet: record more seeds (tools/record_runs.py)")

# %% [markdown]
# With two runs per setting the t quantiles of 2 degrees of freedom make the smallest
# detectable change several times what the normal quantiles (the last row) promise; more
# seeds shrink it twice over, through $\sqrt{2/n}$ and through the quantiles. The last line is
# the trap: a paired z between two single runs divides by the evaluation's standard error
# alone and looks far more sensitive than the comparison is, because it leaves out the seed.
# Notebook 08's k sweep is exactly such a comparison; its table reads the across-seed means
# with Welch's test.
#
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. By hand, with (12.4): 5 samples of one problem, 2 of them pass. What is the unbiased
#    estimate of pass@2?

# %%
from grpo_core.exercises import check

my_pass_at_2 = ...  # your answer here

check("12.pass_at_k", my_pass_at_2)

# %% [markdown]
# 2. You compare three settings (k = 2, 8 and 16) in pairs. What |z| must each difference
#    reach to count at 5 %, two-sided, with Bonferroni's correction?

# %%
my_bar = ...  # your answer here

check("12.bonferroni_bar", my_bar)

# %% [markdown]
# ## 6. A checklist for any RL result
#
# 1. **What is the unit?** A standard error over samples of one problem is not one over
#    problems; a score over problems is not a claim about training. Which noise does the
#    error bar hold: the evaluation's, the seeds', or both?
# 2. **Same seed, same numbers?** If the run cannot be replayed where it was made, something
#    outside the seed is random (threads, a non-deterministic kernel, data order).
# 3. **How many seeds?** One run per setting supports "this run moved", not "this setting
#    is better". State each seed's result, and the mean ± its standard error over seeds.
# 4. **Held-out, paired, from step 0?** A change measured on problems the run trained on, or
#    against a baseline evaluated differently, mixes learning with memory and with the
#    evaluation's own noise.
# 5. **How many comparisons, and how many degrees of freedom?** Several pairwise
#    comparisons each need a stricter bar (Bonferroni; exercise 2 computes one); over a few
#    seeds the bar is Student's t with the seeds' degrees of freedom, far above the normal
#    one; the largest of many gaps is the one most likely to be noise.
# 6. **pass@1 or pass@k?** A higher pass@1 with the same pass@k is sharpening, not new
#    ability.
# 7. **What could it have detected?** Put the claimed difference beside the smallest
#    detectable one (12.5). A "no difference" from a comparison that could only see large
#    effects says little about a small one.
# 8. **Does the curve agree with the samples?** Read what the model wrote at the step the
#    number moved (notebook 11's explorer): a reward can move for reasons the task did not.
#
# ## What this notebook showed
#
# - The same seed replays a run bit for bit on one CPU; a re-run elsewhere is a new draw, and
#   runs whose step-0 evaluations are other draws are pooled only as such, said aloud.
# - One run's z measures the evaluation's noise; the spread over seeds (training's randomness
#   and the evaluation's sampling, (12.2b), not the shared problems' difficulty) is what a claim
#   about training must beat, with Student's t over a handful of seeds (notebook 08's eqs.
#   (8.7) and (8.8)), and more held-out problems do not shrink it.
# - pass@1 and pass@k tell sharpening from new solutions; the smallest detectable change
#   says what a comparison could have seen.
#
# **Next:** [13 · When the sampler is not the learner](13_sampler_mismatch.ipynb): the copy
# the rollouts come from against the weights that learn, and the correction TRL applies. Or
# run any experiment with more seeds (`tools/record_runs.py`, `make reproduce RUN=...`).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*): it
# holds the model in memory.
