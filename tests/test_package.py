"""The package's shape: every advertised name resolves, and the layers import what they should."""

from __future__ import annotations

import subprocess
import sys

import pytest

import grpo_core

CONTRACT = [
    "group_advantages",
    "sequence_logprob",
    "policy_gradient_loss",
    "clipped_surrogate",
    "kl_k3",
    "grpo_loss",
    "run_tests",
    "load_policy",
    "get_profile",
]


@pytest.mark.parametrize("name", grpo_core.__all__)
def test_every_exported_name_resolves(name):
    assert getattr(grpo_core, name) is not None


def test_contract_names_are_exported():
    assert set(CONTRACT) <= set(grpo_core.__all__)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'calc_adv'"):
        grpo_core.calc_adv  # noqa: B018


def _modules_loaded_by(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "statement",
    ["import grpo_core", "import grpo_core.profiles", "from grpo_core.sandbox import run_tests"],
)
def test_light_imports_do_not_pull_torch(statement):
    loaded = _modules_loaded_by(statement)
    assert "torch" not in loaded and "transformers" not in loaded


@pytest.mark.parametrize("module", ["advantages", "logprobs", "loss", "training_signals",
                                    "preference"])
def test_update_math_imports_torch_but_no_model_library(module):
    loaded = _modules_loaded_by(f"import grpo_core.{module}")
    assert "torch" in loaded
    assert not {"transformers", "trl", "datasets"} & loaded
