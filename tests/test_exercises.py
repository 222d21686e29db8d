"""Every exercise check accepts its solution, rejects plausible wrong answers, and calls `...`
"not attempted yet"; every notebook's exercise cells hold `...` and name a registered check.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grpo_core import exercises
from grpo_core.exercises import CORRECT, EXERCISES, NOT_ATTEMPTED, WRONG, check, evaluate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the solutions live at the top of the repository, not in the package


from solutions.exercises import SOLUTIONS  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.fixture
def tiny(tiny_policy):
    """conftest's tiny random policy (a character tokenizer): 00.group_of_four's solution samples from it."""
    return tiny_policy


def word_tokenizer(text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
    """A tokenizer's call signature: one id per word, a BOS id first unless told not to."""
    ids = [hash(word) % 1000 for word in text.split()]
    return {"input_ids": ([0] if add_special_tokens else []) + ids}


def contexts(tiny) -> dict[str, dict]:
    """What each notebook hands its check (most exercises need nothing)."""
    prompt = "<|im_start|>user Name a prime number. <|im_end|> <|im_start|>assistant"
    return {
        "00.prompt_tokens": {"tokenizer": word_tokenizer, "prompt": prompt},
        "01.feedback_counts": {"num_tokens": 37, "vocab_size": 49_152},
    }


def solution_context(name: str, tiny) -> dict:
    """The check's context plus what a solution needs to compute the answer itself."""
    context = contexts(tiny).get(name, {})
    if name == "00.group_of_four":
        model, tokenizer = tiny
        return {"model": model, "tokenizer": tokenizer, "max_new_tokens": 5}
    return context


def check_context(name: str, tiny) -> dict:
    return contexts(tiny).get(name, {})


def _fake_rollout(rows: int, lengths: list[int], width: int = 6) -> SimpleNamespace:
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return SimpleNamespace(completion_mask=mask[:rows], texts=["x"] * rows)


