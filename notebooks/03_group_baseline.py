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
# # 03 · The group is the baseline
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/03_group_baseline.ipynb)
#
# **Needs:** a laptop CPU (the memory goes to the model, its gradients and AdamW's two moments)
# or a Colab GPU. **Takes:** sections 1-2 (toy groups and the widget) run in seconds; section 3
# and 4 run a few updates. The start page lists its measured time and peak memory (`cpu`
# profile, with the machine it was measured on); `smoke` runs every cell in seconds. Not yet
# measured on a GPU.
#
# Lecture parts: "The group is the baseline", "The reward must create variation",
# "What GRPO drops: the critic".
#
# GRPO samples a **group** of k completions for the same prompt and scores each one. The only
# learning signal is how each score compares with the rest of its group. This notebook shows:
#
# 1. how rewards become advantages, on groups you can compute by hand;
# 2. a widget to move k rewards and watch a group lose its signal (too hard, too easy);
# 3. on the real model: when every advantage is 0, the policy gradient is **exactly** 0;
# 4. what still moves the weights at A = 0 (AdamW's weight decay and momentum, a KL term);
# 5. what GRPO saves by using the group mean instead of PPO's value model.

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
                            "--notebook", "03_group_baseline"],
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

from grpo_core.profiles import get_profile

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); group size k = {profile.group_size}, "
      f"{profile.max_new_tokens} new tokens")

# %% [markdown]
# ## 1. Scores become advantages
#
# For one prompt x the policy samples k completions y₁ … y_k and the reward function scores
# them r₁ … r_k. GRPO's advantage of completion i is its reward measured against its own group:
#
# $$A_i = \frac{r_i - \operatorname{mean}(r_1,\dots,r_k)}{\operatorname{std}(r_1,\dots,r_k) + \varepsilon} \tag{3.1}$$
#
# | symbol | meaning |
# |---|---|
# | x | the prompt; every completion in the group answers the same one |
# | k | the group size (`num_generations` in TRL, `profile.group_size` here) |
# | yᵢ | the i-th sampled completion |
# | rᵢ | its reward, one number per completion |
# | mean(r) | the group mean: the **baseline** each completion is compared with |
# | std(r) | the group's standard deviation, with N−1 (Bessel) as `torch.std` and TRL compute it |
# | ε | 10⁻⁴, keeps the division finite when the std is 0 |
# | Aᵢ | the advantage: > 0 pushes yᵢ up, < 0 pushes it down, 0 does nothing |
#
# The lecture's code is `(rewards - rewards.mean()) / (rewards.std() + 1e-4)` for one group.
# `grpo_core` does the same for a batch laid out group after group, with TRL's two variants
# (`scale="batch"`: divide by the whole batch's std; `scale="none"`: Dr. GRPO, do not divide):

# %%
from grpo_core.advantages import group_advantages

print(inspect.getsource(group_advantages))

# %% [markdown]
# ### By hand first
#
# The lecture's three groups of four (its slide "The reward must create variation"), laid out
# one after the other as a batch of 12 rewards. Before running the cell, predict the
# advantages of the "usable" group: its mean is 1 and its std is √(2/3) ≈ 0.816.

# %%
# NBVAL_CHECK_OUTPUT
groups = {"too hard": [0, 0, 0, 0], "too easy": [2, 2, 2, 2], "usable": [0, 1, 1, 2]}
rewards = torch.tensor([r for group in groups.values() for r in group], dtype=torch.float32)
advantages = group_advantages(rewards, group_size=4)
for (name, group), adv in zip(groups.items(), advantages.view(-1, 4), strict=True):
    print(f"{name:9}  rewards {group}  ->  advantages {[round(a, 3) for a in adv.tolist()]}")

# %% [markdown]
# Two of the three groups give **no learning signal**: every attempt sits on the group mean,
# so every advantage is exactly 0. A group that is too hard (nothing is ever solved) and a
# group that is too easy (everything is solved) are the same to GRPO. Only the group that
# disagrees with itself says which way to move.
#
# The scale of the advantages is a choice. The same rewards with TRL's three options:

# %%
# NBVAL_CHECK_OUTPUT
table = pd.DataFrame(
    {scale: group_advantages(rewards, 4, scale=scale).numpy().round(3) for scale in ("group", "batch", "none")},
    index=[f"{name}: r={r}" for name, group in groups.items() for r in group],
)
print(table.to_string())

