"""The KL estimators' gradients, exact on a small vocabulary, against closed forms and the
course's own loss."""

from __future__ import annotations

import pytest
import torch

from grpo_core.kl_gradients import (
    ESTIMATORS,
    estimator_loss,
    exact_gradients,
    exact_kl,
    gradient_moments,
    per_token_gradients,
    policy_pair,
    sampled_gradient,
)
from grpo_core.loss import grpo_loss

VOCAB = 7


@pytest.fixture(params=[0.3, 1.5])
def pair(request):
    return policy_pair(VOCAB, request.param, seed=3)


def closed_form_kl_gradient(logits, ref_logits):
    """d KL(pi || pi_ref) / d z = pi * (log pi - log pi_ref - KL), written out by hand."""
    logp, ref_logp = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    kl = (logp.exp() * (logp - ref_logp)).sum()
    return logp.exp() * (logp - ref_logp - kl)


def test_the_exact_gradients_match_their_closed_forms(pair):
    logits, ref_logits = pair
    exact = exact_gradients(logits, ref_logits)
    assert torch.allclose(exact["kl"], closed_form_kl_gradient(logits, ref_logits), atol=1e-12)
    # reverse KL(pi_ref || pi): d/dz = pi - pi_ref
    reverse = torch.softmax(logits, -1) - torch.softmax(ref_logits, -1)
    assert torch.allclose(exact["reverse_kl"], reverse, atol=1e-12)
    assert exact_kl(logits, ref_logits) > 0 and exact_kl(ref_logits, ref_logits).abs() < 1e-12


