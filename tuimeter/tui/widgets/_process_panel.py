"""The process table: the processes attribution shows, one row each, with a cursor.

The panel computes the rows at each frame (:mod:`tuimeter.tui.process_rows`: grouping,
filter, sort, tree) and their cells, and hands them to one :class:`ProcessTable`
(``_process_table.py``: a Line API widget), which repaints only the lines whose cells
changed. The panel's height is set by the screen (40 % of it, 6 lines when compact), not
by its rows: processes come and go every second, and a frame never re-lays out the screen
(more rows than lines scroll). Until the user moves the cursor it stays on the first row
and the view at the top; after, the cursor follows the process it was on (processes are
keyed by pid and start time, ``ProcessPanel.selected_key``) and the view keeps it shown.

Keys (while the table or its filter has the focus; the footer shows them): ``s`` / ``S``
next sort order / reverse it, ``/`` filter, ``t`` tree, Enter the selected process's
details, ``k`` / ``K`` SIGTERM / SIGKILL it (after a confirmation). The mouse: a click on a
column header sorts by it (again: reversed), a click on a row selects it, a click on the
selected row opens its details.

Every name, command line and user is text from outside: drawn as a ``Text`` through
``safe_text``, never as markup.
"""

from __future__ import annotations

import signal as _signal
import time
from typing import Callable

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input

from ...engine import procsignal
from ...engine.procsignal import user_name
from ...model import Snapshot
from ...text import safe_text
from ..format import fmt_energy, fmt_power, fmt_share
from ..process_rows import GROUPINGS, SORT_BY_COLUMN, SORTS, Row, arrange, with_every_process
from ..process_screens import ProcessDetailScreen, SignalScreen
from ._process_table import Cells, Column, ProcessTable
from ._text_line import TextLine

#: the keys, as the help screen lists them
PROCESS_KEYS = (
    ("s / S", "next sort order / reverse it (or click a column header)"),
    ("/", "filter by name, command line, user or pid; Esc clears"),
    ("t", "tree: children under their parent, the followed job first"),
    ("↑ ↓", "move the cursor (PgUp, PgDn, Home, End, the mouse wheel too)"),
    ("Enter", "details of the selected process, its full command line"),
    ("k / K", "SIGTERM / SIGKILL the selected process, after asking"),
    ("ctrl+p", "command palette: every action; Theme (remembered)"),
)

#: below this table width the USER column is left out
USER_MIN_WIDTH = 100


#: while filtering, how often every process is scanned again, s
SCAN_EVERY_S = 2.0
#: the table's figures are drawn again at most this often, session seconds (htop: 1.5 s)
PROCESS_EVERY_S = 2.0


def _columns(width: int) -> tuple[Column, ...]:
    """The columns at table width ``width``: COMMAND takes what the others leave."""
    cols = [Column("job", "J", 1, False), Column("pid", "PID", 7)]
    if width >= USER_MIN_WIDTH:
        cols.append(Column("user", "USER", 8, False))
    cols += [Column("cpu", "CPU%", 5), Column("gpu", "GPU%", 5), Column("power", "POWER", 8),
             Column("energy", "ENERGY", 9)]
    used = sum(c.width + 2 for c in cols) + 2  # each cell's padding, the command's
    cols.append(Column("command", "COMMAND", max(12, width - used), False))
    return tuple(cols)


#: a column's text from a row (COMMAND apart: its parts have styles of their own)
_VALUES: dict[str, Callable[[Row], str]] = {
    "job": lambda r: "J" if r.in_job else "",
    "pid": lambda r: "" if r.pid is None else str(r.pid),
    # a process that ended before its owner was read (or a replay: not recorded): N/A;
    # a row that is no process (the job, a cgroup) has no one user
    "user": lambda r: safe_text(user_name(r.uid)) if r.uid is not None else
    ("N/A" if r.pid is not None else ""),
    "cpu": lambda r: fmt_share(r.cpu_share),
    "gpu": lambda r: fmt_share(r.gpu_share),
    "power": lambda r: fmt_power(r.power_w),
    "energy": lambda r: fmt_energy(r.energy_j),
}


def _cells(row: Row, prefix: str, cols: tuple[Column, ...]) -> Cells:
    """A row's cells, as Text (a str cell would be read as markup)."""
    style = "bold" if row.in_job else ""
    out = []
    for c in cols:
        key = c.key
        if key == "command":
            text = Text(safe_text(prefix), style="dim")
            text.append(safe_text(row.name), style="bold")
            if row.args:
                text.append(" " + safe_text(row.args), style="dim" if not row.in_job else "")
            text.truncate(c.width, overflow="ellipsis")
            out.append(text)
            continue
        out.append(Text(_VALUES[key](row), style=style))
    return tuple(out)


