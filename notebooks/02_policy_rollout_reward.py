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
# # 02 · Policy, rollout, reward: one GRPO round, line by line
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/02_policy_rollout_reward.ipynb)
#
# **Needs:** a laptop CPU (the memory goes to the model, its gradients and AdamW's two moments)
# or a Colab GPU. **Takes:** a few minutes in `cpu`: one GRPO round, then one per group of
# section 6. The start page lists its measured time and peak memory (`cpu` profile, with the
# machine it was measured on); `smoke` runs every cell in seconds. Not yet measured on a GPU.
#
# Lecture parts: "Reinforcement learning, in three functions", "One GRPO training round",
# "The whole update is a few lines".
#
# Reinforcement learning on a language model needs three functions:
#
# | function | in the lecture's words | here |
# |---|---|---|
# | **policy** | the model: maps a prompt to a distribution over completions; what you train | `model` and `token_logprobs` |
# | **rollout** | sampling completions from the policy: the model's own attempts at the task | `sample_group` |
# | **reward** | a function from a completion to a number; higher is better | `length_reward` |
#
# This notebook makes each one concrete on the real model, then runs one whole GRPO round with
# the lecture's few-line update, every line on its own with its shapes printed, and measures
# what the step did to each completion's log-probability.

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
                            "--notebook", "02_policy_rollout_reward"],
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
import time

import pandas as pd
import torch

from grpo_core.profiles import get_profile

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); group size k = {profile.group_size}, "
      f"{profile.max_new_tokens} new tokens, learning rate {profile.learning_rate}")
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 70)

# %% [markdown]
# ## 1. The policy is a distribution over completions
#
# A language model gives a distribution over the next token. Chained token after token, that
# is a distribution over whole completions: the probability of a completion y = (y₁, …, y_T)
# is the product of its tokens' probabilities, so its **log-probability is the sum** of its
# tokens' log-probabilities:
#
# $$\log\pi_\theta(y_t \mid x, y_{<t}) = \log\operatorname{softmax}\!\Bigl(\frac{z_{t-1}}{\tau}\Bigr)[y_t] \tag{2.1}$$
#
# $$m_t = \begin{cases}1 & t \le \text{the position of the first end-of-sequence token (or } T\text{ if none)}\\ 0 & \text{after it}\end{cases} \tag{2.2}$$
#
# $$\log\pi_\theta(y \mid x) = \sum_{t=1}^{T} m_t\,\log\pi_\theta(y_t \mid x, y_{<t}) \tag{2.3}$$
#
# | symbol | meaning |
# |---|---|
# | x | the prompt (after the chat template) |
# | y, y_t, y<t | the completion, its t-th token, the tokens before it |
# | θ | the model's weights; π_θ is the policy |
# | z_{t−1} | the model's logits at the position before token t (a vector of V numbers) |
# | τ | the sampling temperature; log-probs are taken at the same τ the samples were drawn at |
# | m_t | the completion mask: 1 on real completion tokens (the end token included), 0 on padding |
# | T | the completion's width in the batch (the longest completion) |
#
# Eq. (2.3) is the lecture's `seq_logp = (token_logp * comp_mask).sum(dim=1)`. The code:

# %%
from grpo_core.logprobs import completion_mask, sequence_logprob, token_logprobs

print(inspect.getsource(sequence_logprob))
print(inspect.getsource(completion_mask))

# %% [markdown]
# `token_logprobs(model, input_ids, attention_mask, logits_to_keep)` runs the model once on
# prompt + completion and applies eq. (2.1) to the last `logits_to_keep` tokens (its source is
# long because it saves memory; `inspect.getsource(token_logprobs)` shows it).
#
# ### By hand first
#
# Two completions in a batch of width 3. The first is three tokens long, the second stops
# after two (its end token, then one padding position whose value must not count).

# %%
# NBVAL_CHECK_OUTPUT
token_probs = torch.tensor([[0.5, 0.2, 0.9],
                            [0.8, 0.5, 0.01]])  # the last entry of row 2 is padding
toy_mask = torch.tensor([[1, 1, 1],
                         [1, 1, 0]])
toy_seq_logp = sequence_logprob(token_probs.log(), toy_mask)
print("sequence log-probs:", toy_seq_logp.numpy().round(4))
print("as probabilities:  ", toy_seq_logp.exp().numpy().round(4), "= 0.5·0.2·0.9 and 0.8·0.5")

