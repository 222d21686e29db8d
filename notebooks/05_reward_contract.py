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
# # 05 · The reward is a testable contract
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/05_reward_contract.ipynb)
#
# **Needs:** a CPU is enough (the model part is short). **Takes:** a short notebook. The
# start page lists its measured time and peak memory (`cpu` profile, with
# the machine it was measured on); `smoke` runs every cell in seconds. Not yet measured on a
# GPU.
#
# In GRPO the reward is the *only* thing that says what "better" means. The lecture puts it as
# a contract:
#
# > A fluent derivation with a wrong result fails. A lucky guess with the right result passes.
# > The optimizer can only improve what the reward distinguishes.
#
# This notebook makes each part of that sentence a cell you can run:
#
# 1. the lecture's format + accuracy table, reproduced exactly by two plain functions;
# 2. a verifier sees only the output, never the reasoning;
# 3. code rewards: unit tests run in a sandbox, where a cheating program earns nothing;
# 4. a reward that never varies within a group teaches nothing.

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
                            "--notebook", "05_reward_contract"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## 1. Two reward functions, one table
#
# The task: answer a question and put the final answer in `<answer>...</answer>`, as the last
# thing in the completion. The total reward is a sum of two verifiable checks:
#
# $$ r(y) \;=\; r_\text{format}(y) + r_\text{accuracy}(y, a^\star) \tag{5.1}$$
#
# | symbol | meaning |
# |---|---|
# | $y$ | the completion, a string the policy wrote |
# | $a^\star$ | the expected answer, a column of the dataset (`answer`) |
# | $r_\text{format}(y)$ | 1.0 if $y$ ends with exactly one `<answer>...</answer>` block, else 0 |
# | $r_\text{accuracy}(y, a^\star)$ | 2.0 if $y$ is well formed **and** its answer equals $a^\star$, else 0 |
#
# Both functions have the signature TRL's `GRPOTrainer` expects,
# `fn(completions: list[str], **columns) -> list[float]`: one score per completion, dataset
# columns arrive as keyword arguments. The same functions plug into our loop and into TRL
# (notebook 10).

# %%
import inspect

from grpo_core import rewards
from grpo_core.rewards import accuracy_reward, extract_answer, format_reward

print(inspect.getsource(extract_answer))
print(inspect.getsource(format_reward))
print(inspect.getsource(accuracy_reward))

# %% [markdown]
# **What whitespace is allowed** (the rule is written in the module's docstring, and tested):
# spaces, tabs and newlines at the very start and end of the completion and around the answer
# inside the tags. Anything else after `</answer>` breaks the format, and text before
# `<answer>` is free-form reasoning that no reward reads.
#
# Now the lecture's table, row for row. The reasoning column is the part of each completion
# before the answer; the rewards below are computed, then checked against the lecture's numbers.

# %%
# NBVAL_CHECK_OUTPUT
import pandas as pd

table_rows = [
    ("Sound", "8 boxes of 9 eggs: 8 * 9 = 72.\n<answer>72</answer>", (1.0, 2.0, 3.0)),
    ("Faulty, a lucky guess", "8 + 9 = 17, times 4 is about 72.\n<answer>72</answer>", (1.0, 2.0, 3.0)),
    ("Fluent, with one wrong step", "8 boxes of 9 eggs: 8 * 9 = 71.\n<answer>71</answer>", (1.0, 0.0, 1.0)),
    ("Sound, no tags", "8 boxes of 9 eggs: 8 * 9 = 72. The answer is 72", (0.0, 0.0, 0.0)),
    ("Sound, more text after", "8 * 9 = 72.\n<answer>72</answer> Hope this helps!", (0.0, 0.0, 0.0)),
]
completions = [completion for _, completion, _ in table_rows]
answers = ["72"] * len(completions)
fmt = format_reward(completions)
acc = accuracy_reward(completions, answer=answers)
table = pd.DataFrame(
    {
        "reasoning": [reasoning for reasoning, _, _ in table_rows],
        "ending": [c.splitlines()[-1][-32:] for c in completions],
        "format": fmt,
        "accuracy": acc,
        "total": [f + a for f, a in zip(fmt, acc, strict=True)],
    }
)
print(table.to_string(index=False))
for (reasoning, _, expected), got in zip(table_rows, zip(fmt, acc, table["total"], strict=True), strict=True):
    assert tuple(got) == expected, f"{reasoning}: expected {expected}, got {tuple(got)}"
