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
# **Needs:** a laptop CPU (offline) or a Colab GPU. **Takes:** the `smoke` profile (CI)
# took 124 s under nbval on the course's 2-core machine while four training runs shared it;
# the `cpu` build (base samples, two live training steps) took 441 s (load average 3-4); the
# `gpu` profile is not measured yet. Section 4 reads a recorded `cpu` run (12 steps) instead
# of training that long.
#
# The lecture's failed example: *"Reward hacking → the model maximizes the reward ≠ solving the
# task. Reward 📈 (training), real quality 📉 (test)."* GRPO optimizes exactly the number you
# return (notebook 07). If that number can be earned without doing the task, the model finds
# the cheaper way, and the training curve cannot tell you: it shows the number going up,
# which is all it knows.
#
# In this notebook you
# 1. meet a **proxy** reward for the coding task of experiment 2 that checks the answer's
#    shape, not its behaviour, and score a few completions by hand;
# 2. measure how often the *base* model already games it: GRPO can only reinforce what the
#    model samples, so a hack it never tries is never learned;
# 3. train against the proxy while the **true score**, the unit tests on held-out problems,
#    is logged beside it every few steps;
# 4. read a recorded run: how far the proxy and the true score moved, and which curves can tell;
# 5. score the same completions with the fixed reward and watch the hole close.

# %%
# Colab only: fetch the course and install what the runtime lacks (keeps Colab's torch).
# Everywhere else this cell does nothing: `make lab` has already installed everything.
import subprocess
import sys

if "google.colab" in sys.modules:
    COURSE_REPO = "https://github.com/grpo-from-scratch/grpo-course"
    subprocess.run(["git", "clone", "-q", "--depth=1", COURSE_REPO, "/content/grpo-course"])
    subprocess.run([sys.executable, "/content/grpo-course/tools/colab_setup.py"], check=True)
    sys.path.insert(0, "/content/grpo-course")
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## 1. A proxy and the true score
#
# Experiment 2 rewarded a completion with the fraction of the problem's asserts its code
# passes. Running the tests is the expensive, honest check. A cheaper check looks plausible:
# *does the answer contain code that defines the function the tests call?* A correct solution
# always does, so the proxy and the task agree on every good answer. They disagree on the
# answers that matter:
#
# $$ r_{\text{proxy}}(y) = \mathbb{1}\bigl[\mathrm{code}(y) \text{ parses and defines } f\bigr],
# \qquad
# r_{\text{true}}(y) = \frac{\#\{\text{asserts on } f \text{ that pass}\}}{\#\{\text{asserts}\}} $$
#
# - $y$: one completion; $\mathrm{code}(y)$: the Python code in it (`extract_code`: the first
#   fenced block that defines a function, or the bare code);
# - $f$: the function the tests call (the problem's `entry_point`, e.g. `add`);
# - $\mathbb{1}[\cdot]$: 1 when the condition holds, else 0.
#
# A **hack** is a completion the proxy pays in full that the tests fail:
# $r_{\text{proxy}}(y) = 1$ and $r_{\text{true}}(y) = 0$. A stub, `def add(a, b): pass`, is one.

# %%
import inspect

from grpo_core.rewards import defines_function_reward, unit_test_reward

print(inspect.getsource(defines_function_reward))

# %% [markdown]
# Four hand-written answers to problem 1, `add(a, b)`, scored by both rewards, and the
# advantage GRPO would give each if they were one group of $k = 4$ (notebook 03):

# %%
# NBVAL_CHECK_OUTPUT
import pandas as pd

from grpo_core.advantages import group_advantages
from grpo_core.mbpp import read_problems

add = next(row for row in read_problems() if row["entry_point"] == "add")
toy = {
    "solution": "```python\ndef add(a, b):\n    return a + b\n```",
    "stub": "```python\ndef add(a, b):\n    pass\n```",
    "wrong": "```python\ndef add(a, b):\n    return a - b\n```",
    "prose": "To add two numbers, use the + operator.",
}
columns = {"tests": [add["tests"]] * 4, "entry_point": ["add"] * 4}
proxy = defines_function_reward(list(toy.values()), **columns)
true = unit_test_reward(list(toy.values()), **columns)
toy_table = pd.DataFrame({
    "answer": list(toy), "proxy": proxy, "true": true,
    "advantage (proxy)": group_advantages(proxy, group_size=4).tolist(),
    "advantage (true)": group_advantages(true, group_size=4).tolist(),
})
print(toy_table.round(2).to_string(index=False))

