"""The course's GPU check: one short run on a GPU machine that has the working tree but no Hub.

Measures, in the ``gpu`` profile's precision (``grpo_core.hardware.detect_precision``) and its
sizes (8 prompts x k = 8, 256 new tokens):

- one GRPO step of our loop and of TRL's ``GRPOTrainer`` (median of ``--steps`` after one
  warm-up), rollout tokens/s for each, and the peak GPU memory of each;
- the memory plan's prediction for this GPU beside the measured peak;
- a few steps of experiment 1 (length reward) through our loop.

The model is the offline SmolLM2-135M-Instruct when its package is installed there; otherwise
the same architecture (its ``config.json``, carried in ``.gpu_check/``) with random weights:
every matrix has the real model's shape, so a step costs the same work, but a random model
never stops early, so every completion runs to the token budget (the heaviest case). The
report says which model ran. Writes ``report.json`` and ``report.md`` to ``--out``; the
README's GPU column is filled from ``report.md``.

    python tools/gpu_check.py --out "$OUT"            # on the GPU machine (tools/gpu_check.sh)
    python tools/gpu_check.py --device cpu --smoke    # here: the same code path, tiny sizes
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CARRIED = ROOT / ".gpu_check" / "smollm2"


def load_model(device: str, dtype: Any) -> tuple[Any, Any, str]:
    """The offline model if installed, else its architecture with random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from grpo_core.models import ModelNotInstalledError, load_policy, prepare_tokenizer
    from grpo_core.profiles import get_profile

    try:
        model, tokenizer = load_policy(get_profile("cpu").with_overrides(device=device))
        return model.to(dtype), tokenizer, "SmolLM2-135M-Instruct (offline package)"
    except ModelNotInstalledError:
        pass
    if not (CARRIED / "config.json").exists():
        raise SystemExit(f"no offline model and no carried config in {CARRIED}: run "
                         "`tools/gpu_check.sh prepare` on the development machine first")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(CARRIED), dtype=dtype)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(CARRIED))
    return model.to(device).eval(), tokenizer, "SmolLM2-135M architecture, random weights"


def sizes(smoke: bool) -> dict[str, int]:
    if smoke:
        return {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 8}
    from grpo_core.profiles import get_profile

    gpu = get_profile("gpu")
    return {"group_size": gpu.group_size, "prompts_per_step": gpu.prompts_per_step,
            "max_new_tokens": gpu.max_new_tokens}


