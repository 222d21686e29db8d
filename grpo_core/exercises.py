"""Checks for the notebooks' exercises: "not attempted yet", a hint, or "correct".

Every exercise ends with a cell like::

    my_advantages = ...  # your answer here
    check("03.advantages_by_hand", my_advantages)

``check`` prints one line. While the answer still holds ``...`` (Python's ``Ellipsis``) it
says *not attempted yet* and does nothing else, so a notebook whose exercises are unsolved
still runs from top to bottom. A wrong answer gets a hint that points at the idea, never at
the answer; a right one says what it shows. An answer that is a function (the exercises that
ask for a few lines of the method) is called on fixed inputs and compared with ``grpo_core``'s
own implementation; a function whose body still returns ``...`` counts as not attempted.

Every judge is deterministic: fixed inputs and seeds, no model output, so a check gives the
same verdict in every profile. The solutions live apart, in ``solutions/exercises.py`` at the
top of the repository; ``tests/test_exercises.py`` proves that every check accepts its
solution, rejects plausible wrong answers, and calls ``...`` not attempted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from grpo_core.stats import bonferroni_z

NOT_ATTEMPTED = "not attempted"
WRONG = "wrong"
CORRECT = "correct"


@dataclass(frozen=True)
class Verdict:
    """What a check says: ``status`` is ``"not attempted"``, ``"wrong"`` or ``"correct"``."""

    exercise: str
    status: str
    message: str

    def __str__(self) -> str:
        label = {NOT_ATTEMPTED: "not attempted yet", WRONG: "not yet", CORRECT: "correct"}
        return f"{self.exercise}: {label[self.status]}: {self.message}"


@dataclass(frozen=True)
class Exercise:
    """One exercise: its name (``"NN.what"``, NN the notebook), the question, and its judge.

    ``judge(answer, **context)`` returns ``None`` when the answer is right (then
    ``success`` is shown) or a hint when it is wrong.
    """

    name: str
    question: str
    judge: Callable[..., str | None]
    success: str


EXERCISES: dict[str, Exercise] = {}


class _NotAttempted(Exception):
    """Raised inside a judge when a learner's function still returns ``...``."""


def _exercise(name: str, question: str, success: str):
    def register(judge: Callable[..., str | None]) -> Callable[..., str | None]:
        if name in EXERCISES:
            raise ValueError(f"exercise {name!r} is registered twice")
        EXERCISES[name] = Exercise(name, question, judge, success)
        return judge

    return register


def _unanswered(answer: Any) -> bool:
    """``...`` itself, or a tuple/list of parts of which one still holds ``...``."""
    if answer is Ellipsis:
        return True
    return isinstance(answer, (tuple, list)) and any(part is Ellipsis for part in answer)


def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's function; ``...`` as its result means it is not written yet."""
    if not callable(function):
        raise TypeError(f"expected a function, got {type(function).__name__}")
    result = function(*args, **kwargs)
    if result is Ellipsis:
        raise _NotAttempted
    if result is None:
        raise TypeError("your function returned None: did it forget `return`?")
    return result


def evaluate(name: str, answer: Any, **context: Any) -> Verdict:
    """Judge ``answer`` to exercise ``name``; ``context`` holds what the notebook computed.

    Never raises for a wrong answer: an error inside the learner's code becomes a hint.
    """
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; known: {sorted(EXERCISES)}")
    exercise = EXERCISES[name]
    if _unanswered(answer):
        return Verdict(name, NOT_ATTEMPTED, "replace the `...` with your answer and run again")
    try:
        hint = exercise.judge(answer, **context)
    except _NotAttempted:
        return Verdict(name, NOT_ATTEMPTED, "your function still returns `...`")
    except Exception as error:  # the learner's code failed: say how, and keep the notebook going
        return Verdict(name, WRONG, f"{type(error).__name__}: {error}")
    if hint is None:
        return Verdict(name, CORRECT, exercise.success)
    return Verdict(name, WRONG, hint)


def check(name: str, answer: Any, **context: Any) -> None:
    """Print the verdict on ``answer`` to exercise ``name`` (see :func:`evaluate`)."""
    print(evaluate(name, answer, **context))


def _close(a: Any, b: Any, tol: float = 1e-4) -> bool:
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=tol, rtol=tol))


def _number(answer: Any) -> float:
    if isinstance(answer, Tensor):
        return float(answer.item())
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise TypeError(f"expected a number, got {type(answer).__name__}")
    return float(answer)


# ----------------------------------------------------------------------------- 00_setup

@_exercise("00.prompt_tokens",
           "How many tokens does the model read before it starts writing?",
           "the prompt mask counts exactly these tokens")
def _prompt_tokens(answer: Any, *, tokenizer: Any, prompt: str) -> str | None:
    expected = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if _number(answer) == expected:
        return None
    if _number(answer) == len(prompt):
        return "that counts characters; the model reads tokens (use the tokenizer)"
    if _number(answer) == len(tokenizer(prompt)["input_ids"]):
        return "the chat template already holds the special tokens: add none"
    return "count the token ids the tokenizer gives for `prompt`"


@_exercise("00.group_of_four",
           "Sample a group of 4 completions for your own prompt.",
           "4 rows, each mask is ones then zeros")
def _group_of_four(answer: Any) -> str | None:
    mask = answer.completion_mask
    if mask.shape[0] != 4 or len(answer.texts) != 4:
        return f"the group has {mask.shape[0]} rows: ask `sample_group` for group_size=4"
    if not bool(torch.all(mask[:, 1:] <= mask[:, :-1])):
        return "a mask switched back on after it ended: use the rollout's completion_mask"
    return None