print("\nevery row matches the lecture's table")

# %% [markdown]
# ## 2. A verifier sees only the output
#
# Rows 1 and 2 score the same 3.0: one reasoned soundly, one guessed. Nothing in the function
# could tell them apart, because nothing in it reads the reasoning. Here is the proof by
# experiment: keep the final line, replace the reasoning by anything at all, and the reward does
# not move.

# %%
# NBVAL_CHECK_OUTPUT
import random

final_line = "<answer>72</answer>"
rng = random.Random(0)
words = "the eggs boxes so therefore clearly seven nine twelve wrong right we get".split()
reasonings = [" ".join(rng.choices(words, k=rng.randint(0, 30))) for _ in range(200)]
variants = [f"{reasoning}\n{final_line}" for reasoning in reasonings]
totals = {
    f + a
    for f, a in zip(format_reward(variants), accuracy_reward(variants, answer=["72"] * len(variants)),
             strict=True)
}
print(f"{len(variants)} different reasonings, distinct totals: {sorted(totals)}")
assert totals == {3.0}

# %% [markdown]
# That is the contract's first half: *a lucky guess with the right result passes*. If the
# reasoning matters to you, the reward has to check it; GRPO will not.
#
# ## 3. Code rewards: unit tests in a sandbox
#
# Experiment 2 rewards Python code by the fraction of a problem's asserts it passes (MBPP's
# reward). That means running code a model wrote, many times per step, on your machine. The
# sandbox (`grpo_core.sandbox`) runs each completion in a fresh, isolated process, and, the
# part that makes it a *contract*, decides each test in the parent process: the child only
# evaluates the candidate's calls (`add(2, 3)`) and returns plain data; the expected values
# (`5`) never enter it. Exit codes, printed text and exceptions never count as a pass.
#
# Which isolation layers this machine allows (some, like network namespaces or a separate
# user, are not available everywhere; the sandbox says which it could not use):

# %%
from grpo_core.sandbox import isolation_report, run_tests

print(isolation_report())

# %% [markdown]
# A correct solution, a wrong one, and three that try to cheat the reward instead of solving
# the task: exit with status 0 before any assert runs, return an object that claims to equal
# everything, and print a fake success message.

# %%
# NBVAL_CHECK_OUTPUT
tests = ["assert add(2, 3) == 5", "assert add(-4, 4) == 0", "assert add(10, 32) == 42"]
candidates = {
    "correct": "def add(a, b):\n    return a + b",
    "abs(a) + abs(b)": "def add(a, b):\n    return abs(a) + abs(b)",
    "exit(0) first": "import sys\nsys.exit(0)\ndef add(a, b):\n    return 0",
    "equals anything": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Anything()"
    ),
    "prints PASSED": "print('3/3 tests PASSED')\ndef add(a, b):\n    return None",
}
for name, code in candidates.items():
    result = run_tests(code, tests, timeout_s=5.0)
    print(f"{name:<16} passed {result.passed}/{result.total}  fraction {result.fraction:.2f}")

# %% [markdown]
# `abs(a) + abs(b)` is right for two of the three tests and earns 2/3: the reward gives
# partial credit, test by test. The three cheats earn 0: the reward pays only for return
# values that an honest program would produce.
#
# The reward function wraps this for a whole batch of completions: it pulls the code out of
# each completion (fenced in a code block or bare), runs the batch in parallel, and caches
# the score of each distinct completion so the same completion always gets the same reward.

# %%
from grpo_core.rewards import unit_test_reward

print(inspect.getsource(unit_test_reward))

# %% [markdown]
# ## 4. A reward that never varies teaches nothing
#
# GRPO's learning signal is the *difference* between a completion's reward and its group's
# mean (notebook 03):
#
# $$ A_i = \frac{r_i - \operatorname{mean}(r_1,\dots,r_k)}{\operatorname{std}(r_1,\dots,r_k) + \varepsilon} \tag{3.1}$$
#
# If all $k$ completions get the same reward, every $A_i$ is 0 and the step learns nothing,
# however good or bad the completions are. So the contract has a second clause: *on the
# prompts you train on, the reward must disagree within a group*. Let us check it on the real
# model. We ask it a question in the table's format and score a group with the two rewards.