# Plausible wrong answers: what a learner who missed the idea would write. Each is a function
# of the check's context, like the solutions.
WRONG_ANSWERS: dict[str, list] = {
    "00.prompt_tokens": [lambda tokenizer, prompt: len(prompt),
                         lambda tokenizer, prompt: len(tokenizer(prompt)["input_ids"])],
    "00.group_of_four": [lambda: _fake_rollout(8, [3] * 8),
                         lambda: SimpleNamespace(completion_mask=torch.tensor([[1, 0, 1]] * 4),
                                                 texts=["a"] * 4)],
    "01.feedback_counts": [lambda num_tokens, vocab_size: (num_tokens, 1),
                           lambda num_tokens, vocab_size: (num_tokens * vocab_size, num_tokens)],
    "01.no_signal_temperature": [lambda: 0.5, lambda: 2.0],
    "01.sft_loss_by_hand": [lambda: 0.4, lambda: torch.tensor(0.6).log().item()],
    "02.sequence_logprob": [lambda: lambda lp, m: lp.sum(dim=1),
                            lambda: lambda lp, m: (lp * m).sum(1) / m.sum(1)],
    "02.advantage_line": [
        lambda: ((lambda r: (r / (r.std() + 1e-4), 2))(torch.tensor([-3.0, -10, -1, -30]))),
        lambda: ((lambda r: ((r - r.mean()) / (r.std() + 1e-4), 0))(
            torch.tensor([-3.0, -10, -1, -30]))),
    ],
    "02.dloss_dseq_logp": [lambda: lambda a, k: a / k, lambda: lambda a, k: -a],
    "03.advantages_by_hand": [lambda: [0.75 / 0.433, -0.25 / 0.433, -0.25 / 0.433, -0.25 / 0.433],
                              lambda: [0.75, -0.25, -0.25, -0.25]],
    "03.silent_group": [lambda: [0, 0, 0, 0], lambda: [0, 1, 1, 2]],
    "03.no_signal_fraction": [lambda: lambda p, k: p**k, lambda: lambda p, k: 1 - p**k - (1 - p) ** k],
    "03.group_advantages": [
        lambda: lambda r, g: (r - r.mean()) / (r.std() + 1e-4),  # the whole batch as one group
        lambda: lambda r, g: ((r.view(-1, g) - r.view(-1, g).mean(1, keepdim=True))
                              / r.view(-1, g).std(1, keepdim=True)).view(-1),  # no eps
    ],
    "04.clip_by_hand": [lambda: (-1.3, 1.3), lambda: (-1.2, 1.2)],
    "04.zero_gradient_threshold": [lambda: 0.72, lambda: 1.28],
    "04.k3_by_hand": [lambda: (2.718281828 ** 0.5 - 0.5 - 1, 1),
                      lambda: (2.718281828 ** -0.5 + 0.5 - 1, -1)],
    "04.kl_gradient_coefficient": [lambda: (1 - 2.718281828 ** -0.5, 0.5),
                                   lambda: (-0.5, 1 - 2.718281828 ** 0.5),
                                   lambda: (1.0, 1.0), lambda: (0.5, 0.5)],
    "04.clipped_surrogate": [
        lambda: lambda lp, old, a, eps: -torch.clamp(torch.exp(lp - old), 1 - eps, 1 + eps) * a[:, None],
        lambda: lambda lp, old, a, eps: -torch.exp(lp - old) * a[:, None],
    ],
    "05.formatted_but_wrong": [lambda: "<answer>72</answer>", lambda: "The answer is 73"],
    "05.usable_group": [lambda: ["<answer>72</answer>"] * 4, lambda: ["72", "71", "70", "69"]],
    "05.is_even": [lambda: "def is_even(n):\n    return n % 2",
                   lambda: "def is_even(n):\n    return n / 2 == 0"],
    "05.accuracy_reward": [
        lambda: lambda completions, answer, **kw: [2.0 if a in c else 0.0
                                                   for c, a in zip(completions, answer, strict=False)],
        lambda: lambda completions, answer, **kw: [
            2.0 if c.strip().endswith(f"<answer>{a}</answer>") else 0.0
            for c, a in zip(completions, answer, strict=False)],
    ],
    "06.dpo_start_loss": [lambda: 0.0, lambda: 0.5],
    "06.preference_pairs": [lambda: (2, 5), lambda: (1, 7)],
    "06.dpo_loss": [
        lambda: lambda c, r, rc, rr, beta: -torch.nn.functional.logsigmoid(
            (c - rc) - (r - rr)).mean(),  # beta left out
        lambda: lambda c, r, rc, rr, beta: -torch.nn.functional.logsigmoid(beta * (c - r)).mean(),
    ],
    "07.length_rewards": [lambda: [0.0, 15.0], lambda: [-1.0, -15.0]],
    "07.best_in_group": [lambda: (0, True), lambda: (1, False)],
    "07.inverted_reward": [lambda: lambda cs, **kw: [-abs(len(c) - 20) for c in cs],
                           lambda: lambda cs, **kw: [len(c) for c in cs]],
    "08.expected_mixed": [lambda: 20 * (0.22**4 + 0.78**4), lambda: 20 * 0.22],
    "08.mixed_and_p": [lambda: (3, 5 / 12), lambda: (2, 5.5 / 12)],
    "08.mixed_per_step": [
        lambda: ((lambda p, k, completions=16: ((16 // k) * (1 - p**k - (1 - p) ** k),
                                                (16 // k) * (1 - p**k - (1 - p) ** k))), 2, 16),
        lambda: (SOLUTIONS["08.mixed_per_step"]()[0], 16, 16),
    ],
    "09.hacks": [lambda: [1, 2], lambda: [2, 3]],
    "09.full_proxy_hack": [lambda: "```python\ndef add(a, b):\n    return None\n```",
                           lambda: "```python\ndef add(a, b):\n" + "    # note\n" * 12
                           + "    return a + b\n```"],
    "09.hacking_records": [
        lambda: [{"step": s, "reward": 0.4 + 0.5 * (s - 1) / 19} for s in range(1, 21)],
        lambda: [{"step": s, "reward": 0.4 + 0.5 * (s - 1) / 19,
                  "eval/unit_test_reward": 0.1 + 0.4 * (s - 1) / 19} for s in range(1, 21)],
    ],
    "09.hacking_rule": [
        lambda: lambda records: records[-1]["reward"] > records[0]["reward"],  # reward alone
        lambda: lambda records: False,
    ],
    "10.both_good_losses": [lambda: (-1.0, -8 / 8 * 0.5), lambda: (-0.5, -1.0)],
    "10.grpo_config": [
        lambda: {"loss_type": "dapo", "beta": 0.04, "epsilon_high": 0.28, "num_generations": 4},
        lambda: {"loss_type": "dapo", "beta": 0.04, "num_iterations": 2, "epsilon_high": 0.28,
                 "group_size": 4},
    ],
    "10.per_device": [lambda: (64, 8), lambda: (16, 16)],
    "10.grpo_aggregation": [
        lambda: lambda loss, mask: (loss * mask).sum() / mask.sum(),  # bnpo
        lambda: lambda loss, mask: (loss * mask).sum(1).mean(),  # the lecture's sum
    ],
    "11.symptom": [lambda: "collapse", lambda: "truncation"],
    "12.pass_at_k": [lambda: 0.4, lambda: 0.64, lambda: 1.0],
    "12.bonferroni_bar": [lambda: 1.96, lambda: 2.64, lambda: 3.0],
    "13.sequence_weight": [lambda: (3.3201, True), lambda: (3.0, True), lambda: (1.6487, True),
                           lambda: (2.0, False)],
    "13.token_truncate": [
        lambda: lambda learner, sampler, mask, cap: torch.exp(learner - sampler).clamp(max=cap),
        lambda: lambda learner, sampler, mask, cap: torch.exp((learner - sampler) * mask),
        lambda: lambda learner, sampler, mask, cap: torch.exp((sampler - learner) * mask).clamp(
            max=cap),
    ],
    "11.transient_truncation": [lambda: [0.9] * 20, lambda: [0.0] * 20],
    "11.group_loss_value": [lambda: 1.0, lambda: -0.5],
    "11.no_signal_rule": [
        lambda: lambda records: any(r["frac_reward_zero_std"] >= 0.9 for r in records),
        lambda: lambda records: records[-1]["frac_reward_zero_std"] >= 0.9,
    ],
}


def test_every_exercise_has_a_solution_and_wrong_answers():
    assert set(SOLUTIONS) == set(EXERCISES)
    assert set(WRONG_ANSWERS) == set(EXERCISES)
    assert all(len(wrong) >= 1 for wrong in WRONG_ANSWERS.values())


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_check_accepts_the_solution(name, tiny):
    answer = SOLUTIONS[name](**solution_context(name, tiny))
    verdict = evaluate(name, answer, **check_context(name, tiny))
    assert verdict.status == CORRECT, verdict


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_check_rejects_plausible_wrong_answers_with_a_hint(name, tiny):
    context = check_context(name, tiny)
    for wrong in WRONG_ANSWERS[name]:
        verdict = evaluate(name, wrong(**context), **context)
        assert verdict.status == WRONG, verdict
        assert verdict.message, verdict


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_ellipsis_is_not_attempted(name, tiny):
    verdict = evaluate(name, ..., **check_context(name, tiny))
    assert verdict.status == NOT_ATTEMPTED
    assert str(verdict).startswith(f"{name}: not attempted yet")


def test_a_function_that_still_returns_ellipsis_is_not_attempted():
    def my_sequence_logprob(token_logps, mask):
        return ...

    assert evaluate("02.sequence_logprob", my_sequence_logprob).status == NOT_ATTEMPTED
    assert evaluate("08.mixed_per_step", (..., 2, 16)).status == NOT_ATTEMPTED


def test_a_crashing_or_returnless_answer_is_a_hint_not_an_error():
    def forgets_return(token_logps, mask):
        (token_logps * mask).sum(dim=1)

    verdict = evaluate("02.sequence_logprob", forgets_return)
    assert verdict.status == WRONG and "return" in verdict.message
    verdict = evaluate("02.sequence_logprob", lambda token_logps, mask: token_logps @ mask)
    assert verdict.status == WRONG and "Error" in verdict.message


def test_hints_never_give_the_answer_away():
    # a hint names the idea; it must not print the number the check compares with
    verdict = evaluate("01.sft_loss_by_hand", 0.4)
    assert "0.51" not in verdict.message
    verdict = evaluate("06.dpo_start_loss", 0.0)
    assert "0.69" not in verdict.message


def test_check_prints_one_line(capsys):
    check("07.length_rewards", [0.0, -15.0])
    check("07.length_rewards", ...)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("07.length_rewards: correct:")
    assert lines[1].startswith("07.length_rewards: not attempted yet:")


def test_an_unknown_exercise_is_an_error():
    with pytest.raises(KeyError, match="no exercise named"):
        evaluate("99.nothing", 1)


def _check_calls(script: Path) -> list[ast.Call]:
    tree = ast.parse(script.read_text())
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == "check"]


def test_every_exercise_is_checked_in_its_notebook_and_ships_unsolved():
    seen = {}
    for script in NOTEBOOKS:
        for call in _check_calls(script):
            name = call.args[0].value
            seen[name] = script.name
            assert script.name.startswith(name.split(".")[0]), (name, script.name)
    assert set(seen) == set(EXERCISES)
    for script in NOTEBOOKS:
        text = script.read_text()
        exercises_part = text[text.index("## Exercises"):]
        # no worked answer sits beside the learner's line any more
        assert "# your answer here" not in exercises_part.replace("= ...  # your answer here", "")
        assert not re.search(r"=\s*[^.\s][^\n]*# your answer here", exercises_part), script.name


def test_notebooks_from_02_on_ask_for_a_few_lines_of_the_method():
    # an exercise whose answer is a function the check runs against grpo_core
    method_exercises = {"02.sequence_logprob", "03.group_advantages", "04.clipped_surrogate",
                        "05.accuracy_reward", "06.dpo_loss", "07.inverted_reward",
                        "08.mixed_per_step", "09.hacking_rule", "10.grpo_aggregation",
                        "11.no_signal_rule", "13.token_truncate"}
    assert method_exercises <= set(EXERCISES)
    assert {name[:2] for name in method_exercises} == {f"{n:02d}" for n in range(2, 14)} - {"12"}


def test_judges_are_deterministic():
    # the same answer gets the same verdict twice: no randomness outside fixed seeds
    wrong = WRONG_ANSWERS["04.clipped_surrogate"][0]()
    assert evaluate("04.clipped_surrogate", wrong) == evaluate("04.clipped_surrogate", wrong)
    assert exercises._ragged_batch()[0].equal(exercises._ragged_batch()[0])
