"""The counters' update periods that ``tuimeter doctor`` measured on this host, stored.

A phase shorter than :data:`tuimeter.phases.FEW_UPDATES` updates of a counter is
``interpolated`` (phases.py). The nominal periods (:data:`tuimeter.phases.UPDATE_PERIOD_S`:
NVML 100 ms, RAPL 1 ms) are what the vendors document; older NVML systems update every
10-20 ms, and a given GPU may be slower (SENSORS.md: measure it, don't assume it). So
``tuimeter doctor`` stores what it measured in the data folder
(``$XDG_DATA_HOME/tuimeter/update_periods.json``, beside ``baseline.json``), and Meters
and ``report`` use it for that host's domains, saying so (``Phase.update_period_note``:
``measured by doctor on <date>``); elsewhere the nominal period (``nominal``).

Per counter kind (``rapl``, ``nvml``) the file keeps the slowest counter measured (a phase
is short for the slowest counter it holds) and each counter's own figure. Everything read
back is checked: another host's file, another format or an impossible period (not
finite, <= 0 or above :data:`MAX_PERIOD_S`) is not used (the nominal period is).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

SCHEMA = 1
#: the longest update period believed, s (a counter slower than this is stuck, not slow)
MAX_PERIOD_S = 10.0
#: the doctor's report sections -> the counter kind of their domains' sources
_SECTIONS = {"rapl": ("zones", "zone"), "nvml": ("gpus", "index")}
#: what a stored ``taken_at`` may hold (it is shown in provenances): an ISO 8601 instant
_WHEN = re.compile(r"[0-9][0-9T:+.Z-]{0,39}")


@dataclass(frozen=True)
class MeasuredPeriods:
    """Update periods measured on ``host`` at ``taken_at`` (ISO 8601 UTC): per counter
    kind the slowest (s), and per counter (``counters``: kind -> counter -> s)."""

    host: str
    taken_at: str
    periods_s: dict  # kind -> s
    counters: dict = field(default_factory=dict)

    @property
    def note(self) -> str:
        """Where a period comes from, for a provenance: ``measured by doctor on <date>``."""
        return f"measured by doctor on {self.taken_at}"


def default_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_DATA_HOME/tuimeter/update_periods.json`` (beside ``baseline.json``)."""
    from .baseline import default_path as baseline_path

    return baseline_path(env).with_name("update_periods.json")


def _plausible(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 < value <= MAX_PERIOD_S)


def from_report(report: Mapping) -> MeasuredPeriods | None:
    """The periods a doctor report measured (``update_period_s`` per RAPL zone and GPU);
    None when it measured none (no sensor, or every counter idle)."""
    sensors = report.get("sensors") or {}
    kinds: dict = {}
    for kind, (section, key) in _SECTIONS.items():
        for entry in (sensors.get(kind) or {}).get(section) or ():
            period = entry.get("update_period_s")
            if _plausible(period):
                kinds.setdefault(kind, {})[str(entry.get("domain") or entry.get(key))] = period
    if not kinds:
        return None
    from .baseline import now_iso

    return MeasuredPeriods(str(report.get("host") or ""), now_iso(),
                           {k: max(c.values()) for k, c in kinds.items()}, kinds)


def save(periods: MeasuredPeriods, path: Path) -> None:
    """Write ``periods`` to ``path`` (a new file renamed over it; never through a link)."""
    from .baseline import write_json

    write_json({"schema": SCHEMA, "host": periods.host, "taken_at": periods.taken_at,
                "kinds": {k: {"update_period_s": s, "counters": periods.counters.get(k, {})}
                          for k, s in periods.periods_s.items()}}, path)


def load(host: str | None, path: Path | None = None) -> MeasuredPeriods | None:
    """The periods stored for ``host`` (None: none stored, another host's, or a file
    that is not this format: then the nominal periods hold). A kind whose period is
    impossible is left out."""
    if not host:
        return None
    path = default_path() if path is None else path
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("host") != host \
            or not isinstance(doc.get("kinds"), dict):
        return None
    periods = {k: e["update_period_s"] for k, e in doc["kinds"].items()
               if k in _SECTIONS and isinstance(e, dict) and _plausible(e.get("update_period_s"))}
    if not periods:
        return None
    when = doc.get("taken_at")
    when = when if isinstance(when, str) and _WHEN.fullmatch(when) else "an unknown date"
    return MeasuredPeriods(host, when, periods)
