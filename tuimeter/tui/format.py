"""Readable numbers for the UI: units scaled to the value, ``N/A`` for a missing one.

Every formatter takes the value in the base unit of its name (W, J, g, s) and returns a
short string with its unit; None (and NaN) become ``N/A``, never 0.
"""

from __future__ import annotations

import functools

from ..model import DomainSample, Provenance, Status

NA = "N/A"


def _missing(x: float | None) -> bool:
    return x is None or x != x


def _unsigned_zero(text: str) -> str:
    """``-0.0 J`` (a file's ``-0``, or a rounding error below what is shown) as
    ``0.0 J``: a sign on a figure that reads as zero says nothing true."""
    if text.startswith("-") and not any(c in "123456789" for c in text.split(" ")[0]):
        return text[1:]
    return text


def unsigned_zero(fmt):
    """A formatter whose figures never read ``-0``."""
    @functools.wraps(fmt)
    def wrapped(x, *args, **kw):
        return _unsigned_zero(fmt(x, *args, **kw))

    return wrapped


def _scaled(x: float, units: tuple[tuple[float, str], ...], digits: int = 1) -> str:
    for factor, unit in units:
        if abs(x) >= factor:
            return f"{x / factor:.{digits}f} {unit}"
    factor, unit = units[-1]
    return f"{x / factor:.{digits}f} {unit}"


@unsigned_zero
def fmt_power(w: float | None) -> str:
    """Watts: ``850 mW``, ``42.0 W``, ``1.25 kW``."""
    if _missing(w):
        return NA
    w += 0.0  # -0.0 (a file's "-0") is 0.0
    if abs(w) >= 1000:
        return f"{w / 1000:.2f} kW"
    if 0 < abs(w) < 1:
        mw = round(w * 1000)
        return f"{mw} mW" if mw else "0 mW"  # never "-0 mW" (idle/system at -0.3 mW)
    return f"{w:.1f} W"


@unsigned_zero
def fmt_share(share: float | None) -> str:
    """A share (0-1) as a percentage with one decimal: ``42.5`` (no sign: the column says
    %); ``N/A`` when not known (a replay: the session file records no CPU or GPU shares)."""
    if _missing(share):
        return NA
    return f"{100 * share:.1f}"


@unsigned_zero
def fmt_energy(j: float | None) -> str:
    """Joules: ``12.3 J``, ``4.56 kJ``, ``7.89 MJ``."""
    if _missing(j):
        return NA
    if abs(j) < 1000:
        return f"{j:.1f} J"
    return _scaled(j, ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")), 2)


@unsigned_zero
def fmt_wh(j: float | None) -> str:
    """Joules shown as watt-hours: ``0.123 Wh``, ``12.35 Wh``, ``1.234 kWh``."""
    if _missing(j):
        return NA
    wh = j / 3600.0
    if abs(wh) >= 1000:
        return f"{wh / 1000:.3f} kWh"
    if abs(wh) >= 10:
        return f"{wh:.2f} Wh"
    return f"{wh:.3f} Wh"


@unsigned_zero
def fmt_co2(g: float | None) -> str:
    """Grams CO2e: ``0.42 mg``, ``1.234 g``, ``5.67 kg`` (always with "CO2e")."""
    if _missing(g):
        return NA
    if abs(g) >= 1000:
        return f"{g / 1000:.2f} kg CO2e"
    if 0 < abs(g) < 0.1:
        return f"{g * 1000:.2f} mg CO2e"
    return f"{g:.3f} g CO2e"


def fmt_duration(s: float | None) -> str:
    """Seconds as ``h:mm:ss`` (``0:02:05``)."""
    if _missing(s):
        return NA
    s = max(0, int(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def fmt_interval(s: float) -> str:
    return f"{s:g} s"


def badge(sample: DomainSample) -> str:
    """Provenance as a word in brackets, so it reads without colour."""
    if sample.status is Status.LOST:
        return "[LOST]"
    return f"[{sample.domain.provenance}]"


def provenance_badge(prov: Provenance) -> str:
    return f"[{prov}]"
