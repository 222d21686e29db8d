"""Static pictures of the widgets in an executed notebook, drawn from its stored widget state.

A committed notebook stores every widget's last state in its metadata
(``application/vnd.jupyter.widget-state+json``), but that state alone renders nowhere a kernel
is not running the widgets: JupyterLab (once a kernel starts), nbviewer and GitHub fall back to
the output's ``text/plain``, which for a widget is its Python repr (``VBox(children=...``) and
for a tqdm bar the text it had when it was first shown (``0/30``). :func:`add_snapshots` puts a
``text/html`` picture of each widget's *final* state beside its view, so those places show the
group summary's bars, the clip curves' figure or a finished progress bar instead.

Only the standard library: this runs in the build step (``tools/notebooks.py build``) and in the
tests, with no kernel and no ipywidgets.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Mapping
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SNAPSHOT_CLASS = "grpo-widget-snapshot"
MODEL_PREFIX = "IPY_MODEL_"

State = Mapping[str, Mapping[str, Any]]  # model id -> {"model_name": ..., "state": {...}}
NOTE = ("<div style=\"color:#777;font-size:85%;margin-top:.3em\">A picture of the widget as it was "
        "left when the notebook was built; run the cell to move it.</div>")


def stored_state(notebook: Mapping[str, Any]) -> State:
    """The notebook's stored widget models, ``{model id: {"model_name", "state"}}`` ({} if none)."""
    widgets = notebook.get("metadata", {}).get("widgets", {})
    return widgets.get(WIDGET_STATE, {}).get("state", {})


def _model_id(reference: Any) -> str:
    """``"IPY_MODEL_abc"`` -> ``"abc"`` (children and other references between models)."""
    text = str(reference)
    return text[len(MODEL_PREFIX):] if text.startswith(MODEL_PREFIX) else text


def _label(state: Mapping[str, Any]) -> str:
    """A control's description, escaped, as a label in front of its value ('' without one)."""
    description = state.get("description") or ""
    if not description:
        return ""
    return f'<span style="min-width:6em;display:inline-block">{html.escape(description)}</span> '


def _format(value: Any, readout_format: str | None) -> str:
    """A slider's readout as the widget shows it (``readout_format``, e.g. ``.2f``)."""
    if isinstance(value, (int, float)) and readout_format:
        try:
            return format(value, readout_format.lstrip("~"))
        except ValueError:
            pass
    return str(value)


def _greyed(state: Mapping[str, Any], body: str) -> str:
    style = "display:inline-block;margin:.15em .6em .15em 0"
    if state.get("disabled"):
        style += ";opacity:.55"
    return f'<div style="{style}">{body}</div>'


def _box(model_state: Mapping[str, Any], state: State, direction: str) -> str:
    """A row (``HBox``) as inline blocks that wrap at narrow widths, a column (``VBox``) as
    blocks. No flexbox: JupyterLab's sanitizer drops ``flex-flow``, and a column of flex
    items would then lie in one row."""
    children = [render_model(_model_id(child), state) for child in model_state.get("children", [])]
    if direction == "column":
        return "<div>" + "".join(f"<div>{child}</div>" for child in children) + "</div>"
    return "<div>" + "".join(
        f'<div style="display:inline-block;vertical-align:top;margin-right:1em">{child}</div>'
        for child in children) + "</div>"


def _progress(model_state: Mapping[str, Any], _state: State) -> str:
    low, high = float(model_state.get("min", 0)), float(model_state.get("max", 100))
    value = float(model_state.get("value", low))
    share = 0.0 if high <= low else min(max((value - low) / (high - low), 0.0), 1.0)
    colour = {"success": "#4caf50", "danger": "#e53935", "warning": "#fb8c00"}.get(
        model_state.get("bar_style") or "", "#2196f3")
    bar = (f'<span style="display:inline-block;width:12em;height:.9em;background:#e0e0e0;'
           f'vertical-align:middle"><span style="display:block;height:100%;'
           f'width:{share * 100:.1f}%;background:{colour}"></span></span>')
    return _greyed(model_state, _label(model_state) + bar)


