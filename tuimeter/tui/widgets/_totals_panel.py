"""Session totals: elapsed, power now and average, J, Wh, CO2e, and where CO2e comes from."""

from __future__ import annotations

import re

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.strip import Strip

from ...model import CarbonInfo, Snapshot
from ...phases import average_power_w
from ..format import (fmt_co2, fmt_duration, fmt_energy, fmt_power, fmt_wh,
                      provenance_badge)
from ._kept_strips import KeptStrips, StyledOnce, refresh_changed_lines


_BOLD = Style(bold=True)

#: a country's source text (``carbon.CountryIntensity.source``): ISO code and year
_COUNTRY_SOURCE = re.compile(r"([A-Z]{3}) [^:]*: [0-9.]+ g/kWh \((\d{4}),")


def is_world_average(c: CarbonInfo) -> bool:
    """The default figure, live or as a replayed file recorded it."""
    return c.is_default or c.source.startswith("default world average")


def grid_source(c: CarbonInfo) -> str:
    """Where the grid figure comes from, in a few cells (the help has the whole text):
    ``world avg``, a country's ``FRA 2023``, or nothing for a figure the user gave."""
    if is_world_average(c):
        return "world avg"
    m = _COUNTRY_SOURCE.match(c.source)
    if m and "guessed from time zone" in c.source:  # the help names the zone
        return f"{m[1]}? (time zone)"
    return f"{m[1]} {m[2]}" if m else ""


def totals_lines(snap: Snapshot) -> tuple[tuple[str, str], ...]:
    """The panel's lines as (name, value)."""
    t = snap.total
    avg = average_power_w(t.total_energy_j, snap.elapsed_s)
    c = snap.carbon
    lines = (
        ("Elapsed", fmt_duration(snap.elapsed_s)),
        ("Now", f"{fmt_power(t.power_w)} {provenance_badge(t.provenance)}"),
        ("Average", fmt_power(avg)),
        ("Energy", fmt_energy(t.total_energy_j)),
        ("", fmt_wh(t.total_energy_j)),
        ("CO2e", fmt_co2(t.total_co2_g)),
        ("Grid", f"{c.g_per_kwh:g} g/kWh {grid_source(c)}".rstrip()),
    )
    return lines + ((("PUE", f"{c.pue:g}"),) if c.pue != 1 else ())


def _name(name: str) -> str:
    return f"{name:<8}"


class TotalsPanel(StyledOnce):
    """The machine total for the whole session (sum of ``in_total`` domains): one widget
    drawn with the Line API, each line's strip kept until its text changes; a new snapshot
    repaints only the lines that did (the elapsed time and the energy, most seconds), and
    never asks for a layout (its size is fixed by its CSS)."""

    DEFAULT_CSS = """
    TotalsPanel { width: 34; height: 1fr; padding: 0 1; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._lines: tuple[tuple[str, str], ...] = ()
        self._strips = KeptStrips()  # each line's, with its (name, value) and width

    @property
    def lines_made(self) -> int:
        """Line strips made: a snapshot that changes two lines makes two."""
        return self._strips.made

    @property
    def content(self) -> Content:
        """What the panel shows (the names bold)."""
        parts: list = []
        for i, (name, value) in enumerate(self._lines):
            parts += ["\n"] * bool(i) + [(_name(name), "bold"), value]
        return Content.assemble(*parts)

    def show(self, snap: Snapshot) -> None:
        lines, old = totals_lines(snap), self._lines
        if lines == old:
            return
        self._lines = lines
        refresh_changed_lines(self, old, lines)

    def style_changed(self) -> None:
        self._strips.clear()  # drawn in the old style

    def render_line(self, y: int) -> Strip:
        width, base = self.size.width, self.base_style
        if not 0 <= y < len(self._lines):
            return Strip.blank(width, base)
        name, value = self._lines[y]
        # padded in the background's style alone, as a Static pads its text
        return self._strips.get(y, (name, value, width), lambda: Strip(
            [Segment(_name(name), base + _BOLD), Segment(value, base)]
        ).adjust_cell_length(width, Style(bgcolor=base.bgcolor)))
