"""Top processes by attributed power (filled by process attribution), or a note why not."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ...model import Snapshot
from ...text import safe_text
from ..format import fmt_energy, fmt_power

#: rows shown at most (the table scrolls no further: it is a glance, not a process list)
MAX_ROWS = 8


class ProcessPanel(Vertical):
    """``mode``: "on" (an attributor runs), "off" (--no-attribution), "replay" or
    "unavailable" (no attribution module)."""

    DEFAULT_CSS = """
    ProcessPanel { height: auto; max-height: 25%; }
    ProcessPanel > .note { height: 1; }
    ProcessPanel > DataTable { height: auto; max-height: 9; }
    """

    def __init__(self, mode: str = "unavailable", **kw) -> None:
        super().__init__(**kw)
        self.mode = mode

    def compose(self) -> ComposeResult:
        yield Static(self._note(None), classes="note", markup=False)
        table: DataTable = DataTable(show_cursor=False, zebra_stripes=False)
        table.add_columns("PID", "process", "CPU %", "GPU %", "power", "energy")
        table.display = False
        yield table

    def _note(self, snap: Snapshot | None) -> str:
        if self.mode == "off":
            return "Processes: attribution off (--no-attribution)"
        if self.mode == "replay":
            return "Processes: not replayed (a replay shows the recorded domains)"
        if self.mode != "on":
            return "Processes: process attribution not available in this build"
        if snap is None or not snap.processes:
            return "Processes: waiting for the first interval"
        idle = "" if snap.idle_power_w is None else f"; idle/system {fmt_power(snap.idle_power_w)}"
        return f"Processes (power attributed by CPU/GPU share){idle}"

    def show(self, snap: Snapshot) -> None:
        note, text = self.query_one(".note", Static), self._note(snap)
        if str(note.content) != text:
            note.update(text, layout=False)
        table = self.query_one(DataTable)
        if table.display != bool(snap.processes):
            table.display = bool(snap.processes)
        if not snap.processes:
            return
        table.clear()
        for p in snap.processes[:MAX_ROWS]:
            # any user names their processes: escaped, and a Text (a str cell is markup)
            table.add_row(str(p.pid), Text(safe_text(p.name)[:24]), f"{100 * p.cpu_share:.1f}",
                          f"{100 * p.gpu_share:.1f}", fmt_power(p.power_w),
                          fmt_energy(p.total_energy_j))