class FilterInput(Input):
    """The filter's text: rows whose name, command line, user or pid hold it."""

    def allow_focus(self) -> bool:
        """Only while shown (a hidden input would take the keys typed at the table)."""
        return self.has_class("-shown")


class ProcessPanel(Vertical):
    """A note (why there are no rows, or the sort, filter and idle power), the filter
    input (shown by ``/``) and the table. ``mode``: "on" (an attributor runs), "off"
    (--no-attribution), "replay" or "unavailable" (no attribution module).

    Its height: the note's line while there are no rows; with rows (class ``-rows``)
    40 % of the screen (app.tcss: 6 lines when compact), whatever their number."""

    DEFAULT_CSS = """
    ProcessPanel { height: auto; }
    ProcessPanel.-rows { height: 40%; }
    ProcessPanel > .note { height: 1; }
    ProcessPanel > FilterInput, ProcessPanel > FilterInput:focus {
        height: 1; border: none; padding: 0 1; display: none;
    }
    ProcessPanel > FilterInput.-shown { display: block; }
    """

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", group=Binding.Group("Sort")),
        Binding("S", "reverse_sort", "Reverse", key_display="S", group=Binding.Group("Sort")),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("t", "tree", "Tree"),
        # in the help, the palette and the details (Enter), not the footer: ? and q fit
        Binding("k", "signal('TERM')", "TERM", show=False),
        Binding("K", "signal('KILL')", "KILL", key_display="K", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    sort_index: reactive[int] = reactive(0)
    """The sort order, an index into ``process_rows.SORTS`` (``s`` steps through them)."""
    reverse: reactive[bool] = reactive(False)
    """The sort order reversed (``S``)."""
    filter_text: reactive[str] = reactive("")
    """Rows shown hold this in their name, command line, user or pid ("" : all rows)."""
    tree_view: reactive[bool] = reactive(False)
    """Rows drawn as a tree of parents and children (``t``)."""
    group_by: reactive[str] = reactive("process")
    """What a row is: a key of ``process_rows.GROUPINGS`` ("process": one process)."""

    def __init__(self, mode: str = "unavailable", scan: Callable[[], list[Row]] | None = None,
                 **kw) -> None:
        """``scan``: every process on the machine as rows (``every_process_rows``), which
        the filter looks through too; None: only the snapshot's rows."""
        super().__init__(**kw)
        self.mode = mode
        self.scan = scan
        self.snapshot: Snapshot | None = None
        self._shown_at: tuple | None = None  # (session s, _who) of the snapshot drawn
        """The snapshot of the rows drawn."""
        self.rows: list[tuple[Row, str]] = []
        """What the table shows, in order: each row with its tree prefix."""
        self._keys: list[str] = []  # the rows' keys, as drawn
        self.every_process: list[Row] = []
        """While filtering a live view: every process the last scan saw (at 0 W), so the
        filter finds idle ones the snapshot's top processes leave out."""
        self._scanned_at = -SCAN_EVERY_S  # monotonic time of the last such scan

    def compose(self) -> ComposeResult:
        # kept, not queried at each frame (a query walks the DOM)
        self._note_line = TextLine(self._note(None), classes="note")
        self._box = FilterInput(placeholder="filter: name, command line, user or pid "
                                            "(Enter keeps it, Esc clears)")
        self.table = ProcessTable()
        self.table.display = False
        yield self._note_line
        yield self._box
        yield self.table

    @property
    def sort(self):
        return SORTS[self.sort_index]

    # -- the note -----------------------------------------------------------------
    def _note(self, snap: Snapshot | None) -> str:
        if self.mode == "off":
            return "Processes: attribution off (--no-attribution)"
        if self.mode == "replay" and (snap is None or not self._source(snap)):
            return "Processes: not replayed (a replay shows the recorded domains)"
        if self.mode not in ("on", "replay"):
            return "Processes: process attribution not available in this build"
        if snap is None or not self._source(snap):
            return "Processes: waiting for the first interval"
        state = f"by {self.sort.name} {'▼' if self.sort.descending != self.reverse else '▲'}"
        if self.tree_view:
            state += ", tree"
        if self.filter_text:
            state += f', filter "{safe_text(self.filter_text)}" ({len(self.rows)} shown)'
        idle = "" if snap.idle_power_w is None else f"; idle/system {fmt_power(snap.idle_power_w)}"
        what = {"job": "Job and processes", "cgroup": "Cgroups"}.get(self.group_by, "Processes")
        return f"{what} {state}{idle}  (power attributed by CPU/GPU share)"

    def _source(self, snap: Snapshot) -> bool:
        return bool(snap.processes) or (snap.job is not None and bool(snap.job.members))

    # -- drawing ------------------------------------------------------------------
    def show(self, snap: Snapshot) -> None:
        """Draw ``snap``'s processes (the table repaints the lines that changed), at most
        every :data:`PROCESS_EVERY_S` of session time (as htop's delay): the table was
        half of what a frame cost (live, the top processes change each tick: a process
        that came shows within 2 s, as in htop). At once when the job's state changed or
        a key (sort, filter, tree, grouping) was pressed."""
        shown = self._shown_at
        self.snapshot = snap
        if (shown is not None and 0 <= snap.elapsed_s - shown[0] < PROCESS_EVERY_S - 1e-6
                and shown[1] == self._who(snap)):
            return
        self._draw()

    @staticmethod
    def _who(snap: Snapshot) -> tuple | None:
        """Whether a job runs, and its number of processes."""
        job = snap.job
        return None if job is None else (job.running, len(job.members))

    def _draw(self) -> None:
        snap = self.snapshot
        if snap is not None:
            self._shown_at = (snap.elapsed_s, self._who(snap))
        table = self.table
        rows_of: Callable[[Snapshot], list[Row]] = GROUPINGS.get(self.group_by,
                                                                 GROUPINGS["process"])
        rows = rows_of(snap) if snap is not None else []
        if (self.filter_text and self.scan is not None and self.mode == "on"
                and self.group_by == "process"):
            self._scan_when_due()
            rows = with_every_process(rows, self.every_process)
        self.rows = arrange(rows, self.sort, self.reverse, self.filter_text,
                            self.tree_view and self.group_by == "process")
        note = self._note_line
        text = self._note(snap)
        note.update(text)  # repainted if it changed
        # no rows yet / rows: a new height (a layout, once). A table shown stays shown
        # when a tick has no rows (at 0.1 s, a tick where no process's CPU time moved):
        # hiding it re-laid out the screen, took the focus and rebuilt the footer
        shown = bool(rows) or table.display
        if table.display != shown:
            table.display = shown
            self.set_class(shown, "-rows")
            if shown and self.screen.focused is None:
                table.focus()  # the keys above work from the first rows on
        if not shown:
            return
        selected = self.selected_key
        cols = _columns(self.size.width)
        table.set_columns(cols, [self._label(c) for c in cols])
        keys = [r.key for r, _ in self.rows]
        if not table.moved:  # the view stays at the top until the user moves the cursor
            cursor = 0
        else:  # then the cursor follows its process, kept in view
            cursor = keys.index(selected) if selected in keys else table.cursor_row
        table.set_rows([_cells(r, prefix, cols) for r, prefix in self.rows], cursor)
        self._keys = keys

    def _label(self, col: Column) -> Text:
        sort = self.sort
        label = col.label
        if sort.column == col.key:
            label += "▼" if sort.descending != self.reverse else "▲"
        return Text(label)

    def on_resize(self, event: events.Resize) -> None:
        if self.snapshot is not None:
            self._draw()  # the columns for the new width

    def _scan_when_due(self) -> None:
        now = time.monotonic()
        if now - self._scanned_at >= SCAN_EVERY_S:
            self._scanned_at = now
            self._scan_every_process()

    @work(thread=True, exclusive=True, group="process-scan")
    def _scan_every_process(self) -> None:
        rows = self.scan()
        try:
            self.app.call_from_thread(self._scanned, rows)
        except RuntimeError:  # the app has ended meanwhile
            pass

    def _scanned(self, rows: list[Row]) -> None:
        self.every_process = rows
        if self.filter_text:
            self._redraw()

    def watch_filter_text(self, text: str) -> None:
        if not text:
            self.every_process = []  # not kept while there is no filter
            self._scanned_at = -SCAN_EVERY_S
        self._redraw()

    def _redraw(self) -> None:
        """The order, filter or tree changed: draw again (new headers)."""
        if self.is_mounted:
            self._draw()

    watch_sort_index = watch_reverse = watch_tree_view = watch_group_by = \
        lambda self: self._redraw()

    # -- the selection --------------------------------------------------------------
    @property
    def selected_key(self) -> str | None:
        """The key (pid and start time) of the process under the cursor, or None."""
        row = self.table.cursor_row
        return self._keys[row] if 0 <= row < len(self._keys) else None

    @property
    def selected(self) -> Row | None:
        """The row under the cursor (as last drawn), or None."""
        key = self.selected_key
        return next((r for r, _ in self.rows if r.key == key), None)

    def on_process_table_selected(self, event: ProcessTable.Selected) -> None:
        """Enter, or a click on the selected row: the details."""
        event.stop()
        self.action_details()

    def on_process_table_header_clicked(self, event: ProcessTable.HeaderClicked) -> None:
        """A click on a column header sorts by that column; again: reversed."""
        event.stop()
        sort = SORT_BY_COLUMN.get(event.column)
        if sort is None:
            return
        if sort is self.sort:
            self.reverse = not self.reverse
        else:
            self.sort_by(SORTS.index(sort))

    # -- keys -------------------------------------------------------------------------
    def sort_by(self, index: int) -> None:
        """Sort by ``SORTS[index]``, in its own direction."""
        self.sort_index, self.reverse = index % len(SORTS), False

    def action_cycle_sort(self) -> None:
        self.sort_by(self.sort_index + 1)

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse

    def action_tree(self) -> None:
        self.tree_view = not self.tree_view

    def action_filter(self) -> None:
        box = self._box
        box.add_class("-shown")
        box.value = self.filter_text
        self._focus(box)

    def action_clear_filter(self) -> None:
        box = self._box
        had = bool(self.filter_text) or box.has_class("-shown")
        box.remove_class("-shown")
        self.filter_text = ""
        if had and self.table.display:
            self._focus(self.table)

    def on_key(self, event: events.Key) -> None:
        """Keys that come up from the table. ``/`` opens the filter here, not through the
        binding (which runs only once the key has reached the app): the keys typed with it
        (a paste, a fast typist: "/yes" in one read) were already queued to the table, and
        come up here next; they go into the filter, Enter and Esc act as in it."""
        box = self._box
        if not box.has_class("-shown"):
            if event.key == "slash":
                event.stop()
                event.prevent_default()
                self.action_filter()
            return
        if self.screen.focused is not box:
            return
        if event.key == "enter":
            self.on_input_submitted(Input.Submitted(box, box.value))
        elif event.key == "escape":
            self.action_clear_filter()
        elif event.is_printable and event.character:
            box.insert_text_at_cursor(event.character)
        else:
            return
        event.stop()
        event.prevent_default()

    def _focus(self, widget) -> None:
        """Focus ``widget`` now, not after the queued messages (``Widget.focus``), so that
        the keys typed next go to it (see on_key)."""
        self.screen.set_focus(widget)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter (the note says it) and goes back to the table."""
        event.stop()
        self._box.remove_class("-shown")
        if self.table.display:
            self._focus(self.table)

    def action_details(self) -> None:
        row = self.selected
        if row is None:
            return
        elapsed = self.snapshot.elapsed_s if self.snapshot is not None else None

        def then(what: str | None) -> None:
            if what:
                self.signal_row(row, what)

        self.app.push_screen(ProcessDetailScreen(row, elapsed), then)

    def action_signal(self, name: str) -> None:
        row = self.selected
        if row is None:
            self.notify("no process selected", severity="warning")
            return
        self.signal_row(row, name)

    def signal_row(self, row: Row, name: str) -> None:
        """Ask, then send SIG``name`` to ``row``'s process; a refusal is a notice."""
        if self.mode == "replay":
            self._refused("a replay's processes were recorded, they do not run here")
            return
        if row.pid is None:
            self._refused("this row is not one process")
            return
        try:
            target = procsignal.check(row.pid, row.start)
        except procsignal.Refused as exc:
            self._refused(str(exc))
            return
        sig = getattr(_signal, f"SIG{name}")
        pid = row.pid

        def then(confirmed: bool | None) -> None:
            if not confirmed:
                return
            try:
                sent = procsignal.send(pid, row.start, sig)
            except procsignal.Refused as exc:
                self._refused(str(exc))
                return
            how = "" if sent.exact else (" (no pidfd here: checked a few µs before the "
                                         "kill, not through the process's own handle)")
            self.notify(safe_text(f"sent SIG{name} to pid {row.pid} ({row.name}){how}"),
                        markup=False)

        self.app.push_screen(SignalScreen(row, target, f"SIG{name}"), then)

    def _refused(self, why: str) -> None:
        self.notify(safe_text(f"not sent: {why}"), severity="warning", markup=False)
