"""The course's three experiments: what each trains on, its rewards, its data split, its evaluator.

One definition used by the command line (``python -m grpo_core``), the notebooks and
``scripts/trl_mbpp.py``, so TRL trains on exactly the rows and rewards our loop trains on.

- ``length`` (experiment 1): reward ``-abs(len(completion) - 20)`` on characters; a completion
  is best when it is 20 characters long. ``negate=True`` flips the sign (notebook 07's
  demonstration that GRPO optimizes exactly the number you return).
- ``mbpp`` (experiment 2): write a Python function; the reward is the fraction of the
  problem's asserts that pass in the sandbox (``unit_test_reward``). Like experiment 3, it
  ends each completion where its first fenced code block closes (``stop_at="code_block"``):
  the reward reads that block, and prose after it would only spend the token budget. ``k`` sets the group
  size and keeps the completions per step fixed (the profile's ``group_size x
  prompts_per_step``), so a larger k means fewer prompts per step. The same reward on
  held-out problems (``eval/unit_test_reward``, with its standard errors) says whether what
  was learned carries over to problems never trained on.
- ``hacking`` (experiment 3): the same coding problems, rewarded by a gameable proxy that
  never runs the code: ``long_function_reward`` (the code defines the function the tests
  call, and more code earns more, full marks at 200 characters), or with
  ``proxy="defines_function"`` ``defines_function_reward`` (defining it is enough). The true
  score, ``unit_test_reward``, is logged beside it twice: on the training samples with weight 0
  (``rewards/unit_test_reward/mean``, it never reaches the advantages), and on held-out
  problems every few steps (``eval/unit_test_reward``, with the proxy's ``eval/<proxy>`` and
  ``eval/defines_function_reward`` next to it).

The data split (``cpu`` and ``smoke``): both code experiments train only on the course's
``train`` problems and evaluate on its ``held_out`` ones (``grpo_core.mbpp.course_split``, a
fixed column of ``problems.jsonl``); ``gpu`` trains on MBPP's train split and evaluates on its
validation split. The held-out evaluation (``grpo_core.evaluation.HeldOutEvaluator``) runs at
step 0, every ``eval_every`` steps and after the last, with the sizes of ``HELD_OUT_EVAL``.

Loads no model: an :class:`Experiment` is data, and :func:`build_config` turns it and a profile
into the loop's :class:`~grpo_core.loop.TrainConfig`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_core import rewards
from grpo_core.evaluation import Evaluator
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


# experiment 1's rewards (``--reward``): the task, and a proxy that pays for length unsaid
LENGTH_REWARDS = ("length", "detail")


def length_experiment(profile: Profile, negate: bool = False,
                      reward: str = LENGTH_REWARDS[0], k: int | None = None) -> Experiment:
    """Experiment 1: be close to 20 characters long (``grpo_core.rewards.length_reward``).

    Loop settings: the lecture's loss (``loss_type="grpo"``: each completion's log-prob
    averaged over its tokens, then over completions), no KL (beta = 0), one update per rollout.
    ``reward="detail"`` trains on experiment 1's prompts with ``detail_reward`` instead (a
    tenth of a point per distinct word): a reward that pays for length without naming it,
    notebook 11's length-gaming run. ``k``: the group size, at the profile's completions per
    step (:func:`k_sweep_sizes`), as in the other experiments.
    """
    if reward not in LENGTH_REWARDS:
        raise ValueError(f"unknown reward {reward!r}: choose one of {', '.join(LENGTH_REWARDS)}")
    chosen = rewards.length_reward if reward == "length" else rewards.detail_reward
    chosen = negated(chosen) if negate else chosen
    if reward == "detail":
        title = "reward 0.1 per distinct word" + (" (sign flipped)" if negate else "")
    else:
        target = "longer and longer (sign flipped)" if negate else f"{LENGTH_TARGET} characters"
        title = f"reward -|len - 20|, target {target}"
    return Experiment(
        name="length",
        prompts=read_jsonl(EXP1_PROMPTS),
        reward_funcs=[chosen],
        overrides={**(k_sweep_sizes(profile, k) if k is not None else {}),
                   "loss_type": "grpo", "beta": 0.0, "num_iterations": 1},
        targets={} if negate or reward != "length" else {"completions/mean_chars": LENGTH_TARGET},
        title=f"experiment 1 ({profile.name}): {title}",
        notes={} if reward == "length" else {"reward": reward_name(chosen)},
    )


# the code experiments' rollouts end where the first fenced code block closes: their rewards
# read that block only (``grpo_core.rollout.code_block_closed``)
CODE_STOP = "code_block"
# the code experiments' completion budget where it differs from the profile's: a function
# and its code fence take SmolLM2 more than the cpu profile's 64 tokens (the recorded runs
# and notebook 08's signal check use 192)
CODE_MAX_NEW_TOKENS = {"cpu": 192}


# completions per forward/backward in the code experiments where it differs from the whole
# batch: on a laptop CPU, 16 completions of up to 192 tokens in one update hold about 9 GB at
# their peak; four at a time give the same gradient (the loop sums the micro-batches' losses)
# in a fraction of the memory
CODE_MICRO_BATCH = {"cpu": 4}


def code_micro_batch(profile: Profile) -> dict[str, int]:
    """``{"micro_batch_size": n}`` for the code experiments in ``profile``, or ``{}``."""
    size = CODE_MICRO_BATCH.get(profile.name)
    return {} if size is None else {"micro_batch_size": size}


def code_budget(profile: Profile) -> int:
    """The code experiments' ``max_new_tokens`` in ``profile`` (:data:`CODE_MAX_NEW_TOKENS`,
    else the profile's own)."""
    return CODE_MAX_NEW_TOKENS.get(profile.name, profile.max_new_tokens)


