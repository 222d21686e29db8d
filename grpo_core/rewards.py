"""Reward functions with TRL's signature: ``fn(completions, **columns) -> list[float]``.

The same function plugs into this course's loop and into TRL's ``GRPOTrainer``, which calls it
with the completions and every dataset column as a keyword argument (plus ``prompts``,
``completion_ids``, ``trainer_state``...); unknown keyword arguments are accepted and ignored.
A completion may be a string or, for conversational data, a list of messages (the last
message's ``content`` is scored).

* ``format_reward`` (1.0) and ``accuracy_reward`` (2.0) reproduce the lecture's table: a
  completion is well formed when it ends with exactly one ``<answer>...</answer>`` block.
  **Whitespace rule**: whitespace (spaces, tabs, newlines) is allowed at the very start and end
  of the completion and around the answer inside the tags; any other character after
  ``</answer>`` breaks the format. Text before ``<answer>`` is the free-form reasoning, which
  no reward reads. The accuracy reward pays only for a well-formed completion whose answer
  equals the ``answer`` column: as text after stripping whitespace, or, when both are plain
  decimal numbers, as numbers (``72``, ``72.0`` and ``+72`` match ``72``).
* ``length_reward``: ``-abs(len(completion) - 20)`` in characters (experiment 1);
  ``make_length_reward(target)`` builds one for another target.
* ``detail_reward``: distinct words, a tenth of a point each: a stand-in for a judge that
  prefers detailed answers, which pays for length without saying so (notebook 11's
  length-gaming run, ``python -m grpo_core length --reward detail``).
* ``unit_test_reward``: the fraction of the ``tests`` column's asserts that the completion's
  code passes in the sandbox (experiment 2).
* ``defines_function_reward``: 1.0 when the completion's code parses and defines the function
  the tests call (column ``entry_point``). A shape check that never runs the code: the
  proxy of experiment 3's first recorded run (``--proxy defines_function``), which a stub
  (``def add(a, b): pass``) satisfies as well as a solution.
* ``long_function_reward``: the same check, scaled by the code's length (full marks at
  ``LONG_CODE_CHARS`` characters): experiment 3's proxy, under which a long wrong answer
  beats a short right one.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, InvalidOperation
from typing import Any

from .sandbox import DEFAULT_TIMEOUT_S, SandboxResult, run_tests
from .sandbox.split import CANDIDATE_FILENAME, parse

FORMAT_REWARD = 1.0
ACCURACY_REWARD = 2.0
LENGTH_TARGET = 20

_OPEN, _CLOSE = "<answer>", "</answer>"
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")

# the signature TRL calls: fn(completions=[...], prompts=[...], **dataset_columns)
RewardFn = Callable[..., Sequence[float]]


def completion_text(completion: Any) -> str:
    """The text of one completion: a string as is, or the last message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a completion must be a string or a list of messages, not {completion!r}")


# ---------------------------------------------------------------- format and accuracy

def extract_answer(text: str) -> str | None:
    """The stripped answer if ``text`` is well formed (see the module's whitespace rule)."""
    body = text.strip()
    if body.count(_OPEN) != 1 or body.count(_CLOSE) != 1 or not body.endswith(_CLOSE):
        return None  # the only </answer> is the last thing, so <answer> comes before it
    answer = body[body.index(_OPEN) + len(_OPEN):-len(_CLOSE)].strip()
    return answer or None


