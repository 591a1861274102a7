"""Which sensors are in use, and each unavailable one with its reason and fix."""

from __future__ import annotations

import re
from typing import Sequence

from rich.text import Text
from textual.widgets import Static

from ...model import SensorStatus
from ...text import safe_text


#: a short reason is cut to this many characters at most
SHORT_MAX = 40
_CANNOT = re.compile(r"^cannot (?:read|open|use|start) \S+?: (.+)$", re.I)
_LIBRARY = re.compile(r"^(.+?) library \S+ not found", re.I)
_CLAUSE = re.compile(r" \(|; |: |, | - ")
_PATH = re.compile(r" (?:at|under|in) /\S*")


def short_reason(reason: str) -> str:
    """A few words for the status line, from the reason's first clause:
    ``cannot read PATH: permission denied (...)`` -> ``permission denied``,
    ``NVIDIA driver library libnvidia-ml.so.1 not found`` -> ``no NVIDIA driver``."""
    text = _PATH.sub("", reason.strip())  # "no RAPL zones under /sys/...": the path is help
    m = _CANNOT.match(text)
    if m:  # "cannot read PATH: Permission denied": the OS error says it
        text = m.group(1)
        text = text[:1].lower() + text[1:]
    text = _CLAUSE.split(text, maxsplit=1)[0].strip()
    m = _LIBRARY.match(text)
    if m:
        text = f"no {m.group(1)}"
    if len(text) > SHORT_MAX:
        text = text[:SHORT_MAX - 1].rsplit(" ", 1)[0] + "…"
    return text or "unavailable"


def status_text(sensors: Sequence[SensorStatus], detail: bool = True, extra: str = "") -> Text:
    """Every sensor: in use (``ok``), or unavailable with its reason and fix (``detail``,
    the help screen) or a short reason and ``? for the fix`` (the status line)."""
    ok = [s for s in sensors if s.available]
    missing = [s for s in sensors if not s.available]
    text = Text()
    text.append("Sensors: ", style="bold")
    if missing and not detail:  # first: a line cut at 80 columns still says where to look
        fixes = sum(1 for s in missing if s.fix)
        text.append("(? for the fixes) " if fixes > 1 else "(? for the fix) " if fixes
                    else "(? for details) ")
    text.append(", ".join(f"{s.name} ok" for s in ok) or "none found")
    for s in missing:
        text.append(" | ")
        if not detail:
            text.append(f"{s.name}: ", style="bold")
            text.append(safe_text(short_reason(s.reason)))
            continue
        text.append(f"{s.name} unavailable", style="bold")
        text.append(f": {safe_text(s.reason)}")  # reasons quote files, errors, paths
        if s.fix:
            text.append(f" Fix: {safe_text(s.fix)}")
    if extra:  # exporter trouble: server down, points dropped
        text.append(" | ")
        text.append(safe_text(extra), style="bold")  # a server's own error text
    return text


class SensorStatusLine(Static):
    """One or two lines at the bottom, each unavailable sensor with a short reason; the
    help screen (?) has the full reasons and fixes."""

    DEFAULT_CSS = """
    SensorStatusLine { height: auto; max-height: 2; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("Sensors: ...", markup=False, **kw)
        self._last: tuple = ()

    def show(self, sensors: Sequence[SensorStatus], extra: str = "") -> None:
        key = (tuple(sensors), extra)
        if key != self._last:
            self._last = key
            self.update(status_text(key[0], detail=False, extra=extra))
