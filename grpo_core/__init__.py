"""grpo_core: the from-scratch GRPO package behind the course notebooks.

Names are imported lazily, on first use, so that ``import grpo_core.sandbox`` works
without torch installed (the sandbox is standard library only) and so that
``import grpo_core`` stays fast in a notebook's first cell.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it: the design card's contract and what code outside the
# package imports from the package itself (tests/test_package.py keeps the list to that). The
# notebooks, tests and scripts import everything else from its module, e.g.
# ``from grpo_core.rewards import length_reward``.
_EXPORTS: dict[str, str] = {
    # the update math
    "group_advantages": "advantages",
    "sequence_logprob": "logprobs",
    "policy_gradient_loss": "loss",
    "clipped_surrogate": "loss",
    "kl_k3": "loss",
    "grpo_loss": "loss",
    # the sandbox, the profiles and the model
    "run_tests": "sandbox",
    "get_profile": "profiles",
    "load_policy": "models",
    # the training function (``grpo_core.train``, whatever submodule was imported before)
    "train": "loop",
    # reading a run (notebooks 09 and 11)
    "diagnose": "diagnosis",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'grpo_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"grpo_core.{module_name}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
