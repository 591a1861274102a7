"""The live UI over an :class:`~tuimeter.engine.sampler.Engine`.

The engine samples on its own thread and records every tick (the recorder is one of its
listeners). The UI only reads snapshots: a listener posts :class:`SnapshotReady`, which a
newer one replaces while still queued, so a slow terminal skips frames, never ticks.

The app keeps what is app-wide: the keys, the snapshot feed, the notifications; the
:class:`~tuimeter.tui.main_screen.MainScreen` lays out and draws the main view. The
measurement is a headless :class:`~tuimeter.live.LiveSession` (built
and opened by ``tui/run.py``; an app given only an opened engine and recorder wraps them
in one). The app subscribes itself on mount, starts the session (unless ``start_engine``
is False: tests tick the engine by hand on a fake clock), and on ``q`` stops it (final
tick, marker server, exporters, engine, recorder: ``LiveSession.stop``) and exits with
the last snapshot. A replay is ticked by its
:class:`~tuimeter.replay_engine.ReplayPlayer` (``app.player``) instead of the sampler
thread: at the recorded tick times, the last one the recording's end.

No attribute of the app, its screens or widgets reuses a name Textual keeps for itself
(``tests/tui/test_replay_end.py`` checks): an app attribute ``_running``, set to False
when a replay reached its end, once told Textual the app had stopped, so the screen froze
a few ticks before the end and no key seemed to work.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import gc
import os
import shutil
import signal
import sys
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.drivers.linux_driver import LinuxDriver
from textual.reactive import reactive

from .. import config
from ..grouping import next_grouping
from ..job import JobState, JobWatcher
from ..live import LiveSession
from ..model import Snapshot
from ..session import files
from ..session.files import NewFile
from ..text import safe_text
from .commands import app_commands, process_commands
from ._quiet_driver import QuietLinuxDriver
from .functions_key import FunctionsKey
from .format import fmt_duration, fmt_interval
from .main_screen import MainScreen, Status
from .messages import SnapshotFeed, SnapshotReady
from .screens import HelpScreen, LabelScreen, QuitScreen
from .widgets import ProfilePanel

if TYPE_CHECKING:
    from ..engine.sampler import Engine
    from ..sensors.replay import ReplaySensor
    from ..session.recorder import Recorder

#: the sampling intervals ``+`` and ``-`` step through, seconds
INTERVALS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)


def export_file(directory: str, now: _dt.datetime | None = None) -> NewFile:
    """A new file ``tuimeter-export-YYYYmmdd-HHMMSS[-N].csv`` in ``directory``, created
    empty (O_EXCL, no link followed) so that two exports in the same second never pick the
    same name. Raises OSError if the directory cannot take it."""
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return files.create_free(directory, f"tuimeter-export-{stamp}", ".csv")


def copy_complete_rows(src: str, dst: NewFile) -> None:
    """Copy the session file as written so far, without a row still being written, into
    ``dst`` (written through its descriptor, never reopened by name).

    Only the tail is read to find the last complete row (a day's session is hundreds of
    MB); a copy that fails (disk full) removes the file it wrote."""
    try:
        fin = open(src, "rb")
    except OSError:
        dst.remove()
        os.close(dst.fd)
        raise
    with fin, os.fdopen(dst.fd, "rb+") as fh:
        try:
            shutil.copyfileobj(fin, fh)
            fh.flush()
            size = fh.seek(0, os.SEEK_END)
            end = pos = size
            while pos > 0:
                pos = max(0, pos - 65536)
                fh.seek(pos)
                cut = fh.read(end - pos).rfind(b"\n")
                if cut >= 0:
                    end = pos + cut + 1
                    break
                end = pos
            if end < size:
                fh.truncate(end)
        except BaseException:
            dst.remove()  # before the descriptor closes (see NewFile.remove)
            raise


class TuimeterApp(App[Snapshot | None]):
    """What ``tuimeter`` shows. See the module docstring for the life cycle."""

    CSS_PATH = "app.tcss"
    TITLE = "tuimeter"
    BINDINGS = [
        Binding("m", "mark", "Mark"),
        # the footer keeps ? and q at 80 columns: M, + and - are in the help and palette
        Binding("M", "mark_labelled", "Label mark", key_display="M", show=False),
        Binding("p", "pause", "Pause"),
        Binding("g", "group", "Group", show=False),
        Binding("e", "export", "Export"),
        Binding("f", "functions", "Functions", show=False),  # help and palette list it
        Binding("plus,equals_sign", "slower", "Slower", key_display="+", show=False),
        Binding("minus,underscore", "faster", "Faster", key_display="-", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False),  # as in top/htop (Textual: ctrl+q)
    ]

    interval_s: reactive[float] = reactive(1.0)
    """The engine's sampling interval, seconds (recording and display; the display draws
    at most every ``MainScreen.frame_s``)."""

    def __init__(self, engine: "Engine", *, recorder: "Recorder | None" = None,
                 job: JobWatcher | None = None, replay: "ReplaySensor | None" = None,
                 attribution: str = "unavailable", export_dir: str = ".",
                 start_engine: bool = True, keep_session: bool = True,
                 exporters: Sequence = (), session: LiveSession | None = None,
                 profile_source: Callable[[], tuple] | None = None,
                 theme: str | None = None, config_path: str | os.PathLike | None = None,
                 process_scan: Callable | None = None) -> None:
        """``process_scan``: every process on the machine as rows, for the process filter
        (``process_rows.every_process_rows``; the command line passes it)."""
        super().__init__()
        self.config_path = config_path
        """Where a theme chosen in the palette is saved (config.toml); None: not saved."""
        self._theme_problem = ""  # an unknown theme asked for, said once mounted
        self._saved_theme = self.theme  # the one in config.toml (not saved again)
        if theme and theme in self.available_themes:
            self._saved_theme = self.theme = theme
        elif theme:
            self._theme_problem = (f"unknown theme {theme!r} (config.toml or TUIMETER_THEME)"
                                   f"; ctrl+p, Change theme lists them")
        if session is None:  # the caller opened the engine and started the recorder
            session = LiveSession(engine, recorder, exporters, markers=False, replay=replay)
        self.session = session
        self.engine = engine
        self.exporters = tuple(session.exporters)
        self.recorder = session.recorder
        self.job = job
        self.replay = replay
        self.player = session.player
        self.attribution = attribution
        self.export_dir = export_dir
        self.start_engine = start_engine
        self.keep_session = keep_session
        self.final_snapshot: Snapshot | None = None
        self.exports: list[str] = []
        self.feed = SnapshotFeed(self.post_message, engine.history_len)
        follows = job is not None or (replay is not None and replay.recorded_job)
        self.main = MainScreen(engine.domains, self._status, attribution=attribution,
                               follows_job=follows, process_scan=process_scan)
        self._marks = 0
        self._finished = False
        self._job_exited_at: float | None = None
        self._replay_done = False
        self._problems_shown = 0  # a replay's malformed rows already notified
        self._sessions_asked = False  # the replayed file's sessions scan has started
        self._record_error_shown = False
        self._quit_requested = False  # see request_quit
        self.leave_job_running = False
        """``q``, then "leave it running": the command tuimeter started is not stopped
        at the end (``Session.close``); its output goes on into its log."""
        #: ``tuimeter profile --ui``: returns the live profile's (functions, total J)
        self.profile_source = profile_source
        self._profile_panel: ProfilePanel | None = None
        self.functions = FunctionsKey(self)  # f: the same panel, by py-spy from outside
        self.set_reactive(TuimeterApp.interval_s, engine.interval_s)

    @property
    def session_path(self) -> str | None:
        return self.recorder.path if self.recorder is not None and self.keep_session else None

    @property
    def paused(self) -> bool:
        """The display is frozen (the engine keeps sampling and recording)."""
        return self.main.paused

    def get_driver_class(self):
        """Textual's driver for this platform; on Linux and macOS the one whose input
        thread sleeps until there is input (:mod:`._quiet_driver`)."""
        driver_class = super().get_driver_class()
        return QuietLinuxDriver if driver_class is LinuxDriver else driver_class

    def get_default_screen(self) -> MainScreen:
        return self.main

    def on_mount(self) -> None:
        snap = self.engine.snapshot
        if snap is not None:
            self.main.show(SnapshotReady(snap, ()))
        self.engine.subscribe(self.feed)
        if self.replay is not None and not self.start_engine:
            self._sessions_asked = True  # nothing ticks by itself: no frame to wait for
            self._find_sessions()
        if not self.is_headless:
            self._watch_the_terminal()
            self.call_after_refresh(self._freeze_startup_objects)
        if self._theme_problem:
            self.say(self._theme_problem, severity="warning", timeout=15)
        if self.start_engine:
            self.session.start()
        if self._quit_requested:
            self.exit()

    @staticmethod
    def _freeze_startup_objects() -> None:
        """After the first frame: the objects made so far (modules, Textual's DOM, styles:
        some 75,000) live as long as the app, so the garbage collector stops walking them
        (``gc.freeze``). A full collection walked them all, ~50 ms about every minute and a
        half; it now walks what came after. Not in headless runs (tests make many apps in
        one process)."""
        gc.freeze()

    def _watch_the_terminal(self) -> None:
        """End the session cleanly when the terminal goes away (SSH drops, tmux killed).

        SIGHUP and SIGTERM quit like `q`. Without a SIGHUP (another session's process,
        `su`), our driver's input thread sees the input end and calls :meth:`terminal_lost`
        (:mod:`._quiet_driver`); under another driver the terminal is checked every second.
        Textual's own input thread would spin on the hung-up terminal at 100 % of a core;
        we quit instead (the session file is closed after a final tick).
        """
        loop = asyncio.get_running_loop()
        for signum in (getattr(signal, "SIGHUP", None), signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, self.terminal_lost)
            except (NotImplementedError, RuntimeError, ValueError, AttributeError, TypeError):
                pass
        if isinstance(self._driver, QuietLinuxDriver):
            return  # its input thread says when the terminal hangs up (on_input_ended)
        try:
            fd = sys.__stdin__.fileno() if sys.__stdin__ is not None else -1
        except (OSError, ValueError):
            fd = -1
        if fd >= 0 and self.tty_alive(fd):
            self.set_interval(1.0, lambda: None if self.tty_alive(fd) else self.terminal_lost())

    tty_alive = staticmethod(os.isatty)  #: a hung-up terminal fails its ioctl: not a tty

    def terminal_lost(self) -> None:
        """The terminal is gone: quit as `q` would (final tick, file closed)."""
        self.exit()

    def request_quit(self) -> None:
        """Quit as `q` would once mounted: for a signal that comes before the app's event
        loop handles it (see _watch_the_terminal); only sets a flag, as a signal handler
        must."""
        self._quit_requested = True

    def say(self, message: str, **kw) -> None:
        """A notification that may hold text from outside (labels, process and file
        names, session ids): escaped, and never read as markup."""
        self.notify(safe_text(message), markup=False, **kw)

    @work(thread=True, group="sessions")
    def _find_sessions(self) -> None:
        """Which sessions the replayed file holds (a scan of the whole file: not on the
        UI thread, and started once the first frame is out, so it never delays it)."""
        self.replay.find_sessions()
        try:
            self.call_from_thread(self._say_which_session)
        except RuntimeError:  # the app has ended meanwhile
            pass

    def _say_which_session(self) -> None:
        """A file with several sessions replays one: say which, and how to pick another."""
        replay = self.replay
        sessions = replay.sessions if replay is not None else None
        if not sessions or len(sessions) < 2:
            return
        n = len(sessions)
        which = sessions.index(replay.session_id) + 1
        self.say(f"{os.path.basename(replay.path)} holds {n} sessions: replaying "
                 f"{'the first' if which == 1 else f'number {which}'} "
                 f"({replay.session_id}); --session ID picks another "
                 f"({', '.join(sessions)})", severity="warning", timeout=30)

    def _say_replay_problems(self) -> None:
        """Rows of the replayed file skipped as malformed, as the reader finds them."""
        problems = self.replay.problems
        if len(problems) > self._problems_shown:
            new = problems[self._problems_shown:]
            self._problems_shown = len(problems)
            self.say("; ".join(new), severity="warning", timeout=15)

    # -- snapshots ----------------------------------------------------------------
    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        snap = message.snapshot
        self._check_job(snap)
        self._check_recorder()
        if self.replay is not None:
            self._say_replay_problems()
            if not self._sessions_asked:
                self._sessions_asked = True
                self.call_after_refresh(self._find_sessions)  # after this frame
        if self.replay is not None and not self._replay_done and self.replay.finished(snap.elapsed_s):
            self._replay_done = True
            self.main.ended = True
            self._stop_engine(final_tick=False)
            # the top bar says so for good: the toast only points at q
            self.notify(f"replay finished at {fmt_duration(snap.elapsed_s)}, the end of the "
                        f"recording; press q to quit", timeout=8)
        self.main.show(message)
        self._show_profile()

    def _show_profile(self) -> None:
        """``tuimeter profile --ui``: the top functions, in a panel mounted below the
        process table with the first snapshot."""
        if self.profile_source is None or self.main.paused:
            return
        if self._profile_panel is None:
            self._profile_panel = ProfilePanel(id="profile")
            self.main.mount(self._profile_panel, after="#processes")
        self._profile_panel.show(self.profile_source())

    def hide_profile(self) -> None:
        """Take the profile's panel away (``f`` pressed again)."""
        if self._profile_panel is not None:
            self._profile_panel.remove()
            self._profile_panel = None

    def _mode(self) -> str:
        if self.replay is None:
            return ""
        speed = "" if self.replay.speed == 1 else f" {self.replay.speed:g}x"
        sessions = self.replay.sessions  # None until the file has been scanned
        if sessions and len(sessions) > 1:
            speed += f" [{sessions.index(self.replay.session_id) + 1}/{len(sessions)}]"
        done = ": replay finished" if self._replay_done else ""
        return f"REPLAY {safe_text(os.path.basename(self.replay.path))}{speed}{done}"

    def _cpu_percent(self, snap: Snapshot) -> float | None:
        pct = snap.monitor_cpu_percent
        if pct is not None and self.replay is not None:
            pct *= self.replay.speed  # the engine divides by session seconds
        return pct

    def _status(self, snap: Snapshot) -> Status:
        """What the main screen shows besides the snapshot (asked for at each frame)."""
        problems = "; ".join(p for p in (e.status() for e in self.exporters) if p)
        job = self.job.state if self.job is not None else None
        if job is None and self.replay is not None and snap.job is not None:
            j = snap.job  # the recorded job, as its rows say
            job = JobState(j.pid, j.name, j.running, "replayed" if j.running else "exited")
        return Status(self.interval_s, self._mode(), self._cpu_percent(snap), problems, job,
                      self._job_exited_at)

    def _check_job(self, snap: Snapshot) -> None:
        if self.job is None or self._job_exited_at is not None:
            return
        state = self.job.poll()
        if state.running and (snap.job is None or snap.job.running):
            return
        self._job_exited_at = snap.elapsed_s
        code = state.exit_code if state.exit_code is not None else (
            snap.job.exit_code if snap.job is not None else None)
        how = "" if code is None else f" with code {code}"
        self.say(f"job {state.pid} ({state.name}) exited{how}", timeout=10)
        if self.paused:  # the job panel says so even while the display is paused
            self.main.show_job(state, snap.job, self._job_exited_at)

    def _check_recorder(self) -> None:
        rec = self.recorder
        if rec is not None and rec.failed.is_set() and not self._record_error_shown:
            self._record_error_shown = True
            self.say(f"recording stopped: {rec.error}", severity="error", timeout=30)

    # -- keys ---------------------------------------------------------------------
    def action_mark(self) -> None:
        self._marks += 1
        self._add_marker(f"mark {self._marks}")

    def action_mark_labelled(self) -> None:
        pressed_at = self.engine.clock()  # the marker is when M was pressed, not when typed

        def added(answer: tuple[str, bool] | None) -> None:
            if answer:
                label, at_enter = answer
                self._add_marker(label, None if at_enter else pressed_at)

        snap = self.engine.snapshot
        at = fmt_duration(snap.elapsed_s) if snap is not None else "the time"
        self.push_screen(LabelScreen(at), added)

    def _add_marker(self, label: str, at_s: float | None = None) -> None:
        if self._finished or self._replay_done:
            self.notify("the session has ended: no more markers", severity="warning")
            return
        marker = self.engine.add_marker(label, source="key", at_s=at_s)
        self.say(f"marker '{label}' at {fmt_duration(marker.elapsed_s)}")

    def action_pause(self) -> None:
        self.main.paused = not self.main.paused

    def action_group(self) -> None:
        """The process table's next grouping: per process, the job as one row, per cgroup."""
        self.main.grouping = next_grouping(self.main.grouping)
        self.notify(f"process table: per {self.main.grouping}")
        self.main.redraw()

    def _step_interval(self, direction: int) -> None:
        if self.replay is not None:
            self.notify(f"a replay samples at the recorded interval ("
                        f"{fmt_interval(self.interval_s)}); --speed N plays it faster",
                        severity="warning")
            return
        now = self.interval_s
        if direction > 0:
            choices = [s for s in INTERVALS_S if s > now + 1e-9]
            new = choices[0] if choices else INTERVALS_S[-1]
        else:
            choices = [s for s in INTERVALS_S if s < now - 1e-9]
            new = choices[-1] if choices else INTERVALS_S[0]
        if new != now:
            self.engine.set_interval(new)
            self.interval_s = new
        self.notify(f"sampling every {fmt_interval(new)} (display and recording)")

    def action_slower(self) -> None:
        self._step_interval(+1)

    def action_faster(self) -> None:
        self._step_interval(-1)

    def watch_interval_s(self) -> None:
        self.main.redraw()

    # -- the palette and the theme --------------------------------------------------
    def get_system_commands(self, screen) -> Iterable[SystemCommand]:
        """Textual's (theme, keys, quit, ...), then every key's action by name."""
        yield from super().get_system_commands(screen)
        yield from app_commands(self)
        yield from process_commands(screen)

    def watch_theme(self, theme: str) -> None:
        """A theme chosen (ctrl+p, Change theme) is remembered in config.toml."""
        if self.config_path is not None and theme != self._saved_theme:
            self._saved_theme = theme
            self._save_theme(theme)

    @work(thread=True, group="theme", exclusive=True)
    def _save_theme(self, theme: str) -> None:
        try:
            path = config.save_key("theme", theme, self.config_path)
        except (config.ConfigError, OSError) as exc:
            self.call_from_thread(self.say, f"theme kept for this run only, not remembered: {exc}",
                                 severity="warning")
            return
        env = " (TUIMETER_THEME, set here, wins over it)" if os.environ.get(
            "TUIMETER_THEME") else ""
        self.call_from_thread(self.say, f"theme {theme} saved in {path}{env}")

    def action_functions(self) -> None:
        self.functions.toggle()

    def action_help(self) -> None:
        snap = self.engine.snapshot
        sensors = snap.sensors if snap is not None else tuple(self.engine.statuses)
        self.push_screen(HelpScreen(sensors, self.session_path, self.engine.carbon))

    def action_export(self) -> None:
        if self.recorder is None:
            self.notify("nothing to export: this session is not recorded", severity="warning")
            return
        self._export(self.recorder.path, self.export_dir)

    @work(thread=True, group="export")
    def _export(self, src: str, directory: str) -> None:
        try:
            dst = export_file(directory)
            copy_complete_rows(src, dst)
        except OSError as exc:
            self.call_from_thread(self.say, f"export failed: {exc.strerror or exc}",
                                  severity="error")
            return
        self.exports.append(dst.path)
        self.call_from_thread(self.say, f"exported to {os.path.abspath(dst.path)}", timeout=15)

    async def action_quit(self) -> None:
        """Quit; while the command tuimeter started runs, ask first (:class:`QuitScreen`:
        stop it, leave it running, or stay). A followed ``--pid`` is never signalled."""
        job = self.job
        if (job is not None and job.popen is not None and not self._finished
                and job.poll().running):
            if not isinstance(self.screen, QuitScreen):
                self.push_screen(QuitScreen(job.name, job.pid, job.log_path),
                                 self._quit_answered)
            return
        self.exit(self.finish())

    def _quit_answered(self, answer: str | None) -> None:
        if answer is None:
            return
        self.leave_job_running = answer == "leave"
        self.exit(self.finish())

    # -- shutdown -----------------------------------------------------------------
    def _stop_engine(self, final_tick: bool) -> Snapshot | None:
        """Stop sampling, the files stay open (a replay that reached its end)."""
        return self.session.halt(final_tick=final_tick)

    def finish(self) -> Snapshot | None:
        """End the session (final tick, marker server, exporters, engine, session file:
        ``LiveSession.stop``); the last snapshot. Idempotent."""
        if self._finished:
            return self.final_snapshot
        self._finished = True
        self.functions.stop()
        self.engine.unsubscribe(self.feed)
        self.final_snapshot = self.session.stop().snapshot
        return self.final_snapshot