# %%
import torch

from grpo_core.advantages import group_advantages
from grpo_core.models import load_policy
from grpo_core.profiles import get_profile
from grpo_core.rollout import chat_prompt, sample_group

profile = get_profile()
model, tokenizer = load_policy(profile)
question = (
    "A farmer packs 8 boxes with 9 eggs each. How many eggs is that? Think briefly, then "
    "give the final number inside <answer></answer> tags, like <answer>10</answer>."
)
rollout = sample_group(
    model,
    tokenizer,
    chat_prompt(tokenizer, question, enable_thinking=profile.enable_thinking),
    profile.group_size,
    max_new_tokens=profile.max_new_tokens,
    temperature=profile.temperature,
    top_p=profile.top_p,
    seed=0,
)
fmt = format_reward(rollout.texts)
acc = accuracy_reward(rollout.texts, answer=["72"] * len(rollout.texts))
totals = torch.tensor([f + a for f, a in zip(fmt, acc, strict=True)])
advantages = group_advantages(totals, group_size=profile.group_size)
for text, total, advantage in zip(rollout.texts, totals, advantages, strict=True):
    print(f"reward {total:.0f}  advantage {advantage:+.2f}  {text[-60:]!r}")
print(f"\ngroup rewards {totals.tolist()}  ->  all advantages zero: {bool((advantages == 0).all())}")

# %% [markdown]
# Here every completion of the group missed the format (a small model, a short completion
# budget), so every reward is 0 and every advantage is exactly 0 ("too hard" in the lecture's
# picture). Partial credit would not help with these samples: the format reward alone is 0
# for each of them too (a total of 0 means both parts are 0). Change the contract to one that
# measures something every completion has, such as its length (experiment 1), and the same
# samples give a signal: it varies within the group.

# %%
from grpo_core.rewards import length_reward

for name, scores in {
    "format + accuracy": totals.tolist(),
    "length (exp. 1)": length_reward(rollout.texts),
}.items():
    group = torch.tensor(scores, dtype=torch.float32)
    advantage = group_advantages(group, group_size=profile.group_size)
    print(f"{name:<18} std {group.std():7.2f}   nonzero advantages {int((advantage != 0).sum())}/{len(group)}")

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).

# %% [markdown]
# **1.** Write a completion that earns the format reward but not the accuracy reward for the
# table's question (expected answer `72`).

# %%
from grpo_core.exercises import check

my_completion = ...  # your answer here

check("05.formatted_but_wrong", my_completion)

# %% [markdown]
# **2.** Write a group of four completions for the same question whose rewards give a usable
# signal: at least one advantage above zero and one below.

# %%
my_group = ...  # your answer here: a list of four strings

check("05.usable_group", my_group)

# %% [markdown]
# **3.** Write the code of an `is_even(n)` that passes these three tests in the sandbox
# (fraction 1.0): `is_even(4) == True`, `is_even(7) == False`, `is_even(0) == True`.

# %%
my_code = ...  # your answer here: the function's source, as a string

check("05.is_even", my_code)

# %% [markdown]
# **4.** A reward function of your own, with TRL's signature: `my_accuracy_reward` pays 2.0
# when a completion is well formed (it ends with exactly one `<answer>...</answer>`) and its
# answer matches the `answer` column, else 0.0. `extract_answer` and `answers_match` from
# `grpo_core.rewards` may help. The check compares it with `accuracy_reward` on the lecture's
# table and a few harder cases.

# %%
def my_accuracy_reward(completions, answer, **kwargs):
    return ...  # your code here: one float per completion


check("05.accuracy_reward", my_accuracy_reward)

# %% [markdown]
# ## What this notebook showed
#
# - A reward is a function with a contract: format and accuracy checks, tested like any code.
# - A verifier sees only the output: a guessed answer scores like a reasoned one.
# - Code is scored by unit tests run in a sandbox, and a reward that never varies teaches
#   nothing.
#
# **Next:** [06 · Fixed preferences or fresh samples](06_fixed_or_fresh.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*)
# before opening the next: every open kernel keeps its memory.
