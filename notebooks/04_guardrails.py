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
# # 04 · Two guardrails, two time scales: the clip and the KL penalty
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/grpo-from-scratch/grpo-course/blob/main/notebooks/04_guardrails.ipynb)
#
# **Needs:** a laptop CPU (the memory goes to the policy, its gradients, AdamW's two moments
# and, for one section, a reference model) or a Colab GPU. **Takes:** sections 1-2 (the clip by
# hand and its widget) run in seconds; the rest a few updates. The start page lists its
# measured time and peak memory (`cpu` profile, with the machine it was measured on); `smoke`
# runs every cell in seconds. Not yet measured on a GPU.
#
# Lecture parts: "Two guardrails, two time scales", "Reusing a rollout adds a clip".
#
# > ε bounds one reused batch. β bounds the whole run, and its default of 0.0 loads no
# > reference model at all.
#
# Generation is the slow part of a GRPO step, so a rollout is often reused for several updates.
# Each reuse moves the policy away from the one that sampled the rollout; the **clip** (ε) keeps
# that drift bounded within one batch. The **KL penalty** (β) keeps the policy near a frozen
# reference over the whole run. This notebook shows:
#
# 1. the ratio and the clipped surrogate, by hand and in a widget;
# 2. on the real model: at the first step the ratio is exactly 1 and the clip does nothing;
# 3. reusing one rollout for several updates: the ratio drifts and the clip starts to fire;
# 4. the KL penalty (k3 estimator) and β in a widget; β = 0 needs no reference model, with the
#    memory measured with and without one; with LoRA the reference is the base model with the
#    adapters off, so β > 0 needs no second copy either; what each KL estimator's gradient
#    really is (k1, k2, k3, ρ·k3: bias and variance, exact on a toy vocabulary and on the
#    real model's next-token distributions);
# 5. which loss: the lecture's sum over tokens against the per-completion mean every run uses,
#    and TRL's other `loss_type`s, token by token;
# 6. how long generation takes against the update, on this machine.

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
                            "--notebook", "04_guardrails"],
                           input="\n".join(sys.modules), text=True)
    if setup.returncode == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    setup.check_returncode()
    sys.path.insert(0, COURSE_DIR)
else:
    print("Not in Colab: nothing to install.")

# %%
import gc
import inspect
import time

import matplotlib.pyplot as plt
import pandas as pd
import torch

from grpo_core.profiles import get_profile

profile = get_profile()
print(f"profile: {profile.name} ({profile.reason}); group size k = {profile.group_size}, "
      f"{profile.max_new_tokens} new tokens")

# %% [markdown]
# ## 1. Reusing a rollout adds a clip
#
# The rollout was sampled by the policy with weights θ_old. After one update the policy is
# π_θ, and the completions are no longer its own samples. The **ratio** measures, token by
# token, how much more (or less) likely the current policy makes the sampled token:
#
# $$\rho_{i,t} = \frac{\pi_\theta(y_{i,t}\mid x_i, y_{i,<t})}{\pi_{\theta_\text{old}}(y_{i,t}\mid x_i, y_{i,<t})}
# = \exp\big(\log\pi_\theta - \log\pi_{\theta_\text{old}}\big) \tag{4.1}$$
#
# The clipped surrogate (PPO's, kept by GRPO) takes the smaller of the plain objective and the
# one with the ratio clipped to a band around 1; the loss is its negative:
#
# $$\ell_{i,t} = -\min\big(\rho_{i,t} A_i,\; \operatorname{clip}(\rho_{i,t},\,1-\varepsilon,\,1+\varepsilon_\text{high})\,A_i\big) \tag{4.2}$$
#
# | symbol | meaning |
# |---|---|
# | y_{i,t} | token t of completion i; x_i its prompt |
# | π_θ_old | the policy that sampled the rollout (its log-probs are stored: `old_token_logps`) |
# | π_θ | the policy being updated now |
# | ρ_{i,t} | the ratio; exactly 1 before the first update on this rollout |
# | A_i | the completion's advantage (notebook 03), the same for all its tokens |
# | ε, ε_high | the clip band [1−ε, 1+ε_high]; ε = 0.2, ε_high = ε unless set (DAPO uses 0.28) |
# | ℓ_{i,t} | the per-token loss, averaged over tokens and completions by `grpo_loss` |
#
# The lecture's second box, in `grpo_core`:

# %%
from grpo_core.loss import clipped_surrogate

print(inspect.getsource(clipped_surrogate))

# %% [markdown]
# ### By hand
#
# Seven tokens with ratios from 0.5 to 1.5, once with A = +1 and once with A = −1. Predict
# first: where does the gradient with respect to the ratio vanish? (`clipped_surrogate` is the
# loss; the objective is its negative.)

# %%
# NBVAL_CHECK_OUTPUT
ratios = torch.tensor([0.5, 0.7, 0.9, 1.0, 1.1, 1.3, 1.5], dtype=torch.float64, requires_grad=True)
rows = {}
for a in (1.0, -1.0):
    loss = clipped_surrogate(ratios.log()[None], torch.zeros(1, 7, dtype=torch.float64),
                             torch.tensor([a], dtype=torch.float64), epsilon=0.2)[0]
    (grad,) = torch.autograd.grad(-loss.sum(), ratios)
    rows[f"objective, A={a:+g}"] = (-loss).detach().numpy()
    rows[f"d objective / d ratio, A={a:+g}"] = grad.numpy()
print(pd.DataFrame(rows, index=[f"ratio {r:.1f}" for r in ratios.tolist()]).round(3).to_string())

# %% [markdown]
# With A > 0 the objective rises with the ratio until 1 + ε, then stays flat: once the policy
# has made a good completion 20 % more likely than the sampler did, this batch cannot push it
# further. With A < 0 the same happens below 1 − ε. On the other side nothing is clipped:
# a bad completion that became *more* likely (A < 0, ratio > 1) keeps its full gradient.
#
# ## 2. The clip widget
#
# Move ε, ε_high, the range of ratios drawn and the sign of A. The blue curve is what the
# update maximises; the shaded region is where its gradient is exactly zero.

# %%
from grpo_core.widgets import clip_curves, clip_widget

clip_widget()

# %% [markdown]
# The widget only draws what `clip_curves` computes (with `clipped_surrogate` and autograd):

