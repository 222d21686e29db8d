"""Curves from metric records: our loop's and TRL's (the callback), without a notebook."""

from __future__ import annotations

import json

import pytest

from grpo_core.plots import (
    CLIP_TITLE,
    HELD_OUT_PANEL,
    ROLE_COLOURS,
    ZERO_AT_EVERY_STEP,
    ZERO_STD_TITLE,
    LivePlot,
    compare_runs,
    figure_png,
    in_notebook,
    metric_title,
    panels_for,
    plot_metrics,
    plot_run,
    save_curves,
)
from grpo_core.run_files import read_jsonl as read_metrics

PNG = b"\x89PNG\r\n\x1a\n"


def records(n: int, with_kl: bool = False) -> list[dict]:
    rows = []
    for step in range(1, n + 1):
        row = {
            "step": step, "reward": -100 / step, "reward_std": 10.0, "frac_reward_zero_std": 0.0,
            "completions/mean_length": 60 - step, "completions/mean_chars": 200 / step,
            "clip_ratio/region_mean": 0.0, "entropy": 2.0, "loss": 0.0,
        }
        if with_kl:
            row["kl"] = 0.001 * step
        rows.append(row)
    return rows


def test_plot_has_a_panel_per_logged_metric_group_and_no_empty_one():
    fig = plot_metrics(records(3), title="t", targets={"completions/mean_chars": 20})
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["reward", "completion length", ZERO_STD_TITLE, CLIP_TITLE,
                      "entropy"]  # no kl logged (beta = 0): no KL panel
    with_kl = plot_metrics(records(3, with_kl=True))
    kl_axis = next(ax for ax in with_kl.axes if ax.get_title() == "KL to the reference")
    assert kl_axis.lines and not kl_axis.texts
    nothing_yet = plot_metrics([{"step": 0, "time/eval": 1.0}])
    (only,) = [ax for ax in nothing_yet.axes if ax.get_visible()]
    assert any("nothing logged yet" in t.get_text() for t in only.texts)


def test_steps_are_whole_numbers_and_figures_are_readable():
    fig = plot_metrics(records(2))
    reward = next(ax for ax in fig.axes if ax.get_title() == "reward")
    ticks = [t for t in reward.get_xticks() if 1 <= t <= 2]
    assert ticks and all(float(t).is_integer() for t in ticks)  # 1, 2: never 0.96-1.04
    assert fig.dpi >= 120
    side_by_side = compare_runs({"a": records(2)}, keys=["entropy"])
    assert all(float(t).is_integer() for t in side_by_side.axes[0].get_xticks())


def test_a_single_step_reads_as_a_whole_step():
    fig = plot_metrics(records(1))
    for ax in (ax for ax in fig.axes if ax.get_visible() and ax.get_title()):
        low, high = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if low <= t <= high]
        assert 1 in ticks and all(float(t).is_integer() for t in ticks), (ax.get_title(), ticks)
    side_by_side = compare_runs({"a": records(1)}, keys=["entropy"])
    assert all(float(t).is_integer() for t in side_by_side.axes[0].get_xticks())


def test_a_metric_at_zero_every_step_is_said_not_drawn():
    fig = plot_metrics(records(3))  # one update per batch: clip_ratio is 0 at every step
    clip = next(ax for ax in fig.axes if ax.get_title() == CLIP_TITLE)
    assert not clip.lines
    assert [t.get_text() for t in clip.texts] == [ZERO_AT_EVERY_STEP["clip_ratio/region_mean"]]
    rows = records(3)
    rows[1]["clip_ratio/region_mean"] = 0.02  # the clip acted once: the curve again
    clip = next(ax for ax in plot_metrics(rows).axes if ax.get_title() == CLIP_TITLE)
    assert clip.lines and not clip.texts
    zero_kl = [{**row, "kl": 0.0} for row in records(2)]
    kl = next(ax for ax in plot_metrics(zero_kl).axes if ax.get_title() == "KL to the reference")
    assert "no KL term" in kl.texts[0].get_text()
    # a panel of several metrics, or one not listed, keeps its flat line
    flat = next(ax for ax in fig.axes if ax.get_title() == ZERO_STD_TITLE)
    assert flat.lines and not flat.texts


