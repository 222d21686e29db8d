"""One GRPO step of ``grpo_core``'s loop against TRL 1.16's ``GRPOTrainer``, same model and prompts.

A step is: sample k = 8 completions for each of 2 prompts (64 new tokens at most), score them
with experiment 1's length reward, compute advantages and log-probs, the ``grpo`` loss,
backward, gradient clipping and one AdamW step. Both sides use the offline SmolLM2-135M,
beta = 0 (no reference model), ``loss_type="grpo"``, temperature 1, learning rate 0 (every
step still does the AdamW update; the model does not change, so completion lengths, and the
work per step, stay the same from step to step).

Two precisions, each given to both sides: the course's default on this device
(``grpo_core.precision.detect_precision``: bfloat16 autocast with float32 master weights where
the CPU has AMX/AVX512-BF16, TRL with ``bf16=True``; ours also samples from a bfloat16 copy)
and float32 throughout. Each run is its own subprocess (so each peak memory is its own):
one warm-up step, then ``--steps`` timed steps; the runs alternate ours, TRL, ours, TRL
(``--rounds`` times) so that a drift in the machine's load hits both sides.

Printed per implementation and precision: the median step time over every timed step (wall
clock, sampling included), the rollout throughput (completion tokens, up to and including
the first EOS, per second of sampling) and its fraction of a bound measured on this machine
(rows x read bandwidth / bytes of weights read per decoding step: each step of a batched
decode reads every weight once), a decoding step's own time (a rollout's seconds over its
decoding steps) beside the time of reading the weights once and the time of its arithmetic
(rows x 2 FLOP per weight) at the CPU's measured matmul peak in the sampling precision (the
best 2048-cubed product): in float32 on a CPU without AVX-512, 16 rows are enough arithmetic
for the second to exceed the first, so the bandwidth bound cannot be reached there. Then
the peak memory (resident set size on CPU,
``torch.cuda.max_memory_allocated`` on a GPU). The last line is the ratio ours / TRL at the
default precision. The first line names the CPU, its flags that decide the plan (avx2,
avx512f, avx512_bf16, amx_bf16) and the load average, printed again with each precision's
figures: on a shared machine, read the figures beside the load.

Each decoding step is also given as a share of its limit, the larger of the two: what the
step would take if it did nothing but read the weights or nothing but its arithmetic.
``--isa avx2`` runs everything (this process, so the matmul peak too, and every child) with
torch's and oneDNN's kernels held to AVX2 (``ATEN_CPU_CAPABILITY=avx2``,
``ONEDNN_MAX_CPU_ISA=AVX2``): any CPU here then stands for a laptop without AVX-512.
``--busy-core`` measures every run a second time with a busy loop pinned to one core (another
program at the same priority, as on a learner's laptop) and prints busy / idle per
implementation. Both sides load the model with the course's loader, so both get the course's
thread plan (``grpo_core.threads``: one thread per core no other program keeps busy; each
run's line says how many); ``--threads N`` forces N on both.

    python benchmarks/bench_step.py [--steps 3] [--rounds 2] [--threads 0] [--device cpu|cuda]
                                    [--isa native|avx2] [--busy-core]

Timings on a shared machine are noisy: compare figures from the same invocation only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE",
              "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import busy_loop, cpu_description, isa_description, run_with_isa  # noqa: E402

GROUP, PROMPTS_PER_STEP, NEW_TOKENS, LR = 8, 2, 64, 0.0  # lr 0: lengths stay put, steps comparable
SIZES = {"group_size": GROUP, "prompts_per_step": PROMPTS_PER_STEP, "max_new_tokens": NEW_TOKENS}


def _completion_tokens(new_ids, eos_ids: list[int]) -> int:
    from grpo_core.logprobs import completion_mask

    return int(completion_mask(new_ids, eos_ids).sum())


def _eos_ids(model, tokenizer) -> list[int]:
    eos = {tokenizer.eos_token_id}
    configured = model.generation_config.eos_token_id
    eos.update(configured if isinstance(configured, list) else [configured])
    return sorted(i for i in eos if i is not None)


def _clock(device: str) -> float:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()


def timed_generate(model, tokenizer, log: list[tuple[float, int, int]]) -> None:
    """Wrap ``model.generate`` (TRL samples with it) to record (seconds, completion tokens,
    decoding steps)."""
    original, eos_ids, device = model.generate, _eos_ids(model, tokenizer), model.device.type

    def generate(*args, **kwargs):
        start = _clock(device)
        output = original(*args, **kwargs)
        seconds = _clock(device) - start
        prompt_width = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
        log.append((seconds, _completion_tokens(output[:, prompt_width:], eos_ids),
                    output.shape[1] - prompt_width))
        return output

    model.generate = generate


def timed_decode(log: list[tuple[float, int, int]]) -> None:
    """Wrap ``grpo_core.rollout.decode_until`` (our loop samples with it) the same way."""
    from grpo_core import rollout

    original = rollout.decode_until

    def decode_until(model, input_ids, attention_mask, **kwargs):
        start = _clock(input_ids.device.type)
        new_ids, stopped_at = original(model, input_ids, attention_mask, **kwargs)
        seconds = _clock(input_ids.device.type) - start
        log.append((seconds, _completion_tokens(new_ids, kwargs["eos_token_ids"]),
                    new_ids.shape[1]))
        return new_ids, stopped_at

    rollout.decode_until = decode_until


def weight_bytes(model, dtype=None) -> int:
    """Bytes one forward pass reads from the weights (in ``dtype`` if given, else as stored)."""
    return sum(p.numel() * (p.element_size() if dtype is None else dtype.itemsize)
               for p in model.parameters())


def read_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes per second this machine reads from memory: the best of ``repeats`` sums over a
    buffer far larger than the caches."""
    import torch

    buffer = torch.ones(megabytes * 2**20 // 4)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - start)
    return buffer.numel() * 4 / best


def matmul_peak(dtype_name: str = "float32", size: int = 2048, repeats: int = 5) -> float:
    """Multiply-add FLOP per second this machine sustains in ``dtype_name``: the best of
    ``repeats`` ``size``-cubed matrix products (large enough for the kernel's best blocking)."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b  # warm-up: thread pool and the kernel's first call
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def limit_share(result: dict, bandwidth: float | None, rows: int,
                peak_flops: float | None) -> float | None:
    """A decoding step's limit over its measured time: the limit is the larger of reading
    the weights once and its arithmetic at the matmul peak (None without both)."""
    if not (bandwidth and peak_flops and result["decode_step_s"]):
        return None
    read = result["weight_bytes_per_decode_step"] / bandwidth
    arithmetic = rows * result["flop_per_row_per_decode_step"] / peak_flops
    return max(read, arithmetic) / result["decode_step_s"]


def load(device: str):
    from grpo_core.models import load_policy
    from grpo_core.profiles import get_profile

    profile = get_profile("cpu").with_overrides(device=device)
    return load_policy(profile)


def prompts() -> list[str]:
    from grpo_core.run_files import EXP1_PROMPTS, read_jsonl

    return [row["prompt"] for row in read_jsonl(EXP1_PROMPTS)]


def run_ours(steps: int, device: str, *, sizes: dict[str, int] = SIZES, precision=None,
             loader=load) -> dict:
    """Our loop: one warm-up step, then ``steps`` timed ones. ``precision``: a
    ``grpo_core.precision.Precision`` (None: float32); ``loader(device) -> (model, tokenizer)``."""
    from grpo_core.loop import TrainConfig, train
    from grpo_core.rewards import length_reward

    model, tokenizer = loader(device)
    generations: list[tuple[float, int]] = []
    timed_decode(generations)
    from grpo_core.experiments import device_settings
    from grpo_core.precision import apply_to_model, config_fields, detect_precision

    # float32 as a CPU without bfloat16 instructions runs it (a packed float32 sampling copy)
    precision = precision or detect_precision(device, "float32")
    apply_to_model(model, precision)
    sampling = precision.sampling_dtype
    config = TrainConfig(**sizes, max_steps=steps + 1, learning_rate=LR, loss_type="grpo",
                         beta=0.0, save_checkpoint=False, keep_samples=False,
                         **config_fields(precision), **device_settings(device))  # the course's
    result = train(model, tokenizer, prompts(), length_reward, config, progress=False)
    step_times = [r["step_time"] for r in result.metrics[1:]]
    phases = {key: statistics.median(r[key] for r in result.metrics[1:])
              for key in result.metrics[-1] if key.startswith("time/")}
    import torch

    read = weight_bytes(model, None if sampling is None else getattr(torch, sampling))
    return summary("grpo_core", step_times, generations[1:], device, read,
                   sum(p.numel() for p in model.parameters()), phases)


def run_trl(steps: int, device: str, *, sizes: dict[str, int] = SIZES, precision=None,
            loader=load) -> dict:
    """TRL's GRPOTrainer at the same sizes and precision (its bf16/fp16 flags)."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_core.rewards import length_reward

    model, tokenizer = loader(device)
    generations: list[tuple[float, int]] = []
    timed_generate(model, tokenizer, generations)
    read = weight_bytes(model)  # under autocast generate still reads the float32 weights
    rows = [{"prompt": [{"role": "user", "content": p}]} for p in prompts()]
    autocast = None if precision is None else precision.autocast
    step_times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if device == "cuda":
                import torch

                torch.cuda.synchronize()
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if device == "cuda":
                import torch

                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.start)

    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, bf16=autocast == "bfloat16", fp16=autocast == "float16",
            use_cpu=device == "cpu", activation_checkpointing=False,
            report_to="none", save_strategy="no", logging_steps=1, disable_tqdm=True,
            max_steps=steps + 1, num_generations=sizes["group_size"],
            per_device_train_batch_size=sizes["group_size"] * sizes["prompts_per_step"],
            max_completion_length=sizes["max_new_tokens"], learning_rate=LR, beta=0.0,
            loss_type="grpo",
            temperature=1.0, top_p=1.0, seed=0, lr_scheduler_type="constant",
        )
        trainer = GRPOTrainer(model=model, reward_funcs=length_reward, args=args,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                              callbacks=[StepTimer()])
        trainer.train()
    return summary("TRL GRPOTrainer", step_times[1:], generations[1:], device, read,
                   sum(p.numel() for p in model.parameters()))


