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
# # 11 · Reading the run
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/11_reading_the_run.ipynb)
#
# **Needs:** a laptop CPU; no model, no GPU: it reads the runs recorded in `data/runs/`.
# **Takes:** under a minute: no model is loaded. The start page lists its measured time and
# peak memory (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in
# seconds. Not yet measured on a GPU.
#
# Lecture parts: "Reading the run" and the recap: *"Read the curves: reward, KL, and
# completion length reveal hacking, collapse, and length gaming."*
#
# A GRPO run logs a dozen numbers per step (TRL's names, the same in our loop and in
# `GRPOTrainer`). Most failures show in them long before you read a single completion, if you
# know which curve to look at. In this notebook you
#
# 1. see why the **loss** is the one curve that tells you nothing in GRPO, and what does;
# 2. meet `diagnose`, which reads a run's metrics and flags six symptoms, each with its
#    evidence (which metric, which steps, what value);
# 3. walk through a **gallery of real failures**: for each symptom a short run of this
#    course's own loop, recorded on a CPU, that shows it, what was changed to cause it, and a
#    run with the fix beside it;
# 4. scrub through a run with the **run explorer**: its curves, and at each step what the
#    model actually wrote, with each completion's reward and advantage;
# 5. see each symptom once more on hand-made curves, the textbook case;
# 6. plot every recorded run side by side and diagnose each;
# 7. collect it all in one table, symptom → metric → fix, with a real run behind every row,
#    and close with the lecture's recap.

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
                            "--notebook", "11_reading_the_run"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## 1. The loss is not the curve to read
#
# In supervised training you watch the loss go down. In GRPO with one update per rollout
# (the course's runs: `num_iterations = 1`, `loss_type="grpo"`, β = 0) the logged loss is
# **zero at every step**, whether the run learns or not. With the ratio $\rho_{i,t} = 1$ in
# value:
#
# $$ L = -\frac{1}{N}\sum_{i=1}^{N} \frac{1}{|y_i|}\sum_{t=1}^{|y_i|} \rho_{i,t}\,A_i
#      = -\frac{1}{N}\sum_{i=1}^{N} A_i = 0,
# \qquad
# \nabla L = -\frac{1}{N}\sum_{i=1}^{N} \frac{A_i}{|y_i|}\sum_{t=1}^{|y_i|}
#            \nabla \log \pi_\theta(y_{i,t}\mid x, y_{i,<t}) \neq 0 $$
#
# - $N$: completions in the batch (groups × $k$); $|y_i|$: tokens of completion $i$;
# - $A_i = (r_i - \mathrm{mean}_{\text{group}}\, r) / (\mathrm{std}_{\text{group}}\, r + 10^{-4})$:
#   its advantage (notebook 03). Inside every group the advantages **sum to 0**, so their
#   mean, the loss's value, is 0;
# - $\rho_{i,t} = \exp(\log\pi_\theta - \mathrm{sg}[\log\pi_\theta])$: 1 in value, but its
#   gradient is the policy gradient (notebook 04).
#
# (The token-level losses `bnpo` and `dapo` weight each completion by its length, so their
# value is small but not exactly 0; a KL term adds β times the KL.)
#
# The value is 0; the gradient is not. So read `grad_norm` (is anything pushing the weights?)
# and `frac_reward_zero_std` (how many groups had nothing to compare), never the loss. A toy
# batch of two groups of four, with made-up token log-probs:

# %%
# NBVAL_CHECK_OUTPUT
import torch

from grpo_core.advantages import group_advantages
from grpo_core.loss import grpo_loss

torch.manual_seed(0)
token_logps = (-torch.rand(8, 5) * 3).requires_grad_()  # [B=8 completions, T=5 tokens]
mask = torch.ones(8, 5)


def loss_and_grad(rewards: list[float]) -> tuple[float, float]:
    """The GRPO loss of the toy batch for these rewards, and the norm of its gradient."""
    token_logps.grad = None
    advantages = group_advantages(torch.tensor(rewards), group_size=4)
    loss, _ = grpo_loss(token_logps, None, advantages, mask, loss_type="grpo")
    loss.backward()
    return loss.item(), token_logps.grad.norm().item()


