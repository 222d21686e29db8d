"""diagnose: each check on hand-made curves, the pieces the checks share, and the recorded runs.

Grouped by check, in the order of ``SYMPTOMS``: no signal, truncation, length gaming,
hacking, collapse, KL blow-up; each group holds the check's verdicts, what its finding says
(metric, value, steps, evidence) and its thresholds, exactly on them and just past them. Then
the shared pieces: trends and rank correlation, the held-out change against step 0 and the
paired difference, how a Finding and a Diagnosis render, and the recorded runs of data/runs/
(the experiments and the gallery of failures).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import pytest

from grpo_core.diagnosis import (
    SYMPTOMS,
    Thresholds,
    change_from_step0,
    diagnose,
    find_true_score,
    held_out_change,
    logged_rewards,
    trained_rewards,
)
from grpo_core.findings import Diagnosis, Finding
from grpo_core.gallery import FIXED_RUN_COMMANDS, GALLERY, gallery_entry
from grpo_core.plots import compare_runs, metric_title, plot_run
from grpo_core.run_files import RecordedRun, list_runs, load_run, runs_dir, series
from grpo_core.stats import spearman, trend

RUNS_DIR = runs_dir()
STEPS = 30


# --- hand-made runs: the helpers every group uses ---------------------------------------------

def healthy(n: int = STEPS, seed: int = 0) -> list[dict]:
    """A run that learns: reward up, length steady, groups mixed, entropy steady, small KL."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, n + 1):
        rows.append({
            "step": step,
            "reward": 0.2 + 0.5 * step / n + rng.uniform(-0.05, 0.05),
            "reward_std": 0.3 + rng.uniform(-0.03, 0.03),
            "frac_reward_zero_std": rng.choice([0.0, 0.25]),
            "completions/mean_length": 40 + rng.uniform(-3, 3),
            "completions/mean_chars": 150 + rng.uniform(-10, 10),
            "completions/clipped_ratio": rng.choice([0.0, 0.0625]),
            "entropy": 1.5 + rng.uniform(-0.1, 0.1),
            "kl": 0.002 * step + rng.uniform(0, 0.002),
            "grad_norm": 1.0 + rng.uniform(0, 0.5),
            "loss": 0.0,
        })
    return rows


def with_values(rows: list[dict], key: str, values) -> list[dict]:
    return [{**row, key: value} for row, value in zip(rows, values, strict=True)]


def without(rows: list[dict], *keys: str) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in keys} for row in rows]


def status(diagnosis: Diagnosis, symptom: str) -> str:
    return diagnosis[symptom].status


def hacked(true_values, every: int = 5, proxy_name: str = "proxy_reward") -> list[dict]:
    """Training reward = a proxy that climbs; the true score logged every ``every`` steps."""
    rows = healthy()
    for row in rows:
        row[f"rewards/{proxy_name}/mean"] = row["reward"]
    eval_steps = [1, *range(every, STEPS + 1, every)]
    assert len(true_values) == len(eval_steps)
    for step, value in zip(eval_steps, true_values, strict=True):
        rows[step - 1]["eval/unit_test_reward"] = value
        rows[step - 1][f"eval/{proxy_name}"] = 0.2 + 0.5 * step / STEPS
    return rows


def held_out_run(true_scores: list[float], delta_sems: list[float]) -> list[dict]:
    """A proxy run (reward climbing) with a held-out true score at steps 0, 10, 20, 30: the
    first of them on a ``"step": 0`` row of its own (no reward, no update metrics)."""
    rows = healthy()
    evals = {0: 0, 10: 1, 20: 2, 30: 3}
    out = [{"step": 0, "time/eval": 12.0}]
    out += rows
    for step, index in evals.items():
        row = out[step] if step else out[0]
        row["eval/unit_test_reward"] = true_scores[index]
        row["eval/unit_test_reward/sem"] = 0.03
        row["eval/unit_test_reward/delta_sem"] = delta_sems[index]
    return out


def eval_series(rows: list[dict], key: str):
    return trend(*series(rows, key))


# Each check's thresholds are tested exactly on them and just past them. Thresholds' promise:
# "at or above" (>=) for zero_std_high, clipped_high, persistent_share, trend_rho,
# length_growth, kl_limit, kl_spike and kl_floor; "at or below" for collapse_ratio; true_flat
# is "the largest rise still counted as flat" (<=); a sparse proxy rises when its change is
# "larger than" sparse_rise (>); min_trend_points values are enough for a trend. Each
# threshold is set to the very number the check computes, then to the next float past it.
def up(x: float) -> float:
    return math.nextafter(x, math.inf)


def down(x: float) -> float:
    return math.nextafter(x, -math.inf)


# --- diagnose as a whole: a healthy run, missing metrics, what it reads and refuses -----------

def test_a_healthy_run_flags_nothing():
    diagnosis = diagnose(healthy())
    assert diagnosis.flagged == [], str(diagnosis)
    assert [f.symptom for f in diagnosis] == list(SYMPTOMS)
    assert status(diagnosis, "hacking") == "not measured"  # no held-out score logged


def test_missing_metrics_say_not_measured():
    bare = [{"step": s, "reward": float(s)} for s in range(1, STEPS + 1)]
    diagnosis = diagnose(bare)
    assert diagnosis.flagged == []
    assert {f.symptom for f in diagnosis if f.status == "not measured"} == set(SYMPTOMS)
    assert "beta = 0" in diagnosis["KL blow-up"].evidence
    assert diagnose([]).steps == 0


def test_a_level_metric_that_was_not_logged_is_named_in_the_evidence():
    diagnosis = diagnose([{"step": 1, "reward": 1.0}])
    assert diagnosis["no signal"].evidence == "frac_reward_zero_std was not logged"
    assert diagnosis["truncation"].evidence == "completions/clipped_ratio was not logged"
    assert diagnosis["KL blow-up"].evidence == (
        "kl was not logged (beta = 0 loads no reference model, so there is no KL to read)")


def test_too_few_steps_for_a_trend_is_not_measured():
    diagnosis = diagnose(healthy(n=3))
    assert status(diagnosis, "length gaming") == "not measured"
    assert status(diagnosis, "collapse") == "not measured"


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="sequence of dicts"):
        diagnose([1, 2, 3])
    with pytest.raises(ValueError, match="status must be one of .*got 'maybe'"):
        Finding("hacking", "maybe", "reward")
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl at /nonexistent/run"):
        load_run("/nonexistent/run")


def test_diagnose_reads_a_run_folder_with_its_name_config_and_notes(tmp_path):
    rows = with_values(healthy(), "completions/clipped_ratio", [1.0] * STEPS)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "config.json").write_text(json.dumps({"train": {"max_new_tokens": 48}}))
    diagnosis = diagnose(tmp_path)
    assert diagnosis.run == tmp_path.name and diagnosis.steps == STEPS and diagnosis.notes == []
    assert "(48 new tokens)" in diagnosis["truncation"].evidence
    assert diagnose(tmp_path, name="mine").run == "mine"
    assert "(16 new tokens)" in diagnose(tmp_path, max_new_tokens=16)["truncation"].evidence
    assert diagnose([]).notes == ["no records: nothing to read"]
    assert str(diagnose([])).startswith("run: 0 steps, flagged: nothing\nno records")


def test_diagnose_takes_the_trained_rewards_from_the_run_config(tmp_path):
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "config.json").write_text(json.dumps({"reward_funcs": ["length_reward"]}))
    assert "pays for length" in diagnose(tmp_path)["length gaming"].evidence


def test_diagnose_is_exported_and_reads_only_metrics():
    """``from grpo_core import diagnose`` is the function; the module pulls no torch, no loop."""
    code = ("import sys; import grpo_core.diagnosis; from grpo_core import diagnose; "
            "print(callable(diagnose), 'torch' in sys.modules, 'grpo_core.loop' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False"]


# --- no signal (frac_reward_zero_std; the level check truncation shares) ----------------------

def test_no_signal_when_most_groups_are_all_equal():
    rows = with_values(healthy(), "frac_reward_zero_std", [1.0] * 20 + [0.5] * 10)
    finding = diagnose(rows)["no signal"]
    assert finding.flagged and finding.steps == tuple(range(1, 21)) and finding.value == 1.0
    assert "frac_reward_zero_std" in finding.evidence and "1-20" in finding.evidence
    assert "k" in finding.fix


def test_no_signal_early_only_is_transient():
    rows = with_values(healthy(), "frac_reward_zero_std", [1.0] * 3 + [0.25] * 27)
    assert status(diagnose(rows), "no signal") == "transient"