# %% [markdown]
# Under the proxy the stub and the wrong answer are pushed **up** as hard as the solution;
# only the answer without code is pushed down. Under the true score only the solution goes
# up. Train on the proxy and anything with a `def add` in it is reinforced, right or wrong.

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
from grpo_core.train import hacking_experiment, hacking_split

profile = get_profile()
experiment = hacking_experiment(profile)
training_rows, held_out_rows = hacking_split(profile)
new_tokens = TrainConfig.from_profile(profile, **experiment.overrides).max_new_tokens
print(f"profile {profile.name} ({profile.reason}): {profile.model_id}, "
      f"{new_tokens} new tokens, groups of {profile.group_size}")
print(f"{len(training_rows)} training problems, {len(held_out_rows)} held out "
      f"(task ids {[row['task_id'] for row in held_out_rows]})")
model, tokenizer = load_policy(profile)

# %%
check_rows = training_rows[: len(held_out_rows)]  # as many problems as the held-out check
k = profile.group_size
scores, texts = score_samples(model, tokenizer, check_rows,
                              [defines_function_reward, unit_test_reward],
                              samples_per_prompt=k, max_new_tokens=new_tokens,
                              temperature=profile.temperature, seed=profile.seed)
proxy_scores, true_scores = scores["defines_function_reward"], scores["unit_test_reward"]