# %%
# NBVAL_CHECK_OUTPUT
for sign in (+1.0, -1.0):
    curves = clip_curves(epsilon=0.2, epsilon_high=0.28, ratio_range=(0.5, 1.5), advantage=sign)
    regions = [(round(a, 3), round(b, 3)) for a, b in curves.zero_regions]
    print(f"A = {sign:+g}: band {tuple(round(x, 2) for x in curves.band)}, zero gradient on {regions}")

# %% [markdown]
# ## 3. On the real model: at the first step the ratio is exactly 1
#
# Sample a group, score it (the lecture's experiment-1 reward, −|characters − 20|), and compute
# the advantages.

# %%
from grpo_core.advantages import group_advantages
from grpo_core.logprobs import token_logprobs
from grpo_core.loss import grpo_loss
from grpo_core.models import load_policy
from grpo_core.rollout import chat_prompt, sample_group


def length_reward(completions, **columns):
    return [-abs(len(text) - 20) for text in completions]


start = time.perf_counter()
model, tokenizer = load_policy(profile)
print(f"loaded {profile.model_id} in {time.perf_counter() - start:.1f} s")
prompt = chat_prompt(tokenizer, "Describe the sea in a few words.")

start = time.perf_counter()
rollout = sample_group(model, tokenizer, prompt, profile.group_size,
                       max_new_tokens=profile.max_new_tokens, temperature=profile.temperature,
                       top_p=profile.top_p, seed=profile.seed)
generation_s = time.perf_counter() - start
rewards = torch.tensor(length_reward(rollout.texts), dtype=torch.float32)
advantages = group_advantages(rewards, rollout.group_size)
input_ids, attention_mask = rollout.input_ids, rollout.attention_mask  # prompt + completion
width, mask = rollout.completion_ids.size(1), rollout.completion_mask
print(f"sampled {rollout.group_size} completions in {generation_s:.1f} s; "
      f"rewards {rewards.tolist()}; advantages {[round(a, 2) for a in advantages.tolist()]}")

# %% [markdown]
# In a GRPO step that uses its rollout once (TRL's default, `num_iterations=1`), the old
# log-probs are the current ones: `old_token_logps=None` means ρ = exp(logp − logp.detach()),
# which is exactly 1 in value while its gradient is the policy gradient. We also compute the old
# log-probs the long way, in a separate pass without gradient, as a loop that reuses the rollout
# must.

# %%
model.train()
with torch.no_grad():
    old_logps = token_logprobs(model, input_ids, attention_mask, width)  # [B, C], stored

token_logps = token_logprobs(model, input_ids, attention_mask, width)  # [B, C], with grad
on_policy_ratio = torch.exp(token_logps - token_logps.detach())[mask.bool()]
stored_ratio = torch.exp(token_logps - old_logps)[mask.bool()]
loss, metrics = grpo_loss(token_logps, None, advantages, mask)
print(f"ratio with old = logp.detach():   min {on_policy_ratio.min().item()!r}  "
      f"max {on_policy_ratio.max().item()!r}")
print(f"ratio with stored old log-probs:  max |ratio - 1| = "
      f"{(stored_ratio - 1).abs().max().item():.2e}  (two forward passes, same weights)")
print(f"clip fractions: {metrics}")
assert on_policy_ratio.eq(1.0).all() and metrics["clip_ratio/region_mean"] == 0.0

# %% [markdown]
# The ratio is 1 for every token, so clip(ρ) = ρ and the min picks either term: at the first
# step the clip does nothing, and the loss is the lecture's one-step loss, its tokens averaged
# per completion (`loss_type="grpo"`) instead of summed (section 6).
#
# ## 4. Reuse one rollout for 4 updates
#
# Now keep the rollout and its stored `old_logps`, and take 4 AdamW steps on it. Each step
# moves θ, so the ratios move away from 1, and the clip starts to fire on the tokens that
# left the band on the side their advantage pushes.
#
# The learning rate here is 10⁻⁶ (the `gpu` profile's), smaller than the `cpu` profile's
# 2·10⁻⁵: AdamW's first steps move every weight by about η, against the sign of its gradient,
# so a larger rate moves the ratios further from 1 at every step. Try
# `reuse_lr = profile.learning_rate` and compare the clip fractions.

# %%
reuse_lr = 1e-6
optimizer = torch.optim.AdamW(model.parameters(), lr=reuse_lr, weight_decay=0.0)
history = []
ratios_by_step = []
for update in range(1, 5):
    start = time.perf_counter()
    token_logps = token_logprobs(model, input_ids, attention_mask, width)
    loss, metrics = grpo_loss(token_logps, old_logps, advantages, mask, epsilon=0.2)
    ratio = torch.exp(token_logps.detach() - old_logps)[mask.bool()]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    update_s = time.perf_counter() - start
    ratios_by_step.append(ratio)
    history.append({"update": update, "loss": loss.item(), "ratio min": ratio.min().item(),
                    "ratio max": ratio.max().item(),
                    "mean |ratio-1|": (ratio - 1).abs().mean().item(),
                    "clipped (low)": metrics["clip_ratio/low_mean"],
                    "clipped (high)": metrics["clip_ratio/high_mean"],
                    "clipped (all)": metrics["clip_ratio/region_mean"], "seconds": update_s})
table = pd.DataFrame(history).set_index("update")
print(table.round(4).to_string())
print(f"\nbefore update {len(history)}: token ratios from {table['ratio min'].iloc[-1]:.3f} to "
      f"{table['ratio max'].iloc[-1]:.3f}, though the clip band is [0.8, 1.2]")

# %% [markdown]
# Each row is measured *before* that update's step, on the weights left by the previous ones:
# update 1 sees ratio 1 everywhere (up to the rounding of two forward passes), later updates see
# the drift of the earlier ones. The token ratios, step by step (dashed: the clip band):

# %%
from matplotlib.ticker import MaxNLocator, NullLocator

from grpo_core.plots import DPI

figure, axis = plt.subplots(figsize=(7, 3.2), dpi=DPI)
for update, ratio in enumerate(ratios_by_step, start=1):
    jitter = update + 0.25 * (torch.rand(ratio.numel()) - 0.5)
    axis.scatter(jitter, ratio.numpy(), s=8, alpha=0.6)
for edge in (0.8, 1.2):
    axis.axhline(edge, color="#999", ls="--", lw=1)
