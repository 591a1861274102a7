"""The process table's modal screens: a process's details (Enter) and the confirmation
before a signal (``k`` / ``K``). Every name, command line and user in them is text from
outside: a ``Text`` through ``safe_text``, never markup."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..engine.procsignal import Target, user_name
from ..text import safe_text
from .format import NA, fmt_duration, fmt_energy, fmt_power, fmt_share
from .process_rows import Row

_BOX = """
    align: center middle;
    & > Vertical {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: heavy $accent; padding: 0 1; background: $surface;
    }
"""


def detail_text(row: Row, elapsed_s: float | None = None) -> Text:
    """What the detail view says of ``row``: who it is, its attributed power and energy
    (CPU and GPU parts), and its whole command line."""
    text = Text()

    def line(label: str, value: str) -> None:
        text.append(f"{label:<13}", style="bold")
        text.append(safe_text(value) + "\n")

    line("process", row.name)
    if row.pid is not None:
        line("pid", f"{row.pid}  (parent {row.ppid or '?'})")
    line("user", user_name(row.uid) or "?")
    if row.in_job:
        line("job", "part of the followed job")
    line("power", f"{fmt_power(row.power_w)} in the last interval  [attributed]")
    cpu, gpu = (s if s == NA else s + "%" for s in (fmt_share(row.cpu_share),
                                                     fmt_share(row.gpu_share)))
    line("CPU / GPU", f"{cpu} of the machine's CPU time / {gpu} of the GPUs' power"
                      + (" (not in the session file)" if NA in (cpu, gpu) else ""))
    share = row.share
    parts = "" if share is None else (f"  (CPU {fmt_energy(share.cpu_energy_j)}, "
                                      f"GPU {fmt_energy(share.gpu_energy_j)})")
    line("energy", f"{fmt_energy(row.energy_j)} since it was first seen{parts}")
    if elapsed_s is not None:
        line("as of", fmt_duration(elapsed_s))
    text.append("command line\n", style="bold")
    text.append(safe_text(row.cmdline or f"({row.name}: no command line, or unreadable)"))
    return text


class ProcessDetailScreen(ModalScreen[str | None]):
    """One process, as the table last drew it; ``k`` / ``K`` from here signal it (the
    screen closes with "TERM" / "KILL" and the table asks for confirmation)."""

    BINDINGS = [
        Binding("escape,enter,q", "close", "Close"),
        Binding("k", "dismiss('TERM')", "TERM"),
        Binding("K", "dismiss('KILL')", "KILL", key_display="K"),
    ]
    DEFAULT_CSS = "ProcessDetailScreen {" + _BOX + "& VerticalScroll { height: auto; } }"

    def __init__(self, row: Row, elapsed_s: float | None = None) -> None:
        super().__init__()
        self.row = row
        self._text = detail_text(row, elapsed_s)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Process details  (Esc closes; k TERM, K KILL)", classes="title")
            with VerticalScroll():
                yield Static(self._text, id="details")

    def action_close(self) -> None:
        self.dismiss(None)


class SignalScreen(ModalScreen[bool]):
    """"Send SIGTERM to pid N (name), user U?": ``y`` or Enter sends, ``n`` or Esc
    does not."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Send"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]
    DEFAULT_CSS = "SignalScreen {" + _BOX + """
        & Horizontal { height: auto; margin-top: 1; }
        & Button { margin-right: 2; }
    }"""
    AUTO_FOCUS = None  # Enter is the binding's, not a button's

    def __init__(self, row: Row, target: Target, signal_name: str) -> None:
        super().__init__()
        self.row = row
        self.target = target
        self.signal_name = signal_name

    def question(self) -> Text:
        text = Text(f"Send {self.signal_name} to ", style="bold")
        text.append(f"pid {self.target.pid} ({safe_text(self.row.name)}), "
                    f"user {safe_text(self.target.user)}?", style="bold")
        if self.row.cmdline:
            text.append("\n" + safe_text(self.row.cmdline[:300]))
        return text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question(), id="question")
            with Horizontal():
                yield Button(f"Send {self.signal_name} (y)", variant="error", id="send")
                yield Button("Cancel (n, Esc)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "send")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
