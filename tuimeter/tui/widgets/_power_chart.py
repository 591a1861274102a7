"""Power over a scrolling time window: the machine total and one series per device, the
session's markers as labelled lines, a legend and the window in the chart's first line.

What is drawn (:func:`chart_series`): the total, and each domain that adds into it
(packages, DRAM, each GPU: the devices) when there are at least two of them (one device
is the total). The parts (core, uncore: inside their package) and the wholes (psys) are
drawn only when asked (``v``). A chart narrower than :data:`SERIES_MIN_WIDTH` (80x24)
draws the total alone, unless asked for every series.

How (:class:`PowerChart`): braille lines, each series in its colour; under ``NO_COLOR``
(no colour to tell series apart) each series is drawn with its own ASCII character, the
one left of its name in the domain table (``@`` the total). The x axis is the last
``window_s`` seconds (``[`` shorter, ``]`` longer, :data:`WINDOWS_S`), newest at the right;
while the session is younger than the window, the session (:func:`shown_span`).

The figure is built when drawn, for the size it has then (a frame built for another
width was once the snapshot tests' flake), and kept until the data, the size, the window,
the series or the style change: a repaint without new data costs nothing. plotext draws
only the frame (axes, ticks, marker lines; the lines are braille drawn over it), and that
frame is kept too while its axes stay: a new snapshot under the same axis limits and
markers reuses it (plotext's build was half of the chart's CPU).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from itertools import groupby
from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual_plotext import PlotextPlot

from ...model import Snapshot
from ...text import safe_text
from ..device_groups import CHART_MIN_LINES, DeviceGroup, group_sample
from ._kept_strips import StyledOnce, refresh_changed_lines

#: one ASCII character per domain (by its place in the snapshot), so series differ without
#: colour (NO_COLOR, mono SSH); shown left of the domain's name in the table
#: (20 of them: an 8-GPU machine's 12 domains and its group each have their own)
MARKERS = ("*", "+", "#", "%", "&", "$", "=", "~", "^", "x", "o", "!", "?", "<", ">", ":",
           ";", "z", "w", "s")
#: the machine total's character
TOTAL_MARKER = "@"
#: a colour per domain (the total is drawn in the text colour, bold: readable on every theme)
COLOURS = ("bright_cyan", "bright_green", "bright_yellow", "bright_magenta", "bright_red",
           "bright_blue", "cyan", "green", "yellow", "magenta", "orange1", "purple",
           "spring_green2", "deep_pink2", "gold1", "turquoise2", "dark_orange",
           "medium_purple1", "chartreuse2", "hot_pink")
#: the chart's time windows, seconds, ``[`` and ``]`` step through
WINDOWS_S = (30, 60, 120, 300, 600, 1800, 3600)
#: the window a chart starts with: the last 5 minutes
DEFAULT_WINDOW_S = 300
#: x-axis tick spacing per window, seconds
TICK_S = {10: 2, 20: 5, 30: 10, 45: 15, 60: 15, 90: 30, 120: 30, 180: 60, 240: 60, 300: 60,
          480: 120, 600: 120, 900: 300, 1200: 300, 1800: 300, 2400: 600, 3600: 900}
#: the spans a session younger than the window is shown over, seconds: the shortest that
#: holds it (a 59 s replay fills a 60 s chart, not a fifth of 5 minutes); few of them, so
#: the axes (plotext's frame, kept while they stay) change seldom
SPANS_S = tuple(sorted(TICK_S))


def shown_span(age_s: float, window_s: int) -> int:
    """The seconds the x axis spans: the window, or while the session is younger than
    it, the shortest of :data:`SPANS_S` that holds the session (then it scrolls)."""
    return next((s for s in SPANS_S if age_s <= s < window_s), window_s)
#: the chart moves with time at most this often, session seconds (a short span's dot is
#: a fraction of a second: each tick would redraw it); a jump, a marker or a domain at once
CHART_EVERY_S = 2.0
#: a chart narrower than this draws the total alone (80x24: 46 columns)
SERIES_MIN_WIDTH = 60
#: the header's legend swatch of a colour series
SWATCH = "━━"
#: plotext colour codes stand for series (read back from its colour matrix): total, domain i
_TOTAL_CODE, _DOMAIN_CODE = 99, 100


def nice_axis(top_w: float, max_ticks: int = 5) -> tuple[float, list[float]]:
    """The y axis for data up to ``top_w`` W: its top and ticks at round steps (1, 2, 2.5
    or 5 times a power of ten: ``0 20 40 60 80 100``), at most ``max_ticks`` steps, with
    some room above the data. Round limits also change seldom: plotext's frame (axes and
    ticks) is kept while they stay."""
    top_w = top_w * 1.05 if 0 < top_w < math.inf else 1.0  # (no data, or none that can be)
    steps = max(1, max_ticks)
    magnitude = 10.0 ** math.floor(math.log10(top_w / steps))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude * steps >= top_w)
    n = math.ceil(top_w / step - 1e-9)
    return n * step, [i * step for i in range(n + 1)]


def y_axis(top_w: float, plot_h: int) -> tuple[float, list[float]]:
    """The y axis of a plot ``plot_h`` lines high: the top of :func:`nice_axis` (never
    coarser on a short plot: 1000 W over data of 615 W wastes its few lines) and as many of
    its ticks as the height shows apart, counted down from the top."""
    y_top, ticks = nice_axis(top_w)
    room = max(1, (plot_h - 3) // 2)
    if len(ticks) - 1 > room:
        ticks = ticks[::-math.ceil((len(ticks) - 1) / room)][::-1]
    return y_top, ticks


def _y_label(value: float) -> str:
    """A tick's watts as written by hand: ``0``, ``0.25``, ``40``, ``1500``."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def series_marker(i: int) -> str:
    """The chart character of the i-th domain (also shown in the domain table as its key)."""
    return MARKERS[i % len(MARKERS)]