def test_held_out_panel_has_a_legend_that_names_the_true_score():
    rows = [{"step": 0, "eval/unit_test_reward": 0.2, "eval/long_function_reward": 0.3}]
    for step in (1, 2, 3):
        rows.append({"step": step, "reward": 0.1 * step, "rewards/long_function_reward/mean":
                     0.1 * step, "rewards/unit_test_reward/mean": 0.2, "entropy": 1.0})
    rows[-1].update({"eval/unit_test_reward": 0.2, "eval/long_function_reward": 0.6})
    fig = plot_run(rows)
    held_out = next(ax for ax in fig.axes if ax.get_title().startswith(HELD_OUT_PANEL))
    legend = held_out.get_legend()
    assert legend is not None
    assert sorted(t.get_text() for t in legend.get_texts()) == [
        "long_function_reward (trained on)", "unit_test_reward (true score)"]
    # the true score and the proxy keep their colours, whatever order the panel draws them in
    colours = {line.get_label(): line.get_color() for line in held_out.lines}
    assert colours == {"long_function_reward (trained on)": ROLE_COLOURS["trained on"],
                       "unit_test_reward (true score)": ROLE_COLOURS["true score"]}
    swapped = plot_metrics(rows, panels=[("p", ["eval/unit_test_reward",
                                                "eval/long_function_reward"], None)],
                           labels={"eval/unit_test_reward": "unit_test_reward (true score)"})
    assert swapped.axes[0].lines[0].get_color() == ROLE_COLOURS["true score"]


def test_save_curves_writes_a_png(tmp_path):
    path = save_curves(records(4), tmp_path / "sub" / "curves.png")
    assert path.read_bytes()[:8] == PNG


def test_figure_png_keeps_the_picture_in_a_third_of_the_bytes():
    import io

    from PIL import Image, ImageChops, ImageStat

    fig = plot_metrics(records(12, with_kl=True), title="t")
    small, full = figure_png(fig), figure_png(fig, palette=False)
    assert small[:8] == PNG and full[:8] == PNG
    reduced, original = Image.open(io.BytesIO(small)), Image.open(io.BytesIO(full))
    assert reduced.mode == "P" and reduced.size == original.size
    assert len(small) < 0.5 * len(full)
    difference = ImageChops.difference(reduced.convert("RGB"), original.convert("RGB"))
    per_pixel = ImageStat.Stat(difference.convert("L")).mean[0]
    assert per_pixel < 2.5  # of 255 grey levels (16 colours: about 5): the same picture


def test_read_metrics_round_trip(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records(2)))
    assert read_metrics(path) == records(2)


def test_live_plot_redraws_every_n_steps(tmp_path):
    path = tmp_path / "curves.png"
    plot = LivePlot(every=2, path=path, show=False)
    plot(records(1)[0])
    assert not path.exists()
    plot(records(2)[1])
    assert path.read_bytes()[:8] == PNG
    path.unlink()
    plot(records(3)[2])
    assert not path.exists()
    plot.close()  # draws what is left
    assert path.exists() and len(plot.records) == 3


def test_a_live_plot_of_a_resumed_run_draws_its_earlier_steps_too(tmp_path, monkeypatch):
    from grpo_core import plots

    drawn = []
    real = plots.plot_metrics
    monkeypatch.setattr(plots, "plot_metrics",
                        lambda records, **kw: drawn.append([r["step"] for r in records])
                        or real(records, **kw))
    path = tmp_path / "curves.png"
    plot = LivePlot(every=5, path=path, show=False, records=records(2))
    plot(records(3)[2])
    assert drawn == [] and not path.exists()  # nothing drawn before the 5th new record
    plot.close()
    assert drawn == [[1, 2, 3]] and path.exists()  # once, with the kept steps