def summary(name: str, step_times: list[float], generations: list, device: str,
            read_bytes: int, weight_count: int, phases: dict[str, float] | None = None) -> dict:
    import torch

    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    seconds = sum(g[0] for g in generations)
    tokens = sum(g[1] for g in generations)
    decoding_steps = sum(g[2] for g in generations)  # the prompt pass counted as one
    return {"name": name, "median_step_s": statistics.median(step_times), "step_times": step_times,
            "rollout_tokens_per_s": tokens / seconds if seconds else float("nan"),
            "decode_step_s": seconds / decoding_steps if decoding_steps else float("nan"),
            "weight_bytes_per_decode_step": read_bytes, "phases": phases or {},
            # one multiply-add per weight per row: the arithmetic of a decoding step
            "flop_per_row_per_decode_step": 2 * weight_count,
            "peak_memory_gib": peak, "memory_kind": "GPU allocated" if device == "cuda" else "RSS",
            "threads": torch.get_num_threads()}


def child(impl: str, steps: int, threads: int, device: str, precision_name: str) -> None:
    import torch

    from grpo_core.precision import detect_precision

    if threads:  # the course's loader applies its thread plan: force it there
        os.environ["GRPO_THREADS"] = str(threads)
    torch.manual_seed(0)
    precision = detect_precision(device) if precision_name == "default" else None
    if precision is not None and precision.autocast is None:
        precision = None  # the device's default is float32 already
    runner = run_ours if impl == "ours" else run_trl
    result = runner(steps, device, precision=precision)
    print("RESULT " + json.dumps(result), flush=True)