axis.set_yscale("log")
axis.yaxis.set_major_locator(MaxNLocator(7))  # 0.8, 1.0, 1.2 ... rather than only "10^0"
axis.yaxis.set_minor_locator(NullLocator())
axis.yaxis.set_major_formatter("{x:.2g}")
axis.set_xticks(range(1, 5))
axis.set_xlabel("update on the same rollout")
axis.set_ylabel("token ratio ρ (log scale)")
figure.tight_layout()
plt.show()

# %% [markdown]
# The clip bounds how hard one reused batch can push: a token whose ratio has left the band on
# the side its advantage pushes gets no more gradient from this batch. It removes that
# gradient; it does not hold the ratio inside the band. Read the table's ratio min and max,
# and the line under it: after a few updates they lie outside the band of ε = 0.2.
# A token's probability keeps moving after its own gradient is cut, because every other
# token's gradient moves the same shared weights, and AdamW's momentum carries each step into
# the next. Nor does the clip do anything about where the policy goes over many batches: that
# is the KL penalty's job.
#
# ## 5. The KL penalty and β
#
# GRPO can add a penalty that keeps π_θ close to a frozen **reference** policy π_ref (the model
# before training). TRL estimates the KL per token with the k3 estimator:
#
# $$\mathrm{k3}_{i,t} = \frac{\pi_\text{ref}(y_{i,t}\mid\cdot)}{\pi_\theta(y_{i,t}\mid\cdot)} - \log\frac{\pi_\text{ref}(y_{i,t}\mid\cdot)}{\pi_\theta(y_{i,t}\mid\cdot)} - 1 = e^{-x} + x - 1,\quad x = \log\pi_\theta - \log\pi_\text{ref} \tag{4.3}$$
#
# and the whole per-token loss is the clipped surrogate plus β times it:
#
# $$\ell_{i,t} = -\min\big(\rho_{i,t} A_i,\ \operatorname{clip}(\rho_{i,t})A_i\big) + \beta\,\rho_{i,t}\,\mathrm{k3}_{i,t} \tag{4.4}$$
#
# | symbol | meaning |
# |---|---|
# | π_ref | the frozen reference model: a second copy of the weights, never updated |
# | x | the log-ratio of policy to reference for the sampled token |
# | k1 = x | the plain estimator: unbiased, but negative for some tokens |
# | k3 | unbiased too, and never negative; 0 only where π_θ = π_ref |
# | β | the KL weight; TRL's default is 0.0 |
# | ρ·k3 | TRL multiplies k3 by the ratio (`use_bias_correction_kl=True`, its default); see below |
#
# Then `grpo_loss` aggregates ℓ over tokens and completions (`loss_type`, as TRL does).
#
# Two facts about k3 that are easy to mix up. Its **value** is an unbiased estimate of the KL:
# averaged over tokens sampled from π_θ, E[k3] = KL(π_θ ‖ π_ref). Its **gradient**, used as a
# loss, is not the KL's gradient: on sampled tokens ∇k3 = (1 − e^{−x}) ∇ log π_θ, whose mean is
# the gradient of the *other* KL, KL(π_ref ‖ π_θ). Multiplying by ρ = exp(log π_θ − log π_old)
# fixes that, and it matters **on-policy too**: there ρ = 1 in value, so the KL's value is
# unchanged, but ρ is differentiable (∇ρ = ∇ log π_θ), so ∇(ρ·k3) = (1 − e^{−x} + k3) ∇ log π_θ
# = x ∇ log π_θ, whose mean is exactly ∇ KL(π_θ ‖ π_ref) (TRL's `use_bias_correction_kl`
# docstring; DeepSeek-V3.2). On a toy distribution of 5 tokens, exact expectations instead of
# samples:

# %%
from grpo_core.loss import kl_k3

toy_logits = torch.tensor([1.0, 0.2, -0.5, 2.0, 0.0], requires_grad=True)
toy_ref = torch.log_softmax(torch.tensor([0.5, 0.5, 0.0, 1.0, 0.3]), dim=-1)


def expected_over_samples(per_token):
    """E_{y ~ pi}[per_token(log pi)(y)] and its gradient as a loss: the sampling weights are constants."""
    logp = torch.log_softmax(toy_logits, dim=-1)
    value = (logp.exp().detach() * per_token(logp)).sum()
    return value.item(), torch.autograd.grad(value, toy_logits)[0]


def k3_of(logp):
    return kl_k3(logp[None], toy_ref[None])[0]


def rho_k3_of(logp):
    return torch.exp(logp - logp.detach()) * k3_of(logp)  # rho = 1 in value


logp = torch.log_softmax(toy_logits, dim=-1)
reverse_kl = (logp.exp() * (logp - toy_ref)).sum()  # KL(pi || ref)
forward_kl = (toy_ref.exp() * (toy_ref - logp)).sum()  # KL(ref || pi)
reverse_grad = torch.autograd.grad(reverse_kl, toy_logits, retain_graph=True)[0]
forward_grad = torch.autograd.grad(forward_kl, toy_logits)[0]
k3_value, k3_grad = expected_over_samples(k3_of)
rho_value, rho_grad = expected_over_samples(rho_k3_of)
print(f"KL(pi || ref) = {reverse_kl.item():.4f};  E[k3] = {k3_value:.4f};  E[rho k3] = {rho_value:.4f}")
print(f"grad KL(pi || ref) {reverse_grad.numpy().round(4)}")
print(f"E[grad rho k3]     {rho_grad.numpy().round(4)}  <- the same")
print(f"E[grad k3]         {k3_grad.numpy().round(4)}")
print(f"grad KL(ref || pi) {forward_grad.numpy().round(4)}  <- what k3 alone follows")
assert abs(k3_value - reverse_kl.item()) < 1e-6 and torch.allclose(rho_grad, reverse_grad, atol=1e-6)
assert torch.allclose(k3_grad, forward_grad, atol=1e-6)

# %% [markdown]
# The estimator itself, in `grpo_core`, and a few tokens by hand:

# %%
print(inspect.getsource(kl_k3))
print(inspect.getsource(grpo_loss))

# %% [markdown]
# By hand: a token whose probability went from 0.5 under the reference to 0.6 under the policy,
# and one that went down from 0.5 to 0.3.

# %%
# NBVAL_CHECK_OUTPUT
policy = torch.tensor([[0.6, 0.3]]).log()
reference = torch.tensor([[0.5, 0.5]]).log()
x = policy - reference
print(f"x (k1) = {x.numpy().round(4)}, k3 = {kl_k3(policy, reference).numpy().round(4)}")

