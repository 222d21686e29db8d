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
# # 09 · Experiment 3: the reward can be gamed
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/09_exp3_reward_hacking.ipynb)
#
# **Needs:** a laptop CPU (offline) or a Colab GPU. **Takes:** the longest notebook: it scores
# the base model's samples and trains a few steps; section 4 reads recorded `cpu` runs instead
# of training for half an hour. The start page lists its measured time and peak memory (`cpu`
# profile, with the machine it was measured on); `smoke` runs every cell in seconds. Not yet
# measured on a GPU.
#
# The lecture's failed example: *"Reward hacking → the model maximizes the reward ≠ solving the
# task. Reward 📈 (training), real quality 📉 (test)."* GRPO optimizes exactly the number you
# return (notebook 07). If that number can be earned without doing the task, the model finds
# the cheaper way, and the training curve cannot tell you: it shows the number going up,
# which is all it knows.
#
# In this notebook you
# 1. meet a **proxy** reward for the coding task of experiment 2 that pays for code it never
#    runs, and score a few completions by hand;
# 2. measure how often the *base* model already games it (GRPO can only reinforce what the
#    model samples, so a hack it never tries is never learned) and which way the proxy
#    points;
# 3. train against the proxy while the **true score**, the unit tests on held-out problems,
#    is logged beside it every few steps;
# 4. read recorded runs of this proxy (with and without the stop rule) and of a milder one:
#    how far the proxy and the true score moved, and which curves can tell;
# 5. score the same completions with the fixed reward and watch the hole close.

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
                            "--notebook", "09_exp3_reward_hacking"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## 1. A proxy and the true score
#
# Experiment 2 rewarded a completion with the fraction of the problem's asserts its code
# passes. Running the tests is the expensive, honest check. Cheaper graders look plausible,
# and real ones share a known bias: learned reward models and LLM judges tend to prefer
# longer answers, effort they can see. Here is that grader in one line: *the answer defines
# the function the tests call, and more code earns more credit*, full marks at 200 characters
# (about 60 tokens):
#
# $$ r_{\text{proxy}}(y) = \mathbb{1}\bigl[\mathrm{code}(y) \text{ parses and defines } f\bigr]
# \cdot \min\Bigl(1, \frac{|\mathrm{code}(y)|}{200}\Bigr),
# \qquad
# r_{\text{true}}(y) = \frac{\#\{\text{asserts on } f \text{ that pass}\}}{\#\{\text{asserts}\}} $$
#
# - $y$: one completion; $\mathrm{code}(y)$: the Python code in it (`extract_code`: the first
#   fenced block that defines a function, or the bare code); $|\mathrm{code}(y)|$ its length
#   in characters;
# - $f$: the function the tests call (the problem's `entry_point`, e.g. `add`);
# - $\mathbb{1}[\cdot]$: 1 when the condition holds, else 0.
#
# The proxy never runs the code. A **hack** is a completion the proxy pays that the tests
# fail: $r_{\text{proxy}}(y) > 0$ and $r_{\text{true}}(y) = 0$. A stub, `def add(a, b): pass`,
# is one; a long wrong answer is a better-paid one.

# %%
import inspect

from grpo_core.rewards import defines_function_reward, long_function_reward, unit_test_reward

print(inspect.getsource(long_function_reward))

# %% [markdown]
# Five hand-written answers to problem 1, `add(a, b)`, scored by both rewards, and the
# advantage GRPO would give each if they were one group of $k = 5$ (notebook 03):

# %%
# NBVAL_CHECK_OUTPUT
import pandas as pd
from IPython.display import display

from grpo_core.advantages import group_advantages
from grpo_core.mbpp import read_problems
from grpo_core.tables import plain_table, show_table

add = next(row for row in read_problems() if row["entry_point"] == "add")
toy = {
    "solution": "```python\ndef add(a, b):\n    return a + b\n```",
    "stub": "```python\ndef add(a, b):\n    pass\n```",
    "wrong": "```python\ndef add(a, b):\n    return str(a) + str(b)\n```",
    "long and wrong": ("```python\ndef add(a, b):\n    # Add the two numbers: turn each into text"
                       " first,\n    # so that every kind of input is handled the same way.\n"
                       "    first = str(a)\n    second = str(b)\n    return first + second\n```"),
    "prose": "To add two numbers, use the + operator.",
}
columns = {"tests": [add["tests"]] * len(toy), "entry_point": ["add"] * len(toy)}
proxy = long_function_reward(list(toy.values()), **columns)
true = unit_test_reward(list(toy.values()), **columns)
toy_table = pd.DataFrame({
    "answer": list(toy), "proxy": proxy, "true": true,
    "advantage (proxy)": group_advantages(proxy, group_size=len(toy)).tolist(),
    "advantage (true)": group_advantages(true, group_size=len(toy)).tolist(),
})
print(plain_table(toy_table.round(2), index=False))