def run_child(impl: str, args, precision_name: str) -> dict | None:
    command = [sys.executable, __file__, "--impl", impl, "--steps", str(args.steps),
               "--threads", str(args.threads), "--device", args.device,
               "--precision", precision_name]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        return None
    return json.loads(lines[-1][len("RESULT "):])


def merge(runs: list[dict]) -> dict:
    """One implementation's rounds: every timed step, the mean throughput, the highest peak."""
    times = [t for r in runs for t in r["step_times"]]
    phases = {k: statistics.median(r["phases"][k] for r in runs) for k in runs[0]["phases"]}
    return {**runs[0], "step_times": times, "median_step_s": statistics.median(times),
            "rollout_tokens_per_s": statistics.mean(r["rollout_tokens_per_s"] for r in runs),
            "decode_step_s": statistics.mean(r["decode_step_s"] for r in runs),
            "peak_memory_gib": max(r["peak_memory_gib"] for r in runs), "phases": phases,
            "threads": "/".join(sorted({str(r["threads"]) for r in runs}))}


def report(result: dict, bandwidth: float | None, rows: int, peak_flops: float | None = None,
           peak_dtype: str = "float32") -> str:
    times = ", ".join(f"{t:.1f}" for t in result["step_times"])
    line = (f"{result['name']:>16}: median step {result['median_step_s']:.2f} s ({times}) on "
            f"{result['threads']} thread(s); rollout "
            f"{result['rollout_tokens_per_s']:.0f} tokens/s")
    if bandwidth:
        bound = rows * bandwidth / result["weight_bytes_per_decode_step"]
        line += (f" = {result['rollout_tokens_per_s'] / bound:.0%} of the bound {bound:.0f} "
                 f"({result['weight_bytes_per_decode_step'] / 1e6:.0f} MB of weights per "
                 f"decoding step)")
        own = result["decode_step_s"]
        line += (f"; a decoding step {own * 1e3:.0f} ms (a rollout's time / its decoding steps) "
                 f"beside the {result['weight_bytes_per_decode_step'] / bandwidth * 1e3:.0f} ms "
                 f"of reading the weights once")
    if peak_flops:
        flop = rows * result["flop_per_row_per_decode_step"]
        line += (f" and the {flop / peak_flops * 1e3:.0f} ms of its {flop / 1e9:.1f} GFLOP at "
                 f"this CPU's {peak_dtype} matmul peak ({peak_flops / 1e9:.0f} GFLOP/s)")
        share = limit_share(result, bandwidth, rows, peak_flops)
        if share is not None:
            line += f": {share:.0%} of its limit"
    line += f"; peak {result['memory_kind']} {result['peak_memory_gib']:.2f} GiB"
    if result["phases"]:
        line += "\n" + " " * 18 + "median per step: " + ", ".join(
            f"{k.removeprefix('time/')} {v:.2f} s" for k, v in result["phases"].items())
    return line


