"""LoRA adapters (peft): train a few small matrices instead of the whole model.

With an adapter the frozen base model *is* the reference: switching the adapter off gives
the policy before training, so a KL penalty (beta > 0) needs no second copy of the model
(notebook 04). peft is the library the field uses for this (TRL's ``peft_config`` too).

    policy = add_lora(model, rank=16)          # the base weights freeze, adapters train
    with adapter_disabled(policy):             # the reference's log-probs, same weights
        ref = token_logprobs(policy, ...)
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

DEFAULT_TARGETS = "all-linear"  # every linear layer of the blocks (not the output head)


def lora_config(rank: int, alpha: float | None = None,
                targets: str | Sequence[str] = DEFAULT_TARGETS) -> Any:
    """A ``peft.LoraConfig`` for a causal LM: ``rank``, ``alpha`` (default ``2 * rank``), no
    dropout (so a rollout's log-probs do not depend on a dropout mask), ``targets`` the module
    names to adapt (e.g. ``("q_proj", "v_proj")``) or ``"all-linear"``."""
    from peft import LoraConfig

    if not isinstance(rank, int) or rank < 1:
        raise ValueError(f"the LoRA rank must be an int >= 1, got {rank!r}")
    modules = targets if isinstance(targets, str) else list(targets)
    return LoraConfig(r=rank, lora_alpha=2 * rank if alpha is None else alpha, lora_dropout=0.0,
                      target_modules=modules, task_type="CAUSAL_LM")


def add_lora(model: Any, rank: int, alpha: float | None = None,
             targets: str | Sequence[str] = DEFAULT_TARGETS) -> Any:
    """``model`` with LoRA adapters (a ``peft.PeftModel``); only the adapters train."""
    from peft import get_peft_model

    with warnings.catch_warnings():  # peft asks transformers 5 for a renamed attribute
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        return get_peft_model(model, lora_config(rank, alpha, targets))


def has_adapter(model: Any) -> bool:
    """True for a ``peft`` model with adapters."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


@contextmanager
def adapter_disabled(model: Any) -> Iterator[Any]:
    """Inside this block ``model`` computes as its frozen base model: the reference policy."""
    with model.disable_adapter():
        yield model


def trainable_parameters(model: Any) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    return sum(p.numel() for p in model.parameters() if p.requires_grad), total


def load_adapter_weights(model: Any, folder: Any) -> None:
    """Load the adapter weights that ``model.save_pretrained(folder)`` wrote (a peft model saves
    its adapters only) into ``model`` (same adapter shape)."""
    from peft import set_peft_model_state_dict
    from peft.utils import load_peft_weights

    set_peft_model_state_dict(model, load_peft_weights(str(folder)))