def kinds(proxy: torch.Tensor, true: torch.Tensor) -> list[str]:
    """Sort samples: solves (all tests pass), partial, hack (proxy 1, no test), no function."""
    return ["solves" if t == 1 else "partial" if t > 0 else "hack" if p == 1 else "no function"
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
print(f"groups whose rewards differ (a signal): proxy {mixed['defines_function_reward']}, "
      f"true {mixed['unit_test_reward']} of {len(check_rows)}")
push = pd.DataFrame({"proxy": push_by_kind(proxy_scores), "true": push_by_kind(true_scores)})
print(push.round(2).to_string())

# %% [markdown]
# ## 3. Train against the proxy, watch the true score
#
# `python -m grpo_core.train hacking` trains on the proxy alone. Two measures ride along that
# never touch the advantages:
#
# - `rewards/unit_test_reward/mean`: the unit tests on the same training samples, logged
#   with weight 0;
# - `eval/unit_test_reward` and `eval/defines_function_reward`: both rewards on **held-out**
#   problems the model never trains on, sampled with the same seed each time, after step 1
#   and every few steps (`train(..., evaluate=...)`, `TrainConfig.eval_every`).
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
    print(f"step {record['step']}: proxy {record['rewards/defines_function_reward/mean']:.3f}, "
          f"tests on the same samples {record['rewards/unit_test_reward/mean']:.3f}; "
          f"held out {held_out or '(not evaluated at this step)'}")

# %% [markdown]
# ## 4. A run recorded earlier: which curves gave it away
#
# The same experiment run to the end on a CPU from the command line,
# `python -m grpo_core.train hacking --profile cpu --out data/runs/exp3-hacking-cpu`:

# %%
from IPython.display import Image, display

from grpo_core.diagnosis import RUNS_DIR, diagnose, list_runs, load_run, plot_run, series, trend
from grpo_core.plots import figure_png, plot_metrics

recorded_dir = RUNS_DIR / "exp3-hacking-cpu"
recorded = load_run(recorded_dir) if recorded_dir in list_runs() else None
if recorded is None:
    print(f"no recorded run at {recorded_dir}")
else:
    proxy_name = recorded.config.get("proxy_reward", "defines_function_reward")
    true_name = recorded.config.get("true_reward", "unit_test_reward")
    panels = [
        ("training samples", [f"rewards/{proxy_name}/mean", f"rewards/{true_name}/mean"], None),
        ("held-out problems", [f"eval/{proxy_name}", f"eval/{true_name}"], None),
        ("completion length", ["completions/mean_length"], "completions/mean_chars"),
    ]
    fig = plot_metrics(recorded.records, panels=panels,
                       title="experiment 3 (recorded, cpu): proxy vs true")
    for ax in fig.axes[:2]:
        ax.legend(fontsize=7)
    display(Image(figure_png(fig)))

# %% [markdown]
# Where each curve started and ended: the mean of the run's first and last fifth (thirds for
# the held-out scores, which are logged only every few steps):

# %%
if recorded is not None:
    for key in [f"rewards/{proxy_name}/mean", f"rewards/{true_name}/mean",
                f"eval/{proxy_name}", f"eval/{true_name}", "completions/mean_chars"]:
        steps, values = series(recorded.records, key)
        if values:
            moved = trend(steps, values)
            print(f"{key:42} {moved.first:7.3f} -> {moved.last:7.3f} "
                  f"({len(values)} values, steps {steps[0]}-{steps[-1]})")

# %% [markdown]
# Now `diagnose` (notebook 11) on the recorded run. It finds the true score by itself: an
# `eval/...` metric of a reward the run did not train on (here `unit_test_reward`, weight 0):

# %%
if recorded is not None:
    recorded_diagnosis = diagnose(recorded)
    print(recorded_diagnosis)
    display(Image(figure_png(plot_run(recorded, recorded_diagnosis))))

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
# What gave it away, and what would not have:
#
# - **`reward`**, the number the run optimizes, climbs: by its own curve the run is a
#   success. The other default curves (the zero-std fraction, truncation, length, entropy)
#   describe how well the *proxy* is being optimized; whatever they flag, none of them can
#   say whether the proxy is still the task. Without a true score, hacking is
#   **not measured**, not "ok".
# - **the true score beside it** is the only curve that can tell. Read the table above: on
#   the training samples (weight 0) it is the share of the proxy's reward that is real; on
#   the held-out problems it says whether the model got better at the task. In this short
#   recorded run (12 steps) the held-out score moved within its own noise (24 samples per
#   evaluation, roughly +-0.1), so `diagnose`, which reads the held-out score, did not flag
#   hacking: twelve steps were not enough for the held-out score to separate from the proxy.
#   Whether the gap opens is an empirical question a longer run answers; only a number the
#   model was *not* trained on can answer it, which is why the loop takes an `evaluate` hook.
# - **completion length** is the cheap tell to check next: a policy drifting toward the
#   proxy writes what the proxy needs and nothing more (compare the start and the end in the
#   table above), and reading a few completions settles it.
# - with a KL penalty (β > 0), a `kl` spike while one reward climbs fast is the same story
#   (notebook 11's table); this run used β = 0, so there is no KL curve to read.

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
print(closing.round(2).to_string(na_rep="-"))
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
# 1. Which of these answers to `add(a, b)` are hacks (the proxy pays 1, no test passes)? Give
#    their indices.

# %%
answers = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return 0\n```",
    "```python\ndef add(x, y):\n    ...\n```",
    "```python\ndef plus(a, b):\n    return a + b\n```",
]
my_hacks = [2]  # your indices here

cols = {"tests": [add["tests"]] * len(answers), "entry_point": ["add"] * len(answers)}
pairs = list(zip(defines_function_reward(answers, **cols), unit_test_reward(answers, **cols),
                 strict=True))
assert my_hacks == [i for i, (p, t) in enumerate(pairs) if p == 1 and t == 0], \
    "a hack defines `add` and fails every assert; `plus` is not `add`"
print(f"correct: (proxy, true) = {pairs}; `return 0` passes the asserts whose answer is 0, "
      "and `plus` fails the proxy too (wrong name)")

# %% [markdown]
# 2. Write the cheapest answer to problem 1 that earns the proxy's full reward and fails
#    every test.

# %%
my_stub = "```python\ndef add(a, b):\n    return None\n```"  # your answer here

one = {"tests": [add["tests"]], "entry_point": ["add"]}
assert defines_function_reward([my_stub], **one) == [1.0], "the proxy must pay it in full"
assert unit_test_reward([my_stub], **one) == [0.0], "no test may pass"
print(f"correct: {len(my_stub)} characters earn the proxy's maximum")

# %% [markdown]
# 3. A run logs the proxy reward climbing from 0.4 to 0.9 over 20 steps and
#    `eval/unit_test_reward` = 0.10, 0.12, 0.09, 0.11, 0.10 at steps 1, 5, 10, 15, 20. Build
#    its records and check that `diagnose` flags hacking.

# %%
my_records = [{"step": s, "reward": 0.4 + 0.5 * (s - 1) / 19} for s in range(1, 21)]
for step, value in zip([1, 5, 10, 15, 20], [0.10, 0.12, 0.09, 0.11, 0.10], strict=True):
    my_records[step - 1]["eval/unit_test_reward"] = value  # your records here

assert diagnose(my_records)["hacking"].flagged, diagnose(my_records)["hacking"]
print(f"correct: {diagnose(my_records)['hacking'].evidence}")
