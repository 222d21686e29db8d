"""The course's three experiments: what each trains on, its rewards, its data split, its evaluator.

One definition used by the command line (``python -m grpo_core``), the notebooks and
``scripts/trl_mbpp.py``, so TRL trains on exactly the rows and rewards our loop trains on.

- ``length`` (experiment 1): reward ``-abs(len(completion) - 20)`` on characters; a completion
  is best when it is 20 characters long. ``negate=True`` flips the sign (notebook 07's
  demonstration that GRPO optimizes exactly the number you return).
- ``mbpp`` (experiment 2): write a Python function; the reward is the fraction of the
  problem's asserts that pass in the sandbox (``unit_test_reward``). ``k`` sets the group
  size and keeps the completions per step fixed (the profile's ``group_size x
  prompts_per_step``), so a larger k means fewer prompts per step.
- ``hacking`` (experiment 3): the same coding problems, rewarded by a gameable proxy that
  never runs the code: ``long_function_reward`` (the code defines the function the tests
  call, and more code earns more, full marks at 200 characters), or with
  ``proxy="defines_function"`` ``defines_function_reward`` (defining it is enough). The true
  score, ``unit_test_reward``, is logged beside it twice: on the training samples with weight 0
  (``rewards/unit_test_reward/mean``, it never reaches the advantages), and on held-out
  problems every few steps (``eval/unit_test_reward``, with the proxy's ``eval/<proxy>`` and
  ``eval/defines_function_reward`` next to it).

Loads no model: an :class:`Experiment` is data, and :func:`build_config` turns it and a profile
into the loop's :class:`~grpo_core.loop.TrainConfig`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_core.evaluation import Evaluator
from grpo_core.hardware import Precision, detect_precision, float32_precision
from grpo_core.loop import TrainConfig
from grpo_core.profiles import Profile
from grpo_core.rewards import LENGTH_TARGET, RewardFn
from grpo_core.run_files import EXP1_PROMPTS, read_jsonl
from grpo_core.scoring import reward_name


@dataclass
class Experiment:
    """What an experiment trains on: prompts, reward functions, and its own loop settings.

    Attributes:
        name: the command-line name.
        prompts: rows ``{"prompt": ..., <columns for the rewards>}``.
        reward_funcs, reward_weights: TRL-style reward functions and their weights.
        overrides: ``TrainConfig`` fields this experiment sets (the profile gives the rest).
        targets: dashed lines for the plot, ``{metric: value}``.
        title: the plot's title.
        evaluate: a held-out measure run every ``eval_every`` steps (``train``'s ``evaluate``).
        notes: what ``config.json`` should record about the experiment's design.
    """

    name: str
    prompts: list[dict[str, Any]]
    reward_funcs: list[RewardFn]
    reward_weights: list[float] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)
    title: str = ""
    evaluate: Evaluator | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def negated(fn: RewardFn) -> RewardFn:
    """``fn`` with its sign flipped, logged as ``negated_<name>``: what a sign bug trains."""

    def flipped(completions: list[str], **columns: Any) -> list[float]:
        return [-value for value in fn(completions=completions, **columns)]

    flipped.__name__ = f"negated_{reward_name(fn)}"
    return flipped


def length_experiment(profile: Profile, negate: bool = False) -> Experiment:
    """Experiment 1: be close to 20 characters long (``grpo_core.rewards.length_reward``).

    Loop settings: the lecture's loss (``loss_type="grpo"``: each completion's log-prob
    averaged over its tokens, then over completions), no KL (beta = 0), one update per rollout.
    """
    from grpo_core.rewards import length_reward

    reward = negated(length_reward) if negate else length_reward
    target = "longer and longer (sign flipped)" if negate else f"{LENGTH_TARGET} characters"
    return Experiment(
        name="length",
        prompts=read_jsonl(EXP1_PROMPTS),
        reward_funcs=[reward],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1},
        targets={} if negate else {"completions/mean_chars": LENGTH_TARGET},
        title=f"experiment 1 ({profile.name}): reward -|len - 20|, target {target}",
    )


# experiment 2 in the cpu and smoke profiles: the course's own problems at the edge of the
# 135M model's ability (see notebook 08's signal check); the gpu profile uses MBPP's train split
MBPP_LOCAL_DIFFICULTIES = ("very easy", "easy")


def completions_per_step(profile: Profile) -> int:
    """The rollout size every k of the sweep shares: the profile's ``group_size x prompts``."""
    return profile.group_size * profile.prompts_per_step


