"""What each KL estimator's gradient really is, computed exactly on a small vocabulary.

A KL penalty in the loss is written with an estimator evaluated on sampled tokens
``x ~ pi``. Its *value* can be unbiased while its *gradient*, taken through ``log pi(x)`` with
the samples held fixed (what autograd does to a loss), is the gradient of something else. On
one next-token distribution over ``V`` tokens every expectation is a sum over the vocabulary,
so the bias and the variance of each estimator's one-sample gradient are exact numbers, not
estimates. With ``d(x) = log pi_ref(x) - log pi(x)``:

- ``k1 = -d``: unbiased value; gradient ``grad log pi(x)``, whose mean is 0.
- ``k2 = d**2 / 2``: biased value; gradient ``-d grad log pi(x)``, whose mean is the gradient
  of KL(pi || pi_ref): k2 in the loss is the right gradient on-policy.
- ``k3 = exp(d) - 1 - d``: unbiased value; gradient ``(1 - exp(d)) grad log pi(x)``, whose mean
  is the gradient of the *reverse* KL(pi_ref || pi).
- ``ratio_k3 = rho * k3`` with ``rho = pi / pi_old`` (1 in value on-policy): what
  ``grpo_core.loss.grpo_loss`` and TRL 1.16 (``use_bias_correction_kl=True``) put in the loss;
  the ratio adds ``k3 grad log pi(x)``, the score-function term, so the mean is the gradient of
  KL(pi || pi_ref). Token by token it is k2's gradient: ``(1 - e^d) + (e^d - 1 - d) = -d``.

The gradients are with respect to the logits ``z`` of ``pi = softmax(z)``. Everything here is
float64 and exact (a sum over the vocabulary, in closed form for :func:`gradient_moments`, so
that a real model's vocabulary works too), besides :func:`sampled_gradient`, which draws
tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

ESTIMATORS = ("k1", "k2", "k3", "ratio_k3")


def estimator_loss(name: str, token_logps: Tensor, ref_token_logps: Tensor) -> Tensor:
    """The KL estimator ``name`` at each token, as a loss term.

    Args:
        name: one of :data:`ESTIMATORS`.
        token_logps: ``[N]`` ``log pi(x)`` of the sampled tokens, with gradient.
        ref_token_logps: ``[N]`` ``log pi_ref(x)``, no gradient.

    Returns:
        ``[N]``; ``ratio_k3`` takes ``pi_old = pi`` detached (on-policy: the ratio is 1).
    """
    d = ref_token_logps - token_logps
    if name == "k1":
        return -d
    if name == "k2":
        return 0.5 * d**2
    k3 = torch.exp(d) - 1 - d
    if name == "k3":
        return k3
    if name == "ratio_k3":
        return torch.exp(token_logps - token_logps.detach()) * k3
    raise ValueError(f"unknown estimator {name!r}; choose from {ESTIMATORS}")


def exact_kl(logits: Tensor, ref_logits: Tensor) -> Tensor:
    """KL(pi || pi_ref) summed over the vocabulary. ``[V]`` logits each; a scalar."""
    logp, ref_logp = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    return (logp.exp() * (logp - ref_logp)).sum()


def exact_gradients(logits: Tensor, ref_logits: Tensor) -> dict[str, Tensor]:
    """The exact gradients w.r.t. ``logits`` (``[V]``) of KL(pi || pi_ref) (``"kl"``) and of
    the reverse KL(pi_ref || pi) (``"reverse_kl"``), each ``[V]``."""
    z = logits.detach().double().requires_grad_(True)
    ref = ref_logits.detach().double()
    forward = torch.autograd.grad(exact_kl(z, ref), z)[0]
    reverse = torch.autograd.grad(exact_kl(ref, z), z)[0]
    return {"kl": forward, "reverse_kl": reverse}


def per_token_gradients(name: str, logits: Tensor, ref_logits: Tensor) -> Tensor:
    """Row ``x``: the gradient w.r.t. the logits of the estimator's loss when the one sampled
    token is ``x``. ``[V]`` logits each; returns ``[V, V]`` float64."""
    z = logits.detach().double().requires_grad_(True)
    ref_logp = torch.log_softmax(ref_logits.detach().double(), -1)
    losses = estimator_loss(name, torch.log_softmax(z, -1), ref_logp)
    rows = [torch.autograd.grad(losses[x], z, retain_graph=True)[0] for x in range(len(losses))]
    return torch.stack(rows)


def log_prob_coefficients(name: str, logits: Tensor, ref_logits: Tensor) -> Tensor:
    """``c(x)``: the estimator's loss at token ``x`` differentiated by ``log pi(x)``, so that
    its gradient w.r.t. the logits is ``c(x) (e_x - pi)``: ``1`` (k1), ``-d`` (k2 and, on-policy,
    ratio_k3), ``1 - exp(d)`` (k3). ``[V]`` logits each; returns ``[V]`` float64."""
    logp = torch.log_softmax(logits.detach().double(), -1).requires_grad_(True)
    ref_logp = torch.log_softmax(ref_logits.detach().double(), -1)
    losses = estimator_loss(name, logp, ref_logp)
    return torch.autograd.grad(losses.sum(), logp)[0]  # each loss depends on its own token


def gradient_moments(name: str, logits: Tensor, ref_logits: Tensor) -> dict[str, float]:
    """The one-sample gradient of estimator ``name`` against the exact gradient of
    KL(pi || pi_ref), summed over the vocabulary in closed form (``O(V)``, so a real model's
    next-token distribution of 49 152 tokens too): with ``g(x) = c(x) (e_x - pi)``,
    ``E[g] = pi c - pi (pi . c)`` and ``E|g|^2 = sum_x pi(x) c(x)^2 (1 - 2 pi(x) + |pi|^2)``.

    Returns:
        ``bias``: ``|E[g] - grad KL|``; ``relative_bias``: that over ``|grad KL|``;
        ``variance``: ``E|g - E[g]|^2`` (the covariance's trace; ``n`` samples divide it by
        ``n``); ``value_bias``: ``E[estimator] - KL``, the bias of the value itself.
    """
    probs = torch.softmax(logits.detach().double(), -1)
    c = log_prob_coefficients(name, logits, ref_logits)
    mean = probs * c - probs * (probs @ c)
    second = (probs * c**2 * (1 - 2 * probs + (probs @ probs))).sum()
    exact = exact_gradients(logits, ref_logits)["kl"]
    logp = torch.log_softmax(logits.detach().double(), -1)
    ref_logp = torch.log_softmax(ref_logits.detach().double(), -1)
    values = estimator_loss(name, logp, ref_logp).detach()
    bias = (mean - exact).norm()
    return {"bias": bias.item(), "relative_bias": (bias / exact.norm()).item(),
            "variance": (second - mean @ mean).clamp(min=0.0).item(),
            "value_bias": (probs @ values - exact_kl(logits.double(), ref_logits.double())).item()}


def sampled_gradient(name: str, logits: Tensor, ref_logits: Tensor, samples: int,
                     generator: torch.Generator | None = None) -> Tensor:
    """The gradient a loss ``mean(estimator(x_1..x_n))`` gives, ``x_i ~ pi`` drawn (what a
    training step sees). ``[V]`` logits each; returns ``[V]`` float64."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    z = logits.detach().double().requires_grad_(True)
    logp = torch.log_softmax(z, -1)
    drawn = torch.multinomial(logp.detach().exp(), samples, replacement=True,
                              generator=generator)
    ref_logp = torch.log_softmax(ref_logits.detach().double(), -1)
    loss = estimator_loss(name, logp[drawn], ref_logp[drawn]).mean()
    return torch.autograd.grad(loss, z)[0]


def policy_pair(vocab: int, distance: float, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Reference logits and policy logits ``distance`` away from them (a random direction of
    unit norm, scaled), for the lab's widget. Returns ``(logits, ref_logits)``, each ``[vocab]``."""
    if vocab < 2:
        raise ValueError(f"vocab must be at least 2, got {vocab}")
    generator = torch.Generator().manual_seed(seed)
    ref_logits = torch.randn(vocab, generator=generator, dtype=torch.float64)
    direction = torch.randn(vocab, generator=generator, dtype=torch.float64)
    return ref_logits + distance * direction / direction.norm(), ref_logits