def test_not_a_notebook_under_pytest():
    assert not in_notebook()
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        LivePlot(every=0)


def test_live_plot_is_a_trainer_callback_for_trl(tmp_path):
    """transformers' CallbackHandler calls every event on it; only on_log draws."""
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler

    plot = LivePlot(every=1, path=tmp_path / "curves.png", show=False)
    handler = CallbackHandler([plot], None, None, None, None)
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    state, control = TrainerState(), TrainerControl()
    handler.on_train_begin(args, state, control)
    for step in (1, 2):
        state.global_step = step
        handler.on_step_end(args, state, control)
        handler.on_log(args, state, control, logs={"reward": -5.0 * step, "kl": 0.01, "epoch": 0.1})
    handler.on_log(args, state, control, logs={"train_runtime": 3.0})  # the final summary: ignored
    handler.on_train_end(args, state, control)
    assert [r["step"] for r in plot.records] == [1, 2]
    assert plot.records[1]["reward"] == -10.0
    assert (tmp_path / "curves.png").read_bytes()[:8] == PNG


def test_plots_need_neither_torch_nor_trl():
    import subprocess
    import sys

    code = "import sys, grpo_core.plots; print(' '.join(sorted(sys.modules)))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    assert not {"torch", "trl", "transformers"} & loaded


def with_held_out(n: int) -> list[dict]:
    """``records(n)`` led by a ``"step": 0`` evaluation row (no reward), evaluated again at n."""
    rows = [{"step": 0, "eval/score": 0.2, "eval/score/sem": 0.05, "eval/score/delta_sem": 0.0,
             "time/eval": 3.0}, *records(n)]
    rows[-1].update({"eval/score": 0.4, "eval/score/sem": 0.05, "eval/score/delta_sem": 0.03})
    return rows


def test_a_step_zero_row_without_reward_is_drawn_everywhere(tmp_path):
    from grpo_core.diagnosis import diagnose

    rows = with_held_out(3)
    assert panels_for(rows)[-1] == (HELD_OUT_PANEL, ["eval/score"], None)  # no /sem line
    plot_metrics(rows)
    fig = plot_run(rows, diagnose(rows))
    held_out = next(ax for ax in fig.axes if ax.get_title().startswith(HELD_OUT_PANEL))
    assert held_out.containers  # an error bar: +-2 standard errors
    assert list(held_out.containers[0].lines[0].get_xdata()) == [0, 3]
    reward = next(ax for ax in fig.axes if ax.get_title() == "reward")
    assert list(reward.lines[0].get_xdata()) == [1, 2, 3]
    side_by_side = compare_runs({"a": rows, "b": records(3)}, keys=["eval/score", "entropy"])
    assert side_by_side.axes[0].collections  # the band of +-2 standard errors
    assert len(side_by_side.legends) == 1  # one legend for the figure, none in the panels
    assert not any(ax.get_legend() for ax in side_by_side.axes)
    plot = LivePlot(every=1, path=tmp_path / "live.png", show=False)
    for row in rows:
        plot(row)
    assert (tmp_path / "live.png").exists() and len(plot.records) == 4


def test_titles_say_what_a_metric_means_and_wrap_between_words():
    assert "token budget" in metric_title("completions/clipped_ratio")
    assert "PPO clip" in metric_title("clip_ratio/region_mean")
    assert metric_title("eval/unit_test_reward").startswith("held-out unit_test_reward")
    assert metric_title("my/metric") == "my/metric"
    for line in metric_title("completions/clipped_ratio", width=20).splitlines():
        assert not line.startswith(("/", "_"))  # no word cut in two