# experiment 2 in the cpu and smoke profiles: the course's own training problems at the edge
# of the 135M model's ability (see notebook 08's signal check); gpu: MBPP's train split
MBPP_LOCAL_DIFFICULTIES = ("very easy", "easy")


@dataclass(frozen=True)
class EvalSize:
    """A profile's held-out evaluation, for experiments 2 and 3.

    Attributes:
        problems: held-out problems evaluated (None: every one of the split).
        samples: completions per problem.
        every: ``eval_every``: steps between evaluations (step 0 and the last always run).
    """

    problems: int | None
    samples: int
    every: int


# cpu: all 115 held-out problems x 2 samples = 230 completions per evaluation, every 10 steps
# (a pass rate p over 115 problems has a standard error of at most sqrt(p (1 - p) / 115));
# smoke: three problems x 1 sample (its 12-token budget), every step; gpu: 50 of MBPP's
# validation problems x 4 samples, every 20 steps
HELD_OUT_EVAL: dict[str, EvalSize] = {
    "smoke": EvalSize(3, 1, 1),
    "cpu": EvalSize(None, 2, 10),
    "gpu": EvalSize(50, 4, 20),
}


def eval_size(profile: Profile, samples: int | None = None) -> EvalSize:
    """The profile's :class:`EvalSize` (a profile not in ``HELD_OUT_EVAL`` gets ``cpu``'s),
    with ``samples`` completions per problem instead of its own when given."""
    size = HELD_OUT_EVAL.get(profile.name, HELD_OUT_EVAL["cpu"])
    if samples is None:
        return size
    if not isinstance(samples, int) or samples < 1:
        raise ValueError(f"eval samples per problem must be an int >= 1, got {samples!r}")
    return EvalSize(size.problems, samples, size.every)


def held_out_rows(profile: Profile) -> list[dict[str, Any]]:
    """The held-out problems of experiments 2 and 3, as rows (``code_row``).

    ``cpu``/``smoke``: the course's ``held_out`` problems (``course_split``), every difficulty,
    in file order, the first ``eval_size(profile).problems`` of them. ``gpu``: MBPP's
    validation split, likewise.
    """
    from grpo_core.mbpp import course_split, load_mbpp

    if profile.data_source == "hub":
        problems = [dict(row) for row in load_mbpp("validation", "full")]
    else:
        _, problems = course_split()
    count = eval_size(profile).problems
    return [code_row(row) for row in (problems if count is None else problems[:count])]


def held_out_experiment_evaluator(profile: Profile, rows: list[dict[str, Any]],
                                  reward_funcs: list[RewardFn],
                                  samples: int | None = None) -> Evaluator:
    """The held-out evaluator of the code experiments: ``eval_size(profile, samples).samples``
    per problem, the profile's seed, and the run's own sampling settings (budget,
    temperature: ``train`` binds them), so held-out completions are drawn as the training
    ones are. The unit-test reward is pass/fail for pass@k (a sample passes every assert)."""
    from grpo_core.evaluation import HeldOutEvaluator

    pass_fail = [fn for fn in reward_funcs if fn is rewards.unit_test_reward]
    return HeldOutEvaluator(rows, reward_funcs,
                            samples_per_prompt=eval_size(profile, samples).samples,
                            seed=profile.seed, pass_fail=pass_fail)