# --------------------------------------------------------------- 01_from_imitation_to_reward

@_exercise("01.feedback_counts",
           "How many numbers do distillation and RL give for the model's attempt?",
           "distillation gives a whole distribution per position, RL one number per attempt")
def _feedback_counts(answer: Any, *, num_tokens: int, vocab_size: int) -> str | None:
    distillation, rl = answer
    if distillation != num_tokens * vocab_size:
        return "distillation: one probability for every vocabulary entry, at every position"
    if rl != 1:
        return "RL: how many rewards does one attempt get?"
    return None


_TEMPERATURE_LOGITS = torch.randn(2, 3, 10, generator=torch.Generator().manual_seed(0))


@_exercise("01.no_signal_temperature",
           "At which teacher temperature does the same model as teacher teach nothing?",
           "a teacher identical to the student has nothing to teach: KL = 0 everywhere")
def _no_signal_temperature(answer: Any) -> str | None:
    from grpo_core.imitation_signals import token_kl

    kl = token_kl(_TEMPERATURE_LOGITS, _TEMPERATURE_LOGITS, teacher_temperature=_number(answer))
    if bool(torch.all(kl.abs() < 1e-5)):
        return None
    return "the temperature divides the teacher's logits: which value leaves them as they are?"


@_exercise("01.sft_loss_by_hand",
           "SFT's loss at position 2 of the toy, where the target had probability 0.6.",
           "cross-entropy is minus the log-probability of the target token")
def _sft_loss_by_hand(answer: Any) -> str | None:
    from grpo_core.imitation_signals import token_cross_entropy

    expected = token_cross_entropy(torch.tensor([[[0.6, 0.4]]]).log(), torch.tensor([[0]]))
    value = _number(answer)
    if abs(value - expected.item()) < 1e-5:
        return None
    if value < 0:
        return "a cross-entropy is never negative: mind the sign"
    return "the loss is about the target's probability only, through a logarithm"


# ---------------------------------------------------------------- 02_policy_rollout_reward

def _ragged_batch(seed: int = 0, rows: int = 4, width: int = 7) -> tuple[Tensor, Tensor]:
    """Token log-probs ``[rows, width]`` and a ones-then-zeros mask of varied lengths."""
    generator = torch.Generator().manual_seed(seed)
    token_logps = -torch.rand(rows, width, generator=generator) * 3
    lengths = torch.tensor([width, 2, 5, 1][:rows])
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return token_logps, mask


@_exercise("02.sequence_logprob",
           "Write eq. (2.3): a completion's log-probability from its token log-probs.",
           "your sum agrees with `sequence_logprob` on a batch of unequal lengths")
def _sequence_logprob(answer: Any) -> str | None:
    from grpo_core.logprobs import sequence_logprob

    token_logps, mask = _ragged_batch()
    mine = _call(answer, token_logps.clone(), mask.clone())
    if _close(mine, sequence_logprob(token_logps, mask)):
        return None
    if _close(mine, token_logps.sum(dim=1)):
        return "the padding after a completion ends counts too: only the masked tokens belong"
    if _close(mine, (token_logps * mask).sum(1) / mask.sum(1)):
        return "eq. (2.3) adds the tokens' log-probs: a probability is a product of them"
    return "one number per completion: add its tokens' log-probs, and only its own tokens"


_LECTURE_GROUP = torch.tensor([-3.0, -10.0, -1.0, -30.0])


@_exercise("02.advantage_line",
           "The lecture's advantage line for rewards (-3, -10, -1, -30), and which is pushed up hardest.",
           "the completion closest to the target is pushed up the hardest")