def test_a_comparison_of_many_runs_keeps_every_line_apart():
    many = {f"run {i}": records(3) for i in range(14)}
    fig = compare_runs(many, keys=["entropy"])
    lines = fig.axes[0].lines
    styles = {(line.get_color(), line.get_linestyle()) for line in lines}
    assert len(lines) == 14 and len(styles) == 14  # 10 colours, then dashed


def test_no_panel_is_titled_with_a_bare_metric_name():
    """A learner reads words; the metric's name follows them in brackets."""
    from grpo_core.plots import PANELS, READING_PANELS

    for title, keys, right in [*PANELS, *READING_PANELS]:
        bare = {*keys, *([right] if right else [])} - {"reward", "entropy"}  # words already
        assert title not in bare, title
    assert all(metric_title(key) != key for key in ("grad_norm", "kl", "frac_reward_zero_std"))


def test_seed_changes_show_each_seed_its_mean_and_an_interval_only_from_three_seeds():
    from grpo_core.plots import plot_seed_changes
    from grpo_core.stats import seed_interval

    changes = {"k = 2": [0.2, 0.25, 0.3, 0.22], "k = 8": [0.1, 0.3], "k = 16": [0.15]}
    fig = plot_seed_changes(changes, reference="k = 2", margin=0.05)
    ax = fig.axes[0]
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert [len(line.get_ydata()) for line in dots] == [4, 2, 1]
    assert sorted(dots[0].get_ydata()) == sorted(changes["k = 2"])
    four = seed_interval(changes["k = 2"])
    segments = [tuple(line.get_ydata()) for line in ax.lines if line.get_marker() != "o"]
    assert (pytest.approx(four.low), pytest.approx(four.high)) in segments  # the interval
    assert sum(1 for s in segments if s[0] == s[1] != 0) == 3  # a mean bar per setup
    assert not any(s == (pytest.approx(seed_interval([0.1, 0.3]).low),
                         pytest.approx(seed_interval([0.1, 0.3]).high)) for s in segments)
    assert [t.get_text() for t in ax.texts] == ["2 seeds:\nno interval"]
    band = ax.patches[0]  # a Rectangle in data units along y
    assert (band.get_y(), band.get_y() + band.get_height()) == (
        pytest.approx(four.mean - 0.05), pytest.approx(four.mean + 0.05))
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "k = 2\n(4 seeds)", "k = 8\n(2 seeds)", "k = 16\n(1 seed)"]
    assert ax.get_xlabel() == ""


def test_seed_changes_refuse_an_empty_setup_or_an_unknown_reference():
    from grpo_core.plots import plot_seed_changes

    with pytest.raises(ValueError, match="at least one seed"):
        plot_seed_changes({"a": []})
    with pytest.raises(ValueError, match="reference 'b' is not one of"):
        plot_seed_changes({"a": [0.1]}, reference="b", margin=0.1)


def test_log_ratio_histograms_draw_one_outline_per_plan_on_a_log_scale_with_the_band():
    import math

    from grpo_core.plots import plot_log_ratio_histograms

    fig = plot_log_ratio_histograms({"float32": [0.0, 1e-7, -1e-7], "bfloat16": [0.05, -0.2, 0.3]},
                                    cap=3.0)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    assert len(ax.patches) == 2  # one step outline each
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["float32 (3 tokens)", "bfloat16 (3 tokens)"]
    band = sorted(line.get_xdata()[0] for line in ax.get_lines())
    assert band == pytest.approx([-math.log(3), math.log(3)])
    low, high = ax.patches[1].get_path().get_extents().x0, ax.patches[1].get_path().get_extents().x1
    assert low <= -0.2 and high >= 0.3  # every token inside the bins


def test_log_ratio_histograms_refuse_a_plan_without_tokens():
    from grpo_core.plots import plot_log_ratio_histograms

    with pytest.raises(ValueError, match="at least one token"):
        plot_log_ratio_histograms({"bfloat16": []})
