"""Forward + backward of ``grpo_core.grpo_loss`` against TRL 1.16's loss path, on the same tensors.

B = 64 completions, T = 512 tokens, given log-prob tensors (no model forward in either path):

- ours: ``grpo_loss(...)`` then ``loss.backward()``, metrics included;
- TRL: ``GRPOTrainer.compute_loss`` (``_compute_loss``) with ``_get_per_token_logps_and_entropies``
  patched to return the same tensors, then ``loss.backward()``; its metric logging is part of
  that path (it also averages the entropy it is given, which ours does not take).

Runs alternate between the two so machine load affects both alike; each figure is the median
over ``--repeats`` timings of ``--inner`` calls. Prints one line per configuration and the ratio
ours / TRL (below 1.0: ours is faster).

    python benchmarks/bench_loss.py [--repeats 31] [--inner 5] [--threads 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

for _name in (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
):
    os.environ.setdefault(_name, "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grpo_core.loss import grpo_loss  # noqa: E402

ROWS, WIDTH = 64, 512
CONFIGS = [  # (loss_type, beta, epsilon_high, reused rollout)
    ("grpo", 0.0, None, False),
    ("dapo", 0.0, None, False),
    ("grpo", 0.04, None, True),
    ("bnpo", 0.04, None, True),
    ("dr_grpo", 0.04, None, True),
    ("dapo", 0.04, 0.28, True),
]


def fixed_tensors(device: torch.device) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, WIDTH + 1, (ROWS,), generator=generator)
    mask = (torch.arange(WIDTH)[None] < lengths[:, None]).long()
    token_logps = -3 * torch.rand(ROWS, WIDTH, generator=generator) * mask
    tensors = {
        "token_logps": token_logps,
        "old": (token_logps + 0.2 * torch.randn(ROWS, WIDTH, generator=generator)) * mask,
        "ref": (token_logps + 0.2 * torch.randn(ROWS, WIDTH, generator=generator)) * mask,
        "mask": mask,
        "advantages": torch.randn(ROWS, generator=generator),
    }
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def build_trainer(folder: Path, device: torch.device, **config):
    """A real GRPOTrainer around a 1-layer Llama built offline (the loss path never calls it)."""
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    words = ["<pad>", "<eos>", "<unk>", "w"]
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    model = AutoModelForCausalLM.from_config(
        LlamaConfig(
            vocab_size=len(words),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            pad_token_id=0,
            eos_token_id=1,
        )
    )
    if not (folder / "config.json").exists():
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    model.config._name_or_path = str(folder)
    args = GRPOConfig(
        output_dir=str(folder / "out"),
        bf16=False,
        use_cpu=device.type == "cpu",
        report_to=[],
        save_strategy="no",
        activation_checkpointing=False,
        per_device_train_batch_size=ROWS,
        num_generations=8,
        max_completion_length=WIDTH,
        **config,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "w"}] * ROWS),
        processing_class=tokenizer,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def trl_step(trainer, tensors, reuse: bool, beta: float) -> None:
    token_logps = tensors["token_logps"].clone().requires_grad_()
    entropies = torch.zeros_like(token_logps)
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (
        token_logps,
        entropies,
        None,
    )
    mask = tensors["mask"]
    inputs = {
        "prompt_ids": torch.zeros(ROWS, 1, dtype=torch.long, device=mask.device),
        "prompt_mask": torch.ones_like(mask[:, :1]),
        "completion_ids": torch.zeros_like(mask),
        "completion_mask": mask,
        "advantages": tensors["advantages"],
        "num_items_in_batch": mask.sum(),
    }
    if reuse:
        inputs["old_per_token_logps"] = tensors["old"]
    if beta:
        inputs["ref_per_token_logps"] = tensors["ref"]
    trainer.compute_loss(trainer.model, inputs).backward()
    trainer._metrics["train"].clear()


def our_step(tensors, loss_type: str, beta: float, epsilon_high, reuse: bool) -> None:
    token_logps = tensors["token_logps"].clone().requires_grad_()
    loss, _ = grpo_loss(
        token_logps,
        tensors["old"] if reuse else None,
        tensors["advantages"],
        tensors["mask"],
        ref_token_logps=tensors["ref"] if beta else None,
        beta=beta,
        epsilon_high=epsilon_high,
        loss_type=loss_type,
        max_completion_length=WIDTH,
    )
    loss.backward()


def timed(step, inner: int, device: torch.device) -> float:
    """Seconds per call, averaged over ``inner`` calls."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(inner):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / inner


def compare(
    trainer, tensors, config, repeats: int, inner: int, device: torch.device
) -> tuple[float, float]:
    loss_type, beta, epsilon_high, reuse = config
    ours = lambda: our_step(tensors, loss_type, beta, epsilon_high, reuse)  # noqa: E731
    theirs = lambda: trl_step(trainer, tensors, reuse, beta)  # noqa: E731
    for _ in range(3):  # warm-up
        ours(), theirs()
    our_times, their_times = [], []
    for _ in range(repeats):
        our_times.append(timed(ours, inner, device))
        their_times.append(timed(theirs, inner, device))
    return statistics.median(our_times), statistics.median(their_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (0: torch's default)"
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    device = torch.device(options.device)
    tensors = fixed_tensors(device)
    print(
        f"grpo_loss vs TRL {__import__('trl').__version__} loss path: B={ROWS}, T={WIDTH}, device={device}, "
        f"threads={torch.get_num_threads()}, median of {options.repeats} x {options.inner} calls, forward + backward"
    )
    print(
        f"{'loss_type':<8} {'beta':>5} {'eps_high':>8} {'rollout':<9} {'ours ms':>8} {'TRL ms':>8} {'ratio':>6}"
    )
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for config in CONFIGS:
            loss_type, beta, epsilon_high, reuse = config
            trainer = build_trainer(
                Path(tmp), device, loss_type=loss_type, beta=beta, epsilon_high=epsilon_high
            )
            ours, theirs = compare(trainer, tensors, config, options.repeats, options.inner, device)
            ratios.append(ours / theirs)
            print(
                f"{loss_type:<8} {beta:>5} {str(epsilon_high):>8} {'reused' if reuse else 'on-policy':<9} "
                f"{ours * 1e3:>8.3f} {theirs * 1e3:>8.3f} {ours / theirs:>6.2f}"
            )
    geometric_mean = statistics.geometric_mean(ratios)
    print(
        f"ratio ours/TRL: geometric mean {geometric_mean:.2f}, worst {max(ratios):.2f} (aim: <= 1.0)"
    )


if __name__ == "__main__":
    main()
