"""The main view: its layout, and the drawing of each snapshot into its widgets.

The app hands every snapshot to :meth:`MainScreen.show` (see ``TuimeterApp``); the screen
draws at most one frame every ``frame_s`` seconds: a snapshot that arrives sooner waits,
and a newer one replaces it, so at a 0.1 s interval two frames a second are drawn (the
top bar says so) and every tick is still recorded. A frame updates each widget from the snapshot, and each
widget repaints only what changed (see their ``show`` methods).

What a frame shows besides the snapshot (the interval, the replay's state, the exporters'
trouble, the followed job) belongs to the app: the screen asks for it, as a
:class:`Status`, when it draws.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import UPDATE_PERIOD, Screen
from textual.widgets import Footer

from ..model import Domain, JobSample, Snapshot
from ..job import JobState, job_ranks
from ..work import WorkWindow
from .device_groups import (CHART_MIN_LINES, PROCESS_MIN_ROWS, collapse_needed,
                            table_lines_needed)
from ._frame_timer import frame_timer
from .devices import DeviceScreen, devices_text
from .messages import SnapshotReady
from .widgets import (DomainTable, JobPanel, PowerChart, ProcessPanel, SensorStatusLine,
                      TopBar, TotalsPanel)

#: the display draws at most one frame this often, seconds (2 a second): at a 0.1 s
#: interval the snapshots in between are replaced, the latest is drawn when a frame is due
#: (a frame costs about as much at any interval: 4 a second was 30 % of a core at 0.1 s)
FRAME_S = 0.5
#: while a frame waits to fall due, how often that is checked, seconds
FRAME_CHECK_S = 0.05
#: below this many lines, the process table and status line give their rows to the chart
COMPACT_BELOW_LINES = 32
#: the process panel's share of a screen of 32 lines or more, % (app.tcss says so too)
PANEL_SHARE = 40
#: on such a screen the process panel gives up rows (to its least) for the chart to keep
#: this many lines
CHART_TALL = 10


@dataclass(frozen=True)
class Status:
    """What a frame shows besides the snapshot, from the app when the frame is drawn."""

    interval_s: float
    """The engine's sampling interval, seconds."""
    mode: str = ""
    """The replay and its state (``REPLAY demo.csv 20x: replay finished``), or ``""``."""
    cpu_percent: float | None = None
    """tuimeter's own CPU, % of one core (None: not known)."""
    problems: str = ""
    """The exporters' trouble (server down, points dropped), for the status line."""
    job: JobState | None = None
    """The followed job as last polled, or None when no job is followed."""
    job_exited_at_s: float | None = None
    """Session seconds at which the followed job was seen to exit."""