# %% [markdown]
# Move β and the range of log-ratios: k1 is a straight line (it can be negative), k3 is a bowl
# with its bottom at 0 where the policy agrees with the reference. Near 0, k3 ≈ x²/2.

# %%
from grpo_core.widgets import kl_curves, kl_widget

kl_widget(beta=0.04)

# %% [markdown]
# ### β = 0 loads no reference model
#
# With β = 0 the KL term is multiplied by nothing: `grpo_loss` needs no reference log-probs,
# and no reference model is loaded at all. With β > 0 it is an error to forget them:

# %%
with torch.no_grad():  # values only: no backward in this cell
    token_logps = token_logprobs(model, input_ids, attention_mask, width)
loss_without_ref, _ = grpo_loss(token_logps, old_logps, advantages, mask, beta=0.0)
print(f"beta = 0, no reference: loss {loss_without_ref.item():+.4f}")
try:
    grpo_loss(token_logps, old_logps, advantages, mask, beta=0.04)
except ValueError as error:
    print(f"beta = 0.04, no reference: ValueError: {error}")
del token_logps, loss_without_ref

# %% [markdown]
# What the reference costs, measured two ways: the bytes of its parameters (exact), and how
# much the resident memory of this process (RSS, from `psutil`) grows (what the operating
# system sees; noisy, and lazy: the weights are read from the cached file on first use, so the
# growth shows after the reference's first forward pass rather than right after loading).

# %%
import psutil

process = psutil.Process()
gc.collect()
rss_before = process.memory_info().rss
start = time.perf_counter()
reference_model, _ = load_policy(profile)
reference_model.requires_grad_(False)
load_s = time.perf_counter() - start
rss_loaded = process.memory_info().rss
reference_bytes = sum(p.numel() * p.element_size() for p in reference_model.parameters())

with torch.no_grad():  # the reference's log-probs (every weight is read), and the policy's
    ref_logps = token_logprobs(reference_model, input_ids, attention_mask, width)
    token_logps = token_logprobs(model, input_ids, attention_mask, width)
gc.collect()
rss_after = process.memory_info().rss
loss_kl, metrics_kl = grpo_loss(token_logps, old_logps, advantages, mask,
                                ref_token_logps=ref_logps, beta=0.04)

print("beta = 0:    no reference model: +0 MB, no extra forward pass")
print(f"beta = 0.04: reference model loaded in {load_s:.1f} s: parameters "
      f"{reference_bytes / 1e6:.0f} MB; process RSS +{(rss_loaded - rss_before) / 1e6:.0f} MB "
      f"right after loading, +{(rss_after - rss_before) / 1e6:.0f} MB after its first "
      "forward pass")
print(f"after 4 updates on one rollout, the KL to the reference is {metrics_kl['kl']:.4f} "
      f"per token; with beta = 0.04 the loss is {loss_kl.item():+.4f}")
del loss_kl  # the reference model and both log-probs serve the gradient lab below

# %% [markdown]
# On the GPU profile the reference would be another copy of Qwen3-0.6B (our loop copies the
# policy: about 2.4 GB of GPU memory with float32 master weights, 1.2 GB if kept in bf16) plus
# one extra forward pass per step. With β = 0, TRL's default, neither is paid, and the clip
# (within a batch) and the learning rate are what keep the policy near where it started.

# %% [markdown]
# ### Which estimator's gradient? k1, k2, k3 and ρ·k3, measured exactly
#
# The toy above compared two expectations. A training step has neither: it takes the gradient
# of the estimator on the tokens it sampled. On one next-token distribution every expectation
# is a sum over the vocabulary, so each estimator's **one-token gradient** $g$ (with respect
# to the logits) has an exact mean and spread, and a step that averages $n$ sampled tokens has
# the mean squared error
#
# $$ \mathbb{E}\,\lVert \bar g_n - \nabla \mathrm{KL}(\pi_\theta \Vert \pi_\text{ref}) \rVert^2
#    = \underbrace{\lVert \mathbb{E}[g] - \nabla \mathrm{KL} \rVert^2}_{\text{bias}^2}
#    + \frac{1}{n}\,\underbrace{\mathbb{E}\,\lVert g - \mathbb{E}[g] \rVert^2}_{\text{variance}}
#    \tag{4.5}$$
#
# Every estimator's gradient is a coefficient $c(y)$ times $\nabla \log \pi_\theta(y)$; with
# $d = \log \pi_\text{ref}(y) - \log \pi_\theta(y)$ (that is, $-x$):
#
# | estimator | value | $c(y)$ | $\mathbb{E}[g]$ is the gradient of |
# |---|---|---|---|
# | k1 | $-d$ | $1$ | nothing: it averages to zero |
# | k2 | $d^2/2$ | $-d$ | $\mathrm{KL}(\pi_\theta \Vert \pi_\text{ref})$ |
# | k3 | $e^d - 1 - d$ | $1 - e^d$ | $\mathrm{KL}(\pi_\text{ref} \Vert \pi_\theta)$, the other one |
# | ρ·k3 | $\rho\,(e^d - 1 - d)$, ρ = 1 in value | $-d$ (on-policy) | $\mathrm{KL}(\pi_\theta \Vert \pi_\text{ref})$ |
#
# | symbol | meaning |
# |---|---|
# | $g$ | the gradient, with respect to the logits, of the estimator's loss at one sampled token $y \sim \pi_\theta$ |
# | $\bar g_n$ | the mean of $n$ such gradients: what a step that samples $n$ tokens uses |
# | bias, variance | $\lVert \mathbb{E}[g] - \nabla\mathrm{KL} \rVert$ and the trace of $g$'s covariance: exact sums over the vocabulary (`gradient_moments`) |
#
# k2 and ρ·k3 have the same gradient token by token. The course's loss, like TRL's with its
# default `use_bias_correction_kl`, uses ρ·k3: the value of k3 (never negative, unbiased) with
# k2's gradient, the right one. The code, in closed form:

# %%
from IPython.display import display

from grpo_core.kl_gradients import (ESTIMATORS, exact_gradients, exact_kl, gradient_moments,
                                    policy_pair, sampled_gradient)
from grpo_core.tables import show_table
from grpo_core.widgets import kl_gradient_errors, kl_gradient_widget

print(inspect.getsource(gradient_moments))