def _slider(model_state: Mapping[str, Any], _state: State) -> str:
    value = model_state.get("value")
    readout_format = model_state.get("readout_format")
    if isinstance(value, (list, tuple)):
        readout = " – ".join(_format(v, readout_format) for v in value)
    else:
        readout = _format(value, readout_format)
    return _greyed(model_state, f"{_label(model_state)}<b>{html.escape(readout)}</b>")


def _selection(model_state: Mapping[str, Any], _state: State) -> str:
    labels = list(model_state.get("_options_labels", []))
    index = model_state.get("index")
    indices = index if isinstance(index, list) else [index]
    chosen = [labels[i] for i in indices if isinstance(i, int) and 0 <= i < len(labels)]
    options = " ".join(
        f'<span style="padding:0 .4em;border:1px solid #bbb;'
        f'{"background:#e3e3e3;font-weight:bold" if label in chosen else "color:#666"}">'
        f"{html.escape(label)}</span>"
        for label in labels
    ) if model_state.get("_model_name") == "ToggleButtonsModel" else (
        f"<b>{html.escape(', '.join(chosen))}</b>")
    return _greyed(model_state, _label(model_state) + options)


def _text(model_state: Mapping[str, Any], _state: State) -> str:
    value = html.escape(str(model_state.get("value", "")))
    return _greyed(model_state, f'{_label(model_state)}<code style="border:1px solid #bbb;'
                                f'padding:0 .3em">{value}</code>')


def _checkbox(model_state: Mapping[str, Any], _state: State) -> str:
    mark = "☑" if model_state.get("value") else "☐"
    return _greyed(model_state, f"{mark} {html.escape(model_state.get('description') or '')}")


SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'


def svg_as_image(markup: str) -> str:
    """Every inline ``<svg>`` in ``markup`` as an ``<img>`` holding it as a data URI.

    JupyterLab sanitizes the HTML of a notebook it does not trust (any notebook opened from
    disk) and drops inline SVG; an image survives, and an SVG shown as an image cannot run
    anything, so the group widget's bars still show."""
    def as_image(match: re.Match) -> str:
        svg = match.group(0)
        if SVG_NAMESPACE not in svg:  # a standalone SVG document needs its namespace
            svg = svg.replace("<svg", f"<svg {SVG_NAMESPACE}", 1)
        data = base64.b64encode(svg.encode()).decode()
        return f'<img alt="chart" style="display:block" src="data:image/svg+xml;base64,{data}"/>'

    return SVG.sub(as_image, markup)


def _html(model_state: Mapping[str, Any], _state: State) -> str:
    return _greyed(model_state,
                   _label(model_state) + svg_as_image(str(model_state.get("value", ""))))


def _plain(model_state: Mapping[str, Any], _state: State) -> str:
    return _greyed(model_state,
                   _label(model_state) + html.escape(str(model_state.get("value", ""))))


def _button(model_state: Mapping[str, Any], _state: State) -> str:
    return _greyed(model_state, f'<span style="padding:0 .6em;border:1px solid #999">'
                                f"{html.escape(model_state.get('description') or '')}</span>")


def output_html(output: Mapping[str, Any]) -> str:
    """One notebook output (an ``Output`` widget's, or a cell's) as HTML: an image, HTML, text."""
    if output.get("output_type") == "stream":
        return f'<pre style="margin:0">{html.escape(_joined(output.get("text", "")))}</pre>'
    if output.get("output_type") == "error":
        return f'<pre style="margin:0;color:#b00020">{html.escape(output.get("ename", ""))}</pre>'
    data = output.get("data", {})
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            return (f'<img style="max-width:100%" alt="figure" '
                    f'src="data:{mime};base64,{_joined(data[mime]).strip()}"/>')
    if "text/html" in data:
        return svg_as_image(_joined(data["text/html"]))
    if "text/plain" in data:
        return f'<pre style="margin:0">{html.escape(_joined(data["text/plain"]))}</pre>'
    return ""


def _joined(text: str | list[str]) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def _output(model_state: Mapping[str, Any], _state: State) -> str:
    return "".join(output_html(o) for o in model_state.get("outputs", []))


