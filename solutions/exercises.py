"""Worked solutions to every notebook exercise, kept apart from the notebooks.

Try an exercise in its notebook first: its check says "not attempted yet", then hints at the
idea when an answer is wrong. Each solution here is a function of what the notebook computed
(``tokenizer``, ``prompt``, ...; most need nothing) that returns the answer the notebook's
``...`` stands for. ``tests/test_exercises.py`` runs each through its check
(``grpo_core.exercises``) and requires "correct".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

SOLUTIONS: dict[str, Callable[..., Any]] = {}


def solution(name: str):
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        SOLUTIONS[name] = function
        return function

    return register


# ----------------------------------------------------------------------------- 00_setup

@solution("00.prompt_tokens")
def prompt_tokens(tokenizer, prompt, **_):
    # the chat template already wrote the special tokens into `prompt`: add none
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


@solution("00.group_of_four")
def group_of_four(model, tokenizer, max_new_tokens, **_):
    from grpo_core.rollout import chat_prompt, sample_group

    return sample_group(model, tokenizer, chat_prompt(tokenizer, "Name a prime number."), 4,
                        max_new_tokens=max_new_tokens, seed=1)


# --------------------------------------------------------------- 01_from_imitation_to_reward

@solution("01.feedback_counts")
def feedback_counts(num_tokens, vocab_size, **_):
    return num_tokens * vocab_size, 1  # a distribution per position; one reward per attempt


@solution("01.no_signal_temperature")
def no_signal_temperature(**_):
    return 1.0  # the teacher's logits are then the student's own


@solution("01.sft_loss_by_hand")
def sft_loss_by_hand(**_):
    return -math.log(0.6)


# ---------------------------------------------------------------- 02_policy_rollout_reward

@solution("02.sequence_logprob")
def sequence_logprob(**_):
    def my_sequence_logprob(token_logps, mask):
        return (token_logps * mask).sum(dim=1)  # the lecture's line: only real tokens count

    return my_sequence_logprob


@solution("02.advantage_line")
def advantage_line(**_):
    rewards = torch.tensor([-3.0, -10.0, -1.0, -30.0])
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    return advantages, int(advantages.argmax())  # -1 is closest to the target: row 2


@solution("02.dloss_dseq_logp")
def dloss_dseq_logp(**_):
    def my_dloss_ds(advantages, k):
        return -advantages / k

    return my_dloss_ds


# ---------------------------------------------------------------------- 03_group_baseline

@solution("03.advantages_by_hand")
def advantages_by_hand(**_):
    mean, std = 0.25, 0.5  # N-1 std of (1, 0, 0, 0)
    return [(r - mean) / (std + 1e-4) for r in (1, 0, 0, 0)]


@solution("03.silent_group")
def silent_group(**_):
    return [0.5, 0.5, 0.5, 0.5]


@solution("03.no_signal_fraction")
def no_signal_fraction(**_):
    def my_no_signal_fraction(p, k):
        return p**k + (1 - p) ** k  # all pass, or all fail

    return my_no_signal_fraction


@solution("03.group_advantages")
def group_advantages(**_):
    def my_group_advantages(rewards, group_size):
        grouped = rewards.view(-1, group_size)
        mean = grouped.mean(dim=1, keepdim=True)
        std = grouped.std(dim=1, keepdim=True)
        return ((grouped - mean) / (std + 1e-4)).view(-1)

    return my_group_advantages


# ------------------------------------------------------------------------- 04_guardrails

@solution("04.clip_by_hand")
def clip_by_hand(**_):
    # A = +1: -min(1.3, 1.2); A = -1: -min(-1.3, -1.2) = 1.3
    return -1.2, 1.3


@solution("04.zero_gradient_threshold")
def zero_gradient_threshold(**_):
    return 0.8  # 1 - epsilon; epsilon_high moves only the upper edge


@solution("04.k3_by_hand")
def k3_by_hand(**_):
    d = -1.5 - (-1.0)  # ref - logp
    return math.exp(d) - d - 1, +1  # k1 = logp - ref = +0.5


@solution("04.kl_gradient_coefficient")
def kl_gradient_coefficient(**_):
    d = -1.5 - (-1.0)  # ref - logp
    # rho*k3: rho (e^d - 1 - d) differentiated by log pi at rho = 1 is (e^d - 1 - d) + (1 - e^d)
    return -d, 1 - math.exp(d)


@solution("04.clipped_surrogate")
def clipped_surrogate(**_):
    def my_clipped_surrogate(token_logps, old_token_logps, advantages, epsilon):
        ratio = torch.exp(token_logps - old_token_logps)
        a = advantages[:, None]
        return -torch.min(ratio * a, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * a)

    return my_clipped_surrogate


# --------------------------------------------------------------------- 05_reward_contract

@solution("05.formatted_but_wrong")
def formatted_but_wrong(**_):
    return "8 * 9 = 73.\n<answer>73</answer>"


@solution("05.usable_group")
def usable_group(**_):
    return ["<answer>72</answer>", "<answer>71</answer>", "72",
            "8 * 9 = 72\n<answer>72</answer>"]


@solution("05.is_even")
def is_even(**_):
    return "def is_even(n):\n    return n % 2 == 0"


@solution("05.accuracy_reward")
def accuracy_reward(**_):
    from grpo_core.rewards import answers_match, extract_answer

    def my_accuracy_reward(completions, answer, **kwargs):
        rewards = []
        for completion, expected in zip(completions, answer, strict=True):
            given = extract_answer(completion)  # None unless one <answer>...</answer> ends it
            rewards.append(2.0 if given is not None and answers_match(given, expected) else 0.0)
        return rewards

    return my_accuracy_reward


# ---------------------------------------------------------------------- 06_fixed_or_fresh

@solution("06.dpo_start_loss")
def dpo_start_loss(**_):
    return math.log(2)


@solution("06.preference_pairs")
def preference_pairs(**_):
    return 1, 5  # the tied group gives none; of the two -3s, row 5 comes first


@solution("06.dpo_loss")
def dpo_loss(**_):
    def my_dpo_loss(chosen, rejected, ref_chosen, ref_rejected, beta):
        margin = (chosen - ref_chosen) - (rejected - ref_rejected)
        return -torch.nn.functional.logsigmoid(beta * margin).mean()

    return my_dpo_loss


# ------------------------------------------------------------------------ 07_exp1_length

@solution("07.length_rewards")
def length_rewards(**_):
    return [0.0, -15.0]  # "Hello there, friend!" has exactly 20 characters


@solution("07.best_in_group")
def best_in_group(**_):
    return 1, True  # 19 characters is best; 12 and 26 also beat the mean (pulled down by 60)


@solution("07.inverted_reward")
def inverted_reward(**_):
    def inverted_length_reward(completions, **kwargs):
        return [abs(len(c) - 20) for c in completions]

    return inverted_length_reward


# ------------------------------------------------------------------------- 08_exp2_mbpp

@solution("08.expected_mixed")
def expected_mixed(**_):
    return 20 * (1 - 0.22**4 - 0.78**4)


@solution("08.mixed_and_p")
def mixed_and_p(**_):
    return 2, 5 / 12  # [0, 0, 0.5] and [1, 0, 1] are mixed; 5 of 12 samples scored exactly 1


@solution("08.mixed_per_step")
def mixed_per_step(**_):
    def my_mixed_per_step(p, k, completions=16):
        groups = completions // k
        chance = 1 - p**k - (1 - p) ** k
        return groups * chance, groups * chance * k

    return my_mixed_per_step, 2, 16


# ---------------------------------------------------------------- 09_exp3_reward_hacking

@solution("09.hacks")
def hacks(**_):
    return [2]


@solution("09.full_proxy_hack")
def full_proxy_hack(**_):
    return ("```python\ndef add(a, b):\n" + "    # a long and careful comment\n" * 6
            + "    return None\n```")


@solution("09.hacking_records")
def hacking_records(**_):
    records = [{"step": s, "reward": 0.4 + 0.5 * (s - 1) / 19} for s in range(1, 21)]
    for step, value in zip([1, 5, 10, 15, 20], [0.10, 0.12, 0.09, 0.11, 0.10], strict=True):
        records[step - 1]["eval/unit_test_reward"] = value
    return records


@solution("09.hacking_rule")
def hacking_rule(**_):
    def my_hacking_rule(records):
        rewards = [r["reward"] for r in records if "reward" in r]
        true = [r["eval/unit_test_reward"] for r in records if "eval/unit_test_reward" in r]
        reward_rises = rewards[-1] - rewards[0] > 0.1
        true_flat = true[-1] - true[0] <= 0.05  # diagnose's `true_flat`: five points
        return reward_rises and true_flat

    return my_hacking_rule


# --------------------------------------------------------------------------------- 10_trl

@solution("10.both_good_losses")
def both_good_losses(**_):
    return -1.0, -1.0


@solution("10.grpo_config")
def grpo_config(**_):
    return {"loss_type": "dapo", "beta": 0.04, "num_iterations": 2, "epsilon_high": 0.28,
            "num_generations": 4}


@solution("10.per_device")
def per_device(**_):
    return 16, 2


@solution("10.grpo_aggregation")
def grpo_aggregation(**_):
    def my_grpo_aggregation(per_token_loss, mask):
        mask = mask.to(per_token_loss.dtype)
        per_completion = (per_token_loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_completion.mean()

    return my_grpo_aggregation


# -------------------------------------------------------------------- 11_reading_the_run

@solution("11.symptom")
def symptom(**_):
    return "no signal"


@solution("11.transient_truncation")
def transient_truncation(**_):
    return [0.9, 0.8, 0.6] + [0.0] * 17


@solution("11.group_loss_value")
def group_loss_value(**_):
    return 0.0


@solution("11.no_signal_rule")
def no_signal_rule(**_):
    def my_no_signal_rule(records):
        zero_std = [r["frac_reward_zero_std"] for r in records]
        silent = [z >= 0.9 for z in zero_std]
        tail = zero_std[-max(1, len(zero_std) // 5):]
        return sum(silent) / len(silent) >= 0.3 or sum(tail) / len(tail) >= 0.9

    return my_no_signal_rule


def answer(name: str, **context: Any) -> Any:
    """The solution to exercise ``name``, given what its notebook computed."""
    return SOLUTIONS[name](**context)


@solution("12.pass_at_k")
def pass_at_k_by_hand(**_):
    return 1 - 3 / 10  # C(3, 2) = 3 pairs of failures among C(5, 2) = 10 pairs


@solution("12.bonferroni_bar")
def bonferroni_bar(**_):
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - 0.05 / 6)


# ----------------------------------------------------------------------------- 13_sampler_mismatch

@solution("13.sequence_weight")
def sequence_weight(**_):
    ratio = math.exp(0.4 + 0.3 + 0.5)  # a sequence mode sums the deltas, then takes exp
    return min(ratio, 3.0), ratio <= 3.0  # truncated to the top; masked (dropped) above it


@solution("13.token_truncate")
def token_truncate(**_):
    def my_token_truncate(learner_logps, sampler_logps, mask, cap):
        deltas = (learner_logps - sampler_logps) * mask  # 0 on padding: weight 1
        return torch.exp(deltas).clamp(max=cap)

    return my_token_truncate
