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
# # 01 · From imitation to reward: what changes is the signal
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/01_from_imitation_to_reward.ipynb)
#
# **Needs:** a laptop CPU (offline after `make lab`) or a Colab GPU. **Takes:** a short
# notebook: a few forward passes, no training. The start page lists its measured time and peak
# memory (`cpu` profile, with the machine it was measured on); `smoke` runs every cell in
# seconds. Not yet measured on a GPU.
#
# Lecture parts: "Where we are in the series", "What changes today: the signal", the chess
# player.
#
# This notebook puts the three kinds of post-training signal side by side, on one real prompt
# and one real completion:
#
# 1. SFT gives a **target token** at every position: the per-token cross-entropy;
# 2. distillation gives a **whole distribution** at every position: the per-token KL to a teacher;
# 3. RL gives **one number per attempt**: the reward;
#
# then counts how many numbers each one hands the model, and shows, on a toy game, why one
# number per attempt is nevertheless enough to go **past** the demonstrator.

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
                            "--notebook", "01_from_imitation_to_reward"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %% [markdown]
# ## Where we are in the series
#
# | class | method | what the model learns from |
# |---|---|---|
# | 1 | SFT on traces | demonstrations: the tokens someone else wrote |
# | 2 | distillation | a teacher's probabilities for every next token |
# | **3 (today)** | **GRPO** | **its own attempts, and a score for each** |
# | next | RL environments | attempts that act in a world that answers back |
#
# Classes 1 and 2 taught the model to **imitate**. Both have the same ceiling: the
# demonstrator. A student that copies a teacher perfectly is exactly as good as the teacher,
# and no better. Today the demonstrations go away. The model writes its own attempts, a
# function scores each one, and the model is pushed towards the attempts that scored better
# than its others.

# %%
import inspect
import time

import pandas as pd
import torch

from grpo_core.profiles import get_profile

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); model {profile.model_id}")

# %% [markdown]
# ## 1. Three signals, three formulas
#
# A prompt x and a completion y = (y₁, …, y_T) of T tokens. The model π_θ gives, at every
# position t, a distribution over the next token, p_t = π_θ(· ∣ x, y<t), a vector of V
# probabilities (V is the vocabulary size).
#
# **SFT** has a target token at every position and pays for not predicting it:
#
# $$\ell^{\text{SFT}}_t = -\log p_t(y_t) \tag{1.1}$$
#
# **Distillation** has a teacher's distribution q_t at every position and pays for every
# vocabulary entry where the student's probability differs from it:
#
# $$\ell^{\text{KD}}_t = \mathrm{KL}(q_t \,\|\, p_t) = \sum_{v=1}^{V} q_t(v)\,\bigl(\log q_t(v) - \log p_t(v)\bigr) \tag{1.2}$$
#
# **RL** has neither. The model writes y itself, and a reward function scores the whole
# attempt: one number, r(x, y). Which token was good and which was bad, it does not say.
#
# $$\#\text{numbers per attempt:}\quad \text{SFT: } T \qquad \text{distillation: } T \cdot V \qquad \text{RL: } 1 \tag{1.3}$$
#
# | symbol | meaning |
# |---|---|
# | x, y | the prompt and the completion; yₜ is its t-th token, y<t the tokens before it |
# | T | completion length in tokens |
# | V | vocabulary size (49 152 for SmolLM2, 151 936 for Qwen3) |
# | p_t | the student's (the model's) next-token distribution at position t |
# | q_t | the teacher's next-token distribution at position t |
# | r(x, y) | the reward: one number for the whole completion |
#
# The code. Both per-token losses take logits that are already shifted, so that `logits[:, t]`
# is the prediction *for* token t:

# %%
from grpo_core.imitation_signals import feedback_counts, token_cross_entropy, token_kl

print(inspect.getsource(token_cross_entropy))
print(inspect.getsource(token_kl))
print(inspect.getsource(feedback_counts))

# %% [markdown]
# ### By hand first
#
# A vocabulary of four words, a completion of two tokens, "cat sat". At each position the
# student gives a distribution; the teacher gives another. Before running the cell, compute
# the SFT loss at position 1: the student gives "cat" probability 0.5, so it is −log 0.5.

