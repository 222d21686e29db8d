"""Precision, decided once: from the device, its capability and what was asked for to a plan,
and one place that applies the plan to a loaded model and to a ``TrainConfig``.

A plan has four parts (:class:`Precision`):

- **master weights** are float32 in every plan. The weights are loaded in float32 (a
  checkpoint stored in bfloat16, as Qwen3's is, is upcast exactly) and AdamW updates them in
  float32. In bfloat16 weights most steps of a small learning rate round away: bfloat16 keeps
  8 significant bits, so near a weight of 0.02 its spacing is about 1e-4, and an update of
  1e-6 (the ``gpu`` profile's learning rate) changes nothing;
- **autocast**: the dtype the matmuls of the forward and backward passes run in (bfloat16,
  float16, or none);
- **loss scaling** with float16 autocast (``torch.amp.GradScaler``): float16's small range
  would flush small gradients to zero;
- **a sampling copy**: on a CPU, rollouts are sampled from a copy of the policy whose linear
  layers are packed once per update for oneDNN's kernel (``grpo_core.packed``: a decoding
  step in float32 took 71 ms instead of 105 ms on the course's machine), in bfloat16 where the
  CPU has bfloat16 matrix instructions (decoding reads every weight once per token, so half
  the bytes is close to half the time) and in float32 elsewhere; on a GPU they are sampled
  from the policy under autocast.

What the device does best (``auto``):

| device | plan |
|---|---|
| GPU, compute capability >= 8.0 with bfloat16 (A100, L4, H100) | bfloat16 autocast |
| GPU, capability 7.x (T4, V100) | float16 autocast with loss scaling |
| older GPU | float32 |
| CPU with AMX or AVX512-BF16 | bfloat16 autocast, packed bfloat16 sampling copy |
| other CPUs | float32, packed float32 sampling copy |

(A CPU whose torch cannot pack, see :func:`grpo_core.packed.packing_available`, samples from
an unpacked bfloat16 copy, or from the policy itself in float32.)

Any plan can be forced on any device, with ``GRPO_PRECISION=auto|bfloat16|float16|float32``
(read by :func:`grpo_core.profiles.get_profile`) or ``--precision`` on the command line. CPU
autocast runs bfloat16 and float16, and ``GradScaler`` works on a CPU, so the GPU plans are
tested on a CPU.

Imports torch only where it asks the device what it can do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from grpo_core.profiles import PRECISION_CHOICES, Profile

FLOAT32 = "float32"
# every plan's: the loaded weights are the float32 master weights
LOAD_DTYPE = FLOAT32
# the dtypes a plan may autocast to or sample in
HALF_DTYPES: tuple[str, ...] = ("bfloat16", "float16")
# the dtypes a sampling copy may have (a float32 copy exists to be packed)
SAMPLING_DTYPES: tuple[str, ...] = (FLOAT32, *HALF_DTYPES)


@dataclass(frozen=True)
class Precision:
    """How to train on a device.

    Attributes:
        autocast: the autocast dtype of the forward and backward passes, or None (float32
            throughout).
        loss_scaling: scale the loss before backward (float16 autocast only).
        reason: one sentence for notebook 00 and ``config.json``: the plan and why.
        sampling_dtype: sample rollouts from a copy of the policy in this dtype, refreshed
            after every update; None samples from the policy itself.
        sampling_packed: the copy's linear layers are packed for the CPU's oneDNN kernel.
        requested: what was asked for (``auto``, ``bfloat16``, ``float16`` or ``float32``).
    """

    autocast: str | None
    loss_scaling: bool
    reason: str
    sampling_dtype: str | None = None
    requested: str = "auto"
    sampling_packed: bool = False

    @property
    def load_dtype(self) -> str:
        """The dtype the weights are loaded in and trained in: float32, in every plan."""
        return LOAD_DTYPE

    def describe(self) -> str:
        """The plan in one line: weights, autocast, loss scaling, sampling."""
        packed = " with packed linear layers" if self.sampling_packed else ""
        sampling = (f"a {self.sampling_dtype} copy{packed}" if self.sampling_dtype
                    else "the policy")
        return (f"weights {self.load_dtype}, autocast {self.autocast or 'off'}, loss scaling "
                f"{'on' if self.loss_scaling else 'off'}, rollouts sampled from {sampling}")


def _cpu_sampling(dtype: str, packing: frozenset[str]) -> dict[str, Any]:
    """A CPU plan's sampling copy: ``dtype``, packed where the CPU can pack it; an unpacked
    float32 copy would only repeat the policy, so then there is none."""
    if dtype in packing:
        return {"sampling_dtype": dtype, "sampling_packed": True}
    return {"sampling_dtype": None if dtype == FLOAT32 else dtype}


def _sampling_words(fields: dict[str, Any]) -> str:
    if fields.get("sampling_dtype") is None:
        return ""
    packed = "packed " if fields.get("sampling_packed") else ""
    return f", rollouts from a {packed}{fields['sampling_dtype']} copy"


def _forced(requested: str, device: str, where: str, packing: frozenset[str]) -> Precision:
    """The plan for ``requested`` (not ``auto``) on ``device``, whatever the device can do."""
    asked = f"forced on {where}"
    if requested == FLOAT32:
        fields = _cpu_sampling(FLOAT32, packing) if device == "cpu" else {}
        return Precision(None, False, f"float32 throughout{_sampling_words(fields)}: {asked}",
                         requested=requested, **fields)
    if requested == "float16":
        return Precision("float16", True, "float16 autocast with loss scaling, float32 master "
                         f"weights: {asked}", requested=requested)
    fields = _cpu_sampling("bfloat16", packing) if device == "cpu" else {}
    return Precision("bfloat16", False, f"bfloat16 autocast, float32 master "
                     f"weights{_sampling_words(fields)}: {asked}", requested=requested, **fields)


def choose_precision(device: str, *, capability: tuple[int, int] | None = None,
                     bf16_supported: bool = False, name: str = "the GPU",
                     requested: str = "auto", packing: frozenset[str] = frozenset()) -> Precision:
    """The plan for ``device`` (``"cuda"`` or ``"cpu"``) and what was ``requested``.

    Args:
        device: ``"cuda"`` or ``"cpu"``.
        capability: the GPU's compute capability (CUDA only).
        bf16_supported: torch reports bfloat16 support (CUDA), or the CPU has bfloat16
            matrix instructions (AMX or AVX512-BF16).
        name: the device's name, for the reason.
        requested: one of :data:`grpo_core.profiles.PRECISION_CHOICES`.
        packing: the dtypes whose linear weights this CPU's torch can pack
            (:func:`grpo_core.packed.packing_available`); none on a GPU.

    Raises:
        ValueError: ``requested`` is not one of the choices.
    """
    if requested not in PRECISION_CHOICES:
        raise ValueError(f"precision must be one of {PRECISION_CHOICES}, got {requested!r}")
    major, minor = capability or (0, 0)
    where = f"{name} (compute capability {major}.{minor})" if device == "cuda" else "this CPU"
    if requested != "auto":
        return _forced(requested, device, where, packing)
    if device != "cuda":
        if bf16_supported:
            fields = _cpu_sampling("bfloat16", packing)
            return Precision("bfloat16", False, "bfloat16 autocast, float32 master "
                             f"weights{_sampling_words(fields)}: this CPU has bfloat16 matrix "
                             "instructions (AMX/AVX512-BF16)", **fields)
        fields = _cpu_sampling(FLOAT32, packing)
        return Precision(None, False, f"float32{_sampling_words(fields)}: this CPU has no "
                         "bfloat16 matrix instructions", **fields)
    if bf16_supported and major >= 8:
        return Precision("bfloat16", False, f"bfloat16 autocast, float32 master weights: {where} "
                         "has bfloat16 tensor cores")
    if major >= 7:
        return Precision("float16", True, "float16 autocast with loss scaling, float32 master "
                         f"weights: {where} has float16 but no bfloat16 tensor cores")
    return Precision(None, False, f"float32: {where} has no fast half-precision matmuls")


# oneDNN's ISA caps (ONEDNN_MAX_CPU_ISA) that still allow its bfloat16 matrix instructions
ONEDNN_BF16_ISAS = frozenset({
    "ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16",
    "AVX10_2_512", "AVX10_2_512_AMX_2"})


def cpu_has_bf16() -> bool:
    """True when torch's CPU kernels can use bfloat16 matrix instructions (AMX or AVX512-BF16):
    the CPU has them, and neither torch's kernels (``ATEN_CPU_CAPABILITY``, e.g. ``avx2``) nor
    oneDNN's (``ONEDNN_MAX_CPU_ISA``, e.g. ``AVX2``) are held below them, as they are when an
    AVX-512 machine stands in for a laptop without it."""
    import torch

    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        return False
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").strip().upper()
    if cap not in ONEDNN_BF16_ISAS:
        return False
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def detect_precision(device: str, requested: str = "auto") -> Precision:
    """:func:`choose_precision` for the current CUDA device, or for this CPU."""
    if device != "cuda":
        from grpo_core.packed import packing_available

        packing = frozenset(d for d in (FLOAT32, "bfloat16") if packing_available(d))
        return choose_precision(device, bf16_supported=cpu_has_bf16(), requested=requested,
                                packing=packing)
    import torch

    return choose_precision(
        "cuda", capability=torch.cuda.get_device_capability(),
        bf16_supported=torch.cuda.is_bf16_supported(), name=torch.cuda.get_device_name(),
        requested=requested)


def precision_plan(profile: Profile) -> Precision:
    """The plan for ``profile``: its device and its ``precision`` (which ``get_profile`` took
    from ``GRPO_PRECISION``, the command line's ``--precision`` or the profile's default)."""
    plan = detect_precision(profile.device, profile.precision)
    if profile.precision_reason:
        why = f"{profile.precision}: {profile.precision_reason}"
    elif profile.precision != "auto":
        why = f"{profile.precision}: the {profile.name} profile's default"
    else:
        return plan
    return replace(plan, reason=f"{plan.reason} ({why})")


def config_fields(plan: Precision) -> dict[str, Any]:
    """The ``TrainConfig`` fields a plan decides: ``autocast_dtype``, ``loss_scaling``,
    ``sampling_dtype`` and ``sampling_packed``."""
    return {"autocast_dtype": plan.autocast, "loss_scaling": plan.loss_scaling,
            "sampling_dtype": plan.sampling_dtype, "sampling_packed": plan.sampling_packed}


def apply_to_model(model: Any, plan: Precision) -> Any:
    """Make ``model``'s weights the plan's float32 master weights (in place; returns it).

    A model loaded in half precision (a checkpoint's own dtype, or an explicit ``dtype=``) is
    cast up, so that the optimizer's small steps are not rounded away."""
    import torch

    target = getattr(torch, plan.load_dtype)
    if any(p.is_floating_point() and p.dtype != target for p in model.parameters()):
        model.to(target)
    return model