@dataclass(frozen=True)
class Series:
    """One line of the chart."""

    key: str
    """``total`` or the domain's id."""
    label: str
    """The legend's text, escaped (a replayed file names its domains)."""
    marker: str
    """Its ASCII character (drawn with it under NO_COLOR)."""
    colour: str
    """Its Rich colour; ``""``: the text colour, bold (the total)."""
    code: int
    """The plotext colour code that marks its cells."""
    history_w: Sequence[float | None]
    """Power of each tick kept, W, oldest first (None where lost)."""


def chart_series(snap: Snapshot, *, parts: bool = False, total_only: bool = False,
                 groups: Sequence[DeviceGroup] = ()) -> list[Series]:
    """What the chart draws, the total first (legend order; it is drawn last, on top).

    Devices (domains that add into the total) are drawn when there are two or more (one
    device *is* the total); parts and wholes (core, uncore, psys: ``in_total`` False) only
    with ``parts``. ``total_only`` (a small chart) draws the total alone unless ``parts``
    asks for every series. Each device group of ``groups`` (collapsed in the table) is one
    series, its members' sum, where its first member would be; its character and colour
    follow the domains' (the j-th group's are those of domain ``len(domains) + j``)."""
    out = [Series("total", "total", TOTAL_MARKER, "", _TOTAL_CODE, snap.total.history_w)]
    if total_only and not parts:
        return out
    devices = sum(1 for d in snap.domains if d.domain.in_total)
    member = {m: (j, g) for j, g in enumerate(groups) for m in g.members}
    by_id = {d.domain.id: d for d in snap.domains} if groups else {}
    n = len(snap.domains)
    for i, d in enumerate(snap.domains):
        shown = parts if not d.domain.in_total else (devices > 1 or parts)
        if not shown:
            continue
        if d.domain.id in member:
            j, g = member[d.domain.id]
            samples = [by_id[m] for m in g.members if m in by_id]
            if d.domain.id == g.members[0] and len(samples) == len(g.members):
                out.append(Series(g.key, g.label, series_marker(n + j),
                                  COLOURS[(n + j) % len(COLOURS)], _DOMAIN_CODE + n + j,
                                  group_sample(samples).history_w))
            continue
        out.append(Series(d.domain.id, safe_text(d.domain.id), series_marker(i),
                          COLOURS[i % len(COLOURS)], _DOMAIN_CODE + i, d.history_w))
    return out


