"""The gpu profile's memory plan, and the Qwen3 code path on a tiny Qwen3 built from a config
(random weights). The precision plan per kind of device is tests/test_precision.py's."""

from __future__ import annotations

import pytest
import torch

from grpo_core import hardware, profiles
from grpo_core.hardware import GIB, QWEN3_0_6B, memory_plan, memory_table, plan_for_model
from grpo_core.precision import choose_precision

SETTINGS = {"batch_rows": 64, "prompt_tokens": 160, "completion_tokens": 256}


def test_memory_plan_for_qwen3_on_t4_l4_and_a100():
    bf16 = choose_precision("cuda", capability=(8, 0), bf16_supported=True)
    rows = {row["gpu"]: row for row in memory_table(**SETTINGS, precision=bf16)}
    t4, l4, a100 = (rows[name] for name in hardware.GPUS_GIB)
    # float32 master weights + gradients + AdamW's two moments: 16 bytes per parameter
    assert t4["fixed GiB"] == pytest.approx(16 * QWEN3_0_6B.params / GIB, abs=0.05)
    assert 1 <= t4["micro-batch"] < l4["micro-batch"] < a100["micro-batch"] <= 64
    for row in rows.values():
        assert 64 % row["micro-batch"] == 0 and not row["checkpointing"]


def test_memory_plan_counts_the_reference_and_lora_and_falls_back_to_checkpointing():
    plan = memory_plan(QWEN3_0_6B, 15 * GIB, **SETTINGS)
    with_reference = memory_plan(QWEN3_0_6B, 15 * GIB, beta=0.04, **SETTINGS)
    assert with_reference.reference == 4 * QWEN3_0_6B.params
    assert with_reference.micro_batch_size < plan.micro_batch_size
    lora = memory_plan(QWEN3_0_6B, 15 * GIB, beta=0.04, trainable=10_000_000, **SETTINGS)
    assert lora.reference == 0 and lora.optimizer == 8 * 10_000_000
    assert lora.micro_batch_size > plan.micro_batch_size
    long = memory_plan(QWEN3_0_6B, 15 * GIB, batch_rows=8, prompt_tokens=4000,
                       completion_tokens=256)
    assert long.gradient_checkpointing and long.fits
    too_small = memory_plan(QWEN3_0_6B, 8 * GIB, **SETTINGS)
    assert not too_small.fits and "LoRA" in too_small.describe()


@pytest.mark.model
@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_the_qwen3_path_trains_a_step(tiny_qwen3_dir, precision):
    from grpo_core.loop import TrainConfig, train
    from grpo_core.models import load_policy
    from grpo_core.rewards import length_reward
    from grpo_core.rollout import chat_prompt

    profile = profiles.get_profile("gpu", precision=precision).with_overrides(
        model_id=str(tiny_qwen3_dir), device="cpu")
    model, tokenizer = load_policy(profile)
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.dtype == torch.float32
    prompt = chat_prompt(tokenizer, "Say hi.", enable_thinking=profile.enable_thinking)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # thinking off
    plan = plan_for_model(model, tokenizer, ["Say hi."], 1 * GIB, batch_rows=4,
                          completion_tokens=8)
    assert plan.fits and plan.micro_batch_size == 4
    before = [p.detach().clone() for p in model.parameters()]
    scaling = precision == "float16"
    config = TrainConfig.from_profile(profile, group_size=2, prompts_per_step=2, max_steps=1,
                                      max_new_tokens=8, learning_rate=1e-2, save_checkpoint=False,
                                      gradient_checkpointing=True)
    assert (config.autocast_dtype, config.loss_scaling) == (precision, scaling)
    result = train(model, tokenizer, ["Say hi.", "Name a colour."], length_reward, config,
                   progress=False)
    record = result.metrics[0]
    assert torch.isfinite(torch.tensor(record["loss"]))
    assert ("loss_scale" in record) == scaling
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_the_gpu_check_report_reads_as_a_table():
    from tools.gpu_check import report_markdown

    report = {"device_name": "Tesla T4", "precision": "float16 autocast with loss scaling",
              "model": "SmolLM2-135M-Instruct (offline package)", "sizes": {"group_size": 8},
              "ours": {"median_step_s": 2.0, "rollout_tokens_per_s": 900.4,
                       "peak_memory_gib": 5.25, "memory_kind": "GPU allocated"},
              "trl": None, "trl_error": "No module named 'trl'",
              "memory_plan": "micro-batch 4", "exp1_mean_chars": [40.2, 31.0]}
    text = report_markdown(report)
    assert "| median step (s) | 2.00 | - |" in text
    assert "| rollout tokens/s | 900 | - |" in text and "| peak memory, GPU allocated (GiB) | 5.25 | - |" in text
    assert "mean characters per step: 40, 31" in text and "TRL did not run: No module" in text
    assert "its draws" not in text  # no provenance recorded: no line
    report["exp1_provenance"] = {"code": {"commit": "c162e7d" + "0" * 33, "clean": False}, "draws": {
        "id": "0123456789ab", "sampler": "decode_until from the policy", "device": "cuda",
        "torch": "2.11.0+cu130", "transformers": "5.17.0"}}
    assert ("its draws (0123456789ab): decode_until from the policy; device cuda, torch "
            "2.11.0+cu130, transformers 5.17.0; code: c162e7d+changes") in report_markdown(report)
