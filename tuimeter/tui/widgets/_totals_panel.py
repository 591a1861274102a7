"""Session totals: elapsed, power now and average, J, Wh, CO2e, and where CO2e comes from."""

from __future__ import annotations

import re

from textual.content import Content
from textual.widgets import Static

from ...model import CarbonInfo, Snapshot
from ...phases import average_power_w
from ..format import (fmt_co2, fmt_duration, fmt_energy, fmt_power, fmt_wh,
                      provenance_badge)


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
    return f"{m[1]} {m[2]}" if m else ""


def totals_text(snap: Snapshot) -> Content:
    t = snap.total
    avg = average_power_w(t.total_energy_j, snap.elapsed_s)
    c = snap.carbon
    lines = [
        ("Elapsed", fmt_duration(snap.elapsed_s)),
        ("Now", f"{fmt_power(t.power_w)} {provenance_badge(t.provenance)}"),
        ("Average", fmt_power(avg)),
        ("Energy", fmt_energy(t.total_energy_j)),
        ("", fmt_wh(t.total_energy_j)),
        ("CO2e", fmt_co2(t.total_co2_g)),
        ("Grid", f"{c.g_per_kwh:g} g/kWh {grid_source(c)}".rstrip()),
    ]
    if c.pue != 1:
        lines.append(("PUE", f"{c.pue:g}"))
    parts: list = []
    for i, (name, value) in enumerate(lines):
        if i:
            parts.append("\n")
        parts.append((f"{name:<8}", "bold"))
        parts.append(value)
    # Textual's own Content: a rich Text would be converted to one on every frame
    return Content.assemble(*parts)


class TotalsPanel(Static):
    """The machine total for the whole session (sum of ``in_total`` domains)."""

    DEFAULT_CSS = """
    TotalsPanel { width: 34; height: 1fr; padding: 0 1; }
    """

    def show(self, snap: Snapshot) -> None:
        text, shown = totals_text(snap), self.content
        if not isinstance(shown, Content) or (text.plain, text.spans) != (shown.plain,
                                                                          shown.spans):
            self.update(text, layout=False)  # fixed size: no re-layout
