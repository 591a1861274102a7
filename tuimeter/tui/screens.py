"""Modal screens: the help screen (``?``), the marker label prompt (``M``) and the question
before quitting while the followed command runs (``q``)."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.scrollbar import ScrollBarRender
from textual.widgets import Input, Static

from ..labels import check_label
from ..model import CarbonInfo, SensorStatus
from ..text import safe_text
from .widgets import COLUMNS, PROCESS_KEYS
from .widgets._sensor_status import status_text
from .widgets._totals_panel import is_world_average

KEYS = (
    ("m", "add a marker labelled 'mark N' (in the chart and the session CSV)"),
    ("M", "add a marker, asking for its label: stamped when M was pressed, or (ctrl+t in "
          "the prompt) when Enter is"),
    ("p", "pause / resume the display (recording goes on)"),
    ("e", "export the session so far to a CSV file (the path is shown)"),
    ("f", "functions by energy of the followed Python program, live (py-spy; f again stops)"),
    ("+", "longer sampling interval: recorded and shown (up to 60 s)"),
    ("-", "shorter sampling interval (down to 0.1 s)"),
    ("[ ]", "chart: a shorter / longer time window (30 s to 1 h; 5 min at start)"),
    ("v", "chart: draw the parts (core, uncore) and psys too, or not"),
    ("d", "devices: each GPU's and CPU's readings in full (busy, memory, temperature ...)"),
    ("x", "GPUs: one line each, or one per model (8 x H200: their sum), which the screen "
          "picks when all would leave the chart under 5 lines; a table cut to the room "
          "scrolls with the mouse wheel"),
    ("g", "process table: per process, the followed job as one row, or per cgroup"),
    ("?", "this help (Esc closes it)"),
    ("q", "quit (the session file is closed and its path printed); with a command still "
          "running, asks: stop it, leave it running, or stay"),
)

LEGEND = (
    ("[measured]", "read from a hardware counter or power sensor"),
    ("[estimated]", "a model (TDP x load, W per GiB): not a measurement"),
    ("[LOST]", "unreadable now; a counter that ran on is bridged when it reads again"),
    ("(part)", "inside another domain (core in package): not added to the total"),
    ("(whole)", "the whole platform (psys holds package and dram): not added"),
    ("* + # %", "each domain's chart character, left of its name (@ the total): the "
                "chart draws with it under NO_COLOR, in braille and colours otherwise"),
)


def help_text(sensors: Sequence[SensorStatus], session_path: str | None,
              carbon: CarbonInfo | None = None) -> Text:
    text = Text()
    text.append("Keys\n", style="bold underline")
    for key, what in KEYS:
        text.append(f"  {key:<4}", style="bold")  # "[ ]" and its text apart
        text.append(f"{what}\n")
    text.append("\nProcess table\n", style="bold underline")
    for key, what in PROCESS_KEYS:
        text.append(f"  {key:<7}", style="bold")
        text.append(f"{what}\n")
    text.append("\nColumns\n", style="bold underline")
    text.append(f"  {', '.join(c.help for c in COLUMNS)}\n")
    for key, what in LEGEND:
        text.append(f"  {key:<12}", style="bold")
        text.append(f"{what}\n")
    text.append("\nSensors\n", style="bold underline")
    text.append("  ")
    text.append(status_text(sensors))
    if carbon is not None:
        text.append("\n\nCarbon\n", style="bold underline")
        text.append(f"  {carbon.g_per_kwh:g} g CO2e/kWh, PUE {carbon.pue:g}: "
                    f"{safe_text(carbon.source)}")
        if is_world_average(carbon) and "--country" not in carbon.source:
            text.append("; set a country (--country, TUIMETER_COUNTRY) for its own grid")
    text.append("\n\nSession file\n", style="bold underline")
    text.append(f"  {safe_text(session_path or 'not recorded (use -o FILE)')}\n")
    return text


class WholeCellScrollBar(ScrollBarRender):
    """A scroll bar whose thumb is whole reversed cells: Textual's default draws the
    thumb's ends with ``▁``..``▇`` for sub-cell precision, which without colour read as
    sparkline characters at the window's right edge."""

    VERTICAL_BARS = [" "] * 8


