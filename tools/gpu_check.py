"""The course's GPU check: one short run on a GPU machine that has the working tree but no Hub.

Measures, in the ``gpu`` profile's precision plan (``grpo_core.precision.precision_plan``:
float32 master weights, bfloat16 autocast, or float16 with loss scaling on a T4;
``GRPO_PRECISION`` forces another) and its sizes (8 prompts x k = 8, 256 new tokens):

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
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CARRIED = ROOT / ".gpu_check" / "smollm2"


def load_model(device: str, plan: Any) -> tuple[Any, Any, str]:
    """The offline model if installed, else its architecture with random weights; either way
    with ``plan``'s master weights (``grpo_core.precision.apply_to_model``)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from grpo_core.models import ModelNotInstalledError, load_policy, prepare_tokenizer
    from grpo_core.precision import apply_to_model
    from grpo_core.profiles import get_profile

    try:
        model, tokenizer = load_policy(get_profile("cpu").with_overrides(device=device))
        return apply_to_model(model, plan), tokenizer, "SmolLM2-135M-Instruct (offline package)"
    except ModelNotInstalledError:
        pass
    if not (CARRIED / "config.json").exists():
        raise SystemExit(f"no offline model and no carried config in {CARRIED}: run "
                         "`tools/gpu_check.sh prepare` on the development machine first")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(CARRIED),
                                             dtype=getattr(torch, plan.load_dtype))
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(CARRIED))
    return apply_to_model(model, plan).to(device).eval(), tokenizer, "SmolLM2-135M architecture, random weights"


def sizes(smoke: bool) -> dict[str, int]:
    if smoke:
        return {"group_size": 2, "prompts_per_step": 2, "max_new_tokens": 8}
    from grpo_core.profiles import get_profile

    gpu = get_profile("gpu")
    return {"group_size": gpu.group_size, "prompts_per_step": gpu.prompts_per_step,
            "max_new_tokens": gpu.max_new_tokens}


def reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def exp1_steps(device: str, precision: Any, shape: dict[str, int], steps: int,
               out: Path) -> tuple[list[float], dict[str, Any]]:
    """A few real steps of experiment 1 (learning rate 2e-5), written to ``out`` as a run
    folder: the mean characters per step, and the run's provenance as its ``config.json``
    records it (``code`` and ``draws``: what decides a GPU run's draws)."""
    from grpo_core.loop import TrainConfig, train
    from grpo_core.precision import config_fields
    from grpo_core.rewards import length_reward
    from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

    model, tokenizer, _ = load_model(device, precision)
    config = TrainConfig(**shape, max_steps=steps, learning_rate=2e-5, loss_type="grpo",
                         beta=0.0, save_checkpoint=False, **config_fields(precision))
    result = train(model, tokenizer, read_jsonl(EXP1_PROMPTS), length_reward, config, out,
                   progress=False)
    recorded = json.loads((out / "config.json").read_text())
    return ([record["completions/mean_chars"] for record in result.metrics],
            {key: recorded.get(key) for key in ("code", "draws")})


def report_markdown(report: dict[str, Any]) -> str:
    from grpo_core.provenance import short_commit

    lines = [f"# GPU check, {report['device_name']}", "",
             f"precision: {report['precision']}", f"model: {report['model']}",
             f"sizes: {report['sizes']}", "", "| what | ours | TRL |", "|---|---|---|"]
    o, t = report["ours"], report.get("trl") or {}
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    lines.append(f"| median step (s) | {fmt(o['median_step_s'], '.2f')} | "
                 f"{fmt(t.get('median_step_s'), '.2f')} |")
    lines.append(f"| rollout tokens/s | {fmt(o['rollout_tokens_per_s'], '.0f')} | "
                 f"{fmt(t.get('rollout_tokens_per_s'), '.0f')} |")
    lines.append(f"| peak memory, {o['memory_kind']} (GiB) | {fmt(o['peak_memory_gib'], '.2f')} | "
                 f"{fmt(t.get('peak_memory_gib'), '.2f')} |")
    lines += ["", f"memory plan for this GPU: {report['memory_plan']}", "",
              "experiment 1 (length reward, lr 2e-5), mean characters per step: "
              + ", ".join(f"{c:.0f}" for c in report["exp1_mean_chars"])]
    provenance = report.get("exp1_provenance") or {}
    if provenance.get("draws"):
        draws = provenance["draws"]
        lines += ["", f"its draws ({draws['id']}): {draws['sampler']}; device {draws['device']}, "
                      f"torch {draws['torch']}, transformers {draws['transformers']}; "
                      f"code: {short_commit(provenance.get('code'))}"]
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

    from grpo_core.hardware import plan_for_model
    from grpo_core.precision import precision_plan
    from grpo_core.profiles import get_profile

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run this on the GPU machine (or --device cpu)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    precision = precision_plan(get_profile("gpu").with_overrides(device=args.device))
    shape = sizes(args.smoke)
    report: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__, "precision": precision.reason, "sizes": shape}
    print(f"{report['device_name']}: {precision.reason}; sizes {shape}", flush=True)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_step  # the same step our CPU benchmark times, at the gpu profile's settings

    total = torch.cuda.get_device_properties(0).total_memory if args.device == "cuda" else 0

    def loader(device: str) -> tuple[Any, Any]:
        model, tokenizer, report["model"] = load_model(device, precision)
        if "memory_plan" not in report:  # the plan needs the model's shape, not another load
            plan = plan_for_model(model, tokenizer, ["Tell me about the ocean."],
                                  total or 16 * 2**30,
                                  batch_rows=shape["group_size"] * shape["prompts_per_step"],
                                  completion_tokens=shape["max_new_tokens"], precision=precision)
            report["memory_plan"] = plan.describe()
        return model, tokenizer

    reset_peak(args.device)
    report["ours"] = bench_step.run_ours(args.steps, args.device, sizes=shape,
                                         precision=precision, loader=loader)
    try:
        reset_peak(args.device)
        report["trl"] = bench_step.run_trl(args.steps, args.device, sizes=shape,
                                           precision=precision, loader=loader)
    except ImportError as error:  # no TRL on the machine: say so, keep the rest
        report["trl"], report["trl_error"] = None, str(error)
    report["exp1_mean_chars"], report["exp1_provenance"] = exp1_steps(
        args.device, precision, shape, args.exp1_steps, out / "exp1")
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(report_markdown(report))
    print(report_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