def _advantage_line(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages

    advantages, hardest_up = answer
    expected = group_advantages(_LECTURE_GROUP, 4)
    if not _close(advantages, expected):
        if _close(torch.as_tensor(advantages).sum(), 0.0):
            return "the baseline is right; divide by the group's std (N-1, as torch.std) + 1e-4"
        return "subtract the group's mean reward first: the mean is the baseline"
    if hardest_up != int(expected.argmax()):
        return "the push up is the size of a positive advantage: find the largest"
    return None


_GRADIENT_ADVANTAGES = torch.tensor([0.9, -0.2, 1.3, -2.0])


@_exercise("02.dloss_dseq_logp",
           "Write d loss / d s_i for loss = -(1/k) sum_i A_i s_i.",
           "autograd agrees: a descent step raises s where A > 0 and lowers it where A < 0")
def _dloss_dseq_logp(answer: Any) -> str | None:
    for advantages in (_GRADIENT_ADVANTAGES, _GRADIENT_ADVANTAGES[:2]):
        k = advantages.numel()
        s = torch.zeros(k, requires_grad=True)
        (-(advantages * s).mean()).backward()
        mine = _call(answer, advantages.clone(), k)
        if _close(mine, -s.grad):
            return "mind the sign: the loss carries a minus"
        if not _close(mine, s.grad):
            return "the loss is linear in each s_i: its slope is the coefficient of s_i"
    return None


# ---------------------------------------------------------------------- 03_group_baseline

@_exercise("03.advantages_by_hand",
           "The advantages of the group (1, 0, 0, 0), N-1 std, eps = 1e-4.",
           "one success among failures gets a large push up")
def _advantages_by_hand(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages

    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    if _close(answer, group_advantages(rewards, 4)):
        return None
    if _close(answer, (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-4)):
        return "that std divides by N; torch.std and TRL divide by N-1"
    return "subtract the mean (0.25), then divide by the std plus eps"


@_exercise("03.silent_group",
           "A group of four rewards, neither all 0 nor all 2, that gives no learning signal.",
           "any group whose rewards are all equal is silent, whatever the value")
def _silent_group(answer: Any) -> str | None:
    from grpo_core.widgets.group import group_summary

    rewards = [float(r) for r in answer]
    if len(rewards) != 4:
        return "a group of four rewards"
    if rewards in ([0.0] * 4, [2.0] * 4):
        return "that is a preset: find another"
    if not group_summary(rewards).no_signal:
        return "this group has a signal: when is every reward on the mean?"
    return None


_SIGNAL_GRID = [(0.1, 4), (0.5, 4), (0.2, 8), (0.9, 2), (0.0, 3), (1.0, 5)]


@_exercise("03.no_signal_fraction",
           "The fraction of groups of k pass/fail attempts (pass probability p) with no signal.",
           "all pass or all fail: p^k + (1-p)^k")
def _no_signal_fraction(answer: Any) -> str | None:
    from grpo_core.group_signal import expected_zero_std_fraction

    for p, k in _SIGNAL_GRID:
        if not _close(_number(_call(answer, p, k)), expected_zero_std_fraction(p, k), 1e-9):
            if abs(_number(_call(answer, 0.2, 3)) - 0.2**3) < 1e-9:
                return "a group is also silent when every attempt fails"
            return "a group is silent when every attempt gets the same reward: both ways"
    return None


_REWARD_GROUPS = torch.tensor([0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, -1.0, 5.0, 0.5, 0.0])


@_exercise("03.group_advantages",
           "Write eq. (3.1) for a batch laid out group after group.",
           "your advantages are `group_advantages`', the all-equal group included")
def _group_advantages(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages

    mine = _call(answer, _REWARD_GROUPS.clone(), 4)
    if _close(mine, group_advantages(_REWARD_GROUPS, 4)):
        return None
    if bool(torch.as_tensor(mine).isnan().any()):
        return "a group whose rewards are all equal has std 0: that is what the eps is for"
    return "each group is its own baseline: view the rewards as [groups, group_size]"


# ------------------------------------------------------------------------- 04_guardrails

@_exercise("04.clip_by_hand",
           "The per-token loss (4.2) at ratio 1.3, eps = 0.2, with A = +1 and with A = -1.",
           "with A > 0 the clip caps the gain at 1.2; with A < 0 nothing above 1 is clipped")
def _clip_by_hand(answer: Any) -> str | None:
    from grpo_core.loss import clipped_surrogate

    log_ratio = torch.tensor([[1.3]]).log()
    for advantage, mine in zip((1.0, -1.0), answer, strict=True):
        expected = clipped_surrogate(log_ratio, torch.zeros(1, 1), torch.tensor([advantage]))
        if abs(_number(mine) - expected.item()) > 1e-5:
            if advantage > 0:
                return "with A > 0 the min picks the clipped ratio once it passes 1 + eps"
            return "with A < 0, which of rho*A and clip(rho)*A is smaller?"
    return None


@_exercise("04.zero_gradient_threshold",
           "With A < 0, eps = 0.2, eps_high = 0.28: below which ratio is the gradient zero?",
           "eps_high only moves the upper edge, which matters when A > 0")
def _zero_gradient_threshold(answer: Any) -> str | None:
    from grpo_core.widgets.clip import clip_curves

    curves = clip_curves(epsilon=0.2, epsilon_high=0.28, ratio_range=(0.5, 1.5),
                         advantage=-1.0, points=1001)
    ((_, end),) = curves.zero_regions
    if abs(_number(answer) - end) < 2e-3:
        return None
    if _number(answer) > 1:
        return "with A < 0 the clip stops pushing a token down, below 1"
    return "which edge of the band [1 - eps, 1 + eps_high] does a negative advantage meet?"


@_exercise("04.k3_by_hand",
           "k3 (4.3) of a token at log-prob -1.0 (policy) and -1.5 (reference), and k1's sign.",
           "k3 is never negative; k1 = logp - ref can be")
def _k3_by_hand(answer: Any) -> str | None:
    from grpo_core.loss import kl_k3

    k3, k1_sign = answer
    expected = kl_k3(torch.tensor([[-1.0]]), torch.tensor([[-1.5]])).item()
    if abs(_number(k3) - expected) > 1e-6:
        if abs(_number(k3) - (math.exp(0.5) - 0.5 - 1)) < 1e-6:
            return "d is ref - logp, not the other way round"
        return "k3 = exp(d) - d - 1 with d the reference's log-prob minus the policy's"
    if k1_sign != 1:
        return "k1 = logp - ref: which is larger here?"
    return None


def _reused_batch(seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Log-probs after and before some updates (ratios about 0.5-1.6) and mixed-sign advantages."""
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(4, 6, generator=generator) * 3
    new = old + (torch.rand(4, 6, generator=generator) - 0.5) * 1.0
    return new, old, torch.tensor([1.0, -1.0, 0.5, -2.0])


@_exercise("04.kl_gradient_coefficient",
           "The coefficient c of grad log pi for rho*k3 and for k3, at log-probs -1.0 / -1.5.",
           "rho*k3's coefficient is -d, k2's, the KL's own; k3's is 1 - exp(d), the other KL's")
def _kl_gradient_coefficient(answer: Any) -> str | None:
    from grpo_core.kl_gradients import log_prob_coefficients

    with_ratio, without = (_number(value) for value in answer)
    # a two-token distribution whose first token has log-probs -1.0 (policy), -1.5 (reference)
    logits = torch.tensor([-1.0, math.log(1 - math.exp(-1.0))], dtype=torch.float64)
    ref_logits = torch.tensor([-1.5, math.log(1 - math.exp(-1.5))], dtype=torch.float64)
    expected = [log_prob_coefficients(name, logits, ref_logits)[0].item()
                for name in ("ratio_k3", "k3")]
    if abs(with_ratio - expected[0]) < 1e-6 and abs(without - expected[1]) < 1e-6:
        return None
    if abs(with_ratio - expected[1]) < 1e-6 and abs(without - expected[0]) < 1e-6:
        return "the two are swapped: the ratio is what turns k3's gradient into k2's"
    if abs(without - (1 - math.exp(0.5))) < 1e-6 or abs(with_ratio + expected[0]) < 1e-6:
        return "d is the reference's log-prob minus the policy's"
    return "differentiate each loss by log pi(y): rho's derivative is rho, which is 1 here"


@_exercise("04.clipped_surrogate",
           "Write the per-token clipped surrogate (4.2) from log-probs, old log-probs and A.",
           "your per-token loss is `clipped_surrogate`'s, on both sides of the band")
def _clipped_surrogate(answer: Any) -> str | None:
    from grpo_core.loss import clipped_surrogate

    new, old, advantages = _reused_batch()
    mine = _call(answer, new.clone(), old.clone(), advantages.clone(), 0.2)
    if _close(mine, clipped_surrogate(new, old, advantages, epsilon=0.2), 1e-5):
        return None
    ratio = torch.exp(new - old)
    if _close(mine, -torch.clamp(ratio, 0.8, 1.2) * advantages[:, None], 1e-5):
        return "the clip only takes away gain: keep the min of the clipped and unclipped terms"
    if _close(mine, -torch.min(ratio * advantages[:, None],
                               torch.clamp(ratio, 0.8, 1.2) * advantages[:, None]) * -1, 1e-5):
        return "it is a loss: minus the objective"
    return "ratio = exp(logp - old_logp); A has one value per row, broadcast over tokens"


# --------------------------------------------------------------------- 05_reward_contract

@_exercise("05.formatted_but_wrong",
           "A completion that earns the format reward but not the accuracy reward (answer 72).",
           "the verifier pays the form and the result apart")
def _formatted_but_wrong(answer: Any) -> str | None:
    from grpo_core.rewards import accuracy_reward, format_reward

    if format_reward([answer]) != [1.0]:
        return "the format is not right yet: the completion must end with one <answer>...</answer>"
    if accuracy_reward([answer], answer=["72"]) != [0.0]:
        return "this one is correct: make the answer wrong"
    return None


@_exercise("05.usable_group",
           "Four completions for the same question whose rewards give a usable signal.",
           "some beat the mean and some fall short")
def _usable_group(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages
    from grpo_core.rewards import accuracy_reward, format_reward

    if len(answer) != 4:
        return "a group of four completions"
    scores = [f + a for f, a in zip(format_reward(answer), accuracy_reward(answer, answer=["72"] * 4),
                                   strict=True)]
    advantages = group_advantages(torch.tensor(scores), 4)
    if (advantages > 0).any() and (advantages < 0).any():
        return None
    return f"their rewards {scores} are all equal: vary what the verifier sees"


_EVEN_TESTS = ["assert is_even(4) == True", "assert is_even(7) == False",
               "assert is_even(0) == True"]


@_exercise("05.is_even",
           "An `is_even(n)` that passes all three tests in the sandbox.",
           "all three asserts pass in the sandbox")
def _is_even(answer: Any) -> str | None:
    from grpo_core.sandbox import run_tests

    result = run_tests(answer, _EVEN_TESTS, timeout_s=10.0)
    if result.fraction == 1.0:
        return None
    return f"passed {result.passed}/{result.total} ({result.status}): what does `n % 2` give?"


_ACCURACY_CASES = [
    ("<answer>72</answer>", "72"), ("Sound steps.\n<answer>72</answer>", "72"),
    ("<answer>71</answer>", "72"), ("The answer is 72", "72"),
    ("<answer>72</answer> and more", "72"), ("<answer> 72 </answer>", "72"),
    ("<answer>72.0</answer>", "72"), ("<answer>1</answer><answer>72</answer>", "72"),
    ("<answer></answer>", "72"), ("<answer>seven</answer>", "seven"),
]


@_exercise("05.accuracy_reward",
           "Write the accuracy reward: 2.0 when the completion is well formed and its answer matches.",
           "your reward pays what `accuracy_reward` pays, the lecture's table included")
def _accuracy_reward(answer: Any) -> str | None:
    from grpo_core.rewards import accuracy_reward

    completions = [c for c, _ in _ACCURACY_CASES]
    expected_answers = [a for _, a in _ACCURACY_CASES]
    mine = list(_call(answer, completions, answer=expected_answers))
    theirs = accuracy_reward(completions, answer=expected_answers)
    for (completion, _), got, want in zip(_ACCURACY_CASES, mine, theirs, strict=True):
        if float(got) != want:
            return (f"{completion!r} should earn {want}, yours gives {got}: the answer counts only "
                    "inside the one <answer>...</answer> that ends the completion")
    return None


# ---------------------------------------------------------------------- 06_fixed_or_fresh

@_exercise("06.dpo_start_loss",
           "The DPO loss when the policy is the reference (every log-ratio 0).",
           "-log sigmoid(0) = log 2, whatever the pairs")
def _dpo_start_loss(answer: Any) -> str | None:
    from grpo_core.preference import dpo_loss

    logps = torch.tensor([-12.0, -40.0, -7.5])
    expected, _ = dpo_loss(logps, logps - 3, logps, logps - 3)
    if abs(_number(answer) - expected.item()) < 1e-6:
        return None
    return "the margin is 0 at the start: what is sigmoid(0)?"


@_exercise("06.preference_pairs",
           "How many pairs do groups (-5, -5, -5, -5) and (-40, -3, -12, -3) make, and the preferred row?",
           "a tied group states no preference; ties for best go to the first")
def _preference_pairs(answer: Any) -> str | None:
    from grpo_core.preference import preference_pairs

    number, preferred = answer
    chosen, _ = preference_pairs([-5, -5, -5, -5, -40, -3, -12, -3], group_size=4)
    if number != len(chosen):
        return "a group whose rewards all tie states no preference"
    if preferred != int(chosen[0]):
        return "rows count over both groups, from 0; ties for best go to the first"
    return None


_DPO_PAIRS = (torch.tensor([-10.0, -4.0, -7.0]), torch.tensor([-9.0, -6.0, -7.5]),
              torch.tensor([-11.0, -5.0, -6.0]), torch.tensor([-8.0, -5.5, -8.0]))


@_exercise("06.dpo_loss",
           "Write eq. (6.1), the DPO loss averaged over pairs.",
           "your loss is `dpo_loss`', at two values of beta")
def _dpo_loss(answer: Any) -> str | None:
    from grpo_core.preference import dpo_loss

    for beta in (0.1, 0.5):
        mine = _call(answer, *(t.clone() for t in _DPO_PAIRS), beta)
        theirs, _ = dpo_loss(*_DPO_PAIRS, beta=beta)
        if not _close(mine, theirs, 1e-5):
            chosen, rejected, ref_chosen, ref_rejected = _DPO_PAIRS
            margin = (chosen - ref_chosen) - (rejected - ref_rejected)
            if _close(mine, -torch.nn.functional.logsigmoid(margin).mean(), 1e-5):
                return "beta scales the margin inside the sigmoid"
            return ("the margin is the chosen log-ratio minus the rejected one, each against "
                    "the reference; the loss is -log sigmoid(beta * margin), averaged")
    return None


# ------------------------------------------------------------------------ 07_exp1_length

@_exercise("07.length_rewards",
           "`length_reward` of 'Hello there, friend!' and of a 35-character completion.",
           "minus the distance to 20 characters")
def _length_rewards(answer: Any) -> str | None:
    from grpo_core.rewards import length_reward

    expected = length_reward(["Hello there, friend!", "x" * 35])
    if [float(a) for a in answer] == expected:
        return None
    if [abs(float(a)) for a in answer] == [abs(e) for e in expected]:
        return "the reward is higher when closer: mind the sign"
    return "count the characters, spaces and punctuation included"


@_exercise("07.best_in_group",
           "Lengths 12, 19, 26, 60: which gets the largest advantage, and is another positive?",
           "the highest reward gets the largest advantage; whoever beats the mean is pushed up")
def _best_in_group(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages
    from grpo_core.rewards import length_reward

    best, other_positive = answer
    advantages = group_advantages(length_reward(["x" * n for n in (12, 19, 26, 60)]), 4)
    if best != int(advantages.argmax()):
        return "the largest advantage goes to the highest reward"
    if other_positive != bool((advantages > 0).sum() > 1):
        return "compare each reward with the group's mean, not with the best"
    return None


_LENGTH_CASES = ["x" * n for n in (0, 12, 19, 20, 26, 60)] + ["Hello there, friend!"]


@_exercise("07.inverted_reward",
           "Write the inverted reward abs(len - 20) with TRL's reward signature.",
           "with the sign flipped, the longest completion is pushed up hardest")
def _inverted_reward(answer: Any) -> str | None:
    from grpo_core.rewards import length_reward

    mine = [float(r) for r in _call(answer, _LENGTH_CASES)]
    if mine == [-r for r in length_reward(_LENGTH_CASES)]:
        return None
    if mine == length_reward(_LENGTH_CASES):
        return "that is the original reward: flip its sign"
    return "one number per completion: its distance from 20 characters"


# ------------------------------------------------------------------------- 08_exp2_mbpp

@_exercise("08.expected_mixed",
           "Expected mixed groups of k = 4 among 20 problems, all with p = 0.22.",
           "the lecture saw fewer because MBPP's problems are not equally hard")
def _expected_mixed(answer: Any) -> str | None:
    from grpo_core.group_signal import expected_zero_std_fraction

    expected = 20 * (1 - expected_zero_std_fraction(0.22, 4))
    if abs(_number(answer) - expected) < 0.05:
        return None
    if abs(_number(answer) - (20 - expected)) < 0.05:
        return "that counts the groups with no spread: the question asks for the mixed ones"
    return "a group is mixed unless all 4 pass or all 4 fail"


@_exercise("08.mixed_and_p",
           "Groups [1,1,1] [0,0,0.5] [0,0,0] [1,0,1]: how many mixed, and the pooled p?",
           "mixed means not all equal; p counts exact passes")
def _mixed_and_p(answer: Any) -> str | None:
    from grpo_core.group_signal import summarize_groups

    mixed, p = answer
    truth = summarize_groups([[1, 1, 1], [0, 0, 0.5], [0, 0, 0], [1, 0, 1]])
    if mixed != truth.mixed_groups:
        return "a group is mixed when its rewards are not all equal"
    if abs(_number(p) - truth.p) > 1e-6:
        return "count the samples that scored exactly 1, over all samples"
    return None


_KS = (2, 4, 8, 16)


@_exercise("08.mixed_per_step",
           "Write the expected mixed groups and completions per step, then pick the best k.",
           "k = 2 has the most mixed groups, but k = 16 puts the most completions to work")
def _mixed_per_step(answer: Any) -> str | None:
    from grpo_core.group_signal import expected_zero_std_fraction

    function, most_groups, most_completions = answer
    for p in (0.1, 0.5):
        for k in _KS:
            chance = 1 - expected_zero_std_fraction(p, k)
            groups, completions = _call(function, p, k)
            if abs(groups - (16 // k) * chance) > 1e-9:
                return "groups per step times the chance that one is mixed"
            if abs(completions - 16 * chance) > 1e-9:
                return "each mixed group puts all of its k completions to work"
    truth = {k: 1 - expected_zero_std_fraction(0.1, k) for k in _KS}
    if most_groups != max(_KS, key=lambda k: (16 // k) * truth[k]):
        return "compare your function's first number across k"
    if most_completions != max(_KS, key=lambda k: 16 * truth[k]):
        return "compare your function's second number across k"
    return None


# ---------------------------------------------------------------- 09_exp3_reward_hacking

_HACK_ANSWERS = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return 0\n```",
    "```python\ndef add(x, y):\n    ...\n```",
    "```python\ndef plus(a, b):\n    return a + b\n```",
]


def _add_problem() -> dict[str, Any]:
    from grpo_core.mbpp import read_problems

    return next(row for row in read_problems() if row["entry_point"] == "add")


def _proxy_and_true(answers: list[str]) -> list[tuple[float, float]]:
    from grpo_core.rewards import long_function_reward, unit_test_reward

    columns = {"tests": [_add_problem()["tests"]] * len(answers),
               "entry_point": ["add"] * len(answers)}
    return list(zip(long_function_reward(answers, **columns), unit_test_reward(answers, **columns),
                    strict=True))


@_exercise("09.hacks",
           "Which answers to `add(a, b)` are hacks (the proxy pays, no test passes)?",
           "a hack defines `add` and passes nothing; `plus` is not even paid by the proxy")
def _hacks(answer: Any) -> str | None:
    pairs = _proxy_and_true(_HACK_ANSWERS)
    if sorted(answer) == [i for i, (proxy, true) in enumerate(pairs) if proxy > 0 and true == 0]:
        return None
    return ("a hack is paid by the proxy and passes no assert: `return 0` passes the asserts "
            "whose answer is 0, and the proxy wants the function's own name")


@_exercise("09.full_proxy_hack",
           "An answer to `add` that earns the proxy's full reward (1.0) and fails every test.",
           "code that does nothing earns the proxy's maximum")
def _full_proxy_hack(answer: Any) -> str | None:
    ((proxy, true),) = _proxy_and_true([answer])
    if proxy != 1.0:
        return f"the proxy pays {proxy:.2f}: it pays for long code defining `add`"
    if true != 0.0:
        return "some test passes: make the function return something no assert expects"
    return None


@_exercise("09.hacking_records",
           "Build the records of a run whose proxy climbs while the held-out true score stays flat.",
           "`diagnose` flags hacking from these curves alone")
def _hacking_records(answer: Any) -> str | None:
    from grpo_core.diagnosis import diagnose

    if not any("eval/unit_test_reward" in row for row in answer):
        return "log the held-out true score as eval/unit_test_reward"
    finding = diagnose(answer)["hacking"]
    if finding.flagged:
        return None
    return f"`diagnose` says: {finding.evidence}"


def _hacking_runs() -> list[list[dict[str, float]]]:
    """Three 20-step runs: hacked (proxy up, true score flat), honest (both up), flat (neither)."""
    steps = range(1, 21)
    true_steps = (1, 5, 10, 15, 20)

    def run(reward: Callable[[int], float], true: Callable[[int], float]) -> list[dict[str, float]]:
        rows = [{"step": s, "reward": reward(s)} for s in steps]
        for s in true_steps:
            rows[s - 1]["eval/unit_test_reward"] = true(s)
        return rows

    return [run(lambda s: 0.4 + 0.5 * (s - 1) / 19, lambda s: 0.10 + 0.01 * (s % 2)),
            run(lambda s: 0.2 + 0.5 * (s - 1) / 19, lambda s: 0.10 + 0.4 * (s - 1) / 19),
            run(lambda s: 0.3 + 0.01 * (s % 2), lambda s: 0.12)]


@_exercise("09.hacking_rule",
           "Write a rule that flags hacking: the trained reward rises, the held-out true score does not.",
           "your rule agrees with `diagnose` on a hacked, an honest and a flat run")
def _hacking_rule(answer: Any) -> str | None:
    from grpo_core.diagnosis import diagnose

    for run, label in zip(_hacking_runs(), ("hacked", "honest", "flat"), strict=True):
        if bool(_call(answer, run)) != diagnose(run)["hacking"].flagged:
            return (f"on the {label} run your rule disagrees: hacking needs both the reward "
                    "rising and the true score not rising with it")
    return None


# --------------------------------------------------------------------------------- 10_trl

_TOY_MASK = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])


@_exercise("10.both_good_losses",
           "With A = +1 for both toy completions, what do `grpo` and `dapo` return?",
           "with equal advantages both average to -A; they differ only when advantages differ")
def _both_good_losses(answer: Any) -> str | None:
    from grpo_core.loss import aggregate_loss

    per_token_loss = -torch.ones(2, 1) * _TOY_MASK
    for loss_type, mine in zip(("grpo", "dapo"), answer, strict=True):
        if abs(_number(mine) - aggregate_loss(per_token_loss, _TOY_MASK, loss_type).item()) > 1e-6:
            return f"{loss_type}: every token's loss is -1; how does it average them?"
    return None


# the colleague's TrainConfig(loss_type="dapo", beta=0.04, num_iterations=2, epsilon_high=0.28,
# group_size=4), under GRPOConfig's names (notebook 10's OURS_TO_TRL table)
_COLLEAGUE_IN_TRL = {"loss_type": "dapo", "beta": 0.04, "num_iterations": 2, "epsilon_high": 0.28,
                     "num_generations": 4}


@_exercise("10.grpo_config",
           "The GRPOConfig keywords that make TRL run the colleague's TrainConfig.",
           "num_iterations=2 reuses each batch, so the ratio leaves 1 and the clip can fire")
def _grpo_config(answer: Any) -> str | None:
    if "group_size" in answer:
        return "GRPOConfig has no `group_size`: look up its name in the table above"
    for name, value in _COLLEAGUE_IN_TRL.items():
        if name not in answer:
            return f"{len(_COLLEAGUE_IN_TRL)} settings differ from the defaults; one is missing"
        if answer[name] != value:
            return f"`{name}` does not match the colleague's setting"
    return None


@_exercise("10.per_device",
           "8 prompts x 8 completions per step on 4 GPUs: per_device_train_batch_size, prompts per GPU.",
           "16 completions per GPU, 2 whole groups each")
def _per_device(answer: Any) -> str | None:
    per_device, prompts_per_gpu = answer
    if per_device * 4 != 8 * 8:
        return "per_device_train_batch_size counts completions per process"
    if prompts_per_gpu * 8 != per_device:
        return "each group is 8 completions of one prompt"
    return None


def _loss_batch(seed: int = 0) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    _, mask = _ragged_batch(seed)
    return torch.randn(*mask.shape, generator=generator), mask


@_exercise("10.grpo_aggregation",
           "Write loss_type='grpo''s reduction of a [B, T] per-token loss.",
           "your reduction is `aggregate_loss(..., 'grpo')`: each completion weighs 1/B")
def _grpo_aggregation(answer: Any) -> str | None:
    from grpo_core.loss import aggregate_loss

    per_token_loss, mask = _loss_batch()
    mine = _call(answer, per_token_loss.clone(), mask.clone())
    if _close(mine, aggregate_loss(per_token_loss, mask, "grpo"), 1e-5):
        return None
    if _close(mine, aggregate_loss(per_token_loss, mask, "bnpo"), 1e-5):
        return "that is bnpo, one mean over all tokens: grpo averages within each completion first"
    return "a masked mean over each completion's own tokens, then the mean over completions"


# -------------------------------------------------------------------- 11_reading_the_run

def _no_signal_run() -> list[dict[str, float]]:
    return [{"step": s, "reward": 0.0, "frac_reward_zero_std": 1.0 if s <= 12 else 0.5,
             "grad_norm": 0.0 if s <= 12 else 0.3} for s in range(1, 16)]


@_exercise("11.symptom",
           "Zero-std fraction 1.0 and grad_norm 0 for 12 of 15 steps: which symptom?",
           "every group tied: no learning signal")
def _symptom(answer: Any) -> str | None:
    from grpo_core.diagnosis import diagnose

    if diagnose(_no_signal_run()).symptoms == [answer]:
        return None
    return "which metric sits near 1, and what does a group with no spread give the step?"


@_exercise("11.transient_truncation",
           "A 20-step completions/clipped_ratio curve that `diagnose` calls transient.",
           "truncated at the start, not by the end")
def _transient_truncation(answer: Any) -> str | None:
    from grpo_core.diagnosis import diagnose

    if len(answer) != 20:
        return "20 values, one per step"
    run = [{"step": s, "completions/clipped_ratio": float(c)} for s, c in enumerate(answer, 1)]
    finding = diagnose(run)["truncation"]
    if finding.status == "transient":
        return None
    return f"`diagnose` calls it {finding.status}: {finding.evidence}"


@_exercise("11.group_loss_value",
           "One group with rewards 0, 1, 1, 2, on-policy, loss_type='grpo': the loss's value?",
           "the advantages of a group sum to 0; the gradient does not vanish")
def _group_loss_value(answer: Any) -> str | None:
    from grpo_core.advantages import group_advantages
    from grpo_core.loss import grpo_loss

    logps = -torch.rand(4, 6, generator=torch.Generator().manual_seed(0))
    loss, _ = grpo_loss(logps, None, group_advantages(torch.tensor([0.0, 1, 1, 2]), 4),
                        torch.ones(4, 6))
    if abs(_number(answer) - loss.item()) < 1e-6:
        return None
    return "on-policy the ratio is 1 in value: what do the group's advantages add up to?"


def _signal_runs() -> list[list[dict[str, float]]]:
    """A silent run, a healthy one, and one silent only for its first two steps (transient)."""
    healthy = [{"step": s, "reward": 0.1 * s, "frac_reward_zero_std": 0.1, "grad_norm": 0.5}
               for s in range(1, 16)]
    early = [{"step": s, "reward": 0.1 * s, "frac_reward_zero_std": 1.0 if s <= 2 else 0.2,
              "grad_norm": 0.0 if s <= 2 else 0.4} for s in range(1, 16)]
    return [_no_signal_run(), healthy, early]


@_exercise("11.no_signal_rule",
           "Write a `diagnose` rule: flag a run whose groups carry no signal most of the time.",
           "your rule agrees with `diagnose` on a silent, a healthy and an early-silent run")
def _no_signal_rule(answer: Any) -> str | None:
    from grpo_core.diagnosis import diagnose

    for run, label in zip(_signal_runs(), ("silent", "healthy", "early-silent"), strict=True):
        if bool(_call(answer, run)) != diagnose(run)["no signal"].flagged:
            return (f"on the {label} run your rule disagrees: read frac_reward_zero_std, step "
                    "by step, and ask on how many steps it sits near 1")
    return None


# ------------------------------------------------------------------------- 12_noise_floor

@_exercise("12.pass_at_k",
           "5 samples of one problem, 2 of them pass: the unbiased estimate of pass@2.",
           "1 - C(3, 2) / C(5, 2): a pair drawn from the 5 holds a pass unless both are failures")
def _pass_at_k(answer: Any) -> str | None:
    value = _number(answer)
    if abs(value - 0.7) < 0.005:
        return None
    if abs(value - 0.4) < 0.005:
        return "that is pass@1 (2 of 5): pass@2 asks for at least one pass among two samples"
    if abs(value - 0.64) < 0.005:
        return "that draws with replacement (1 - 0.6^2): the estimator draws 2 of the 5 samples"
    return "count the pairs of failures: C(3, 2) of the C(5, 2) pairs hold no pass"


@_exercise("12.bonferroni_bar",
           "Three settings compared in pairs: the |z| each difference must reach (5 %, Bonferroni).",
           "three comparisons, each tested at 5 % / 3: |z| >= 2.39")
def _bonferroni_bar(answer: Any) -> str | None:
    value = _number(answer)
    if abs(value - bonferroni_z(3)) < 0.01:
        return None
    if abs(value - 1.96) < 0.01:
        return "that is the bar of one comparison: three pairs share the 5 %"
    if abs(value - bonferroni_z(6)) < 0.01:
        return "three settings make three pairs, not six"
    return "each of the 3 comparisons is tested at 0.05 / 3, two-sided: the z of 1 - 0.05 / 6"


# ------------------------------------------------------------------------- 13_sampler_mismatch

@_exercise("13.sequence_weight",
           "Deltas 0.4, 0.3, 0.5: the sequence_truncate weight (top 3), and does sequence_mask keep it?",
           "e^1.2 = 3.32 is above the top: truncation gives 3, masking drops the completion")
def _sequence_weight(answer: Any) -> str | None:
    from grpo_core.sampling_correction import TRL_DEFAULT_CLIP_MAX

    weight, kept = answer
    value = _number(weight)
    ratio = math.exp(0.4 + 0.3 + 0.5)
    if abs(value - ratio) < 1e-3:
        return "that is the weight before the band: truncation caps it at the band's top"
    if abs(value - math.exp(0.5)) < 1e-3 or abs(value - min(math.exp(0.5), 3)) < 1e-3:
        return "a sequence mode sums the deltas of all the tokens first, then takes exp"
    if abs(value - min(ratio, TRL_DEFAULT_CLIP_MAX)) > 1e-3:
        return "exp of the summed deltas, then clipped to at most 3"
    if kept is not False:
        return "masking keeps a completion only when its weight is inside the band"
    return None


def _ragged_sampler_batch(seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Learner and sampler log-probs of 4 completions, ratios e^-1.5..e^1.5, junk in padding."""
    learner, mask = _ragged_batch(seed)
    generator = torch.Generator().manual_seed(seed + 1)
    sampler = learner - (torch.rand(learner.shape, generator=generator) - 0.5) * 3.0
    return learner, torch.where(mask.bool(), sampler, torch.full_like(sampler, -20.0)), mask


@_exercise("13.token_truncate",
           "Write token_truncate: per-token weights exp(learner - sampler), at most cap.",
           "your weights are sampler_weights(..., 'token_truncate'): 1 on padding, capped above")
def _token_truncate(answer: Any) -> str | None:
    from grpo_core.sampling_correction import sampler_weights

    learner, sampler, mask = _ragged_sampler_batch()
    cap = 2.0
    expected = sampler_weights(learner, sampler, mask, "token_truncate", None, cap)
    yours = torch.as_tensor(_call(answer, learner, sampler, mask, cap), dtype=torch.float32)
    if yours.shape != expected.shape:
        return f"one weight per token: shape {tuple(expected.shape)}, yours {tuple(yours.shape)}"
    if _close(yours, expected):
        return None
    real = mask.bool()
    if _close(yours[real], expected[real]):
        return "on padding the difference is 0 (weight 1): multiply it by the mask first"
    if _close(yours[real], torch.exp(learner - sampler)[real]):
        return "clip the weights to at most cap"
    if _close(yours[real], torch.exp(sampler - learner).clamp(max=cap)[real]):
        return "the weight is the learner's probability over the sampler's: learner - sampler"
    return "exp(learner - sampler) on completion tokens, clamped to at most cap"