# %% [markdown]
# ### On the real model
#
# Load the policy and sample the **same prompt** many times. Each sample is a draw from
# π_θ(· ∣ x): different completions, each with its own log-probability.

# %%
from grpo_core.models import load_policy
from grpo_core.rollout import chat_prompt, completion_logprobs, sample_group

start = time.perf_counter()
model, tokenizer = load_policy(profile)
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")

prompt = chat_prompt(tokenizer, "Describe the sea in a few words.")
n_samples = 2 * profile.group_size
start = time.perf_counter()
samples = sample_group(model, tokenizer, prompt, n_samples, max_new_tokens=profile.max_new_tokens,
                       temperature=profile.temperature, top_p=profile.top_p, seed=profile.seed)
print(f"{n_samples} samples of the same prompt in {time.perf_counter() - start:.1f} s; "
      f"{len(set(samples.texts))} different texts")


sample_token_logps = completion_logprobs(model, samples, profile.temperature)  # [n, C]
sample_seq_logps = sequence_logprob(sample_token_logps, samples.completion_mask)  # [n]
print(f"token log-probs {tuple(sample_token_logps.shape)} -> sequence log-probs "
      f"{tuple(sample_seq_logps.shape)}")
pd.DataFrame({
    "completion": [t.replace("\n", " ") for t in samples.texts],
    "tokens": samples.lengths.tolist(),
    "log π(y|x)": [round(v, 2) for v in sample_seq_logps.tolist()],
})

# %% [markdown]
# Eq. (2.3) on the first sample: its tokens one by one, and their sum.

# %%
row = 0
length = int(samples.lengths[row])
tokens = tokenizer.convert_ids_to_tokens(samples.completion_ids[row, :length])
per_token = pd.DataFrame({"token": tokens,
                          "log π(y_t | x, y<t)": sample_token_logps[row, :length].numpy().round(3)})
print(per_token.to_string())
by_hand = sample_token_logps[row, :length].sum().item()
print(f"sum of the {length} token log-probs: {by_hand:.3f};  sequence_logprob: "
      f"{sample_seq_logps[row].item():.3f};  probability of this exact completion: "
      f"{math.exp(by_hand):.2e}")

# %% [markdown]
# A completion of a few dozen tokens has a tiny probability, even a likely one: the policy
# spreads its mass over a huge number of possible completions. Training moves log π(y ∣ x) of
# chosen completions up or down; it never needs the whole distribution.

# %% [markdown]
# ## 2. The rollout is a group
#
# GRPO samples k completions **for the same prompt**: a group (notebook 03 shows why the
# group is the baseline). `sample_group` samples every group in one batched decoding loop
# of the course's own (`decode_until`; decoding greedily it writes exactly the tokens of
# Hugging Face's `generate`, which a test checks) and returns a `Rollout`, laid out group after group.

# %%
k = profile.group_size
start = time.perf_counter()
rollout = sample_group(model, tokenizer, prompt, k, max_new_tokens=profile.max_new_tokens,
                       temperature=profile.temperature, top_p=profile.top_p,
                       seed=profile.seed + 1)
print(f"one group of k = {k} in {time.perf_counter() - start:.1f} s")
for name in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "truncated"):
    print(f"rollout.{name:16} {tuple(getattr(rollout, name).shape)}")
print(f"rollout.texts            {len(rollout.texts)} strings")

# %% [markdown]
# ## 3. The reward is a plain function
#
# Experiment 1's reward (notebook 07): be close to 20 characters, r(y) = −|len(y) − 20|. It
# reads only the completion's text. It has TRL's signature, a list of completions in, a list
# of numbers out, so the same function serves our loop and TRL's `GRPOTrainer`.

# %%
from grpo_core.rewards import length_reward, make_length_reward

print(inspect.getsource(make_length_reward))

# %%
pd.DataFrame({"completion": [t.replace("\n", " ") for t in rollout.texts],
              "characters": [len(t) for t in rollout.texts],
              "reward": length_reward(rollout.texts)})

