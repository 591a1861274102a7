"""One row per domain and one for the machine total, drawn from a list of columns.

A column is one :class:`Column` entry in :data:`COLUMNS`: its header, its width, how its
cell is computed from a :class:`RowData` (a domain's sample or the total, on one
footing), and from which table width it shows. The cells' CSS, the header, the rows and
the help screen's list of columns are all built from that list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from ...model import DeviceInfo, Domain, DomainSample, Snapshot, Status, Totals
from ...phases import average_power_w
from ...text import safe_text
from ..devices import device_text
from ..format import badge, fmt_energy, fmt_power, provenance_badge
from ._power_chart import TOTAL_MARKER, series_marker
from ._spark_line import SparkLine

#: sparkline points passed on (no row is wider)
SPARK_POINTS = 200


def _set(widget: Static, text: str) -> None:
    """Update only on change, and without a layout pass: every cell has a fixed size, and
    a re-layout per cell per frame is most of the UI's CPU."""
    if str(widget.content) != text:
        widget.update(text, layout=False)



def not_in_total_tag(d) -> str:
    """How a domain that is shown but not added to the total is tagged (no colour needed)."""
    if d.kind.value in ("core", "uncore"):
        return "(part)"  # inside its package: adding it would count its joules twice
    if d.kind.value == "psys":
        return "(whole)"  # the whole platform, package and dram included
    return "(excl)"


def row_name(d: Domain, above: set[str], room: int) -> str:
    """A domain's name cell (``room`` cells after its chart character), its tag always
    in full: a part (core, uncore) right under its package reads as indented into it
    (``└ core (part)``); any name too long for the room is cut (``…``) before its tag, so
    ``(part)`` never wraps onto a hidden second line. Escaped: a replayed file names its
    domains."""
    name, tag = safe_text(d.id), "" if d.in_total else f" {not_in_total_tag(d)}"
    parent, _, leaf = d.id.rpartition("/")
    if tag and parent in above:
        name = f"└ {safe_text(leaf)}"
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
    """Its cells' CSS class (``DomainRow > .power``)."""
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


def columns_css(selector: str, columns: Sequence[Column] = COLUMNS) -> str:
    """Each column's width and alignment, for the cells ``selector > .KEY``."""
    rules = []
    for c in columns:
        width = "1fr; margin-right: 1" if c.sparkline else str(c.width)
        rules.append(f"{selector} > .{c.key} {{ width: {width}; text-align: {c.align}; }}")
    return "\n".join(rules)


def _cell(column: Column, content: object) -> Widget:
    if column.sparkline:
        return SparkLine(classes=column.key)
    return Static(str(content), classes=column.key, markup=False)


def _fill(cell: Widget, content: object) -> None:
    if isinstance(cell, SparkLine):
        cell.data = content  # a reactive: repainted only when the values differ
    else:
        _set(cell, content)  # type: ignore[arg-type]


def _empty(label: str) -> RowData:
    """A row before its first snapshot."""
    return RowData(label, "", (), None, None, 0.0)

class DomainRow(Horizontal):
    """A domain (or the machine total) on one line: a cell per column of ``COLUMNS``."""

    DEFAULT_CSS = """
    DomainRow { height: 1; }
    DomainRow > Static { height: 1; }
    """ + columns_css("DomainRow")

    def __init__(self, key: str, name: str, marker: str = " ", **kw) -> None:
        super().__init__(**kw)
        self.key = key
        self.data = _empty(f"{marker} {name}")  # ``name`` escaped (row_name)
        self._cells: list[tuple[Callable[[RowData], object], Widget]] | None = None

    @property
    def label(self) -> str:
        return self.data.label

    def compose(self) -> ComposeResult:
        for column in COLUMNS:
            yield _cell(column, column.value(self.data))

    def show(self, data: RowData) -> None:
        """Fill the shown cells from ``data`` (each repaints only if its content changed)."""
        self.data = data
        if self._cells is None:  # looked up once: a query per cell per frame adds up
            # only the shown columns: a dropped one costs nothing (see columns_changed)
            self._cells = [(c.value, cell) for c, cell in zip(COLUMNS, self.children)
                           if cell.display]
        for value, cell in self._cells:
            _fill(cell, value(data))
        self.set_class(data.lost, "-lost")

    def columns_changed(self) -> None:
        """Columns were dropped or brought back: fill the shown cells again."""
        self._cells = None
        self.show(self.data)


class DomainTable(Vertical):
    """Every domain of the engine, in the engine's order, and the machine total."""

    DEFAULT_CSS = """
    DomainTable { height: auto; }
    DomainTable > .header { height: 1; text-style: bold; }
    """ + columns_css("DomainTable > .header")

    def __init__(self, domains: Sequence[Domain], **kw) -> None:
        super().__init__(**kw)
        self.domains = list(domains)
        self._rows: dict[str, DomainRow] | None = None
        self._shown: tuple[bool, ...] = ()  # which columns show at the current width
        self._devices = False  # a domain has had device readings

    def compose(self) -> ComposeResult:
        with Horizontal(classes="header"):
            for column in COLUMNS:
                yield Static(column.header, classes=column.key, markup=False)
        room = (_NAME.width or 0) - 2  # after the chart character and a space
        above: set[str] = set()
        for i, d in enumerate(self.domains):
            yield DomainRow(d.id, row_name(d, above, room), series_marker(i))
            above.add(d.id)
        yield DomainRow("total", "total", TOTAL_MARKER, classes="total")

    def on_resize(self, event: events.Resize) -> None:
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Drop the columns the table is too narrow for, or that have nothing to show
        (and bring them back)."""
        width = self.outer_size.width
        shown = tuple(width >= c.min_width and (self._devices or not c.needs_devices)
                      for c in COLUMNS)
        if shown == self._shown:
            return
        self._shown = shown
        for column, show in zip(COLUMNS, shown):
            for cell in self.query(f".{column.key}"):
                cell.display = show
        for row in self.query(DomainRow):  # a column back in view: its cells are stale
            row.columns_changed()

    def show(self, snap: Snapshot) -> None:
        if self._rows is None:  # the rows are composed once, never replaced
            self._rows = {r.key: r for r in self.query(DomainRow)}
        rows = self._rows
        if not self._devices and any(s.device is not None for s in snap.domains):
            self._devices = True
            self._fit_columns()
        for sample in snap.domains:
            row = rows.get(sample.domain.id)
            if row is not None:
                row.show(self._domain(row.label, sample, snap.elapsed_s))
        total = rows.get("total")
        if total is not None:
            total.show(self._total(total.label, snap.total, snap.elapsed_s))

    @staticmethod
    def _domain(label: str, s: DomainSample, elapsed_s: float) -> RowData:
        lost = s.status is Status.LOST
        # "now" is the hardware's own live reading where it has one (NVML's instant power
        # field), else the average over the last interval; the sparkline stays averages
        now_w = s.power_w if lost or s.instant_power_w is None else s.instant_power_w
        return RowData(label, badge(s), s.history_w, now_w, s.total_energy_j, elapsed_s, lost,
                       s.device)

    @staticmethod
    def _total(label: str, t: Totals, elapsed_s: float) -> RowData:
        return RowData(label, provenance_badge(t.provenance), t.history_w, t.power_w,
                       t.total_energy_j, elapsed_s)