# %% [markdown]
# - `group` divides each group by its own spread, so the advantages of every group with any
#   spread have a standard deviation of about 1, whether its rewards differ by 2 or by 0.01.
# - `batch` divides by the spread of the whole batch: a group whose rewards barely differ gets
#   small advantages.
# - `none` (Dr. GRPO) keeps the reward's units.
#
# In all three, a group without variation gets exactly 0.

# %% [markdown]
# ## 2. Move the rewards yourself
#
# The **group-variation widget**: k reward sliders (or type a group in the text box), the
# lecture's three presets, and two toggles: the std convention (N−1 as torch and TRL, or N as
# numpy) and `scale`. It shows the mean, the std, every advantage, a bar chart, and says
# plainly when the group gives no learning signal.
#
# Try: pick "too easy"; then move a single slider away from 2. One attempt that differs is
# enough to bring the signal back. Then switch `scale` to `none` and to `batch` (the batch is
# this group plus one other group, 0 0 0 3, shown under the mean).

# %%
from grpo_core.widgets import group_summary, group_variation_widget

group_variation_widget(k=4)

# %% [markdown]
# The widget is a thin view: everything it shows is computed by `group_summary`, a pure
# function you can call yourself (this is also how the course's tests drive the widget):

# %%
# NBVAL_CHECK_OUTPUT
for name, group in groups.items():
    summary = group_summary(group)
    print(f"{name:9} mean {summary.mean:.2f}  std {summary.std:.3f}  "
          f"advantages {[round(a, 3) for a in summary.advantages]}")
    print(f"          {summary.message}")

# %% [markdown]
# ## 3. On the real model: zero advantage means zero gradient
#
# Why does A = 0 teach nothing? The one-step loss of the lecture is
#
# $$\mathcal{L}(\theta) = -\frac{1}{B}\sum_{i=1}^{B} A_i \,\log\pi_\theta(y_i\mid x_i),\qquad
# \nabla_\theta\mathcal{L} = -\frac{1}{B}\sum_{i=1}^{B} A_i\,\nabla_\theta\log\pi_\theta(y_i\mid x_i) \tag{3.2}$$
#
# | symbol | meaning |
# |---|---|
# | θ | the policy's weights |
# | B | completions in the batch (here one group: B = k) |
# | log π_θ(yᵢ∣xᵢ) | the completion's log-probability, the sum of its tokens' log-probs (`sequence_logprob`) |
# | ∇_θ | the gradient with respect to every weight |
#
# Every term of the gradient is multiplied by its Aᵢ. If all Aᵢ are 0 the gradient is 0,
# exactly, not approximately: the backward pass still runs (and costs as much), but it
# multiplies by zero. The code:

# %%
from grpo_core.logprobs import sequence_logprob, token_logprobs
from grpo_core.loss import policy_gradient_loss

print(inspect.getsource(policy_gradient_loss))

# %% [markdown]
# Load the policy and sample one group for one prompt.

# %%
from grpo_core.models import load_policy
from grpo_core.rollout import chat_prompt, sample_group

start = time.perf_counter()
model, tokenizer = load_policy(profile)
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")

prompt = chat_prompt(tokenizer, "Describe the sea in a few words.")
start = time.perf_counter()
rollout = sample_group(model, tokenizer, prompt, profile.group_size,
                       max_new_tokens=profile.max_new_tokens, temperature=profile.temperature,
                       top_p=profile.top_p, seed=profile.seed)
print(f"sampled {profile.group_size} completions in {time.perf_counter() - start:.1f} s")

# %% [markdown]
# Two reward functions score the **same** completions (TRL's signature,
# `fn(completions, **columns) -> list[float]`):
#
# - `length_reward`: −|characters − 20|, the lecture's experiment 1. The completions have
#   different lengths, so the group varies: a usable group.
# - `says_banana_reward`: 1 if the completion contains the word "banana", else 0. The model
#   never writes it here: a group that is too hard.

# %%
def length_reward(completions, **columns):
    return [-abs(len(text) - 20) for text in completions]


def says_banana_reward(completions, **columns):
    return [float("banana" in text.lower()) for text in completions]


k = rollout.group_size
rewards_by_fn = {fn.__name__: torch.tensor(fn(rollout.texts), dtype=torch.float32)
                 for fn in (length_reward, says_banana_reward)}
advantages_by_fn = {name: group_advantages(r, k) for name, r in rewards_by_fn.items()}
pd.set_option("display.max_colwidth", 60)
pd.DataFrame({
    "completion": [t.replace("\n", " ") for t in rollout.texts],
    **{f"{name} r": r.tolist() for name, r in rewards_by_fn.items()},
    **{f"{name} A": a.numpy().round(3) for name, a in advantages_by_fn.items()},
})