# %% [markdown]
# ## 4. One GRPO round: the whole update is a few lines
#
# The lecture's box "ONE STEP PER ROLLOUT":
#
# ```python
# rewards = torch.tensor([reward(r) for r in responses])
# advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
# seq_logp = (token_logp * comp_mask).sum(dim=1)
# loss = -(advantages * seq_logp).mean()
# ```
#
# $$\mathcal{L}(\theta) = -\frac{1}{k}\sum_{i=1}^{k} A_i\,\log\pi_\theta(y_i \mid x), \qquad
# \nabla_\theta\mathcal{L} = -\frac{1}{k}\sum_{i=1}^{k} A_i\,\nabla_\theta\log\pi_\theta(y_i\mid x) \tag{2.4}$$
#
# | symbol | meaning |
# |---|---|
# | rᵢ | the reward of completion i |
# | Aᵢ | its advantage, (rᵢ − mean r) / (std r + 10⁻⁴): better or worse than its group (notebook 03) |
# | log π_θ(yᵢ ∣ x) | eq. (2.3), with gradient |
# | k | the group size; here one prompt, so the batch is one group |
#
# Descending this loss moves θ along Σᵢ Aᵢ ∇ log π_θ(yᵢ ∣ x): a positive advantage raises the
# completion's log-probability, a negative one lowers it, and the size sets how hard. Now each
# line on the real model, in order.
#
# **Line 1: rewards.** `responses` are the group's texts; `reward(r)` scores one of them.

# %%
responses = rollout.texts


def reward(response):
    return length_reward([response])[0]


rewards = torch.tensor([reward(r) for r in responses])
print(f"rewards {tuple(rewards.shape)} {rewards.dtype}: {rewards.tolist()}")

# %% [markdown]
# **Line 2: advantages.** The group's mean is the baseline; the std sets the scale.

# %%
advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
print(f"mean {rewards.mean().item():.2f}, std {rewards.std().item():.2f}")
print(f"advantages {tuple(advantages.shape)}: {advantages.numpy().round(3)}")

# %% [markdown]
# **Before line 3: the per-token log-probs, with gradient.** The lecture's `token_logp` and
# `comp_mask`: run the model on prompt + completion (train mode, gradient on), eq. (2.1).

# %%
input_ids, attention_mask = rollout.input_ids, rollout.attention_mask  # prompt + completion
width = rollout.completion_ids.size(1)
print(f"input_ids {tuple(input_ids.shape)} = prompt {tuple(rollout.prompt_ids.shape)} "
      f"+ completion {tuple(rollout.completion_ids.shape)}")

model.train()  # SmolLM2 and Qwen3 have no dropout; train() only marks the intent
start = time.perf_counter()
token_logp = token_logprobs(model, input_ids, attention_mask, width,
                            temperature=profile.temperature)
comp_mask = rollout.completion_mask
print(f"token_logp {tuple(token_logp.shape)} {token_logp.dtype}, requires_grad "
      f"{token_logp.requires_grad}  (forward {time.perf_counter() - start:.1f} s)")
print(f"comp_mask  {tuple(comp_mask.shape)}, tokens per completion {comp_mask.sum(1).tolist()}")

# %% [markdown]
# **Line 3: the sequence log-probs**, eq. (2.3).

# %%
seq_logp = (token_logp * comp_mask).sum(dim=1)
print(f"seq_logp {tuple(seq_logp.shape)}: {seq_logp.detach().numpy().round(2)}")

# %% [markdown]
# **Line 4: the loss**, eq. (2.4). A scalar.

# %%
loss = -(advantages * seq_logp).mean()
print(f"loss {tuple(loss.shape)} = {loss.item():.4f}")

# %% [markdown]
# The same four lines in `grpo_core`, the functions the training loop calls. They give the
# same numbers (`group_advantages` returns exactly 0 for a group whose rewards are all
# equal, where the lecture's line could leave rounding noise):

# %%
from grpo_core.advantages import group_advantages
from grpo_core.loss import policy_gradient_loss

print(inspect.getsource(policy_gradient_loss))
assert torch.allclose(group_advantages(rewards, k), advantages)
assert torch.allclose(sequence_logprob(token_logp, comp_mask), seq_logp)
assert torch.allclose(policy_gradient_loss(token_logp, comp_mask, advantages), loss)
print("group_advantages, sequence_logprob and policy_gradient_loss agree with the four lines")

# %% [markdown]
# **The step.** `backward()` fills a gradient for every weight; then the plainest step,
# θ ← θ − η ∇_θ L (SGD, η = 10⁻⁴), so that the weights move exactly along the gradient of
# eq. (2.4). The training loop uses AdamW instead, and clips the gradient's norm to 1; more on
# that below.

