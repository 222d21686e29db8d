"""What a GPU can hold: a memory plan that fits one GRPO step on the device.

:func:`memory_plan` adds up what one GRPO step holds on the GPU (weights, gradients, AdamW's
two moments, a reference model when beta > 0, the activations and logits of one micro-batch)
and picks the largest micro-batch that fits, turning on gradient checkpointing only when even
one row does not fit otherwise. The figures are estimates from the model's shape (stated in
:class:`MemoryPlan`), not measurements; ``tools/gpu_check.sh`` measures the peak on a device.
The precision (float32 master weights, bfloat16 or float16 autocast) is decided in
``grpo_core.precision``.

Everything but :func:`lora_parameters` and :func:`plan_for_model` (which read a loaded model) is
arithmetic on the model's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_core.precision import Precision
from grpo_core.rollout import chat_prompt

GIB = 1024**3
# usable fraction of the GPU's memory (the CUDA context, the allocator's fragmentation)
USABLE_FRACTION = 0.88
# activations kept per token per layer, in elements of the compute dtype, beyond the count
# below (norm inputs kept in float32, the residual stream, rotary tables): a safety factor
ACTIVATION_SLACK = 1.5
# per completion token and vocabulary entry: the logits (2 bytes), their float32 log-softmax
# (4) and its gradient (4)
LOGIT_BYTES = 10


@dataclass(frozen=True)
class ModelShape:
    """What the memory of a decoder-only transformer depends on."""

    params: int
    layers: int
    hidden: int
    intermediate: int
    kv_dim: int  # key/value heads x head dim
    vocab: int

    @classmethod
    def from_config(cls, config: Any, params: int) -> ModelShape:
        """From a transformers config (Llama, Qwen3...) and the parameter count."""
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        return cls(params, config.num_hidden_layers, config.hidden_size,
                   config.intermediate_size, kv_heads * head_dim, config.vocab_size)


# Qwen/Qwen3-0.6B's config.json: 28 layers, hidden 1024, MLP 3072, 8 KV heads x 128, vocabulary
# 151,936, tied embeddings: 596,049,920 parameters
QWEN3_0_6B = ModelShape(596_049_920, 28, 1024, 3072, 1024, 151_936)
GPUS_GIB = {"T4 (16 GB)": 15.0, "L4 (24 GB)": 22.0, "A100 / H100 (80 GB)": 79.3}


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes one GRPO step holds, and the micro-batch that fits.

    Attributes:
        weights, gradients, optimizer, reference: bytes of the float32 master weights, their
            gradients (only the trainable ones), AdamW's two float32 moments, and the frozen
            reference copy (beta > 0 without LoRA; 0 otherwise).
        per_row: activations and logits of one completion row in the forward/backward.
        budget: what is left for the micro-batch.
        micro_batch_size: the rows per forward/backward (a divisor of the batch), 0 if even
            one row does not fit.
        gradient_checkpointing: whether the plan needs it (recompute activations per layer).
    """

    weights: int
    gradients: int
    optimizer: int
    reference: int
    per_row: int
    budget: int
    micro_batch_size: int
    gradient_checkpointing: bool

    @property
    def fits(self) -> bool:
        return self.micro_batch_size > 0

    def describe(self) -> str:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        if not self.fits:
            return (f"does not fit: {gib(self.weights + self.gradients + self.optimizer)} of weights, "
                    "gradients and AdamW state alone; use LoRA (--lora) or a larger GPU")
        checkpointing = "on" if self.gradient_checkpointing else "off"
        return (f"weights {gib(self.weights)}, gradients {gib(self.gradients)}, AdamW "
                f"{gib(self.optimizer)}, reference {gib(self.reference)}, {gib(self.per_row)} per "
                f"row -> micro-batch {self.micro_batch_size}, gradient checkpointing {checkpointing}")


def activation_bytes(shape: ModelShape, tokens: int, completion_tokens: int,
                     checkpointing: bool, element_bytes: int = 2) -> int:
    """Activations and logits one row keeps for the backward pass.

    Without checkpointing each layer keeps, per token, its two norm outputs, Q, K and V, the
    attention output, and the MLP's gate, up, activation and down inputs (memory-efficient
    attention: no T x T matrix). With checkpointing only each layer's input is kept, plus one
    layer's activations while it is recomputed.
    """
    per_layer = 4 * shape.hidden + 2 * shape.kv_dim + 4 * shape.intermediate
    per_token = ACTIVATION_SLACK * element_bytes * per_layer
    if checkpointing:
        kept = tokens * (shape.layers * shape.hidden * element_bytes + per_token)
    else:
        kept = tokens * shape.layers * per_token
    return int(kept + completion_tokens * shape.vocab * LOGIT_BYTES)


