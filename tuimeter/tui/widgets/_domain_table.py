"""One row per domain and one for the machine total, drawn from a list of columns.

A column is one :class:`Column` entry in :data:`COLUMNS`: its header, its width, how its
cell is computed from a :class:`RowData` (a domain's sample or the total, on one
footing), its width and alignment, and from which table width it shows. The header, each
row's line and the help screen's list of columns are all built from that list.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip

from ...model import DeviceInfo, Domain, DomainSample, Snapshot, Status, Totals
from ...phases import average_power_w
from ...text import safe_text
from ..device_groups import GroupSample, device_groups, group_sample
from ..devices import device_text
from ..format import badge, fmt_energy, fmt_power, provenance_badge
from ._kept_strips import KeptStrips, StyledOnce
from ._power_chart import TOTAL_MARKER, series_marker
from ._spark_line import spark_cell, spark_tip

#: sparkline points passed on (no row is wider)
SPARK_POINTS = 200


def not_in_total_tag(d) -> str:
    """How a domain that is shown but not added to the total is tagged (no colour needed)."""
    if d.kind.value in ("core", "uncore"):
        return "(part)"  # inside its package: adding it would count its joules twice
    if d.kind.value == "psys":
        return "(whole)"  # the whole platform, package and dram included
    if d.kind.value == "platform":
        return "(node)"  # a node meter: the total is its reading, by the rest-of-node row
    return "(excl)"


def row_name(d: Domain, above: set[str], room: int) -> str:
    """A domain's name cell (``room`` cells after its chart character), its tag always
    in full: a part (core, uncore) right under its package reads as indented into it
    (``└ core (part)``); a name too long for the room writes its package ``pkg0``
    (``pkg0/core (part)``), and is cut (``…``) before its tag if still too long, so
    ``(part)`` never wraps onto a hidden second line. Escaped: a replayed file names its
    domains."""
    name, tag = safe_text(d.id), "" if d.in_total else f" {not_in_total_tag(d)}"
    parent, _, leaf = d.id.rpartition("/")
    if tag and parent in above:
        name = f"└ {safe_text(leaf)}"
    if len(name) + len(tag) > room and name.startswith("package-"):
        name = "pkg" + name[len("package-"):]
    if len(name) + len(tag) > room:
        name = name[:max(1, room - len(tag) - 1)] + "…"
    return name + tag


@dataclass(frozen=True)
class RowData:
    """What one row shows, a domain's or the machine total's."""

    label: str
    """Chart key and name, escaped (a replayed file names its domains)."""
    badge: str
    """Provenance in brackets (``[measured]``), or ``[LOST]``."""
    history_w: Sequence[float | None]
    """Average power of each interval kept, W, oldest first; None where lost."""
    now_w: float | None
    """Power now, W: the hardware's live reading where it has one, else the last
    interval's average."""
    energy_j: float | None
    """Energy since the session started, J."""
    elapsed_s: float
    """Session seconds at this snapshot."""
    lost: bool = False
    """The domain is unreadable now."""
    device: DeviceInfo | None = None
    """The device's own readings (GPU busy, memory, temperature ...), where it has any."""


@dataclass(frozen=True)
class Column:
    """One column of the domain table."""

    key: str
    """Its name (``DomainTable.cell_text(row, key)``)."""
    header: str
    width: int | None
    """Cells; None: the room the other columns leave (one such column, the sparkline)."""
    value: Callable[[RowData], object]
    """A cell's content from its row: text, or the sparkline's values."""
    help: str
    """What it shows, for the help screen."""
    align: str = "left"
    min_width: int = 0
    """The table's width (cells, the terminal's on the main screen) from which the
    column shows: in a narrower table it is dropped."""
    needs_devices: bool = False
    """Shown only once a domain has device readings (none in a replay: not recorded)."""

    @property
    def sparkline(self) -> bool:
        return self.width is None


#: the device column's cells (``H200 87% 41/140G 64C 700W 1980MHz`` and a space)
DEVICE_W = 35

