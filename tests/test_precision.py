"""The precision plan (grpo_core.precision): what each kind of device gets, how a plan is forced
(argument, GRPO_PRECISION, --precision), and that every plan, forced on this CPU, trains
float32 master weights that an update at the gpu profile's learning rate changes, through the
notebooks' path (load_policy + TrainConfig.from_profile) and the command line's alike."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
import torch

from grpo_core import precision as precision_module
from grpo_core import profiles
from grpo_core.experiments import build_config, length_experiment
from grpo_core.loop import TrainConfig, train
from grpo_core.precision import (
    apply_to_model,
    choose_precision,
    config_fields,
    detect_precision,
    precision_plan,
)

DEVICES = {  # name: (compute capability, torch's is_bf16_supported)
    "Tesla T4": ((7, 5), False),
    "Tesla V100": ((7, 0), False),
    "NVIDIA L4": ((8, 9), True),
    "NVIDIA A100-SXM4-80GB": ((8, 0), True),
    "NVIDIA H100 80GB HBM3": ((9, 0), True),
    "Tesla P100": ((6, 0), False),
}
EXPECTED = {"Tesla T4": "float16", "Tesla V100": "float16", "NVIDIA L4": "bfloat16",
            "NVIDIA A100-SXM4-80GB": "bfloat16", "NVIDIA H100 80GB HBM3": "bfloat16",
            "Tesla P100": None}
PLANS = ("bfloat16", "float16", "float32")


@pytest.fixture(autouse=True)
def _no_precision_from_the_environment(monkeypatch):
    monkeypatch.delenv(profiles.PRECISION_ENV_VAR, raising=False)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make torch (and the profiles) see one CUDA device of the given kind."""
    def install(name):
        capability, bf16 = DEVICES[name]
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    return install


@pytest.mark.parametrize("name", DEVICES)
def test_the_gpu_profile_chooses_its_plan_from_the_device(name, fake_gpu):
    fake_gpu(name)
    plan = detect_precision("cuda")
    assert plan.autocast == EXPECTED[name]
    assert plan.loss_scaling == (EXPECTED[name] == "float16")
    assert plan.load_dtype == "float32" and plan.sampling_dtype is None
    assert name in plan.reason and f"{DEVICES[name][0][0]}.{DEVICES[name][0][1]}" in plan.reason
    profile = profiles.get_profile("gpu")
    assert precision_plan(profile) == plan
    for config in (build_config(profile, length_experiment(profile)),
                   TrainConfig.from_profile(profile)):
        assert config.autocast_dtype == EXPECTED[name]
        assert config.loss_scaling == (EXPECTED[name] == "float16")
        assert config.sampling_dtype is None


def test_a_cpu_without_bf16_keeps_float32_and_samples_from_a_packed_copy_where_it_can():
    plan = choose_precision("cpu")
    assert (plan.load_dtype, plan.autocast, plan.loss_scaling, plan.sampling_dtype,
            plan.sampling_packed) == ("float32", None, False, None, False)
    packed = choose_precision("cpu", packing=frozenset({"float32", "bfloat16"}))
    assert (packed.autocast, packed.sampling_dtype, packed.sampling_packed) == (
        None, "float32", True)
    assert "packed float32 copy" in packed.reason and "packed" in packed.describe()


def test_a_cpu_with_bf16_autocasts_and_samples_from_a_bf16_copy():
    plan = choose_precision("cpu", bf16_supported=True)
    assert (plan.load_dtype, plan.autocast, plan.loss_scaling, plan.sampling_dtype,
            plan.sampling_packed) == ("float32", "bfloat16", False, "bfloat16", False)
    assert "AMX" in plan.reason
    packed = choose_precision("cpu", bf16_supported=True, packing=frozenset({"bfloat16"}))
    assert (packed.sampling_dtype, packed.sampling_packed) == ("bfloat16", True)


@pytest.mark.parametrize("can_pack", [True, False])
def test_this_cpu_packs_the_sampling_copy_where_its_torch_can(monkeypatch, can_pack):
    from grpo_core import packed

    monkeypatch.setattr(packed, "packing_available", lambda dtype="float32": can_pack)
    plan = detect_precision("cpu", "float32")
    assert (plan.sampling_dtype, plan.sampling_packed) == (
        ("float32", True) if can_pack else (None, False))
    assert config_fields(plan)["sampling_packed"] is can_pack
    gpu = choose_precision("cuda", capability=(8, 0), bf16_supported=True,
                           packing=frozenset({"float32"}))
    assert (gpu.sampling_dtype, gpu.sampling_packed) == (None, False)  # never on a GPU


@pytest.mark.parametrize(("capability", "onednn_cap", "expected"), [
    ("AVX512", None, True), ("AVX512", "avx512_core_amx", True), ("AVX512", "AVX2", False),
    ("AVX512", "AVX512_CORE", False), ("AVX2", None, False), ("DEFAULT", None, False)])