for label, rewards in [("mixed groups      ", [0, 1, 1, 2, 0, 0, 1, 0]),
                       ("all-equal groups  ", [1, 1, 1, 1, 0, 0, 0, 0])]:
    loss, grad = loss_and_grad(rewards)
    print(f"{label} rewards {rewards}: loss {abs(loss):.6f}, grad norm {grad:.3f}")

# %% [markdown]
# Both losses print as 0 (to rounding). Only the gradient tells the two batches apart: the
# mixed groups push the weights, the all-equal groups give **exactly** 0. So "the loss is 0"
# is not a symptom; "`grad_norm` is 0 and `frac_reward_zero_std` is 1" is.
#
# The same in a real run, experiment 1 recorded on a CPU (notebook 07):

# %%
from grpo_core.run_files import list_runs, load_run, runs_dir, series

exp1_dir = runs_dir() / "exp1-length-cpu"
if (exp1_dir / "metrics.jsonl").exists():
    exp1 = load_run(exp1_dir)
    _, losses = series(exp1.records, "loss")
    _, grads = series(exp1.records, "grad_norm")
    print(f"{exp1.name}: {len(losses)} steps, largest |loss| {max(map(abs, losses)):.1e}; "
          f"grad_norm from {min(grads):.2f} to {max(grads):.2f}")
else:
    print(f"no recorded run at {exp1_dir}")

# %% [markdown]
# ## 2. `diagnose`: six symptoms and the metric that reveals each
#
# | symptom | the curve | what you see |
# |---|---|---|
# | no signal | `frac_reward_zero_std` | near 1: the groups' rewards are all equal, every advantage is 0 |
# | truncation | `completions/clipped_ratio` | high: completions stop at `max_new_tokens` and are scored cut off |
# | length gaming | `completions/mean_length` with `reward` | length rises together with the reward, though no reward asks for length |
# | hacking | `reward` with a held-out `eval/...` true score | the proxy climbs while the true score is flat or falls |
# | collapse | `entropy` and `reward_std` | both fall toward 0: every sample is the same, the groups stop disagreeing |
# | KL blow-up | `kl` | past a limit, or far above its own recent level |
#
# A trend is judged without caring about scale: compare the mean of the run's first fifth
# with the mean of its last fifth, and require the rank correlation between step and value,
#
# $$ \rho_S = \mathrm{corr}\bigl(\mathrm{rank}(s_1,\dots,s_n),\ \mathrm{rank}(v_1,\dots,v_n)\bigr)
#    \in [-1, 1], $$
#
# to be at least 0.4 in size ($s_j$: the steps, $v_j$: the metric's values, $n$: how many
# there are; Spearman's correlation: $+1$ for any steadily rising curve, about 0 for noise).
# A metric that was not logged (no `kl` at $\beta = 0$; no held-out score) gives
# **not measured**, never a guess. A symptom seen only early in the run, and gone by its end,
# is **transient**. The thresholds:

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.diagnosis import Thresholds

for name, value in vars(Thresholds()).items():
    print(f"{name:18} {value}")

# %% [markdown]
# The function itself, and the check this course cares about most, hacking. The true score is
# found automatically: an `eval/<fn>` metric (logged every few steps by `train(...,
# evaluate=...)`) whose `fn` is not one of the rewards the run trained on.

# %%
import inspect

from grpo_core.diagnosis import check_hacking, diagnose

print(inspect.getsource(diagnose))
print(inspect.getsource(check_hacking))

# %% [markdown]
# ## 3. A gallery of real failures
#
# Each symptom, happening to a real model in our own loop. Every run below is a short `cpu`
# run of the course's command line (`python -m grpo_core ...`, SmolLM2-135M, groups of 8),
# recorded into `data/runs/` and diagnosed here from its own `metrics.jsonl`. Each changes one
# thing against a healthy run to cause its failure; the fix is a run beside it. Each is one
# run with one seed: it shows that the failure happens and what it looks like, not how often
# it would (a learner's rerun with another `--seed` may take a few steps more or less). The
# gallery itself, with the commands that recorded it (`grpo_core.gallery`):

