"""The process table's lines: a header and one line per row, drawn with Textual's Line API.

One widget, no child per row or cell, and a height that its container sets (not its row
count): a new frame never asks the screen for a layout. :meth:`ProcessTable.set_rows`
compares the new rows with those drawn, place by place, and repaints only the lines whose
cells changed (``refresh(Region)``); each line's :class:`~textual.strip.Strip` is kept
(with what it was drawn from: cells, cursor, styles, width) and built again only when
that changed. A Textual ``DataTable`` re-laid out the screen whenever a row was added or
removed (its virtual size changed) and rendered every visible cell again on any
``update_cell``: the top processes change almost every second, and this was half the UI's
CPU.

More rows than lines: the table scrolls itself (``top``, the first row drawn; the cursor
kept in view, moved by the keys and the mouse wheel), the header stays, and its right end
says which rows are shown (``1-14 of 20``), instead of a scroll bar.

Cells are :class:`~rich.text.Text` the panel built from untrusted text through
``safe_text``: never markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip

from ._kept_strips import KeptStrips, StyledOnce

Cells = tuple[Text, ...]


@dataclass(frozen=True)
class Column:
    """A column: its key (``pid``, ``power`` ...), its header label, its width in cells
    (without the one-cell padding either side), and right-aligned or not."""

    key: str
    label: str
    width: int
    right: bool = True


class ProcessTable(StyledOnce, can_focus=True):
    """A header line and one line per row, a row cursor (keys and clicks), scrolled by
    itself; styled as Textual's ``DataTable`` (its CSS, the component classes renamed). Enter or a click on the cursor's row posts :class:`Selected`; a click on a
    header :class:`HeaderClicked`. Its height comes from its container (CSS), never from
    its rows."""

    COMPONENT_CLASSES = {"process-table--header", "process-table--cursor"}
    DEFAULT_CSS = """
    ProcessTable {
        background: $surface;
        color: $foreground;
        height: 1fr;
        & > .process-table--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .process-table--header { background: ansi_bright_blue; color: ansi_default; }
        & > .process-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .process-table--header { background-tint: $foreground 5%; }
            & > .process-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """

    BINDINGS = [
        Binding("enter", "select_cursor", "Details", key_display="⏎", show=False),
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
    ]

    class Selected(Message):
        """Enter, or a click on the cursor's row: the row at ``index`` chosen."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class HeaderClicked(Message):
        """A click on the header of the column keyed ``column``."""

        def __init__(self, column: str) -> None:
            super().__init__()
            self.column = column

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.columns: tuple[Column, ...] = ()
        """The columns, left to right (:meth:`set_columns`)."""
        self._labels: Cells = ()
        self._rows: list[Cells] = []
        self.cursor_row = 0
        """The index of the row under the cursor (0 when there are no rows)."""
        self.top = 0
        """The index of the first row drawn (below the header)."""
        self.moved = False
        """The user has moved the cursor (keys, click, wheel). Until then the panel keeps
        it on the first row and the view at the top, as htop does: following the first
        row's process down the sort scrolled the busiest rows off the screen by itself."""
        self._strips = KeptStrips()  # each line's, with what it is drawn from

    def allow_focus(self) -> bool:
        """Not while hidden (no rows): the footer then offers no keys that do nothing."""
        return self.display

    # -- what it shows -------------------------------------------------------------
    @property
    def rows(self) -> list[Cells]:
        """The rows' cells, top to bottom, as drawn."""
        return list(self._rows)

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def visible_rows(self) -> int:
        """How many rows fit below the header (at least 1)."""
        return max(1, self.size.height - 1)

    def set_columns(self, columns: Sequence[Column], labels: Sequence[Text]) -> None:
        """New columns or header labels: the header is drawn again (the rows follow
        with :meth:`set_rows`, which the caller gives cells for these columns)."""
        columns, labels = tuple(columns), tuple(labels)
        if columns != self.columns or labels != self._labels:
            self.columns, self._labels = columns, labels
            self.refresh_line(0)

    def set_rows(self, rows: Sequence[Cells], cursor: int) -> None:
        """Show ``rows`` with the cursor on row ``cursor``: the lines whose cells differ
        from those drawn at the same place are repainted, nothing else (a row count that
        changes repaints the lines it added or emptied, and the header's ``1-14 of 20``)."""
        old, new = self._rows, list(rows)
        self._rows = new
        changed = [i for i in range(max(len(old), len(new)))
                   if i >= len(old) or i >= len(new) or old[i] != new[i]]
        if len(old) != len(new):
            self.refresh_line(0)
        for i in changed:
            self._refresh_row(i)
        self.move_cursor(cursor)

    def move_cursor(self, row: int) -> None:
        """The cursor on ``row`` (clamped to the rows), scrolled into view."""
        row = max(0, min(row, len(self._rows) - 1))
        if row != self.cursor_row:
            self._refresh_row(self.cursor_row)
            self.cursor_row = row
            self._refresh_row(row)
        self._scroll_to(self.top)

    def _scroll_to(self, top: int) -> None:
        """``top`` the first row drawn, moved as little as keeps the cursor in view and
        no line empty below the last row; everything repainted if it moved."""
        shown = self.visible_rows
        if self.cursor_row < top:
            top = self.cursor_row
        elif self.cursor_row >= top + shown and self.size.height:
            top = self.cursor_row - shown + 1
        top = max(0, min(top, len(self._rows) - shown))
        if top != self.top:
            self.top = top
            self.refresh()

    def _refresh_row(self, index: int) -> None:
        """Repaint row ``index``'s line, if it is in view."""
        y = index - self.top + 1
        if 1 <= y <= self.visible_rows:
            self.refresh_line(y)

    def refresh_line(self, y: int) -> None:
        """Repaint line ``y`` of the widget (0: the header) only."""
        if self.size.width:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- drawing ------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        self._scroll_to(self.top)

    def look_up_styles(self) -> tuple[Style, ...]:
        """(a row's, the header's, the cursor row's) style as the CSS says now (kept until
        the CSS applies again: focus, theme)."""
        base = self.rich_style
        return (base, base + self.get_component_rich_style("process-table--header"),
                base + self.get_component_rich_style("process-table--cursor"))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base, header, cursor = self.kept_styles
        if y == 0:
            style = header
            source: tuple = (self._labels, self.columns, style, width, self._position())
        else:
            index = self.top + y - 1
            if index >= len(self._rows):
                return Strip.blank(width, base)
            style = cursor if index == self.cursor_row else base
            source = (self._rows[index], self.columns, style, width, "")
        return self._strips.get(y, source, lambda: self._line(source[0], style, width,
                                                               source[-1]))

    def _position(self) -> str:
        """``first-last of n`` when not every row fits, else ``""``."""
        n, shown = len(self._rows), self.visible_rows
        if n <= shown:
            return ""
        return f"{self.top + 1}-{min(n, self.top + shown)} of {n}"

    def _line(self, cells: Cells, style: Style, width: int, tail: str) -> Strip:
        """One line in ``style``: each cell fitted to its column, padded one cell either
        side; ``tail`` right-aligned at the end, over blank cells only (one left blank
        before it), else left out. Built as segments (a rich ``Text`` of the whole line,
        aligned cell by cell, cost five times as much: every visible row is built again
        each second, as CPU shares move)."""
        console = self.app.console
        segments = []
        for col, cell in zip(self.columns, cells):
            if cell.cell_len > col.width:
                cell = cell.copy()
                cell.truncate(col.width, overflow="ellipsis")
            pad = " " * (col.width - cell.cell_len)
            segments.append(Segment(" " + pad if col.right else " ", style))
            if cell.spans:
                segments += (Segment(s.text, style + s.style if s.style else style)
                             for s in cell.render(console))
            elif cell.plain:
                segments.append(Segment(cell.plain, style + console.get_style(cell.style)
                                        if cell.style else style))
            segments.append(Segment(" " if col.right else pad + " ", style))
        strip = Strip(segments).adjust_cell_length(width, style)
        room = width - len(tail) - 1
        if tail and room > 0 and not strip.crop(room - 1, width).text.strip():
            strip = Strip.join([strip.crop(0, room), Strip([Segment(tail + " ", style)])])
        return strip

    # -- keys and mouse ----------------------------------------------------------------
    def _user_moves(self, row: int) -> None:
        self.moved = True
        self.move_cursor(row)

    def action_cursor(self, step: int) -> None:
        self._user_moves(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self._user_moves(self.cursor_row + step * self.visible_rows)

    def action_cursor_to(self, row: int) -> None:
        self._user_moves(row if row >= 0 else len(self._rows) - 1)

    def action_select_cursor(self) -> None:
        if self._rows:
            self.post_message(self.Selected(self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        """The header: sort by its column; a row: the cursor on it; the cursor's row: it
        is chosen (details)."""
        event.stop()
        if event.y == 0:
            x = 0
            for col in self.columns:
                x += col.width + 2
                if event.x < x:
                    self.post_message(self.HeaderClicked(col.key))
                    return
            return
        index = self.top + event.y - 1
        if index >= len(self._rows):
            return
        if index == self.cursor_row:
            self.moved = True
            self.post_message(self.Selected(index))
        else:
            self._user_moves(index)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, -1)

    def _wheel(self, event: events.MouseEvent, step: int) -> None:
        """The wheel moves the cursor (as in htop), the rows scrolling with it: a view
        scrolled away from the cursor would come back to it at the next frame."""
        if self._rows:
            event.stop()
            self._user_moves(self.cursor_row + step)
