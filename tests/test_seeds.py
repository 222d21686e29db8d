"""grpo_core.seeds: what counts as the same setup, the refusal of runs that differ in more
than the seed, and the across-seed summary against hand computations."""

from __future__ import annotations

import json
import math

import pytest

from grpo_core.run_files import RecordedRun
from grpo_core.seeds import (
    group_by_setup,
    held_out_key,
    seed_group,
    seed_of,
    setup_differences,
    setup_of,
)

KEY = "eval/unit_test_reward"


def run(name: str, seed: int, change: float, delta_sem: float = 0.02, **train) -> RecordedRun:
    """A code run with one reward, evaluated at step 0 (0.2) and at step 40."""
    config = {"experiment": "mbpp", "profile": "cpu", "reward_funcs": ["unit_test_reward"],
              "reward_weights": [1.0], "command": f"python -m grpo_core mbpp --seed {seed}",
              "torch": "2.13.0+cpu", "train": {"seed": seed, "group_size": 8, **train}}
    records = [{"step": 0, KEY: 0.2, f"{KEY}/sem": 0.03, f"{KEY}/delta_sem": 0.0},
               {"step": 40, "reward": 0.5, KEY: 0.2 + change, f"{KEY}/sem": 0.03,
                f"{KEY}/delta_sem": delta_sem}]
    return RecordedRun(name, records, config)


def test_the_setup_leaves_out_the_seed_the_command_and_fills_the_loops_defaults():
    a, b = run("a", 0, 0.1).config, run("b", 3, 0.1).config
    assert seed_of(a) == 0 and seed_of(b) == 3 and seed_of({}) == 0
    assert setup_of(a) == setup_of(b)
    # a run recorded before dynamic sampling existed matches one that logs it switched off
    later = {**b, "train": {**b["train"], "dynamic_sampling": False}}
    assert setup_differences(setup_of(a), setup_of(later)) == []
    # micro-batches change how a batch is cut, not the gradient
    cut = {**b, "train": {**b["train"], "micro_batch_size": 4}}
    assert setup_differences(setup_of(a), setup_of(cut)) == []
    other = {**b, "train": {**b["train"], "dynamic_sampling": True}, "profile": "smoke"}
    assert setup_differences(setup_of(a), setup_of(other)) == ["profile",
                                                                "train.dynamic_sampling"]


def test_setups_compare_every_key_either_side_has():
    assert setup_of({}) == setup_of({"train": {}})  # a config without loop settings
    # a tuple default reads back from config.json as a list: the same setting
    assert setup_differences(setup_of({"train": {}}),
                             setup_of({"train": {"adam_betas": [0.9, 0.999]}})) == []
    assert setup_differences({"x": 1}, {}) == ["x"] and setup_differences({}, {"y": 2}) == ["y"]
    assert setup_differences({"train": {"new": 1}}, {}) == ["train.new"]
    assert setup_differences({}, {"train": {"new": 1}}) == ["train.new"]


def test_the_headline_metric_is_the_true_score_else_the_trained_rewards_own():
    proxy = run("p", 0, 0.1)
    proxy.config["reward_funcs"] = ["long_function_reward", "unit_test_reward"]
    proxy.config["reward_weights"] = [1.0, 0.0]
    for record in proxy.records:
        record["eval/long_function_reward"] = 0.5
    assert held_out_key(proxy) == KEY  # the reward trained at weight 0 is the true score
    assert held_out_key(run("k8", 0, 0.1)) == KEY  # experiment 2: its own reward, held out
    # the config decides what was trained: the metrics alone (both rewards logged, neither
    # equal to the total) would count both as trained and leave no true score
    for record, long_mean in zip(proxy.records, (0.3, 0.6), strict=True):
        record.update({"reward": long_mean + 0.1, "rewards/long_function_reward/mean": long_mean,
                       "rewards/unit_test_reward/mean": 0.2})
    assert held_out_key(proxy) == KEY
    # a config that does not name its rewards: the metrics say what was trained
    unnamed = run("u", 0, 0.1)
    del unnamed.config["reward_funcs"], unnamed.config["reward_weights"]
    for record in unnamed.records:
        record.update({"reward": 0.4, "rewards/unit_test_reward/mean": 0.4})
    assert held_out_key(unnamed) == KEY
    bare = RecordedRun("bare", [{"step": 1, "reward": 0.1}], run("x", 1, 0).config)
    assert held_out_key(bare) is None
    with pytest.raises(ValueError, match="bare has no held-out change of None"):
        seed_group([bare])