# %%
import pandas as pd
from IPython.display import HTML, Image, display

from grpo_core.gallery import FIXED_RUN_COMMANDS, GALLERY, gallery_entry
from grpo_core.plots import figure_png, plot_run
from grpo_core.tables import show_table

pd.set_option("display.max_colwidth", None)
display(show_table(pd.DataFrame([{"symptom": e.symptom, "run": e.run, "what was changed": e.changed,
                       "fixed run": e.fixed_run or "-"} for e in GALLERY])))
for entry in GALLERY:
    print(f"{entry.symptom:14} {entry.full_command}")


# %%
def recorded(name: str):
    """The recorded run ``name`` in data/runs/, or None when it has not been recorded."""
    folder = runs_dir() / name
    return load_run(folder) if (folder / "metrics.jsonl").exists() else None


def show_failure(symptom: str) -> None:
    """The gallery's run for ``symptom``: its diagnosis, its curves, and the fixed run's."""
    entry = gallery_entry(symptom)
    run = recorded(entry.run)
    if run is None:
        print(f"data/runs/{entry.run} is not recorded yet; record it (a few minutes) with\n"
              f"  {entry.full_command}")
        return
    diagnosis = diagnose(run)
    print(f"{run.name}: {diagnosis.steps} steps, flagged: {', '.join(diagnosis.symptoms) or 'nothing'}")
    print(f"  changed: {entry.changed}")
    print(f"  {diagnosis[symptom]}")
    display(Image(figure_png(plot_run(run, diagnosis, title=f"{run.name}: {symptom}"))))
    if entry.fixed_run is None:
        print(f"  the fix: {entry.fix}")
        return
    fixed = recorded(entry.fixed_run)
    if fixed is None:
        command = FIXED_RUN_COMMANDS.get(entry.fixed_run, f"(the run {entry.fixed_run})")
        print(f"the fixed run data/runs/{entry.fixed_run} is not recorded yet: {command}")
        return
    fixed_diagnosis = diagnose(fixed)
    print(f"the fix, {fixed.name}: {entry.fix}\n  {symptom}: {fixed_diagnosis[symptom].status}; "
          f"flagged: {', '.join(fixed_diagnosis.symptoms) or 'nothing'}\n  "
          f"{fixed_diagnosis[symptom].evidence}")
    display(Image(figure_png(plot_run(fixed, fixed_diagnosis, title=f"{fixed.name}: the fix"))))


# %% [markdown]
# ### No signal: a task the model cannot reach
#
# Experiment 2's unit-test reward on **real MBPP** instead of the course's own problems.
# Notebook 08's signal check found SmolLM2-135M scoring nothing there: no group of
# 20 mixed. A group whose completions all score 0 has every advantage exactly 0 (notebook 03),
# so the step learns nothing from it: at a step where `frac_reward_zero_std` is 1 every group
# was all-equal and `grad_norm` is exactly 0. In the recorded run that is half of the 8 steps;
# at the others one group of the two had a completion that passed one MBPP assert (a mean
# reward just above zero), so half the groups still gave nothing. The fix is a task at the edge
# of what the model can do: the course's problems (experiment 2, beside it), a larger k, or
# partial credit.

# %%
show_failure("no signal")

# %% [markdown]
# ### Truncation: the budget is too small
#
# Experiment 3 as it was recorded before the code experiments had their stop rule: the base
# model keeps going after its function (calls, tests, explanations), and the proxy it trains
# on pays for more code, so by the end most completions stop at the 192-token
# `max_new_tokens` and are scored cut off; `completions/clipped_ratio` says so (83 % over the
# last fifth of the steps). Beside it, the fix: the same experiment ending each completion
# where its first code block closes (`stop_at="code_block"`), far fewer cut over the last
# fifth (the cell below prints `diagnose`'s verdict on each).