# %% [markdown]
# Under the proxy the long wrong answer is pushed **up** hardest, the short correct one
# *down* (it is shorter than the group's average answer); only under the true score is the
# solution the one that goes up. Train on this proxy and the model is paid to write more
# code, right or wrong.
#
# A milder proxy, `defines_function_reward` (1 for any code that defines `add`, however
# long), pays the solution, the stub and the wrong answer the same. It was this experiment's
# first proxy, and section 4 shows what a recorded run on it did.

# %% [markdown]
# ## 2. Does the base model already game it?
#
# GRPO does not invent behaviour: it reweights what the model samples. A hack it never
# samples gets no advantage and is never learned. So before training, sample the base model
# on the training problems, $k$ completions each, and sort every sample by what the two
# rewards say about it.

# %%
import torch

from grpo_core.evaluation import score_samples
from grpo_core.loop import TrainConfig
from grpo_core.models import load_policy
from grpo_core.profiles import get_profile
from grpo_core.experiments import hacking_experiment, hacking_split

profile = get_profile()
experiment = hacking_experiment(profile)
training_rows, held_out_rows = hacking_split(profile)
settings = TrainConfig.from_profile(profile, **experiment.overrides)
new_tokens, stop_at = settings.max_new_tokens, settings.stop_at
print(f"profile {profile.name} ({profile.reason}): {profile.model_id}, "
      f"{new_tokens} new tokens, groups of {profile.group_size}")
print(f"{len(training_rows)} training problems, {len(held_out_rows)} held out "
      f"(task ids {[row['task_id'] for row in held_out_rows]})")
model, tokenizer = load_policy(profile)

# %%
check_rows = training_rows[: len(held_out_rows)]  # as many problems as the held-out check
k = profile.group_size
scores, texts = score_samples(model, tokenizer, check_rows,
                              [long_function_reward, defines_function_reward, unit_test_reward],
                              samples_per_prompt=k, max_new_tokens=new_tokens,
                              temperature=profile.temperature, seed=profile.seed,
                              stop_at=stop_at)
proxy_scores, true_scores = scores["long_function_reward"], scores["unit_test_reward"]


def kinds(proxy: torch.Tensor, true: torch.Tensor) -> list[str]:
    """Sort samples: solves (all tests pass), partial, hack (proxy > 0, no test), no function."""
    return ["solves" if t == 1 else "partial" if t > 0 else "hack" if p > 0 else "no function"
            for p, t in zip(proxy.flatten().tolist(), true.flatten().tolist(), strict=True)]


sample_kinds = kinds(proxy_scores, true_scores)
counts = pd.Series(sample_kinds).value_counts().reindex(
    ["solves", "partial", "hack", "no function"], fill_value=0)
print(f"{len(sample_kinds)} base samples ({len(check_rows)} problems x {k}):")
print(counts.to_string())
print(f"proxy mean {proxy_scores.mean():.2f}, true mean {true_scores.mean():.2f}; "
      f"hack rate {counts['hack'] / len(sample_kinds):.2f}")

# %% [markdown]
# The hacks the base model already writes, a few of them (the code the proxy saw):

# %%
from grpo_core.rewards import extract_code

