"""The headless live session (tuimeter/live.py): one start and one shutdown order for
record, the UI and Meter."""

from __future__ import annotations

import sys

import pytest

from tests.fakes.scripted import FakeClock, rapl_like
from tuimeter.engine.sampler import Engine, SessionEnded
from tuimeter.live import LiveSession, StartError, exit_status
from tuimeter.model import CarbonInfo
from tuimeter.session.measure import open_recorder

CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test grid")


def _engine(clock: FakeClock) -> Engine:
    return Engine([rapl_like()], CARBON, 1.0, clock=clock, cpu_clock=lambda: 0.0,
                  wallclock=lambda: 1_800_000_000 + clock(), host="test-host")


class _Logged:
    """Records, in ``log``, when each part of the session is closed (and what the engine
    still accepted then)."""

    def __init__(self, name: str, log: list, engine: Engine, fails: bool = False):
        self.name, self.log, self.engine, self.fails = name, log, engine, fails

    def close(self) -> None:
        try:
            self.engine.add_marker("late")
            accepts = "takes markers"
        except SessionEnded:
            accepts = "ended"
        self.log.append(f"{self.name} ({accepts})")
        if self.fails:
            raise OSError(f"{self.name} broke")

    def status(self) -> str:
        return f"{self.name}: behind" if self.fails else ""


@pytest.mark.parametrize("failing", [None, "server", "exporter"])
def test_stop_runs_the_one_shutdown_order_even_when_a_step_fails(tmp_path, failing):
    """Final tick, marker server, exporters, engine, recorder: in that order, each step
    run even when an earlier one raised (a problem line, not a traceback). The UI used to
    close the file before the server and the exporters, Meter the server before the
    final tick."""
    clock = FakeClock()
    engine = _engine(clock)
    log: list[str] = []
    recorder = open_recorder(str(tmp_path / "s.csv"), engine.host)
    live = LiveSession(engine, recorder, [_Logged("exporter", log, engine,
                                                  failing == "exporter")], markers=False)
    live.open()
    live.server = _Logged("server", log, engine, failing == "server")
    engine.subscribe(lambda snap: log.append(f"tick {snap.elapsed_s:g}"))
    real_close, real_rec_close = engine.close, recorder.close
    engine.close = lambda: (log.append("engine"), real_close())[-1]
    recorder.close = lambda: (log.append("recorder"), real_rec_close())[-1]
    clock.advance(1.0)
    engine.tick()
    clock.advance(0.5)
    summary = live.stop()
    assert log == ["tick 1", "tick 1.5", "server (ended)", "exporter (ended)", "engine",
                   "recorder"]
    assert summary.snapshot is not None and summary.snapshot.elapsed_s == pytest.approx(1.5)
    assert summary.paths == [str(tmp_path / "s.csv")]
    assert len(summary.problems) == (0 if failing is None else 1)
    if failing is not None:
        assert summary.problems[0].endswith(f"OSError: {failing} broke")
    assert summary.exporter_problems == (["exporter: behind"] if failing == "exporter" else [])
    assert live.stop() is summary  # idempotent: nothing closed twice
    assert log.count("recorder") == 1


@pytest.mark.parametrize("rc, status", [(0, 0), (3, 3), (-15, 143), (-9, 137), (None, None)])
def test_exit_status_is_the_shells(rc, status):
    """A child killed by signal N reports 128 + N, as a shell does; one helper for record,
    the UI and the Summary."""
    assert exit_status(rc) == status