# %%
show_failure("truncation")

# %% [markdown]
# ### Length gaming: a reward that pays for length without saying so
#
# Experiment 1's prompts, rewarded by `detail_reward`: a tenth of a point per distinct word, a
# stand-in for a judge that likes detailed answers. Nothing in it says "be long", but every
# new word pays, so the completions grow with the reward, until they hit the budget (raised to
# 256 tokens to leave room: the base model's answers to these prompts are already long). The
# cell prints the recorded run's mean length and reward at its first and last steps, and the
# step from which most completions stopped at the budget, which is why truncation is flagged
# too: the growth ran out of room. `diagnose` calls it gaming because no trained
# reward is a length reward; experiment 1 (beside it), whose reward asks for 20 characters,
# gets shorter instead. Ten steps of one seed show what the failure looks like, not how
# reliably it happens.

# %%
from grpo_core.rewards import detail_reward

print(inspect.getsource(detail_reward))
show_failure("length gaming")
gaming = recorded(gallery_entry("length gaming").run)
if gaming is not None:
    steps, length = series(gaming.records, "completions/mean_length")
    _, reward = series(gaming.records, "reward")
    _, cut = series(gaming.records, "completions/clipped_ratio")
    # the first step from which every later step had three quarters or more cut off
    from_step = next((s for i, s in enumerate(steps) if min(cut[i:]) >= 0.75), None)
    budget = gaming.config["train"]["max_new_tokens"]
    print(f"mean length {length[0]:.0f} tokens at step {steps[0]} -> {length[-1]:.0f} at step "
          f"{steps[-1]} (budget {budget}); reward {reward[0]:.1f} -> {reward[-1]:.1f}; "
          f"three quarters or more cut off at the budget from step {from_step} on")

# %% [markdown]
# ### Hacking: the proxy climbs, the true score does not
#
# Experiment 3 (notebook 09): a proxy that pays for code it never runs. The reward climbs;
# the held-out unit tests, logged beside it, fall below the base model's score at step 0.
# The milder proxy (beside it) is not gamed.

# %%
show_failure("hacking")

# %% [markdown]
# ### Collapse: a learning rate ten times too high
#
# Experiment 1 with `--lr 2e-4` instead of 2e-5. Each update moves the policy so far that
# after a few steps it samples nearly the same completion every time: `entropy` falls toward
# 0, and with it `reward_std`, because a group of identical completions has nothing to compare
# (its advantages are all 0), so `diagnose` may flag *no signal* as well: the groups stop
# disagreeing because the samples stopped differing. Experiment 1 at the course's learning
# rate, beside it, is not flagged: its `reward_std` shrinks too, as the completions close in
# on 20 characters, but its entropy stays well above 0: the model still samples different
# completions, they just score alike.

# %%
show_failure("collapse")

# %% [markdown]
# ### KL blow-up: how far the penalty lets the policy go
#
# β = 0.04 (TRL's former default) loads a frozen reference model and logs `kl`, the per-token
# k3 estimate of how far the policy has moved from it (notebook 04). Experiment 1 with it, at
# the course's own learning rate: the reward drives the completions down to a few tokens that
# the reference finds unlikely, and `kl` climbs past the check's limit within about ten
# steps. Beside it, β = 0.2 (same seed and steps, notebook 07). Whether the first is a
# failure depends on what you wanted: `diagnose` flags the climb, but the reward came close to
# its target, and the larger β that holds `kl` down also holds the reward back (the table
# under the plots compares the two over their last five steps). This reward asks for a long
# move away from the base model, and β is the price per unit of KL of that move: a trade-off,
# not a bug. The failure to watch for is a `kl` that climbs while the reward does not: the
# policy drifting from the reference and buying nothing with it.

# %%
show_failure("KL blow-up")