def memory_plan(shape: ModelShape, gpu_bytes: float, *, batch_rows: int, prompt_tokens: int,
                completion_tokens: int, beta: float = 0.0, trainable: int | None = None,
                precision: Precision | None = None) -> MemoryPlan:
    """The micro-batch size (and whether gradient checkpointing is needed) for one step.

    Args:
        shape: the model (:data:`QWEN3_0_6B`, or :meth:`ModelShape.from_config`).
        gpu_bytes: the GPU's total memory.
        batch_rows: completions per step (prompts x group size); the micro-batch divides it.
        prompt_tokens, completion_tokens: the longest prompt and the completion budget.
        beta: a reference model is kept when beta > 0 and the whole model trains.
        trainable: trainable parameters (LoRA's adapters); default: all of them.
        precision: the compute precision (bfloat16/float16 activations, or float32).
    """
    trainable = shape.params if trainable is None else trainable
    element = 4 if precision is not None and precision.autocast is None else 2
    weights, gradients, optimizer = 4 * shape.params, 4 * trainable, 8 * trainable
    reference = 4 * shape.params if beta > 0 and trainable == shape.params else 0
    budget = int(USABLE_FRACTION * gpu_bytes) - weights - gradients - optimizer - reference
    tokens = prompt_tokens + completion_tokens
    for checkpointing in (False, True):
        per_row = activation_bytes(shape, tokens, completion_tokens, checkpointing, element)
        fitting = [m for m in range(batch_rows, 0, -1)
                   if batch_rows % m == 0 and m * per_row <= budget]
        if fitting:
            return MemoryPlan(weights, gradients, optimizer, reference, per_row, budget,
                              fitting[0], checkpointing)
    return MemoryPlan(weights, gradients, optimizer, reference, per_row, budget, 0, True)


def lora_parameters(model: Any, rank: int, targets: str | tuple[str, ...] = "all-linear") -> int:
    """How many parameters rank-``rank`` LoRA adapters would add to ``model``'s linear layers
    (``r * (d_in + d_out)`` each; ``"all-linear"`` skips the output head, as peft does)."""
    import torch

    total = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.endswith("lm_head"):
            continue
        if targets != "all-linear" and name.rsplit(".", 1)[-1] not in targets:
            continue
        total += rank * (module.in_features + module.out_features)
    return total


def plan_for_model(model: Any, tokenizer: Any, prompts: list[str], gpu_bytes: float, *,
                   batch_rows: int, completion_tokens: int, beta: float = 0.0,
                   precision: Precision | None = None, lora_rank: int = 0,
                   lora_targets: str | tuple[str, ...] = "all-linear") -> MemoryPlan:
    """:func:`memory_plan` for a loaded model, its trainable parameters (or the LoRA adapters
    ``lora_rank`` would add) and the longest of ``prompts`` after the chat template
    (``grpo_core.rollout.chat_prompt``)."""
    params = sum(p.numel() for p in model.parameters())
    trainable = (lora_parameters(model, lora_rank, lora_targets) if lora_rank else
                 sum(p.numel() for p in model.parameters() if p.requires_grad))
    longest = max(len(tokenizer(chat_prompt(tokenizer, text))["input_ids"]) for text in prompts)
    return memory_plan(ModelShape.from_config(model.config, params), gpu_bytes,
                       batch_rows=batch_rows, prompt_tokens=longest,
                       completion_tokens=completion_tokens, beta=beta, trainable=trainable,
                       precision=precision)


def memory_table(shape: ModelShape = QWEN3_0_6B, gpus: dict[str, float] = GPUS_GIB,
                 **settings: Any) -> list[dict[str, Any]]:
    """:func:`memory_plan` for each GPU of ``gpus`` (``{name: GiB}``), as table rows."""
    rows = []
    for name, gib in gpus.items():
        plan = memory_plan(shape, gib * GIB, **settings)
        rows.append({"gpu": name, "fixed GiB": round((plan.weights + plan.gradients +
                                                      plan.optimizer + plan.reference) / GIB, 1),
                     "per row GiB": round(plan.per_row / GIB, 2),
                     "micro-batch": plan.micro_batch_size,
                     "checkpointing": plan.gradient_checkpointing})
    return rows