# %% [markdown]
# A toy policy over a small vocabulary at three distances from its reference: each
# estimator's gradient bias (as a share of $\lVert\nabla\mathrm{KL}\rVert$, whatever $n$ is)
# and its root-mean-square error at 16 sampled tokens, (4.5). Then a check of the closed form
# against the way a step computes a gradient: many one-token gradients (`sampled_gradient`),
# their mean's distance from $\nabla\mathrm{KL}$ and their spread.

# %%
TOY_VOCAB, TOY_TOKENS = 50, 16
rows = []
for distance in (0.2, 1.0, 3.0):
    errors = kl_gradient_errors(distance=distance, samples=TOY_TOKENS, vocab=TOY_VOCAB)
    for name in ESTIMATORS:
        rows.append({"distance": distance, "KL": round(errors.kl, 4), "estimator": name,
                     "gradient bias": f"{errors.relative_bias[name]:.1%}",
                     f"error at {TOY_TOKENS} tokens": f"{errors.relative_error[name]:.1%}",
                     "value bias": f"{errors.value_bias[name]:+.2g}"})
display(show_table(pd.DataFrame(rows), index=False))
print(errors.message)

logits, ref_logits = policy_pair(TOY_VOCAB, 1.0)
exact = exact_gradients(logits, ref_logits)["kl"]
draws, generator = 4000, torch.Generator().manual_seed(0)
for name in ESTIMATORS:
    sampled = torch.stack([sampled_gradient(name, logits, ref_logits, 1, generator)
                           for _ in range(draws)])
    moments = gradient_moments(name, logits, ref_logits)
    noise = (moments["variance"] / draws) ** 0.5  # the sampled mean's own error, by (4.5)
    print(f"{name:9s} bias: closed form {moments['bias']:.4f}, from {draws} draws "
          f"{(sampled.mean(0) - exact).norm():.4f} (their noise about {noise:.4f}); "
          f"variance: closed form {moments['variance']:.4f}, from the draws "
          f"{sampled.var(0).sum():.4f}")

# %% [markdown]
# Move the distance between the policies and the number of sampled tokens. k1's error stays
# where it starts (its mean is zero); k3's falls to its bias and stays there; k2's and ρ·k3's
# fall as $1/\sqrt{n}$, on one line.

# %%
kl_gradient_widget(distance=1.0, samples=16).widget

# %% [markdown]
# **On the real model.** The policy after section 4's updates against the reference model, at
# the first tokens of the first completions of the rollout: the same exact sums, over the whole
# vocabulary of the next-token distributions the model really produced.

# %%
ROWS, FIRST_TOKENS = 4, 8
start = input_ids.shape[1] - width - 1  # logits at column t give token t + 1's distribution
with torch.no_grad():
    policy_logits, reference_logits = (
        net(input_ids=input_ids[:ROWS], attention_mask=attention_mask[:ROWS]
            ).logits[:, start:-1].float() for net in (model, reference_model))
places = [(row, int(col)) for row in range(min(ROWS, mask.shape[0]))
          for col in mask[row].nonzero().flatten()[:FIRST_TOKENS]]
scale = [exact_gradients(policy_logits[row, col], reference_logits[row, col])["kl"].norm()
         for row, col in places]
real_rows, moments_at = [], {}
for name in ESTIMATORS:
    found = [gradient_moments(name, policy_logits[row, col], reference_logits[row, col])
             for row, col in places]
    moments_at[name] = found
    at_n = sorted(((m["bias"] ** 2 + m["variance"] / TOY_TOKENS) ** 0.5 / s).item()
                  for m, s in zip(found, scale, strict=True))
    real_rows.append({"estimator": name,
                      "gradient bias, mean": f"{sum(m['relative_bias'] for m in found) / len(found):.1%}",
                      f"error at {TOY_TOKENS} tokens, median": f"{at_n[len(at_n) // 2]:.1%}"})
kl_real = [exact_kl(policy_logits[row, col].double(), reference_logits[row, col].double()).item()
           for row, col in places]
print(f"{len(places)} next-token distributions; KL(policy || reference) per position: "
      f"median {sorted(kl_real)[len(kl_real) // 2]:.2e}, largest {max(kl_real):.2e}")
display(show_table(pd.DataFrame(real_rows), index=False))
# k3's bias does not shrink with more tokens; k2's error does: past n* = (v2 - v3) / b3^2
# tokens, by (4.5), k2's unbiased gradient has the smaller error at that position
crossover = sorted(max(0.0, (k2["variance"] - k3["variance"]) / k3["bias"] ** 2)
                   for k2, k3 in zip(moments_at["k2"], moments_at["k3"], strict=True)
                   if k3["bias"] > 0)
below = sum(n < TOY_TOKENS for n in crossover)
print(f"k2's error is below k3's from n* tokens on: median n* {crossover[len(crossover) // 2]:.0f} "
      f"over these positions ({below} of {len(crossover)} below {TOY_TOKENS}); close to the "
      "reference k3's smaller spread can outweigh its bias for a few tokens, never for many")
del reference_model, ref_logps, token_logps, policy_logits, reference_logits
_ = gc.collect()

# %% [markdown]
# ### With LoRA, β > 0 needs no second model
#
# LoRA (Hu et al., 2021; the `peft` library) freezes every weight W and trains a small
# low-rank update beside it: a linear layer computes W x + (α / r) B A x, with A of shape
# r × d_in and B of shape d_out × r, and B starts at zero. Switch the adapters off and the layer
# is W x again: **the base model is the reference**, in the same weights, at no memory cost.
# That is what `TrainConfig(lora_rank=16)` (`python -m grpo_core ... --lora`) and TRL's
# `peft_config` do. Below: wrap a fresh copy of the model, update only the adapters twice on
# the rollout above with β = 0.04, and compare the log-probs with the adapters off to the
# base model's.

# %%
from grpo_core.lora import adapter_disabled, add_lora, trainable_parameters

base, _ = load_policy(profile)  # the policy before training: what the reference must be
with torch.no_grad():
    base_logps = token_logprobs(base, input_ids, attention_mask, width)
policy = add_lora(base, rank=16)  # adapters on every linear layer of the blocks; W frozen
trainable, total = trainable_parameters(policy)
adapter_bytes = sum(p.numel() * p.element_size() for p in policy.parameters() if p.requires_grad)
lora_optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=2e-4)
policy.train()
kl_at_start = []
for _ in range(2):
    with torch.no_grad(), adapter_disabled(policy):  # the reference: the same model, adapters off
        lora_ref = token_logprobs(policy, input_ids, attention_mask, width)
    lora_logps = token_logprobs(policy, input_ids, attention_mask, width)
    lora_loss, lora_metrics = grpo_loss(lora_logps, None, advantages, mask,
                                        ref_token_logps=lora_ref, beta=0.04)
    kl_at_start.append(lora_metrics["kl"])
    lora_optimizer.zero_grad()
    lora_loss.backward()
    lora_optimizer.step()
