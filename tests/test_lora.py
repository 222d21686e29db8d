"""LoRA adapters in our loop and command line: only the adapters train, and with beta > 0
the reference is the base model with the adapters off (no second copy)."""

from __future__ import annotations

import json

import pytest
import torch

from grpo_core.cli import main
from grpo_core.logprobs import token_logprobs
from grpo_core.loop import TrainConfig, train
from grpo_core.lora import (
    adapter_disabled,
    add_lora,
    has_adapter,
    lora_config,
    trainable_parameters,
)
from grpo_core.rewards import length_reward
from grpo_core.run_files import read_jsonl

pytestmark = pytest.mark.model
PROMPTS = ["Say hello.", "Name a colour.", "Describe the sea."]


def _logps(model, tokenizer):
    batch = tokenizer(["Say hello. Hello there, friend"], return_tensors="pt")
    with torch.no_grad():
        return token_logprobs(model, batch["input_ids"], batch["attention_mask"], 4)


def test_lora_config_checks_the_rank_and_defaults_alpha_to_twice_it():
    config = lora_config(8, targets=("q_proj", "v_proj"))
    assert (config.r, config.lora_alpha, config.lora_dropout) == (8, 16, 0.0)
    assert set(config.target_modules) == {"q_proj", "v_proj"}
    with pytest.raises(ValueError, match="rank must be an int >= 1"):
        lora_config(0)


def test_with_beta_the_reference_is_the_base_with_the_adapter_off(tiny_policy, smoke_profile):
    model, tokenizer = tiny_policy
    base = {name: p.detach().clone() for name, p in model.named_parameters()}
    before = _logps(model, tokenizer)
    config = TrainConfig.from_profile(smoke_profile, max_new_tokens=6, max_steps=3,
                                      learning_rate=5e-2, beta=0.04, lora_rank=4,
                                      save_checkpoint=False)
    result = train(model, tokenizer, PROMPTS, length_reward, config, progress=False)
    policy = result.model
    assert has_adapter(policy) and result.ref_model is None  # no second model
    trainable, total = trainable_parameters(policy)
    assert 0 < trainable < total  # the adapters only (the base weights are checked below)
    # the base weights never moved: LoRA trains the adapters only
    for name, p in policy.get_base_model().named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, base[name.replace("base_layer.", "")]), name
    moved = _logps(policy, tokenizer)
    with adapter_disabled(policy):
        reference = _logps(policy, tokenizer)
    assert torch.allclose(reference, before, atol=1e-6)  # adapter off: the model we started from
    assert not torch.allclose(moved, before, atol=1e-4)  # adapter on: the policy moved
    kl = [record["kl"] for record in result.metrics]
    assert kl[0] == pytest.approx(0.0, abs=1e-6) and kl[-1] > 0  # step 1: policy == reference


@pytest.mark.parametrize(("beta", "reference_passes"), [(0.0, 0), (0.04, 2)])
def test_the_base_model_runs_as_the_reference_only_with_beta(tiny_policy, smoke_profile,
                                                            monkeypatch, beta, reference_passes):
    import grpo_core.loop as loop

    passes = []

    def counted(model):
        passes.append(model)
        return adapter_disabled(model)

    monkeypatch.setattr(loop, "adapter_disabled", counted)
    model, tokenizer = tiny_policy
    config = TrainConfig.from_profile(smoke_profile, max_new_tokens=6, max_steps=2, beta=beta,
                                      lora_rank=4, save_checkpoint=False)
    result = train(model, tokenizer, PROMPTS, length_reward, config, progress=False)
    assert len(passes) == reference_passes  # once per rollout with beta > 0; never without
    assert ("kl" in result.metrics[-1]) == (beta > 0) and result.ref_model is None


def test_cli_lora_run_saves_the_adapter_and_resumes(tmp_path):
    out = tmp_path / "run"
    common = ["length", "--profile", "smoke", "--out", str(out), "--max-new-tokens", "6",
              "--lora", "--lora-rank", "4", "--lr", "1e-3", "--quiet"]
    assert main([*common, "--steps", "1"]) == 0
    config = json.loads((out / "config.json").read_text())["train"]
    assert config["lora_rank"] == 4 and config["lora_targets"] == "all-linear"
    saved = {p.name for p in (out / "checkpoint").iterdir()}
    assert "adapter_model.safetensors" in saved and "model.safetensors" not in saved
    assert main([*common, "--steps", "2", "--resume"]) == 0
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == [1, 2]


def test_cli_refuses_lora_options_without_lora(tmp_path):
    with pytest.raises(SystemExit, match="need --lora"):
        main(["length", "--profile", "smoke", "--out", str(tmp_path), "--lora-alpha", "8"])


def test_add_lora_targets_the_named_modules(tiny_policy):
    model, _ = tiny_policy
    policy = add_lora(model, 2, targets=("q_proj",))
    adapted = {name.split(".lora_")[0] for name, _ in policy.named_parameters() if "lora_" in name}
    assert adapted and all(name.endswith("q_proj") for name in adapted)


def test_the_trl_script_plans_lora_and_builds_our_peft_config():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "trl_mbpp.py"
    done = subprocess.run([sys.executable, str(script), "--profile", "smoke", "--lora",
                           "--lora-rank", "8", "--lora-targets", "q_proj,v_proj", "--dry-run"],
                          capture_output=True, text=True, timeout=300, check=True)
    assert "LoRA rank 8 on ['q_proj', 'v_proj']" in done.stdout
    sys.path.insert(0, str(script.parent))
    try:
        import trl_mbpp
    finally:
        sys.path.remove(str(script.parent))
    config = trl_mbpp.peft_config(trl_mbpp.parse_args(["--lora", "--lora-rank", "8"]))
    assert config.r == 8 and config.target_modules == "all-linear" and config.lora_dropout == 0.0
    assert trl_mbpp.peft_config(trl_mbpp.parse_args([])) is None


def test_the_memory_plan_counts_the_adapters_lora_will_add(tiny_policy):
    from grpo_core.hardware import lora_parameters

    model, _ = tiny_policy
    expected = lora_parameters(model, 4)
    policy = add_lora(model, 4)
    assert trainable_parameters(policy)[0] == expected > 0