class MainScreen(Screen[None]):
    """Top bar, job panel, domain table, chart and totals, process panel, sensor status
    line and footer; drawn from snapshots, throttled to one frame every ``frame_s``."""

    #: the chart's keys, listed in the help (the footer keeps its room for the app's)
    BINDINGS = [
        Binding("left_square_bracket", "zoom(-1)", "Chart: shorter window", show=False,
                key_display="["),
        Binding("right_square_bracket", "zoom(1)", "Chart: longer window", show=False,
                key_display="]"),
        Binding("v", "parts", "Chart: parts too", show=False),
        Binding("d", "devices", "Devices", show=False),
        Binding("x", "expand", "GPUs: one line each / per model", show=False),
    ]

    paused: reactive[bool] = reactive(False)
    """The display is frozen (the engine keeps sampling and recording)."""

    def __init__(self, domains: Sequence[Domain], status: Callable[[Snapshot], Status], *,
                 attribution: str = "unavailable", follows_job: bool = False,
                 frame_s: float = FRAME_S, process_scan: Callable | None = None) -> None:
        super().__init__()
        self.process_scan = process_scan  # the process panel's (the filter's) every process
        self.domains = tuple(domains)
        self.status = status
        self.attribution = attribution
        self.follows_job = follows_job
        self.frame_s = frame_s
        self.frames_drawn = 0
        self._work = WorkWindow()  # the job panel's units/s and J/unit
        self.latest: SnapshotReady | None = None
        """The newest snapshot handed in (drawn, or waiting for its frame)."""
        self.drawn: SnapshotReady | None = None
        """The snapshot of the last frame."""
        self.ended = False
        """No tick comes after the latest (a replay reached its end): the chart draws
        it even if it moves no dot (see PowerChart.show)."""
        self._drawn_at: float | None = None  # time.monotonic() of the last frame
        self._frame_timer = None  # armed while the latest snapshot waits for its frame
        self._widgets: dict[type, object] = {}  # see _widget
        self._ready = False  # mounted: the widgets are there to draw into
        self._toasts_at = None  # the region toasts were last placed over (_place_toasts)
        self._panel_height: int | None = None  # set by _fit_domains; None: the CSS's
        self.expand_groups: bool | None = None
        """``x``: True shows every GPU, False each device group as one line; None (at
        start): whichever leaves the chart and the process table their least
        (:mod:`..device_groups`)."""

    @property
    def _update_timer(self):
        """Textual's screen update timer, as a :class:`~._frame_timer.FrameTimer`: no
        wake-up of the app's thread after each frame (Textual's sleeps a period first)."""
        timer = self.__dict__.get("_repaint_timer")
        if timer is None:
            timer = self._repaint_timer = frame_timer(self, UPDATE_PERIOD,
                                                      self._on_timer_update)
        return timer

    @property
    def grouping(self) -> str:
        """The process table's grouping (``tuimeter.grouping.GROUPINGS``; key ``g``): the
        table's own ``group_by``, held there only."""
        return self._widget(ProcessPanel).group_by

    @grouping.setter
    def grouping(self, by: str) -> None:
        self._widget(ProcessPanel).group_by = by

    # -- layout -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TopBar(id="top")
        job = JobPanel(id="job")
        job.display = self.follows_job
        yield job
        yield DomainTable(self.domains, id="domains")
        with Horizontal(id="middle"):
            yield PowerChart(id="chart")
            yield TotalsPanel(id="totals")
        yield ProcessPanel(self.attribution, id="processes", scan=self.process_scan)
        yield SensorStatusLine(id="sensors")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._ready = True  # (is_mounted is set only after the mount handlers ran)
        self._draw_when_due()  # a snapshot handed in before the widgets were there

    def on_resize(self, event: events.Resize) -> None:
        """Below 32 lines, the process table and status line give their rows to the chart."""
        self.set_class(event.size.height < COMPACT_BELOW_LINES, "-compact")
        self._fit_domains(event.size.height)
        self.call_after_refresh(self._place_toasts)

    def _fit_domains(self, height: int | None = None) -> None:
        """Room for the chart at every size and with many GPUs. Below ``CHART_TALL``
        lines of chart the process panel gives up its rows (down to ``PROCESS_MIN_ROWS``);
        below ``CHART_MIN_LINES`` (a plot of ``PLOT_MIN_ROWS``) the device groups collapse
        (``8 x H200``; ``x`` decides instead once pressed); a table that still does not
        fit is cut to the room (its rows scroll under the header, the total stays). Below
        ``COMPACT_BELOW_LINES`` the job panel puts its figures on its first line and the
        chart draws no frame lines around its plot. Checked at each resize and frame (twice:
        the job panel and the process panel may have changed their heights): a layout only
        when something changed."""
        if not self._ready:
            return
        height = self.size.height if height is None else height
        compact = height < COMPACT_BELOW_LINES
        try:  # every widget it touches, looked up before anything changes
            table, job, panel, power_chart, sensors = (
                self._widget(DomainTable), self._widget(JobPanel), self._widget(ProcessPanel),
                self._widget(PowerChart), self._widget(SensorStatusLine))
        except NoMatches:  # the app quits before (or after) its widgets are there: a
            return         # terminal closed while it starts (a resize still queued)
        job.set_one_line(compact)  # the job's figures on its first line
        power_chart.set_compact(compact)  # no frame lines, a 1-line legend

        rows = self.attribution == "on" or panel.has_class("-rows")
        fixed = 1 + (job.lines if job.display else 0) + 1 + (
            1 if compact else max(sensors.outer_size.height, 1))
        least = 2 + PROCESS_MIN_ROWS if rows else max(panel.outer_size.height, 1)
        n_all = len(table.domains)
        n_collapsed = n_all - sum(len(g.members) - 1 for g in table.groups)
        collapse = self.expand_groups is False or (self.expand_groups is None and
                                                   collapse_needed(height, n_all, n_collapsed,
                                                                   fixed + least))
        table.collapse(collapse)
        power_chart.set_groups(table.groups if table.collapsed else ())
        room = height - fixed - least - CHART_MIN_LINES
        lines = table_lines_needed(n_collapsed if table.collapsed else n_all)
        table.set_max_lines(room if lines > room else None)
        if rows and not compact:  # its 40 % (app.tcss), less what the chart lacks
            share = height * PANEL_SHARE // 100
            chart = height - fixed - min(lines, max(room, 3)) - share
            want = None if chart >= CHART_TALL else max(least, share - (CHART_TALL - chart))
            if want != self._panel_height:
                self._panel_height = want
                panel.styles.height = want

    def _place_toasts(self) -> None:
        """Notifications stack up from the bottom right of the chart and totals: Textual
        stacks them from the screen's bottom, over the process table's numbers. Their
        rack keeps its bottom margin at the chart's last line (app.tcss makes each toast
        one line shorter). Checked at each frame, set only when the chart moved."""
        try:
            region = self._widget(PowerChart).parent.region  # #middle: chart and totals
        except NoMatches:  # after a resize, once the app quit and its widgets went
            return
        if region == self._toasts_at or not region.height:
            return
        self._toasts_at = region
        for rack in self.query("#textual-toastrack"):
            rack.styles.margin = (0, 0, max(0, self.size.height - region.bottom), 0)

    # -- keys -----------------------------------------------------------------------
    def action_zoom(self, step: int) -> None:
        """The chart's window: ``[`` shorter, ``]`` longer (redrawn from what it holds,
        paused or not)."""
        self._widget(PowerChart).zoom(step)

    def action_expand(self) -> None:
        """Every GPU on a line of its own, or each device group (``8 x H200``) as one."""
        table = self._widget(DomainTable)
        if not table.groups:
            self.notify("no GPUs of one model to group here")
            return
        self.expand_groups = table.collapsed
        self._fit_domains()
        self.notify("GPUs: one line each" if self.expand_groups else
                    "GPUs: one line per model (x: one each)")

    def action_parts(self) -> None:
        """The chart draws the parts (core, uncore) and psys too, or not."""
        self._widget(PowerChart).toggle_parts()

    def action_devices(self) -> None:
        """Every device's readings in full, as of the last frame."""
        message = self.drawn or self.latest
        self.app.push_screen(DeviceScreen(devices_text(
            message.snapshot if message is not None else None)))

    # -- snapshots ----------------------------------------------------------------
    def show(self, message: SnapshotReady) -> None:
        """A new snapshot: drawn now if a frame is due, else when one is (a newer one
        handed in meanwhile replaces it); kept, not drawn, while paused."""
        self.latest = message
        self._draw_when_due()

    def redraw(self) -> None:
        """Draw the latest snapshot again now (the interval or the pause changed)."""
        if self.latest is not None and self._ready and not self.paused:
            self._draw(self.latest)

    def show_job(self, state: JobState, job: JobSample | None,
                 exited_at_s: float | None) -> None:
        """Update the job panel alone (the job exited while the display is paused)."""
        if self._ready:
            self._widget(JobPanel).show(state, job, exited_at_s)

    @property
    def frame_pending(self) -> bool:
        """A snapshot waits for its frame (it will be drawn when one is due)."""
        return not self.paused and self.latest is not None and self.latest is not self.drawn

    def watch_paused(self, paused: bool) -> None:
        if not paused:
            self.redraw()
        elif self._ready:  # frozen as last drawn, the top bar says so
            self._widget(PowerChart).flush()  # the tick the table shows, not one before
            message = self.latest
            snap = message.snapshot if message is not None else None
            status = self.status(snap) if snap is not None else None
            self._widget(TopBar).show(snap, status.interval_s if status else 0.0, True,
                                      status.mode if status else "",
                                      status.cpu_percent if status else None, self.frame_s)

    def on_screen_resume(self) -> None:
        """Back from a modal (help, a question): the newest snapshot is drawn."""
        self._draw_when_due()

    def _draw_when_due(self) -> None:
        """Draw the latest snapshot now if a frame is due, else once it is. Not while a
        modal screen (help, a question) is over this one: each frame behind it made
        Textual compose the modal over the whole screen again (5.9 % of a core with the
        help open, against 2.3 % without); the newest is drawn when it closes."""
        if self.latest is None or self.paused or not self._ready:
            return
        if self.is_attached and self.app.screen is not self:
            return
        # the first numbers (the first tick after a frame of the session's start, seq 0)
        # are drawn at once: the frame cadence waits for nothing before them
        first = (self.drawn is not None and self.drawn.snapshot.seq == 0
                 and self.latest.snapshot.seq > 0)
        if (self._drawn_at is None or first
                or time.monotonic() - self._drawn_at >= self.frame_s):
            try:
                self._draw(self.latest)
            except NoMatches:  # the app quit before its widgets were up (SIGHUP at start)
                if not getattr(self.app, "_exit", False):  # Textual's "exit() was called"
                    raise
        elif self._frame_timer is None:
            self._frame_timer = self.set_timer(FRAME_CHECK_S, self._frame_due)

    def _frame_due(self) -> None:
        self._frame_timer = None
        if self.latest is not None and self.latest is not self.drawn:
            self._draw_when_due()

    def _widget(self, cls):
        """The screen's widget of a class, looked up once (they are composed once; a
        query per widget per frame walks the whole DOM)."""
        widget = self._widgets.get(cls)
        if widget is None:
            widget = self._widgets[cls] = self.query_one(cls)
        return widget

    def _draw(self, message: SnapshotReady) -> None:
        self._drawn_at = time.monotonic()
        self.drawn = message
        snap = message.snapshot
        status = self.status(snap)
        w = self._widget
        w(TopBar).show(snap, status.interval_s, self.paused, status.mode, status.cpu_percent,
                       self.frame_s)
        if status.job is not None:  # first: its lines count in the fit below
            energy = snap.job.total_energy_j if snap.job is not None else snap.total.total_energy_j
            work = self._work.update(snap.elapsed_s, energy, snap.work_totals)
            w(JobPanel).show(status.job, snap.job, status.job_exited_at_s, job_ranks(snap),
                             work)
        self._fit_domains()  # the job panel's height may have changed
        w(DomainTable).show(snap)
        w(PowerChart).show(snap, message.times_s)
        if self.ended:  # the last tick: drawn whether it moves the chart by a dot or not
            w(PowerChart).flush()
        w(TotalsPanel).show(snap)
        w(ProcessPanel).show(snap)
        self._fit_domains()  # the process panel's rows may have come (6 lines, not 1)
        w(SensorStatusLine).show(snap.sensors, status.problems)
        self._place_toasts()  # the process panel may have grown into the chart's rows
        self.frames_drawn += 1