# %%
# NBVAL_CHECK_OUTPUT
vocab = ["the", "cat", "sat", "<end>"]
toy_student = torch.tensor([[[0.2, 0.5, 0.2, 0.1],    # position 1: the student's p_1
                               [0.1, 0.1, 0.6, 0.2]]])  # position 2: p_2
toy_teacher = torch.tensor([[[0.1, 0.8, 0.05, 0.05],
                               [0.05, 0.05, 0.85, 0.05]]])
toy_targets = torch.tensor([[vocab.index("cat"), vocab.index("sat")]])  # the demonstration

sft = token_cross_entropy(toy_student.log(), toy_targets)
kd = token_kl(toy_student.log(), toy_teacher.log())
reward = 1.0  # say a checker liked "cat sat": one number for the whole attempt
print("SFT, -log p_t(y_t) per position:   ", sft.numpy().round(4))
print("distillation, KL(q_t || p_t):        ", kd.numpy().round(4))
print("RL, the reward of the whole attempt: ", reward)
print("numbers handed to the model:", feedback_counts(num_tokens=2, vocab_size=len(vocab)))

# %% [markdown]
# SFT's number at position 1 is −log 0.5 ≈ 0.693, and it only used one entry of p₁ (the
# target's). The KL used all four entries of p₁ and all four of q₁: a teacher says that "the"
# is less wrong than "<end>", SFT cannot. The reward used neither position.

# %% [markdown]
# ## 2. The same three signals on the real model
#
# One prompt and one completion: a demonstration someone wrote, ending with the end-of-turn
# token (SFT also teaches the model *when to stop*).

# %%
from grpo_core.models import load_policy
from grpo_core.rollout import chat_prompt

start = time.perf_counter()
model, tokenizer = load_policy(profile)
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")

question = "What is the capital of France?"
demonstration = "The capital of France is Paris."
prompt = chat_prompt(tokenizer, question)
prompt_ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
completion_ids = tokenizer(demonstration + tokenizer.eos_token, return_tensors="pt",
                           add_special_tokens=False)["input_ids"]
input_ids = torch.cat([prompt_ids, completion_ids], dim=1).to(model.device)
T = completion_ids.size(1)
print(f"prompt {tuple(prompt_ids.shape)} + completion {tuple(completion_ids.shape)} "
      f"= input_ids {tuple(input_ids.shape)}")
print("completion tokens:", tokenizer.convert_ids_to_tokens(completion_ids[0]))

# %% [markdown]
# One forward pass gives the student's logits at every position. The logits at position
# P + t − 1 (the last prompt token, then each completion token) predict completion token t, so
# we keep the T positions that end one before the last:

# %%
with torch.no_grad():
    logits = model(input_ids=input_ids).logits  # [1, P + T, V]
student_logits = logits[:, -T - 1:-1].float()  # [1, T, V]: position t predicts token t
targets = input_ids[:, -T:]  # [1, T]
V = student_logits.size(-1)
print(f"logits {tuple(logits.shape)} -> student_logits {tuple(student_logits.shape)}, "
      f"targets {tuple(targets.shape)}; V = {V}")

# %% [markdown]
# **SFT.** The per-token cross-entropy of the demonstration, eq. (1.1): one number per
# position, each computed from the one target token there.

# %%
sft_losses = token_cross_entropy(student_logits, targets)  # [1, T]
print(f"per-token cross-entropy {tuple(sft_losses.shape)}; SFT loss (mean) "
      f"{sft_losses.mean().item():.3f}")

# %% [markdown]
# **Distillation.** A real teacher is a bigger model with the same vocabulary. To keep this
# offline and cheap, the teacher here is the **same model at temperature 0.5**: a sharper,
# more confident version of itself (q_t = softmax(logits / 0.5)). Its distribution differs
# from the student's, so the KL of eq. (1.2) is not zero, and it is computed over all V
# entries at every position.

