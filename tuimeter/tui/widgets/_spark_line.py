"""A one-line sparkline: one character per tick, newest on the right.

Lighter than ``textual.widgets.Sparkline`` (which blends a colour per cell and folds data
into buckets with fractions): one styled segment per frame. At a 1 s interval with a dozen
rows that difference is most of the UI's CPU budget. Heights are characters, so the shape
reads without colour; a tick without a value (lost) is ``·``.

Each row is scaled to its own range (lowest to highest value shown), so a package moving
between 40 and 48 W shows its variation instead of a nearly solid block (scaled from 0 W
it did); a range narrower than :data:`MIN_SPAN_SHARE` of the row's level (or
:data:`MIN_SPAN_W`) is widened around its middle, so noise on a flat line stays small.
The range is said at the row's right end when the cell has room (:data:`LABEL_FROM`
cells), and in its tooltip at every width.
"""

from __future__ import annotations

from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"
MISSING = "·"
#: the smallest range drawn full height, as a share of the row's largest value
MIN_SPAN_SHARE = 0.02
#: ... and in watts (a row near 0 W)
MIN_SPAN_W = 0.1
#: from this many cells the row's range is written at its right end
LABEL_FROM = 40
#: cells the range takes there (``1.2-2.5 kW`` and a space, right-aligned)
LABEL_CELLS = 12


def spark_range(data: Sequence[float | None]) -> tuple[float, float] | None:
    """(lowest, highest) of the values, W; None when there is none (all lost)."""
    values = [v for v in data if v is not None]
    return (min(values), max(values)) if values else None


def fmt_range(lo: float, hi: float) -> str:
    """A range in the unit of its top, compactly: ``40-48 W``, ``3.2-3.9 W``,
    ``350-900 mW``, ``1.2-2.5 kW``."""
    top = max(abs(lo), abs(hi))
    if top >= 1000:
        return f"{lo / 1000:.1f}-{hi / 1000:.1f} kW"
    if top >= 10:
        return f"{lo:.0f}-{hi:.0f} W"
    if top >= 1:
        return f"{lo:.1f}-{hi:.1f} W"
    return f"{lo * 1000:.0f}-{hi * 1000:.0f} mW"


def spark_text(data: Sequence[float | None], width: int) -> str:
    """The last ``width`` values as bar characters, scaled to their own range (see the
    module docstring)."""
    if width <= 0:
        return ""
    tail = list(data[-width:])
    found = spark_range(tail)
    if found is None:
        return (MISSING * len(tail)).rjust(width)
    lo, hi = found
    if lo == hi == 0:
        return "".join(MISSING if v is None else BARS[0] for v in tail).rjust(width)
    span = max(hi - lo, MIN_SPAN_SHARE * max(abs(lo), abs(hi)), MIN_SPAN_W)
    lo = (lo + hi - span) / 2  # a narrow range sits around its middle
    top = len(BARS) - 1
    chars = []
    for v in tail:
        if v is None:
            chars.append(MISSING)
        else:
            chars.append(BARS[max(0, min(top, int((v - lo) / span * top + 0.5)))])
    return "".join(chars).rjust(width)


class SparkLine(Widget):
    DEFAULT_CSS = """
    SparkLine { height: 1; color: $primary; }
    """

    data: reactive[tuple[float | None, ...]] = reactive(tuple, layout=False)
    """Power values (W) oldest first; None where the domain was lost."""

    def watch_data(self, data: tuple[float | None, ...]) -> None:
        found = spark_range(data[-self.size.width:]) if self.size.width > 0 else None
        tip = None if found is None else f"{fmt_range(*found)} over the ticks shown"
        if tip != self.tooltip:
            self.tooltip = tip

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0:
            return Strip.blank(width, self.rich_style)
        label = ""
        if width >= LABEL_FROM:  # the range of the very values the bars show
            found = spark_range(self.data[-(width - LABEL_CELLS):])
            label = "" if found is None else f" {fmt_range(*found)}".rjust(LABEL_CELLS)
        bars = spark_text(self.data, width - len(label))
        segments = [Segment(bars, self.rich_style)]
        if label:
            segments.append(Segment(label, self.rich_style + Style(dim=True)))
        return Strip(segments, width)
