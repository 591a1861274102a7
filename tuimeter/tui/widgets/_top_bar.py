"""The first line: host, elapsed, sampling interval, pause/replay state, tuimeter's own CPU."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...model import Snapshot
from ...text import safe_text
from ..format import fmt_duration, fmt_interval


class TopBar(Static):
    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; }
    """

    def show(self, snap: Snapshot | None, interval_s: float, paused: bool, mode: str = "",
             cpu_percent: float | None = None) -> None:
        text = Text()
        text.append("tuimeter", style="bold")
        if snap is not None:
            text.append(f" · {safe_text(snap.host)}  {fmt_duration(snap.elapsed_s)}")
        text.append(f"  every {fmt_interval(interval_s)}")
        if mode:
            text.append(f"  {mode}", style="bold")
        if paused:
            text.append("  PAUSED (still recording)", style="bold reverse")
        if cpu_percent is not None:
            text.append(f"  self {cpu_percent:.1f}% CPU", style="dim")
        self.update(text, layout=False)  # one line, fixed size