# %%
teacher_temperature = 0.5
kd_losses = token_kl(student_logits, student_logits, teacher_temperature=teacher_temperature)
teacher_probs = torch.softmax(student_logits / teacher_temperature, dim=-1)  # [1, T, V]
top = teacher_probs[0].topk(3, dim=-1)
pd.set_option("display.width", 120)
per_token = pd.DataFrame({
    "target token": tokenizer.convert_ids_to_tokens(targets[0]),
    "SFT: -log p_t(y_t)": sft_losses[0].numpy().round(3),
    "distillation: KL(q_t||p_t)": kd_losses[0].numpy().round(4),
    "teacher's top 3 (of V)": [
        ", ".join(f"{tokenizer.decode([i])!r} {p:.2f}" for p, i in zip(ps, ids, strict=True))
        for ps, ids in zip(top.values.tolist(), top.indices.tolist(), strict=True)],
})
print(per_token.to_string())

# %% [markdown]
# **RL.** A reward is a plain function of the completion (notebook 05 makes it a testable
# contract). Here: does the answer name Paris?

# %%
def mentions_paris(completions, **columns):
    """1.0 for each completion that names Paris, else 0.0 (TRL's reward signature)."""
    return [float("paris" in text.lower()) for text in completions]


print("reward of the demonstration:", mentions_paris([demonstration]))

# %% [markdown]
# In RL the model is not shown the demonstration at all: it writes its own attempt, and the
# reward scores that. One attempt, sampled at the profile's settings (on a question this easy it
# may well use the demonstration's very words; what changes is who wrote them):

# %%
from grpo_core.rollout import sample_group

attempt = sample_group(model, tokenizer, prompt, group_size=1,
                       max_new_tokens=profile.max_new_tokens, temperature=profile.temperature,
                       top_p=profile.top_p, seed=profile.seed)
attempt_tokens = int(attempt.lengths[0])
print(f"the model's own attempt ({attempt_tokens} tokens): {attempt.texts[0]!r}")
print("its reward:", mentions_paris(attempt.texts))

# %% [markdown]
# ### Count the signal
#
# Eq. (1.3) for this demonstration, and for the model's own attempt:

# %%
counts = feedback_counts(num_tokens=T, vocab_size=V)
own = feedback_counts(num_tokens=attempt_tokens, vocab_size=V)
side_by_side = pd.DataFrame({
    "signal": ["SFT", "distillation", "RL"],
    "what the model is given": ["a target token at every position",
                                "the teacher's distribution at every position",
                                "one reward for the whole attempt"],
    f"numbers, demonstration ({T} tokens)": [counts["sft"], counts["distillation"],
                                             counts["rl"]],
    f"numbers, own attempt ({attempt_tokens} tokens)": [own["sft"], own["distillation"],
                                                        own["rl"]],
    "computed here": [f"{sft_losses.numel()} cross-entropies", f"{kd_losses.numel()} KLs "
                      f"over {teacher_probs[0].numel():,} probabilities", "1 reward"],
})
print(side_by_side.to_string(index=False))

# %% [markdown]
# Dense, denser, sparse. The count is of numbers, not of information (a target id is one of V
# choices, a pass/fail reward is at most one bit), but the point stands: per attempt, RL tells
# the model about as little as possible. It does not say which token to change, nor in which
# direction. Everything else GRPO does (a group of attempts, advantages, notebooks 02–03) is
# there to turn that one number into a direction for every token.
#
# And RL's number comes from an attempt the model wrote itself, so no one needs to write a
# demonstration: only a checker for the result.

# %% [markdown]
# ## 3. The chess player: one signal per game is enough to get better than the coach
#
# From class 2: a chess player who studies the coach's games learns to play like the coach.
# Now stop studying the coach's games and play your own. Nobody shows you the move; you get one
# signal per game, win or lose. That is enough to improve beyond anyone you could imitate,
# because the signal measures the **result**, not the resemblance to a demonstrator.
#
# Imitation minimises the distance to the demonstrator: its optimum *is* the demonstrator, bad
# moves included. An outcome signal has no demonstrator in it: its optimum is whatever wins
# most often, whether or not anyone ever played it often.
#
# A toy game shows it. Five opening moves, each with a probability of winning. The coach
# mostly plays the fourth move, which wins 0.7 of its games, sometimes the others. Two students start from a uniform
# policy over the five moves:
#
# - **imitation**: cross-entropy on 512 of the coach's games (eq. (1.1), one token per game);
# - **RL**: plays its own games, 16 groups of 8 per step, and gets one bit per game (won or
#   lost); GRPO's group advantage and the lecture's one-step loss (notebooks 02–03).

