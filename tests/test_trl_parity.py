"""Parity with TRL 1.16: the same fixed tensors through grpo_core and through GRPOTrainer's own code.

- loss: ``GRPOTrainer.compute_loss`` (-> ``_compute_loss``) on a trainer built offline around a
  tiny Llama, with ``_get_per_token_logps_and_entropies`` patched to return our fixed log-probs;
  one micro-batch, no gradient accumulation (``current_gradient_accumulation_steps = 1``, as the
  Trainer loop sets it);
- advantages: ``_generate_and_score_completions`` with generation stubbed and a reward function
  that returns fixed rewards;
- log-probs: ``_get_per_token_logps_and_entropies`` itself (TRL's fused LM head) on the tiny model.

No intended differences are exercised here: with finite padding (as TRL produces, zeros) the
results agree to float rounding. (Intended differences, tested in the unit tests: an all-equal
reward group is forced to exactly 0, and junk in masked positions cannot produce NaN.)
"""

from __future__ import annotations

import os

for _name in (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
):
    os.environ.setdefault(_name, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

trl = pytest.importorskip("trl")

from grpo_core.advantages import group_advantages  # noqa: E402
from grpo_core.logprobs import completion_mask, token_logprobs  # noqa: E402
from grpo_core.loss import LOSS_TYPES, grpo_loss  # noqa: E402

TOLERANCE = 1e-6
PAD, EOS = 0, 1
MAX_COMPLETION_LENGTH = 8  # the config's, larger than the padded width 7: dr_grpo must use this one
CLIP_METRICS = ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean")


# --- a tiny model, tokenizer and trainer, all offline ----------------------------------------------


@pytest.fixture(scope="module")
def offline_model(tmp_path_factory):
    """A 1-layer Llama and a word-level tokenizer, saved so TRL can reload a reference model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(29)]
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=64,
        pad_token_id=PAD,
        eos_token_id=EOS,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    folder = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    model.config._name_or_path = str(
        folder
    )  # TRL re-loads the reference model from here when beta != 0
    return model, tokenizer, folder


def build_trainer(offline_model, **config):
    """A real GRPOTrainer (CPU, fp32, no logging) whose reward is the dataset column ``r``."""
    model, tokenizer, folder = offline_model
    from datasets import Dataset

    def fixed_reward(completions, r, **kwargs):
        return list(r)

    settings = dict(
        output_dir=str(folder / "out"),
        bf16=False,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        activation_checkpointing=False,
        logging_steps=1,
        per_device_train_batch_size=6,
        num_generations=3,
        max_completion_length=MAX_COMPLETION_LENGTH,
    )
    settings.update(config)
    dataset = Dataset.from_list([{"prompt": "w3 w4", "r": 0.0}] * 12)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=fixed_reward,
        args=trl.GRPOConfig(**settings),
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = (
        1  # what the Trainer loop sets with no accumulation
    )
    return trainer


# --- fixed tensors ------------------------------------------------------------------------------------


def fixed_batch() -> dict[str, torch.Tensor]:
    """Six completions of lengths 7, 3, 0, 5, 1, 7 (one empty); old and reference log-probs differ
    from the new ones enough to fire the clip on both sides. Zeros at padding, as TRL produces."""
    generator = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 3, 0, 5, 1, 7])
    mask = (torch.arange(7)[None] < lengths[:, None]).long()
    token_logps = -3 * torch.rand(6, 7, generator=generator) * mask
    return {
        "token_logps": token_logps,
        "old": (token_logps + 0.4 * torch.randn(6, 7, generator=generator)) * mask,
        "ref": (token_logps + 0.3 * torch.randn(6, 7, generator=generator)) * mask,
        "mask": mask,
        "advantages": group_advantages(torch.tensor([0.0, 1.0, 3.0, 2.0, 2.0, 5.0]), 3),
    }


def trl_loss(trainer, batch, *, reuse: bool, beta: float, num_items_in_batch=None):
    """TRL's loss, gradient with respect to the log-probs, and logged metrics."""
    token_logps = batch["token_logps"].clone().requires_grad_()
    entropies = torch.zeros_like(token_logps)
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (
        token_logps,
        entropies,
        None,
    )
    rows, width = batch["mask"].shape
    inputs = {
        "prompt_ids": torch.full((rows, 2), 3),
        "prompt_mask": torch.ones(rows, 2, dtype=torch.long),
        "completion_ids": torch.full((rows, width), 5),
        "completion_mask": batch["mask"],
        "advantages": batch["advantages"],
        "num_items_in_batch": batch["mask"].sum()
        if num_items_in_batch is None
        else torch.tensor(num_items_in_batch),
    }
    if reuse:
        inputs["old_per_token_logps"] = batch["old"]
    if beta:
        inputs["ref_per_token_logps"] = batch["ref"]
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(trainer.model, inputs)
    (gradient,) = torch.autograd.grad(loss, token_logps)
    return (
        loss.detach(),
        gradient,
        {name: values[-1] for name, values in trainer._metrics["train"].items()},
    )


def our_loss(
    batch, *, reuse: bool, beta: float, epsilon_high, loss_type: str, num_items_in_batch=None
):
    token_logps = batch["token_logps"].clone().requires_grad_()
    loss, metrics = grpo_loss(
        token_logps,
        batch["old"] if reuse else None,
        batch["advantages"],
        batch["mask"],
        ref_token_logps=batch["ref"] if beta else None,
        beta=beta,
        epsilon_high=epsilon_high,
        loss_type=loss_type,
        max_completion_length=MAX_COMPLETION_LENGTH,
        num_items_in_batch=num_items_in_batch,
    )
    (gradient,) = torch.autograd.grad(loss, token_logps)
    return loss.detach(), gradient, metrics


def loss_differences(offline_model, loss_type, beta, epsilon_high, reuse, num_items_in_batch=None):
    """(|d loss|, max |d grad|, TRL's metrics, ours) for one configuration."""
    batch = fixed_batch()
    trainer = build_trainer(
        offline_model, loss_type=loss_type, beta=beta, epsilon_high=epsilon_high
    )
    theirs = trl_loss(trainer, batch, reuse=reuse, beta=beta, num_items_in_batch=num_items_in_batch)
    ours = our_loss(
        batch,
        reuse=reuse,
        beta=beta,
        epsilon_high=epsilon_high,
        loss_type=loss_type,
        num_items_in_batch=num_items_in_batch,
    )
    loss_gap = (theirs[0] - ours[0]).abs().item()
    grad_gap = (theirs[1] - ours[1]).abs().max().item()
    return loss_gap, grad_gap, theirs[2], ours[2]


# --- the loss --------------------------------------------------------------------------------------


@pytest.mark.parametrize("reuse", [False, True], ids=["on_policy", "reused"])
@pytest.mark.parametrize("epsilon_high", [None, 0.28], ids=["eps_high_none", "eps_high_0.28"])
@pytest.mark.parametrize("beta", [0.0, 0.04], ids=["beta_0", "beta_0.04"])
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_loss_gradient_and_metrics_match_trl(offline_model, loss_type, beta, epsilon_high, reuse):
    loss_gap, grad_gap, theirs, ours = loss_differences(
        offline_model, loss_type, beta, epsilon_high, reuse
    )
    assert loss_gap <= TOLERANCE
    assert grad_gap <= TOLERANCE
    for name in CLIP_METRICS:
        assert ours[name] == theirs[name], name
    assert ("kl" in ours) == ("kl" in theirs) == (beta != 0)
    if beta:
        assert abs(ours["kl"] - theirs["kl"]) <= TOLERANCE
    if reuse:  # the fixed tensors do exercise the clip, on both sides
        assert ours["clip_ratio/low_mean"] > 0 and ours["clip_ratio/high_mean"] > 0


def test_dapo_divides_by_the_whole_generation_batch_like_trl(offline_model):
    loss_gap, grad_gap, _, _ = loss_differences(
        offline_model, "dapo", 0.04, None, True, num_items_in_batch=57
    )
    assert loss_gap <= TOLERANCE and grad_gap <= TOLERANCE


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate",
                                  "sequence_mask"])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_sampler_weights_enter_the_loss_as_trls_importance_sampling_ratio(offline_model, mode,
                                                                          loss_type):
    """TRL computes the ratio inside generation (vLLM needed); given the same weights, its
    loss applies them as grpo_loss does: to the policy term, before the KL term."""
    from grpo_core.sampling_correction import sampler_weights

    batch = fixed_batch()
    generator = torch.Generator().manual_seed(7)
    sampler = (batch["token_logps"] + 0.5 * torch.randn(6, 7, generator=generator)) * batch["mask"]
    weights = sampler_weights(batch["token_logps"], sampler, batch["mask"], mode,
                              clip_min=0.5, clip_max=1.5)
    assert (weights == 0).any() or mode.endswith("truncate")
    trainer = build_trainer(offline_model, loss_type=loss_type, beta=0.04)
    trainer.use_vllm = trainer.vllm_importance_sampling_correction = True
    original = trainer.compute_loss

    def with_ratio(model, inputs, **kwargs):
        return original(model, {**inputs, "importance_sampling_ratio": weights}, **kwargs)

    trainer.compute_loss = with_ratio
    theirs = trl_loss(trainer, batch, reuse=True, beta=0.04)
    token_logps = batch["token_logps"].clone().requires_grad_()
    loss, _ = grpo_loss(token_logps, batch["old"], batch["advantages"], batch["mask"],
                        ref_token_logps=batch["ref"], beta=0.04, loss_type=loss_type,
                        max_completion_length=MAX_COMPLETION_LENGTH, sampler_weights=weights)
    (gradient,) = torch.autograd.grad(loss, token_logps)
    assert (theirs[0] - loss.detach()).abs().item() <= TOLERANCE
    assert (theirs[1] - gradient).abs().max().item() <= TOLERANCE
    unweighted = our_loss(batch, reuse=True, beta=0.04, epsilon_high=None, loss_type=loss_type)
    assert (unweighted[0] - loss.detach()).abs().item() > 1e-4  # the weights changed it