policy.eval()
with torch.no_grad():
    moved = token_logprobs(policy, input_ids, attention_mask, width)
    with adapter_disabled(policy):
        lora_ref = token_logprobs(policy, input_ids, attention_mask, width)
print(f"LoRA rank 16: {trainable:,} of {total:,} parameters train "
      f"({100 * trainable / total:.2f} %); the adapters take {adapter_bytes / 1e6:.1f} MB, "
      f"a reference copy would take {reference_bytes / 1e6:.0f} MB")
print(f"adapters off vs the base model: largest log-prob difference "
      f"{(lora_ref - base_logps).abs().max().item():.1e} nats")
print(f"adapters on, after 2 updates: largest log-prob change "
      f"{(moved - base_logps).abs().max().item():.2f} nats; KL to the reference at the start of "
      f"each update: {kl_at_start[0]:.4f}, {kl_at_start[1]:.4f} per token")
del base, policy, lora_optimizer, lora_ref, lora_logps, lora_loss, moved, base_logps
_ = gc.collect()

# %% [markdown]
# ## 6. Which loss? The lecture's sum, and the mean every run uses
#
# Eq. (4.4) gives a loss ℓ per token; how the tokens add up into one number decides how hard
# each completion is pushed. The lecture's box (notebook 02, section 4) sums each completion's
# token log-probs (eq. (2.3)) and averages over completions, so every token of every
# completion gets the same push per unit of advantage, 1/k: a completion counts in proportion
# to its number of tokens. That is what notebook 02's step ran (`policy_gradient_loss`), and
# the sense in which a long completion "weighs more" there. The training loop (notebooks 07–11)
# and TRL instead reduce the per-token loss in one of four ways, `loss_type`. Each is a
# weighted sum over tokens; on policy with β = 0 its gradient with respect to one token's
# log-prob is minus the advantage times that token's weight:
#
# $$\mathcal{L} = -\sum_{i=1}^{B}\sum_{t=1}^{|o_i|} w_{i,t}\,A_i\,\log\pi_\theta(o_{i,t}\mid x, o_{i,<t}),
# \qquad \frac{\partial\mathcal{L}}{\partial\log\pi_\theta(o_{i,t}\mid\cdot)} = -A_i\,w_{i,t} \tag{4.5}$$
#
# | `loss_type` | wᵢ,ₜ (one token) | Σₜ wᵢ,ₜ (one completion) | where |
# |---|---|---|---|
# | `sum` | 1/B | \|oᵢ\|/B | the lecture's box; notebook 02's step and notebook 06's toy |
# | `grpo` | 1/(B·\|oᵢ\|) | 1/B | **every training run of the course** (`TrainConfig`'s default); the GRPO paper's 1/G Σᵢ 1/\|oᵢ\| Σₜ |
# | `bnpo` | 1/N | \|oᵢ\|/N | token mean over this micro-batch |
# | `dr_grpo` | 1/(B·L) | \|oᵢ\|/(B·L) | Dr. GRPO (Liu et al., 2025) |
# | `dapo` | 1/N_gen | \|oᵢ\|/N_gen | DAPO (Yu et al., 2025); **TRL 1.16's default** |
#
# | symbol | meaning |
# |---|---|
# | B | completions in the batch (here k, one group) |
# | \|oᵢ\| | completion i's number of tokens (its mask's sum) |
# | N, N_gen | completion tokens in this micro-batch, in the whole generation batch (equal here) |
# | L | `max_completion_length`, the token budget |
#
# Only two shapes are really different. The lecture's sum is Dr. GRPO's loss times the
# constant L, and `bnpo`/`dapo` are the sum times the constant B/N of one batch: all four push
# every token equally. `grpo` divides by each completion's own length, so a token of a short
# completion is pushed |o_long|/|o_short| times harder than a token of a long one (the cell
# below prints that factor for section 3's group). Every run uses `grpo` because it is the
# objective of the GRPO paper (DeepSeekMath, Shao et al., 2024, eq. (3)) that the lecture's
# name refers to, and TRL's `loss_type="grpo"` computes it exactly (notebook 10 compares the
# two on one batch; `tests/test_trl_parity.py` checks them to 10⁻⁶). Its known cost, which
# Dr. GRPO and TRL's own documentation point out: a long wrong completion is penalised less
# per token, and a short right one is rewarded more, a bias toward length that `dr_grpo` and
# `dapo` remove. `token_weights` gives wᵢ,ₜ for each:

# %%
from grpo_core.loss import WEIGHTINGS, token_weights

print(inspect.getsource(token_weights))

# %% [markdown]
# On the real group of section 3 (its mask and advantages), the weights, checked against
# autograd through `grpo_loss` itself for the four `loss_type`s (`bnpo` and `dapo` coincide
# here: one micro-batch is the whole generation batch):

# %%
k = rollout.group_size
lengths_i = mask.sum(dim=1)
weights = {kind: token_weights(mask, kind) for kind in WEIGHTINGS}
for kind in WEIGHTINGS[1:]:
    probe = old_logps.detach().clone().requires_grad_(True)
    grpo_loss(probe, None, advantages, mask, loss_type=kind)[0].backward()
    assert torch.allclose(probe.grad, -advantages[:, None] * weights[kind], atol=1e-7), kind
print("d loss / d log pi(token) = -A_i * w_it for", ", ".join(WEIGHTINGS[1:]))

push = pd.DataFrame({"tokens |o_i|": lengths_i.tolist(), "advantage": advantages.tolist()})
for kind in WEIGHTINGS:
    # how hard one completion is pushed: its advantage times its total weight, x B for scale
    push[f"{kind}: completion"] = (advantages * weights[kind].sum(dim=1) * k).tolist()
print(push.round(3).to_string())
print(f"\nlongest / shortest completion here: {int(lengths_i.max())} / {int(lengths_i.min())} "
      f"tokens: under grpo a token of the shortest is pushed "
      f"{(lengths_i.max() / lengths_i.min().clamp(min=1)).item():.1f}x harder than one of the "
      "longest; under the other four, equally hard")

