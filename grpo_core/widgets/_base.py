"""What every widget view shares: the lazy ipywidgets import, a view object whose controls are
attributes, and drawing a matplotlib figure into an ``Output`` widget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grpo_core.plots import DPI


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the interactive widgets need ipywidgets (pip install ipywidgets); the functions "
            "group_summary, clip_curves and kl_curves work without it"
        ) from error
    return ipywidgets


@dataclass
class _View:
    """A widget tree plus its controls; displays as the tree in a notebook."""

    widget: Any = None
    controls: dict[str, Any] = field(default_factory=dict)

    # IPython shows a view the way it shows its widget. ipywidgets 8 widgets have
    # _repr_mimebundle_; ipywidgets 7 widgets (Colab's) have _ipython_display_ instead. The view
    # offers only the hook its widget has: IPython tries _ipython_display_ before any other
    # repr, so a view that always had it would change how ipywidgets 8 output is recorded.
    _DISPLAY_HOOKS = ("_repr_mimebundle_", "_ipython_display_")

    def __getattr__(self, name: str) -> Any:
        if name in _View._DISPLAY_HOOKS:
            return getattr(self.__dict__.get("widget"), name)  # AttributeError if it lacks it
        controls = self.__dict__.get("controls", {})
        if name in controls:
            return controls[name]
        raise AttributeError(name)


def wrapping_row(w: Any, children: list[Any]) -> Any:
    """An ``HBox`` whose children keep their own width and wrap onto the next line when the
    row is too narrow: without this, flexbox squeezes them and one overlaps the next (the
    toggles over the sliders' readouts at 1000 px)."""
    for child in children:
        child.layout.flex = "0 0 auto"  # never shrink below the content: wrap instead
    return w.HBox(children, layout=w.Layout(flex_flow="row wrap", align_items="flex-start",
                                             grid_gap="0.3em 1.5em"))


class CurvesView(_View):
    """A curves widget (clip or KL). ``curves`` holds the latest computed curves and ``figure``
    the latest matplotlib figure; ``output`` is the ``Output`` widget it is drawn in."""

    curves: Any
    figure: Any


def _draw(view: CurvesView, output: Any, plot) -> None:
    import matplotlib.pyplot as plt
    from IPython.display import display

    figure, axis = plt.subplots(figsize=(6.4, 3.4), dpi=DPI)
    plot(axis)
    figure.tight_layout()
    plt.close(figure)  # shown once, in the Output widget, not again at the end of the cell
    view.figure = figure
    with output:
        output.clear_output(wait=True)
        display(figure)
