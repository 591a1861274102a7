"""Each line's strip of a Line-API widget, kept with what it was drawn from.

The tables and panels that draw themselves line by line (the domain table, the process
table, the totals panel) make a line's :class:`~textual.strip.Strip` again only when what
it is drawn from (its cells, style, width ...) changed: a frame in which one row's figures
changed makes one strip.
"""

from __future__ import annotations

from typing import Callable

from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget


class KeptStrips:
    """Line ``y``'s strip, kept until :meth:`get` is asked for it from another source."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[object, Strip]] = {}
        self.made = 0
        """Strips made so far (a test counts what a frame made)."""

    def get(self, y: int, source: object, make: Callable[[], Strip]) -> Strip:
        """Line ``y``'s strip drawn from ``source``: the kept one if it was drawn from an
        equal source, else ``make()``'s, kept."""
        kept = self._kept.get(y)
        if kept is not None and kept[0] == source:
            return kept[1]
        strip = make()
        self._kept[y] = (source, strip)
        self.made += 1
        return strip

    def clear(self) -> None:
        """Forget every strip (the styles or the size changed)."""
        self._kept.clear()


class StyledOnce(Widget):
    """A Line-API widget's base style (:attr:`base_style`: its ``rich_style``, which walks
    the ancestors) looked up once per style change (focus, theme, CSS), not once per line
    or frame; :meth:`style_changed` is called when it is stale."""

    _base_style: Style | None = None

    @property
    def base_style(self) -> Style:
        if self._base_style is None:
            self._base_style = self.rich_style
        return self._base_style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None
        self.style_changed()

    def style_changed(self) -> None:
        """The styles changed (override to forget what was drawn in the old ones)."""