# %%
ends = []
for name in ("exp1-beta-0.04-cpu", "exp1-beta-0.2-cpu"):
    run = recorded(name)
    if run is None:
        continue
    last = run.records[-5:]
    ends.append({"run": name, "beta": run.config["train"]["beta"],
                 "steps": len(run.records),
                 "reward, last 5 steps": round(sum(r["reward"] for r in last) / len(last), 1),
                 "kl per token, last 5 steps": round(sum(r["kl"] for r in last) / len(last), 3),
                 "mean characters, last 5": round(
                     sum(r["completions/mean_chars"] for r in last) / len(last))})
if ends:
    display(show_table(pd.DataFrame(ends).set_index("run")))

# %% [markdown]
# ## 4. Read what the model wrote: the run explorer
#
# The curves say *that* something went wrong and *when*; the completions say *what*. Every
# run recorded with `samples.jsonl` keeps each completion of each step, with its reward and
# its advantage. `run_explorer` puts them beside the curves: pick a run, move the step slider,
# and the cursor moves along every curve while the groups of that step appear below, each
# completion green when it beat its group's mean (A > 0, pushed up), red when it fell short
# (A < 0, pushed down), grey at the mean (a group of equal rewards: no signal). `diagnose`'s
# findings that involve that step are listed above them. Where a run logged several reward
# functions, each completion shows every one beside the total: the explorer opens on the
# hacking run of section 3, where the proxy pays 1 for a completion whose unit tests fail.
# A run recorded before samples were kept still shows its curves, and says so.

# %%
from grpo_core.widgets import run_explorer, step_view, step_view_html


def first_with_samples(names):
    """The first of ``names`` that is recorded with samples.jsonl, else None."""
    return next((n for n in names if recorded(n) is not None and recorded(n).has_samples), None)


# the hacking run first: its completions show the proxy's reward beside the unit tests' verdict
explore = first_with_samples([gallery_entry("hacking").run] + [e.run for e in GALLERY]
                             + [p.name for p in list_runs()])
print(f"starting at {explore}; every recorded run is in the dropdown")
run_explorer(explore) if explore else print("no recorded run has samples.jsonl yet")

# %% [markdown]
# Saved, the explorer above keeps only a picture of its first view (the slider needs a
# running kernel). Here is the same view as plain HTML at the last step of that run: what the
# model was writing when the run ended.

# %%
if explore:
    explored = recorded(explore)
    last_step = explored.samples().select(split="train").steps[-1]
    display(HTML(step_view_html(step_view(explored, last_step), explored.records)))

# %% [markdown]
# ## 5. The same symptoms on hand-made curves
#
# The textbook case of each symptom, as a complement to the real runs: a healthy run first
# (the reward climbs, length steady, groups mixed, entropy steady, a small KL), then six
# copies, each with one curve changed by hand. Each should be flagged for exactly the symptom
# we planted, and nothing else: real runs are rarely that clean (a code run is truncated too).

# %%
import random


def healthy_run(steps: int = 30, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{
        "step": s,
        "reward": 0.2 + 0.5 * s / steps + rng.uniform(-0.05, 0.05),
        "reward_std": 0.3 + rng.uniform(-0.03, 0.03),
        "rewards/code_reward/mean": 0.2 + 0.5 * s / steps,
        "frac_reward_zero_std": rng.choice([0.0, 0.25]),
        "completions/mean_length": 40 + rng.uniform(-3, 3),
        "completions/clipped_ratio": rng.choice([0.0, 0.0625]),
        "entropy": 1.5 + rng.uniform(-0.1, 0.1),
        "kl": 0.002 * s + rng.uniform(0, 0.002),
        "grad_norm": 1.0 + rng.uniform(0, 0.5),
        "clip_ratio/region_mean": 0.0,
    } for s in range(1, steps + 1)]


def planted(changes: dict[str, list[float]]) -> list[dict]:
    """The healthy run with some metrics replaced, step by step (None drops the value)."""
    rows = healthy_run()
    for key, values in changes.items():
        for row, value in zip(rows, values, strict=True):
            row[key] = value
    return rows