def measure(args, precision_name: str) -> dict[str, dict] | None:
    """``--rounds`` alternations of ours and TRL at one precision, merged per side."""
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    for _ in range(args.rounds):
        for impl in ("ours", "trl"):
            result = run_child(impl, args, precision_name)
            if result is None:
                return None
            runs[impl].append(result)
    return {impl: merge(r) for impl, r in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--rounds", type=int, default=2, help="alternations ours, TRL per precision")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads for both sides (0: the course's thread plan, "
                             "grpo_core.threads, as the course runs)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", choices=["default", "float32", "both"], default="both")
    parser.add_argument("--isa", choices=["native", "avx2"], default="native",
                        help="avx2: torch's and oneDNN's kernels held to AVX2 (a CPU without "
                             "AVX-512), in this process and every run")
    parser.add_argument("--busy-core", action="store_true",
                        help="measure every run again beside a busy loop pinned to one core")
    parser.add_argument("--impl", choices=["ours", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    run_with_isa(args.isa, sys.argv[1:])
    if args.impl:
        child(args.impl, args.steps, args.threads, args.device, args.precision)
        return 0
    from grpo_core.precision import detect_precision

    default = detect_precision(args.device)
    print(f"CPU: {cpu_description()}; {isa_description()}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"one GRPO step: {PROMPTS_PER_STEP} prompts x k={GROUP}, {NEW_TOKENS} new tokens, "
          f"SmolLM2-135M on {args.device}, threads: {args.threads or 'the course plan'}, median of "
          f"{args.rounds} x {args.steps} steps (each run: 1 warm-up), runs alternating ours, TRL")
    print(f"default precision here: {default.reason}")
    names = ["float32", "default"] if args.precision == "both" else [args.precision]
    if default.autocast is None and "float32" in names and "default" in names:
        names = ["default"]  # the same run twice
    ratios = {}
    for name in names:
        merged = measure(args, name)
        if merged is None:
            return 1
        bandwidth = read_bandwidth() if args.device == "cpu" else None  # in this process:
        # its 512 MB buffer must not count in a child's peak memory
        peak_dtype = "float32" if name == "float32" or default.autocast is None else default.autocast
        peak = matmul_peak(peak_dtype) if args.device == "cpu" else None
        label = default.reason if name == "default" else "float32 throughout"
        print(f"\n-- {name}: {label}")
        if bandwidth:
            print(f"   read bandwidth {bandwidth / 1e9:.1f} GB/s; load average "
                  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for result in merged.values():
            print(report(result, bandwidth, PROMPTS_PER_STEP * GROUP, peak, peak_dtype))
        ratios[name] = merged["ours"]["median_step_s"] / merged["trl"]["median_step_s"]
        print(f"ratio ours / TRL at {name} (median step time): {ratios[name]:.2f}")
        if args.busy_core:
            core = sorted(os.sched_getaffinity(0))[-1]
            loop = busy_loop(core)
            try:
                busy = measure(args, name)
            finally:
                loop.kill()
                loop.wait()
            if busy is None:
                return 1
            print(f"   with a busy loop on core {core}; load average "
                  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            for impl, result in busy.items():
                print(report(result, bandwidth, PROMPTS_PER_STEP * GROUP, peak, peak_dtype))
                print(f"{'':>18}busy / idle median step: "
                      f"{result['median_step_s'] / merged[impl]['median_step_s']:.2f}")
            print(f"ratio ours / TRL at {name}, one core busy: "
                  f"{busy['ours']['median_step_s'] / busy['trl']['median_step_s']:.2f}")
    final = "default" if "default" in ratios else names[-1]
    print(f"ratio ours / TRL (median step time): {ratios[final]:.2f}  (<= 1.0: ours is no slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