def held_out_notes(rows: list[dict[str, Any]], profile: Profile,
                   samples: int | None = None) -> dict[str, Any]:
    """What ``config.json`` records about the held-out evaluation."""
    size = eval_size(profile, samples)
    return {"held_out_split": "MBPP validation" if profile.data_source == "hub"
            else "course_split held_out",
            "held_out_task_ids": [row["task_id"] for row in rows],
            "eval_samples_per_problem": size.samples,
            "eval_sampling": "the run's max_new_tokens, temperature and top_p; seed "
                             f"{profile.seed}, the same at every evaluation"}


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


# where the code experiments' training problems come from (``--problems``): the profile's
# default (MBPP on a GPU, the course's own problems on a CPU), or MBPP's train split anywhere
PROBLEM_SOURCES = ("default", "mbpp")


def _check_problems(problems: str) -> None:
    if problems not in PROBLEM_SOURCES:
        raise ValueError(f"unknown problems {problems!r}: choose one of "
                         f"{', '.join(PROBLEM_SOURCES)}")


def mbpp_rows(profile: Profile, problems: str = "default") -> list[dict[str, Any]]:
    """Experiment 2's training problems with a ``prompt`` column (``format_code_prompt``).

    ``gpu`` (or ``problems="mbpp"``): MBPP's train split (a local copy, else the Hub).
    ``cpu``/``smoke``: the course's ``train`` problems (``course_split``) of
    ``MBPP_LOCAL_DIFFICULTIES``; the ``held_out`` ones are never trained on
    (:func:`held_out_rows`).
    """
    from grpo_core.mbpp import course_split, load_mbpp

    _check_problems(problems)
    if profile.data_source == "hub" or problems == "mbpp":
        problems = [dict(row) for row in load_mbpp("train", "full")]
    else:
        training, _ = course_split()
        problems = [row for row in training if row["difficulty"] in MBPP_LOCAL_DIFFICULTIES]
    return [code_row(row) for row in problems]


def code_row(problem: dict[str, Any]) -> dict[str, Any]:
    """A problem as a training row: the prompt and the columns the code rewards read."""
    from grpo_core.mbpp import format_code_prompt

    return {"prompt": format_code_prompt(problem["text"], problem["tests"]),
            "task_id": problem["task_id"], "tests": list(problem["tests"]),
            "setup_code": problem["setup_code"], "entry_point": problem["entry_point"]}


def mbpp_experiment(profile: Profile, k: int | None = None, negate: bool = False,
                    problems: str = "default", eval_samples: int | None = None) -> Experiment:
    """Experiment 2: unit-test reward on coding problems, group size ``k``.

    Loop settings: the lecture's loss (``grpo``), no KL, one update per rollout, the same
    number of completions per step for every k (``k_sweep_sizes``). Trains on
    :func:`mbpp_rows` and evaluates ``unit_test_reward`` on :func:`held_out_rows` at step 0,
    every ``eval_size(profile).every`` steps and after the last (``eval/unit_test_reward``,
    ``/sem``, ``/delta_sem``). ``problems="mbpp"`` trains on MBPP's train split in any
    profile: in ``cpu``, a task SmolLM2-135M cannot reach (notebook 11's no-signal run).
    ``eval_samples``: completions per held-out problem (default: the profile's).
    """
    from grpo_core.rewards import unit_test_reward

    if negate:
        raise ValueError("--negate is experiment 1's demonstration; mbpp does not take it")
    sizes = k_sweep_sizes(profile, profile.group_size if k is None else k)
    held_out = held_out_rows(profile)
    return Experiment(
        name="mbpp",
        prompts=mbpp_rows(profile, problems),
        reward_funcs=[unit_test_reward],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1,
                   "eval_every": eval_size(profile).every, "stop_at": CODE_STOP,
                   "max_new_tokens": code_budget(profile), **code_micro_batch(profile),
                   **sizes},
        title=(f"experiment 2 ({profile.name}): unit-test reward, k = {sizes['group_size']} "
               f"x {sizes['prompts_per_step']} prompts per step"),
        evaluate=held_out_experiment_evaluator(profile, held_out, [unit_test_reward],
                                               eval_samples),
        notes={"held_out_metric": "eval/unit_test_reward",
               "train_split": "MBPP train" if profile.data_source == "hub" or problems == "mbpp"
               else f"course_split train, difficulties {', '.join(MBPP_LOCAL_DIFFICULTIES)}",
               **held_out_notes(held_out, profile, eval_samples)},
    )