#: the domain table, left to right: a new column is one entry here
COLUMNS: tuple[Column, ...] = (
    Column("name", "  domain", 20, lambda r: r.label, "domain"),
    Column("badge", "provenance", 13, lambda r: r.badge, "badge"),
    Column("spark", "power over time", None, lambda r: tuple(r.history_w[-SPARK_POINTS:]),
           "power over time (sparkline: each row on its own scale, its min-max at its right "
           "end from 40 cells, and on hover)"),
    Column("power", "now", 10, lambda r: fmt_power(r.now_w), "power now", "right"),
    Column("avg", "avg", 10, lambda r: fmt_power(average_power_w(r.energy_j, r.elapsed_s)),
           "average since start (100+ wide)", "right", min_width=100),
    Column("energy", "energy", 11, lambda r: fmt_energy(r.energy_j), "energy since start",
           "right"),
    Column("device", " device", DEVICE_W, lambda r: " " + device_text(r.device, DEVICE_W - 1),
           "the device's own readings: GPU model, busy, memory used/total, temperature, "
           "power limit, SM clock; CPU frequency and temperature (120+ wide; d: all)",
           min_width=120, needs_devices=True),
)


_NAME = next(c for c in COLUMNS if c.key == "name")
_SPARK = next(c for c in COLUMNS if c.sparkline)
_DIM = Style(dim=True)


def _fit(text: str, width: int, align: str) -> tuple[str, str]:
    """A cell's text cut to ``width`` cells, and the blank that pads it to ``width``."""
    if cell_len(text) > width:
        text = set_cell_size(text, width)
    pad = " " * (width - cell_len(text))
    return (text, pad) if align != "right" else (pad, text)


def _empty(label: str) -> RowData:
    """A row before its first snapshot."""
    return RowData(label, "", (), None, None, 0.0)


@dataclass(frozen=True)
class _Line:
    """What one line of the table shows: its cells' texts at the current column widths
    (the key of its cached strip)."""

    cells: tuple[str, ...]
    """Each shown column's text; the sparkline's is its bars and its range label."""
    spark_label: str = ""
    """The sparkline's range label (drawn dim), the end of its cell."""
    kind: str = "row"
    """``header``, ``row`` or ``total`` (bold)."""
    lost: bool = False
    """The badge is drawn bold reverse."""


