"""Runs that differ only in their seed, taken together (notebooks 08, 09 and 12).

One run's held-out change has a standard error over problems (``delta_sem``): how much the
change would move with other held-out problems, the *same* trained weights. A second seed
trains other weights (other prompts in another order, other samples), and the change moves
by that too, which ``delta_sem`` cannot see (notebook 12 measures how much). A claim about *training* ("k = 8 learns more than k = 2") needs the spread over seeds:

- :func:`setup_of` is a run's ``config.json`` without what may differ between seeds of one
  setup (the seed, the output folder, the command, the torch build; the loop's settings
  filled with ``TrainConfig``'s defaults, so a run recorded before a setting existed still
  matches one recorded after);
- :func:`seed_group` checks that runs share a setup and refuses them, naming what differs,
  when they do not; it also refuses runs whose step-0 evaluations (the base model, the same
  problems and evaluation seed) are different draws, which happens when other code or
  another machine recorded them (``grpo_core.provenance``), unless told
  ``other_draws=True``: they are then the same distribution, other draws, and the summary
  says so with every step-0 score; :func:`group_by_setup` sorts a folder of runs into such
  groups;
- :class:`SeedSummary` is each seed's held-out change with its z, and the across-seed mean
  with its standard error over seeds (``grpo_core.stats``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_core.diagnosis import HeldOutChange, find_true_score, held_out_change, trained_rewards
from grpo_core.loop import TrainConfig
from grpo_core.provenance import CODE_KEY, DRAWS_KEY, provenance_differences
from grpo_core.run_files import RecordedRun, load_run, series
from grpo_core.stats import SeedInterval, mean, seed_interval, standard_error

# config.json keys that say how a run was made or described, not what it trained
NOT_SETUP = ("command", "resumed_from_step", "torch", "precision", "eval_sampling", CODE_KEY,
             DRAWS_KEY)
# TrainConfig fields that change where and how often things are written, or how a batch is
# cut for memory (micro-batches give the same gradient), not the training
NOT_TRAINING = ("seed", "save_every", "save_checkpoint", "keep_samples", "samples_max_chars",
                "samples_eval_per_problem", "micro_batch_size")


def seed_of(config: Mapping[str, Any]) -> int:
    """The run's seed (``config["train"]["seed"]``; TrainConfig's default when absent)."""
    return int(config.get("train", {}).get("seed", TrainConfig.seed))


def setup_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without what may differ between seeds of one setup (module docstring)."""
    setup = {key: value for key, value in config.items() if key not in NOT_SETUP}
    train = {**asdict(TrainConfig()), **config.get("train", {})}
    # a tuple default (adam_betas) reads back from config.json as a list
    setup["train"] = {key: list(value) if isinstance(value, tuple) else value
                      for key, value in train.items() if key not in NOT_TRAINING}
    return setup