steps = range(30)
fading = [1.5 * 0.85 ** s for s in steps]
# held-out scores, every 5 steps: the true one (unit tests) and the proxy itself
true_score = [0.20 - 0.004 * s if s % 5 == 4 else None for s in steps]
held_out_proxy = [0.25 + 0.015 * s if s % 5 == 4 else None for s in steps]
toy_runs = {
    "healthy": planted({}),
    "no signal": planted({"frac_reward_zero_std": [1.0] * 24 + [0.75] * 6,
                          "grad_norm": [0.0] * 24 + [0.4] * 6}),
    "truncation": planted({"completions/clipped_ratio": [0.3 + 0.02 * s for s in steps]}),
    "length gaming": planted({"completions/mean_length": [40 + 3 * s for s in steps]}),
    "hacking": planted({"eval/unit_test_reward": true_score, "eval/code_reward": held_out_proxy}),
    "collapse": planted({"entropy": fading, "reward_std": [0.3 * f / 1.5 for f in fading]}),
    "KL blow-up": planted({"kl": [0.01] * 22 + [0.5 + 0.3 * s for s in range(8)]}),
}

# %%
# NBVAL_CHECK_OUTPUT
for planted_symptom, rows in toy_runs.items():
    found = diagnose(rows, name=planted_symptom)
    print(f"planted {planted_symptom!r:16} -> flagged {found.symptoms}")

# %% [markdown]
# Each finding carries its evidence and the usual fix. The hacking toy in full:

# %%
# NBVAL_CHECK_OUTPUT
diagnose(toy_runs["hacking"], name="toy hacking run")  # a table in a notebook, text in print()

# %% [markdown]
# `plot_run` draws the curves with the live plot's own code (`grpo_core.plots.plot_metrics`,
# notebook 07), with two more panels that reading a run needs (truncation and `grad_norm`),
# a held-out panel when the run has `eval/...` metrics, and the steps of each flagged finding
# shaded red (orange: transient) in the panel that revealed it:

# %%
from IPython.display import Image, display

from grpo_core.plots import figure_png, plot_run

toy = toy_runs["hacking"]
display(Image(figure_png(plot_run(toy, diagnose(toy), title="toy: the proxy climbs, the "
                                  "held-out true score falls"))))

# %% [markdown]
# ## 6. Every recorded run
#
# `data/runs/` holds runs of the course's own code, recorded on a CPU with
# `python -m grpo_core <experiment> --profile cpu --out data/runs/<name>` (experiment 1:
# notebook 07; experiment 2's k sweep: notebook 08; experiment 3, reward hacking: notebook 09).
# First the metrics that mean the same thing in every experiment, every run in one panel
# (the rewards are left out: each experiment has its own scale). A setup recorded with several
# seeds is drawn once, by its first seed; notebook 12 puts the seeds side by side:

# %%
from grpo_core.plots import compare_runs
from grpo_core.seeds import group_by_setup

runs = [load_run(path) for path in list_runs()]
first_seeds = [group[0] for group in group_by_setup(runs)]
print(f"{len(runs)} recorded runs: {[run.name for run in runs]}")
print(f"drawn: {len(first_seeds)} setups, each by its first seed")
if runs:
    display(Image(figure_png(compare_runs(first_seeds))))

# %% [markdown]
# Then the diagnosis of each setup's first seed (the table after it covers every run). A run's
# curves, with the flagged steps shaded, are one call away:
# `plot_run(load_run("data/runs/<name>"), diagnose(...))`, or pick the run in section 4's
# explorer (the gallery's runs are drawn in section 3).

# %%
diagnoses = {run.name: diagnose(run) for run in runs}
for run in first_seeds:
    display(diagnoses[run.name])

# %% [markdown]
# All runs as one table, a row per run and a column per symptom:

# %%
import pandas as pd

if diagnoses:
    overview = pd.DataFrame({name: {f.symptom: f.status for f in d}
                             for name, d in diagnoses.items()}).T
    display(overview)

# %% [markdown]
# Experiment 2's sweep asks one question of these curves: how often did a whole group score
# the same? Notebook 08 predicts $p^k + (1-p)^k$ for pass/fail rewards with pass rate $p$:
# the smaller the group, the more often it is all-equal and the step learns nothing from it.
# What the recorded runs measured:

# %%
for run in runs:
    if run.config.get("experiment") == "mbpp":
        _, zero_std = series(run.records, "frac_reward_zero_std")
        _, reward = series(run.records, "reward")
        print(f"{run.name:20} k = {run.config['train']['group_size']:2}: {len(zero_std)} steps, "
              f"mean frac_reward_zero_std {sum(zero_std) / len(zero_std):.2f}, "
              f"mean reward {sum(reward) / len(reward):.3f}")

# %% [markdown]
# How to read what came out:
#
# - **Experiment 1** (reward $-|\mathrm{len}-20|$): its completion length *falls* as the
#   reward rises, the opposite of length gaming, because the reward asks for 20 characters
#   (and a length reward makes length the task, so `diagnose` would not call it gaming either
#   way). The truncation at the first steps is real and **transient**: the base model wrote
#   past the 64-token budget and the reward pushed it under. KL and hacking are **not
#   measured**: $\beta = 0$ loads no reference model, and the run had no held-out score.
# - **Experiment 2** (unit tests, k = 2, 8, 16): compare the zero-std fractions above and in
#   the side-by-side plot with notebook 08's prediction. A flagged *no signal* here is the
#   lecture's "too hard" group; a flagged *truncation* says the code did not fit the budget.
# - **Experiment 3** (a gameable proxy, `exp3-stop-cpu`): the proxy `reward` climbs while
#   `eval/unit_test_reward`, the unit tests on 115 held-out problems, falls below the base
#   model's score at step 0 (its values and z are in the diagnosis above), and `diagnose`
#   flags hacking. Without the held-out curve the run looks like a success: that is the
#   whole point of logging a true score beside the reward. `exp3-long-function-cpu` is the
#   same experiment recorded before the stop rule: it is flagged for hacking and for
#   truncation (notebook 09 compares the two and shows the fall is not the budget's). The
#   milder proxy (`exp3-defines-function-cpu`, 12 steps, an older and smaller run) is the
#   counter-example: its held-out score rose with it, and `diagnose` says so. Notebook 09
#   shows why the proxies differ and how the fixed reward closes the hole.

# %% [markdown]
# ## 7. Symptom → metric → fix
#
# The lecture's "read the curves", as one table. `diagnose` checks each row (its fixes are in
# `grpo_core.diagnosis.SYMPTOMS`, printed below):
#
# | you see | the metric that shows it | it means | the fix |
# |---|---|---|---|
# | loss 0 **and** `grad_norm` 0 | `frac_reward_zero_std` = 1 | all-equal groups: too hard or too easy | a larger k, an easier curriculum, partial credit |
# | loss 0, `grad_norm` > 0 | (nothing wrong) | normal on-policy GRPO (section 1) | none: read the reward instead |
# | completions all end at the budget | `completions/clipped_ratio` high | truncation: rewards of cut-off text | longer completions (`max_new_tokens`) or shorter answers |
# | length climbs with the reward | `completions/mean_length` | length gaming: something in the reward pays per token | cap or normalize it (not a loss type: `dr_grpo`/`dapo` push a long rewarded completion harder than `grpo`, notebook 04 §6) |
# | reward up, held-out score flat or down | `reward` vs `eval/...` | hacking: the model maximizes the reward, not the task | fix the reward; always log a held-out true score |
# | KL spike with a fast-rising format reward | `kl`, `rewards/<fn>/mean` | hacking through a loophole in one reward | larger β, fix that reward, read the spike's completions |
# | entropy and `reward_std` toward 0 | `entropy`, `reward_std` | collapse: the same completion every time | higher temperature, β > 0, lower learning rate, stop earlier |
# | KL grows without bound | `kl` | the policy left the reference | larger β, lower learning rate, `max_grad_norm` |

# %% [markdown]
# The same table with a real run behind every row: the gallery's run for each symptom, what
# `diagnose` says of it, and of the run with the fix.

# %%
from grpo_core.diagnosis import SYMPTOMS


