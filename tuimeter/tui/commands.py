"""The command palette's entries (ctrl+p) besides Textual's own (theme, keys, quit,
screenshot): every key's action, so that each can be found by name."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator

from textual.app import SystemCommand
from textual.screen import Screen

from .process_rows import SORTS
from .widgets import ProcessPanel

if TYPE_CHECKING:
    from .app import TuimeterApp


def _commands(entries: tuple[tuple[str, str, Callable], ...]) -> Iterator[SystemCommand]:
    return (SystemCommand(title, help, callback) for title, help, callback in entries)


def app_commands(app: "TuimeterApp") -> Iterator[SystemCommand]:
    """The app's keys, by name."""
    return _commands((
        ("Mark", "add a marker labelled 'mark N' (m)", app.action_mark),
        ("Label mark", "add a marker, asking for its label (M)", app.action_mark_labelled),
        ("Pause", "pause / resume the display; recording goes on (p)", app.action_pause),
        ("Export", "export the session so far to a CSV file (e)", app.action_export),
        ("Functions", "the followed Python program's functions by energy, by py-spy (f)",
         app.action_functions),
        ("Slower", "longer sampling interval (+)", app.action_slower),
        ("Faster", "shorter sampling interval (-)", app.action_faster),
        ("Help", "keys, badges, sensors, carbon source (?)", app.action_help),
    ))


def process_commands(screen: Screen) -> Iterator[SystemCommand]:
    """The process table's keys, by name (on a screen that has the table)."""
    panel = next(iter(screen.query(ProcessPanel)), None)
    if panel is None:
        return iter(())
    sorts = tuple((f"Sort processes by {sort.name}", "s steps through the orders, S reverses",
                   partial(panel.sort_by, index)) for index, sort in enumerate(SORTS))
    return _commands(sorts + (
        ("Reverse the process order", "S", panel.action_reverse_sort),
        ("Filter processes", "by name, command line, user or pid (/)", panel.action_filter),
        ("Process tree", "on / off: parents and their children (t)", panel.action_tree),
        ("Process details", "the selected process, full command line (Enter)",
         panel.action_details),
        ("Send SIGTERM to the selected process", "asks first (k)",
         partial(panel.action_signal, "TERM")),
        ("Send SIGKILL to the selected process", "asks first (K)",
         partial(panel.action_signal, "KILL")),
    ))