def test_each_estimators_mean_gradient_is_what_the_theory_says(pair):
    logits, ref_logits = pair
    probs = torch.softmax(logits, -1)
    exact = exact_gradients(logits, ref_logits)
    mean = {name: probs @ per_token_gradients(name, logits, ref_logits) for name in ESTIMATORS}
    assert torch.allclose(mean["k1"], torch.zeros(VOCAB, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(mean["k2"], exact["kl"], atol=1e-12)
    assert torch.allclose(mean["k3"], exact["reverse_kl"], atol=1e-12)
    assert torch.allclose(mean["ratio_k3"], exact["kl"], atol=1e-12)
    assert not torch.allclose(mean["k3"], exact["kl"], atol=1e-3)  # k3 alone is biased


def test_on_policy_ratio_k3_and_k2_give_the_same_gradient_token_by_token(pair):
    """(1 - e^d) + (e^d - 1 - d) = -d: the ratio's score term turns k3's gradient into k2's."""
    logits, ref_logits = pair
    assert torch.allclose(per_token_gradients("ratio_k3", logits, ref_logits),
                          per_token_gradients("k2", logits, ref_logits), atol=1e-12)


def test_moments_give_bias_variance_and_the_values_bias(pair):
    logits, ref_logits = pair
    moments = {name: gradient_moments(name, logits, ref_logits) for name in ESTIMATORS}
    assert moments["k2"]["bias"] < 1e-12 and moments["ratio_k3"]["bias"] < 1e-12
    assert moments["k1"]["relative_bias"] == pytest.approx(1.0)  # mean 0: all of it missing
    assert moments["k3"]["relative_bias"] > 0.01
    # k1 and k3 estimate the KL's value without bias, k2 does not
    assert abs(moments["k1"]["value_bias"]) < 1e-12 and abs(moments["k3"]["value_bias"]) < 1e-12
    assert abs(moments["k2"]["value_bias"]) > 1e-4
    # the variance, recomputed from the per-token rows by hand
    rows = per_token_gradients("k3", logits, ref_logits)
    probs = torch.softmax(logits, -1)
    mean = probs @ rows
    by_hand = sum(probs[x] * ((rows[x] - mean) ** 2).sum() for x in range(VOCAB)).item()
    assert moments["k3"]["variance"] == pytest.approx(by_hand, rel=1e-12)
    assert all(m["variance"] > 0 for m in moments.values())


def test_the_closed_form_moments_equal_the_enumerated_ones(pair):
    logits, ref_logits = pair
    probs = torch.softmax(logits, -1)
    for name in ESTIMATORS:
        rows = per_token_gradients(name, logits, ref_logits)
        mean = probs @ rows
        variance = (probs * ((rows - mean) ** 2).sum(-1)).sum().item()
        bias = (mean - exact_gradients(logits, ref_logits)["kl"]).norm().item()
        moments = gradient_moments(name, logits, ref_logits)
        assert moments["variance"] == pytest.approx(variance, rel=1e-10, abs=1e-15), name
        assert moments["bias"] == pytest.approx(bias, rel=1e-9, abs=1e-12), name


def test_a_real_vocabulary_is_summed_without_a_vocab_by_vocab_matrix():
    logits, ref_logits = policy_pair(49_152, 2.0, seed=5)
    moments = gradient_moments("ratio_k3", logits, ref_logits)
    assert moments["bias"] < 1e-9 and moments["variance"] > 0
    assert gradient_moments("k3", logits, ref_logits)["relative_bias"] > 0


def test_at_the_reference_every_gradient_is_zero():
    logits, ref_logits = policy_pair(VOCAB, 0.0)
    for name in ESTIMATORS:
        moments = gradient_moments(name, logits, ref_logits)
        if name == "k1":  # grad log pi(x) is not zero per token, only on average
            assert moments["variance"] > 0
        else:
            assert moments["variance"] < 1e-20 and moments["bias"] < 1e-12


def test_the_sampled_gradient_averages_to_the_mean_and_its_spread_shrinks_as_1_over_n():
    logits, ref_logits = policy_pair(VOCAB, 1.0, seed=1)
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(logits, -1)
    for name in ("k3", "ratio_k3"):
        mean = probs @ per_token_gradients(name, logits, ref_logits)
        variance = gradient_moments(name, logits, ref_logits)["variance"]
        for samples in (1, 16):
            draws = torch.stack([sampled_gradient(name, logits, ref_logits, samples, generator)
                                 for _ in range(3000)])
            spread = ((draws - mean) ** 2).sum(-1).mean().item()
            assert spread == pytest.approx(variance / samples, rel=0.12), (name, samples)
            # the average of 3000 draws lies within 4 standard errors of the mean
            error = (draws.mean(0) - mean).norm().item()
            assert error < 4 * (variance / samples / 3000) ** 0.5


def test_the_courses_kl_term_has_the_ratio_k3_gradient():
    """grpo_loss with beta and zero advantages, one token per sequence, is ratio_k3's loss."""
    logits, ref_logits = policy_pair(VOCAB, 0.8, seed=2)
    ref_logp = torch.log_softmax(ref_logits, -1)
    tokens = torch.tensor([0, 3, 3, 5])
    z = logits.clone().requires_grad_(True)
    token_logps = torch.log_softmax(z, -1)[tokens].unsqueeze(1)
    loss, _ = grpo_loss(token_logps, None, torch.zeros(4, dtype=torch.float64),
                        torch.ones(4, 1), ref_token_logps=ref_logp[tokens].unsqueeze(1),
                        beta=1.0)
    ours = torch.autograd.grad(loss, z)[0]
    z2 = logits.clone().requires_grad_(True)
    mine = estimator_loss("ratio_k3", torch.log_softmax(z2, -1)[tokens], ref_logp[tokens]).mean()
    assert torch.allclose(ours, torch.autograd.grad(mine, z2)[0], atol=1e-12)


def test_bad_input_is_refused():
    logits, ref_logits = policy_pair(VOCAB, 1.0)
    with pytest.raises(ValueError, match="unknown estimator"):
        estimator_loss("k4", logits, ref_logits)
    with pytest.raises(ValueError, match="samples"):
        sampled_gradient("k3", logits, ref_logits, 0)
    with pytest.raises(ValueError, match="vocab"):
        policy_pair(1, 1.0)


def test_the_policy_pair_is_seeded_exactly_the_distance_apart_and_two_tokens_suffice():
    logits, ref_logits = policy_pair(2, 0.7, seed=4)
    assert (logits - ref_logits).norm().item() == pytest.approx(0.7, abs=1e-12)
    again = policy_pair(2, 0.7, seed=4)
    assert torch.equal(logits, again[0]) and torch.equal(ref_logits, again[1])
    assert torch.equal(policy_pair(5, 1.0)[0], policy_pair(5, 1.0, seed=0)[0])  # seed 0 by default
    assert not torch.equal(policy_pair(5, 1.0, seed=1)[0], policy_pair(5, 1.0, seed=0)[0])


def test_a_sampled_gradient_follows_its_generator():
    logits, ref_logits = policy_pair(VOCAB, 1.0)
    first = sampled_gradient("k3", logits, ref_logits, 8, torch.Generator().manual_seed(3))
    second = sampled_gradient("k3", logits, ref_logits, 8, torch.Generator().manual_seed(3))
    assert torch.equal(first, second)
