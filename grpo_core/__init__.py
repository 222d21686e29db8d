"""grpo_core: the from-scratch GRPO package behind the course notebooks.

Names are imported lazily, on first use, so that ``import grpo_core.sandbox`` works
without torch installed (the sandbox is standard library only) and so that
``import grpo_core`` stays fast in a notebook's first cell.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (docs/design.md, the package's contract)
_EXPORTS: dict[str, str] = {
    # update math
    "group_advantages": "advantages",
    "flat_groups": "advantages",
    "SCALES": "advantages",
    "token_logprobs": "logprobs",
    "sequence_logprob": "logprobs",
    "completion_mask": "logprobs",
    "logprobs_from_logits": "logprobs",
    "token_entropy": "logprobs",
    "policy_gradient_loss": "loss",
    "clipped_surrogate": "loss",
    "kl_k3": "loss",
    "grpo_loss": "loss",
    "aggregate_loss": "loss",
    "token_weights": "loss",
    "WEIGHTINGS": "loss",
    "clip_metrics": "loss",
    "LOSS_TYPES": "loss",
    # the signals before RL (notebook 01) and fixed preference pairs (notebook 06)
    "token_cross_entropy": "imitation_signals",
    "token_kl": "imitation_signals",
    "feedback_counts": "imitation_signals",
    "dpo_loss": "preference",
    "preference_pairs": "preference",
    # profiles and models
    "Profile": "profiles",
    "ProfileError": "profiles",
    "get_profile": "profiles",
    "load_policy": "models",
    # the training loop and its plots
    "train": "loop",
    "TrainConfig": "loop",
    "RunResult": "loop",
    # calling reward functions (the loop, the evaluator and the signal check share it)
    "RewardError": "scoring",
    "reward_name": "scoring",
    "score_samples": "evaluation",
    "held_out_evaluator": "evaluation",
    "HeldOutEvaluator": "evaluation",
    # the experiments (the command line, the notebooks and scripts/trl_mbpp.py share them)
    "Experiment": "experiments",
    "EXPERIMENTS": "experiments",
    "length_experiment": "experiments",
    "mbpp_experiment": "experiments",
    "hacking_experiment": "experiments",
    # where the files are; reading recorded runs
    "read_jsonl": "run_files",
    "load_run": "run_files",
    "list_runs": "run_files",
    "RecordedRun": "run_files",
    "series": "run_files",
    "read_samples": "run_files",
    # plots
    "LivePlot": "plots",
    "plot_metrics": "plots",
    "save_curves": "plots",
    "plot_run": "plots",
    "compare_runs": "plots",
    # rollouts
    "sample_group": "rollout",
    "sample_for_profile": "rollout",
    "chat_prompt": "rollout",
    "Rollout": "rollout",
    # rewards, the sandbox and the problem sets
    "format_reward": "rewards",
    "accuracy_reward": "rewards",
    "length_reward": "rewards",
    "make_length_reward": "rewards",
    "unit_test_reward": "rewards",
    "defines_function_reward": "rewards",
    "long_function_reward": "rewards",
    "extract_code": "rewards",
    "extract_answer": "rewards",
    "run_tests": "sandbox",
    "isolation_report": "sandbox",
    "SandboxResult": "sandbox",
    # widgets (notebooks 03 and 04)
    "group_summary": "widgets",
    "group_variation_widget": "widgets",
    "clip_curves": "widgets",
    "clip_widget": "widgets",
    "kl_curves": "widgets",
    "kl_widget": "widgets",
    # the run explorer and the token view (notebooks 11 and 02)
    "run_explorer": "widgets",
    "token_logprob_change": "widgets",
    "token_change_html": "widgets",
    # reading a run (notebooks 09 and 11)
    "diagnose": "diagnosis",
    "Diagnosis": "diagnosis",
    "Finding": "diagnosis",
    # the signal check (notebook 08)
    "signal_check": "group_signal",
    "summarize_groups": "group_signal",
    "SignalReport": "group_signal",
    "expected_zero_std_fraction": "group_signal",
    "zero_std_chance": "group_signal",
    "simulate_scores": "group_signal",
    "plot_signal": "group_signal",
    "load_mbpp": "mbpp",
    "load_problems": "mbpp",
    "read_problems": "mbpp",
    "course_split": "mbpp",
    "format_code_prompt": "mbpp",
    "with_prompts": "mbpp",
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