# %%
# NBVAL_CHECK_OUTPUT
from grpo_core.advantages import group_advantages
from grpo_core.loss import policy_gradient_loss

win_probability = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9])  # per move
coach = torch.tensor([0.05, 0.10, 0.15, 0.60, 0.10])  # how often the coach plays each move
generator = torch.Generator().manual_seed(0)
coach_games = torch.multinomial(coach, 512, replacement=True, generator=generator)


def expected_wins(logits):
    return (torch.softmax(logits, -1) * win_probability).sum().item()


# imitation: copy the coach's moves
imitator = torch.zeros(5, requires_grad=True)
optimizer = torch.optim.Adam([imitator], lr=0.05)
for _ in range(300):
    loss = token_cross_entropy(imitator.expand(1, 512, 5), coach_games.unsqueeze(0)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

# RL: play your own games, one bit (win = 1, loss = 0) per game
player = torch.zeros(5, requires_grad=True)
optimizer = torch.optim.Adam([player], lr=0.05)
k = 8
for _ in range(300):
    with torch.no_grad():
        moves = torch.multinomial(torch.softmax(player, -1), 16 * k, replacement=True,
                                  generator=generator)
        wins = torch.bernoulli(win_probability[moves], generator=generator)  # [128], 0 or 1
    advantages = group_advantages(wins, group_size=k)
    move_logps = torch.log_softmax(player, -1)[moves].unsqueeze(1)  # [128, 1]: one "token"
    loss = policy_gradient_loss(move_logps, torch.ones_like(move_logps), advantages)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"coach:     wins {(coach * win_probability).sum().item():.2f}  plays {coach.numpy().round(2)}")
for name, logits in (("imitation", imitator), ("RL", player)):
    policy = torch.softmax(logits.detach(), -1)
    print(f"{name:10} wins {expected_wins(logits.detach()):.2f}  plays {policy.numpy().round(2)}")

# %% [markdown]
# The imitator converges on the coach, 62 % wins, and no amount of extra training changes
# that: its loss is lowest when it plays exactly like the coach. The RL player, told only won or
# lost, finds the fifth move (the best, 0.9), which the coach seldom played, and wins about 90 % of its games.
#
# Two conditions made it work, and they are the rest of this course: the player must
# *sometimes* try the better move (a group of attempts must differ, notebook 03), and the
# signal must measure what we actually want (the reward is a contract, notebook 05; and it can
# be gamed, experiment 3).

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# **1.** The model's own attempt above had `attempt_tokens` tokens. How many numbers would
# distillation give for it, and how many would RL?

# %%
from grpo_core.exercises import check

my_distillation_count = ...  # your answer here
my_rl_count = ...  # your answer here

check("01.feedback_counts", (my_distillation_count, my_rl_count), num_tokens=attempt_tokens,
      vocab_size=V)

# %% [markdown]
# **2.** At which teacher temperature does the teacher (the same model) give **no**
# distillation signal at all? The check computes `token_kl` at your temperature.

# %%
my_temperature = ...  # your answer here

check("01.no_signal_temperature", my_temperature)

# %% [markdown]
# **3.** In the toy "cat sat" above, compute SFT's loss at position 2 by hand (the student gave
# "sat" probability 0.6); the check compares with `token_cross_entropy`.

# %%
import math

my_loss = ...  # your answer here

check("01.sft_loss_by_hand", my_loss)

# %% [markdown]
# ## What this notebook showed
#
# - SFT, distillation and RL differ in their signal: a demonstrated token, a teacher's
#   distribution, one number per completion.
# - On the real model, SFT's cross-entropy and distillation's KL both come from the student's
#   logits at every position; RL's signal is one reward for an attempt the model wrote itself.
# - A result signal (win or lose) lets a learner improve past anyone it could imitate.
#
# **Next:** [02 · Policy, rollout, reward: one GRPO round, line by line](02_policy_rollout_reward.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
