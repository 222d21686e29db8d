"""The widgets of notebooks 03 and 04, driven without a browser: set a control, read the output."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from grpo_core.advantages import group_advantages
from grpo_core.loss import clipped_surrogate, kl_k3
from grpo_core.widgets import (
    NO_SIGNAL_MESSAGE,
    clip_curves,
    group_summary,
    group_summary_html,
    kl_curves,
    parse_rewards,
    preset_rewards,
)

# --- pure functions ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["too hard", "too easy"])
def test_lecture_presets_without_variation_give_no_signal(name):
    summary = group_summary(preset_rewards(name))
    assert summary.advantages == (0.0, 0.0, 0.0, 0.0)
    assert summary.no_signal
    assert summary.message.startswith(NO_SIGNAL_MESSAGE)
    assert summary.std == 0.0


def test_usable_preset_matches_group_advantages():
    rewards = preset_rewards("usable")
    assert rewards == [0.0, 1.0, 1.0, 2.0]
    summary = group_summary(rewards)
    expected = group_advantages(torch.tensor(rewards, dtype=torch.float64), 4)
    assert summary.advantages == pytest.approx(expected.tolist(), abs=1e-12)
    assert not summary.no_signal
    assert summary.mean == 1.0
    assert summary.std == pytest.approx(math.sqrt(2 / 3))
    assert summary.message == ("signal: 1 attempt beats the mean and gets pushed up, 1 falls "
                               "short and gets pushed down, 2 sit on the mean.")
    assert "2 attempts beat the mean and get pushed up, 2 fall short" in group_summary(
        [0, 0, 2, 2]).message


@pytest.mark.parametrize("k", [2, 3, 4, 8, 16])
def test_presets_for_any_group_size(k):
    assert preset_rewards("too hard", k) == [0.0] * k
    assert preset_rewards("too easy", k) == [2.0] * k
    usable = preset_rewards("usable", k)
    assert len(usable) == k and len(set(usable)) > 1


def test_population_convention_scales_by_sqrt_k_minus_1_over_k():
    sample = group_summary([0, 1, 1, 2], std_convention="sample")
    population = group_summary([0, 1, 1, 2], std_convention="population")
    factor = math.sqrt(3 / 4)
    for a_n1, a_n in zip(sample.advantages, population.advantages, strict=True):
        assert a_n1 == pytest.approx(a_n * factor, rel=1e-3)  # eps makes it approximate
    assert "0.866" in sample.what_changes


def test_scale_none_and_batch_follow_group_advantages():
    assert group_summary([0, 1, 1, 2], scale="none").advantages == (-1.0, 0.0, 0.0, 1.0)
    batch = group_summary([0, 1, 1, 2], scale="batch", other_groups=[[0, 0, 0, 3]])
    expected = group_advantages(
        torch.tensor([0, 1, 1, 2, 0, 0, 0, 3.0], dtype=torch.float64), 4, scale="batch"
    )[:4]
    assert batch.advantages == pytest.approx(expected.tolist(), abs=1e-12)
    assert batch.batch == (0, 1, 1, 2, 0, 0, 0, 3)
    assert group_summary([1, 1, 1, 1], scale="batch", other_groups=[[0, 0, 0, 3]]).no_signal


def test_group_summary_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2 rewards to compare, got 1"):
        group_summary([1.0])
    with pytest.raises(ValueError, match="std_convention must be one of .*got 'median'"):
        group_summary([0, 1], std_convention="median")
    with pytest.raises(ValueError, match="every group in the batch must have k = 2 rewards"):
        group_summary([0, 1], scale="batch", other_groups=[[0, 1, 2]])


def test_parse_rewards():
    assert parse_rewards("0, 1,1  2") == [0.0, 1.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="numbers separated by commas.*got '0, one'"):
        parse_rewards("0, one")


def test_html_shows_every_advantage_and_the_verdict():
    page = group_summary_html(group_summary([2, 2, 2, 2]))
    assert page.count('class="grpo-adv"') == 4
    assert page.count(">0.00</td>") == 4 and "+0.00" not in page and "-0.00" not in page
    assert "grpo-no-signal" in page and NO_SIGNAL_MESSAGE in page
    page = group_summary_html(group_summary([0, 1, 1, 2]))
    assert "grpo-no-signal" not in page and "-1.22" in page and "+1.22" in page
    assert "<svg" in page


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_clip_curves_match_clipped_surrogate_and_mark_zero_gradient(sign):
    curves = clip_curves(0.2, None, (0.5, 1.5), sign, points=101)
    ratio = torch.tensor(curves.ratio, dtype=torch.float64)
    loss = clipped_surrogate(
        ratio.log()[None],
        torch.zeros(1, 101, dtype=torch.float64),
        torch.tensor([sign], dtype=torch.float64),
    )[0]
    assert curves.clipped == pytest.approx((-loss).tolist(), abs=1e-12)
    assert curves.unclipped == pytest.approx((ratio * sign).tolist(), abs=1e-12)
    for r, g, zero in zip(curves.ratio, curves.gradient, curves.zero_gradient, strict=True):
        outside = r > 1.2 + 1e-9 if sign > 0 else r < 0.8 - 1e-9
        assert zero == outside, r
        assert g == (0.0 if outside else sign)
    ((start, end),) = curves.zero_regions
    assert (start > 1.2 and end == 1.5) if sign > 0 else (start == 0.5 and end < 0.8)


def test_clip_curves_asymmetric_band():
    curves = clip_curves(0.2, 0.28, (0.5, 1.5), 1.0, points=101)
    assert curves.band == pytest.approx((0.8, 1.28))
    assert curves.zero_regions[0][0] > 1.28
    with pytest.raises(ValueError, match="advantage must be non-zero"):
        clip_curves(advantage=0.0)
    with pytest.raises(ValueError, match=r"ratio_range must satisfy 0 < low < high, got \(1.5, 0.5\)"):
        clip_curves(ratio_range=(1.5, 0.5))


def test_kl_curves_match_kl_k3():
    curves = kl_curves(0.1, (-2.0, 2.0), points=41)
    x = torch.tensor(curves.log_ratio, dtype=torch.float64)
    k3 = kl_k3(x[None], torch.zeros(1, 41, dtype=torch.float64))[0]
    assert curves.k3 == pytest.approx(k3.tolist(), abs=1e-12)
    assert curves.k1 == pytest.approx(x.tolist())
    assert min(curves.k3) >= -1e-12 and min(curves.k1) < 0.0  # k3 >= 0 up to rounding
    assert curves.penalty_k3 == pytest.approx([0.1 * v for v in k3.tolist()])
    assert curves.gradient_k3 == pytest.approx((0.1 * (1 - torch.exp(-x))).tolist(), abs=1e-12)
    assert curves.k3[20] == pytest.approx(0.0, abs=1e-12)  # log-ratio 0: policy = reference
    assert "no reference model" in kl_curves(0.0).message


def test_pure_functions_import_without_ipywidgets():
    code = (
        "import sys; sys.modules['ipywidgets'] = None\n"
        "from grpo_core.widgets import group_summary, group_variation_widget\n"
        "assert group_summary([2, 2]).no_signal\n"
        "try:\n    group_variation_widget()\nexcept ImportError as e:\n    print('ok', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.startswith("ok") and "ipywidgets" in result.stdout


# --- views, driven from Python ----------------------------------------------------------------

pytest.importorskip("ipywidgets")


def test_group_widget_presets_sliders_and_text():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget()
    assert [s.value for s in view.sliders] == [0.0, 1.0, 1.0, 2.0]
    assert view.preset.value == "usable" and not view.summary.no_signal
    view.preset.value = "too easy"
    assert [s.value for s in view.sliders] == [2.0] * 4
    assert view.summary.advantages == (0.0,) * 4
    assert "grpo-no-signal" in view.output.value and NO_SIGNAL_MESSAGE in view.output.value
    assert view.text.value == "2, 2, 2, 2"
    view.sliders[0].value = 0.5  # moving a slider leaves the preset
    assert view.preset.value == "custom" and not view.summary.no_signal
    assert view.summary.advantages[0] < 0 < view.summary.advantages[1]
    view.text.value = "0, 0, 0, 0"  # typing a group moves the sliders
    assert [s.value for s in view.sliders] == [0.0] * 4
    assert view.preset.value == "too hard" and view.summary.no_signal
    view.text.value = "1, 2"  # wrong length: an error, nothing else changes
    assert "k = 4" in view.error.value and [s.value for s in view.sliders] == [0.0] * 4
    view.preset.value = "usable"
    assert view.error.value == ""


def test_group_widget_clears_a_typed_error_once_a_slider_moves():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget()
    view.text.value = "0, 9, 1, 1"  # out of range: an error, the sliders stay
    assert "[0, 3]" in view.error.value and [s.value for s in view.sliders] == [0.0, 1.0, 1.0, 2.0]
    view.sliders[1].value = 1.5  # now the sliders hold valid values: the error is stale
    assert view.error.value == "" and view.text.value == "0, 1.5, 1, 2"


def test_group_widget_toggles_change_the_advantages():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget()
    group = view.summary.advantages
    view.std_convention.value = "population"
    assert view.summary.advantages[3] > group[3]
    view.scale.value = "none"
    assert view.summary.advantages == (-1.0, 0.0, 0.0, 1.0)
    assert "Dr. GRPO" in view.output.value
    view.scale.value = "batch"
    assert view.summary.batch[4:] == (0.0, 0.0, 0.0, 3.0)


def test_group_widget_other_group_sizes():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget(k=8)
    assert len(view.sliders) == 8
    view.preset.value = "too hard"
    assert view.summary.advantages == (0.0,) * 8


def test_clip_and_kl_widgets_recompute_on_change():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from grpo_core.widgets import clip_widget, kl_widget

    clip = clip_widget()
    assert clip.curves.zero_regions[0][0] > 1.2
    clip.sign.value = -1.0
    assert clip.curves.zero_regions[0][1] < 0.8 and "ratio &lt; 0.80" in clip.text.value
    clip.same.value = False
    clip.epsilon_high.value = 0.3
    assert clip.curves.band == pytest.approx((0.8, 1.3))
    clip.ratio_range.value = (0.9, 1.1)
    assert clip.curves.zero_regions == [] and clip.figure is not None

    kl = kl_widget(beta=0.04)
    assert max(kl.curves.penalty_k3) > 0
    kl.beta.value = 0.0
    assert max(kl.curves.penalty_k3) == 0.0 and "no reference model" in kl.text.value


def test_kl_gradient_errors_follow_each_estimators_bias_and_variance():
    from grpo_core.widgets import kl_gradient_errors
    from grpo_core.widgets.kl_gradient import SAMPLE_COUNTS

    errors = kl_gradient_errors(distance=2.0, samples=16)
    assert errors.relative_bias["k1"] == pytest.approx(1.0)
    assert errors.relative_bias["k2"] < 1e-9 and errors.relative_bias["ratio_k3"] < 1e-9
    assert errors.relative_bias["k3"] > 0.05
    four = SAMPLE_COUNTS.index(4)
    for name in ("k2", "ratio_k3"):  # unbiased: the error halves when the samples quadruple
        assert errors.curves[name][four + 2] == pytest.approx(errors.curves[name][four] / 2)
    assert errors.curves["k2"] == pytest.approx(errors.curves["ratio_k3"])
    # k3's error falls with more samples but never below its bias, nor below ratio·k3's
    k3 = errors.curves["k3"]
    assert all(a > b for a, b in zip(k3, k3[1:], strict=False))
    assert all(e > errors.relative_bias["k3"] for e in k3)
    assert all(a > b for a, b in zip(k3, errors.curves["ratio_k3"], strict=True))
    assert errors.relative_error["k2"] == pytest.approx(errors.curves["k2"][SAMPLE_COUNTS.index(16)])
    assert f"{errors.relative_bias['k3']:.0%} off" in errors.message
    assert abs(errors.value_bias["k3"]) < 1e-12 and errors.value_bias["k2"] < 0
    farther = kl_gradient_errors(distance=3.0, samples=16)
    assert farther.kl > errors.kl and farther.relative_bias["k3"] > errors.relative_bias["k3"]
    with pytest.raises(ValueError, match="distance"):
        kl_gradient_errors(distance=0.0)
    with pytest.raises(ValueError, match="samples"):
        kl_gradient_errors(samples=0)


def test_kl_gradient_widget_recomputes_on_change():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from grpo_core.widgets import kl_gradient_widget

    view = kl_gradient_widget(distance=1.0, samples=16)
    assert "16 tokens" in view.table.value and view.figure is not None
    before = view.curves.relative_error["ratio_k3"]
    view.samples.value = 64
    assert "64 tokens" in view.table.value
    assert view.curves.relative_error["ratio_k3"] == pytest.approx(before / 2)
    view.distance.value = 3.0
    assert view.curves.kl > 0 and "ratio·k3" in view.table.value
    with pytest.raises(ValueError, match="samples must be one of"):
        kl_gradient_widget(samples=10)


def test_clip_widget_tied_epsilon_high_follows_epsilon_and_stays_when_untied():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from grpo_core.widgets import clip_widget

    clip = clip_widget()
    assert clip.same.value and clip.epsilon_high.disabled
    clip.epsilon.value = 0.3  # tied: the greyed slider reads the ε in use
    assert clip.epsilon_high.value == 0.3 and clip.curves.band == pytest.approx((0.7, 1.3))
    clip.same.value = False  # unticking starts from that ε, the band does not jump back
    assert not clip.epsilon_high.disabled and clip.curves.band == pytest.approx((0.7, 1.3))
    clip.epsilon.value = 0.1  # untied: ε_high stays where it was
    assert clip.epsilon_high.value == 0.3 and clip.curves.band == pytest.approx((0.9, 1.3))


def test_widget_figures_typeset_their_maths():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from grpo_core.widgets import clip_widget, kl_widget

    for view in (clip_widget(), kl_widget()):
        (axis,) = view.figure.axes
        labels = [t.get_text() for t in axis.get_legend().get_texts()]
        formulas = [label for label in labels if label != "zero gradient"]
        assert formulas and all(label.count("$") == 2 for label in formulas), labels
        assert "$" in axis.get_xlabel()


def test_widget_rows_wrap_instead_of_squeezing():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget()
    rows = view.widget.children[:2]
    for row in rows:
        assert row.layout.flex_flow == "row wrap"
        assert all(child.layout.flex == "0 0 auto" for child in row.children)


# IPython's own display path, in a child process (the shell is a process-wide singleton): each
# view must come out as its widget's view under the installed ipywidgets, 8 (_repr_mimebundle_)
# or 7 (Colab's: _ipython_display_, which publishes the bundle itself).
SHOW_EVERY_VIEW = """
import json, matplotlib
matplotlib.use("Agg")
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from grpo_core.widgets import clip_widget, group_variation_widget, kl_widget, run_explorer

shell = InteractiveShell.instance()
shown = {}
for make in (group_variation_widget, clip_widget, kl_widget, run_explorer):
    view = make()
    with capture_output() as captured:
        data, _ = shell.display_formatter.format(view)  # what a cell ending in `view` shows
    bundles = [data] if data else [output.data for output in captured.outputs]
    views = [b.get("application/vnd.jupyter.widget-view+json", {}).get("model_id")
             for b in bundles]
    shown[make.__name__] = {"views": views, "widget": view.widget.model_id}
print(json.dumps(shown))
"""


def test_ipython_shows_every_view_as_its_widget(tmp_path):
    import json
    import os

    env = {**os.environ, "IPYTHONDIR": str(tmp_path), "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, "-c", SHOW_EVERY_VIEW], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(shown) == {"group_variation_widget", "clip_widget", "kl_widget", "run_explorer"}
    for name, seen in shown.items():
        assert seen["views"] == [seen["widget"]], name  # once, as the widget itself