def test_bf16_is_found_only_where_no_kernel_cap_holds_it_back(monkeypatch, capability,
                                                               onednn_cap, expected):
    """An AVX-512 machine with its kernels held to AVX2 stands in for a laptop without
    bfloat16 instructions, and must get that laptop's plan."""
    import torch

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    if onednn_cap is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn_cap)
    assert precision_module.cpu_has_bf16() is expected
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert precision_module.cpu_has_bf16() is False  # and never without the instructions


@pytest.mark.parametrize("has_bf16", [True, False])
def test_the_cpu_profile_takes_the_cpus_plan_and_smoke_stays_float32(monkeypatch, has_bf16):
    from grpo_core import packed

    monkeypatch.setattr(precision_module, "cpu_has_bf16", lambda: has_bf16)
    monkeypatch.setattr(packed, "packing_available", lambda dtype="float32": False)
    cpu = profiles.get_profile("cpu")
    for config in (build_config(cpu, length_experiment(cpu)), TrainConfig.from_profile(cpu)):
        assert config.autocast_dtype == config.sampling_dtype == ("bfloat16" if has_bf16 else None)
    assert build_config(cpu, length_experiment(cpu)).attn_implementation == "eager"
    smoke = profiles.get_profile("smoke")
    assert "smoke profile's default" in precision_plan(smoke).reason
    config = build_config(smoke, length_experiment(smoke))
    assert (config.autocast_dtype, config.sampling_dtype) == (None, None)
    forced = build_config(cpu.with_overrides(precision="float32"), length_experiment(cpu))
    assert (forced.autocast_dtype, forced.sampling_dtype) == (None, None)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("has_bf16", [True, False])
def test_a_forced_plan_is_the_same_whatever_the_device_can_do(device, has_bf16):
    capability = (8, 0) if has_bf16 else (6, 0)
    plans = {asked: choose_precision(device, capability=capability, bf16_supported=has_bf16,
                                     requested=asked) for asked in PLANS}
    assert {asked: (p.autocast, p.loss_scaling) for asked, p in plans.items()} == {
        "bfloat16": ("bfloat16", False), "float16": ("float16", True), "float32": (None, False)}
    # a bfloat16 copy for sampling only where decoding reads weights on a CPU
    assert plans["bfloat16"].sampling_dtype == ("bfloat16" if device == "cpu" else None)
    assert plans["float16"].sampling_dtype is plans["float32"].sampling_dtype is None
    assert all("forced" in p.reason and p.requested == asked for asked, p in plans.items())


def test_the_precision_is_asked_for_by_argument_then_environment_then_profile(monkeypatch):
    assert profiles.get_profile("cpu").precision == "auto"
    assert profiles.get_profile("smoke").precision == "float32"
    monkeypatch.setenv(profiles.PRECISION_ENV_VAR, " Float16 ")
    smoke = profiles.get_profile("smoke")
    assert (smoke.precision, smoke.precision_reason) == ("float16", "set by GRPO_PRECISION")
    assert "float16: set by GRPO_PRECISION" in precision_plan(smoke).reason
    argued = profiles.get_profile("smoke", precision="bfloat16")
    assert (argued.precision, argued.precision_reason) == ("bfloat16", "passed as an argument")


def test_an_unknown_precision_is_refused_everywhere(monkeypatch):
    with pytest.raises(ValueError, match="precision must be one of"):
        choose_precision("cpu", requested="float8")
    with pytest.raises(ValueError, match="precision must be one of"):
        precision_plan(profiles.get_profile("cpu").with_overrides(precision="float8"))
    with pytest.raises(profiles.ProfileError, match="unknown precision 'float8'.*float32"):
        profiles.get_profile("cpu", precision="float8")
    monkeypatch.setenv(profiles.PRECISION_ENV_VAR, "fp8")
    with pytest.raises(profiles.ProfileError, match="'fp8' \\(set by GRPO_PRECISION\\)"):
        profiles.get_profile("cpu")


def test_the_config_takes_the_plans_fields_and_overrides_win():
    plan = choose_precision("cpu", requested="float16")
    assert config_fields(plan) == {"autocast_dtype": "float16", "loss_scaling": True,
                                   "sampling_dtype": None, "sampling_packed": False}
    smoke = profiles.get_profile("smoke", precision="bfloat16")
    assert TrainConfig.from_profile(smoke).autocast_dtype == "bfloat16"
    assert TrainConfig.from_profile(smoke, autocast_dtype=None).autocast_dtype is None