class HelpScreen(ModalScreen[None]):
    """The help: its title (which says how to scroll and close) stays put, the text
    scrolls under it (↑ ↓ PgUp PgDn Home End, or the mouse wheel), and the last line
    says whether more follows: at 80x24 about half of it fits."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 90%; max-width: 100; height: 90%; border: heavy $accent; padding: 0 1;
        background: $surface;
    }
    HelpScreen .title { text-style: bold; }
    HelpScreen #help-more { color: $text-muted; }
    """
    TITLE_TEXT = "tuimeter help · ↑↓ PgUp PgDn scroll · Esc or ? closes"

    def __init__(self, sensors: Sequence[SensorStatus], session_path: str | None,
                 carbon: CarbonInfo | None = None) -> None:
        super().__init__()
        self._text = help_text(sensors, session_path, carbon)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.TITLE_TEXT, classes="title", markup=False)
            with VerticalScroll():
                yield Static(self._text, id="help-body")
            yield Static("", id="help-more", markup=False)

    def on_mount(self) -> None:
        scroll = self.query_one(VerticalScroll)
        scroll.vertical_scrollbar.renderer = WholeCellScrollBar
        scroll.focus()  # the arrow and page keys scroll it
        self.watch(scroll, "scroll_y", self._say_what_follows)
        self.watch(scroll, "virtual_size", self._say_what_follows)

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_what_follows)  # the room for the text changed

    def _say_what_follows(self) -> None:
        scroll = self.query_one(VerticalScroll)
        left = round(scroll.max_scroll_y - scroll.scroll_y)
        text = f"▼ {left} more lines below (↓ PgDn End)" if left > 0 else "(end of help)"
        more = self.query_one("#help-more", Static)
        if str(more.content) != text:
            more.update(text)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class LabelScreen(ModalScreen["tuple[str, bool] | None"]):
    """Ask for a marker label; Enter adds it, Esc cancels. The marker is stamped when M
    was pressed (the moment the user saw), or, after ctrl+t, when Enter is pressed; the
    prompt says which. Dismissed with (label, stamped at Enter) or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("ctrl+t", "toggle_stamp", "Stamp at M / at Enter")]
    DEFAULT_CSS = """
    LabelScreen { align: center middle; }
    LabelScreen > Vertical {
        width: 60; max-width: 95%; height: auto; border: heavy $accent; padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, at_text: str = "the time") -> None:
        super().__init__()
        self.at_text = at_text  # when M was pressed (session time), as the prompt says
        self.at_enter = False
        """The marker is stamped when Enter is pressed, not when M was."""

    def prompt(self) -> str:
        when = ("when Enter is pressed (ctrl+t: when M was)" if self.at_enter else
                f"when M was pressed, {self.at_text} (ctrl+t: when Enter is)")
        return f"Marker stamped {when}. Label (Enter adds it, Esc cancels):"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.prompt(), id="prompt", markup=False)
            yield Input(placeholder="e.g. training starts", id="label")

    def action_toggle_stamp(self) -> None:
        self.at_enter = not self.at_enter
        self.query_one("#prompt", Static).update(self.prompt())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """An empty label cancels; one the session would refuse (control or bidi
        override characters, too long) gets a notice and the prompt stays open."""
        event.stop()
        if not event.value.strip():
            self.dismiss(None)
            return
        try:
            label = check_label(event.value)
        except ValueError as exc:
            self.notify(f"not added: {exc}", severity="error")
            return
        self.dismiss((label, self.at_enter))

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuitScreen(ModalScreen[str | None]):
    """``q`` while the command tuimeter started still runs: stop it and quit (``s``,
    or Ctrl-C: the second Ctrl-C of a user who pressed it twice), leave it running and
    quit (``l``, or ``q`` again: a reflexive second ``q`` never kills), or stay (``n``,
    Esc). Dismissed with ``"stop"``, ``"leave"`` or None."""

    BINDINGS = [
        Binding("s,ctrl+c", "answer('stop')", "Stop it and quit"),
        Binding("l,q", "answer('leave')", "Leave it running and quit"),
        Binding("n,escape", "answer(None)", "Stay"),
    ]
    DEFAULT_CSS = """
    QuitScreen { align: center middle; }
    QuitScreen > Vertical {
        width: 76; max-width: 98%; height: auto; border: heavy $warning; padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, name: str, pid: int, log_path: str | None) -> None:
        super().__init__()
        self.job_name = name
        self.pid = pid
        self.log_path = log_path

    def question(self) -> Text:
        text = Text(f"{safe_text(self.job_name)} (pid {self.pid}) is still running.\n",
                    style="bold")
        text.append("  s  ", style="bold")
        text.append("stop it (SIGTERM) and quit\n")
        text.append("  l  ", style="bold")
        text.append("leave it running and quit")
        if self.log_path:
            text.append(f": its output goes on into {safe_text(self.log_path)}")
        text.append("\n  n  ", style="bold")
        text.append("stay (Esc)")
        return text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question(), id="question")

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
