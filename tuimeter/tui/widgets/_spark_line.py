"""A one-line sparkline: one character per tick, newest on the right, drawn as text into
the domain table's rows (:func:`spark_cell`).

Lighter than ``textual.widgets.Sparkline`` (which blends a colour per cell and folds data
into buckets with fractions): one styled segment per row, and no widget of its own (a
widget per row was most of the UI's CPU at a 1 s interval). Heights are characters, so the shape
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


def spark_cell(data: Sequence[float | None], width: int) -> tuple[str, str]:
    """A sparkline cell of ``width`` characters as (bars, range label): the label (the
    range of the very values the bars show, right-aligned in :data:`LABEL_CELLS`) only from
    :data:`LABEL_FROM` cells and when a value is known; the bars take the rest."""
    label = ""
    if width >= LABEL_FROM:
        found = spark_range(data[-(width - LABEL_CELLS):])
        label = "" if found is None else f" {fmt_range(*found)}".rjust(LABEL_CELLS)
    return spark_text(data, width - len(label)), label


def spark_tip(data: Sequence[float | None], width: int) -> str | None:
    """The tooltip over a sparkline cell of ``width``: the range of the ticks its bars show
    (at every width: a narrow cell has no label); None when none is known."""
    bars = width - len(spark_cell(data, width)[1])
    found = spark_range(data[-bars:]) if bars > 0 else None
    return None if found is None else f"{fmt_range(*found)} over the ticks shown"