def test_apply_to_model_gives_float32_master_weights(new_tiny_policy):
    model, _ = new_tiny_policy()
    model.to(torch.bfloat16)
    same = apply_to_model(model, choose_precision("cpu", requested="bfloat16"))
    assert same is model
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_loop_refuses_half_precision_weights(new_tiny_policy):
    """The bug this plan fixes: half-precision weights trained directly lose AdamW's steps."""
    model, tokenizer = new_tiny_policy()
    model.to(torch.bfloat16)
    config = TrainConfig(group_size=2, prompts_per_step=1, max_new_tokens=4, max_steps=1,
                         save_checkpoint=False, autocast_dtype="bfloat16")
    with pytest.raises(ValueError, match="trainable weights are bfloat16.*float32 master"):
        train(model, tokenizer, ["ab"], lambda completions, **_: [0.0] * len(completions),
              config, progress=False)


SIZES = {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 8, "max_steps": 1}


@pytest.fixture
def tiny_gpu_profile(tiny_qwen3_dir, monkeypatch):
    """The gpu profile (its learning rate, its chat template's thinking switch) with the tiny
    Qwen3 on this CPU, as ``get_profile("gpu")`` returns it to every caller."""
    gpu = replace(profiles._PROFILES["gpu"], model_id=str(tiny_qwen3_dir), device="cpu",
                  data_source="local")
    monkeypatch.setitem(profiles._PROFILES, "gpu", gpu)
    return gpu


def changed_fraction(before: list[torch.Tensor], model: torch.nn.Module) -> float:
    """The fraction of weights (elements) that differ from ``before``."""
    changed = sum(int((a != b).sum()) for a, b in zip(before, model.parameters(), strict=True))
    return changed / sum(a.numel() for a in before)


@pytest.mark.model
@pytest.mark.parametrize("asked", PLANS)
def test_each_plan_trains_float32_weights_through_the_notebooks_path(tiny_gpu_profile, asked,
                                                                     monkeypatch):
    from grpo_core.models import load_policy
    from grpo_core.rewards import length_reward

    monkeypatch.setenv(profiles.PRECISION_ENV_VAR, asked)
    profile = profiles.get_profile("gpu")
    model, tokenizer = load_policy(profile)  # from a bfloat16 checkpoint
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    config = TrainConfig.from_profile(profile, **SIZES, save_checkpoint=False)
    plan = detect_precision("cpu", asked)
    assert (config.autocast_dtype, config.loss_scaling, config.sampling_dtype,
            config.sampling_packed) == (plan.autocast, plan.loss_scaling, plan.sampling_dtype,
                                        plan.sampling_packed)
    assert config.learning_rate == 1e-6  # the gpu profile's
    before = [p.detach().clone() for p in model.parameters()]
    result = train(model, tokenizer, ["Say hi.", "Name a colour."], length_reward, config,
                   progress=False)
    assert {p.dtype for p in result.model.parameters()} == {torch.float32}
    assert ("loss_scale" in result.metrics[-1]) == (asked == "float16")
    assert changed_fraction(before, result.model) > 0.9


@pytest.mark.model
@pytest.mark.parametrize("asked", PLANS)
def test_each_plan_trains_float32_weights_through_the_command_line(tiny_gpu_profile, asked,
                                                                   tmp_path, monkeypatch):
    from grpo_core.cli import parse_args, run_experiment
    from grpo_core.models import load_policy

    monkeypatch.setenv(profiles.PRECISION_ENV_VAR, "float32")  # --precision wins over it
    before, _ = load_policy(profiles.get_profile("gpu", precision="float32"))
    before = [p.detach().clone() for p in before.parameters()]
    out = tmp_path / "run"
    result = run_experiment(parse_args([
        "length", "--profile", "gpu", "--precision", asked, "--steps", "1", "--group-size", "2",
        "--prompts-per-step", "2", "--max-new-tokens", "8", "--no-checkpoint", "--quiet",
        "--out", str(out)]))
    assert {p.dtype for p in result.model.parameters()} == {torch.float32}
    assert changed_fraction(before, result.model) > 0.9
    written = json.loads((out / "config.json").read_text())
    assert written["train"]["learning_rate"] == 1e-6
    notebook_path = TrainConfig.from_profile(profiles.get_profile("gpu", precision=asked))
    for field in ("autocast_dtype", "loss_scaling", "sampling_dtype", "sampling_packed"):
        assert written["train"][field] == getattr(notebook_path, field)  # the same plan
    assert "--precision" in written["precision"]


def test_the_copy_of_a_bf16_checkpoint_is_upcast_exactly():
    weights = torch.randn(64, dtype=torch.float32).to(torch.bfloat16)
    module = torch.nn.Linear(8, 8).to(torch.bfloat16)
    with torch.no_grad():
        module.weight.copy_(weights.view(8, 8))
    kept = copy.deepcopy(module.weight.detach())
    apply_to_model(module, choose_precision("cpu"))
    assert module.weight.dtype == torch.float32
    assert torch.equal(module.weight.detach(), kept.float())
