"""HTML (and plain-text) views of meters, phases and reports, for Jupyter's ``_repr_html_``.

Standard library only. Every text that ends up in the HTML (labels, hosts, domain ids,
provenance) goes through :func:`html.escape`: labels come from anyone who can mark a
session, and a session file can say anything. Numbers are formatted here, never trusted
as markup either.
"""

from __future__ import annotations

import html
import math

J_PER_WH = 3600.0
BLOCKS = "▁▂▃▄▅▆▇█"
_TABLE = '<table style="border-collapse:collapse;font-family:monospace">'
_CELL = ' style="padding:0 0.6em;text-align:{}"'


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def fmt(x: float | None, spec: str) -> str:
    """``N/A`` for a missing or non-finite number, else ``format(x, spec)``."""
    if x is None or not math.isfinite(x):
        return "N/A"
    return format(x, spec)


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def sparkline_text(values, width: int = 40) -> str:
    """Power as block characters (the last ``width`` values, min to max); "" if none."""
    vals = _finite(values)[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = hi - lo
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round((v - lo) / span * top) if span > 0 else top // 2] for v in vals)


def sparkline_svg(values, width: int = 160, height: int = 24) -> str:
    """Power as an inline SVG polyline (numbers only); "" if fewer than one value."""
    vals = _finite(values)
    if not vals:
        return ""
    if len(vals) == 1:
        vals = vals * 2
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    step = width / (len(vals) - 1)
    pts = " ".join(f"{i * step:.1f},{height - 1 - (v - lo) / span * (height - 2):.1f}"
                   for i, v in enumerate(vals))
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'style="vertical-align:middle"><polyline fill="none" stroke="currentColor" '
            f'stroke-width="1.5" points="{pts}"/></svg>')


def table(head: tuple, rows: list[tuple], caption: str = "") -> str:
    """An HTML table; every cell escaped; the first and last columns left-aligned."""
    def row(cells, tag):
        last = len(cells) - 1
        return "<tr>" + "".join(
            f"<{tag}{_CELL.format('left' if i in (0, last) else 'right')}>{_e(c)}</{tag}>"
            for i, c in enumerate(cells)) + "</tr>"

    cap = f"<caption style=\"text-align:left\">{_e(caption)}</caption>" if caption else ""
    return _TABLE + cap + row(head, "th") + "".join(row(r, "td") for r in rows) + "</table>"


PHASE_HEAD = ("phase", "duration s", "energy J", "Wh", "avg W", "g CO2e", "own J",
              "provenance")


def phase_cells(p) -> tuple:
    """A :class:`~tuimeter.api.Phase` as table cells: the machine's figures, then this
    process tree's own energy (the number to add up across ranks)."""
    return (p.label, fmt(p.duration_s, ".2f"), fmt(p.energy_j, ".3f"), fmt(p.wh, ".5f"),
            fmt(p.power_w, ".2f"), fmt(p.co2_g, ".5f"), fmt(p.own_energy_j, ".3f"),
            p.provenance)


def phase_html(p) -> str:
    return table(PHASE_HEAD, [phase_cells(p)])


def meter_html(meter) -> str:
    """A Meter: its phases so far, and how it measures (own sampler or attached)."""
    mode = "attached to a running session" if meter.attached else "own sampler"
    phases = meter.phases
    total = meter.energy_j
    cap = (f"tuimeter Meter ({mode}): {len(phases)} phase(s), {fmt(total, '.3f')} J, "
           f"own {fmt(meter.own_energy_j, '.3f')} J")
    return table(PHASE_HEAD, [phase_cells(p) for p in phases], cap)


def report_html(rep) -> str:
    """A :class:`~tuimeter.session.report.Report`: per host, its segments, then the total."""
    parts = []
    head = ("segment", "duration s", "energy J", "Wh", "g CO2e", "share", "provenance")
    for h in rep.hosts:
        rows = [(f"{s.index}. {s.label}", fmt(s.duration_s, ".1f"), fmt(s.energy_j, ".1f"),
                 fmt(s.energy_j / J_PER_WH, ".4f"), fmt(s.co2_g, ".4f"),
                 fmt(s.share * 100, ".1f") + "%", s.provenance) for s in h.segments]
        rows.append(("host total", fmt(h.duration_s, ".1f"), fmt(h.energy_j, ".1f"),
                     fmt(h.energy_j / J_PER_WH, ".4f"), fmt(h.co2_g, ".4f"), "", h.provenance))
        parts.append(table(head, rows, f"host {h.host}: {h.sessions} session(s)"))
    parts.append(f"<p><b>Total: {_e(fmt(rep.energy_j, '.1f'))} J, "
                 f"{_e(fmt(rep.co2_g, '.4f'))} g CO2e over {_e(fmt(rep.duration_s, '.1f'))} s, "
                 f"{_e(rep.provenance)}</b></p>")
    return "".join(parts)
