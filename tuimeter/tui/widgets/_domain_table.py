"""One row per domain: chart key, name, provenance badge, sparkline, power now, energy."""

from __future__ import annotations

from typing import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from ...model import Domain, DomainSample, Snapshot, Status, Totals
from ...text import safe_text
from ..format import badge, fmt_energy, fmt_power, provenance_badge
from ._power_chart import series_marker
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

class DomainRow(Horizontal):
    """A domain (or the machine total) on one line."""

    DEFAULT_CSS = """
    DomainRow { height: 1; }
    DomainRow > Static { height: 1; }
    DomainRow > .name { width: 20; }
    DomainRow > .badge { width: 13; }
    DomainRow > SparkLine { width: 1fr; margin-right: 1; }
    DomainRow > .power { width: 10; text-align: right; }
    DomainRow > .energy { width: 11; text-align: right; }
    """

    def __init__(self, key: str, name: str, marker: str = " ", **kw) -> None:
        super().__init__(**kw)
        self.key = key
        self._label = f"{marker} {safe_text(name)}"  # a replayed file names its domains
        self._cells: tuple[Static, SparkLine, Static, Static] | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._label, classes="name", markup=False)
        yield Static("", classes="badge", markup=False)
        yield SparkLine()
        yield Static("N/A", classes="power")
        yield Static("N/A", classes="energy")

    def show(self, badge_text: str, history: Sequence[float | None], power_w: float | None,
             energy_j: float | None, lost: bool = False) -> None:
        if self._cells is None:  # looked up once: a query per cell per frame adds up
            self._cells = (self.query_one(".badge", Static), self.query_one(SparkLine),
                           self.query_one(".power", Static), self.query_one(".energy", Static))
        badge_w, spark, power, energy = self._cells
        _set(badge_w, badge_text)
        spark.data = tuple(history[-SPARK_POINTS:])
        _set(power, fmt_power(power_w))
        _set(energy, fmt_energy(energy_j))
        self.set_class(lost, "-lost")


class DomainTable(Vertical):
    """Every domain of the engine, in the engine's order, and the machine total."""

    DEFAULT_CSS = """
    DomainTable { height: auto; }
    DomainTable > .header { height: 1; text-style: bold; }
    DomainTable > .header > .name { width: 20; }
    DomainTable > .header > .badge { width: 13; }
    DomainTable > .header > .spark { width: 1fr; }
    DomainTable > .header > .power { width: 10; text-align: right; }
    DomainTable > .header > .energy { width: 11; text-align: right; }
    """

    def __init__(self, domains: Sequence[Domain], **kw) -> None:
        super().__init__(**kw)
        self.domains = list(domains)
        self._rows: dict[str, DomainRow] | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="header"):
            yield Static("  domain", classes="name")
            yield Static("provenance", classes="badge")
            yield Static("power over time", classes="spark")
            yield Static("now", classes="power")
            yield Static("energy", classes="energy")
        for i, d in enumerate(self.domains):
            name = d.id if d.in_total else f"{d.id} {not_in_total_tag(d)}"
            yield DomainRow(d.id, name, series_marker(i))
        yield DomainRow("total", "total", " ", classes="total")

    def show(self, snap: Snapshot) -> None:
        if self._rows is None:  # the rows are composed once, never replaced
            self._rows = {r.key: r for r in self.query(DomainRow)}
        rows = self._rows
        for sample in snap.domains:
            row = rows.get(sample.domain.id)
            if row is not None:
                self._show_domain(row, sample)
        total = rows.get("total")
        if total is not None:
            self._show_total(total, snap.total)

    @staticmethod
    def _show_domain(row: DomainRow, s: DomainSample) -> None:
        lost = s.status is Status.LOST
        # "now" is the hardware's own live reading where it has one (NVML's instant power
        # field), else the average over the last interval; the sparkline stays averages
        now_w = s.power_w if lost or s.instant_power_w is None else s.instant_power_w
        row.show(badge(s), s.history_w, now_w, s.total_energy_j, lost)

    @staticmethod
    def _show_total(row: DomainRow, t: Totals) -> None:
        row.show(provenance_badge(t.provenance), t.history_w, t.power_w, t.total_energy_j)