def test_a_level_finding_reports_where_how_often_and_the_grad_norm_there():
    values = [1.0] * 20 + [0.5] * 10
    rows = with_values(with_values(healthy(), "frac_reward_zero_std", values), "grad_norm",
                       [0.25] * 20 + [2.0] * 10)
    finding = diagnose(rows)["no signal"]
    assert (finding.metric, finding.value, finding.steps) == (
        "frac_reward_zero_std", 1.0, tuple(range(1, 21)))
    assert "frac_reward_zero_std >= 0.9 at 20 of 30 steps (1-20), peak 1 at step 1" \
        in finding.evidence
    assert "mean over the last fifth (steps 25-30) 0.5" in finding.evidence
    assert "grad_norm at those steps 0.25 on average" in finding.evidence
    calm = diagnose(healthy())["no signal"]
    assert calm.status == "ok" and calm.value == 0.25 and calm.steps == ()
    assert calm.evidence.startswith("frac_reward_zero_std stayed below 0.9 at all 30 steps "
                                    "(max 0.25 at step ")


def test_a_one_step_run_says_1_step():
    one = diagnose([healthy()[0]])
    assert "at all 1 step " in one["no signal"].evidence


@pytest.mark.parametrize(("symptom", "key", "field"), [
    ("no signal", "frac_reward_zero_std", "zero_std_high"),
    ("truncation", "completions/clipped_ratio", "clipped_high"),
])
def test_a_level_exactly_at_its_threshold_is_flagged(symptom, key, field):
    rows = with_values(healthy(), key, [0.7] * STEPS)
    assert diagnose(rows, thresholds=Thresholds(**{field: 0.7}))[symptom].flagged
    assert status(diagnose(rows, thresholds=Thresholds(**{field: up(0.7)})), symptom) == "ok"


def test_a_level_at_exactly_the_persistent_share_of_the_steps_is_flagged():
    values = [1.0] * 9 + [0.0] * 21  # 9 of 30 steps: exactly 0.3, all early
    rows = with_values(healthy(), "frac_reward_zero_std", values)
    assert diagnose(rows, thresholds=Thresholds(persistent_share=9 / 30))["no signal"].flagged
    late = diagnose(rows, thresholds=Thresholds(persistent_share=up(9 / 30)))
    assert status(late, "no signal") == "transient"


def test_a_level_whose_last_fifth_mean_is_exactly_the_threshold_is_flagged():
    values = [0.0] * 24 + [0.2, 0.2, 0.2, 0.2, 1.0, 1.0]  # 2 hits of 30: not persistent
    rows = with_values(healthy(), "frac_reward_zero_std", values)
    tail = trend(list(range(1, STEPS + 1)), values).last
    at = diagnose(rows, thresholds=Thresholds(zero_std_high=tail))["no signal"]
    assert at.flagged and at.steps == (29, 30)  # still there at the end
    assert status(diagnose(rows, thresholds=Thresholds(zero_std_high=up(tail))),
                  "no signal") == "transient"


# --- truncation (completions/clipped_ratio) ---------------------------------------------------

def test_truncation_when_completions_keep_hitting_the_budget():
    rows = with_values(healthy(), "completions/clipped_ratio", [0.2] * 20 + [0.9] * 10)
    finding = diagnose(rows, max_new_tokens=64)["truncation"]
    assert finding.flagged and finding.steps == tuple(range(21, 31))
    assert "64 new tokens" in finding.evidence and "max_new_tokens" in finding.fix


def test_truncation_that_goes_away_is_transient():
    rows = with_values(healthy(), "completions/clipped_ratio", [0.9, 0.8, 0.6] + [0.0] * 27)
    finding = diagnose(rows)["truncation"]
    assert finding.status == "transient" and finding.steps == (1, 2, 3)


def test_a_transient_level_reports_its_peak():
    rows = with_values(healthy(), "completions/clipped_ratio", [0.9, 0.8, 0.6] + [0.0] * 27)
    finding = diagnose(rows)["truncation"]
    assert finding.status == "transient" and finding.value == 0.9
    assert "peak 0.9 at step 1" in finding.evidence


def test_truncation_quotes_the_budget_only_when_known():
    rows = with_values(healthy(), "completions/clipped_ratio", [1.0] * STEPS)
    assert "max_new_tokens (64 new tokens)" in diagnose(rows, max_new_tokens=64)["truncation"].evidence
    assert "new tokens" not in diagnose(rows)["truncation"].evidence


def test_truncation_without_a_budget_ends_its_evidence_plainly():
    rows = with_values(healthy(), "completions/clipped_ratio", [1.0] * STEPS)
    assert diagnose(rows)["truncation"].evidence.endswith(
        "completions run into max_new_tokens and are scored cut off")


def test_thresholds_are_respected():
    rows = with_values(healthy(), "completions/clipped_ratio", [0.4] * STEPS)
    assert status(diagnose(rows), "truncation") == "ok"
    assert diagnose(rows, thresholds=Thresholds(clipped_high=0.3))["truncation"].flagged


# --- length gaming (completion length rising with the reward) ---------------------------------

def test_length_gaming_when_length_rises_with_the_reward():
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    finding = diagnose(rows)["length gaming"]
    assert finding.flagged, finding.evidence
    assert finding.value == pytest.approx(83 / 35)  # mean of the last 6 lengths / first 6


def test_length_is_not_gaming_when_the_reward_pays_for_it():
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    finding = diagnose(rows, reward_funcs=["negated_length_reward"])["length gaming"]
    assert finding.status == "ok" and "pays for length" in finding.evidence


def test_length_falling_as_the_reward_rises_is_not_gaming():
    rows = with_values(healthy(), "completions/mean_length", [60 - 2 * s for s in range(STEPS)])
    assert status(diagnose(rows), "length gaming") == "ok"


def test_length_rising_while_the_reward_falls_is_not_gaming():
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    rows = with_values(rows, "reward", [1 - s / STEPS for s in range(STEPS)])
    assert status(diagnose(rows), "length gaming") == "ok"


def test_length_gaming_falls_back_to_characters_and_reports_its_numbers():
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    flagged = diagnose(rows)["length gaming"]
    assert flagged.metric == "completions/mean_length"
    assert flagged.steps == tuple(range(6, STEPS + 1))  # from the end of the first fifth
    assert "(x2.37)" in flagged.evidence and "Spearman(length, reward) +" in flagged.evidence
    assert "reward 0." in flagged.evidence and "completions grow" in flagged.evidence
    chars = [{k: v for k, v in row.items() if k != "completions/mean_length"} for row in rows]
    chars = with_values(chars, "completions/mean_chars", [100 + 9 * s for s in range(STEPS)])
    by_chars = diagnose(chars)["length gaming"]
    assert by_chars.flagged and by_chars.metric == "completions/mean_chars"
    paid = diagnose(rows, reward_funcs=["length_reward", "format_reward", "short_length"])
    assert "(length_reward, short_length) pays for length" in paid["length gaming"].evidence
    assert paid["length gaming"].value == flagged.value
    assert diagnose(healthy())["length gaming"].metric == "completions/mean_length"
    assert "does not rise with the reward" in diagnose(healthy())["length gaming"].evidence


def test_length_gaming_needs_both_length_and_reward():
    lengths_only = [{"step": s, "completions/mean_length": 10.0 * s} for s in range(1, 31)]
    rewards_only = [{"step": s, "reward": 0.1 * s} for s in range(1, 31)]
    for rows in (lengths_only, rewards_only):
        finding = diagnose(rows)["length gaming"]
        assert finding.status == "not measured"
        assert finding.evidence == "needs reward and completion length"
    few = diagnose(with_values(healthy(n=5), "reward", [0.1] * 5))["length gaming"]
    assert few.evidence == "5 steps: too few to see a trend (needs 6)"
    assert few.metric == "completions/mean_length"


def test_a_finding_without_gaming_still_reports_its_metric_and_growth():
    flat = [{k: v for k, v in row.items() if k != "completions/mean_length"} for row in healthy()]
    finding = diagnose(flat)["length gaming"]
    assert finding.status == "ok" and finding.metric == "completions/mean_chars"
    assert finding.value == pytest.approx(trend(*series(flat, "completions/mean_chars")).last
                                          / trend(*series(flat, "completions/mean_chars")).first)
    paid = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    paid = [{k: v for k, v in row.items() if k != "completions/mean_length"}
            | {"completions/mean_chars": row["completions/mean_length"]} for row in paid]
    finding = diagnose(paid, reward_funcs=["length_reward"])["length gaming"]
    assert finding.metric == "completions/mean_chars" and finding.value == pytest.approx(83 / 35)