# %% [markdown]
# Now the update of the lecture, once with each set of advantages: per-token log-probs with
# gradient, the loss of eq. (3.2), `backward()`, and the norm of the gradient over all of the
# model's weights.

# %%
input_ids, attention_mask = rollout.input_ids, rollout.attention_mask  # prompt + completion
width = rollout.completion_ids.size(1)
params = [p for p in model.parameters() if p.requires_grad]
print(f"input_ids {tuple(input_ids.shape)}: {k} rows x (prompt {rollout.prompt_ids.size(1)} "
      f"+ completion {width}) tokens; {sum(p.numel() for p in params) / 1e6:.1f} M weights")


def gradient_norm(advantages):
    """Backward the lecture's one-step loss with these advantages; return (loss, grad norm)."""
    model.zero_grad(set_to_none=False)
    token_logps = token_logprobs(model, input_ids, attention_mask, width)  # [B, C], with grad
    loss = policy_gradient_loss(token_logps, rollout.completion_mask, advantages)
    loss.backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
    return loss.item(), norm.item()


model.train()  # SmolLM2 and Qwen3 have no dropout; train() only marks the intent
norms = {}
for name, adv in advantages_by_fn.items():
    start = time.perf_counter()
    loss, norms[name] = gradient_norm(adv)
    print(f"{name:19} advantages {adv.numpy().round(2)}\n"
          f"{'':19} loss {loss:+.6f}   gradient norm {norms[name]:.4g}   "
          f"(forward + backward {time.perf_counter() - start:.1f} s)")

assert norms["says_banana_reward"] == 0.0  # exactly, in every one of the weights
assert norms["length_reward"] > 0.0

# Kept for section 4: the log-probs of these completions under the policy as it is now, before
# any update. They will serve as the frozen reference π_ref of a KL term.
with torch.no_grad():
    ref_logps = token_logprobs(model, input_ids, attention_mask, width)  # [B, C]

# %% [markdown]
# The group that varied moves the weights; the group that did not gives a gradient that is
# zero in every one of the model's weights, while the forward and backward passes cost just as
# much. That is why the lecture insists that **the reward must create variation**, and why
# experiment 2 checks, before training, how many groups are mixed.

# %% [markdown]
# ## 4. What still moves the weights at A = 0
#
# A zero gradient does not mean an optimizer step changes nothing. Three things still move θ
# when every advantage in the batch is 0:
#
# $$\theta \leftarrow \theta - \eta\,\Big(\frac{\hat m_t}{\sqrt{\hat v_t}+\epsilon} + \lambda\,\theta\Big),
# \qquad m_t = \beta_1 m_{t-1} + (1-\beta_1)\,g_t,\quad v_t = \beta_2 v_{t-1} + (1-\beta_2)\,g_t^2 \tag{3.3}$$
#
# | symbol | meaning |
# |---|---|
# | η | the learning rate (`profile.learning_rate`) |
# | g_t | the gradient at step t; 0 when every A is 0 |
# | m_t, v_t | AdamW's running means of g and g² (β₁ = 0.9, β₂ = 0.999); m̂, v̂ are bias-corrected |
# | λ | the weight decay; AdamW shrinks θ by η·λ·θ every step, whatever g is |
#
# - **weight decay**: with g = 0, the step is still −η·λ·θ;
# - **momentum**: after a step with a real gradient, m is not 0, so the next step moves θ even
#   when its own g is 0;
# - **a KL term**: with β > 0 the loss has a second term, β·KL(π_θ‖π_ref), whose gradient does
#   not depend on A; once θ has left the reference, it pulls back (notebook 04).
#
# Each is measured below as ‖Δθ‖, the norm of the change of all weights in one step.

# %% [markdown]
# First the KL term at the first step. Its reference π_ref is the policy as it was before any
# update: we kept its log-probs of these completions (`ref_logps`, computed without gradient
# right after sampling). `grpo_loss` with A = 0, with and without β:

# %%
from grpo_core.loss import grpo_loss

zero_advantages = advantages_by_fn["says_banana_reward"]
beta = 0.04


def grpo_gradient_norm(advantages, beta):
    """Backward grpo_loss (on-policy, KL to ref_logps when beta > 0); return (grad norm, kl)."""
    model.zero_grad(set_to_none=False)
    token_logps = token_logprobs(model, input_ids, attention_mask, width)
    loss, metrics = grpo_loss(token_logps, None, advantages, rollout.completion_mask,
                              ref_token_logps=ref_logps, beta=beta)
    loss.backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()
    return norm, metrics.get("kl", 0.0)


