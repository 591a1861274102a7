"""Shared set-up for the UI tests: an engine over scripted sensors on a fake clock, its
session file, and a deterministic replay of tests/data/sessions/demo.csv."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import make_engine
from tuimeter.model import CarbonInfo, DomainKind, JobSample, ProcessShare
from tuimeter.measurement import open_recorder
from tuimeter.tui.app import TuimeterApp
from tuimeter.tui import run
from tuimeter.tui.run import open_session

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "sessions" / "demo.csv"
CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test grid")


@pytest.fixture(autouse=True)
def _no_cursor_blink(monkeypatch):
    """Blinking cursors make screens differ from one frame to the next."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "cursor_blink", False, raising=False)


def gpu_sensor() -> ScriptedSensor:
    return ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                          {"gpu0": 150.0})


def proc(pid: int, name: str, power_w: float, *, ppid: int = 1, args: str = "",
         in_job: bool = False, cpu: float | None = None, gpu: float = 0.0,
         energy_j: float | None = None, start: float | None = None,
         uid: int | None = 0) -> ProcessShare:
    """A process as attribution hands it (start time: its pid, unless given)."""
    return ProcessShare(
        pid=pid, name=name, cpu_share=power_w / 100 if cpu is None else cpu, gpu_share=gpu,
        power_w=power_w, energy_j=power_w,
        total_energy_j=10 * power_w if energy_j is None else energy_j, in_job=in_job,
        ppid=ppid, cmdline=f"/usr/bin/{name} {args}".strip(), uid=uid,
        start=float(pid) if start is None else start)


#: a followed job (a shell and two Python processes) and four other processes
JOB = (proc(300, "sh", 0.0, args="-c ./run.sh", in_job=True),
       proc(301, "python3", 25.0, ppid=300, args="train.py --epochs 3", in_job=True, gpu=0.6,
            energy_j=120.0),
       proc(302, "python3", 8.0, ppid=300, args="worker.py", in_job=True, energy_j=400.0))
OTHERS = (proc(400, "firefox", 12.0, energy_j=60.0), proc(401, "Xorg", 3.0, energy_j=900.0),
          proc(402, "yes", 15.0, ppid=403, energy_j=30.0), proc(403, "zsh", 0.5, energy_j=1.0))


class ScriptedAttributor:
    """Attribution as the engine's attributor hands it: the top processes ``procs`` and
    the job's ``members`` (no job when None) a test sets, at every tick until changed."""

    def __init__(self, procs=OTHERS + JOB[1:], members=JOB, idle_w: float = 5.0):
        self.procs, self.members, self.idle_w = tuple(procs), members, idle_w

    def attribute(self, interval_s, domains, now_s):
        job = None
        if self.members is not None:
            power = sum(p.power_w for p in self.members)
            job = JobSample(pid=self.members[0].pid, name="sh", running=True,
                            n_processes=len(self.members), power_w=power, energy_j=power,
                            total_energy_j=power, cpu_energy_j=power, gpu_energy_j=0.0,
                            co2_g=0.0, total_co2_g=0.0, share=0.2, members=tuple(self.members))
        return tuple(self.procs), self.idle_w, job


def make_app(tmp_path: Path, *, job=None, sensors=None, host="test-host", attributor=None,
             **kw):
    """An app over scripted sensors on a fake clock, recording to tmp_path/session.csv.

    The engine thread is not started: tests call :func:`tick`.
    """
    sensors = sensors if sensors is not None else [rapl_like(), gpu_sensor()]
    engine, clock = make_engine(sensors, carbon=CARBON, wall_follows_clock=True, host=host,
                                attributor=attributor)
    recorder = open_recorder(str(tmp_path / "session.csv"), engine.host)
    open_session(engine, recorder)
    app = TuimeterApp(engine, recorder=recorder, job=job, start_engine=False,
                      export_dir=str(tmp_path), **kw)
    return app, clock