def test_a_command_that_cannot_start_leaves_nothing(tmp_path):
    """open() with a command that cannot run: StartError, the engine and exporters closed,
    the session file and the command's log removed (nothing else was there)."""
    engine = _engine(FakeClock())
    log: list[str] = []
    recorder = open_recorder(str(tmp_path / "s.csv"), engine.host)
    live = LiveSession(engine, recorder, [_Logged("exporter", log, engine)],
                       command=[str(tmp_path / "no-such-program")],
                       log_base=str(tmp_path / "s"), markers=False)
    with pytest.raises(StartError, match="cannot run"):
        live.open()
    assert log == ["exporter (takes markers)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_command_exit_code_reaches_the_summary_and_the_attributor(tmp_path):
    """The followed command's status is in the Summary, and the attributor hears it
    before the final tick (the job's last line)."""
    clock = FakeClock()
    engine = _engine(clock)
    heard: list = []

    class Attributor:
        def follow(self, pid):
            heard.append(("follow", pid))

        def set_exit_code(self, code):
            heard.append(("exit", code))

        def attribute(self, *a, **k):
            return None

    live = LiveSession(engine, None, command=[sys.executable, "-c", "raise SystemExit(5)"],
                       markers=False)
    engine.attributor = Attributor()
    live.open()
    live.child.wait(timeout=30)
    summary = live.stop()
    assert summary.exit_code == 5
    assert heard[0] == ("follow", live.child.pid) and ("exit", 5) in heard


#: a main thread waiting on the stop flag, as record's loop does; it says on stdout how
#: many signals it has handled so far
_WAITER = """
import sys, threading, time
from tuimeter.live import Caught

caught = Caught()
for _ in range(2):  # like the sampler and the marker server: a signal may land on them
    threading.Thread(target=lambda: [time.sleep(0.001) for _ in iter(int, 1)],
                     daemon=True).start()
print("ready", flush=True)
seen = 0
while seen < int(sys.argv[1]):
    caught.stop.wait(0.02)
    caught.stop.clear()
    if len(caught.signals) > seen:
        seen = len(caught.signals)
        print(seen, flush=True)
"""


def test_a_signal_after_a_stop_never_hangs_the_recording_loop():
    """Regression: the handler set a threading.Event. A process stopped (SIGSTOP) inside
    the loop's Event.wait, then sent SIGCONT and SIGTERM, resumes with the wait timed out
    and runs the handler while Event.wait still holds the event's lock: set() waited for
    it forever (a recorder hung like this). Stopped, continued and signalled 30 times, the
    loop handles every signal (a deadlock would stop the count)."""
    import signal
    import subprocess
    import time

    import queue
    import threading

    rounds = 30
    proc = subprocess.Popen([sys.executable, "-c", _WAITER, str(rounds)],
                            stdout=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.strip()) for x in proc.stdout],
                     daemon=True).start()
    try:
        assert lines.get(timeout=30) == "ready"
        for n in range(1, rounds + 1):
            proc.send_signal(signal.SIGSTOP)
            time.sleep(0.05)  # stopped past the loop's 0.02 s wait, as a Ctrl-Z is
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                assert lines.get(timeout=30) == str(n)
            except queue.Empty:
                pytest.fail(f"signal {n} was never handled: the loop hangs")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_quitting_the_ui_stops_the_commands_background_processes_too(tmp_path):
    """The UI's command (its output logged) runs in a process group of its own, and
    quitting stops the group: `sh -c 'sleep 600 & wait'` leaves no sleep behind (before,
    only sh got SIGTERM and its children ran on)."""
    import psutil

    from tests.helpers import wait_for
    from tuimeter.job import JobWatcher

    engine = _engine(FakeClock())
    live = LiveSession(engine, None, command=["sh", "-c", "sleep 600 & wait"],
                       log_base=str(tmp_path / "s"), markers=False)
    live.open()
    try:
        sh = psutil.Process(live.child.pid)
        wait_for(lambda: sh.children(), what="the background sleep")
        (sleep,) = sh.children()
        code = JobWatcher(live.child.pid, live.child, ["sh"], live.log_path).stop()
        assert code == -15  # SIGTERM, as Popen reports it
        wait_for(lambda: not sleep.is_running() or sleep.status() == psutil.STATUS_ZOMBIE,
                 what="the sleep to stop")
    finally:
        live.stop()


def test_a_started_commands_job_is_named_as_typed():
    """Guards the job panel naming a command after the process that forked it (``JOB 123
    bash`` for ``-- python3 train.py``: the name was read before the child's exec). A
    command tuimeter started is named by its first word's base name; ``--pid`` by the
    process's own name."""
    import os

    import psutil

    from tuimeter.job import JobWatcher

    started = JobWatcher(os.getpid(), None, ["/opt/venv/bin/train-job", "--epochs", "3"])
    assert started.name == "train-job" and started.poll().name == "train-job"
    assert JobWatcher(os.getpid()).name == psutil.Process().name()