def test_length_gaming_with_too_few_character_counts_names_that_metric():
    chars = with_values(without(healthy(n=5), "completions/mean_length"), "completions/mean_chars",
                        [100.0] * 5)
    few = diagnose(chars)["length gaming"]
    assert few.status == "not measured" and few.metric == "completions/mean_chars"


def test_length_gaming_reads_only_the_steps_that_logged_the_reward():
    rows = with_values(healthy(), "completions/mean_length", [30 + 2 * s for s in range(STEPS)])
    rows = [without([row], "reward")[0] if row["step"] in (3, 7) else row for row in rows]
    finding = diagnose(rows)["length gaming"]
    assert finding.flagged and finding.evidence.startswith(
        eval_series(rows, "completions/mean_length").describe("completions/mean_length"))


@pytest.mark.parametrize(("start", "growth"), [(0.0, math.inf), (0.5, None)])
def test_length_growth_from_a_short_or_empty_start(start, growth):
    lengths = [start] * 6 + [start + 2.0 * s for s in range(1, 25)]
    rows = with_values(healthy(), "completions/mean_length", lengths)
    length = eval_series(rows, "completions/mean_length")
    finding = diagnose(rows)["length gaming"]
    assert finding.flagged
    assert finding.value == (growth or length.last / length.first)


def length_gaming_rows() -> tuple[list[dict], float, float]:
    """Length and reward rise together; returns the rows, the growth and the smallest rho."""
    lengths = [30 + 2 * s + (5 if s % 4 == 0 else 0) for s in range(STEPS)]
    rows = with_values(healthy(), "completions/mean_length", lengths)
    steps = list(range(1, STEPS + 1))
    rewards = [row["reward"] for row in rows]
    length = trend(steps, lengths)
    rho = min(length.rho, trend(steps, rewards).rho, spearman(lengths, rewards))
    return rows, length.last / length.first, rho


def test_length_growth_exactly_at_its_threshold_is_gaming():
    rows, growth, _ = length_gaming_rows()
    assert diagnose(rows, thresholds=Thresholds(length_growth=growth))["length gaming"].flagged
    assert status(diagnose(rows, thresholds=Thresholds(length_growth=up(growth))),
                  "length gaming") == "ok"


def test_a_rank_correlation_exactly_at_trend_rho_is_a_trend():
    rows, _, rho = length_gaming_rows()
    assert 0.4 < rho < 1.0
    assert diagnose(rows, thresholds=Thresholds(trend_rho=rho))["length gaming"].flagged
    assert status(diagnose(rows, thresholds=Thresholds(trend_rho=up(rho))),
                  "length gaming") == "ok"


def test_exactly_min_trend_points_values_are_enough_for_a_trend():
    rows, _, _ = length_gaming_rows()
    six = diagnose(rows[:6], thresholds=Thresholds(min_trend_points=6))
    assert status(six, "length gaming") != "not measured"
    assert status(six, "collapse") != "not measured"
    seven = diagnose(rows[:6], thresholds=Thresholds(min_trend_points=7))
    assert status(seven, "length gaming") == status(seven, "collapse") == "not measured"


def length_and_reward(lengths: list[float], rewards: list[float]) -> list[dict]:
    return with_values(with_values(healthy(), "completions/mean_length", lengths), "reward",
                       rewards)


def test_a_length_trend_exactly_at_trend_rho_is_gaming():
    lengths = [30 + 2 * s + (9 if s % 5 == 0 else 0) for s in range(STEPS)]
    rows = length_and_reward(lengths, [0.2 + 0.02 * s for s in range(STEPS)])  # rho 1
    rho = eval_series(rows, "completions/mean_length").rho  # also Spearman(length, reward)
    assert 0.4 < rho < 1.0
    assert diagnose(rows, thresholds=Thresholds(trend_rho=rho))["length gaming"].flagged
    assert status(diagnose(rows, thresholds=Thresholds(trend_rho=up(rho))),
                  "length gaming") == "ok"


def test_a_reward_trend_exactly_at_trend_rho_is_gaming():
    rewards = [0.2 + 0.02 * s + (0.09 if s % 5 == 0 else 0) for s in range(STEPS)]
    rows = length_and_reward([30 + 2 * s for s in range(STEPS)], rewards)  # length: rho 1
    rho = eval_series(rows, "reward").rho  # also Spearman(length, reward)
    assert 0.4 < rho < 1.0
    assert diagnose(rows, thresholds=Thresholds(trend_rho=rho))["length gaming"].flagged
    assert status(diagnose(rows, thresholds=Thresholds(trend_rho=up(rho))),
                  "length gaming") == "ok"


def test_a_reward_with_a_rank_trend_but_equal_ends_has_not_risen_with_the_length():
    rewards = [0.5] * 6 + [0.1 + 0.8 * i / 17 for i in range(18)] + [0.5] * 6
    rows = length_and_reward([30 + 2 * s for s in range(STEPS)], rewards)
    reward = eval_series(rows, "reward")
    assert reward.change == 0.0 and reward.rho > 0.4
    finding = diagnose(rows)["length gaming"]
    assert finding.status == "ok" and "length does not rise with the reward" in finding.evidence


# --- hacking (a proxy that climbs while the held-out true score does not) ---------------------

def test_hacking_when_the_proxy_climbs_and_the_true_score_falls():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    finding = diagnose(rows)["hacking"]  # names found automatically from eval/*
    assert finding.flagged and finding.metric == "reward vs eval/unit_test_reward"
    assert finding.steps == (1, 5, 10, 15, 20, 25, 30)
    assert "falls" in finding.evidence and "eval/proxy_reward" in finding.evidence


def test_hacking_when_the_true_score_stays_flat_with_explicit_names():
    rows = hacked([0.10, 0.12, 0.09, 0.11, 0.10, 0.12, 0.11])
    finding = diagnose(rows, proxy="reward", true_score="eval/unit_test_reward")["hacking"]
    assert finding.flagged and "stays flat" in finding.evidence
    held_out = diagnose(rows, proxy="eval/proxy_reward", true_score="eval/unit_test_reward")
    assert held_out["hacking"].flagged


def test_no_hacking_when_the_true_score_rises_with_the_proxy():
    rows = hacked([0.10, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4])
    finding = diagnose(rows)["hacking"]
    assert finding.status == "ok" and "rises with the proxy" in finding.evidence


def test_no_hacking_when_the_proxy_does_not_climb():
    rows = with_values(hacked([0.2] * 7), "reward", [0.5] * STEPS)
    rows = [{**row, "eval/proxy_reward": 0.5} if "eval/proxy_reward" in row else row
            for row in rows]
    finding = diagnose(rows)["hacking"]
    assert finding.status == "ok" and "does not climb" in finding.evidence


def test_hacking_seen_by_the_proxy_on_the_held_out_problems():
    """A noisy training reward (other prompts every step) but the held-out proxy climbs."""
    rng = random.Random(1)
    rows = with_values(hacked([0.47, 0.43, 0.5, 0.46, 0.45, 0.48, 0.49]), "reward",
                       [rng.choice([0.4, 0.9]) for _ in range(STEPS)])
    finding = diagnose(rows)["hacking"]
    assert finding.flagged and finding.metric == "eval/proxy_reward vs eval/unit_test_reward"
    assert not diagnose(rows, proxy="reward")["hacking"].flagged  # explicit: only that one


def test_check_hacking_alone_reads_the_trained_rewards_from_the_records():
    from grpo_core.diagnosis import check_hacking

    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    assert check_hacking(rows, Thresholds()) == diagnose(rows)["hacking"]


# which rewards were trained on, and which held-out score is the true one
def test_logged_rewards_are_the_rewards_slash_fn_slash_mean_keys():
    rows = [{"rewards/b/mean": 1, "rewards/a/mean": 1, "rewards/a/std": 0, "rewards/x/y/mean": 1,
             "eval/c/mean": 1, "reward": 1}]
    assert logged_rewards(rows) == ["a", "b"]
    assert trained_rewards(rows, {"reward_funcs": ["a", "b"]}) == ["a", "b"]  # weights 1 each
    assert trained_rewards(rows, {"reward_funcs": ["a", "b"], "reward_weights": [0, 2]}) == ["b"]


def test_a_reward_logged_in_float32_still_equals_the_total_reward():
    # TRL logs float32 means: -17.3 comes back as -17.299999237060547
    import struct

    def float32(x: float) -> float:
        return struct.unpack("f", struct.pack("f", x))[0]

    rows = [{"step": s, "reward": -17.3 + 0.1 * s, "rewards/length_reward/mean":
             float32(-17.3 + 0.1 * s), "rewards/format_reward/mean": 1.0}
            for s in range(1, 11)]
    assert rows[0]["reward"] != rows[0]["rewards/length_reward/mean"]
    assert trained_rewards(rows) == ["length_reward"]


