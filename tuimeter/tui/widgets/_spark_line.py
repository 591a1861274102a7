"""A one-line sparkline: one character per tick, newest on the right.

Lighter than ``textual.widgets.Sparkline`` (which blends a colour per cell and folds data
into buckets with fractions): one styled segment per frame. At a 1 s interval with a dozen
rows that difference is most of the UI's CPU budget. Heights are characters, so the shape
reads without colour; a tick without a value (lost) is ``·``.
"""

from __future__ import annotations

from typing import Sequence

from rich.segment import Segment
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"
MISSING = "·"


def spark_text(data: Sequence[float | None], width: int) -> str:
    """The last ``width`` values as bar characters, scaled from 0 (or a negative
    minimum) to their maximum."""
    if width <= 0:
        return ""
    tail = list(data[-width:])
    values = [v for v in tail if v is not None]
    if not values:
        return (MISSING * len(tail)).rjust(width)
    lo, hi = min(0.0, min(values)), max(values)  # from 0 W: noise on a flat line stays flat
    span = hi - lo
    top = len(BARS) - 1
    chars = []
    for v in tail:
        if v is None:
            chars.append(MISSING)
        elif span <= 0:
            chars.append(BARS[top // 2] if hi > 0 else BARS[0])
        else:
            chars.append(BARS[min(top, int((v - lo) / span * top + 0.5))])
    return "".join(chars).rjust(width)


class SparkLine(Widget):
    DEFAULT_CSS = """
    SparkLine { height: 1; color: $primary; }
    """

    data: reactive[tuple[float | None, ...]] = reactive(tuple, layout=False)
    """Power values (W) oldest first; None where the domain was lost."""

    def render_line(self, y: int) -> Strip:
        if y != 0:
            return Strip.blank(self.size.width, self.rich_style)
        text = spark_text(self.data, self.size.width)
        return Strip([Segment(text, self.rich_style)], self.size.width)
