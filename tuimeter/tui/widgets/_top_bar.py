"""The first line: host, elapsed, sampling interval, pause/replay state, tuimeter's own CPU."""

from __future__ import annotations

from rich.text import Text

from ...model import Snapshot
from ...text import safe_text
from ..format import fmt_duration, fmt_interval
from ._text_line import TextLine


class TopBar(TextLine):
    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; }
    """

    def show(self, snap: Snapshot | None, interval_s: float, paused: bool, mode: str = "",
             cpu_percent: float | None = None, frame_s: float = 0.0) -> None:
        """Drawn only when its text changed (the elapsed time moves once a second).
        ``frame_s``: the display's frame period; at a shorter interval the bar says how
        many frames a second are shown (every tick is still recorded)."""
        text = Text()
        text.append("tuimeter", style="bold")
        if snap is not None:
            text.append(f" · {safe_text(snap.host)}  {fmt_duration(snap.elapsed_s)}")
        text.append(f"  every {fmt_interval(interval_s)}")
        if 0 < interval_s < frame_s:
            text.append(f" (shown {1 / frame_s:g}/s)")
        if mode:
            text.append(f"  {mode}", style="bold")
        if paused:
            text.append("  PAUSED (still recording)", style="bold reverse")
        if cpu_percent is not None:
            text.append(f"  self {cpu_percent:.1f}% CPU", style="dim")
        self.update(text)  # repainted only if the text changed