def replay_app(clock: FakeClock, recorder_path: str | None = None):
    """The demo session replayed on a fake clock (deterministic: fixed host, 0% CPU)."""
    recorder = open_recorder(recorder_path, "demo-node") if recorder_path else None
    return run.replay_app(str(DEMO), clock, recorder=recorder)


def play(path, speed: float = 1.0):
    """Replay ``path`` to its end on a fake clock, headless: (engine, snapshots, sensor)."""
    from tuimeter.replay_engine import ReplayPlayer, make_replay

    clock = FakeClock()
    engine, sensor = make_replay(str(path), speed=speed, clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    snaps: list = []
    engine.subscribe(snaps.append)
    player = ReplayPlayer(engine, sensor)
    while not player.finished:
        clock.advance(1.0)
        player.run_due()
    return engine, snaps, sensor


async def tick(pilot, clock: FakeClock, n: int = 1, dt: float = 1.0) -> None:
    """Advance the fake clock and tick the engine ``n`` times (a replay: its player ticks
    what is due), then let the UI catch up."""
    player = getattr(pilot.app, "player", None)
    for _ in range(n):
        clock.advance(dt)
        if player is not None:
            player.run_due()
        else:
            pilot.app.engine.tick()
    await pilot.pause()
    await drawn(pilot)


async def drawn(pilot) -> None:
    """Let the app draw the latest snapshot (frames are throttled: it may wait for one)."""
    assert await wait_for(pilot, lambda: not pilot.app.main.frame_pending)


async def wait_for(pilot, condition, tries: int = 200) -> bool:
    """Let the app run until ``condition()`` holds (bounded; no wall-clock assertions)."""
    for _ in range(tries):
        if condition():
            return True
        await pilot.pause(0.05)
    return condition()


def screen_text(app) -> tuple[str, str]:
    """What the screen shows now, as (the text of every cell, the bytes a terminal
    would be sent): cursor moves and Rich's own styling codes are in the second only."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    update = app.screen._compositor.render_update(full=True,
                                                  screen_stack=app._background_screens)
    text = "".join(s.text for s in console.render(update) if not s.control)
    console.print(update)
    return text, console.file.getvalue()


class PtyRun:
    """``python -m tuimeter ARGV`` in a pseudo-terminal of ``cols`` x ``rows``, as a user
    runs it: every byte the app sends is kept in ``received`` (a thread drains it), keys
    are written with :meth:`press`. Waits are bounded conditions, never timings."""

    def __init__(self, argv, env: dict, cols: int = 120, rows: int = 40):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen([sys.executable, "-m", "tuimeter", *argv], stdin=slave,
                                     stdout=slave, stderr=slave, cwd=ROOT,
                                     env=dict(os.environ, TERM="xterm-256color", **env),
                                     start_new_session=True)
        os.close(slave)
        self.received = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.received.extend(data)

    def wait_for(self, wanted: bytes, start: int = 0, timeout_s: float = 60.0) -> bool:
        """Whether ``wanted`` arrives (at or after byte ``start``) before the app exits or
        ``timeout_s`` passes (a bound on a real program's start, not a timing)."""
        deadline = time.monotonic() + timeout_s
        while wanted not in self.received[start:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return wanted in self.received[start:]
            threading.Event().wait(0.05)
        return True

    def press(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        self._reader.join(5)


def screen_lines(app) -> list[str]:
    """The screen as text, a string per line (what a text capture shows)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


class FixedJob:
    """A followed job that runs until told (``exit``), with a fixed pid and name: a
    screen that shows it is the same on every machine (a real JobWatcher names the test's
    own process)."""

    popen = None
    log_path = None

    def __init__(self, pid: int = 300, name: str = "sh") -> None:
        from tuimeter.job import JobState

        self.pid, self.name = pid, name
        self.state = JobState(pid, name, True, "running")

    def poll(self):
        return self.state