class DomainTable(StyledOnce):
    """Every domain of the engine, in the engine's order, and the machine total: one widget
    of fixed height (a header line, a line per domain, the total's), drawn with the Line
    API. Each line's strip is kept until its cells' texts change; a frame repaints only the
    lines that did, and never asks for a layout (a widget per cell, ~60 of them, each walked
    and rendered by the compositor on every frame, was most of the UI's CPU).

    Columns are those of :data:`COLUMNS` that fit the table's width (``min_width``) and
    have something to show (``needs_devices``); the sparkline takes the room left, less one
    blank cell. Hovering a row's sparkline shows its range in a tooltip."""

    COMPONENT_CLASSES = {"domain-table--header", "domain-table--total",
                         "domain-table--spark", "domain-table--lost"}

    DEFAULT_CSS = """
    DomainTable { height: auto; }
    DomainTable > .domain-table--header { text-style: bold; }
    DomainTable > .domain-table--total { text-style: bold; }
    DomainTable > .domain-table--spark { color: $primary; }
    DomainTable > .domain-table--lost { text-style: bold reverse; }
    """

    def __init__(self, domains: Sequence[Domain], **kw) -> None:
        super().__init__(**kw)
        self.domains = list(domains)
        self.groups = device_groups(self.domains)
        """GPUs of one model (``8 x H200``), each one line while :attr:`collapsed`."""
        room = (_NAME.width or 0) - 2  # after the chart character and a space
        above: set[str] = set()
        rows: dict[str, RowData] = {}
        # a node meter's row on top, the rest of node under it, then the chips (its parts);
        # each keeps the chart marker of its place among the domains
        first = {"platform": 0, "rest": 1}
        order = sorted(range(len(self.domains)),
                       key=lambda i: first.get(self.domains[i].kind.value, 2))
        self._order = [self.domains[i] for i in order]  # the rows' order, top to bottom
        self._labels: dict[str, tuple[str, str]] = {}  # in place, and out of it (cut)
        for i in order:
            d = self.domains[i]
            self._labels[d.id] = (f"{series_marker(i)} {row_name(d, above, room)}",
                                  f"{series_marker(i)} {row_name(d, set(), room - 1)}")
            rows[d.id] = _empty(self._labels[d.id][0])
            above.add(d.id)
        for j, g in enumerate(self.groups):  # its chart character follows the domains'
            rows[g.key] = _empty(f"{series_marker(len(self.domains) + j)} "
                                 f"{g.label[:room]}")
        rows["total"] = _empty(f"{TOTAL_MARKER} total")
        self._rows = rows
        self.collapsed = False
        """Each device group is one line (:meth:`collapse`)."""
        self._first = 0  # the first domain line shown while the table is cut (max_lines)
        self._cut = False
        """The table is cut (:attr:`max_lines`): the rows that add into the total come
        first, the parts and wholes (core, psys) after them, the first out of sight."""
        self.max_lines: int | None = None
        """The most lines the table may take (header and total included); more rows
        scroll under the header (the mouse wheel), the total stays. None: no bound."""
        self._columns: tuple[tuple[Column, int], ...] = ()  # shown, with their widths
        self._devices = False  # a domain has had device readings
        self._strips = KeptStrips()  # each line's, with its _Line and width
        self._hover: int | None = None  # the line whose sparkline the mouse is over
        self._set_keys()

    def _set_keys(self) -> None:
        """The rows shown, top to bottom: each domain, a collapsed group at its first
        member's place (its other members left out), then the total. While the table is
        cut (:attr:`_cut`) the parts and wholes follow the rows that add into the total
        (a server's 8 GPUs stay in sight, its core and psys scroll), named in full."""
        member = {m: g for g in self.groups for m in g.members} if self.collapsed else {}
        keys: list[str] = []
        for d in self._order:
            g = member.get(d.id)
            if g is None:
                keys.append(d.id)
            elif d.id == g.members[0]:
                keys.append(g.key)
        if self._cut:
            counted = {d.id for d in self._order if d.in_total}
            keys.sort(key=lambda k: k not in counted and k in self._labels)  # (stable)
        for key, (placed, named) in self._labels.items():
            label = named if self._cut else placed
            if self._rows[key].label != label:
                self._rows[key] = replace(self._rows[key], label=label)
        self._keys = (*keys, "total")
        self._y = {key: y for y, key in enumerate(self._keys, start=1)}  # line 0: header
        self._lines: list[_Line | None] = [None] * (len(self._keys) + 1)
        self._strips.clear()

    def collapse(self, collapsed: bool) -> bool:
        """Draw each device group as one line (or each GPU again); whether it changed
        (the table's height did: a layout)."""
        collapsed = collapsed and bool(self.groups)
        if collapsed == self.collapsed:
            return False
        self.collapsed = collapsed
        self._set_keys()
        self.refresh(layout=True)
        return True

    def set_max_lines(self, lines: int | None) -> None:
        """Bound the table's height (:attr:`max_lines`)."""
        cut = lines is not None and len(self._keys) + 1 > max(lines, 3)
        if cut != self._cut:  # the parts and wholes go last, or back in their places
            self._cut = cut
            self._set_keys()
            self._first = 0
            self.refresh()
        if lines != self.max_lines:
            self.max_lines = lines
            self._first = min(self._first, self._hidden())
            self._lines[0] = None  # the header says how many rows are out of sight
            self._strips.clear()
            self.refresh(layout=True)

    def _hidden(self) -> int:
        """Domain lines that do not fit under :attr:`max_lines`."""
        if self.max_lines is None:
            return 0
        return max(0, len(self._lines) - max(self.max_lines, 3))

    def _line_at(self, y: int) -> int:
        """The line (0: header, then each row) drawn at screen line ``y``."""
        hidden = self._hidden()
        if not hidden or y == 0:
            return y
        last = len(self._lines) - 1 - hidden  # the screen line of the total
        return len(self._lines) - 1 if y >= last else y + self._first

    def _screen_y(self, line: int) -> int | None:
        """Where line ``line`` is drawn, None while scrolled out of sight."""
        hidden = self._hidden()
        if not hidden or line == 0:
            return line
        if line == len(self._lines) - 1:
            return line - hidden
        y = line - self._first
        return y if 1 <= y < len(self._lines) - 1 - hidden else None

    @property
    def rows_out_of_sight(self) -> int:
        """Domain rows not drawn now (the table is cut by :attr:`max_lines`)."""
        return self._hidden()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._scroll(1, event)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._scroll(-1, event)

    def _scroll(self, step: int, event: events.Event) -> None:
        hidden = self._hidden()
        if hidden:
            event.stop()
            first = min(max(self._first + step, 0), hidden)
            if first != self._first:
                self._first = first
                self._strips.clear()
                self.refresh()

    # -- what a test or the help reads ---------------------------------------------------
    @property
    def row_keys(self) -> tuple[str, ...]:
        """The rows' keys, top to bottom: domain ids, then ``total``."""
        return self._keys

    def row_data(self, key: str) -> RowData:
        """What the row ``key`` was last given."""
        return self._rows[key]

    @property
    def shown_columns(self) -> tuple[tuple[str, int], ...]:
        """(key, width in cells) of each column shown at the table's width."""
        return tuple((c.key, w) for c, w in self._columns)

    def cell_text(self, key: str, column: str) -> str | None:
        """The text of row ``key``'s cell in ``column`` as drawn, blanks stripped
        (``header`` names the header line); None while the column is not shown."""
        keys = [c.key for c, _ in self._columns]
        if column not in keys:
            return None
        return self.line(key).cells[keys.index(column)].strip()

    def row_text(self, key: str) -> str:
        """Row ``key`` (or ``header``) as drawn: every cell, blanks included."""
        return self._strip(self.line(key), self.size.width).text

    def spark_tip(self, key: str) -> str | None:
        """The tooltip hovering row ``key``'s sparkline shows (its range)."""
        width = dict(self.shown_columns).get("spark", 0)
        return spark_tip(_SPARK.value(self._rows[key]), width)  # type: ignore[arg-type]

    def line(self, key: str) -> _Line:
        """Row ``key``'s (or the header's) cells at the current widths."""
        y = 0 if key == "header" else self._y[key]
        line = self._lines[y]
        if line is None:
            line = self._lines[y] = self._make_line(y)
        return line

    # -- layout ---------------------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines) - self._hidden()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_columns(force=True)

    def _fit_columns(self, force: bool = False) -> None:
        """Choose the columns the table's width has room for, and that have something to
        show; their cells are drawn again (a column back in view was not kept up to date)."""
        outer = self.outer_size.width  # min_width is the terminal's width on the main screen
        width = self.size.width
        shown = [c for c in COLUMNS
                 if outer >= c.min_width and (self._devices or not c.needs_devices)]
        fixed = sum(c.width or 0 for c in shown)
        spark = max(0, width - fixed - 1)  # the sparkline leaves a blank cell on its right
        columns = tuple((c, spark if c.sparkline else c.width or 0) for c in shown)
        if columns == self._columns and not force:
            return
        self._columns = columns
        self._lines = [None] * len(self._lines)
        self.refresh()

    # -- drawing --------------------------------------------------------------------------
    def show(self, snap: Snapshot) -> None:
        """Give each row its data; a line whose cells' texts changed is repainted, alone."""
        if not self._devices and any(s.device is not None for s in snap.domains):
            self._devices = True
            self._fit_columns()
        rows = self._rows
        by_id = {}
        for sample in snap.domains:
            key = sample.domain.id
            by_id[key] = sample
            if key in rows:
                self._set(key, self._domain(rows[key].label, sample, snap.elapsed_s))
        for g in self.groups:
            members = [by_id[m] for m in g.members if m in by_id]
            if len(members) == len(g.members):
                self._set(g.key, self._group(rows[g.key].label, group_sample(members),
                                             snap.elapsed_s))
        self._set("total", self._total(rows["total"].label, snap.total, snap.elapsed_s))
        if self._hover is not None:
            self._show_tip(self._hover)

    def _set(self, key: str, data: RowData) -> None:
        self._rows[key] = data
        y = self._y.get(key)
        if y is None:  # a collapsed group's member, or a group while expanded
            return
        old = self._lines[y]
        if old is None:  # not drawn since the columns changed: drawn whole anyway
            return
        line = self._make_line(y)
        if line != old:
            self._lines[y] = line
            at = self._screen_y(y)
            if at is not None:
                self.refresh(Region(0, at, self.size.width, 1))

    def _make_line(self, y: int) -> _Line:
        """Line ``y``'s cells at the current column widths."""
        if y == 0:
            hidden = self._hidden()  # rows scrolled under the header: how many, and how
            return _Line(tuple("".join(_fit(f"  domain ({hidden} more)" if hidden and
                                            c is _NAME else c.header, w, c.align))
                               for c, w in self._columns), kind="header")
        key = self._keys[y - 1]
        data = self._rows[key]
        cells, label = [], ""
        for c, w in self._columns:
            value = c.value(data)
            if c.sparkline:
                bars, label = spark_cell(value, w)  # type: ignore[arg-type]
                cells.append(bars + label)
            else:
                cells.append("".join(_fit(str(value), w, c.align)))
        return _Line(tuple(cells), label, "total" if key == "total" else "row", data.lost)

    def look_up_styles(self) -> tuple[Style, ...]:
        return (self.rich_style,
                *(self.get_component_rich_style(name, partial=True) for name in
                  ("domain-table--header", "domain-table--total",
                   "domain-table--spark", "domain-table--lost")))

    def style_changed(self) -> None:
        """A theme or the CSS changed: every strip is stale."""
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not 0 <= y < len(self._lines) - self._hidden():
            return Strip.blank(width, self.base_style)
        y = self._line_at(y)
        line = self._lines[y]
        if line is None:
            line = self._lines[y] = self._make_line(y)
        return self._strips.get(y, (line, width), lambda: self._strip(line, width))

    def _strip(self, line: _Line, width: int) -> Strip:
        base, header, total, spark, lost = self.kept_styles
        style = base + {"header": header, "total": total}.get(line.kind, Style())
        segments = []
        for (column, w), text in zip(self._columns, line.cells):
            if column.sparkline and line.kind != "header":
                cut = len(text) - len(line.spark_label)
                segments.append(Segment(text[:cut], style + spark))
                if line.spark_label:
                    segments.append(Segment(line.spark_label, style + spark + _DIM))
            elif column.key == "badge" and line.lost:  # reversed: the text, not its padding
                stripped = text.rstrip(" ")
                segments += [Segment(stripped, style + lost),
                             Segment(text[len(stripped):], style)]
            else:
                segments.append(Segment(text, style))
            if column.sparkline:
                segments.append(Segment(" ", base))
        return Strip(segments).adjust_cell_length(width, base).simplify()

    # -- the sparkline's tooltip ------------------------------------------------------------
    def on_mouse_move(self, event: events.MouseMove) -> None:
        offset = event.get_content_offset(self)
        self._hover = None
        if offset is not None and 1 <= offset.y < len(self._lines) - self._hidden():
            x = 0
            for column, w in self._columns:
                if column.sparkline and x <= offset.x < x + w:
                    self._hover = offset.y
                x += w + (1 if column.sparkline else 0)
        self._show_tip(self._hover)

    def on_leave(self, event: events.Leave) -> None:
        self._hover = None
        self._show_tip(None)

    def _show_tip(self, y: int | None) -> None:
        tip = None if y is None else self.spark_tip(self._keys[self._line_at(y) - 1])
        if tip != self.tooltip:
            self.tooltip = tip

    @staticmethod
    def _domain(label: str, s: DomainSample, elapsed_s: float) -> RowData:
        lost = s.status is Status.LOST
        # "now" is the hardware's own live reading where it has one (NVML's instant power
        # field), else the average over the last interval; the sparkline stays averages
        now_w = s.power_w if lost or s.instant_power_w is None else s.instant_power_w
        return RowData(label, badge(s), s.history_w, now_w, s.total_energy_j, elapsed_s, lost,
                       s.device)

    @staticmethod
    def _group(label: str, g: GroupSample, elapsed_s: float) -> RowData:
        shown = f"[{g.lost} LOST]" if g.lost else f"[{g.provenance}]"
        return RowData(label, shown, g.history_w, g.now_w, g.total_energy_j, elapsed_s,
                       bool(g.lost))

    @staticmethod
    def _total(label: str, t: Totals, elapsed_s: float) -> RowData:
        # a total that lacks a lost domain says so, as the CSV's total row does
        shown = "[incomplete]" if t.lost else provenance_badge(t.provenance)
        return RowData(label, shown, t.history_w, t.power_w, t.total_energy_j, elapsed_s,
                       bool(t.lost))