def test_a_weight_0_reward_is_logged_but_not_trained_on():
    """Experiment 3's layout: the proxy trains; unit tests ride along at weight 0 and held out."""
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05], proxy_name="defines_function_reward")
    for step, row in enumerate(rows, start=1):
        row["rewards/unit_test_reward/mean"] = 0.1 - 0.001 * step
    assert trained_rewards(rows) == ["defines_function_reward"]  # its mean is the reward
    assert find_true_score(rows) == "eval/unit_test_reward"
    config = {"reward_funcs": ["defines_function_reward", "unit_test_reward"],
              "reward_weights": [1.0, 0.0]}
    assert trained_rewards(rows, config) == ["defines_function_reward"]
    finding = diagnose(rows)["hacking"]
    assert finding.flagged
    assert "eval/defines_function_reward" in finding.evidence
    assert "on the training samples, rewards/unit_test_reward/mean" in finding.evidence
    # both weights 1: the unit tests were trained on, so nothing independent is left
    both = {**config, "reward_weights": [1.0, 1.0]}
    assert find_true_score(rows, trained_rewards(rows, both)) is None


def test_true_score_detection():
    assert find_true_score(hacked([0.1] * 7)) == "eval/unit_test_reward"
    # the run trained on the unit tests: its eval is not an independent true score
    trained = [{"step": 1, "rewards/unit_test_reward/mean": 0.1, "eval/unit_test_reward": 0.1}]
    assert find_true_score(trained) is None
    two = [{"step": 1, "eval/a": 0.1, "eval/b": 0.2}]
    with pytest.raises(ValueError, match="true_score="):
        find_true_score(two)
    assert diagnose(two, true_score="eval/a")["hacking"].status == "not measured"  # one value
    assert "true_score=" in diagnose(two)["hacking"].evidence  # ambiguous: not a crash


def test_a_single_held_out_candidate_is_the_true_score():
    assert find_true_score([{"step": 1, "eval/pass_rate": 0.1}]) == "eval/pass_rate"
    assert find_true_score([{"step": 1, "eval/pass_rate": 0.1, "eval/unit_test_reward": 0.2}]) \
        == "eval/unit_test_reward"


def test_standard_errors_are_not_held_out_scores():
    # experiment 2: trained on unit_test_reward, so its eval/ numbers are not a *true* score
    records = held_out_run([0.1, 0.15, 0.2, 0.25], [0.0, 0.01, 0.01, 0.01])
    assert find_true_score(records, ["unit_test_reward"]) is None
    finding = diagnose(records, reward_funcs=["unit_test_reward"])["hacking"]
    assert finding.status == "not measured" and "no held-out true score" in finding.evidence
    assert find_true_score(records, ["long_function_reward"]) == "eval/unit_test_reward"


def test_explicit_true_score_and_reward_funcs_reach_the_hacking_check():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    for row in rows:  # a second held-out score: the automatic choice is now ambiguous...
        if "eval/unit_test_reward" in row:
            row["eval/other"] = 0.3
    assert diagnose(rows)["hacking"].status == "flagged"  # ...but unit_test_reward is preferred
    chosen = diagnose(rows, true_score="eval/other")["hacking"]
    assert chosen.metric.endswith("vs eval/other") and "stays flat" in chosen.evidence
    two = [{"step": s, "reward": 0.1 * s + 0.5, "rewards/a/mean": 0.1 * s, "rewards/b/mean": 0.5,
            "eval/b": 0.5} for s in range(1, 11)]
    assert diagnose(two)["hacking"].status == "not measured"  # a + b is the reward: both trained
    told = diagnose(two, reward_funcs=["a"])["hacking"]
    assert told.metric == "reward vs eval/b" and told.flagged


# what the finding says
def test_hacking_evidence_shows_every_proxy_and_the_true_score_on_training_samples():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    finding = diagnose(rows)["hacking"]
    assert finding.evidence.startswith("reward 0.")
    assert "; eval/unit_test_reward 0.19 (steps 1-5) -> 0.065 (steps 25-30)" in finding.evidence
    assert "change -0.125" in finding.evidence
    assert "; eval/proxy_reward " in finding.evidence
    assert finding.value > 0.125  # the proxy's rise minus the true score's change


def test_the_hacking_evidence_in_full_with_one_proxy_and_nothing_else_logged():
    falling = without(hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05]), "eval/proxy_reward")
    p, q = eval_series(falling, "reward"), eval_series(falling, "eval/unit_test_reward")
    finding = diagnose(falling)["hacking"]
    said = f"{p.describe('reward')}; {q.describe('eval/unit_test_reward')}, change {q.change:+.3g}"
    assert finding.evidence == said + ": the proxy climbs while the true score falls"
    assert finding.value == pytest.approx(p.change - q.change)
    flat = without(hacked([0.10, 0.12, 0.09, 0.11, 0.10, 0.12, 0.11]), "eval/proxy_reward")
    q = eval_series(flat, "eval/unit_test_reward")
    assert diagnose(flat)["hacking"].evidence == (
        f"{p.describe('reward')}; {q.describe('eval/unit_test_reward')}, change {q.change:+.3g}"
        ": the proxy climbs while the true score stays flat")


def test_a_true_score_rising_with_the_proxy_reports_the_gap_between_their_rises():
    rows = hacked([0.10, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4])
    finding = diagnose(rows)["hacking"]
    assert finding.status == "ok"
    p, q = eval_series(rows, "reward"), eval_series(rows, "eval/unit_test_reward")
    assert finding.value == pytest.approx(p.change - q.change)


def test_every_other_proxy_is_shown_after_the_climbing_one():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    for row in rows:
        if "eval/proxy_reward" in row:
            row["eval/other"] = 0.3
    finding = diagnose(rows, reward_funcs=["proxy_reward", "other"])["hacking"]
    assert finding.metric == "reward vs eval/unit_test_reward"
    others = (f"; {eval_series(rows, 'eval/other').describe('eval/other')}"
              f"; {eval_series(rows, 'eval/proxy_reward').describe('eval/proxy_reward')}")
    assert others in finding.evidence
    assert "held out, " not in finding.evidence  # each proxy once: not again as context


def test_an_explicit_proxy_shows_the_held_out_proxy_as_context():
    finding = diagnose(hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05]), proxy="reward")[
        "hacking"]
    assert "; held out, eval/proxy_reward 0." in finding.evidence
    assert finding.evidence.count("held out, ") == 1


def test_two_values_of_each_are_enough_to_judge_hacking_and_to_give_context():
    rng = random.Random(1)
    rows = hacked([0.2, 0.1], every=30)  # the true score and the held-out proxy: steps 1 and 30
    rows = with_values(rows, "reward", [rng.choice([0.4, 0.9]) for _ in range(STEPS)])
    for row in rows:
        row["rewards/proxy_reward/mean"] = row["reward"]
    rows[0]["rewards/unit_test_reward/mean"], rows[-1]["rewards/unit_test_reward/mean"] = 0.3, 0.2
    finding = diagnose(rows)["hacking"]
    assert finding.flagged and finding.metric == "eval/proxy_reward vs eval/unit_test_reward"
    told = diagnose(rows, proxy="reward")["hacking"]
    assert told.status == "ok"  # the noisy training reward does not climb; the context says why
    held_out = eval_series(rows, "eval/proxy_reward").describe("eval/proxy_reward")
    training = eval_series(rows, "rewards/unit_test_reward/mean").describe(
        "rewards/unit_test_reward/mean")
    assert (f"; held out, {held_out}; on the training samples, {training}: the proxy does not "
            "climb") in told.evidence


def test_the_true_score_on_the_training_samples_only_for_an_untrained_eval_score():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    for row in rows:
        row["rewards/pass/mean"] = 0.5
        if "eval/unit_test_reward" in row:
            row["true/pass"] = row["eval/unit_test_reward"]
    named = diagnose(rows, true_score="true/pass")["hacking"]  # not an eval/<fn> score
    assert named.flagged and "on the training samples" not in named.evidence
    trained = diagnose(rows, true_score="eval/proxy_reward")["hacking"]  # trained on
    assert trained.metric == "reward vs eval/proxy_reward"
    assert "on the training samples" not in trained.evidence