# %%
fig, (per_token, per_completion) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=DPI)
order = torch.argsort(lengths_i)
for kind, marker in zip(WEIGHTINGS, "os^vD", strict=True):
    token_weight = (weights[kind].sum(1) / lengths_i.clamp(min=1) * k)[order]
    per_token.plot(lengths_i[order].numpy(), token_weight.numpy(), marker=marker, label=kind)
    per_completion.plot(lengths_i[order].numpy(), (weights[kind].sum(1) * k)[order].numpy(),
                        marker=marker, label=kind)
per_token.set(xlabel="completion length |o_i| (tokens)", ylabel="B x w_it",
              title="push on each token, per unit of A", yscale="log")
per_completion.set(xlabel="completion length |o_i| (tokens)", ylabel="B x sum_t w_it",
                   title="push on each completion, per unit of A", yscale="log")
per_completion.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Generation is the slow part
#
# The lecture says rollouts get reused because generation is the slow part. On this machine,
# one fresh rollout against one update (forward + backward + AdamW step) on it:

# %%
start = time.perf_counter()
fresh = sample_group(model, tokenizer, prompt, profile.group_size,
                     max_new_tokens=profile.max_new_tokens, temperature=profile.temperature,
                     top_p=profile.top_p, seed=profile.seed + 1)
generate_s = time.perf_counter() - start

fresh_advantages = group_advantages(torch.tensor(length_reward(fresh.texts), dtype=torch.float32),
                                    fresh.group_size)
start = time.perf_counter()
token_logps = token_logprobs(model, fresh.input_ids, fresh.attention_mask,
                             fresh.completion_ids.size(1))
loss, _ = grpo_loss(token_logps, None, fresh_advantages, fresh.completion_mask)
optimizer.zero_grad()
loss.backward()
optimizer.step()
update_s = time.perf_counter() - start
total = generate_s + update_s
print(f"device {model.device}, {fresh.group_size} completions, "
      f"{fresh.completion_ids.size(1)} new tokens at most, {int(fresh.completion_mask.sum())} in all")
print(f"generation {generate_s:6.1f} s  ({generate_s / total:.0%})")
print(f"update     {update_s:6.1f} s  ({update_s / total:.0%})")

# %% [markdown]
# The training loop does not sample from the model itself on a CPU: it samples from a copy
# whose linear layers are **packed**. Each decoding step multiplies a handful of rows by every
# weight matrix, and with so few rows the weights' layout in memory matters as much as the
# arithmetic; oneDNN, the library under torch on a CPU, can rearrange each matrix once into
# the blocked layout its kernel reads (`grpo_core.packed`). The copy is frozen between two
# updates, so the loop packs once per step and then decodes every token with it (in bfloat16
# where the CPU has bfloat16 instructions, float32 elsewhere).
#
# In float32, a Llama copy (SmolLM2 is one) also decodes through a step written out by hand
# (`grpo_core.packed_decoder`): the model's own forward is general, and around the seven
# weight products of each layer it runs module calls, a mask builder, the cache's bookkeeping
# and a dozen small tensor operations, a sizeable share of a decoding step on a 2-core CPU
# (`docs/performance.md` has the measurements). Written out, a layer of a decoder is these lines: RMS norm, the query, key
# and value products, the rotary position embedding, attention over the cached keys (the
# query heads that share a key/value head go in together), the output product with the
# residual added, and the SwiGLU MLP:

# %%
from grpo_core.packed_decoder import PackedDecoder

print(inspect.getsource(PackedDecoder.step))

# %% [markdown]
# The same rollout (the updated model, one seed) sampled from the model and from a packed
# float32 copy of it (written-out steps included):

# %%
from grpo_core.loop import make_sampler
from grpo_core.packed import packing_available


def timed_rollout(sampling_model):
    start = time.perf_counter()
    rollout = sample_group(sampling_model, tokenizer, prompt, profile.group_size,
                           max_new_tokens=profile.max_new_tokens,
                           temperature=profile.temperature, top_p=profile.top_p,
                           seed=profile.seed + 2)
    return rollout, time.perf_counter() - start


if packing_available():
    start = time.perf_counter()
    sampler = make_sampler(model, "float32", packed=True)
    pack_s = time.perf_counter() - start
    from_model, model_s = timed_rollout(model)
    from_packed, packed_s = timed_rollout(sampler)
    same = torch.equal(from_packed.completion_ids, from_model.completion_ids)
    print(f"from the model        {model_s:6.1f} s")
    print(f"from a packed copy    {packed_s:6.1f} s  (+ {pack_s:.1f} s to pack it once): "
          f"{packed_s / model_s:.0%} of the time; the same completions: {same}")
    del sampler
else:
    print("this torch cannot pack weights for its CPU kernel: the loop samples from the model")

# %% [markdown]
# One more saving inside the decoding loop, for every model and device: the key/value cache.
# Hugging Face's `DynamicCache` grows by concatenation, so each new token copies every
# layer's whole cache into a tensor one position longer. `sample_group`'s cache
# (`grpo_core.kv_cache`) reserves room for `max_new_tokens` positions after the prompt and
# writes each token's keys and values into it in place; the model reads views of the filled
# part, the same numbers. A toy layer of SmolLM2-135M's shape (16 rows, 3 key/value heads of
# 64 numbers each, a 40-token prompt, then five tokens):

# %%
# NBVAL_CHECK_OUTPUT
from transformers.cache_utils import DynamicLayer

from grpo_core.kv_cache import ReservedLayer


def tokens_that_moved_the_cache(layer, tokens=5, rows=16, heads=3, dim=64, prompt=40):
    """How many of ``tokens`` one-token updates left the layer's keys in new memory."""
    layer.update(torch.zeros(rows, heads, prompt, dim), torch.zeros(rows, heads, prompt, dim))
    moved = 0
    for _ in range(tokens):
        before = layer.keys.data_ptr()
        layer.update(torch.zeros(rows, heads, 1, dim), torch.zeros(rows, heads, 1, dim))
        moved += layer.keys.data_ptr() != before
    return moved


print(f"DynamicCache's layer: {tokens_that_moved_the_cache(DynamicLayer())} of 5 tokens copied "
      "the whole cache to new memory")
print(f"the reserved layer:   {tokens_that_moved_the_cache(ReservedLayer(reserve=64))} of 5")