# %%
initial_weights = {name: t.detach().clone() for name, t in model.state_dict().items()}
params = [p for p in model.parameters() if p.requires_grad]
step_size = 1e-4  # η
optimizer = torch.optim.SGD(params, lr=step_size)
start = time.perf_counter()
loss.backward()
grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])).item()
optimizer.step()
optimizer.zero_grad(set_to_none=True)
print(f"backward + SGD step in {time.perf_counter() - start:.1f} s; gradient norm "
      f"{grad_norm:.2f} over {sum(p.numel() for p in params) / 1e6:.1f} M weights; the "
      f"weights moved by {step_size * grad_norm:.4f} in all")

# %% [markdown]
# ## 5. What the step did
#
# The same completions, scored again by the updated policy: did the log-probability of each
# move the way its advantage said?

# %%
model.eval()
seq_logp_after = sequence_logprob(completion_logprobs(model, rollout, profile.temperature),
                                  comp_mask)  # [k]
change = seq_logp_after - seq_logp.detach()
moved = pd.DataFrame({
    "completion": [t.replace("\n", " ")[:50] for t in responses],
    "reward": rewards.tolist(),
    "advantage": advantages.tolist(),
    "log π before": seq_logp.tolist(),
    "log π after": seq_logp_after.tolist(),
    "change": change.tolist(),
}).round(2).sort_values("advantage", ascending=False)
print(moved.to_string())

best, worst = int(advantages.argmax()), int(advantages.argmin())
correlation = torch.corrcoef(torch.stack([advantages, change]))[0, 1].item()
print(f"\nbest completion (A = {advantages[best]:+.2f}): log π {change[best]:+.2f} -> "
      f"{'rose' if change[best] > 0 else 'did not rise'}")
print(f"worst completion (A = {advantages[worst]:+.2f}): log π {change[worst]:+.2f} -> "
      f"{'fell' if change[worst] < 0 else 'did not fall'}")
print(f"completions with A > 0 that rose: {int(((advantages > 0) & (change > 0)).sum())} of "
      f"{int((advantages > 0).sum())}; with A < 0 that fell: "
      f"{int(((advantages < 0) & (change < 0)).sum())} of {int((advantages < 0).sum())}")
print(f"correlation between advantage and change: {correlation:+.2f}")
print(f"advantage-weighted change, sum of A_i x change_i: {(advantages * change).sum().item():+.2f} "
      "(what the loss asks to raise)")

# %%
import matplotlib.pyplot as plt

from grpo_core.plots import DPI  # the course's figures: 120 dpi, readable unzoomed

fig, ax = plt.subplots(figsize=(5, 3.2), dpi=DPI)
ax.axhline(0, color="grey", lw=0.8)
ax.axvline(0, color="grey", lw=0.8)
ax.scatter(advantages.numpy(), change.numpy())
ax.set_xlabel("advantage A_i")
ax.set_ylabel("change of log π(y_i | x)")
ax.set_title("one GRPO step")
fig.tight_layout()
plt.show()

# %% [markdown]
# ### Token by token
#
# Each completion's term of the gradient pushes **every one of its tokens** the same way:
# eq. (2.4) is a sum over completions of Aᵢ times ∇ log π_θ(yᵢ ∣ x), and that log-prob is a sum
# over the completion's tokens. So after the step, look at each token's own change,
#
# $$\Delta_{i,t} = \log\pi_{\theta'}(y_{i,t}\mid x, y_{i,<t}) - \log\pi_{\theta}(y_{i,t}\mid x, y_{i,<t}),
# \qquad \sum_{t=1}^{|y_i|}\Delta_{i,t} = \text{the change of } \log\pi(y_i\mid x) \text{ in the table above}$$
#
# | symbol | meaning |
# |---|---|
# | θ, θ′ | the weights before and after the step |
# | y_{i,t} | token t of completion i; y_{i,<t} the tokens before it |
# | Δ_{i,t} | how much that token's log-probability moved, in nats (0 on padding) |
#
# `token_logprob_change` computes it from the two `[B, C]` tensors of per-token log-probs and
# the completion mask, and `token_change_html` colours each token: **green** where its
# log-probability rose, **red** where it fell, stronger for a larger change, with the
# completion's advantage at the left of its row.