# --- the advantages ---------------------------------------------------------------------------------

REWARDS = [0.0, 1.0, 3.0, 2.0, 2.0, 2.0, 0.5, 0.25, 4.0]  # usable, all-equal, fractional


@pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)  # from TRL itself
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_match_trls_reward_to_advantage_path(offline_model, scale):
    trainer = build_trainer(
        offline_model, scale_rewards=scale, per_device_train_batch_size=9, num_generations=3
    )
    completions = [
        [5, 6, EOS],
        [7, EOS],
        [EOS],
        [8, 9, 10],
        [5],
        [6, EOS],
        [11, 12],
        [13, EOS],
        [9],
    ]
    trainer._generate_single_turn = lambda *args, **kwargs: (completions, None)
    scored = trainer._generate_and_score_completions([{"prompt": "w3 w4", "r": r} for r in REWARDS])
    ours = group_advantages(torch.tensor(REWARDS), 3, scale=scale)
    assert (scored["advantages"] - ours).abs().max().item() <= TOLERANCE


# --- the log-probs ----------------------------------------------------------------------------------


def test_token_logprobs_match_trls_fused_lm_head(offline_model):
    trainer = build_trainer(offline_model, temperature=0.7)
    prompt_ids = torch.tensor([[5, 6, 7], [PAD, 8, 9], [PAD, PAD, 10]])
    completion_ids = torch.tensor([[11, 12, 13, EOS], [14, EOS, PAD, PAD], [EOS, PAD, PAD, PAD]])
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat(
        [(prompt_ids != PAD).long(), completion_mask(completion_ids, EOS)], 1
    )
    theirs, their_entropy, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, input_ids, attention_mask, 4, compute_entropy=True
    )
    ours, our_entropy = token_logprobs(
        trainer.model, input_ids, attention_mask, 4, temperature=0.7, return_entropy=True
    )
    assert (theirs - ours).abs().max().item() <= TOLERANCE
    assert (their_entropy - our_entropy).abs().max().item() <= TOLERANCE