def test_folders_are_read_as_runs(tmp_path):
    import json

    for name, seed in (("s0", 0), ("s1", 1)):
        recorded = run(name, seed, 0.1 * (seed + 1))
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(recorded.config))
        (folder / "metrics.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recorded.records))
    assert seed_group([tmp_path / "s1", tmp_path / "s0"]).runs == ("s0", "s1")
    assert [[r.name for r in g] for g in group_by_setup([tmp_path / "s0", tmp_path / "s1"])] \
        == [["s0", "s1"]]


def test_a_seed_group_gives_each_seeds_change_and_the_mean_over_seeds_by_hand():
    summary = seed_group([run("s1", 1, 0.3, 0.03), run("s0", 0, 0.1), run("s2", 2, 0.2)])
    assert summary.runs == ("s0", "s1", "s2") and summary.seeds == (0, 1, 2)
    assert [round(c.change, 9) for c in summary.changes] == [0.1, 0.3, 0.2]
    assert [round(c.z, 6) for c in summary.changes] == [5.0, 10.0, 10.0]
    assert summary.mean_change == pytest.approx(0.2)
    # deviations -0.1, 0.1, 0: variance (ddof 1) 0.01, sd 0.1, over sqrt(3) seeds
    assert summary.seed_sd == pytest.approx(0.1)
    assert summary.seed_sem == pytest.approx(0.1 / math.sqrt(3))
    assert summary.mean_delta_sem == pytest.approx(0.07 / 3)
    assert summary.describe() == (f"{KEY}: seed 0: +0.100 (z +5.0), seed 1: +0.300 (z +10.0), "
                                  f"seed 2: +0.200 (z +10.0); mean +0.200 ± 0.058 over 3 seeds, "
                                  f"95 % t-interval [-0.048, +0.448] (2 df)")
    # t with 2 degrees of freedom (4.303), not the normal 1.96
    interval = summary.interval()
    assert interval.df == 2 and interval.t == pytest.approx(4.3027, abs=1e-4)
    assert summary.interval(0.9).t == pytest.approx(2.9200, abs=1e-4)  # t_{0.95, 2}
    assert interval.high - interval.mean == pytest.approx(4.3027 * 0.1 / math.sqrt(3), abs=1e-4)
    one = seed_group([run("only", 4, -0.05)])
    assert one.describe() == f"{KEY}: seed 4: -0.050 (z -2.5); one seed"
    no_error = seed_group([run("flat", 5, 0.02, delta_sem=0.0)])  # no z without an error
    assert no_error.describe() == f"{KEY}: seed 5: +0.020; one seed"
    assert math.isnan(one.seed_sem)


def test_runs_that_differ_in_more_than_the_seed_are_refused():
    with pytest.raises(ValueError, match=r"k2 differs from k8 in more than the seed: "
                                         r"train.group_size"):
        seed_group([run("k8", 0, 0.1), run("k2", 1, 0.1, group_size=2)])
    with pytest.raises(ValueError, match=r"share a seed: \{'a': 0, 'b': 0\}"):
        seed_group([run("a", 0, 0.1), run("b", 0, 0.2)])
    with pytest.raises(ValueError, match="at least one"):
        seed_group([])
    no_eval = RecordedRun("bare", [{"step": 1, "reward": 0.1}], run("x", 1, 0).config)
    with pytest.raises(ValueError, match="bare has no held-out change"):
        seed_group([run("a", 0, 0.1), no_eval])


def test_runs_are_grouped_by_setup_in_the_order_they_came():
    runs = [run("k8-s1", 1, 0.2), run("k2", 0, 0.1, group_size=2), run("k8-s0", 0, 0.1),
            run("k2-s1", 1, 0.1, group_size=2), run("lr", 0, 0.1, learning_rate=1.0)]
    assert [[r.name for r in group] for group in group_by_setup(runs)] == [
        ["k8-s0", "k8-s1"], ["k2", "k2-s1"], ["lr"]]


# --- same seed, same numbers --------------------------------------------------------------------


def replay(tmp_path, name: str, seed: int) -> tuple[list[dict], list[dict]]:
    """Two steps of experiment 1 (smoke) through the command line: metrics without the
    timings, and the training samples."""
    from grpo_core.cli import main
    from grpo_core.run_files import read_jsonl

    out = tmp_path / name
    assert main(["length", "--profile", "smoke", "--out", str(out), "--steps", "2",
                 "--max-new-tokens", "8", "--seed", str(seed), "--no-checkpoint",
                 "--quiet"]) == 0
    metrics = [{k: v for k, v in r.items() if not k.startswith("time") and k != "step_time"}
               for r in read_jsonl(out / "metrics.jsonl")]
    return metrics, read_jsonl(out / "samples.jsonl")


def test_the_same_seed_replays_two_steps_of_experiment_1_bit_for_bit_on_a_cpu(tmp_path):
    first, again, other = (replay(tmp_path, "a", 0), replay(tmp_path, "b", 0),
                           replay(tmp_path, "c", 1))
    assert [r["step"] for r in first[0]] == [1, 2]
    assert first == again  # every logged float equal, every completion the same text
    assert [r["completion"] for r in other[1]] != [r["completion"] for r in first[1]]


def started_at(recorded: RecordedRun, start: float, **config) -> RecordedRun:
    """``recorded`` with its step-0 score at ``start`` (its change kept) and ``config`` added."""
    shift = start - recorded.records[0][KEY]
    records = [{**row, KEY: row[KEY] + shift} for row in recorded.records]
    return RecordedRun(recorded.name, records, {**recorded.config, **config}, recorded.path)


def test_runs_whose_step_0_evaluations_are_other_draws_are_refused_unless_told():
    code = {"code": {"commit": "a" * 40, "clean": True}}
    first = started_at(run("base", 0, 0.1), 0.1535, **code)
    other = started_at(run("later", 1, 0.2), 0.1657, code={"commit": "b" * 40, "clean": True})
    with pytest.raises(ValueError, match=r"later's step-0 eval/unit_test_reward \(0\.1657\) is "
                       r"another draw than base's \(0\.1535\): the step-0 scores differ.*"
                       r"code: commit aaaaaaa vs bbbbbbb.*other_draws=True"):
        seed_group([first, other])
    pooled = seed_group([first, other], other_draws=True)
    assert not pooled.same_draws and len(pooled.other_draws) == 1
    assert pooled.starts == pytest.approx((0.1535, 0.1657))
    assert pooled.describe().endswith(
        "over 2 seeds, 2 seeds: no useful interval (1 degree of freedom, t = 12.71); "
        "same distribution, other draws (step-0 scores 0.153, 0.166)")
    same = seed_group([first, started_at(run("again", 2, 0.3), 0.1535, **code)])
    assert same.same_draws and same.other_draws == () and "other draws" not in same.describe()


def kept(tmp_path, recorded: RecordedRun, completions: list[str]) -> RecordedRun:
    """``recorded`` written to a folder whose samples.jsonl keeps these step-0 completions."""
    folder = tmp_path / recorded.name
    folder.mkdir()
    rows = [{"step": 0, "split": "held_out", "prompt_id": i // 2, "sample": i % 2,
             "completion": text} for i, text in enumerate(completions)]
    # what training and later evaluations sampled differs from run to run: never compared
    rows.append({"step": 40, "split": "held_out", "prompt_id": 0, "sample": 0,
                 "completion": f"trained {recorded.name}"})
    rows.append({"step": 0, "split": "train", "prompt_id": 0, "sample": 0,
                 "completion": f"training sample {recorded.name}"})
    (folder / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return RecordedRun(recorded.name, recorded.records, recorded.config, folder)


def test_kept_completions_decide_even_when_the_scores_agree(tmp_path):
    a = kept(tmp_path, run("a", 0, 0.1), ["x", "y", "z", "w"])
    b = kept(tmp_path, run("b", 1, 0.1), ["x", "y", "z", "w"])
    c = kept(tmp_path, run("c", 2, 0.1), ["x", "Y", "z", "W"])
    assert seed_group([a, b]).same_draws
    with pytest.raises(ValueError, match="2 of 4 step-0 completions differ.*draws: not recorded"):
        seed_group([a, b, c])
    fewer = kept(tmp_path, run("d", 3, 0.1), ["x", "y", "z"])
    with pytest.raises(ValueError, match=": 1 of 4 step-0 completions differ"):
        seed_group([a, fewer])
    # the same code and draws recorded, and still other completions: said so
    same = {"code": {"commit": "a" * 40, "clean": True}, "draws": {"id": "x", "torch": "t"}}
    f = kept(tmp_path, RecordedRun("f", a.records, {**a.config, **same}), ["x", "y", "z", "w"])
    g = kept(tmp_path, RecordedRun("g", a.records, {**a.config, **same,
                                                    "train": {"seed": 6, "group_size": 8}}),
             ["x", "y", "z", "v"])
    with pytest.raises(ValueError, match=r"1 of 4 step-0 completions differ; nothing recorded "
                                         r"differs \(another machine's kernels, or a "
                                         r"nondeterministic step\)"):
        seed_group([f, g])
    # one run without samples: its score decides
    assert seed_group([a, run("e", 4, 0.1)]).same_draws