# %%
from IPython.display import HTML, display

from grpo_core.widgets.tokens import (
    token_change_html,
    token_change_summary,
    token_logprob_change,
    token_texts,
)

print(inspect.getsource(token_logprob_change))

# %% [markdown]
# By hand first: two completions of three tokens, the second one token shorter (padding), with
# made-up log-probs before and after.

# %%
toy_before = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, -9.0]])
toy_after = torch.tensor([[-0.5, -1.5, -0.4], [-3.5, -1.2, 0.0]])
toy_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
toy_change = token_logprob_change(toy_before, toy_after, toy_mask)
print(f"change {tuple(toy_change.shape)}:\n{toy_change}")  # the padding's 9 nats are not counted
display(HTML(token_change_html([["Yes", ",", " sir"], ["No", "pe"]], toy_change, toy_mask,
                               [0.7, -0.7])))

# %% [markdown]
# Now the real group of section 4: its per-token log-probs before the step (`token_logp`, with
# gradient; the function detaches them) and after it, from the updated model.

# %%
token_logp_after = completion_logprobs(model, rollout, profile.temperature)  # [k, C], no gradient
token_change = token_logprob_change(token_logp, token_logp_after, comp_mask)
assert torch.allclose(token_change.sum(1), change, atol=1e-3)  # the sum is the table's change
order = advantages.argsort(descending=True).tolist()  # best completion first
texts = token_texts(tokenizer, rollout.completion_ids, comp_mask)
display(HTML(token_change_html([texts[i] for i in order], token_change[order], comp_mask[order],
                               advantages[order])))
for row in token_change_summary(token_change, comp_mask, advantages):
    if row.advantage != 0:
        print(f"A = {row.advantage:+.2f}: {row.with_advantage:2} of {row.tokens:2} tokens moved "
              f"the way A pushes ({row.share:.0%}), summed change {row.total_change:+.2f}")

# %% [markdown]
# Rows with A > 0 should be mostly green and rows with A < 0 mostly red: positive advantage
# raises the completion, negative lowers it, token by token. Not every row need follow its
# sign: compare each row's share of tokens that moved up with its advantage's sign, and look
# hardest at a row whose advantage is close to zero, which the other completions' terms can
# outweigh. Where a row goes against its sign, look at which tokens do: they may be opening
# words it shares with completions of the other sign, which those completions push the other
# way.

# %% [markdown]
# Positive advantage raises the completion's log-probability, negative lowers it, and the size
# sets how hard: that is what each completion's own term of the gradient does, and what the
# table shows for most rows. It is a tendency for the group, not a law for every row. The
# gradient of eq. (2.4) is a sum over all k completions, and completions that share tokens in
# the same context (the same opening words, say) move each other. A completion with a
# positive advantage that opens like a long, heavily penalised one can be dragged down with
# it: under the lecture's sum, which this step ran, a long completion has many tokens, so its
# term weighs more (under `loss_type="grpo"`, which the training runs use, every completion
# weighs the same: notebook 04, section 6). If a row with A > 0 fell in
# your run, compare its first words with those of the rows with A < 0. What the step
# guarantees, for a small enough η, is the last line: the advantage-weighted sum of the
# changes is positive, because that sum is the loss going down.
#
# The training loop uses AdamW, which changes the picture again: its first step moves every
# weight by about the learning rate, against the *sign* of its gradient, however small the
# gradient: a larger and blunter step. Try it: replace the SGD step with
# `torch.optim.AdamW(params, lr=profile.learning_rate)` and compare the changes.
#
# ## 6. Over several groups
#
# One group is one draw, so count instead. The same round (the same four lines, SGD with the
# same η) on several groups, each sampled for one of experiment 1's prompts and each time
# from the same starting weights, the ones before the step above. Per group: did the best
# completion's log-probability rise, did the worst one's fall, and was the advantage-weighted
# change positive?

# %%
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

group_prompts = [row["prompt"] for row in read_jsonl(EXP1_PROMPTS)[:6]]