def k_sweep_sizes(profile: Profile, k: int) -> dict[str, int]:
    """``{"group_size": k, "prompts_per_step": n // k}`` for ``n = completions_per_step``.

    Raises ``ValueError`` when k < 2 or k does not divide n (the sweep compares group sizes
    at the same number of completions, hence the same compute, per step).
    """
    total = completions_per_step(profile)
    if not isinstance(k, int) or k < 2:
        raise ValueError(f"k (the group size) must be an int >= 2, got {k!r}")
    if total % k:
        raise ValueError(
            f"k={k} does not divide the {total} completions per step of the {profile.name!r} "
            f"profile ({profile.prompts_per_step} prompts x {profile.group_size}); use a divisor "
            f"of {total} or change the profile's group_size/prompts_per_step")
    return {"group_size": k, "prompts_per_step": total // k}


def mbpp_rows(profile: Profile) -> list[dict[str, Any]]:
    """Experiment 2's problems with a ``prompt`` column (``format_code_prompt``).

    ``gpu``: MBPP's train split from the Hub (or a local copy). ``cpu``/``smoke``: the
    course's own problems of ``MBPP_LOCAL_DIFFICULTIES``.
    """
    from grpo_core.mbpp import load_mbpp, read_problems

    if profile.data_source == "hub":
        problems = [dict(row) for row in load_mbpp("train", "full")]
    else:
        problems = [row for row in read_problems() if row["difficulty"] in MBPP_LOCAL_DIFFICULTIES]
    return [code_row(row) for row in problems]


def code_row(problem: dict[str, Any]) -> dict[str, Any]:
    """A problem as a training row: the prompt and the columns the code rewards read."""
    from grpo_core.mbpp import format_code_prompt

    return {"prompt": format_code_prompt(problem["text"], problem["tests"]),
            "task_id": problem["task_id"], "tests": list(problem["tests"]),
            "setup_code": problem["setup_code"], "entry_point": problem["entry_point"]}


def mbpp_experiment(profile: Profile, k: int | None = None, negate: bool = False) -> Experiment:
    """Experiment 2: unit-test reward on coding problems, group size ``k``.

    Loop settings: the lecture's loss (``grpo``), no KL, one update per rollout, the same
    number of completions per step for every k (``k_sweep_sizes``).
    """
    from grpo_core.rewards import unit_test_reward

    if negate:
        raise ValueError("--negate is experiment 1's demonstration; mbpp does not take it")
    sizes = k_sweep_sizes(profile, profile.group_size if k is None else k)
    return Experiment(
        name="mbpp",
        prompts=mbpp_rows(profile),
        reward_funcs=[unit_test_reward],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1,
                   **sizes},
        title=(f"experiment 2 ({profile.name}): unit-test reward, k = {sizes['group_size']} "
               f"x {sizes['prompts_per_step']} prompts per step"),
    )


# experiment 3's held-out measure, per profile: problems, samples per problem, steps between
HACKING_EVAL = {"smoke": (2, 2, 1), "cpu": (12, 4, 5), "gpu": (50, 4, 20)}
# experiment 3's proxies (``--proxy``): the default, and the one of the first recorded run
HACKING_PROXIES = ("long_function", "defines_function")