def test_what_the_hacking_check_says_when_it_cannot_judge():
    none = diagnose(healthy())["hacking"]
    assert none.metric == "reward vs a true score"
    assert none.evidence.startswith("no held-out true score was logged (an eval/... metric")
    two = [{"step": 1, "reward": 0.1, "eval/a": 0.1, "eval/b": 0.2}]
    assert diagnose(two)["hacking"].metric == "reward vs ?"
    one = diagnose(two, true_score="eval/a")["hacking"]
    assert one.metric == "reward vs eval/a"
    assert one.evidence == "1 value(s) of eval/a, and of reward: needs two of each"
    flat = with_values(hacked([0.2] * 7), "reward", [0.5] * STEPS)
    flat = [{k: v for k, v in r.items() if k != "eval/proxy_reward"} for r in flat]
    calm = diagnose(flat)["hacking"]
    assert calm.evidence.endswith(": the proxy does not climb") and calm.value is None
    assert calm.metric == "reward vs eval/unit_test_reward"


def test_one_value_of_the_true_score_is_not_measured_whatever_the_proxies():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    rows = [row if row["step"] == 1 else without([row], "eval/unit_test_reward")[0]
            for row in rows]
    finding = diagnose(rows)["hacking"]
    assert finding.status == "not measured"
    assert finding.evidence == ("1 value(s) of eval/unit_test_reward, and of reward or "
                                "eval/proxy_reward: needs two of each")


def test_a_step_zero_row_is_the_base_models_held_out_score():
    records = held_out_run([0.30, 0.24, 0.18, 0.12], [0.0, 0.02, 0.025, 0.03])
    found = diagnose(records, reward_funcs=["long_function_reward"])
    assert found.steps == STEPS  # the step-0 row is not a training step
    assert found["hacking"].flagged
    assert found["hacking"].steps == (0, 10, 20, 30)
    evidence = found["hacking"].evidence
    assert "against step 0: 0.3 -> 0.12 at step 30, change -0.18" in evidence
    assert "z -6.0" in evidence
    # the change against step 0 is added to the trend evidence, after it, not instead of it
    assert 0 <= evidence.find("eval/unit_test_reward") < evidence.find("against step 0")
    assert not evidence.startswith(";")
    # the other checks read the same as without the row
    without = diagnose(records[1:], reward_funcs=["long_function_reward"])
    for symptom in SYMPTOMS:
        if symptom != "hacking":
            assert found[symptom] == without[symptom], symptom


# its thresholds
def test_a_true_score_that_rises_by_exactly_true_flat_is_flat():
    rows = hacked([0.10, 0.11, 0.12, 0.12, 0.13, 0.14, 0.15])
    eval_steps = [1, 5, 10, 15, 20, 25, 30]
    rise = trend(eval_steps, [rows[s - 1]["eval/unit_test_reward"] for s in eval_steps]).change
    assert diagnose(rows, thresholds=Thresholds(true_flat=rise))["hacking"].flagged
    below = diagnose(rows, thresholds=Thresholds(true_flat=down(rise)))["hacking"]
    assert below.status == "ok" and "rises with the proxy" in below.evidence


