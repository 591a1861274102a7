"""Which sensors are in use, and each unavailable one with its reason and fix."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.widgets import Static

from ...model import SensorStatus


def status_text(sensors: Sequence[SensorStatus], detail: bool = True, extra: str = "") -> Text:
    ok = [s for s in sensors if s.available]
    missing = [s for s in sensors if not s.available]
    text = Text()
    text.append("Sensors: ", style="bold")
    text.append(", ".join(f"{s.name} ok" for s in ok) or "none found")
    for s in missing:
        text.append(" | ")
        text.append(f"{s.name} unavailable", style="bold")
        text.append(f": {s.reason}")
        if detail and s.fix:
            text.append(f" Fix: {s.fix}")
    if extra:  # exporter trouble: server down, points dropped
        text.append(" | ")
        text.append(extra, style="bold")
    return text


class SensorStatusLine(Static):
    """One or two lines at the bottom; the help screen (?) has the full text."""

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
            self.update(status_text(key[0], extra=extra))
