"""The process table: the processes attribution shows, one row each, with a cursor.

One :class:`~textual.widgets.DataTable` for the whole table (one widget, not one per
cell). Each frame computes the rows (:mod:`tuimeter.tui.process_rows`: grouping, filter,
sort, tree) and compares them with what is drawn, place by place: the table's rows are
places (keyed ``0``, ``1`` ...), and only the cells whose text changed are updated, rows
added or removed only at the end, so that a new order (every second, as CPU shares move)
costs no re-layout; the cursor follows the process it was on (processes are keyed by pid
and start time, ``ProcessPanel.selected_key``).

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
from dataclasses import dataclass
from typing import Callable

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Static

from ...engine import procsignal
from ...engine.procsignal import user_name
from ...model import Snapshot
from ...text import safe_text
from ..format import fmt_energy, fmt_power, fmt_share
from ..process_rows import GROUPINGS, SORT_BY_COLUMN, SORTS, Row, arrange
from ..process_screens import ProcessDetailScreen, SignalScreen

#: the keys, as the help screen lists them
PROCESS_KEYS = (
    ("s / S", "next sort order / reverse it (or click a column header)"),
    ("/", "filter by name, command line, user or pid; Esc clears"),
    ("t", "tree: children under their parent, the followed job first"),
    ("Enter", "details of the selected process, its full command line"),
    ("k / K", "SIGTERM / SIGKILL the selected process, after asking"),
    ("ctrl+p", "command palette: every action; Theme (remembered)"),
)

#: below this table width the USER column is left out
USER_MIN_WIDTH = 100


@dataclass(frozen=True)
class _Col:
    key: str
    label: str
    width: int
    right: bool = True


def _columns(width: int) -> list[_Col]:
    """The columns at table width ``width``: COMMAND takes what the others leave."""
    cols = [_Col("job", "J", 1, False), _Col("pid", "PID", 7)]
    if width >= USER_MIN_WIDTH:
        cols.append(_Col("user", "USER", 8, False))
    cols += [_Col("cpu", "CPU%", 5), _Col("gpu", "GPU%", 5), _Col("power", "POWER", 8),
             _Col("energy", "ENERGY", 9)]
    used = sum(c.width + 2 for c in cols) + 2 + 2  # cell padding, the command's, scroll bar
    cols.append(_Col("command", "COMMAND", max(12, width - used), False))
    return cols


def _cells(row: Row, prefix: str, cols: list[_Col]) -> tuple[Text, ...]:
    """A row's cells, as Text (a str cell would be read as markup)."""
    style = "bold" if row.in_job else ""
    out = []
    for c in cols:
        if c.key == "command":
            text = Text(safe_text(prefix), style="dim")
            text.append(safe_text(row.name), style="bold")
            if row.args:
                text.append(" " + safe_text(row.args), style="dim" if not row.in_job else "")
            text.truncate(c.width, overflow="ellipsis")
            out.append(text)
            continue
        value = {
            "job": "J" if row.in_job else "",
            "pid": "" if row.pid is None else str(row.pid),
            "user": safe_text(user_name(row.uid))[:c.width],
            "cpu": fmt_share(row.cpu_share),
            "gpu": fmt_share(row.gpu_share),
            "power": fmt_power(row.power_w),
            "energy": fmt_energy(row.energy_j),
        }[c.key]
        out.append(Text(value, style=style, justify="right" if c.right else "left"))
    return tuple(out)


class ProcessTable(DataTable):
    """The table itself: a row cursor; Enter shows the details (see ProcessPanel)."""

    BINDINGS = [Binding("enter", "select_cursor", "Details", key_display="⏎", show=False)]

    def __init__(self, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)

    def allow_focus(self) -> bool:
        """Not while hidden (no rows): the footer then offers no keys that do nothing."""
        return self.display


class FilterInput(Input):
    """The filter's text: rows whose name, command line, user or pid hold it."""

    def allow_focus(self) -> bool:
        """Only while shown (a hidden input would take the keys typed at the table)."""
        return self.has_class("-shown")


