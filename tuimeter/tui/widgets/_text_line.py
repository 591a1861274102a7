"""One line of text, drawn by the Line API: the top bar and the process panel's note.

A :class:`~textual.widgets.Static` re-renders its content through Textual's content
pipeline at every update (parse, wrap, style, make strips), and these lines change every
second (the elapsed time, the idle power). A :class:`TextLine` keeps its one strip until
its text, width or style changes, never asks for a layout, and cuts a text longer than its
width (one line, as the CSS sizes it). No markup: text from outside is shown as given
(escaped by the caller, as everywhere).
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from ._kept_strips import KeptStrips, StyledOnce


class TextLine(StyledOnce):
    """A line of text; :meth:`update` with a new text repaints it, with the same nothing."""

    DEFAULT_CSS = """
    TextLine { height: 1; }
    """

    def __init__(self, text: str | Text = "", **kw) -> None:
        super().__init__(**kw)
        self._content = Text(text) if isinstance(text, str) else text
        self._strips = KeptStrips()

    @property
    def content(self) -> Text:
        """The text shown (as :attr:`Static.content` says it)."""
        return self._content

    def update(self, text: str | Text) -> None:
        """Show ``text``: the line is repainted if it changed."""
        text = Text(text) if isinstance(text, str) else text
        if text == self._content:
            return
        self._content = text
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        style = self.base_style
        if y != 0:
            return Strip.blank(width, style)
        return self._strips.get(0, (self._content, width, style),
                                lambda: self._strip(self._content, width, style))

    def _strip(self, text: Text, width: int, style: Style) -> Strip:
        segments = [Segment(s.text, style + s.style if s.style else style)
                    for s in text.render(self.app.console) if s.text]
        return Strip(segments).crop(0, width).adjust_cell_length(width, style)
