"""Idle power per domain, and the split of a phase's energy into idle and dynamic.

``tuimeter baseline [--seconds S]`` samples the machine for S seconds (default 20) and
takes each domain's idle power as the lowest *steady* power it saw: the lowest mean of
:data:`STEADY_TICKS` consecutive ticks (as Kepler takes a GPU's idle power from the
lowest it has seen), so one low tick is not taken for idle. Run it while nothing but
tuimeter uses the CPU and GPUs; the file says when it was taken and how.

It is stored in the data folder (``$XDG_DATA_HOME/tuimeter/baseline.json``, next to the
``sessions`` folder), written to a new file and renamed over the old one (never through a
link). A phase's ``idle_energy_j`` is each counted domain's idle power x the time it was
measured in the phase; ``dynamic_energy_j`` the rest (never below 0 per domain).

Everything read back is checked: a file that is not this format, from another host, or
with an impossible power is refused with one line (no baseline: the split is unknown).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

SCHEMA = 1
DEFAULT_SECONDS = 20.0
#: ticks averaged into one steady power
STEADY_TICKS = 3
#: the highest idle power believed, W (a node of 8 GPUs idles far below it)
MAX_IDLE_W = 1e5
METHOD = f"lowest mean of {STEADY_TICKS} consecutive ticks"


class BaselineError(ValueError):
    """A baseline file that cannot be used; ``str()`` is one line."""


@dataclass(frozen=True)
class Baseline:
    """Idle power per domain (W), when it was taken (``taken_at``: ISO 8601 UTC) and on
    which host, over how many seconds, by which method."""

    host: str
    taken_at: str
    seconds: float
    idle_w: dict  # domain id -> W
    method: str = METHOD
    #: the machine's CPU use during the baseline, % of all CPUs (None: not known)
    cpu_busy_pct: float | None = None
    #: each GPU's mean utilisation during the baseline, % (NVML; {}: no GPU read)
    gpu_busy_pct: dict = field(default_factory=dict)

    def describe(self) -> str:
        return f"baseline of {self.taken_at} on {self.host} ({self.seconds:g} s, {self.method})"

    def split(self, domains: Mapping[str, float], duration_s: float,
              lost_s: Mapping[str, float] | None = None) -> tuple[float, float] | None:
        """(idle J, dynamic J) of the counted ``domains`` (id -> J) over ``duration_s``;
        None when no counted domain has a baseline. A domain's idle energy is its idle
        power x the time it was measured, at most its energy."""
        idle = dyn = 0.0
        known = False
        for dom, energy in domains.items():
            w = self.idle_w.get(dom)
            if w is None or energy is None:
                continue
            known = True
            part = min(energy, w * max(0.0, duration_s - (lost_s or {}).get(dom, 0.0)))
            idle += part
            dyn += energy - part
        return (idle, dyn) if known else None


def default_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_DATA_HOME/tuimeter/baseline.json`` (the data folder's parent of ``sessions``)."""
    from .config import default_data_dir

    return default_data_dir(env).parent / "baseline.json"


def idle_powers(series: Mapping[str, list[float]], ticks: int = STEADY_TICKS) -> dict:
    """Per domain, the lowest mean of ``ticks`` consecutive powers (W); a domain with
    fewer readings than that is left out."""
    out = {}
    for dom, powers in series.items():
        vals = [p for p in powers if p is not None and math.isfinite(p)]
        if len(vals) < ticks:
            continue
        out[dom] = min(sum(vals[i:i + ticks]) / ticks for i in range(len(vals) - ticks + 1))
    return out


def save(baseline: Baseline, path: Path) -> None:
    """Write ``baseline`` to ``path``: a new file beside it, renamed over it (a link at
    ``path`` is replaced, never written through)."""
    doc = {"schema": SCHEMA, "host": baseline.host, "taken_at": baseline.taken_at,
           "seconds": baseline.seconds, "method": baseline.method,
           "cpu_busy_pct": baseline.cpu_busy_pct,
           "gpu_busy_pct": baseline.gpu_busy_pct,
           "domains": {d: {"idle_w": w} for d, w in baseline.idle_w.items()}}
    write_json(doc, path)


def write_json(doc: dict, path: Path) -> None:
    """Write ``doc`` as JSON to ``path`` in the data folder (made 0700 if missing): a new
    file beside it (``O_EXCL|O_NOFOLLOW``, mode 0600), renamed over it (a link at
    ``path`` is replaced, never written through)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(path: Path, host: str | None = None, any_host: bool = False) -> Baseline:
    """The baseline at ``path``; :class:`BaselineError` (one line) for a missing or bad
    file, or one taken on another host than ``host`` (default: this one; ``any_host``:
    whichever it names, for a report that applies it to that host's segments only)."""
    host = socket.gethostname() if host is None else host
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.loads(fh.read(1 << 20))
    except FileNotFoundError:
        raise BaselineError(f"no baseline at {path}: run `tuimeter baseline` while the "
                            f"machine is idle") from None
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: not a baseline file ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA \
            or not isinstance(doc.get("domains"), dict):
        raise BaselineError(f"{path}: not a baseline file (schema {SCHEMA})")
    if not isinstance(doc.get("host"), str):
        raise BaselineError(f"{path}: not a baseline file (no host)")
    if doc["host"] != host and not any_host:
        raise BaselineError(f"{path}: taken on another host ({str(doc.get('host'))[:40]!r}); "
                            f"run `tuimeter baseline` here")
    idle = {}
    for dom, entry in doc["domains"].items():
        w = entry.get("idle_w") if isinstance(entry, dict) else None
        if isinstance(w, bool) or not isinstance(w, (int, float)) \
                or not 0 <= w <= MAX_IDLE_W or not isinstance(dom, str) or len(dom) > 200:
            raise BaselineError(f"{path}: domain {str(dom)[:40]!r} has no idle power "
                                f"from 0 to {MAX_IDLE_W:g} W")
        idle[dom] = float(w)
    seconds = doc.get("seconds")
    return Baseline(str(doc["host"]), str(doc.get("taken_at", "?"))[:40],
                    float(seconds) if isinstance(seconds, (int, float)) else 0.0, idle,
                    str(doc.get("method", METHOD))[:80])


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
