"""The run explorer (notebook 11), driven without a browser: every recorded run, and small runs
written here whose completions are known."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grpo_core.diagnosis import diagnose
from grpo_core.run_files import list_runs, load_run, read_samples, runs_dir
from grpo_core.widgets import NO_SAMPLES_MESSAGE, run_explorer, step_view, step_view_html
from grpo_core.widgets.explorer import (
    cursor_x,
    curve_keys,
    curves_svg,
    findings_at,
    record_at,
    sign_class,
    step_groups,
    training_steps,
)

RECORDED = list_runs()


def cursor_positions(page: str) -> list[float]:
    return [float(x) for x in re.findall(r'class="grpo-cursor" x1="([0-9.]+)"', page)]


def write_run(folder: Path, metrics: list[dict], samples: list[dict] | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    (folder / "config.json").write_text(json.dumps({"reward_funcs": ["toy_reward"]}))
    if samples is not None:
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    return folder


def toy_row(step: int, prompt_id: int, sample: int, reward: float, advantage: float) -> dict:
    return {"step": step, "split": "train", "prompt_id": prompt_id, "prompt": f"prompt {prompt_id}",
            "sample": sample, "completion": f"step {step} prompt {prompt_id} sample {sample}",
            "chars": 30, "cut": False, "truncated": sample == 0, "reward": reward,
            "toy_reward": reward, "advantage": advantage}


@pytest.fixture
def toy_runs(tmp_path):
    """Two runs: ``toy`` (steps 1-3 with samples, a step-0 evaluation) and ``bare`` (none)."""
    metrics = [{"step": 0, "eval/toy_reward": 0.1}] + [
        {"step": s, "reward": 0.1 * s, "reward_std": 0.5, "entropy": 1.0 - 0.1 * s,
         "frac_reward_zero_std": 0.5 if s == 2 else 0.0} for s in (1, 2, 3)]
    samples = []
    for step in (1, 2, 3):
        rewards = [0.0, 1.0] if step != 2 else [1.0, 1.0]
        advantages = [-0.7, 0.7] if step != 2 else [0.0, 0.0]
        for sample, (r, a) in enumerate(zip(rewards, advantages, strict=True)):
            samples.append(toy_row(step, 7, sample, r, a))
        samples.append({"step": step, "split": "held_out", "prompt_id": "h1", "sample": 0,
                        "completion": "held", "chars": 4, "cut": False, "truncated": False,
                        "toy_reward": 0.0})
    write_run(tmp_path / "runs" / "toy", metrics, samples)
    write_run(tmp_path / "runs" / "bare", metrics[1:], None)
    return tmp_path / "runs"


# --- pure functions ---------------------------------------------------------------------------


def test_training_steps_leave_out_the_step0_evaluation():
    assert training_steps([{"step": 0}, {"step": 2}, {"step": 1}, {"step": 2}]) == [1, 2]


def test_step_groups_gather_a_steps_training_rows_by_prompt_in_sample_order(toy_runs):
    samples = read_samples(toy_runs / "toy")
    groups = step_groups(samples, 1)
    assert [g.prompt_id for g in groups] == [7]
    assert [c.sample for c in groups[0].completions] == [0, 1]
    first = groups[0].completions[0]
    assert (first.reward, first.advantage, first.truncated) == (0.0, -0.7, True)
    assert first.values == {"toy_reward": 0.0}
    assert first.text == "step 1 prompt 7 sample 0"
    assert not groups[0].flat and step_groups(samples, 2)[0].flat
    assert step_groups(samples, 9) == []


@pytest.mark.parametrize(("value", "css"), [(0.5, "grpo-pos"), (-0.01, "grpo-neg"),
                                            (0.0, "grpo-zero"), (None, "grpo-zero")])
def test_sign_class_follows_the_advantages_sign(value, css):
    assert sign_class(value) == css


def test_cursor_x_spans_the_panel():
    assert cursor_x([1, 2, 3], 1, 100) == 4.0
    assert cursor_x([1, 2, 3], 3, 100) == 96.0
    assert cursor_x([1, 2, 3], 2, 100) == 50.0
    assert cursor_x([5], 5, 100) == 4.0  # one step: no division by zero


def test_record_at_merges_the_steps_records():
    records = [{"step": 1, "reward": 1.0}, {"step": 1, "eval/x": 0.5}, {"step": 2, "reward": 2}]
    assert record_at(records, 1) == {"step": 1, "reward": 1.0, "eval/x": 0.5}
    assert record_at(records, 3) == {}


def test_curves_svg_draws_each_logged_curve_with_a_cursor_at_the_step(toy_runs):
    records = load_run(toy_runs / "toy").records
    keys = curve_keys(records)
    assert keys == ["reward", "reward_std", "frac_reward_zero_std", "entropy", "eval/toy_reward"]
    early, late = curves_svg(records, 1), curves_svg(records, 3)
    assert len(cursor_positions(early)) == len(keys)
    assert cursor_positions(early)[0] < cursor_positions(late)[0]
    assert 'data-key="reward"' in early and "0.3" in late  # the reward at step 3


def test_step_view_shows_the_steps_groups_held_out_count_and_findings(toy_runs):
    run = load_run(toy_runs / "toy")
    view = step_view(run, 2)
    assert view.step == 2 and view.samples_found and view.held_out == 1
    assert view.metrics["reward"] == pytest.approx(0.2)
    assert [c.advantage for c in view.groups[0].completions] == [0.0, 0.0]
    assert "1 group(s) with every reward equal" in view.message
    page = step_view_html(view, run.records)
    assert page.count('class="grpo-completion grpo-zero"') == 2
    page1 = step_view_html(step_view(run, 1), run.records)
    assert page1.count("grpo-completion grpo-neg") == 1
    assert page1.count("grpo-completion grpo-pos") == 1
    assert "step 1 prompt 7 sample 1" in page1 and "step 2 prompt" not in page1


def test_findings_at_keeps_the_flagged_findings_that_name_the_step():
    rows = [{"step": s, "frac_reward_zero_std": 1.0 if s <= 8 else 0.0} for s in range(1, 11)]
    diagnosis = diagnose(rows)
    assert [f.symptom for f in findings_at(diagnosis, 3)] == ["no signal"]
    assert findings_at(diagnosis, 9) == []


def test_step_view_escapes_the_models_text(tmp_path):
    row = toy_row(1, 0, 0, 1.0, 0.5) | {"completion": "<script>alert(1)</script>"}
    run = load_run(write_run(tmp_path / "r", [{"step": 1, "reward": 1.0}], [row]))
    page = step_view_html(step_view(run, 1))
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_each_reward_functions_value_shows_beside_the_total_when_there_are_several(tmp_path):
    """A proxy run's completions show the true score (weight 0) beside the trained reward, so
    a hacked completion reads as one: proxy 1.00, unit tests 0.00."""
    hacked = toy_row(1, 0, 0, 1.0, 0.5) | {"long_function_reward": 1.0, "unit_test_reward": 0.0}
    del hacked["toy_reward"]
    run = load_run(write_run(tmp_path / "r", [{"step": 1, "reward": 1.0}], [hacked]))
    page = step_view_html(step_view(run, 1))
    assert re.search(r'unit_test_reward <b class="grpo-value">0(\.0+)?</b>', page)
    assert re.search(r'long_function_reward <b class="grpo-value">1(\.0+)?</b>', page)
    alone = load_run(write_run(tmp_path / "s", [{"step": 1, "reward": 1.0}],
                               [toy_row(1, 0, 0, 1.0, 0.5)]))
    assert "grpo-value" not in step_view_html(step_view(alone, 1))  # one function: the total


def test_a_run_without_samples_still_shows_its_curves_and_says_so(toy_runs):
    run = load_run(toy_runs / "bare")
    view = step_view(run, 1)
    assert not view.samples_found and view.groups == () and view.message == NO_SAMPLES_MESSAGE
    page = step_view_html(view, run.records)
    assert NO_SAMPLES_MESSAGE in page and len(cursor_positions(page)) == 4


# --- the widget ---------------------------------------------------------------------------------


def test_the_slider_changes_the_step_shown(toy_runs):
    view = run_explorer("toy", root=toy_runs)
    assert (view.step.min, view.step.max, view.step.value) == (1, 3, 1)
    first = view.output.value
    assert "step 1 prompt 7 sample 0" in first
    view.step.value = 3
    assert view.state.step == 3
    assert "step 3 prompt 7 sample 0" in view.output.value and "step 1 prompt" not in view.output.value
    assert cursor_positions(view.output.value)[0] > cursor_positions(first)[0]


def test_picking_another_run_resets_the_slider_to_its_steps(toy_runs, tmp_path):
    write_run(toy_runs / "long", [{"step": s, "reward": s} for s in range(1, 11)], None)
    view = run_explorer("long", root=toy_runs)
    view.step.value = 9
    view.run.value = "toy"
    assert (view.step.min, view.step.max, view.step.value) == (1, 3, 1)
    assert view.state.run == "toy" and view.state.groups
    view.run.value = "bare"
    assert NO_SAMPLES_MESSAGE in view.output.value


def test_a_folder_outside_the_runs_joins_the_list(toy_runs, tmp_path):
    outside = write_run(tmp_path / "elsewhere" / "mine", [{"step": 1, "reward": 0.0}], None)
    view = run_explorer(outside, root=toy_runs)
    assert view.run.value == str(outside) and {"toy", "bare"} <= set(view.run.options)
    assert view.state.run == "mine"
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        run_explorer(tmp_path / "nowhere", root=toy_runs)


@pytest.mark.parametrize("path", RECORDED, ids=[p.name for p in RECORDED])
def test_explorer_builds_for_every_recorded_run_and_its_slider_moves(path):
    run = load_run(path)
    steps = training_steps(run.records)
    view = run_explorer(path.name)
    assert view.run.value == path.name and view.step.value == steps[0]
    samples = read_samples(path)
    first = view.output.value
    assert len(cursor_positions(first)) == len(curve_keys(run.records)) > 0
    view.step.value = steps[-1]
    assert view.state.step == steps[-1] and f'class="grpo-step">{steps[-1]}<' in view.output.value
    assert cursor_positions(view.output.value)[0] > cursor_positions(first)[0]
    if samples.found:
        shown = [c.text for g in view.state.groups for c in g.completions]
        kept = [r["completion"] for r in samples.select(split="train", step=steps[-1])]
        assert sorted(shown) == sorted(kept) and shown
    else:
        assert NO_SAMPLES_MESSAGE in view.output.value


def test_the_recorded_runs_are_there_to_explore():
    assert RECORDED, f"no recorded runs under {runs_dir()}"
    assert any(read_samples(path).found for path in RECORDED), "no recorded run has samples"


def test_without_the_courses_runs_a_given_folder_still_opens(toy_runs, monkeypatch, tmp_path):
    from grpo_core.run_files import RunsNotFoundError

    monkeypatch.setenv("GRPO_RUNS_DIR", str(tmp_path / "absent"))
    view = run_explorer(toy_runs / "toy")
    assert list(view.run.options) == [str(toy_runs / "toy")] and view.state.groups
    view = run_explorer(load_run(toy_runs / "bare"))  # a RecordedRun
    assert view.state.run == "bare"
    with pytest.raises(RunsNotFoundError, match="GRPO_RUNS_DIR"):
        run_explorer()