# experiment 3's proxies (``--proxy``): the default, and the one of the first recorded run
HACKING_PROXIES = ("long_function", "defines_function")


def hacking_split(profile: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Experiment 3's (training rows, held-out rows).

    ``cpu``/``smoke``: the course's ``train`` problems of every difficulty for training and
    its ``held_out`` ones (:func:`held_out_rows`, experiment 2's too) for the true score.
    ``gpu``: MBPP's train split for training and its validation split held out.
    """
    from grpo_core.mbpp import course_split, load_mbpp

    if profile.data_source == "hub":
        training = [dict(row) for row in load_mbpp("train", "full")]
    else:
        training, _ = course_split()
    return [code_row(row) for row in training], held_out_rows(profile)


def hacking_proxy(name: str) -> RewardFn:
    """The proxy reward ``long_function`` or ``defines_function`` (``grpo_core.rewards``)."""
    if name not in HACKING_PROXIES:
        raise ValueError(f"unknown proxy {name!r}: choose one of {', '.join(HACKING_PROXIES)}")
    return getattr(rewards, f"{name}_reward")


def hacking_experiment(profile: Profile, k: int | None = None, negate: bool = False,
                       proxy: str = HACKING_PROXIES[0],
                       eval_samples: int | None = None) -> Experiment:
    """Experiment 3: train on a proxy that never runs the code, watch the true score.

    Reward: the proxy alone (weight 1): ``long_function_reward`` (defines the function, and
    more code earns more, up to 200 characters) or ``defines_function_reward``.
    ``unit_test_reward`` rides along with weight 0, so it is logged for every step's samples
    but never trains. At step 0 (the base model), every ``eval_size(profile).every`` steps
    and after the last, a held-out evaluation samples the same problems (:func:`hacking_split`)
    with the same seed and reports the true score, the proxy and ``defines_function_reward``,
    each with its standard errors (``eval_samples`` completions per problem; default: the
    profile's).
    """
    from grpo_core.rewards import defines_function_reward, unit_test_reward

    if negate:
        raise ValueError("--negate is experiment 1's demonstration; hacking does not take it")
    proxy_fn = hacking_proxy(proxy)
    sizes = k_sweep_sizes(profile, profile.group_size if k is None else k)
    training, held_out = hacking_split(profile)
    watched = list(dict.fromkeys([unit_test_reward, proxy_fn, defines_function_reward]))
    return Experiment(
        name="hacking",
        prompts=training,
        reward_funcs=[proxy_fn, unit_test_reward],
        reward_weights=[1.0, 0.0],
        overrides={"loss_type": "grpo", "beta": 0.0, "num_iterations": 1,
                   "eval_every": eval_size(profile).every, "stop_at": CODE_STOP,
                   "max_new_tokens": code_budget(profile), **code_micro_batch(profile),
                   **sizes},
        title=(f"experiment 3 ({profile.name}): proxy = {reward_name(proxy_fn)}, "
               "true = unit tests (weight 0, and held out)"),
        evaluate=held_out_experiment_evaluator(profile, held_out, watched, eval_samples),
        notes={"proxy_reward": reward_name(proxy_fn), "true_reward": "unit_test_reward",
               "true_metric": "eval/unit_test_reward",
               "train_split": "MBPP train" if profile.data_source == "hub" else
               "course_split train, every difficulty",
               **held_out_notes(held_out, profile, eval_samples)},
    )


EXPERIMENTS: dict[str, Callable[..., Experiment]] = {
    "length": length_experiment,
    "mbpp": mbpp_experiment,
    "hacking": hacking_experiment,
}


def device_settings(device: str) -> dict[str, Any]:
    """The ``TrainConfig`` fields the device decides beyond precision: on a CPU, eager attention
    for the log-prob passes, measured faster there than SDPA's flash kernel
    (docs/performance.md, "Where the time goes")."""
    return {"attn_implementation": "eager"} if device == "cpu" else {}


def build_config(profile: Profile, experiment: Experiment, **overrides: Any) -> TrainConfig:
    """Profile sizes and precision plan (``TrainConfig.from_profile``), the device's settings,
    then the experiment's settings, then ``overrides`` (TrainConfig fields)."""
    settings = {**device_settings(profile.device), **experiment.overrides, **overrides}
    return TrainConfig.from_profile(profile, **settings)