def setup_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The keys (``train.<field>`` for the loop's) whose values differ between two setups."""
    differ = [key for key in sorted(set(a) | set(b)) if key != "train" and a.get(key) != b.get(key)]
    train_a, train_b = a.get("train", {}), b.get("train", {})
    differ += [f"train.{key}" for key in sorted(set(train_a) | set(train_b))
               if train_a.get(key) != train_b.get(key)]
    return differ


@dataclass(frozen=True)
class SeedSummary:
    """The held-out change of runs that differ only in their seed.

    Attributes:
        key: the held-out metric (``eval/unit_test_reward``).
        runs: the run names, by seed.
        seeds: their seeds.
        changes: each run's :class:`~grpo_core.diagnosis.HeldOutChange` (change, its
            standard error over problems, z).
        other_draws: why runs' step-0 evaluations are other draws than the first run's (one
            sentence each); empty when they are all the same draw.
    """

    key: str
    runs: tuple[str, ...]
    seeds: tuple[int, ...]
    changes: tuple[HeldOutChange, ...]
    other_draws: tuple[str, ...] = ()

    @property
    def same_draws(self) -> bool:
        """Whether every run's step-0 evaluation is the same draw (one measurement of the
        base model); False when they were pooled with ``other_draws=True``."""
        return not self.other_draws

    @property
    def starts(self) -> tuple[float, ...]:
        """Each run's step-0 score, by seed."""
        return tuple(c.start for c in self.changes)

    @property
    def mean_change(self) -> float:
        """The across-seed mean of the held-out change."""
        return mean(c.change for c in self.changes)

    @property
    def seed_sem(self) -> float:
        """The standard error of :attr:`mean_change` over seeds (std with ddof = 1 over
        sqrt(seeds)); NaN with one seed."""
        return standard_error([c.change for c in self.changes])

    @property
    def seed_sd(self) -> float:
        """The seed-to-seed standard deviation of the change (NaN with one seed)."""
        return self.seed_sem * len(self.changes) ** 0.5

    def interval(self, confidence: float = 0.95) -> SeedInterval:
        """The across-seed mean change with its Student's t interval (n - 1 degrees of
        freedom; none with one seed, none worth quoting with two:
        :func:`grpo_core.stats.seed_interval`)."""
        return seed_interval([c.change for c in self.changes], confidence)

    @property
    def mean_delta_sem(self) -> float:
        """The mean of the runs' own standard errors over problems: what one run's ``z``
        divides by, to hold beside :attr:`seed_sd`."""
        return mean(c.delta_sem for c in self.changes)

    def describe(self) -> str:
        """One line: each seed's change and z, then the mean ± its standard error over seeds
        with its t interval (or why there is none), and whether the step-0 evaluations are
        one draw."""
        each = ", ".join(f"seed {s}: {c.change:+.3f} (z {c.z:+.1f})" if c.z is not None
                         else f"seed {s}: {c.change:+.3f}"
                         for s, c in zip(self.seeds, self.changes, strict=True))
        if len(self.changes) == 1:
            return f"{self.key}: {each}; one seed"
        interval = self.interval()
        said = (f"{self.key}: {each}; mean {self.mean_change:+.3f} ± {self.seed_sem:.3f} "
                f"over {len(self.changes)} seeds, " + (
                    interval.reason if interval.reason else
                    f"95 % t-interval [{interval.low:+.3f}, {interval.high:+.3f}] "
                    f"({interval.df} df)"))
        if not self.same_draws:
            said += ("; same distribution, other draws (step-0 scores "
                     + ", ".join(f"{start:.3f}" for start in self.starts) + ")")
        return said


def held_out_key(run: RecordedRun) -> str | None:
    """The run's headline held-out metric: the true score of a proxy run, else the trained
    reward's own held-out mean (experiment 2)."""
    trained = trained_rewards(run.records, run.config)
    return find_true_score(run.records, trained) or next(
        (f"eval/{name}" for name in trained if series(run.records, f"eval/{name}")[1]), None)


def step0_completions(run: RecordedRun) -> dict[tuple[str, Any], str] | None:
    """The run's step-0 held-out completions by (problem, sample), as ``samples.jsonl`` kept
    them; None when it kept none."""
    if not run.has_samples:
        return None
    rows = run.samples(split="held_out", step=0)
    return {(str(row.get("prompt_id")), row.get("sample")): row.get("completion")
            for row in rows} or None


def other_draw(first: RecordedRun, run: RecordedRun, start_first: float, start_run: float,
               key: str) -> str | None:
    """Why ``run``'s step-0 evaluation is another draw than ``first``'s (one sentence naming
    the completions that differ and the recorded code and draws), or None when it is the same
    draw: the same completions where both kept them, else the same step-0 score."""
    kept_first, kept_run = step0_completions(first), step0_completions(run)
    if kept_first is not None and kept_run is not None:
        differ = sum(kept_first.get(where) != text for where, text in kept_run.items())
        differ += len(set(kept_first) - set(kept_run))
        if not differ:
            return None
        evidence = f"{differ} of {len(set(kept_first) | set(kept_run))} step-0 completions differ"
    elif start_first == start_run:
        return None
    else:
        evidence = "the step-0 scores differ (no completions kept to compare)"
    why = provenance_differences(first.config, run.config) or [
        "nothing recorded differs (another machine's kernels, or a nondeterministic step)"]
    return (f"{run.name}'s step-0 {key} ({start_run:.4f}) is another draw than {first.name}'s "
            f"({start_first:.4f}): {evidence}; {'; '.join(why)}")


def seed_group(runs: Sequence[RecordedRun | str | Path], key: str | None = None, *,
               other_draws: bool = False) -> SeedSummary:
    """Each run's held-out change and their across-seed summary.

    ``other_draws=True`` pools runs whose step-0 evaluations are different draws of the same
    distribution (the same base model, problems and evaluation seed, sampled by other code or
    on another machine): the summary then says so and carries the reasons.

    Raises:
        ValueError: no runs; two runs with the same seed; runs that differ in more than the
            seed (the message names what differs); a run without a held-out change of
            ``key`` (default :func:`held_out_key` of the first run); runs whose step-0
            evaluations are other draws, unless ``other_draws`` (the message names the
            completions and the code that differ, and both step-0 scores).
    """
    loaded = [run if isinstance(run, RecordedRun) else load_run(run) for run in runs]
    if not loaded:
        raise ValueError("seed_group needs at least one run")
    first = setup_of(loaded[0].config)
    for run in loaded[1:]:
        differ = setup_differences(first, setup_of(run.config))
        if differ:
            raise ValueError(f"{run.name} differs from {loaded[0].name} in more than the seed: "
                             f"{', '.join(differ)}")
    loaded.sort(key=lambda run: seed_of(run.config))
    seeds = [seed_of(run.config) for run in loaded]
    if len(set(seeds)) != len(seeds):
        named = {run.name: seed for run, seed in zip(loaded, seeds, strict=True)}
        raise ValueError(f"two runs share a seed: {named}")
    key = key or held_out_key(loaded[0])
    changes = []
    for run in loaded:
        moved = held_out_change(run.records, key) if key else None
        if moved is None:
            raise ValueError(f"{run.name} has no held-out change of {key!r} (step 0 and a "
                             f"later evaluation with delta_sem)")
        changes.append(moved)
    differ = tuple(said for run, moved in zip(loaded[1:], changes[1:], strict=True)
                   if (said := other_draw(loaded[0], run, changes[0].start, moved.start, key)))
    if differ and not other_draws:
        raise ValueError("these runs are not one measurement of the base model: "
                         + " ".join(differ) + ". Pool them as the same distribution, other "
                         "draws, with seed_group(..., other_draws=True), or record them again "
                         "with one commit (tools/record_runs.py)")
    return SeedSummary(key=key, runs=tuple(r.name for r in loaded), seeds=tuple(seeds),
                       changes=tuple(changes), other_draws=differ)


def group_by_setup(runs: Iterable[RecordedRun | str | Path]) -> list[list[RecordedRun]]:
    """The runs sorted into groups that share a setup (each group by seed), in the order
    their first run came."""
    groups: list[tuple[dict[str, Any], list[RecordedRun]]] = []
    for run in runs:
        run = run if isinstance(run, RecordedRun) else load_run(run)
        setup = setup_of(run.config)
        for known, members in groups:
            if not setup_differences(known, setup):
                members.append(run)
                break
        else:
            groups.append((setup, [run]))
    return [sorted(members, key=lambda r: seed_of(r.config)) for _, members in groups]
