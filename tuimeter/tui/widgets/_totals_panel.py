"""Session totals: elapsed, power now and average, J, Wh, CO2e, and where CO2e comes from."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...model import Snapshot
from ...phases import average_power_w
from ...text import safe_text
from ..format import (fmt_co2, fmt_duration, fmt_energy, fmt_power, fmt_wh,
                      provenance_badge)


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
        ("Grid", f"{c.g_per_kwh:g} g/kWh, PUE {c.pue:g}"),
        # a replay's source is the recorded file's text
        ("", safe_text(c.source.split(";")[0]) + (" (see --country)" if c.is_default else "")),
    ]
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