norm, kl = grpo_gradient_norm(zero_advantages, beta)
print(f"before any step (policy = reference): A = 0, beta = {beta}:  gradient norm {norm:.3e}, "
      f"kl {kl:.2e}")

# %% [markdown]
# Now the optimizer. Snapshots of the weights and AdamW's state cost memory (three copies of
# the model in all), so they are freed at the end of the cell.

# %%
def snapshot():
    return [p.detach().clone() for p in params]


def change_since(before):
    changes = [(p.detach() - b).norm() for p, b in zip(params, before, strict=True)]
    return torch.linalg.vector_norm(torch.stack(changes)).item()


weight_norm = torch.linalg.vector_norm(torch.stack([p.detach().norm() for p in params])).item()
lr, decay = profile.learning_rate, 0.01

# (a) weight decay alone: a fresh AdamW, a zero gradient
optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=decay)
before = snapshot()
gradient_norm(zero_advantages)
optimizer.step()
print(f"(a) AdamW(weight_decay={decay}), A = 0:  |Δθ| = {change_since(before):.3e}   "
      f"(η·λ·|θ| = {lr * decay * weight_norm:.3e})")

# (b) momentum: one step with a real gradient, then a step with A = 0 and no weight decay
optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
gradient_norm(advantages_by_fn["length_reward"])
optimizer.step()
before = snapshot()
gradient_norm(zero_advantages)
optimizer.step()
print(f"(b) AdamW(weight_decay=0), A = 0, after one real step:  |Δθ| = {change_since(before):.3e}")

# (c) without momentum or decay (plain SGD), A = 0 moves nothing
sgd = torch.optim.SGD(params, lr=lr)
before = snapshot()
sgd.step()  # the gradients are still those of (b)'s second step: A = 0, all zero
print(f"(c) SGD, A = 0:  |Δθ| = {change_since(before)!r}")
del before, optimizer, sgd

# (d) the KL term, now that (a) and (b) have moved the policy away from the reference
norm, kl = grpo_gradient_norm(zero_advantages, beta)
print(f"(d) after these steps (the policy has left the reference): A = 0, beta = {beta}:  "
      f"gradient norm {norm:.3e}, kl {kl:.2e}")
model.zero_grad(set_to_none=True)

# %% [markdown]
# (a) moves θ by about η·λ·‖θ‖ (not exactly: a change of 2·10⁻⁷ of a weight is about one
# float32 rounding step, so each change is rounded); (b) moves θ by momentum alone, with no
# gradient at all in that step; (c) plain SGD does not move. At the first step the KL term is 0 with no gradient (policy = reference, where the k3
# estimator has its minimum). Once the policy has moved, a group with A = 0 still
# produces a gradient through β·KL: it pulls the policy back towards the reference, and that
# is all it does. No reward signal comes from such a group.
#
# The size of (d)'s KL is worth a word, because it is not what two steps of a training run
# look like: the β = 0.04 run of notebook 07 logs a far smaller KL per token over its first
# steps, and reaches values this large only after its completions have become much shorter. Two things
# make it large here.
# First, AdamW's first steps (eq. (3.3)) move *every* weight by about η, against the sign of
# its gradient, however small the gradient (m̂/√v̂ ≈ ±1): (b) moved all of the model's weights at
# once, a far larger change than SGD at the same η. Second, k3 = e^{−x} + x − 1 grows
# exponentially where the policy *lowered* a sampled token's probability (x < 0): one token
# whose log-prob fell by 5 nats contributes e⁵ − 6 ≈ 142, so the mean per token is dominated by
# a few such tokens. The number says the optimizer steps above moved the policy a long way on
# this rollout's tokens; read it as a value of the k3 estimator, not as a typical KL.

# %% [markdown]
# ## 5. What GRPO drops: the critic
#
# PPO estimates a baseline with a **value model** V_φ(x, y<t): a second network of about the
# policy's size, with a scalar head, trained alongside the policy. GRPO replaces it with the
# mean of the group, which needs no weights at all:
#
# $$\text{PPO: } A_t = r - V_\phi(x, y_{<t}) \quad(\text{or GAE}) \qquad\qquad \text{GRPO: } A_i = \frac{r_i - \operatorname{mean}(r)}{\operatorname{std}(r)+\varepsilon}$$
#
# | symbol | meaning |
# |---|---|
# | V_φ | the value model ("critic"), weights φ, usually initialised from the policy or the reward model |
# | y<t | the completion so far: PPO's critic predicts the reward at every token |
#
# We build the value model the usual way, the policy's backbone (the same config) with a
# scalar head instead of the vocabulary head, on PyTorch's `meta` device: shapes and parameter
# counts without allocating or downloading anything. Memory is counted as parameter bytes
# (numel × bytes per element), not measured from the process; training also needs a gradient
# and AdamW's two moments per weight (4 × the weights in float32).