hacks = [i for i, kind in enumerate(sample_kinds) if kind == "hack"]
for i in hacks[:3]:
    row = check_rows[i // k]
    print(f"--- problem {row['task_id']} ({row['entry_point']}), sample {i % k}:")
    print(extract_code(texts[i])[:300])
if not hacks:
    print("no hack among these samples: the proxy has nothing to reinforce but real attempts")

# %% [markdown]
# What GRPO would do with these samples: turn each group's proxy scores into advantages and
# ask where the positive push goes. The share of it that lands on hacks is what training on
# the proxy reinforces that the task would not:
#
# $$ \text{share to hacks} = \frac{\sum_{i\,\in\,\text{hacks}} \max(A_i, 0)}{\sum_i \max(A_i, 0)} $$

# %%
def push_by_kind(scores: torch.Tensor) -> pd.Series:
    """The share of the positive advantage each kind of sample receives ([N, k] scores)."""
    advantages = group_advantages(scores.flatten(), group_size=k).clamp(min=0)
    total = advantages.sum().item()
    shares = pd.Series(advantages.tolist(), index=sample_kinds).groupby(level=0).sum()
    return (shares / total if total > 0 else shares * 0).reindex(counts.index, fill_value=0)


mixed = {name: int((s.std(dim=1) > 0).sum()) for name, s in scores.items()}
print(f"groups whose rewards differ (a signal): proxy {mixed['long_function_reward']}, "
      f"true {mixed['unit_test_reward']} of {len(check_rows)}")
push = pd.DataFrame({"proxy": push_by_kind(proxy_scores), "true": push_by_kind(true_scores)})
display(show_table(push.round(2)))

# %% [markdown]
# Which way does each reward point? In every group, take the sample the reward ranks first
# (ties shared equally) and look up its true score. Training on a reward moves the policy
# toward what it ranks first, so if that sample is *worse* than the group's average, the
# reward points away from the task:
#
# $$ \text{true score of the pick} = \frac{1}{N}\sum_{g=1}^{N}
# \operatorname{mean}\{\, r_{\text{true}}(y_{g,i}) : r(y_{g,i}) = \max_j r(y_{g,j}) \,\} $$
#
# with $N$ groups, $y_{g,i}$ the $i$-th sample of group $g$ and $r$ the reward doing the
# ranking. Compare it with the mean true score of all the samples.

# %%
from grpo_core.stats import paired_difference


def pick_minus_mean(ranking: torch.Tensor, true: torch.Tensor) -> dict[int, float]:
    """Per group: the true score of the sample(s) ``ranking`` puts first ([N, k], ties shared)
    minus the group's mean true score, ``{group: difference}``."""
    best = ranking == ranking.max(dim=1, keepdim=True).values
    pick = (true * best).sum(dim=1) / best.sum(dim=1)
    return dict(enumerate((pick - true.mean(dim=1)).tolist()))


rankings = {"the proxy (long_function_reward)": proxy_scores,
            "the first proxy (defines_function_reward)": scores["defines_function_reward"],
            "the true score itself": true_scores}
print(f"mean true score of all samples: {true_scores.mean():.3f} ({len(true_scores)} groups)")
print("true score of the sample each reward ranks first, minus its group's mean "
      "(averaged over groups, ± standard error over groups):")
for name, ranking in rankings.items():
    differences = pick_minus_mean(ranking, true_scores)
    gap = paired_difference(differences, {g: 0.0 for g in differences})
    if gap.z is None:
        verdict = "no spread"
    elif abs(gap.z) < 2:
        verdict = "within noise: no direction shown"
    else:
        verdict = "toward the task" if gap.mean > 0 else "away from the task"
    z = f"z {gap.z:+.1f}" if gap.z is not None else ""
    print(f"  {name:42} {gap.mean:+.3f} ± {gap.sem:.3f} ({z}): {verdict}")

# %% [markdown]
# On the committed `cpu` build's base samples, read the verdicts above: a reward whose pick
# beats its group's mean by more than two standard errors points toward the task, one whose
# pick falls short by as much points away, and anything in between shows no direction at
# this sample size. Ranking by "has the function" puts the answers without one last, and
# those never pass; ranking by length rewards code the tests never run. Section 5's table
# shows the other half: how much of the proxy's positive push goes to the hacks. Section 4's
# recorded runs show what each proxy did in training.

# %% [markdown]
# ## 3. Train against the proxy, watch the true score
#
# `python -m grpo_core hacking` trains on the proxy alone. Two measures ride along that
# never touch the advantages:
#
# - `rewards/unit_test_reward/mean`: the unit tests on the same training samples, logged
#   with weight 0;
# - `eval/unit_test_reward`, `eval/long_function_reward` (and the first proxy's
#   `eval/defines_function_reward`): the rewards on **held-out** problems the model never
#   trains on, sampled with the same seed each time, at step 0 (the base model, before any
#   update) and every few steps (`train(..., evaluate=...)`, `TrainConfig.eval_every`).
#
# The experiment's definition:

# %%
print(inspect.getsource(hacking_experiment))

# %% [markdown]
# A short live run (a few minutes on a CPU; the recorded run below has the full curves).
# The live plot shows the reward, which here **is** the proxy:

# %%
# NBVAL_IGNORE_OUTPUT
from grpo_core.loop import train
from grpo_core.plots import LivePlot

live_steps = {"smoke": 1, "cpu": 2}.get(profile.name, profile.max_steps)
config = TrainConfig.from_profile(profile, **{**experiment.overrides, "max_steps": live_steps})
plot = LivePlot(every=1, title=f"experiment 3 live ({profile.name}): reward = the proxy")
result = train(model, tokenizer, experiment.prompts, experiment.reward_funcs, config,
               reward_weights=experiment.reward_weights, evaluate=experiment.evaluate,
               callbacks=[plot])
plot.close()

# %%
for record in result.metrics:
    held_out = {key: round(value, 3) for key, value in record.items() if key.startswith("eval/")}
    if "reward" not in record:  # step 0: the base model's held-out score, before any update
        print(f"step 0 (no update yet): held out {held_out}")
        continue
    print(f"step {record['step']}: proxy {record['rewards/long_function_reward/mean']:.3f}, "
          f"tests on the same samples {record['rewards/unit_test_reward/mean']:.3f}; "
          f"held out {held_out or '(not evaluated at this step)'}")

# %% [markdown]
# ## 4. A run recorded earlier: which curves gave it away
#
# The same experiment from the command line, for the `cpu` profile's 30 steps, with more
# room (192 new tokens, not the profile's 64), each completion ending where its first code
# block closes (the experiment's stop rule), and a held-out check the size of a measurement:
# all 115 held-out problems x 2 samples, at step 0 (the base model, before any update),
# step 15 and step 30, the same prompts and seed every
# time. Its command and wall time:

# %%
from IPython.display import HTML, Image, display

from grpo_core.diagnosis import Thresholds, diagnose, held_out_change
from grpo_core.stats import trend
from grpo_core.plots import figure_png, plot_metrics, plot_run
from grpo_core.run_files import list_runs, load_run, runs_dir, series

RECORDED_RUN = "exp3-stop-cpu"
recorded_dir = runs_dir() / RECORDED_RUN
recorded = load_run(recorded_dir) if recorded_dir in list_runs() else None
if recorded is None:
    print(f"no recorded run at {recorded_dir}")
else:
    proxy_name = recorded.config["proxy_reward"]
    true_name = recorded.config["true_reward"]
    step_times = [r["step_time"] for r in recorded.records if "step_time" in r]
    eval_times = [r["time/eval"] for r in recorded.records if "time/eval" in r]
    print(recorded.config["command"])
    print(f"{len(step_times)} steps, {sum(step_times) / 60:.0f} min of training steps and "
          f"{sum(eval_times) / 60:.0f} min of held-out evaluation ({len(eval_times)} of them)")
    panels = [
        ("training samples", [f"rewards/{proxy_name}/mean", f"rewards/{true_name}/mean"], None),
        ("held-out problems", [f"eval/{proxy_name}", f"eval/{true_name}"], None),
        ("completion length", ["completions/mean_length"], "completions/clipped_ratio"),
    ]
    display(Image(figure_png(plot_metrics(
        recorded.records, panels=panels, title="experiment 3 (recorded, cpu): proxy vs true",
        labels={f"eval/{true_name}": f"{true_name} (true score)",
                f"eval/{proxy_name}": f"{proxy_name} (trained on)"}))))

# %% [markdown]
# The numbers behind the curves (notebook 08's statistics interlude explains each of them by
# hand: a standard error over problems, the paired change, z). Held out: each score at step 0
# and at the end, each with
# its standard error over problems, and the change with *its* standard error (computed from
# each problem's own change, so a problem's difficulty cancels; notebook 08 explains why it
# is smaller than the two standard errors combined) and z = change / standard error. A |z|
# of 2 or more is a change that "no change at all" would give less than about 5 % of the
# time. Training samples: the mean over the first and the last fifth of the steps (each
# step draws two new problems, so single steps are noisy).

# %%
if recorded is not None:
    rows = []
    for key in (f"eval/{true_name}", f"eval/{proxy_name}", "eval/defines_function_reward"):
        moved = held_out_change(recorded.records, key)
        if moved is not None:
            rows.append({"held-out metric": key,
                         "step 0": f"{moved.start:.3f} ± {moved.start_sem:.3f}",
                         f"step {moved.end_step}": f"{moved.end:.3f} ± {moved.end_sem:.3f}",
                         "change": f"{moved.change:+.3f} ± {moved.delta_sem:.3f}",
                         "z": round(moved.z, 1) if moved.z is not None else None})
    display(show_table(pd.DataFrame(rows)))
    for key in (f"rewards/{proxy_name}/mean", f"rewards/{true_name}/mean",
                "completions/clipped_ratio", "completions/mean_length"):
        steps, values = series(recorded.records, key)
        moved = trend(steps, values)
        print(f"{key:36} first fifth {moved.first:6.3f}, last fifth {moved.last:6.3f} "
              f"(steps {moved.last_steps[0]}-{moved.last_steps[1]})")

# %% [markdown]
# Now `diagnose` (notebook 11) on the recorded run. It finds the true score by itself: an
# `eval/...` metric of a reward the run did not train on (here `unit_test_reward`, weight 0).
# A verdict that hangs on its thresholds would not be evidence, so the hacking check runs
# again with its thresholds halved and doubled (how flat the true score must stay, how far
# and how steadily the proxy must climb):

# %%
from dataclasses import replace

if recorded is not None:
    recorded_diagnosis = diagnose(recorded)
    display(recorded_diagnosis)
    display(Image(figure_png(plot_run(recorded, recorded_diagnosis))))
    base = Thresholds()
    for factor in (0.5, 2.0):
        scaled = replace(base, true_flat=base.true_flat * factor,
                         sparse_rise=base.sparse_rise * factor, trend_rho=base.trend_rho * factor)
        print(f"hacking thresholds x{factor}: "
              f"{diagnose(recorded, thresholds=scaled)['hacking'].status}")

# %% [markdown]
# What would the run have told you **without** the true score? Drop every metric that
# measures the task (the `eval/...` numbers and the weight-0 unit tests) and diagnose again:

# %%
if recorded is not None:
    blind = [{key: value for key, value in record.items()
              if not key.startswith("eval/") and key != f"rewards/{true_name}/mean"}
             for record in recorded.records]
    blind_diagnosis = diagnose(blind, name="the same run without a true score")
    print(f"with the true score:    flagged {recorded_diagnosis.symptoms}")
    print(f"without the true score: flagged {blind_diagnosis.symptoms}; hacking: "
          f"{blind_diagnosis['hacking'].status}")

# %% [markdown]
# ### Read the hack: the same problem at step 0 and at the end
#
# The run kept its completions (`samples.jsonl`), the held-out ones of every evaluation
# too: the same problem, the same seed, before training and after. Here are the held-out
# problems whose true score fell the most while the proxy rose, their first sample at step 0
# and at the last evaluation, with what each reward paid:

# %%
if recorded is not None and recorded.has_samples:
    held = recorded.samples(split="held_out")
    first_step, last_step = held.steps[0], held.steps[-1]

    # each held-out problem's mean over its kept samples, {task id: mean}
    true_before = held.problem_means(true_name, first_step)
    true_after = held.problem_means(true_name, last_step)
    proxy_before = held.problem_means(proxy_name, first_step)
    proxy_after = held.problem_means(proxy_name, last_step)
    fell = sorted((pid for pid in true_before
                   if true_after[pid] < true_before[pid] and proxy_after[pid] > proxy_before[pid]),
                  key=lambda pid: true_after[pid] - true_before[pid])
    down = sum(true_after[p] < true_before[p] for p in true_before)
    up = sum(true_after[p] > true_before[p] for p in true_before)
    print(f"between step {first_step} and step {last_step}, of {len(true_before)} held-out "
          f"problems (their 2 samples each): the true score fell on {down}, rose on {up}, "
          f"stayed on {len(true_before) - down - up}; it fell while the proxy rose on "
          f"{len(fell)}")
    for pid in fell[:2]:
        for step in (first_step, last_step):
            (row,) = held.select(step=step, prompt_id=pid).rows[:1]
            print(f"\n=== problem {pid}, step {step}: {true_name} {row[true_name]:.2f}, "
                  f"{proxy_name} {row[proxy_name]:.2f}, {row['chars']} characters"
                  f"{' (cut off by the budget)' if row['truncated'] else ''}")
            print(row["completion"])

# %% [markdown]
# ### Is it the budget?
#
# A reward that pays for long code makes answers longer, and an answer cut off by the token
# budget can lose its tests without being worse code. This run ends each completion where its
# first code block closes (the experiment's stop rule, `stop_at="code_block"`), so the prose
# a model likes to write after its code no longer spends the budget. Split each
# evaluation's held-out completions into those that finished and those the budget cut:

# %%
if recorded is not None and recorded.has_samples:
    split_rows = []
    for step in held.steps:
        rows = held.select(step=step).rows
        finished = [r for r in rows if not r["truncated"]]
        cut = [r for r in rows if r["truncated"]]

        def mean(group: list, name: str) -> float | None:
            return round(sum(r[name] for r in group) / len(group), 3) if group else None

        split_rows.append({"step": step, "cut by the budget": f"{len(cut) / len(rows):.0%}",
                           f"{true_name}, finished": mean(finished, true_name),
                           f"{true_name}, cut": mean(cut, true_name),
                           f"{proxy_name}, finished": mean(finished, proxy_name)})
    display(show_table(pd.DataFrame(split_rows)))

# %% [markdown]
# The experiment was recorded once before the stop rule existed, with the same command
# otherwise (today `--stop-at none` reproduces it): there the completions ran on past their
# code into the budget. The two runs side by side, the held-out true score's change against
# step 0 and the share of training completions cut off over the last fifth of the steps:

# %%
BUDGET_RUN = "exp3-long-function-cpu"  # recorded before the stop rule
budget_dir = runs_dir() / BUDGET_RUN
if recorded is not None and budget_dir in list_runs():
    budget_rows = []
    for run in (load_run(budget_dir), recorded):
        moved = held_out_change(run.records, f"eval/{true_name}")
        cut = trend(*series(run.records, "completions/clipped_ratio"))
        budget_rows.append({"run": run.name, "stop rule": run.config["train"].get("stop_at") or "none",
                            "true score, step 0": f"{moved.start:.3f} ± {moved.start_sem:.3f}",
                            "at the end": f"{moved.end:.3f} ± {moved.end_sem:.3f}",
                            "change": f"{moved.change:+.3f} ± {moved.delta_sem:.3f}",
                            "z": round(moved.z, 1),
                            "cut off, last fifth": f"{cut.last:.0%}"})
    display(show_table(pd.DataFrame(budget_rows)))

# %% [markdown]
# ### The fixed reward on the same samples
#
# The training samples of the run's last fifth, with the advantage each got from the proxy
# (what the run trained on) and the one the unit tests would have given the same group
# (their scores were logged at weight 0). Every completion that passes no test but earns
# the proxy is a hack; the question is which way each reward pushes it:

# %%
from grpo_core.widgets.explorer import step_groups

if recorded is not None and recorded.has_samples:
    train_rows = recorded.samples(split="train")
    last_fifth = [s for s in train_rows.steps if s > train_rows.steps[-1] * 4 // 5]
    pushed = {"proxy": [0, 0], "unit tests": [0, 0]}  # [pushed up, pushed down or not at all]
    for step in last_fifth:
        for group in step_groups(train_rows, step):
            true = torch.tensor([c.values[true_name] for c in group.completions])
            fixed = group_advantages(true, group_size=len(group.completions))
            for c, fixed_advantage in zip(group.completions, fixed.tolist(), strict=True):
                if c.values[true_name] == 0 and c.values[proxy_name] > 0:  # a hack
                    pushed["proxy"][0 if c.advantage > 0 else 1] += 1
                    pushed["unit tests"][0 if fixed_advantage > 1e-6 else 1] += 1
    hacks_seen = sum(pushed["proxy"])
    print(f"{hacks_seen} hacks among the training samples of steps {last_fifth[0]}-{last_fifth[-1]}")
    for reward, (up, down) in pushed.items():
        print(f"  under {reward:10}: {up} pushed up, {down} pushed down or left alone")


# %% [markdown]
# ### The milder proxy, for comparison
#
# This experiment's first recorded run trained on `defines_function_reward` instead, the
# proxy that pays a stub and a solution the same (`--proxy defines_function`). It is an
# older, smaller run: 12 steps, 64 new tokens, and a held-out check of only 12 problems of
# the first problem set x 2 samples, first measured after one update (no step 0): a mean
# over 12 problems has a standard error of up to sqrt(0.25 / 12) = 0.14, so its held-out
# numbers say little on their own. Section 2
# measured which way each proxy points on the base samples; here is what the two runs did to
# the held-out true score, side by side. Compare the directions of the curves, not their
# levels (different problems, budgets and sample sizes):

# %%
from grpo_core.plots import compare_runs

milder_dir = runs_dir() / "exp3-defines-function-cpu"
pair = [run for run in (recorded, load_run(milder_dir) if milder_dir in list_runs() else None)
        if run is not None]
for run in pair:
    finding = diagnose(run)["hacking"]
    print(f"{run.name} (proxy {run.config.get('proxy_reward')}, "
          f"{sum('reward' in r for r in run.records)} steps): hacking {finding.status}\n  "
          f"{finding.evidence}")
if len(pair) == 2:
    display(Image(figure_png(compare_runs(
        pair, keys=["eval/unit_test_reward", "eval/defines_function_reward"]))))

# %% [markdown]
# What gave it away, and what would not have. The cell below writes the summary from the
# recorded run and its seeds (the numbers are the runs', printed above; ± is one standard
# error), so a rebuild cannot leave it saying what they do not show. What each curve can and
# cannot say does not depend on the numbers:
#
# - **`reward`**, the number the run optimizes: by its own curve the run is a success. The
#   other default curves (the zero-std fraction, truncation, length, entropy) describe how well
#   the *proxy* is being optimized; whatever they flag, none of them can say whether the
#   proxy is still the task. Without a true score, hacking is **not measured**, not "ok".
# - **the held-out true score** is the curve that tells: the same problems and seed at every
#   evaluation, paired against step 0. `diagnose` reads exactly this pair of curves.
# - **the completions** show *how* the proxy is earned (the same problem before and after,
#   above), and the **budget** split says whether cut-off answers explain the fall.
# - with a KL penalty (β > 0), a `kl` spike while one reward climbs fast is the same story
#   (notebook 11's table); these runs used β = 0, so there is no KL curve to read.

# %%
from IPython.display import Markdown

from grpo_core.seeds import group_by_setup, seed_group

if recorded is not None:
    bullets = []
    reward = trend(*series(recorded.records, "reward"))
    bullets.append(f"**`reward`** climbed from {reward.first:.2f} over the first fifth of the "
                   f"steps to {reward.last:.2f} over the last.")
    problems_fell = sum(true_after[p] < true_before[p] for p in true_before)
    problems_rose = sum(true_after[p] > true_before[p] for p in true_before)
    true_move = held_out_change(recorded.records, f"eval/{true_name}")
    proxy_move = held_out_change(recorded.records, f"eval/{proxy_name}")
    steps, values = series(recorded.records, f"eval/{true_name}")
    middle = ", ".join(f"{v:.3f} at step {s}" for s, v in zip(steps[1:-1], values[1:-1],
                                                              strict=True))
    verdict = ("beyond what sampling noise explains" if true_move.z is not None
               and true_move.z <= -2 else "within two standard errors of no change")
    bullets.append(
        f"**The held-out true score** went from {true_move.start:.3f} ± {true_move.start_sem:.3f} "
        f"at step 0 ({middle}) to {true_move.end:.3f} ± {true_move.end_sem:.3f} at step "
        f"{true_move.end_step}: a change of {true_move.change:+.3f} ± {true_move.delta_sem:.3f} "
        f"(z {true_move.z:+.1f}), {verdict}, while the proxy on the same held-out samples went "
        f"from {proxy_move.start:.3f} to {proxy_move.end:.3f} (z {proxy_move.z:+.1f}). Per "
        f"problem: {problems_fell} fell, {problems_rose} rose, "
        f"{len(true_before) - problems_fell - problems_rose} stayed.")
    seeds_of_lead = next((g for g in group_by_setup(
        [p for p in list_runs() if p.name.startswith("exp3-stop")])
        if recorded.name in {r.name for r in g}), [recorded])
    # runs recorded by other code start from other draws of the same base model: said, not hidden
    lead_seeds = seed_group(seeds_of_lead, key=f"eval/{true_name}", other_draws=True)
    bullets.append(
        f"**Over seeds** ({lead_seeds.describe()}): "
        + ("every seed's true score fell by more than two standard errors."
           if all(c.z is not None and c.z <= -2 for c in lead_seeds.changes) and
           len(lead_seeds.seeds) > 1 else
           "one seed only: this run shows the fall, not how often it happens."
           if len(lead_seeds.seeds) == 1 else
           "read each seed's z: not every seed fell by two standard errors."))
    trained_true = trend(*series(recorded.records, f"rewards/{true_name}/mean"))
    bullets.append(
        f"**The unit tests on the training samples** (weight 0) went from "
        f"{trained_true.first:.2f} over the first fifth to {trained_true.last:.2f} over the "
        f"last; each step draws new problems, so single steps swing widely, and held-out "
        f"problems sampled the same way every time are what make a true score readable.")
    if hacks_seen:
        bullets.append(
            f"**The push on the hacks**: over the last fifth of the steps the proxy pushed up "
            f"{pushed['proxy'][0]} of the {hacks_seen} training completions that passed no "
            f"test while earning the proxy; the unit tests would have pushed up "
            f"{pushed['unit tests'][0]} of them.")
    first_split, last_split = split_rows[0], split_rows[-1]
    bullets.append(
        f"**The budget**: {first_split['cut by the budget']} of the held-out answers were cut "
        f"off at step {first_split['step']}, {last_split['cut by the budget']} at step "
        f"{last_split['step']}; the answers that finished scored {first_split[true_name + ', finished']} "
        f"and {last_split[true_name + ', finished']} on the unit tests"
        + (f"; the run without the stop rule changed by {budget_rows[0]['change']}"
           f" (z {budget_rows[0]['z']:+.1f}) with {budget_rows[0]['cut off, last fifth']} cut."
           if budget_dir in list_runs() else "."))
    display(Markdown("\n".join(f"- {bullet}" for bullet in bullets)))

# %% [markdown]
# The milder proxy's short run shows no such fall, on a held-out set too small (12 problems)
# to show much either way. Section 2 measured why it is milder before any training: the
# sample it ranks first in a group beats the group on the unit tests, because it has a
# function; the sample `long_function_reward` ranks first does not. A proxy is gamed when the
# hack beats the honest answer under it, not merely when it ties.

# %% [markdown]
# ## 5. The fixed reward closes the hole
#
# The fix is the reward experiment 2 used: run the tests. Score the base samples of section 2
# again, now with the true reward as the training reward, and look at what each kind of
# sample would be pushed toward, the mean advantage per kind under each reward:

# %%
def mean_advantage_by_kind(scores: torch.Tensor) -> pd.Series:
    advantages = group_advantages(scores.flatten(), group_size=k)
    return pd.Series(advantages.tolist(), index=sample_kinds).groupby(level=0).mean()


closing = pd.DataFrame({
    "samples": counts,
    "advantage (proxy)": mean_advantage_by_kind(proxy_scores),
    "advantage (fixed: unit tests)": mean_advantage_by_kind(true_scores),
}).reindex(counts.index)
display(show_table(closing.round(2).astype(object).where(closing.notna(), "-")))
hack_mask = torch.tensor([kind == "hack" for kind in sample_kinds])
fixed_on_hacks = group_advantages(true_scores.flatten(), group_size=k)[hack_mask]
assert (fixed_on_hacks <= 0).all(), "a hack scores 0 tests: never above its group's mean"
print(f"under the fixed reward no hack gets a positive advantage ({int(hack_mask.sum())} hacks)")

# %% [markdown]
# Under the fixed reward a hack can never beat its group's mean (it passes no test), so it is
# never pushed up: the hole is closed **by construction**, not by luck. What the fix costs is
# signal: on problems the model cannot solve yet every sample scores 0 and the group teaches
# nothing (compare the two rows "groups whose rewards differ" in section 2). That is the
# trade-off experiment 2 explored with k; a proxy is tempting exactly because it gives
# signal everywhere.
#
# The general rules:
#
# 1. reward the behaviour you want, checked as directly as you can afford (run the tests, not
#    a look at their shape);
# 2. log a **true score** the model is not trained on, on held-out data, beside every proxy;
# 3. read a sample of completions whenever a reward climbs fast.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. Which of these answers to `add(a, b)` are hacks (the proxy pays something, no test
#    passes)? Give their indices.

# %%
from grpo_core.exercises import check

answers = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return 0\n```",
    "```python\ndef add(x, y):\n    ...\n```",
    "```python\ndef plus(a, b):\n    return a + b\n```",
]
my_hacks = ...  # your answer here: a list of indices

check("09.hacks", my_hacks)

# %% [markdown]
# 2. Write an answer to problem 1 (`add`) that earns the proxy's full reward (1.0) and fails
#    every test.

# %%
my_hack = ...  # your answer here: a completion, as a string

check("09.full_proxy_hack", my_hack)

# %% [markdown]
# 3. A run logs the proxy reward climbing from 0.4 to 0.9 over 20 steps and
#    `eval/unit_test_reward` = 0.10, 0.12, 0.09, 0.11, 0.10 at steps 1, 5, 10, 15, 20. Build
#    its records (one dict per step, TRL's names) so that `diagnose` flags hacking.

# %%
my_records = ...  # your answer here: a list of dicts

check("09.hacking_records", my_records)

# %% [markdown]
# 4. A `diagnose` rule of your own: write `my_hacking_rule(records)`, True when the trained
#    `reward` rises over the run while the held-out `eval/unit_test_reward` does not rise
#    with it. The check runs it on a hacked, an honest and a flat run and compares with
#    `diagnose`'s hacking finding.

# %%
def my_hacking_rule(records):
    return ...  # your code here: True or False


check("09.hacking_rule", my_hacking_rule)

# %% [markdown]
# ## What this notebook showed
#
# - A proxy reward that never runs the code is gamed: the proxy rises while the held-out unit-
#   test score does not.
# - GRPO can only reinforce what the base model already samples, so measure how often it games
#   the proxy before training.
# - Scoring with the tests themselves closes the hole; only a held-out true score shows it
#   opening.
#
# **Next:** [10 · The same loop in TRL, and the path past one machine](10_trl.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