# --- the sampler weights themselves -----------------------------------------------------------------

TRL_RATIO_START = "# Compute the importance sampling ratio when using vLLM"
TRL_RATIO_END = "# Compute the per-token log probabilities for the reference model"


def trl_importance_ratio(learner, sampler, mask, mode, clip_min, clip_max):
    """TRL's own lines for the ratio (``GRPOTrainer._generate_and_score_completions``, which
    needs vLLM to reach them), cut from its source and run on our tensors."""
    import inspect
    import math
    import textwrap

    source = inspect.getsource(trl.GRPOTrainer._generate_and_score_completions)
    start, end = source.index(TRL_RATIO_START), source.index(TRL_RATIO_END)
    block = textwrap.dedent(source[source.rindex("\n", 0, start) + 1:end])
    settings = {"use_vllm": True, "vllm_importance_sampling_correction": True,
                "vllm_importance_sampling_mode": mode,
                "vllm_importance_sampling_clip_min": clip_min,
                "vllm_importance_sampling_clip_max": clip_max}
    scope = {"self": type("Trainer", (), settings)(), "torch": torch, "math": math,
             "completion_mask": mask, "tool_mask": None, "old_per_token_logps": learner,
             "sampling_per_token_logps": sampler}
    exec(compile(block, "trl_importance_ratio", "exec"), scope)
    return scope["vllm_importance_sampling_ratio"]


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate",
                                  "sequence_mask"])
@pytest.mark.parametrize("band", [(None, 3.0), (0.5, 1.5), (0.8, None)])
def test_sampler_weights_match_trls_importance_sampling_ratio(mode, band):
    from grpo_core.sampling_correction import sampler_weights

    batch = fixed_batch()
    generator = torch.Generator().manual_seed(11)
    sampler = batch["token_logps"] + 0.4 * torch.randn(6, 7, generator=generator)
    sampler[0, 2] = float("nan")  # a token the sampler gave no log-prob for: TRL's ratio 1
    ours = sampler_weights(batch["token_logps"], sampler, batch["mask"], mode, *band)
    theirs = trl_importance_ratio(batch["token_logps"], sampler, batch["mask"], mode, *band)
    assert ours.shape == theirs.shape
    assert torch.allclose(ours, theirs, atol=0, rtol=1e-6), (ours, theirs)
    assert len(set(ours.flatten().tolist())) > 2  # not all 1, nor all 0