def window_label(window_s: float) -> str:
    """``30 s``, ``5 min``, ``1 h``."""
    if window_s >= 3600 and window_s % 3600 == 0:
        return f"{window_s // 3600:g} h"
    if window_s >= 60 and window_s % 60 == 0:
        return f"{window_s // 60:g} min"
    return f"{window_s:g} s"


def _tick_label(ago_s: int) -> str:
    if ago_s == 0:
        return "now"
    return f"-{ago_s // 60}m" if ago_s % 60 == 0 else f"-{ago_s}s"


def in_window(times_s: Sequence[float], history_w: Sequence[float | None], window_s: float,
              n: int, gaps: bool = False) -> tuple[list[float], list]:
    """The points of the last ``window_s`` seconds as (seconds before the newest, W), at
    most ``n`` (every k-th, keeping the newest): plotting 600 points into 60 columns costs
    CPU and shows nothing more. ``history_w`` ends with ``times_s``. A lost tick (None) is
    dropped, or kept as None with ``gaps`` (a line breaks there)."""
    hist = history_w[-len(times_s):] if times_s else ()
    times = times_s[-len(hist):] if hist else ()
    if not times:
        return [], []
    now = times[-1]
    first = next((i for i, t in enumerate(times) if t >= now - window_s), len(times))
    idx = range(first, len(times))
    step = max(1, len(idx) // max(n, 1))
    keep = [i for i in range(len(times) - 1, first - 1, -step)][::-1]
    keep = [i for i in keep if gaps or hist[i] is not None]
    return [times[i] - now for i in keep], [hist[i] for i in keep]


#: marker labels are cut to this many characters at most
LABEL_MAX = 12
#: a label cut shorter than this is dropped rather than shown as one or two letters
LABEL_MIN = 3


def marker_labels(markers: Sequence[tuple[float, str]], lo: float, hi: float,
                  columns: int, rows: int = 1) -> list[tuple[float, str, str, int]]:
    """(x, text, alignment, row) for each marker label that fits, on up to ``rows`` lines
    from the plot's top (0 the top): a label starts at its marker, on the first row where
    the last label ended at least a blank column before; at the right edge (a marker just
    added sits at "now") it ends at its marker instead where there is room. Where every
    row is taken, the label that ends first is cut to leave a blank column (dropped if
    under LABEL_MIN characters), so labels never run into each other (``train coold``)."""
    if not markers or columns <= 0:
        return []
    span = hi - lo if hi > lo else 1.0
    rows = max(rows, 1)

    def col(x: float) -> int:
        return int(round((x - lo) / span * (columns - 1)))

    placed: list[list] = []  # [x, text, align, row, first column]
    ends = [-2] * rows  # the last column a label took, per row

    def put(x: float, c: int, text: str, r: int) -> bool:
        room = columns - c
        if len(text) <= room:
            placed.append([x, text, "left", r, c])
        elif c - len(text) + 1 > ends[r] + 1:  # ends at its marker, a blank before it
            placed.append([x, text, "right", r, c - len(text) + 1])
        elif room >= min(LABEL_MIN, len(text)):
            placed.append([x, text[:room], "left", r, c])
        else:
            return False
        ends[r] = placed[-1][4] + len(placed[-1][1]) - 1
        return True

    for x, label in markers:
        c, text = col(x), label[:LABEL_MAX]
        if any(ends[r] < c - 1 and put(x, c, text, r) for r in range(rows)):
            continue
        r = min(range(rows), key=lambda r: ends[r])  # cut the label that ends first
        last = next((p for p in reversed(placed) if p[3] == r), None)
        if last is not None:
            keep = c - 1 - last[4]  # its columns before a blank one
            if last[2] == "left" and keep >= min(LABEL_MIN, len(last[1])):
                last[1] = last[1][:keep]
            else:
                placed.remove(last)
            ends[r] = last[4] + len(last[1]) - 1 if last in placed else -2
        if ends[r] < c - 1:
            put(x, c, text, r)
    return [(x, text, align, r) for x, text, align, r, _ in placed]


def header_lines(title: str, legend: Sequence[tuple[str, str, Style]], width: int,
                 base: Style, rows: int = 2) -> list[list[Segment]]:
    """The chart's first line(s): the title, then each legend entry (swatch in its
    series' style, label) while it fits in ``rows`` lines of ``width``; what does not fit
    is counted (``+2``)."""
    lines: list[list[Segment]] = [[Segment(title, base)]]
    used = [len(title)]
    for n, (swatch, label, style) in enumerate(legend):
        entry = len(swatch) + 1 + len(label)
        rest = len(legend) - n - 1
        more = f" +{rest}" if rest else ""
        if used[-1] + 2 + entry + len(more) > width:
            if len(lines) < rows and entry + len(more) <= width:
                lines.append([])
                used.append(-2)
            else:
                lines[-1].append(Segment(f"  +{len(legend) - n}", base))
                break
        lines[-1] += [Segment("  " if used[-1] >= 0 else "", base), Segment(swatch, style),
                      Segment(f" {label}", base)]
        used[-1] += 2 + entry
    return lines


class PowerChart(PlotextPlot, StyledOnce):
    """The total's and each device's power (W) over the last :attr:`window_s` seconds;
    markers as vertical lines. See the module docstring for what is drawn and how.

    PlotextPlot is the first base: Textual takes a widget's default CSS (PlotextPlot's
    ``1fr`` width and height) and CSS type names from its first bases alone."""

    DEFAULT_CSS = """
    PowerChart { min-height: 5; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._version = 0
        self._data: tuple[Snapshot, Sequence[float]] | None = None
        self._cache_key: tuple | None = None
        self._cache: list[Strip] = []
        self._line_keys: list[tuple] = []  # what each strip of _cache shows
        self.lines_made = 0
        """Line strips made: a snapshot that changes a few lines makes only those."""
        self.window_s: int = DEFAULT_WINDOW_S
        """Seconds of history shown (one of :data:`WINDOWS_S`)."""
        self.show_parts = False
        """Parts (core, uncore) and wholes (psys) are drawn too; on a small chart, every
        series."""
        self.series_keys: tuple[str, ...] = ()
        """The series of the last frame built (``total`` and domain ids), for tests."""
        self.builds = 0
        """Frames built: a repaint without a change builds none."""
        self.axes_builds = 0
        """plotext frames built (axes, ticks, marker lines): a frame whose axes are those
        of the last one reuses it."""
        self._axes_key: tuple | None = None  # what plotext draws; None: not reusable
        self._axes: tuple | None = None  # (key, marker rows, colour rows, canvas ranges)
        self._pending: tuple[Snapshot, Sequence[float]] | None = None  # handed in, not drawn
        self.groups: tuple[DeviceGroup, ...] = ()
        """The device groups drawn as one series each (those the table collapsed)."""
        self.compact = False
        """A short screen's chart (:meth:`set_compact`): no frame line above or below the
        plot (the tick labels under it), and the legend in the title's line alone unless
        a second line leaves the plot ``PLOT_MIN_ROWS``: 7 lines leave the plot 5 rows."""
        self.plot_rows = 0
        """The rows the series are drawn in (the canvas: no title, legend, axis line or
        tick labels), as last built."""

    # -- what the keys change -----------------------------------------------------------
    def zoom(self, step: int) -> int:
        """A shorter (``step`` < 0) or longer window; returns the window now shown."""
        i = WINDOWS_S.index(self.window_s) if self.window_s in WINDOWS_S else 3
        self.window_s = WINDOWS_S[min(max(i + step, 0), len(WINDOWS_S) - 1)]
        self.flush()
        self.refresh()
        return self.window_s

    def set_groups(self, groups: Sequence[DeviceGroup]) -> None:
        """Draw each of ``groups`` as one series (the table collapsed them), or no more."""
        groups = tuple(groups)
        if groups != self.groups:
            self.groups = groups
            self.flush()
            self.refresh()

    def set_compact(self, compact: bool) -> None:
        """Draw the chart for a short screen (under 32 lines: :attr:`compact`) or not."""
        if compact != self.compact:
            self.compact = compact
            self.refresh()

    def toggle_parts(self) -> bool:
        self.show_parts = not self.show_parts
        self.flush()
        self.refresh()
        return self.show_parts

    def show(self, snap: Snapshot, times_s: Sequence[float]) -> None:
        """Chart this snapshot, if it moves the chart by a dot (:meth:`moves`); else it
        is drawn with the next one that does, or when the display pauses or the session
        ends (:meth:`flush`: the chart shows the tick the table shows). The plot is built when drawn, for the
        size it has then: a frame shown before the first layout (or before a resize) is
        not thinned and labelled for another width. The same snapshot again (a redraw)
        changes nothing."""
        if self._data is not None and self._data[0] is snap and self._data[1] == times_s:
            return
        self._pending = (snap, times_s)
        if self._data is None or self.moves(snap, times_s):
            self.flush()

    @property
    def drawn_snapshot(self) -> Snapshot | None:
        """The snapshot the chart shows (the latest handed in, or one before it that the
        latest moves by less than a dot)."""
        return self._data[0] if self._data is not None else None

    def flush(self) -> None:
        """Draw the latest snapshot handed in, if it is not drawn yet."""
        if self._pending is None:
            return
        self._data, self._pending = self._pending, None
        self._version += 1
        self._refresh_changed()

    def _dot_s(self) -> float:
        """The seconds of one braille dot column of the plot (at least a millisecond)."""
        return max(self.span_s / (2 * max(self.size.width - 8, 10)), 0.001)

    @property
    def span_s(self) -> int:
        """The seconds the x axis spans now (:func:`shown_span`)."""
        return self._span_of(self._data)

    def _span_of(self, data) -> int:
        """The span for ``data`` (snapshot, tick times): by the session's age."""
        return shown_span(data[0].elapsed_s if data is not None else 0.0, self.window_s)

    def moves(self, snap: Snapshot, times_s: Sequence[float]) -> bool:
        """Whether ``snap`` changes the chart drawn by a dot: the window moved a dot
        column (its time), the newest reading of a series jumped a character row (four
        dots: a measured power's noise moves it a dot or two every tick), a marker or a
        domain came, or nothing is drawn yet. A 5-minute window at 120 columns is about
        two seconds a dot: at 1 s ticks a frame in two draws the chart (the numbers in
        the table and totals change every tick), unless the power jumps."""
        limits = getattr(self, "_limits", None)  # set by the first build
        if self._data is None or self._cache_key is None or limits is None:
            return True
        old, old_times = self._data
        if len(snap.markers) != len(old.markers) or len(snap.domains) != len(old.domains):
            return True
        now = times_s[-1] if times_s else snap.elapsed_s
        drawn = old_times[-1] if old_times else old.elapsed_s
        if (now - drawn >= max(self._dot_s(), CHART_EVERY_S)
                or self._span_of((snap, times_s)) != self.span_s):
            return True
        row_w = limits[3] / max(self.size.height - 3, 1)  # the watts of a character row
        width = self.size.width
        for new, was in zip(self._series_of(snap, width), self._series_of(old, width)):
            a = new.history_w[-1] if new.history_w else None
            b = was.history_w[-1] if was.history_w else None
            if (a is None) != (b is None) or (a is not None and abs(a - b) >= row_w):
                return True
        return False

    def _refresh_changed(self) -> None:
        """Repaint the lines that differ from the last frame drawn (a flat series, the
        axes and the legend stay as they were). Built now only at the size and style the
        last frame was drawn with: a resize or a new style repaints the whole chart, and
        it is built when drawn."""
        key = self._cache_key
        if key is None or key[1] != self.size:
            self.refresh()
            return
        old = self._cache
        # a line kept is the same strip
        refresh_changed_lines(self, old, self._strips(key[2]), same=operator.is_)

    @property
    def ascii(self) -> bool:
        """Draw each series with its character: no colour to tell them apart."""
        return bool(getattr(self.app, "no_color", False))

    # -- building -------------------------------------------------------------------------
    def _series(self, width: int) -> list[Series]:
        if self._data is None:
            return []
        return self._series_of(self._data[0], width)

    def _series_of(self, snap: Snapshot, width: int) -> list[Series]:
        return chart_series(snap, parts=self.show_parts, total_only=width < SERIES_MIN_WIDTH,
                            groups=self.groups)

    def _build(self, width: int, height: int, series: list[Series],
               own_braille: bool = True) -> None:
        """Load the shown snapshot's last ``window_s`` seconds into the figure, for a plot
        of ``width`` x ``height`` cells. Braille lines are kept in ``_lines`` to be drawn
        by :func:`draw_braille` over plotext's frame (``own_braille``: a third of the CPU
        of plotext's braille lines), else given to plotext."""
        plt = self.plt
        plt.clear_data()
        self._lines, self._labels = [], []
        if self._data is None:
            return
        snap, times_s = self._data
        window = self.span_s
        columns = max(width - 8, 10)  # about the plot area's columns
        ascii_ = self.ascii
        top = 0.0
        # devices first, the total last: on top where lines cross
        for s in reversed(series):
            own = own_braille and not ascii_
            xs, ys = in_window(times_s, s.history_w, window, columns, gaps=own)
            known = [y for y in ys if y is not None]
            if not known:
                continue
            top = max(top, max(known))
            if ascii_:  # lines while points are sparse (cheap then), dots once dense
                draw = plt.plot if len(xs) < columns else plt.scatter
                draw(xs, ys, marker=s.marker, color=s.code)
            elif own:  # a lost tick breaks the line: no power is drawn where none is known
                self._lines.append((s.code, xs, ys))
            else:
                plt.plot(xs, ys, marker="braille", color=s.code)
        lo, hi = -float(window), 0.0
        # compact: no frame line above or below the plot (the tick labels mark the time)
        plt.xaxes(not self.compact, not self.compact)
        plt.yaxes(True, not self.compact)
        if self._lines:  # plotext draws no axis ticks for a figure without data
            plt.scatter([lo, hi], [0.0, 0.0], marker=" ")
        plt.xlim(lo, hi)
        step = TICK_S.get(window, window // 4 or 1)
        ticks = list(range(-window, 1, step))
        plt.xticks(ticks, [_tick_label(-t) for t in ticks])
        y_top, y_ticks = y_axis(top, height)
        self._limits = (lo, hi, 0.0, y_top)
        plt.ylim(0, y_top)
        plt.yticks(y_ticks, [_y_label(t) for t in y_ticks])
        top = top if top > 0 else y_top / 1.1
        now = times_s[-1] if times_s else snap.elapsed_s
        shown = [(m.elapsed_s - now, safe_text(m.label)) for m in snap.markers
                 if lo <= m.elapsed_s - now <= hi]
        for x, _ in shown:
            plt.vertical_line(x)
        # two rows of labels where the plot has room for them
        self._labels = marker_labels(shown, lo, hi, columns, 2 if height >= 8 else 1)
        # everything plotext draws when the lines are braille of our own (in ASCII it
        # draws the series too: nothing to reuse)
        self._axes_key = None if ascii_ or not own_braille else (
            width, height, window, self._limits, tuple(x for x, _ in shown), bool(self._lines),
            self.compact)
        if not own_braille:
            for x, label, align, _ in self._labels:
                plt.text(label, x, top * 1.05, alignment=align)

    def _cells(self) -> "tuple[list[str], list[list]] | None":
        """The figure's characters and colour codes, top line first: plotext's matrix read
        directly, not its canvas (which writes colour codes for every cell, only to be
        parsed again). None if plotext changes its insides."""
        plot = self._plot
        try:
            if self._axes is None or self._axes_key is None or self._axes[0] != self._axes_key:
                plot._set_sizes()
                plot._build_matrix()
                matrix = plot.monitor.matrix
                self._axes = (self._axes_key, matrix.marker, matrix.fullground,
                              (matrix.Cols_canvas, matrix.Rows_canvas))
                self.axes_builds += 1
                self.plot_rows = len(matrix.Rows_canvas)
            _, marker, fullground, canvas = self._axes
            rows = [row[:] for row in marker]  # drawn over: the kept frame stays clean
            colours = [row[:] for row in fullground]
            if self._lines:
                draw_braille(rows, colours, *canvas, self._lines, self._limits)
            draw_labels(rows, colours, *canvas, self._labels, self._limits)
        except AttributeError:
            return None
        return ["".join(row) for row in reversed(rows)], list(reversed(colours))

    def _strips(self, style: Style) -> list[Strip]:
        size = self.size
        w, h = size
        span = self.span_s
        key = (self._version, size, style, self.window_s, self.show_parts, self.ascii,
               self.groups, span, self.compact)
        if key == self._cache_key:
            return self._cache
        series = self._series(w)
        styles = {s.code: style + (Style(color=s.colour) if s.colour else Style(bold=True))
                  for s in series}
        legend = [(s.marker if self.ascii else SWATCH, s.label, styles[s.code])
                  for s in series] if self._data is not None else []
        title = f"W, last {window_label(self.window_s)}" if span == self.window_s else \
            f"W, session (window {window_label(self.window_s)})"
        # compact: a second line of legend only above a plot of PLOT_MIN_ROWS
        header = header_lines(title, legend, w, style,
                              1 if self.compact and h <= CHART_MIN_LINES else 2)
        plot_h = max(h - len(header), 1)
        self._build(w, plot_h, series)
        self._size_plot(w, plot_h)
        cells = self._cells()
        # a line's strip is kept while what it shows (its segments, or its characters and
        # colour codes) stays: a new snapshot makes strips only for the lines it changed
        # (the kept ones are the same objects: _refresh_changed repaints the others)
        kept = self._line_keys if self._cache_key is not None and \
            self._cache_key[1:] == key[1:] and len(self._cache) == len(self._line_keys) \
            else []
        lines: list[tuple] = [(line,) for line in header]
        if cells is None:  # not plotext 5.x's insides: its braille, its build, one colour
            self._build(w, plot_h, series, own_braille=False)
            self._size_plot(w, plot_h)
            lines += [(line,) for line in _plain(self._plot.build()).splitlines()]
        else:
            lines += zip(*cells)
        lines = lines[:h]
        strips = []
        for y, line in enumerate(lines):
            if y < len(kept) and kept[y] == line:
                strips.append(self._cache[y])
                continue
            if len(line) == 2:
                segments = _runs(line[0], line[1], styles, style)
            elif isinstance(line[0], str):
                segments = [Segment(line[0], style)]
            else:
                segments = line[0]
            strips.append(Strip(segments).adjust_cell_length(w, style))
            self.lines_made += 1
        self._cache, self._line_keys = strips, lines
        self._cache_key = key
        self.series_keys = tuple(s.key for s in series)
        self.builds += 1
        return self._cache

    def _size_plot(self, w: int, h: int) -> None:
        self._plot.plotsize(w, h)
        self._plot._set_size(w, h)  # as PlotextPlot.render does (textual-plotext #5)
        self._plot.theme("clear")

    def render_line(self, y: int) -> Strip:
        """Line API: the plot is built once per change, not once per line or repaint."""
        style = self.base_style
        strips = self._strips(style)
        if y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, style)


#: a braille cell's dot bits, by (column 0/1, row from the top 0..3)
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
#: the same by (column 0/1, row from the bottom 0..3): a dot's bit is _BITS[px & 1][py & 3]
_BITS = tuple(tuple(reversed(col)) for col in _DOTS)


def draw_braille(marker: list[list[str]], colour: list[list], cols: range, rows: range,
                 lines: Sequence[tuple[int, Sequence[float], Sequence[float | None]]],
                 limits: tuple[float, float, float, float]) -> None:
    """Draw each (colour code, xs, ys) as a braille line into plotext's matrices (rows
    bottom first) over the canvas ``cols`` x ``rows``, mapped as plotext maps its own
    (``limits``: x from, x to, y from, y to): 2 x 4 dots a cell, consecutive points
    joined (not across a None: a lost tick). A cell shows every line's dots; its colour is
    the last line's that crosses it. Only blank cells and marker lines are drawn over
    (never a label).

    It runs at every frame for every series (the window scrolls): cells are numbered
    ``cy * width + cx`` and a step of a line is a few integer operations."""
    x0, x1, y0, y1 = limits
    cw = len(cols)
    w, h = 2 * cw, 4 * len(rows)
    if w <= 0 or h <= 0 or x1 <= x0 or y1 <= y0:
        return
    sx, sy = (w - 1) / (x1 - x0), (h - 1) / (y1 - y0)
    top = h - 1
    bits = _BITS
    masks: dict[int, int] = {}
    owner: dict[int, int] = {}
    get = masks.get
    for code, xs, ys in lines:
        lx = ly = 0  # the last dot, if joined (the line has not just started or broken)
        joined = False
        for x, y in zip(xs, ys):
            if y is None:  # lost: the line breaks
                joined = False
                continue
            px = round((x - x0) * sx)
            py = round((y - y0) * sy)
            py = 0 if py < 0 else top if py > top else py
            if not joined or (px == lx and py == ly):
                if 0 <= px < w:
                    k = (py >> 2) * cw + (px >> 1)
                    masks[k] = get(k, 0) | bits[px & 1][py & 3]
                    owner[k] = code
                lx, ly, joined = px, py, True
                continue
            dx, dy = px - lx, py - ly
            steps = max(abs(dx), abs(dy))
            for i in range(1, steps + 1):
                qx = lx + round(i * dx / steps)
                if 0 <= qx < w:
                    qy = ly + round(i * dy / steps)
                    k = (qy >> 2) * cw + (qx >> 1)
                    masks[k] = get(k, 0) | bits[qx & 1][qy & 3]
                    owner[k] = code
            lx, ly = px, py
    c0, r0 = cols.start, rows.start
    for k, mask in masks.items():
        cy, cx = divmod(k, cw)
        row, col = marker[r0 + cy], c0 + cx
        if row[col] in (" ", "│"):
            row[col] = chr(0x2800 + mask)
            colour[r0 + cy][col] = owner[k]


def draw_labels(marker: list[list[str]], colour: list[list], cols: range, rows: range,
                labels: Sequence[tuple[float, str, str, int]],
                limits: tuple[float, float, float, float]) -> None:
    """Write the markers' labels (x, text, "left" or "right" of x, row from the top) on
    the canvas's top rows, over whatever is there (a line's dots), in the axes' colour;
    cut at its edges."""
    x0, x1 = limits[0], limits[1]
    if not len(cols) or not len(rows) or x1 <= x0:
        return
    for x, text, align, down in labels:
        row = max(rows.stop - 1 - down, rows.start)
        col = cols.start + round((x - x0) / (x1 - x0) * (len(cols) - 1))
        start = col - len(text) + 1 if align == "right" else col
        for i, ch in enumerate(text):
            if cols.start <= start + i < cols.stop:
                marker[row][start + i] = ch
                colour[row][start + i] = "default"


def _runs(text: str, colours: Sequence, styles: dict[int, Style], base: Style) -> list[Segment]:
    """One line of the figure as segments: each run of cells of one series in its style,
    the rest (axes, ticks, marker lines and labels) in the widget's."""
    segments: list[Segment] = []
    start = 0
    for code, cells in groupby(colours[:len(text)]):  # a run per colour, not a step per cell
        end = start + sum(1 for _ in cells)
        style = styles.get(code, base)
        if segments and segments[-1].style is style:  # two codes, one style: one segment
            segments[-1] = Segment(segments[-1].text + text[start:end], style)
        else:
            segments.append(Segment(text[start:end], style))
        start = end
    return segments


def _plain(text: str) -> str:
    """plotext's text without its colour codes (ESC[...m), which are never cells."""
    import re

    return re.sub("\x1b\\[[0-9;]*m", "", text)
