"""Power over time for every domain, with the session's markers as labelled lines."""

from __future__ import annotations

import re
from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual_plotext import PlotextPlot

from ...model import Snapshot
from ...text import safe_text

#: one plot character per series, so series differ without colour (NO_COLOR, mono SSH);
#: none of them appears in axis numbers, box drawing or the words plotext writes
MARKERS = ("*", "+", "#", "@", "%", "&", "$", "=", "~", "^")
#: a colour per series on top of its character (dropped under NO_COLOR)
COLOURS = ("bright_cyan", "bright_green", "bright_yellow", "bright_magenta", "bright_red",
           "bright_blue", "cyan", "green", "yellow", "magenta")
_SERIES = re.compile("[" + re.escape("".join(MARKERS)) + "]+")
_STYLE = dict(zip(MARKERS, COLOURS))
#: the colour codes plotext writes (ESC[0m, and ESC[38;5;0m for marker lines and labels,
#: which it colours whatever the theme): never text to pass to the terminal
_ANSI = re.compile("\x1b\\[[0-9;]*m")


def series_marker(i: int) -> str:
    """The chart character of the i-th domain (also shown in the domain table as its key)."""
    return MARKERS[i % len(MARKERS)]


def _thin(xs: Sequence[float], ys: Sequence[float | None], n: int):
    """At most ``n`` points (every k-th, keeping the last): plotting 600 points into 60
    columns costs CPU and shows nothing more."""
    step = max(1, len(xs) // max(n, 1))
    idx = list(range(len(xs) - 1, -1, -step))[::-1]
    px = [xs[i] for i in idx if ys[i] is not None]
    py = [ys[i] for i in idx if ys[i] is not None]
    return px, py


#: marker labels are cut to this many characters at most
LABEL_MAX = 12
#: a label cut shorter than this is dropped rather than shown as one or two letters
LABEL_MIN = 3


def marker_labels(markers: Sequence[tuple[float, str]], lo: float, hi: float,
                  columns: int) -> list[tuple[float, str]]:
    """(x, text) for each marker label that fits: a label starts at its marker and ends a
    column before the next marker's, else it is cut (and dropped if under LABEL_MIN
    characters), so labels never run into each other (``marmarepoch 2``)."""
    if not markers or columns <= 0:
        return []
    span = hi - lo if hi > lo else 1.0

    def col(x: float) -> int:
        return int(round((x - lo) / span * (columns - 1)))

    out = []
    for i, (x, label) in enumerate(markers):
        room = LABEL_MAX
        if i + 1 < len(markers):
            room = min(room, col(markers[i + 1][0]) - col(x) - 1)
        text = label[:max(room, 0)]
        if len(text) >= min(LABEL_MIN, len(label)) and text:
            out.append((x, text))
    return out


def colourise(plain: "str | Sequence[str]", base: Style) -> list[Strip]:
    """plotext's monochrome output (its text, or its lines) as strips, each series'
    characters in its colour.

    Cheaper than asking plotext for colour and decoding its ANSI codes into a Text, then
    having Textual split that Text into lines again (together ~2 % of a core at 1 s)."""
    styles = {m: base + Style(color=c) for m, c in _STYLE.items()}
    strips = []
    lines = _ANSI.sub("", plain).splitlines() if isinstance(plain, str) else plain
    for line in lines:
        segments = []
        pos = 0
        for m in _SERIES.finditer(line):
            if m.start() > pos:
                segments.append(Segment(line[pos:m.start()], base))
            segments.append(Segment(m.group(), styles[m.group()[0]]))
            pos = m.end()
        if pos < len(line):
            segments.append(Segment(line[pos:], base))
        strips.append(Strip(segments))
    return strips


class PowerChart(PlotextPlot):
    """Each domain's power (W) against elapsed seconds; markers as vertical lines.

    At most one point per column per domain, drawn with the domain's character: as lines
    while there are fewer points than plot columns (dots would leave gaps: ``* *  * *``
    at 160 columns), as dots once there is one a column or more (connecting lines then
    cost three times the CPU and add nothing).
    """

    DEFAULT_CSS = """
    PowerChart { min-height: 5; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._version = 0
        self._data: tuple[Snapshot, Sequence[float]] | None = None
        self._cache_key: tuple | None = None
        self._cache: list[Strip] = []

    def show(self, snap: Snapshot, times_s: Sequence[float]) -> None:
        """Chart this snapshot. The plot is built when drawn, for the width it has then:
        a frame shown before the first layout (or before a resize) is not thinned and
        labelled for another width."""
        self._data = (snap, times_s)
        self._version += 1
        self.refresh()

    def _build(self, width: int) -> None:
        """Load the shown snapshot into the figure, thinned to ``width`` columns."""
        plt = self.plt
        plt.clear_data()
        plt.xlabel("elapsed s")
        plt.ylabel("W")
        if self._data is None:
            return
        snap, times_s = self._data
        n_points = max(width - 8, 10)  # about the plot area's columns
        if times_s:
            for i, d in enumerate(snap.domains):
                hist = d.history_w[-len(times_s):]
                xs = times_s[-len(hist):] if hist else ()
                px, py = _thin(xs, hist, n_points)
                if px:  # lines while points are sparse (cheap then), dots once dense
                    draw = plt.plot if len(px) < n_points else plt.scatter
                    draw(px, py, marker=series_marker(i))
            lo, hi = times_s[0], times_s[-1]
            plt.xlim(lo, hi if hi > lo else lo + 1)
            top = max((w for d in snap.domains for w in d.history_w[-len(times_s):]
                       if w is not None), default=1.0)
            plt.ylim(0, top * 1.1 if top > 0 else 1.0)
            shown = [(m.elapsed_s, safe_text(m.label)) for m in snap.markers
                     if lo <= m.elapsed_s <= hi]
            for x, _ in shown:
                plt.vertical_line(x)
            for x, label in marker_labels(shown, lo, hi, n_points):
                plt.text(label, x, top * 1.05, alignment="left")

    def _plot_lines(self) -> "list[str] | str":
        """The figure's characters, top line first: plotext's matrix read directly, not
        its canvas (which writes colour codes for every cell, only to be stripped again:
        a fifth of the chart's CPU). Falls back to the canvas if plotext changes."""
        plot = self._plot
        try:
            plot._set_sizes()
            plot._build_matrix()
            rows = plot.monitor.matrix.marker
        except AttributeError:  # not plotext 5.x's figure: its public build
            return plot.build()
        return ["".join(row) for row in reversed(rows)]

    def render_lines(self, crop):
        # one style lookup per render pass, not two per line (each walks the ancestors)
        self._pass_style = self.rich_style
        return super().render_lines(crop)

    def _strips(self, style: Style) -> list[Strip]:
        key = (self._version, self.size, style)
        if key != self._cache_key:
            w, h = self.size
            self._build(w)
            self._plot.plotsize(w, h)
            self._plot._set_size(w, h)  # as PlotextPlot.render does (textual-plotext #5)
            self._plot.theme("clear")
            self._cache = [strip.adjust_cell_length(w, style)
                           for strip in colourise(self._plot_lines(), style)]
            self._cache_key = key
        return self._cache

    def render_line(self, y: int) -> Strip:
        """Line API: the plot is built once per change, not once per line or repaint."""
        style = getattr(self, "_pass_style", None) or self.rich_style
        strips = self._strips(style)
        if y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, style)