def status_of(name: str | None, symptom: str) -> str:
    """``diagnose``'s verdict on ``symptom`` for the recorded run ``name``."""
    if name is None:
        return "-"
    run = recorded(name)
    return f"{name}: {diagnose(run)[symptom].status}" if run else f"{name}: not recorded yet"


display(show_table(pd.DataFrame([{"symptom": e.symptom, "metric": SYMPTOMS[e.symptom][0],
                       "the run": status_of(e.run, e.symptom), "changed": e.changed,
                       "fix": e.fix, "the fixed run": status_of(e.fixed_run, e.symptom)}
                      for e in GALLERY])))

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.diagnosis import symptom_table

for row in symptom_table().itertuples():
    print(f"{row.symptom} ({row.metric})\n    fix: {row.fix}")

# %% [markdown]
# ## 8. Recap: the lecture in six lines
#
# | the lecture's recap | what it means | where you saw it run |
# |---|---|---|
# | **Imitation to outcomes** | SFT copies demonstrations; RL trains on results: one number per attempt | notebook 01: count the signal of SFT, distillation and RL on the same text |
# | **Group sampling** | sample a group of completions per prompt and score each one | notebook 02: one GRPO round, line by line |
# | **Relative advantage** | the group mean is the baseline: no reward model, no critic | notebook 03: the group-variation widget; A = 0 gives a zero gradient |
# | **Verifiable rewards** | rewards are plain functions that check the output | notebooks 05 and 08: the format/accuracy table, unit tests in a sandbox |
# | **TRL on HF Jobs** | `GRPOTrainer` runs the same loop, and scales out | notebook 10: the same loss in `grpo_core` and TRL |
# | **Read the curves** | reward, KL and completion length reveal hacking, collapse and length gaming | this notebook; notebook 09 for hacking on a real run |
#
# And the lesson under all of it, from experiment 1 to experiment 3: **GRPO optimizes exactly
# the number you return.** If that number can be raised without doing the task, it will be,
# and only a measure the model was not trained on will tell you.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. A run logs `frac_reward_zero_std` = 1.0 and `grad_norm` = 0 for its first 12 steps of
#    15, then 0.5. Which symptom does `diagnose` flag? (One of `SYMPTOMS`' keys.)

# %%
from grpo_core.exercises import check

my_symptom = ...  # your answer here

check("11.symptom", my_symptom)

# %% [markdown]
# 2. Write the `completions/clipped_ratio` curve of a 20-step run whose completions hit the
#    budget at the start but not by the end, so that `diagnose` calls its truncation
#    **transient**, not flagged.

# %%
my_clipped = ...  # your answer here: 20 values

check("11.transient_truncation", my_clipped)

# %% [markdown]
# 3. One group of four with rewards 0, 1, 1, 2, on-policy, `loss_type="grpo"`: what value does
#    the loss print, to 6 decimals? (Section 1: you do not need the log-probs.)

# %%
my_loss = ...  # your answer here

check("11.group_loss_value", my_loss)

# %% [markdown]
# 4. A `diagnose` rule of your own: write `my_no_signal_rule(records)`, True when a run's
#    groups carried no signal (`frac_reward_zero_std` ≥ 0.9) on at least 30 % of its steps or
#    over its last fifth, as `Thresholds` sets. The check compares it with `diagnose` on a
#    silent run, a healthy one and one silent only at its first two steps.

# %%
def my_no_signal_rule(records):
    return ...  # your code here: True or False


check("11.no_signal_rule", my_no_signal_rule)

# %% [markdown]
# ## What this notebook showed
#
# - The loss says nothing in GRPO; reward, KL, length, entropy and the zero-spread share tell
#   what happened.
# - `diagnose` flags six symptoms with their evidence, each shown on a real recorded run with
#   the run that fixes it.
# - The run explorer shows what the model wrote at each step, beside the curves.
#
# **Next:** [12 · The noise floor: is this difference real?](12_noise_floor.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*)
# before opening the next: every open kernel keeps its memory.
