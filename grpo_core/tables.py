"""Tables a learner reads in a notebook: pandas' HTML in JupyterLab and Colab, and a plain-text
form that fits the output area (100 columns) everywhere else (nbval, a terminal, GitHub).

``print(frame.to_string())`` puts a table with long cells (a diagnosis's evidence, an interval
written out) on lines of 300 characters or more, which the output area wraps into a jumble.
:func:`show_table` keeps pandas' own layout when it fits and otherwise writes one block per
row, each cell on its own line, wrapped between words.
"""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 100  # characters: what JupyterLab's output area shows on a laptop without wrapping


def plain_table(frame: Any, width: int = WIDTH, index: bool = True) -> str:
    """``frame`` (a ``pandas.DataFrame``) as text no line of which is longer than ``width``.

    pandas' ``to_string(index=index)`` when it fits; else one block per row: the row's label
    (without the index: its first cell), then ``column: value`` for each other cell, a long
    value wrapped between words and indented.
    """
    if width < 20:
        raise ValueError(f"width must be at least 20 characters, got {width}")
    text = frame.to_string(index=index)  # never empty: pandas names an empty frame
    if max(map(len, text.splitlines())) <= width:
        return text
    blocks = []
    for label, row in frame.iterrows():
        if not index:
            label, row = f"{row.index[0]}: {row.iloc[0]}", row.iloc[1:]
        lines = textwrap.wrap(str(label), width) or [""]
        for column, value in row.items():  # never empty: the column's name and a colon
            lines += textwrap.wrap(f"{column}: {value}", width, initial_indent="  ",
                                   subsequent_indent="      ", break_on_hyphens=False)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


class Table:
    """What :func:`show_table` returns: rendered by Jupyter's display machinery."""

    def __init__(self, frame: Any, width: int = WIDTH, index: bool = True):
        self.frame, self.width, self.index = frame, width, index

    def _repr_html_(self) -> str:
        return self.frame.to_html(index=self.index)

    def __repr__(self) -> str:
        return plain_table(self.frame, self.width, self.index)


def show_table(frame: Any, width: int = WIDTH, index: bool = True) -> Table:
    """``frame`` to display as the cell's last expression (or with ``display``): an HTML
    table where the front end renders HTML, :func:`plain_table` text elsewhere; ``index``
    False leaves the row labels out (a frame whose first column names its rows)."""
    return Table(frame, width, index)