# %%
from torch import nn
from transformers import AutoModel

with torch.device("meta"):
    backbone = AutoModel.from_config(model.config)
    value_head = nn.Linear(model.config.hidden_size, 1)


def count(*modules):
    return sum(p.numel() for m in modules for p in m.parameters())


bytes_per_weight = torch.empty(0, dtype=model.dtype).element_size()
policy_params = count(model)
value_params = count(backbone, value_head)
rows = {
    "policy (trained in both)": policy_params,
    "PPO value model: backbone + scalar head": value_params,
    "GRPO baseline: the group mean": 0,
}
table = pd.DataFrame({
    "parameters (M)": {name: n / 1e6 for name, n in rows.items()},
    f"weights ({model.dtype}, MB)": {name: n * bytes_per_weight / 1e6 for name, n in rows.items()},
    "training: + grads + AdamW (MB)": {name: 4 * n * bytes_per_weight / 1e6 for name, n in rows.items()},
}).round(1)
print(table.to_string())
print(f"\nthe value head itself: {count(value_head)} parameters; the group mean: "
      f"k = {profile.group_size} additions and one division per group")

# %% [markdown]
# Dropping the critic removes about as many weights as the policy has (the whole backbone,
# which with tied embeddings holds every weight of the policy, plus a scalar head of 577),
# their gradients and optimizer state, and the critic's own forward and backward passes every
# step. The price: GRPO needs k > 1 samples per prompt to have a baseline at all, and a group with no variation teaches nothing, as
# section 3 measured.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# **1.** Compute by hand the advantages of the group r = (1, 0, 0, 0) (N−1 std, ε = 10⁻⁴):
# a list of four numbers.

# %%
from grpo_core.exercises import check

my_advantages = ...  # your answer here

check("03.advantages_by_hand", my_advantages)

# %% [markdown]
# **2.** Find a group of four rewards that gives no learning signal although it is neither
# "too hard" (all 0) nor "too easy" (all 2). The check runs it through `group_summary`.

# %%
my_group = ...  # your answer here

check("03.silent_group", my_group)

# %% [markdown]
# **3.** Each attempt at a task passes (reward 1) with probability p and fails (reward 0)
# otherwise. What fraction of groups of k attempts gives no learning signal? Write it as a
# function; the cell after the check compares it with 20 000 simulated groups.

# %%
def my_no_signal_fraction(p, k):
    return ...  # your formula here


check("03.no_signal_fraction", my_no_signal_fraction)

# %%
torch.manual_seed(0)
for p, k_ in [(0.1, 4), (0.5, 4), (0.2, 8), (0.9, 2)]:
    rewards = torch.bernoulli(torch.full((20_000 * k_,), p))
    zero_groups = (group_advantages(rewards, k_).view(-1, k_) == 0).all(dim=1).float().mean().item()
    yours = my_no_signal_fraction(p, k_)
    print(f"p = {p}, k = {k_}: simulated {zero_groups:.3f}"
          + ("" if yours is ... else f", your formula {yours:.3f}"))

# %% [markdown]
# **4.** Eq. (3.1) for a whole batch: write `my_group_advantages(rewards, group_size)` for
# rewards `[B]` laid out group after group (B = groups × group_size), each group its own
# baseline, N−1 std, ε = 10⁻⁴. The check feeds it three groups, one of them all equal, and
# compares with `group_advantages`.

# %%
def my_group_advantages(rewards, group_size):
    return ...  # your code here: [B] -> [B]


check("03.group_advantages", my_group_advantages)

# %% [markdown]
# ## What this notebook showed
#
# - The group's mean and spread turn rewards into advantages; a group of equal rewards has every
#   advantage zero.
# - A zero advantage gives a zero gradient, yet weight decay, AdamW's momentum and a KL term can
#   still move the weights.
# - The group replaces PPO's critic: no value model to train or to hold in memory.
#
# **Next:** [04 · Two guardrails, two time scales: the clip and the KL penalty](04_guardrails.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