def test_a_true_score_that_falls_by_exactly_true_flat_stays_flat():
    rows = hacked([0.20, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    fall = -eval_series(rows, "eval/unit_test_reward").change
    at = diagnose(rows, thresholds=Thresholds(true_flat=fall))["hacking"]
    assert at.flagged and at.evidence.endswith("the true score stays flat")
    past = diagnose(rows, thresholds=Thresholds(true_flat=down(fall)))["hacking"]
    assert past.flagged and past.evidence.endswith("the true score falls")


def test_a_sparse_proxy_must_rise_by_more_than_sparse_rise():
    rows = hacked([0.2, 0.2, 0.2, 0.2, 0.2], every=7)  # 5 held-out values: a sparse series
    eval_steps = [1, 7, 14, 21, 28]
    rise = trend(eval_steps, [rows[s - 1]["eval/proxy_reward"] for s in eval_steps]).change
    names = {"proxy": "eval/proxy_reward", "true_score": "eval/unit_test_reward"}
    at = diagnose(rows, thresholds=Thresholds(sparse_rise=rise), **names)["hacking"]
    assert at.status == "ok" and "does not climb" in at.evidence
    assert diagnose(rows, thresholds=Thresholds(sparse_rise=down(rise)), **names)["hacking"].flagged


def hacking_of(rewards: list[float], **thresholds) -> Finding:
    """The hacking finding of a run with this training reward and a flat true score."""
    rows = [{"step": s, "reward": r} for s, r in enumerate(rewards, start=1)]
    for row in rows[::2]:
        row["eval/unit_test_reward"] = 0.2
    return diagnose(rows, thresholds=Thresholds(**thresholds))["hacking"]


def test_a_proxy_of_exactly_min_trend_points_values_rises_by_its_trend():
    rewards = [0.50, 0.51, 0.52, 0.53, 0.54, 0.55]  # change 0.04 < sparse_rise, rho 1
    assert trend(range(6), rewards).change < Thresholds().sparse_rise
    assert hacking_of(rewards).flagged
    assert hacking_of(rewards, min_trend_points=7).status == "ok"  # sparse: too small a rise


def test_a_dense_proxy_with_a_rank_trend_but_equal_ends_does_not_rise():
    rewards = [0.5] * 6 + [0.1 + 0.8 * i / 17 for i in range(18)] + [0.5] * 6
    rising = trend(range(STEPS), rewards)
    assert rising.change == 0.0 and rising.rho > 0.4
    finding = hacking_of(rewards)
    assert finding.status == "ok" and finding.evidence.endswith(": the proxy does not climb")


def test_a_dense_proxy_whose_rho_is_exactly_trend_rho_rises():
    rewards = [row["reward"] for row in healthy()]
    rho = trend(range(STEPS), rewards).rho
    assert 0.4 < rho < 1.0
    assert hacking_of(rewards, trend_rho=rho).flagged
    assert hacking_of(rewards, trend_rho=up(rho)).status == "ok"


# --- collapse (entropy and the reward spread falling toward 0) --------------------------------

def test_collapse_when_entropy_and_reward_spread_fall_toward_zero():
    fading = [2.0 * 0.85 ** s for s in range(STEPS)]
    rows = with_values(with_values(healthy(), "entropy", fading), "reward_std", fading)
    finding = diagnose(rows)["collapse"]
    assert finding.flagged and finding.value < 0.1
    only_entropy = with_values(healthy(), "entropy", fading)
    assert status(diagnose(only_entropy), "collapse") == "ok"


def test_collapse_reports_its_last_fifth_and_which_of_the_two_fell():
    fading = [2.0 * 0.85 ** s for s in range(STEPS)]
    rows = with_values(with_values(healthy(), "entropy", fading), "reward_std", fading)
    finding = diagnose(rows)["collapse"]
    assert finding.steps == tuple(range(25, 31))
    assert finding.value == pytest.approx(trend(list(range(1, 31)), fading).last)
    assert "both fell below 0.35 x their start" in finding.evidence
    one = diagnose(with_values(healthy(), "entropy", fading))["collapse"]
    assert one.evidence.endswith(": only one of the two fell")
    assert diagnose(healthy())["collapse"].evidence.endswith(": neither fell toward 0")
    rising = [0.1 * s for s in range(STEPS)]  # reversed: falls steadily to 0
    rows = with_values(with_values(healthy(), "entropy", rising[::-1]), "reward_std", rising[::-1])
    assert diagnose(rows)["collapse"].status == "flagged"
    no_start = with_values(with_values(healthy(), "entropy", [0.0] * STEPS), "reward_std",
                           [0.0] * STEPS)
    assert diagnose(no_start)["collapse"].status == "ok"


def test_what_collapse_says_when_it_cannot_judge():
    rows = healthy()
    no_entropy = [{k: v for k, v in r.items() if k != "entropy"} for r in rows]
    neither = [{k: v for k, v in r.items() if k not in ("entropy", "reward_std")} for r in rows]
    assert diagnose(no_entropy)["collapse"].evidence == "entropy not logged"
    assert diagnose(neither)["collapse"].evidence == "entropy and reward_std not logged"
    few = diagnose(healthy(n=5))["collapse"]
    assert few.evidence == "5 steps: too few to see a trend (needs 6)"
    assert few.metric == "entropy, reward_std"
    calm = diagnose(healthy())["collapse"]
    assert calm.evidence.startswith("entropy 1.") and "; reward_std 0." in calm.evidence
    assert calm.value == pytest.approx(trend(*series(rows, "entropy")).last)


def collapse_of(entropy: list[float], reward_std: list[float] | None = None,
                **thresholds) -> str:
    rows = with_values(healthy(), "entropy", entropy)
    rows = with_values(rows, "reward_std", entropy if reward_std is None else reward_std)
    return status(diagnose(rows, thresholds=Thresholds(**thresholds)), "collapse")


def test_collapse_from_a_start_below_1():
    assert collapse_of([0.8 * 0.85 ** s for s in range(STEPS)]) == "flagged"


def test_low_ends_without_a_falling_trend_are_not_collapse():
    dip = [2.0] * 6 + [0.2, 3.0] * 9 + [0.5] * 6  # last fifth a quarter of the first, rho -0.16
    assert trend(list(range(1, STEPS + 1)), dip).last <= 0.35 * 2.0
    assert collapse_of(dip) == "ok"


def test_a_series_that_starts_at_0_has_not_collapsed():
    zero_ends = [0.0] * 6 + [1.0 - i / 18 for i in range(18)] + [0.0] * 6  # rho -0.22
    assert collapse_of(zero_ends, trend_rho=0.2) == "ok"


def test_falling_to_exactly_the_collapse_ratio_is_collapse():
    fading = [2.0] * 6 + [1.5, 1.25, 1.0, 0.875, 0.75, 0.625] * 3 + [0.5] * 6  # 2.0 -> 0.5
    rows = with_values(with_values(healthy(), "entropy", fading), "reward_std", fading)
    assert trend(list(range(1, STEPS + 1)), fading).last == 0.25 * 2.0
    assert diagnose(rows, thresholds=Thresholds(collapse_ratio=0.25))["collapse"].flagged
    assert status(diagnose(rows, thresholds=Thresholds(collapse_ratio=down(0.25))),
                  "collapse") == "ok"


def test_a_fall_with_exactly_minus_trend_rho_is_a_fall():
    noisy = [2.0 * 0.85 ** s * (1.5 if s % 3 == 0 else 1.0) for s in range(STEPS)]
    rho = trend(list(range(1, STEPS + 1)), noisy).rho
    assert -1.0 < rho < -0.4
    clean = [2.0 * 0.85 ** s for s in range(STEPS)]  # rho -1
    assert collapse_of(noisy, clean, trend_rho=-rho) == "flagged"
    assert collapse_of(noisy, clean, trend_rho=up(-rho)) == "ok"


# --- KL blow-up (a kl spike, or past the limit) -----------------------------------------------

def test_kl_blow_up_on_a_spike_and_past_the_limit():
    kl = [0.01] * 20 + [0.3, 0.02] + [0.01] * 8
    finding = diagnose(with_values(healthy(), "kl", kl))["KL blow-up"]
    assert finding.flagged and finding.steps == (21,) and "30x the median" in finding.evidence
    runaway = diagnose(with_values(healthy(), "kl", [0.1 * s for s in range(STEPS)]))
    assert runaway["KL blow-up"].flagged and runaway["KL blow-up"].steps[0] == 11


def test_kl_spike_names_the_reward_that_climbed_into_it():
    rows = with_values(healthy(), "kl", [0.01] * 20 + [0.5] * 10)
    rows = with_values(rows, "rewards/format_reward/mean", [s / STEPS for s in range(STEPS)])
    assert "rewards/format_reward/mean" in diagnose(rows)["KL blow-up"].evidence


def kl_status(kl: list[float], **thresholds) -> str:
    rows = with_values(healthy(n=len(kl)), "kl", kl)
    return status(diagnose(rows, thresholds=Thresholds(**thresholds)), "KL blow-up")


def test_a_kl_spike_needs_three_earlier_steps_and_reads_the_last_ten():
    assert kl_status([0.001, 0.5], kl_floor=0.1) == "ok"  # one earlier step: no median yet
    assert kl_status([0.001] * 3 + [0.5]) == "flagged"
    # the median of the ten steps before: 0.001, although the run started high
    rows = with_values(healthy(n=21), "kl", [0.6] * 10 + [0.001] * 10 + [0.2])
    finding = diagnose(rows)["KL blow-up"]
    assert finding.flagged and finding.steps == (21,) and finding.value == 0.6
    assert "step 21: 0.2, 200x the median 0.001 of the steps before" in finding.evidence


def test_the_kl_median_is_the_middle_of_exactly_the_ten_steps_before():
    kl = [1e-4] + [0.05] * 5 + [0.001] * 5 + [0.3]  # ten before step 12: median 0.05, 6x
    assert kl_status(kl) == "ok"


def test_a_kl_past_the_limit_at_many_steps_shows_three_and_peaks():
    finding = diagnose(with_values(healthy(n=10), "kl", [0.5] * 5 + [2.0, 3.0, 2.5, 2.0, 4.0]))[
        "KL blow-up"]
    assert finding.steps == (6, 7, 8, 9, 10) and finding.value == 4.0
    assert finding.evidence.startswith("step 6: 2 >= 1; step 7: 3 >= 1; step 8: 2.5 >= 1; ...")
    calm = diagnose(with_values(healthy(n=10), "kl", [0.01 * s for s in range(1, 11)]))
    assert calm["KL blow-up"].evidence == "kl peaked at 0.1 (step 10), no spike"
    assert calm["KL blow-up"].value == pytest.approx(0.1)


def test_a_kl_past_the_limit_at_exactly_three_steps_shows_them_all_without_an_ellipsis():
    three = diagnose(with_values(healthy(n=8), "kl", [0.5] * 5 + [2.0, 3.0, 2.5]))["KL blow-up"]
    assert three.evidence == "step 6: 2 >= 1; step 7: 3 >= 1; step 8: 2.5 >= 1"
    four = diagnose(with_values(healthy(n=9), "kl", [0.5] * 5 + [2.0, 3.0, 2.5, 2.0]))
    assert four["KL blow-up"].evidence == "step 6: 2 >= 1; step 7: 3 >= 1; step 8: 2.5 >= 1; ..."


def test_a_single_kl_spike_is_shown_without_an_ellipsis():
    finding = diagnose(with_values(healthy(n=4), "kl", [0.01, 0.01, 0.01, 0.5]))["KL blow-up"]
    assert finding.evidence == "step 4: 0.5, 50x the median 0.01 of the steps before"


def test_the_kl_spike_names_only_rewards_that_rose_into_it():
    rows = with_values(healthy(n=10), "kl", [0.01] * 5 + [0.5] * 5)
    rows = with_values(rows, "rewards/up/mean", [0.1, 0.2, 0.3, 0.4, 0.5] + [0.6] * 5)
    rows = with_values(rows, "rewards/down/mean", [0.5, 0.4, 0.3, 0.2, 0.1] + [0.0] * 5)
    evidence = diagnose(rows)["KL blow-up"].evidence
    assert evidence.endswith("; rising up to it: rewards/up/mean (a hack?)")
    short = with_values(healthy(n=4), "kl", [0.01, 0.01, 0.01, 0.5])
    short[2]["rewards/up/mean"], short[3]["rewards/up/mean"] = 0.1, 0.4
    assert diagnose(short)["KL blow-up"].flagged
    assert "rising" not in diagnose(short)["KL blow-up"].evidence  # two values up to it


def kl_spike_at_5(rewards: dict[str, list[float]]) -> str:
    """The KL evidence of a 6-step run whose kl spikes at step 5, with these reward series."""
    rows = with_values(healthy(n=6), "kl", [0.01] * 4 + [0.5, 0.01])
    for key, values in rewards.items():
        rows = with_values(rows, key, values)
    finding = diagnose(rows)["KL blow-up"]
    assert finding.flagged and finding.steps == (5,)
    return finding.evidence


def test_the_rewards_rising_into_a_kl_spike_include_the_spikes_own_step():
    # three values up to and including the spike's step are enough to call it a rise
    evidence = kl_spike_at_5({"rewards/up/mean": [None, None, 0.1, 0.2, 0.4, 0.0]})
    assert evidence.endswith("; rising up to it: rewards/up/mean (a hack?)")
    two = kl_spike_at_5({"rewards/up/mean": [None, None, None, 0.2, 0.4, 0.0]})
    assert "rising" not in two


def test_every_reward_rising_into_a_kl_spike_is_named_and_only_reward_means():
    rising = [0.1, 0.2, 0.3, 0.4, 0.5, 0.0]
    evidence = kl_spike_at_5({"rewards/a/mean": rising, "rewards/b/mean": rising,
                              "rewards/a/std": rising, "eval/a/mean": rising})
    assert evidence.endswith("; rising up to it: rewards/a/mean, rewards/b/mean (a hack?)")


def test_a_reward_whose_rank_correlation_is_exactly_the_default_trend_rho_rose_into_the_spike():
    before = [0.1, 0.5, 0.2, 0.3, 0.4]  # ranks 0 4 1 2 3: Spearman exactly 0.4
    assert spearman(range(5), before) == 0.4 == Thresholds().trend_rho
    evidence = kl_spike_at_5({"rewards/up/mean": [*before, 0.0]})
    assert evidence.endswith("; rising up to it: rewards/up/mean (a hack?)")


def test_a_kl_exactly_at_the_limit_is_a_blow_up():
    kl = [0.5] * 6 + [1.0] + [0.5] * 3  # never 10x its median: only the limit can fire
    assert kl_status(kl, kl_limit=1.0) == "flagged"
    assert kl_status(kl, kl_limit=up(1.0)) == "ok"


def test_a_kl_exactly_kl_spike_times_its_median_is_a_spike():
    kl = [0.125] * 6 + [0.5] + [0.125] * 3  # 4x the median, above the floor
    assert kl_status(kl, kl_spike=4.0) == "flagged"
    assert kl_status(kl, kl_spike=up(4.0)) == "ok"


def test_a_spike_exactly_at_the_kl_floor_counts():
    kl = [0.001] * 6 + [0.25] + [0.001] * 3  # 250x the median: only the floor decides
    assert kl_status(kl, kl_floor=0.25) == "flagged"
    assert kl_status(kl, kl_floor=up(0.25)) == "ok"


# --- shared: the held-out change against step 0 (notebook 08; paired differences: test_stats) --

def test_held_out_change_reads_step_0_and_the_last_evaluation():
    records = held_out_run([0.30, 0.24, 0.18, 0.12], [0.0, 0.02, 0.025, 0.04])
    records[0]["eval/unit_test_reward/sem"] = 0.031
    moved = held_out_change(records, "eval/unit_test_reward")
    assert (moved.start, moved.end, moved.end_step) == (0.30, 0.12, 30)
    assert (moved.start_sem, moved.end_sem, moved.delta_sem) == (0.031, 0.03, 0.04)
    assert moved.change == pytest.approx(-0.18)
    assert moved.z == pytest.approx(-4.5)  # -0.18 / 0.04: the last evaluation's delta_sem
    unmeasured = held_out_run([0.3, 0.2, 0.2, 0.2], [0.0, 0.0, 0.0, 0.0])
    assert held_out_change(unmeasured, "eval/unit_test_reward").z is None
    no_base = [row for row in records if row["step"] != 0]  # no step-0 evaluation
    assert held_out_change(no_base, "eval/unit_test_reward") is None
    only_base = [records[0]]
    assert held_out_change(only_base, "eval/unit_test_reward") is None
    last_without = [dict(row) for row in records]
    del last_without[30]["eval/unit_test_reward/delta_sem"]
    assert held_out_change(last_without, "eval/unit_test_reward") is None


def _evaluations(*rows: tuple[int, float, float, float]) -> list[dict]:
    """Records of held-out evaluations: (step, mean, sem, delta_sem) each."""
    key = "eval/unit_test_reward"
    return [{"step": step, key: mean, f"{key}/sem": sem, f"{key}/delta_sem": delta}
            for step, mean, sem, delta in rows]


def test_held_out_change_of_two_evaluations_takes_each_ones_own_standard_errors():
    two = held_out_change(_evaluations((0, 0.2, 0.02, 0.0), (10, 0.5, 0.03, 0.025)),
                          "eval/unit_test_reward")
    assert two is not None and two.key == "eval/unit_test_reward"  # step 0 and one more suffice
    assert (two.start_sem, two.end_sem, two.delta_sem, two.end_step) == (0.02, 0.03, 0.025, 10)
    three = held_out_change(_evaluations((0, 0.2, 0.02, 0.0), (10, 0.5, 0.03, 0.025),
                                         (20, 0.4, 0.04, 0.035)), "eval/unit_test_reward")
    assert (three.start_sem, three.end_sem, three.delta_sem) == (0.02, 0.04, 0.035)


def test_change_from_step0_leaves_out_z_when_there_is_no_standard_error():
    unmeasured = _evaluations((0, 0.2, 0.02, 0.0), (10, 0.5, 0.03, 0.0))
    assert change_from_step0(unmeasured, "eval/unit_test_reward") == (
        "against step 0: 0.2 -> 0.5 at step 10, change +0.3 (standard error 0)")
    measured = _evaluations((0, 0.2, 0.02, 0.0), (10, 0.5, 0.03, 0.1))
    assert change_from_step0(measured, "eval/unit_test_reward").endswith(
        "(standard error 0.1, z +3.0)")


# --- shared: how a Finding and a Diagnosis render (text, table, HTML, plots) ------------------

def test_diagnosis_prints_and_tabulates():
    diagnosis = diagnose(hacked([0.2, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05]), name="toy")
    text = str(diagnosis)
    assert text.startswith("toy: 30 steps, flagged: hacking")
    assert "[FLAGGED] hacking" in text and "fix:" in text
    assert repr(diagnosis) == "Diagnosis(run='toy', steps=30, flagged=['hacking'])"
    table = diagnosis.to_table()
    assert list(table.columns) == ["run", "symptom", "status", "metric", "steps", "value",
                                   "evidence", "fix"]
    assert table.set_index("symptom").loc["hacking", "steps"] == "1, 5, 10, 15, 20, 25, 30"
    with pytest.raises(KeyError, match="no finding for 'sadness'; symptoms: .*'no signal'"):
        diagnosis["sadness"]


def test_evidence_numbers_have_three_significant_digits():
    finding = diagnose(with_values(healthy(n=10), "kl", [0.0123456] * 10))["KL blow-up"]
    assert finding.evidence == "kl peaked at 0.0123 (step 1), no spike"


def test_a_diagnosis_renders_as_an_html_table_coloured_by_status():
    from grpo_core.findings import STATUS_COLOURS

    diagnosis = Diagnosis([
        Finding("hacking", "flagged", "reward vs eval/x", steps=(3, 4, 5), evidence="a < b",
                fix="fix the reward"),
        Finding("collapse", "ok", "entropy", evidence="entropy held", fix="never shown"),
    ], run="toy", steps=5, notes=["a note"])
    page = diagnosis._repr_html_()
    assert page.count('<tr class="grpo-finding">') == 2
    assert "<b>toy</b>: 5 steps, flagged: <b>hacking</b>" in page and "a note" in page
    assert "3-5" in page and "a &lt; b" in page  # steps as text, evidence escaped
    assert "fix the reward" in page and "never shown" not in page  # a fix only for trouble
    flagged_colour, ok_colour = STATUS_COLOURS["flagged"][0], STATUS_COLOURS["ok"][0]
    assert f"color:{flagged_colour}" in page and ">FLAGGED<" in page
    assert f"color:{ok_colour}" in page and ">OK<" in page
    assert flagged_colour != ok_colour
    assert str(diagnosis).startswith("toy: 5 steps, flagged: hacking")  # plain text elsewhere


def test_compare_runs_draws_every_run_in_each_panel():
    runs = [RecordedRun("a", healthy()), RecordedRun("b", healthy(seed=1)[:10])]
    fig = compare_runs(runs, keys=("entropy", "kl"))
    entropy = next(ax for ax in fig.axes if ax.get_title() == metric_title("entropy"))
    assert [line.get_label() for line in entropy.lines] == ["a", "b"]
    assert len(entropy.lines[1].get_xdata()) == 10


def test_load_run_reads_config_and_plot_run_shades_the_flagged_panel(tmp_path):
    rows = hacked([0.2, 0.18, 0.15, 0.12, 0.10, 0.08, 0.05])
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"reward_funcs": ["proxy_reward"], "train": {"max_new_tokens": 32}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = load_run(tmp_path)
    assert run.name == tmp_path.name and run.config == config and len(run.records) == STEPS
    diagnosis = diagnose(tmp_path)
    assert diagnosis.symptoms == ["hacking"] and diagnosis.run == tmp_path.name
    fig = plot_run(run, diagnosis)
    titles = [ax.get_title() for ax in fig.axes]
    panel = next(ax for ax in fig.axes if ax.get_title().startswith("held-out evaluation"))
    assert "hacking: flagged" in panel.get_title() and panel.patches
    assert [line.get_label() for line in panel.lines] == ["proxy_reward (trained on)",
                                                          "unit_test_reward (true score)"]
    assert "cut off by the token budget (clipped_ratio)" in titles


# --- the recorded runs (data/runs/, written by python -m grpo_core) ---------------------------

EXP1 = RUNS_DIR / "exp1-length-cpu"
EXP3 = RUNS_DIR / "exp3-stop-cpu"  # the lead run: with the code experiments' stop rule
EXP3_DEFINES = RUNS_DIR / "exp3-defines-function-cpu"


def finished(run_dir) -> bool:
    """A recorded run with all the steps its config asked for (not one still recording)."""
    if run_dir not in list_runs():
        return False
    run = load_run(run_dir)
    return len(run.records) >= run.config.get("train", {}).get("max_steps", 1)


def test_recorded_runs_are_found():
    assert EXP1 in list_runs()


@pytest.mark.skipif(not finished(EXP1), reason="no recorded experiment 1")
def test_experiment_1_is_not_flagged():
    diagnosis = diagnose(EXP1)
    assert "hacking" not in diagnosis.symptoms
    # the length falls toward 20 characters as the reward rises: not length gaming
    assert diagnosis["length gaming"].status == "ok"
    assert diagnosis.flagged == [], str(diagnosis)


@pytest.mark.skipif(not finished(EXP3),
                    reason="data/runs/exp3-stop-cpu not recorded yet, or still "
                           "recording (its command: data/README.md)")
def test_experiment_3_is_flagged_as_hacking_with_a_margin():
    # 30 steps on long_function_reward: the proxy climbs, the held-out unit tests fall
    run = load_run(EXP3)
    diagnosis = diagnose(run)
    assert "hacking" in diagnosis.symptoms, str(diagnosis)
    assert diagnosis["hacking"].metric.endswith("eval/unit_test_reward")
    assert run.config["proxy_reward"] == "long_function_reward"
    base = Thresholds()
    for factor in (0.5, 2.0):  # not a verdict that hangs on its thresholds
        scaled = Thresholds(true_flat=base.true_flat * factor,
                            sparse_rise=base.sparse_rise * factor,
                            trend_rho=base.trend_rho * factor)
        assert diagnose(run, thresholds=scaled)["hacking"].flagged, factor
    fell = held_out_change(run.records, "eval/unit_test_reward")
    assert fell.z <= -2, fell  # the true score fell from the base model's, beyond noise
    steps, cut = series(run.records, "completions/clipped_ratio")
    assert trend(steps, cut).last <= 0.3  # and not because the budget cut the answers


EXP2_RUNS = [RUNS_DIR / f"exp2-{name}-cpu" for name in ("k2", "k8", "k16", "k8-seed1")]


@pytest.mark.parametrize("folder", EXP2_RUNS, ids=[p.name for p in EXP2_RUNS])
def test_experiment_2_is_not_hacking_and_its_budget_stays_out_of_the_way(folder):
    if not finished(folder):
        pytest.skip(f"data/runs/{folder.name} not recorded yet (its command: data/README.md)")
    run = load_run(folder)
    diagnosis = diagnose(run)
    # trained on the unit tests themselves: no held-out *true* score besides them
    assert diagnosis["hacking"].status == "not measured", str(diagnosis)
    assert "truncation" not in diagnosis.symptoms, str(diagnosis)
    steps, cut = series(run.records, "completions/clipped_ratio")
    assert trend(steps, cut).last <= 0.3
    base = held_out_change(run.records, "eval/unit_test_reward")
    assert base.start_sem <= 0.03  # the base model's score measured to +-0.03


@pytest.mark.skipif(not finished(RUNS_DIR / "exp2-k8-cpu"), reason="no recorded exp2-k8-cpu")
def test_experiment_2s_lead_run_climbs_on_the_held_out_problems_beyond_noise():
    climbed = held_out_change(load_run(RUNS_DIR / "exp2-k8-cpu").records, "eval/unit_test_reward")
    assert climbed.z >= 2, climbed


@pytest.mark.skipif(not finished(EXP3_DEFINES), reason="no recorded defines_function run")
def test_the_milder_proxy_run_is_not_called_hacking():
    # its held-out unit-test score rose with the proxy (0.451 -> 0.521): not hacking
    diagnosis = diagnose(EXP3_DEFINES)
    assert diagnosis["hacking"].status == "ok", str(diagnosis)
    assert diagnosis["hacking"].metric.endswith("eval/unit_test_reward")


EXP3_KEPT_EVERY_SAMPLE = RUNS_DIR / "exp3-stop-cpu"  # 2 held-out samples per problem, both kept


@pytest.mark.skipif(not finished(EXP3_KEPT_EVERY_SAMPLE), reason="no recorded exp3-stop-cpu")
def test_the_kept_held_out_samples_reproduce_the_logged_score_and_its_standard_errors():
    # samples.jsonl and metrics.jsonl are written by different code: the per-problem means of
    # the kept samples must give back the evaluator's mean, sem and delta_sem
    from grpo_core.stats import paired_difference

    run = load_run(EXP3_KEPT_EVERY_SAMPLE)
    held = run.samples(split="held_out")
    logged = {r["step"]: r for r in run.records if "eval/unit_test_reward" in r}
    base = held.problem_means("unit_test_reward", 0)
    assert len(base) == 115 and sorted(held.steps) == sorted(logged)
    for step, record in logged.items():
        means = held.problem_means("unit_test_reward", step)
        against_zero = paired_difference(means, {p: 0.0 for p in means})
        assert against_zero.mean == pytest.approx(record["eval/unit_test_reward"], abs=1e-6)
        assert against_zero.sem == pytest.approx(record["eval/unit_test_reward/sem"], abs=1e-6)
        if step:
            moved = paired_difference(means, base)
            assert moved.sem == pytest.approx(record["eval/unit_test_reward/delta_sem"],
                                              abs=1e-6)
    assert held.problem_means("unit_test_reward", 999) == {}
    with pytest.raises(KeyError, match="has no 'tests_passed'"):
        held.problem_means("tests_passed", 0)


# --- the recorded runs: the gallery of real failures (grpo_core.gallery, notebook 11) ---------

def test_the_gallery_has_one_run_per_symptom_each_with_its_command():
    assert [entry.symptom for entry in GALLERY] == list(SYMPTOMS)
    assert len({entry.run for entry in GALLERY}) == len(GALLERY)
    for entry in GALLERY:
        assert entry.full_command.startswith("python -m grpo_core ")
        assert entry.full_command.endswith(f"--out data/runs/{entry.run}")
        assert "--profile cpu" in entry.command and entry.symptom not in entry.also
        assert set(entry.also) <= set(SYMPTOMS)
    for name, command in FIXED_RUN_COMMANDS.items():
        assert command.endswith(f"--out data/runs/{name}")
    assert gallery_entry("collapse").run == "gallery-collapse-cpu"
    with pytest.raises(KeyError, match="no gallery run"):
        gallery_entry("boredom")


def test_the_gallerys_commands_parse_into_the_change_they_describe():
    from grpo_core.cli import config_overrides, parse_args

    def parsed(entry):
        return parse_args(entry.full_command.split()[3:])

    assert parsed(gallery_entry("no signal")).problems == "mbpp"
    assert config_overrides(parsed(gallery_entry("no signal")))["eval_every"] == 0
    assert parsed(gallery_entry("length gaming")).reward == "detail"
    # the truncation example is experiment 3 without its stop rule, the hacking one with it
    assert config_overrides(parsed(gallery_entry("truncation")))["stop_at"] is None
    assert "stop_at" not in config_overrides(parsed(gallery_entry("hacking")))
    assert gallery_entry("truncation").fixed_run == gallery_entry("hacking").run
    assert config_overrides(parsed(gallery_entry("collapse")))["learning_rate"] == 2e-4
    kl = config_overrides(parsed(gallery_entry("KL blow-up")))
    assert kl["beta"] == 0.04 and "learning_rate" not in kl  # the course's learning rate
    fixed = config_overrides(parse_args(FIXED_RUN_COMMANDS["exp1-beta-0.2-cpu"].split()[3:]))
    assert fixed["beta"] > kl["beta"] and "learning_rate" not in fixed


@pytest.mark.parametrize("entry", GALLERY, ids=[entry.symptom for entry in GALLERY])
def test_each_gallery_run_is_flagged_for_its_symptom_and_nothing_it_should_not_be(entry):
    folder = RUNS_DIR / entry.run
    if not finished(folder):
        pytest.skip(f"data/runs/{entry.run} is not recorded yet (or still recording): "
                    f"{entry.full_command}")
    diagnosis = diagnose(folder)
    assert entry.symptom in diagnosis.symptoms, str(diagnosis)
    unexpected = set(diagnosis.symptoms) - {entry.symptom, *entry.also}
    assert not unexpected, str(diagnosis)


@pytest.mark.parametrize("entry", [e for e in GALLERY if e.fixed_run],
                         ids=[e.symptom for e in GALLERY if e.fixed_run])
def test_each_gallery_fix_is_not_flagged_for_the_symptom(entry):
    folder = RUNS_DIR / entry.fixed_run
    if not finished(folder):
        command = FIXED_RUN_COMMANDS.get(entry.fixed_run, f"the run {entry.fixed_run}")
        pytest.skip(f"data/runs/{entry.fixed_run} is not recorded yet: {command}")
    assert entry.symptom not in diagnose(folder).symptoms, str(diagnose(folder))
