"""A run folder's files (grpo_core.run_files): where the recorded runs are, the JSON-lines
reader, a run folder's metrics and config, samples.jsonl (its rows, the reader, the selections
and per-problem means), the metric readers and the listing of run folders.

Each on a small folder written here (``tmp_path``); nothing loads a model or trains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_core import run_files
from grpo_core.run_files import (
    RUNS_ENV,
    SAMPLES_FILE,
    RecordedRun,
    RunsNotFoundError,
    Samples,
    eval_mean_keys,
    is_eval_stat,
    list_runs,
    load_run,
    pass_at_keys,
    read_jsonl,
    read_samples,
    runs_dir,
    sample_record,
    series,
    training_records,
)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def held_out(step: int, prompt_id, sample: int, score: float) -> dict:
    return sample_record(step, "held_out", prompt_id, sample, "x", truncated=False,
                         values={"score": score}, max_chars=10)


# --- where the files are --------------------------------------------------------------------


def test_the_package_data_ships_inside_the_package():
    assert run_files.EXP1_PROMPTS.is_file() and run_files.PROBLEMS_FILE.is_file()
    assert run_files.EXP1_PROMPTS.parent == Path(run_files.__file__).parent / "data"
    clone = Path(__file__).resolve().parent.parent  # the tests run in a clone
    assert clone == run_files.REPO_ROOT


def test_runs_dir_is_the_environments_folder_else_the_clones(tmp_path, monkeypatch):
    monkeypatch.setenv(RUNS_ENV, str(tmp_path))
    assert runs_dir() == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "runs").mkdir()
    monkeypatch.setenv(RUNS_ENV, "~/runs")
    assert runs_dir() == tmp_path / "runs"  # ~ expanded
    for unset in ("", None):
        if unset is None:
            monkeypatch.delenv(RUNS_ENV)
        else:
            monkeypatch.setenv(RUNS_ENV, unset)
        assert runs_dir() == run_files.REPO_ROOT / "data" / "runs"


def test_runs_dir_says_plainly_when_there_is_none(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(RUNS_ENV, str(missing))
    with pytest.raises(RunsNotFoundError, match=f"^{RUNS_ENV}={missing} is not a folder$"):
        runs_dir()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(RUNS_ENV, str(tmp_path / "a-file"))
    with pytest.raises(RunsNotFoundError, match="is not a folder"):
        runs_dir()
    monkeypatch.delenv(RUNS_ENV)
    monkeypatch.setattr(run_files, "REPO_ROOT", None)  # an installed wheel, no clone
    with pytest.raises(FileNotFoundError, match=f"clone the repository, or set {RUNS_ENV}"):
        runs_dir()
    assert issubclass(RunsNotFoundError, FileNotFoundError)


# --- read_jsonl -----------------------------------------------------------------------------


def test_read_jsonl_reads_every_record_in_order_and_skips_blank_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"a": 2, "b": [1, 2]}\n{"a": 3}')  # no final newline
    assert read_jsonl(path) == [{"a": 1}, {"a": 2, "b": [1, 2]}, {"a": 3}]
    assert read_jsonl(str(path)) == read_jsonl(path)
    assert read_jsonl(path, missing_ok=True) == read_jsonl(path)
    (tmp_path / "empty.jsonl").write_text("")
    assert read_jsonl(tmp_path / "empty.jsonl") == []


def test_read_jsonl_of_a_missing_file_raises_unless_missing_ok(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "nothing.jsonl")
    assert read_jsonl(tmp_path / "nothing.jsonl", missing_ok=True) == []


# --- load_run: a run folder's metrics and config ----------------------------------------------


def test_load_run_reads_the_folder_or_its_metrics_file(tmp_path):
    folder = tmp_path / "my-run"
    write_jsonl(folder / "metrics.jsonl", [{"step": 1, "reward": 0.5}, {"step": 2}])
    (folder / "config.json").write_text(json.dumps({"experiment": "length"}))
    run = load_run(folder)
    assert (run.name, run.path) == ("my-run", folder)
    assert run.records == [{"step": 1, "reward": 0.5}, {"step": 2}]
    assert run.config == {"experiment": "length"}
    by_file = load_run(str(folder / "metrics.jsonl"))
    assert (by_file.name, by_file.path, by_file.records, by_file.config) == (
        "my-run", folder, run.records, run.config)


def test_load_run_without_a_config_or_without_metrics(tmp_path):
    write_jsonl(tmp_path / "bare" / "metrics.jsonl", [{"step": 1}])
    assert load_run(tmp_path / "bare").config == {}
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl at .*empty/metrics.jsonl"):
        load_run(tmp_path / "empty")


def test_a_bare_run_name_is_looked_up_in_the_runs_folder(tmp_path, monkeypatch):
    runs, here = tmp_path / "runs", tmp_path / "here"
    write_jsonl(runs / "exp-a" / "metrics.jsonl", [{"step": 1, "reward": 1.0}])
    here.mkdir()
    monkeypatch.setenv(RUNS_ENV, str(runs))
    monkeypatch.chdir(here)
    run = load_run("exp-a")
    assert run.path == runs / "exp-a" and run.records == [{"step": 1, "reward": 1.0}]
    write_jsonl(here / "exp-a" / "metrics.jsonl", [{"step": 7}])  # a folder here comes first
    assert load_run("exp-a").records == [{"step": 7}]
    write_jsonl(runs / "nested" / "exp-a" / "metrics.jsonl", [{"step": 1}])
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        load_run("nested/exp-a")  # a path, not a bare name: never looked up


# --- samples.jsonl: its rows --------------------------------------------------------------------


def test_sample_record_cuts_marks_and_keeps_names_apart():
    row = sample_record(3, "train", 0, 1, "abcdef", truncated=False, max_chars=4,
                        prompt="p" * 250, reward=0.5, advantage=1 / 3,
                        values={"reward": 0.25, "score": 2 / 3})
    assert row["completion"] == "abcd" and row["cut"] and row["chars"] == 6
    assert row["prompt"] == "p" * 200
    assert row["reward"] == 0.5 and row["rewards/reward"] == 0.25  # a clashing name moves
    assert row["score"] == 0.666667 and row["advantage"] == 0.333333
    with pytest.raises(ValueError, match="split"):
        sample_record(0, "test", 0, 0, "", truncated=False, values={}, max_chars=1)


def test_a_held_out_row_has_no_prompt_reward_or_advantage():
    row = sample_record(2, "held_out", 17, 1, "abcd", truncated=1, max_chars=4,
                        values={"unit_test_reward": 0.1234567, "advantage": 0.5, "chars": 2.0})
    assert row == {"step": 2, "split": "held_out", "prompt_id": 17, "sample": 1,
                   "completion": "abcd", "chars": 4, "cut": False, "truncated": True,
                   "unit_test_reward": 0.123457, "rewards/advantage": 0.5,
                   "rewards/chars": 2.0}
    assert row["truncated"] is True and row["cut"] is False  # exactly max_chars: not cut
    # a reward function named "reward" on a held-out row (no reward field) still moves: the
    # training rows' field of that name means the weighted total
    named = sample_record(2, "held_out", 17, 0, "", truncated=False, max_chars=4,
                          values={"reward": 0.5})
    assert "reward" not in named and named["rewards/reward"] == 0.5


def test_a_long_run_of_long_completions_stays_under_three_megabytes():
    """The bound of TrainConfig's docstring: 60 steps x 16 completions and 7 evaluations of
    115 problems x 2 samples, every completion far past the 600-character cut."""
    completion = "def f(x):\n    return 'a very long answer'  # " * 200
    lines = []
    for step in range(1, 61):
        for i in range(16):
            lines.append(sample_record(step, "train", 600 + i // 8, i % 8, completion,
                                       truncated=True, max_chars=600, reward=1 / 3,
                                       advantage=-1.2345678,
                                       values={"long_function_reward": 1 / 3,
                                               "unit_test_reward": 1 / 7}))
    for step in range(0, 61, 10):
        for problem in range(115):
            for sample in range(2):
                lines.append(sample_record(step, "held_out", 1000 + problem, sample, completion,
                                           truncated=True, max_chars=600,
                                           values={"unit_test_reward": 1 / 3,
                                                   "long_function_reward": 2 / 3,
                                                   "defines_function_reward": 1.0}))
    size = sum(len(json.dumps(line)) + 1 for line in lines)
    assert 1.5e6 < size < 2.5e6, size
    assert all(len(line["completion"]) == 600 and line["cut"] for line in lines)


# --- samples.jsonl: the reader and the selections ---------------------------------------------


def test_an_older_run_without_samples_still_loads(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    run = load_run(tmp_path)
    assert run.records == [{"step": 1, "reward": 0.5}] and not run.has_samples
    samples = run.samples(split="train")
    assert not samples.found and len(samples) == 0 and list(samples) == []
    assert not read_samples(tmp_path / "nothing-here").found
    (tmp_path / SAMPLES_FILE).write_text(json.dumps(
        sample_record(1, "train", 4, 0, "x", truncated=False, values={}, max_chars=9)) + "\n")
    assert run.has_samples and run.samples(prompt_id=4)[0]["completion"] == "x"
    assert read_samples(tmp_path / SAMPLES_FILE).found


def test_read_samples_takes_the_folder_or_the_file(tmp_path):
    rows = [held_out(0, 1, 0, 0.5), held_out(0, 2, 0, 1.0)]
    file = write_jsonl(tmp_path / "run" / SAMPLES_FILE, rows)
    for path in (tmp_path / "run", file, str(file)):
        samples = read_samples(path)
        assert (samples.rows, samples.found, samples.path) == (rows, True, file)
    missing = read_samples(tmp_path / "other")
    assert (missing.rows, missing.found, missing.path) == ([], False,
                                                           tmp_path / "other" / SAMPLES_FILE)
    assert read_samples(tmp_path / "elsewhere.jsonl").path == tmp_path / "elsewhere.jsonl"
    odd = write_jsonl(tmp_path / "named.jsonl" / SAMPLES_FILE, rows)  # a folder named *.jsonl
    assert read_samples(tmp_path / "named.jsonl").path == odd


def test_a_recorded_run_without_a_folder_has_no_samples():
    run = RecordedRun("in-memory", [{"step": 1}])
    assert not run.has_samples and run.config == {} and run.path is None
    samples = run.samples(split="train")
    assert (samples.rows, samples.found, samples.path) == ([], False, None)


def test_select_keeps_the_rows_of_a_split_a_step_and_a_prompt(tmp_path):
    rows = [{"step": 1, "split": "train", "prompt_id": 5}, {"step": 1, "split": "held_out",
            "prompt_id": 5}, {"step": 2, "split": "train", "prompt_id": 6},
            {"step": 2, "split": "train", "prompt_id": 5}]
    samples = Samples(rows, found=True, path=tmp_path / SAMPLES_FILE)
    assert samples.select().rows == rows
    assert samples.select(split="train").rows == [rows[0], rows[2], rows[3]]
    assert samples.select(step=2).rows == rows[2:]
    assert samples.select(prompt_id=5).rows == [rows[0], rows[1], rows[3]]
    chosen = samples.select(split="train", step=2, prompt_id=5)
    assert chosen.rows == [rows[3]]
    assert (chosen.found, chosen.path) == (True, tmp_path / SAMPLES_FILE)
    assert samples.select(prompt_id=0).rows == []  # 0 is a prompt id, not "any"
    assert len(samples) == 4 and samples[2] is rows[2] and list(samples) == rows
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'held_out'\), got 'test'"):
        samples.select(split="test")


def test_pass_at_k_of_recorded_samples_counts_a_sample_that_scored_one_as_a_pass():
    rows = [held_out(0, 1, 0, 1.0), held_out(0, 1, 1, 0.5), held_out(0, 1, 2, 0.0),
            held_out(0, 2, 0, 0.0), held_out(0, 2, 1, 0.0), held_out(0, 2, 2, 0.0),
            held_out(4, 1, 0, 1.0), {**held_out(0, 3, 0, 1.0), "split": "train"}]
    samples = Samples(rows, found=True, path=None)
    assert samples.problem_pass_at_k("score", 0, 1) == pytest.approx({1: 1 / 3, 2: 0.0})
    assert samples.problem_pass_at_k("score", 0, 3) == {1: 1.0, 2: 0.0}
    assert samples.problem_pass_at_k("score", 0, 1, pass_score=0.5) == pytest.approx(
        {1: 2 / 3, 2: 0.0})
    assert samples.problem_pass_at_k("score", 4, 1) == {1: 1.0}
    assert samples.problem_pass_at_k("score", 9, 1) == {}
    with pytest.raises(ValueError, match="pass@k needs"):
        samples.problem_pass_at_k("score", 4, 2)  # one sample kept: no pass@2
    with pytest.raises(KeyError, match="other"):
        samples.problem_pass_at_k("other", 0, 1)


def test_problem_means_average_each_problems_samples_of_one_step():
    rows = [held_out(0, 1, 0, 0.0), held_out(0, 1, 1, 1.0), held_out(0, 2, 0, 0.25),
            held_out(3, 1, 0, 0.75), held_out(3, 1, 1, 0.5),
            {**held_out(0, 1, 0, 9.0), "split": "train"}]
    samples = Samples(rows, found=True, path=None)
    assert samples.problem_means("score", 0) == {1: 0.5, 2: 0.25}  # the train row left out
    assert samples.problem_means("score", 3) == {1: 0.625}
    assert samples.problem_means("score", 0, split="train") == {1: 9.0}
    assert samples.problem_means("score", 1) == {}
    with pytest.raises(KeyError, match="a held_out row of step 0 has no 'other'; it has "):
        samples.problem_means("other", 0)
    assert samples.steps == [0, 3]
    assert Samples([{"step": 4}, {"split": "train"}, {"step": 2}, {"step": 4}], True,
                   None).steps == [2, 4]


# --- the metric readers -------------------------------------------------------------------------


def test_the_readers_tell_a_held_out_mean_from_its_standard_errors():
    rows = [{"step": 0, "eval/a": 0.1, "eval/a/sem": 0.02, "eval/a/delta_sem": 0.0},
            {"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.7, "eval/a": 0.3}]
    assert eval_mean_keys(rows) == ["eval/a"]
    assert is_eval_stat("eval/a/sem") and is_eval_stat("eval/a/delta_sem")
    assert not is_eval_stat("eval/a") and not is_eval_stat("rewards/a/sem")
    assert is_eval_stat("eval/a/pass@1") and is_eval_stat("eval/a/pass@8/sem")
    assert eval_mean_keys([{"eval/a": 0.1, "eval/a/pass@1": 0.1, "eval/a/pass@3": 0.2}]) == \
        ["eval/a"]
    assert pass_at_keys([{"eval/b/pass@16": 1, "eval/b/pass@2": 1, "eval/a/pass@3/sem": 0},
                         {"eval/a/pass@3": 1, "eval/a": 1, "pass@1": 1}]) == \
        ["eval/a/pass@3", "eval/b/pass@2", "eval/b/pass@16"]
    assert series(rows, "eval/a") == ([0, 2], [0.1, 0.3])
    assert series(rows, "reward") == ([1, 2], [0.5, 0.7])
    assert [r["step"] for r in training_records(rows)] == [1, 2]


def test_eval_mean_keys_are_sorted_once_each_and_training_records_keep_unnumbered_rows():
    rows = [{"step": 0, "eval/b": 0.1, "eval/a": 0.2}, {"eval/b": 0.3, "eval/c/sem": 0.1},
            {"step": 5, "eval/a": 0.4, "evaluation": 1.0}]
    assert eval_mean_keys(rows) == ["eval/a", "eval/b"]
    assert eval_mean_keys([]) == []
    assert training_records(rows) == rows[1:]  # only the "step": 0 row is left out


def test_series_takes_finite_numbers_and_numbers_unnamed_steps_from_1():
    records = [{"reward": 1}, {"reward": True}, {"reward": float("nan")}, {"reward": 2.5},
               {"step": 9, "reward": 3.0}, {"loss": 1.0}]
    assert series(records, "reward") == ([1, 4, 9], [1.0, 2.5, 3.0])


def test_series_skips_none_text_and_infinities_and_gives_floats():
    records = [{"step": 1, "x": None}, {"step": 2, "x": "1.0"}, {"step": 3, "x": float("inf")},
               {"step": 4, "x": -float("inf")}, {"step": 5, "x": 2}]
    steps, values = series(records, "x")
    assert (steps, values) == ([5], [2.0]) and type(values[0]) is float
    assert series([], "x") == ([], [])


# --- list_runs: the run folders under a folder --------------------------------------------------


def test_list_runs_finds_folders_with_metrics_in_natural_order(tmp_path, monkeypatch):
    for name in ("exp2-k16-cpu", "exp2-k2-cpu", "exp2-k8-cpu", "exp1-length-cpu"):
        write_jsonl(tmp_path / name / "metrics.jsonl", [{"step": 1}])
    (tmp_path / "still-starting").mkdir()
    (tmp_path / "still-starting" / "metrics.jsonl").write_text("")  # empty: not listed
    (tmp_path / "one-byte").mkdir()
    (tmp_path / "one-byte" / "metrics.jsonl").write_text("\n")  # not empty: listed
    (tmp_path / "no-metrics").mkdir()
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')  # not in a run folder
    expected = [tmp_path / name for name in ("exp1-length-cpu", "exp2-k2-cpu", "exp2-k8-cpu",
                                             "exp2-k16-cpu", "one-byte")]
    assert list_runs(tmp_path) == expected
    assert list_runs(str(tmp_path)) == expected
    monkeypatch.setenv(RUNS_ENV, str(tmp_path))
    assert list_runs() == expected  # default: runs_dir()
    assert list_runs(tmp_path / "nowhere") == []


# ----------------------------------------------------------------------------- writing a run


def test_a_jsonl_log_flushes_each_row_and_a_resume_keeps_the_rows_up_to_its_step(tmp_path):
    from grpo_core.run_files import JsonlLog

    path = tmp_path / "metrics.jsonl"
    log = JsonlLog(path, keep_up_to=None)
    assert log.writing and not log.kept
    for step in (0, 1, 2, 3):
        log.write({"step": step, "reward": float(step)})
        assert len(read_jsonl(path)) == step + 1  # on disk at once, before close
    log.close()
    resumed = JsonlLog(path, keep_up_to=2)  # the checkpoint's step: step 3 is computed again
    assert [row["step"] for row in resumed.kept] == [0, 1, 2]
    assert resumed.has_step(0) and not resumed.has_step(3)
    resumed.write({"step": 3, "reward": 9.0})
    resumed.close()
    assert [row["reward"] for row in read_jsonl(path)] == [0.0, 1.0, 2.0, 9.0]
    fresh = JsonlLog(path, keep_up_to=0)  # not a resume: nothing is kept
    fresh.close()
    assert read_jsonl(path) == []


def test_write_first_puts_rows_before_the_kept_ones_and_none_writes_nothing(tmp_path):
    from grpo_core.run_files import JsonlLog

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n')
    log = JsonlLog(path, keep_up_to=2)
    log.write_first([{"step": 0, "eval/x": 0.5}])
    log.write({"step": 3})
    log.close()
    assert [row["step"] for row in read_jsonl(path)] == [0, 1, 2, 3]
    nowhere = JsonlLog(None, keep_up_to=2)
    nowhere.write({"step": 1})
    nowhere.write_first([{"step": 0}])
    nowhere.close()
    assert not nowhere.writing and nowhere.kept == [] and not nowhere.has_step(1)


def test_config_and_eval_state_round_trip_as_json(tmp_path):
    from grpo_core.run_files import (
        CONFIG_FILE,
        jsonable,
        read_eval_state,
        write_config,
        write_eval_state,
    )

    assert jsonable({1: (2, [3.5, None]), "f": print, "ok": True}) == {
        "1": [2, [3.5, None]], "f": repr(print), "ok": True}
    written = write_config(tmp_path, {"train": {"adam_betas": (0.9, 0.999)}, "command": "x"})
    assert written == tmp_path / CONFIG_FILE
    assert json.loads(written.read_text()) == {"train": {"adam_betas": [0.9, 0.999]},
                                               "command": "x"}
    assert read_eval_state(tmp_path) is None
    state = {"prompt_ids": [3, 1], "baseline": {"unit_test_reward": [0.5, 0.0]}}
    write_eval_state(tmp_path, state)
    assert read_eval_state(tmp_path) == state
