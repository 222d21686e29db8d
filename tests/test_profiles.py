"""Profile selection: argument > GRPO_PROFILE > the machine's default, and clear errors."""

from __future__ import annotations

import pytest

from grpo_core import profiles
from grpo_core.profiles import PROFILE_NAMES, ProfileError, get_profile, resolve_profile_name


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("GRPO_PROFILE", raising=False)


def test_three_profiles_exist():
    assert PROFILE_NAMES == ("smoke", "cpu", "gpu")


def test_argument_beats_environment(monkeypatch):
    monkeypatch.setenv("GRPO_PROFILE", "cpu")
    profile = get_profile("smoke")
    assert profile.name == "smoke"
    assert profile.reason == "passed as an argument"


def test_environment_variable_is_used(monkeypatch):
    monkeypatch.setenv("GRPO_PROFILE", " CPU ")
    profile = get_profile()
    assert profile.name == "cpu"
    assert "GRPO_PROFILE" in profile.reason


@pytest.mark.parametrize(("has_cuda", "expected"), [(True, "gpu"), (False, "cpu")])
def test_default_follows_cuda(no_env, monkeypatch, has_cuda, expected):
    monkeypatch.setattr(profiles, "cuda_available", lambda: has_cuda)
    name, reason = resolve_profile_name()
    assert name == expected
    assert reason.startswith("default")


def test_empty_environment_variable_means_default(monkeypatch):
    monkeypatch.setenv("GRPO_PROFILE", "")
    monkeypatch.setattr(profiles, "cuda_available", lambda: False)
    assert get_profile().name == "cpu"


@pytest.mark.parametrize("source", ["argument", "environment"])
def test_unknown_profile_lists_the_valid_ones(monkeypatch, source):
    if source == "environment":
        monkeypatch.setenv("GRPO_PROFILE", "tpu")
        call = get_profile
    else:

        def call():
            return get_profile("tpu")

    with pytest.raises(ProfileError) as info:
        call()
    message = str(info.value)
    assert "'tpu'" in message
    assert "smoke, cpu, gpu" in message
    assert isinstance(info.value, ValueError)  # callers may catch the usual type


def test_profiles_differ_only_in_numbers_and_model():
    smoke, cpu, gpu = (get_profile(n) for n in PROFILE_NAMES)
    assert smoke.model_id == cpu.model_id == "SmolLM2-135M-Instruct"
    assert gpu.model_id == "Qwen/Qwen3-0.6B" and gpu.device == "cuda"
    assert not gpu.enable_thinking
    assert smoke.max_new_tokens < cpu.max_new_tokens < gpu.max_new_tokens
    assert all(p.group_size >= 2 for p in (smoke, cpu, gpu))  # a group needs two to compare


def test_with_overrides_changes_a_copy():
    cpu = get_profile("cpu")
    bigger = cpu.with_overrides(group_size=16)
    assert bigger.group_size == 16 and cpu.group_size == 8


def test_with_overrides_rejects_unknown_fields():
    with pytest.raises(ProfileError, match="num_generations"):
        get_profile("cpu").with_overrides(num_generations=16)
