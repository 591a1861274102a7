"""Each line's strip of a Line-API widget, kept with what it was drawn from.

The tables and panels that draw themselves line by line (the domain table, the process
table, the totals panel, :class:`TextLine`) make a line's :class:`~textual.strip.Strip` again only when what
it is drawn from (its cells, style, width ...) changed: a frame in which one row's figures
changed makes one strip.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

from rich.style import Style
from textual.geometry import Region
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


def refresh_changed_lines(widget: Widget, old: Sequence, new: Sequence,
                          same: Callable[[Any, Any], bool] = operator.eq) -> None:
    """Repaint each line of ``widget`` whose entry in ``new`` is not ``same`` as in ``old``
    (the whole widget when their number changed): a frame repaints what changed alone."""
    if len(old) != len(new):
        widget.refresh()
        return
    width = widget.size.width
    for y, (was, now) in enumerate(zip(old, new)):
        if not same(was, now):
            widget.refresh(Region(0, y, width, 1))  # content coordinates


class StyledOnce(Widget):
    """A Line-API widget's styles (:attr:`kept_styles`: its ``rich_style`` and the
    component styles it draws with; each lookup walks the ancestors) looked up once per
    style change (focus, theme, CSS), not once per line or frame; :meth:`style_changed`
    is called when they are stale."""

    _kept_styles: tuple[Style, ...] | None = None

    def look_up_styles(self) -> tuple[Style, ...]:
        """The styles to keep, the widget's own first (override to add component ones)."""
        return (self.rich_style,)

    @property
    def kept_styles(self) -> tuple[Style, ...]:
        if self._kept_styles is None:
            self._kept_styles = self.look_up_styles()
        return self._kept_styles

    @property
    def base_style(self) -> Style:
        """The widget's own style (``rich_style``), as kept."""
        return self.kept_styles[0]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._kept_styles = None
        self.style_changed()

    def style_changed(self) -> None:
        """The styles changed (override to forget what was drawn in the old ones)."""