# %% [markdown]
# What reuse buys: with `num_iterations` = μ updates on each rollout, one generation is shared
# by μ updates, so each update costs `generate / μ + update`. From the two times just measured:

# %%
for reuse in (1, 2, 4):
    per_update = generate_s / reuse + update_s
    print(f"num_iterations {reuse}: {per_update:6.1f} s per update, "
          f"{generate_s / reuse / per_update:4.0%} of it generating")

# %% [markdown]
# What the split means, honestly:
#
# - **Generation** produces one token at a time. Each new token is a forward pass over the whole
#   model for only B rows, so it is bound by reading all the weights from memory (about 540 MB in
#   float32 here) once per token, not by arithmetic. That is the ideal; in float32 on a
#   2-core CPU, 16 rows are already enough arithmetic (16 × 2 × 135 M floating-point
#   operations per token) to take longer than the reading, so a decoding step costs about in proportion to its rows.
#   `sample_group` uses that: it runs the prompt pass once per distinct prompt (a group's k
#   rows share it) and drops a completion from the batch as soon as it ends, so a group whose
#   answers are short no longer pays for its longest one on every row (the same draws, the
#   same distribution). Writing the cache in place saves less than it looks (a few percent of
#   a float32 decoding step on a 2-core CPU without AVX-512, `docs/performance.md`): the
#   arithmetic of the matrix products is most of the step.
# - **The update** is one forward and one backward pass over all B × (prompt + completion)
#   tokens at once: large matrix products, bound by arithmetic. (The cell above times that
#   plain pass. The training loop runs each group's prompt once and its k completions on top
#   of the prompt's key/value cache, `TrainConfig.share_prompt_pass`: the same log-probs and
#   gradients up to float rounding, and at 2 prompts × 8 the prompt's rows drop from 16 to 2.)
#
# On a laptop CPU the arithmetic is slow too (a couple of cores, tens of GFLOP/s), so the update
# costs a sizeable share: with short completions about as much as generating them, and the
# longer the completions, the larger generation's share (its cost grows with the number of
# tokens generated one after another, the update's with the number of tokens scored at once).
# The split printed above was measured when this notebook was built, on an otherwise idle
# machine; read it for your machine when you run it. (This section times the float32 model
# directly; the training loop's `cpu` runs sample from the packed copy, bfloat16 where the CPU
# has the instructions, and autocast the update there; `make bench` prints that split.) So "generation is the slow part" holds where completions are
# long and the update's matrix products are fast, not everywhere. What reuse costs is what
# sections 1-4 showed: every update after the first learns from a rollout the policy no longer
# produces, the ratios drift from 1, and the clip drops the gradient of the tokens past its band,
# so a reused update does less than a fresh one. On a GPU the matrix products of the update run tens to hundreds of
# times faster, while generation stays one token at a time, limited by memory bandwidth and by
# the overhead of launching each step; with long completions (the GPU profile allows 256 tokens,
# reasoning runs thousands) generation takes most of the step. That is the regime the lecture
# describes, and why TRL can hand generation to vLLM and reuse a rollout for several updates
# (`num_iterations`), which is exactly when the clip starts to matter. This notebook has not
# measured a GPU; the `gpu` profile's numbers will be recorded when it runs there.

# %% [markdown]
# ## Exercises
#
# Each check prints *not attempted yet* while your line still holds `...`, a hint when the
# answer is off, and *correct* when it is right. Worked solutions: `solutions/exercises.py`
# (try first).
#
# **1.** With A = +1 and ε = 0.2, what is the per-token loss (4.2) of a token whose ratio is
# 1.3? And with A = −1?

# %%
from grpo_core.exercises import check

my_loss_positive = ...  # your answer here
my_loss_negative = ...  # your answer here

check("04.clip_by_hand", (my_loss_positive, my_loss_negative))

# %% [markdown]
# **2.** With A < 0, ε = 0.2 and ε_high = 0.28, below which ratio is the gradient exactly zero?
# The check compares with the zero-gradient region that `clip_curves` finds.

# %%
my_threshold = ...  # your answer here

check("04.zero_gradient_threshold", my_threshold)

# %% [markdown]
# **3.** A token has log-prob −1.0 under the policy and −1.5 under the reference. Compute its
# k3 (4.3) by hand, and say whether k1 for the same token is positive (+1) or negative (−1).

# %%
import math

my_k3 = ...  # your answer here
my_k1_sign = ...  # +1 or -1

check("04.k3_by_hand", (my_k3, my_k1_sign))

# %% [markdown]
# **4.** The same token (log-prob −1.0 under the policy, −1.5 under the reference), sampled
# on-policy. Its gradient is a coefficient $c$ times $\nabla \log \pi_\theta(y)$ (the table under
# eq. (4.5)): what is $c$ with ρ·k3 in the loss, and what with k3 alone?

# %%
my_c_ratio_k3 = ...  # your answer here
my_c_k3 = ...  # your answer here

check("04.kl_gradient_coefficient", (my_c_ratio_k3, my_c_k3))

# %% [markdown]
# **5.** The lecture's second box in your own lines: write `my_clipped_surrogate`, the
# per-token loss (4.2) `[B, T]` from the current and old token log-probs `[B, T]`, the
# advantages `[B]` and ε. The check runs it on a reused batch whose ratios leave the band on
# both sides, with advantages of both signs, against `clipped_surrogate`.

# %%
def my_clipped_surrogate(token_logps, old_token_logps, advantages, epsilon):
    return ...  # your code here


check("04.clipped_surrogate", my_clipped_surrogate)

# %% [markdown]
# ## What this notebook showed
#
# - Reusing a rollout moves the ratio away from one; the clip removes the gradient of tokens past
#   its band, but neither holds a ratio inside it nor acts over many batches: that is the KL
#   penalty's job, and its gradient is the KL's only with k2 or ρ·k3 (the course's and TRL's):
#   k1's averages to zero and k3's to the other KL's, however many tokens are sampled.
# - How the per-token losses add up is a choice: every run of the course takes each
#   completion's mean (`grpo`), which pushes a token of a short completion harder than one of
#   a long completion; the lecture's sum and TRL's `dapo` push every token alike.
# - On this machine's CPU, generation and the update cost about the same; reuse pays where
#   generation dominates.
#
# **Next:** [05 · The reward is a testable contract](05_reward_contract.ipynb).
#
# When you are done here, shut this notebook's kernel down (*Kernel → Shut Down Kernel*):
# it holds the model in memory (the start page lists each notebook's peak).