def one_round(user_message, seed):
    """One GRPO round as above from ``initial_weights``: (advantages [k], change of log π [k])."""
    model.load_state_dict(initial_weights)
    group = sample_group(model, tokenizer, chat_prompt(tokenizer, user_message), k,
                         max_new_tokens=profile.max_new_tokens, temperature=profile.temperature,
                         top_p=profile.top_p, seed=seed)
    group_advantage = group_advantages(torch.tensor(length_reward(group.texts)), k)
    model.train()
    before = token_logprobs(model, group.input_ids, group.attention_mask,
                            group.completion_ids.size(1), temperature=profile.temperature)
    step = torch.optim.SGD(params, lr=step_size)
    policy_gradient_loss(before, group.completion_mask, group_advantage).backward()
    step.step()
    step.zero_grad(set_to_none=True)
    model.eval()
    after = sequence_logprob(completion_logprobs(model, group, profile.temperature),
                             group.completion_mask)
    return group_advantage, after - sequence_logprob(before.detach(), group.completion_mask)


rounds = []
start = time.perf_counter()
for i, user_message in enumerate(group_prompts):
    a, moved_by = one_round(user_message, seed=profile.seed + 10 + i)
    top, bottom = int(a.argmax()), int(a.argmin())
    rounds.append({"prompt": user_message[:40], "best A": a[top].item(),
                   "best change": moved_by[top].item(), "worst A": a[bottom].item(),
                   "worst change": moved_by[bottom].item(),
                   "corr(A, change)": torch.corrcoef(torch.stack([a, moved_by]))[0, 1].item(),
                   "sum A x change": (a * moved_by).sum().item()})
model.load_state_dict(initial_weights)
rounds = pd.DataFrame(rounds).round(2)
print(f"{len(rounds)} groups of k = {k} in {time.perf_counter() - start:.0f} s")
print(rounds.to_string())
print(f"\nbest completion rose in {int((rounds['best change'] > 0).sum())} of {len(rounds)} "
      f"groups; worst fell in {int((rounds['worst change'] < 0).sum())} of {len(rounds)}; "
      f"advantage-weighted change positive in {int((rounds['sum A x change'] > 0).sum())} "
      f"of {len(rounds)}")

# %% [markdown]
# Read the counts under the table, not a single row. A group can go against the grain: one
# step moves weights that every completion shares, so a completion's change also carries the
# gradients of its neighbours, and a best completion can fall a little while the group as a
# whole moves the right way. The advantage-weighted change, `sum A x change`, is the quantity
# the step is built to raise; the counts say in how many groups it did.
#
# That was one round: policy → rollout → reward → advantages → log-probs → loss → step.
# `grpo_core.loop.train` repeats it (notebook 07); notebook 04 adds what changes when a
# rollout is reused for several steps.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# **1.** Eq. (2.3) in code: write `my_sequence_logprob`, one log-probability per completion
# from the `[B, T]` token log-probs, counting only each completion's own tokens. The check runs
# it on a batch of unequal lengths against `sequence_logprob`.

# %%
from grpo_core.exercises import check


def my_sequence_logprob(token_logps, mask):
    return ...  # your code here: [B, T] -> [B]


check("02.sequence_logprob", my_sequence_logprob)

# %% [markdown]
# **2.** A group of four completions gets rewards (−3, −10, −1, −30). Write the lecture's
# advantage line for them. Which completion (0–3) is pushed up the hardest?

# %%
my_rewards = torch.tensor([-3.0, -10.0, -1.0, -30.0])
my_advantages = ...  # your line here
my_hardest_up = ...  # your answer here (0-3)

check("02.advantage_line", (my_advantages, my_hardest_up))

# %% [markdown]
# **3.** Why does a positive advantage raise log π? The loss is −(1/k) Σ Aᵢ sᵢ with
# sᵢ = log π(yᵢ ∣ x). Write ∂loss/∂sᵢ as a formula in Aᵢ and k; the check compares it with
# autograd. A gradient *descent* step moves sᵢ by −lr · ∂loss/∂sᵢ.

# %%
def my_dloss_ds(advantages, k):
    return ...  # your formula here


check("02.dloss_dseq_logp", my_dloss_ds)

# %% [markdown]
# ## What this notebook showed
#
# - The policy is a distribution over completions; a rollout samples a group of them for one
#   prompt.
# - One GRPO round, line by line: reward, advantages, log-probabilities, loss, one optimizer
#   step.
# - After the step, completions that beat their group's mean tend to become more likely and
#   the others less; the counts under section 6's table say how often, group by group, and
#   the advantage-weighted change is what the step is built to raise.
#
# **Next:** [03 · The group is the baseline](03_group_baseline.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