def hacking_split(profile: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Experiment 3's (training rows, held-out rows).

    ``cpu``/``smoke``: the course's problems of every difficulty, odd task ids for training,
    even ones held out (the first ``HACKING_EVAL`` of them). ``gpu``: MBPP's train split for
    training and its validation split held out.
    """
    from grpo_core.mbpp import load_mbpp, read_problems

    count = HACKING_EVAL.get(profile.name, HACKING_EVAL["cpu"])[0]
    if profile.data_source == "hub":
        training = [dict(row) for row in load_mbpp("train", "full")]
        held_out = [dict(row) for row in load_mbpp("validation", "full")]
    else:
        problems = read_problems()
        training = [row for row in problems if row["task_id"] % 2 == 1]
        held_out = [row for row in problems if row["task_id"] % 2 == 0]
    return [code_row(row) for row in training], [code_row(row) for row in held_out[:count]]


def hacking_proxy(name: str) -> RewardFn:
    """The proxy reward ``long_function`` or ``defines_function`` (``grpo_core.rewards``)."""
    from grpo_core import rewards

    if name not in HACKING_PROXIES:
        raise ValueError(f"unknown proxy {name!r}: choose one of {', '.join(HACKING_PROXIES)}")
    return getattr(rewards, f"{name}_reward")


def hacking_experiment(profile: Profile, k: int | None = None, negate: bool = False,
                       proxy: str = HACKING_PROXIES[0]) -> Experiment:
    """Experiment 3: train on a proxy that never runs the code, watch the true score.

    Reward: the proxy alone (weight 1): ``long_function_reward`` (defines the function, and
    more code earns more, up to 200 characters) or ``defines_function_reward``.
    ``unit_test_reward`` rides along with weight 0, so it is logged for every step's samples
    but never trains. Every few steps a held-out evaluation samples the same problems with
    the same seed and reports the true score, the proxy and ``defines_function_reward``.
    """
    from grpo_core.evaluation import held_out_evaluator
    from grpo_core.rewards import defines_function_reward, unit_test_reward

    if negate:
        raise ValueError("--negate is experiment 1's demonstration; hacking does not take it")
    proxy_fn = hacking_proxy(proxy)
    sizes = k_sweep_sizes(profile, profile.group_size if k is None else k)
    training, held_out = hacking_split(profile)
    _, samples, every = HACKING_EVAL.get(profile.name, HACKING_EVAL["cpu"])
    watched = list(dict.fromkeys([unit_test_reward, proxy_fn, defines_function_reward]))
    evaluate = held_out_evaluator(held_out, watched, samples_per_prompt=samples,
                                  max_new_tokens=profile.max_new_tokens,
                                  temperature=profile.temperature, seed=profile.seed)
    return Experiment(
        name="hacking",
        prompts=training,
        reward_funcs=[proxy_fn, unit_test_reward],
        reward_weights=[1.0, 0.0],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1,
                   "eval_every": every, **sizes},
        title=(f"experiment 3 ({profile.name}): proxy = {reward_name(proxy_fn)}, "
               "true = unit tests (weight 0, and held out)"),
        evaluate=evaluate,
        notes={"proxy_reward": reward_name(proxy_fn), "true_reward": "unit_test_reward",
               "true_metric": "eval/unit_test_reward",
               "held_out_task_ids": [row["task_id"] for row in held_out],
               "eval_samples_per_problem": samples},
    )


EXPERIMENTS: dict[str, Callable[..., Experiment]] = {
    "length": length_experiment,
    "mbpp": mbpp_experiment,
    "hacking": hacking_experiment,
}


def profile_precision(profile: Profile) -> Precision:
    """The profile's precision: float32 when it asks for it, else what the device does best."""
    if profile.precision == "float32":
        return float32_precision(profile.device)
    if profile.precision != "auto":
        raise ValueError(f"precision must be 'auto' or 'float32', got {profile.precision!r}")
    return detect_precision(profile.device)


def build_config(profile: Profile, experiment: Experiment, *, precision: Precision | None = None,
                 **overrides: Any) -> TrainConfig:
    """Profile sizes, then the experiment's settings, then ``overrides`` (TrainConfig fields).

    The precision comes from the profile (:func:`profile_precision`), or ``precision``: on a
    GPU the weights stay float32 and the loop autocasts to bfloat16, or to float16 with loss
    scaling where the GPU has no bfloat16 tensor cores (a T4); on a CPU with bfloat16 matrix
    instructions it autocasts to bfloat16 and samples from a bfloat16 copy of the policy.
    """
    settings = {**experiment.overrides, **overrides}
    precision = precision or profile_precision(profile)
    if precision.autocast is not None:
        settings.setdefault("autocast_dtype", precision.autocast)
        settings.setdefault("loss_scaling", precision.loss_scaling)
    if precision.sampling_dtype is not None:
        settings.setdefault("sampling_dtype", precision.sampling_dtype)
    if profile.device == "cpu":  # measured faster for the backward (README, "Where the time goes")
        settings.setdefault("attn_implementation", "eager")
    return TrainConfig.from_profile(profile, **settings)