RENDERERS: dict[str, Callable[[Mapping[str, Any], State], str]] = {
    "HBoxModel": lambda s, state: _box(s, state, "row"),
    "VBoxModel": lambda s, state: _box(s, state, "column"),
    "BoxModel": lambda s, state: _box(s, state, "row"),
    "GridBoxModel": lambda s, state: _box(s, state, "row"),
    "HTMLModel": _html,
    "HTMLMathModel": _html,
    "LabelModel": _plain,
    "FloatProgressModel": _progress,
    "IntProgressModel": _progress,
    "FloatSliderModel": _slider,
    "IntSliderModel": _slider,
    "FloatLogSliderModel": _slider,
    "FloatRangeSliderModel": _slider,
    "IntRangeSliderModel": _slider,
    "BoundedFloatTextModel": _text,
    "BoundedIntTextModel": _text,
    "FloatTextModel": _text,
    "IntTextModel": _text,
    "TextModel": _text,
    "TextareaModel": _text,
    "CheckboxModel": _checkbox,
    "ToggleButtonModel": _checkbox,
    "DropdownModel": _selection,
    "ToggleButtonsModel": _selection,
    "RadioButtonsModel": _selection,
    "SelectModel": _selection,
    "SelectMultipleModel": _selection,
    "ButtonModel": _button,
    "OutputModel": _output,
}


def render_model(model_id: str, state: State) -> str:
    """The HTML picture of one stored widget model and everything inside it.

    Raises:
        KeyError: the model is not in the stored state (the notebook was saved without it).
    """
    model = state[model_id]
    model_state = model.get("state", {})
    if model_state.get("layout") and _hidden(model_state["layout"], state):
        return ""
    renderer = RENDERERS.get(model.get("model_name", ""))
    if renderer is None:  # a widget we have no picture for: say what it is, not its repr
        return f"<div><i>[{html.escape(model.get('model_name', 'widget'))}]</i></div>"
    return renderer(model_state, state)


def _hidden(layout_reference: Any, state: State) -> bool:
    """True when the widget's layout hides it (``display: none`` or ``visibility: hidden``)."""
    layout = state.get(_model_id(layout_reference), {}).get("state", {})
    return layout.get("display") == "none" or layout.get("visibility") == "hidden"


def snapshot_html(model_id: str, state: State) -> str:
    """The ``text/html`` snapshot stored beside a widget view: the picture and a one-line note."""
    return f'<div class="{SNAPSHOT_CLASS}">{render_model(model_id, state)}{NOTE}</div>'


def widget_outputs(notebook: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every cell output of ``notebook`` that displays a widget (has a widget view)."""
    return [output for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"
            for output in cell.get("outputs", []) if WIDGET_VIEW in output.get("data", {})]


def add_snapshots(notebook: dict[str, Any]) -> int:
    """Put a ``text/html`` snapshot, drawn from the stored state, beside every widget view in
    ``notebook`` (in place; an existing snapshot is redrawn). Returns how many were written.

    Raises:
        ValueError: a widget output's model is missing from the stored state (the notebook was
            executed without storing widget state: nbclient's ``store_widget_state``).
    """
    state = stored_state(notebook)
    written = 0
    for output in widget_outputs(notebook):
        model_id = output["data"][WIDGET_VIEW]["model_id"]
        if model_id not in state:
            raise ValueError(f"widget model {model_id} has no stored state; execute the notebook "
                             "with widget state stored")
        output["data"]["text/html"] = snapshot_html(model_id, state)
        written += 1
    return written


def missing_snapshots(notebook: Mapping[str, Any]) -> list[str]:
    """Why each widget output of ``notebook`` would render as its repr: the widget's stored
    state is missing, or the output has no static picture. [] when every one has both."""
    state = stored_state(notebook)
    problems = []
    for output in widget_outputs(notebook):
        data = output["data"]
        model_id = data[WIDGET_VIEW].get("model_id", "")
        plain = _joined(data.get("text/plain", ""))[:40]
        if model_id not in state:
            problems.append(f"{plain!r}: widget model {model_id} has no stored state")
        if not any(mime in data for mime in ("text/html", "image/png", "image/svg+xml")):
            problems.append(f"{plain!r}: only a text/plain fallback beside the widget view")
    return problems