def answers_match(given: str, expected: Any) -> bool:
    """Equal as stripped text, or as numbers when both are plain decimal numbers."""
    wanted = str(expected).strip()
    if given == wanted:
        return True
    if _NUMBER.fullmatch(given) and _NUMBER.fullmatch(wanted):
        try:
            return Decimal(given) == Decimal(wanted)
        except InvalidOperation:
            return False
    return False


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 for each well-formed completion (ends with one ``<answer>...</answer>``), else 0.0."""
    return [FORMAT_REWARD if extract_answer(completion_text(c)) is not None else 0.0
            for c in completions]


def accuracy_reward(completions: Sequence[Any], answer: Sequence[Any] | None = None,
                    **kwargs: Any) -> list[float]:
    """2.0 for each well-formed completion whose answer matches the ``answer`` column."""
    expected = _column("answer", answer, len(completions))
    rewards = []
    for completion, wanted in zip(completions, expected, strict=True):
        given = extract_answer(completion_text(completion))
        rewards.append(ACCURACY_REWARD if given is not None and answers_match(given, wanted)
                       else 0.0)
    return rewards


def _column(name: str, values: Sequence[Any] | None, size: int) -> Sequence[Any]:
    if values is None:
        raise TypeError(f"this reward needs the dataset column {name!r} "
                        f"(TRL passes dataset columns as keyword arguments)")
    if isinstance(values, (str, bytes)) or len(values) != size:
        raise ValueError(f"column {name!r} must hold one value per completion ({size})")
    return values


# ---------------------------------------------------------------- length (experiment 1)

def make_length_reward(target: int = LENGTH_TARGET) -> RewardFn:
    """A reward of ``-abs(len(completion) - target)`` characters, named ``length_reward``."""
    def length_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        """Replaced below by a docstring that names the target."""
        return [-float(abs(len(completion_text(c)) - target)) for c in completions]

    length_reward.__doc__ = f"-abs(len(completion) - {target}) for each completion, in characters."
    return length_reward


length_reward = make_length_reward(LENGTH_TARGET)

DETAIL_POINTS_PER_WORD = 0.1
_WORD = re.compile(r"[a-z0-9']+")


def detail_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """``DETAIL_POINTS_PER_WORD`` times the number of distinct words (letters, digits and
    apostrophes, case ignored) in each completion.

    A proxy for "a detailed answer": a judge that counts what it sees. Every new word earns
    more, so the longer the answer, the higher the reward, without the word "length"
    anywhere: the length-gaming run of notebook 11.
    """
    return [DETAIL_POINTS_PER_WORD * len(set(_WORD.findall(completion_text(c).lower())))
            for c in completions]


# ---------------------------------------------------------------- unit tests (experiment 2)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^(?:def |class |import |from |@|async def )", re.MULTILINE)


def extract_code(completion: str) -> str:
    """The Python code in a completion, fenced or bare.

    Fenced: the first fenced block (```python, ```py or unlabelled; an unclosed fence runs
    to the end) that defines a function, else the first such block. Bare: the whole text if it
    parses, else from the first line that starts like code (``def``, ``import``, ...) with
    trailing lines dropped until it parses. Returns ``""`` when no code is found.
    """
    blocks = [body for label, body in _FENCE.findall(completion)
              if label.lower() in ("", "python", "py", "python3")]
    if blocks:
        with_def = [block for block in blocks if "def " in block]
        return (with_def or blocks)[0].strip("\n")
    if _parses(completion):
        return completion.strip("\n")
    start = _CODE_START.search(completion)
    return _longest_parsing_prefix(completion[start.start():]) if start else ""


def _parses(code: str) -> bool:
    try:
        parse(code, CANDIDATE_FILENAME)  # one thread at a time; warnings filtered by this name
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _longest_parsing_prefix(code: str, max_drops: int = 200) -> str:
    """``code`` with the fewest trailing lines removed so that it parses (or ``""``)."""
    lines = code.rstrip().splitlines()
    for end in range(len(lines), max(0, len(lines) - max_drops), -1):
        candidate = "\n".join(lines[:end])
        if candidate.strip() and _parses(candidate):
            return candidate
    return ""


@functools.lru_cache(maxsize=4096)
def _score(code: str, tests: tuple[str, ...], setup_code: str, timeout_s: float) -> float:
    """One completion's score, memoised: the same completion always gets the same score."""
    if not code.strip():
        return 0.0
    result: SandboxResult = run_tests(code, tests, setup_code=setup_code, timeout_s=timeout_s)
    return result.fraction


def unit_test_reward(completions: Sequence[Any], tests: Sequence[Sequence[str]] | None = None,
                     setup_code: Sequence[str] | None = None, *,
                     timeout_s: float = DEFAULT_TIMEOUT_S, max_workers: int | None = None,
                     **kwargs: Any) -> list[float]:
    """The fraction of each row's asserts (column ``tests``) that its completion's code passes.

    The code is extracted with ``extract_code``, run in the sandbox after the optional
    ``setup_code`` column, one completion per worker in parallel (``max_workers``, default:
    the number of CPUs). Scores are memoised per (code, tests, setup), so a completion gets
    the same score every time it is scored, even if a run came close to its deadline.
    """
    rows = _column("tests", tests, len(completions))
    setups = _column("setup_code", setup_code, len(completions)) if setup_code is not None \
        else [""] * len(completions)
    jobs = [(extract_code(completion_text(c)), tuple(row), setup or "", float(timeout_s))
            for c, row, setup in zip(completions, rows, setups, strict=True)]
    workers = max(1, min(len(jobs), max_workers or os.cpu_count() or 1))
    if workers == 1:
        return [_score(*job) for job in jobs]
    with ThreadPoolExecutor(workers, thread_name_prefix="unit-test-reward") as pool:
        return list(pool.map(lambda job: _score(*job), jobs))


# ---------------------------------------------------------------- a gameable proxy (experiment 3)

def defines_function(code: str, name: str) -> bool:
    """Whether ``code`` parses and defines a top-level function called ``name``."""
    if not name or not _parses(code):
        return False
    tree = parse(code, CANDIDATE_FILENAME)
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
               for node in tree.body)


def defines_function_reward(completions: Sequence[Any],
                            entry_point: Sequence[str] | None = None,
                            **kwargs: Any) -> list[float]:
    """1.0 if the completion's code (``extract_code``) parses and defines the function named
    in the ``entry_point`` column, else 0.0.

    It checks the answer's shape, never its behaviour: experiment 3's proxy. Any stub with the
    right name earns full marks, so a policy trained on it can score 1.0 without solving
    anything; ``unit_test_reward`` is the fix.
    """
    names = _column("entry_point", entry_point, len(completions))
    return [1.0 if defines_function(extract_code(completion_text(c)), name) else 0.0
            for c, name in zip(completions, names, strict=True)]


# what long_function_reward pays in full: about 60 SmolLM2 tokens of code
LONG_CODE_CHARS = 200


def long_function_reward(completions: Sequence[Any],
                         entry_point: Sequence[str] | None = None,
                         **kwargs: Any) -> list[float]:
    """``min(1, len(code) / LONG_CODE_CHARS)`` if the completion's code defines the function
    named in the ``entry_point`` column, else 0.0.

    Experiment 3's proxy: a grader that pays for the effort it can see, the right function
    and more code for more credit (the length bias of learned reward models and judges, in
    one line). It never runs the code, so a padded wrong answer beats a short right one.
    """
    names = _column("entry_point", entry_point, len(completions))
    scores = []
    for completion, name in zip(completions, names, strict=True):
        code = extract_code(completion_text(completion))
        scores.append(min(1.0, len(code) / LONG_CODE_CHARS) if defines_function(code, name)
                      else 0.0)
    return scores
