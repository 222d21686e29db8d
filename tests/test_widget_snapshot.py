"""Static pictures of widgets from their stored state (tools/widget_snapshot.py): what a committed
notebook shows where no kernel runs the widgets."""

from __future__ import annotations

import base64
import copy
import re

import nbformat
import pytest

from tools.widget_snapshot import (
    SNAPSHOT_CLASS,
    WIDGET_STATE,
    WIDGET_VIEW,
    add_snapshots,
    missing_snapshots,
    render_model,
)

ipywidgets = pytest.importorskip("ipywidgets")


def notebook_showing(widget) -> nbformat.NotebookNode:
    """A one-cell executed notebook that displays ``widget``, with every live widget's state
    stored in its metadata the way nbclient stores it."""
    state = ipywidgets.Widget.get_manager_state(drop_defaults=False)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("widget", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/plain": repr(widget),
        WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}})]
    notebook.cells = [cell]
    notebook.metadata["widgets"] = {WIDGET_STATE: copy.deepcopy(state)}
    return notebook


def test_a_finished_progress_bar_shows_its_final_state_not_its_first_repr():
    bar = ipywidgets.FloatProgress(value=30, max=30, bar_style="success")
    row = ipywidgets.HBox([ipywidgets.HTML("GRPO: 100%"), bar, ipywidgets.HTML("30/30")])
    notebook = notebook_showing(row)
    (output,) = notebook.cells[0].outputs
    assert missing_snapshots(notebook) == [f"{output.data['text/plain'][:40]!r}: only a "
                                           "text/plain fallback beside the widget view"]
    assert add_snapshots(notebook) == 1
    picture = output.data["text/html"]
    assert SNAPSHOT_CLASS in picture and "GRPO: 100%" in picture and "30/30" in picture
    assert "width:100.0%" in picture and "#4caf50" in picture  # a full, green bar
    assert missing_snapshots(notebook) == []
    half = ipywidgets.FloatProgress(value=3, max=12)
    state = ipywidgets.Widget.get_manager_state(drop_defaults=False)["state"]
    assert "width:25.0%" in render_model(half.model_id, state)


def test_the_group_widget_snapshot_is_its_summary_with_the_bars():
    from grpo_core.widgets import group_variation_widget

    view = group_variation_widget()
    view.preset.value = "too easy"
    notebook = notebook_showing(view.widget)
    add_snapshots(notebook)
    picture = notebook.cells[0].outputs[0].data["text/html"]
    assert picture.count('class="grpo-adv"') == 4 and "grpo-no-signal" in picture
    assert "<svg" not in picture  # inline SVG: dropped by JupyterLab's sanitizer
    (chart,) = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', picture)
    svg = base64.b64decode(chart).decode()  # the bar chart, as an image
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and "<rect" in svg
    assert "too easy" in picture and "2, 2, 2, 2" in picture  # the controls' state
    assert "VBox(" not in picture


def test_controls_show_their_values_and_greyed_ones_look_greyed():
    slider = ipywidgets.FloatSlider(value=0.3, description="ε_high", readout_format=".2f",
                                    disabled=True)
    toggles = ipywidgets.ToggleButtons(options=["group", "batch"], value="batch",
                                       description="scale")
    box = ipywidgets.VBox([slider, toggles, ipywidgets.Checkbox(value=True, description="tied")])
    state = ipywidgets.Widget.get_manager_state(drop_defaults=False)["state"]
    picture = render_model(box.model_id, state)
    assert "ε_high" in picture and "<b>0.30</b>" in picture and "opacity:.55" in picture
    assert "font-weight:bold\">batch<" in picture and "☑ tied" in picture


def test_a_widget_without_stored_state_is_reported():
    notebook = notebook_showing(ipywidgets.HTML("x"))
    notebook.metadata["widgets"] = {}
    (problem, _) = missing_snapshots(notebook)
    assert "has no stored state" in problem
    with pytest.raises(ValueError, match="has no stored state"):
        add_snapshots(notebook)