class ProcessPanel(Vertical):
    """A note (why there are no rows, or the sort, filter and idle power), the filter
    input (shown by ``/``) and the table. ``mode``: "on" (an attributor runs), "off"
    (--no-attribution), "replay" or "unavailable" (no attribution module)."""

    DEFAULT_CSS = """
    ProcessPanel { height: auto; max-height: 40%; }
    ProcessPanel > .note { height: 1; }
    ProcessPanel > FilterInput, ProcessPanel > FilterInput:focus {
        height: 1; border: none; padding: 0 1; display: none;
    }
    ProcessPanel > FilterInput.-shown { display: block; }
    ProcessPanel > ProcessTable { height: auto; max-height: 100%; }
    """

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", group=Binding.Group("Sort")),
        Binding("S", "reverse_sort", "Reverse", key_display="S", group=Binding.Group("Sort")),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("t", "tree", "Tree"),
        Binding("k", "signal('TERM')", "TERM", group=Binding.Group("Signal")),
        Binding("K", "signal('KILL')", "KILL", key_display="K", group=Binding.Group("Signal")),
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

    def __init__(self, mode: str = "unavailable", **kw) -> None:
        super().__init__(**kw)
        self.mode = mode
        self.snapshot: Snapshot | None = None
        """The snapshot of the rows drawn."""
        self.rows: list[tuple[Row, str]] = []
        """What the table shows, in order: each row with its tree prefix."""
        self._drawn: list[tuple[str, tuple[Text, ...]]] = []  # (key, cells) as drawn
        self._cols: list[_Col] = []
        self._width = 0  # the table width the columns were made for
        self._held = 0  # the height the panel is kept at (_hold_height), 0: none

    def compose(self) -> ComposeResult:
        # kept, not queried at each frame (a query walks the DOM)
        self._note_line = Static(self._note(None), classes="note", markup=False)
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
        """Draw ``snap``'s processes (only the cells that changed, when the rows are the
        same as drawn)."""
        self.snapshot = snap
        self._draw()

    def _draw(self, rebuild: bool = False) -> None:
        snap = self.snapshot
        table = self.table
        rows_of: Callable[[Snapshot], list[Row]] = GROUPINGS.get(self.group_by,
                                                                 GROUPINGS["process"])
        rows = rows_of(snap) if snap is not None else []
        self.rows = arrange(rows, self.sort, self.reverse, self.filter_text,
                            self.tree_view and self.group_by == "process")
        note = self._note_line
        text = self._note(snap)
        if str(note.content) != text:
            note.update(text, layout=False)
        shown = bool(rows)
        if table.display != shown:
            table.display = shown
            if shown and self.screen.focused is None:
                table.focus()  # the keys above work from the first rows on
        if not shown:
            self.release_height()
            return
        width = table.size.width or self.size.width
        if width != self._width or not self._cols:
            self._width, self._cols, rebuild = width, _columns(width), True
        drawn = [(r.key, _cells(r, prefix, self._cols)) for r, prefix in self.rows]
        selected = self.selected_key
        old_row = table.cursor_row
        scroll_y = table.scroll_y
        if rebuild:
            self._fill(table, drawn)
        else:
            self._sync(table, drawn)
        self._drawn = drawn
        keys = [k for k, _ in drawn]
        row = keys.index(selected) if selected in keys else min(old_row, len(keys) - 1)
        if rebuild:
            table.scroll_y = scroll_y
        if row >= 0 and (rebuild or row != table.cursor_row):
            table.move_cursor(row=row, animate=False, scroll=selected not in keys)
        if rebuild:
            self.release_height()  # held again from the next frame, as laid out then
        else:
            self._hold_height()

    def _hold_height(self) -> None:
        """Keep the panel as tall as it has been (as laid out: within its max-height):
        processes come and go every second, and a panel that shrank and grew again with
        them re-laid out the screen and moved the chart at each frame."""
        height = self.size.height
        if height > self._held:
            self._held = height
            self.styles.min_height = height

    def release_height(self) -> None:
        """Let the panel shrink to its rows (new order or filter, no rows, a new screen
        size)."""
        if self._held:
            self._held = 0
            self.styles.min_height = None

    def _fill(self, table: ProcessTable, drawn) -> None:
        """New columns (width, sort order): the headers and rows put in again."""
        table.clear(columns=True)
        for c in self._cols:
            table.add_column(self._label(c), width=c.width, key=c.key)
        for i, (_, cells) in enumerate(drawn):
            table.add_row(*cells, key=str(i))

    def _sync(self, table: ProcessTable, drawn) -> None:
        """Each place's changed cells updated; rows added or removed at the end only (a
        table whose height is unchanged needs no re-layout)."""
        keys = [c.key for c in self._cols]
        for i, ((_, new), (_, old)) in enumerate(zip(drawn, self._drawn)):
            for col, a, b in zip(keys, new, old):
                if a != b:
                    table.update_cell(str(i), col, a)
        for i in range(len(self._drawn) - 1, len(drawn) - 1, -1):
            table.remove_row(str(i))
        for i in range(len(self._drawn), len(drawn)):
            table.add_row(*drawn[i][1], key=str(i))

    def _label(self, col: _Col) -> Text:
        sort = self.sort
        label = col.label
        if sort.column == col.key:
            label += "▼" if sort.descending != self.reverse else "▲"
        return Text(label, justify="right" if col.right else "left")

    def on_resize(self, event: events.Resize) -> None:
        if self.snapshot is not None and event.size.width != self._width:
            self._draw()

    def _redraw(self) -> None:
        """The order, filter or tree changed: draw again with new headers."""
        if self.is_mounted:
            self._draw(rebuild=True)

    watch_sort_index = watch_reverse = watch_filter_text = watch_tree_view = watch_group_by = \
        lambda self: self._redraw()

    # -- the selection --------------------------------------------------------------
    @property
    def selected_key(self) -> str | None:
        """The key (pid and start time) of the process under the cursor, or None."""
        row = self.table.cursor_row
        return self._drawn[row][0] if self.table.row_count and 0 <= row < len(self._drawn) \
            else None

    @property
    def selected(self) -> Row | None:
        """The row under the cursor (as last drawn), or None."""
        key = self.selected_key
        return next((r for r, _ in self.rows if r.key == key), None)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter, or a click on the selected row: the details."""
        event.stop()
        self.action_details()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """A click on a column header sorts by that column; again: reversed."""
        event.stop()
        sort = SORT_BY_COLUMN.get(str(event.column_key.value))
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
                procsignal.send(pid, row.start, sig)
            except procsignal.Refused as exc:
                self._refused(str(exc))
                return
            self.notify(safe_text(f"sent SIG{name} to pid {row.pid} ({row.name})"),
                        markup=False)

        self.app.push_screen(SignalScreen(row, target, f"SIG{name}"), then)

    def _refused(self, why: str) -> None:
        self.notify(safe_text(f"not sent: {why}"), severity="warning", markup=False)