def peak_gib(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None


def reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def timed_generate(model: Any, log: list[tuple[float, int]], device: str) -> None:
    """Record (seconds, new tokens) of every ``generate`` call."""
    import torch

    original = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = original(*args, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
        width = (kwargs.get("input_ids") if "input_ids" in kwargs else args[0]).shape[1]
        log.append((time.perf_counter() - start, int(output[:, width:].numel())))
        return output

    model.generate = generate


def ours(device: str, precision: Any, shape: dict[str, int], steps: int,
         learning_rate: float = 0.0) -> dict[str, Any]:
    """Our loop at the gpu profile's settings (learning rate 0 by default: every step does the
    same work)."""
    import torch

    from grpo_core.loop import TrainConfig, train
    from grpo_core.rewards import length_reward
    from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

    reset_peak(device)
    model, tokenizer, which = load_model(device, torch.float32)
    generations: list[tuple[float, int]] = []
    timed_generate(model, generations, device)
    config = TrainConfig(**shape, max_steps=steps + 1, learning_rate=learning_rate,
                         loss_type="grpo", beta=0.0, save_checkpoint=False,
                         autocast_dtype=precision.autocast, loss_scaling=precision.loss_scaling)
    rows = read_jsonl(EXP1_PROMPTS)
    result = train(model, tokenizer, rows, length_reward, config, progress=False)
    return {"model": which, "step_times": [r["step_time"] for r in result.metrics[1:]],
            "rollout_tokens_per_s": _throughput(generations[1:]), "peak_gib": peak_gib(device),
            "metrics": result.metrics}


def trl(device: str, precision: Any, shape: dict[str, int], steps: int) -> dict[str, Any]:
    """TRL's GRPOTrainer at the same settings and precision."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_core.rewards import length_reward
    from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

    reset_peak(device)
    model, tokenizer, which = load_model(device, torch.float32)
    generations: list[tuple[float, int]] = []
    timed_generate(model, generations, device)
    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if device == "cuda":
                torch.cuda.synchronize()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.start)

    rows = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in read_jsonl(EXP1_PROMPTS)]
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, bf16=precision.autocast == "bfloat16",
            fp16=precision.autocast == "float16", use_cpu=device == "cpu", report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True, max_steps=steps + 1,
            num_generations=shape["group_size"],
            per_device_train_batch_size=shape["group_size"] * shape["prompts_per_step"],
            max_completion_length=shape["max_new_tokens"], learning_rate=0.0, beta=0.0,
            loss_type="grpo", temperature=1.0, top_p=1.0, seed=0, lr_scheduler_type="constant")
        GRPOTrainer(model=model, reward_funcs=length_reward, args=args,
                    train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                    callbacks=[StepTimer()]).train()
    return {"model": which, "step_times": times[1:],
            "rollout_tokens_per_s": _throughput(generations[1:]), "peak_gib": peak_gib(device)}


def _throughput(generations: list[tuple[float, int]]) -> float:
    seconds = sum(s for s, _ in generations)
    return sum(t for _, t in generations) / seconds if seconds else float("nan")


def report_markdown(report: dict[str, Any]) -> str:
    lines = [f"# GPU check, {report['device_name']}", "",
             f"precision: {report['precision']}", f"model: {report['model']}",
             f"sizes: {report['sizes']}", "", "| what | ours | TRL |", "|---|---|---|"]
    o, t = report["ours"], report.get("trl") or {}
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines.append(f"| median step (s) | {fmt(statistics.median(o['step_times']), '.2f')} | "
                 f"{fmt(statistics.median(t['step_times']) if t else None, '.2f')} |")
    lines.append(f"| rollout tokens/s | {fmt(o['rollout_tokens_per_s'], '.0f')} | "
                 f"{fmt(t.get('rollout_tokens_per_s'), '.0f')} |")
    lines.append(f"| peak GPU memory (GiB) | {fmt(o['peak_gib'], '.2f')} | "
                 f"{fmt(t.get('peak_gib'), '.2f')} |")
    lines += ["", f"memory plan for this GPU: {report['memory_plan']}", "",
              "experiment 1 (length reward, lr 2e-5), mean characters per step: "
              + ", ".join(f"{c:.0f}" for c in report["exp1_mean_chars"])]
    if report.get("trl_error"):
        lines += ["", f"TRL did not run: {report['trl_error']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--exp1-steps", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the CPU test)")
    parser.add_argument("--out", default=str(ROOT / "out" / "gpu_check"))
    args = parser.parse_args(argv)
    import torch

    from grpo_core.hardware import detect_precision, plan_for_model

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run this on the GPU machine (or --device cpu)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    precision = detect_precision(args.device)
    shape = sizes(args.smoke)
    report: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__, "precision": precision.reason, "sizes": shape}
    print(f"{report['device_name']}: {precision.reason}; sizes {shape}", flush=True)
    report["ours"] = ours(args.device, precision, shape, args.steps)
    report["model"] = report["ours"].pop("model")
    report["ours"].pop("metrics")
    try:
        report["trl"] = trl(args.device, precision, shape, args.steps)
    except ImportError as error:  # no TRL on the machine: say so, keep the rest
        report["trl"], report["trl_error"] = None, str(error)
    model, tokenizer, _ = load_model(args.device, torch.float32)
    total = torch.cuda.get_device_properties(0).total_memory if args.device == "cuda" else 0
    plan = plan_for_model(model, tokenizer, ["Tell me about the ocean."], total or 16 * 2**30,
                          batch_rows=shape["group_size"] * shape["prompts_per_step"],
                          completion_tokens=shape["max_new_tokens"], precision=precision)
    report["memory_plan"] = plan.describe()
    del model
    exp1 = ours(args.device, precision, shape, args.exp1_steps - 1, learning_rate=2e-5)
    report["exp1_mean_chars"] = [r["completions/mean_chars"] for r in exp1["metrics"]]
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(report_markdown(report))
    print(report_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
