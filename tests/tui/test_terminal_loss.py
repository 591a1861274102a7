"""The real `tuimeter` UI in a pseudo-terminal that goes away: it ends the session cleanly
(final tick, file closed, process gone) instead of running on headless. Before the fix a
hung-up terminal left Textual's input thread spinning at 100 % of a core forever.

End-to-end runs of the real program: these take real seconds, waiting on conditions."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import count_totals, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty on stdin, as a
    terminal window's or sshd's shell has: closing the pty hangs it up (SIGHUP and
    SIGCONT from the kernel)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _start_in_pty(tmp_path: Path, args=None, seen: bytearray | None = None,
                  controlling: bool = False):
    """The UI in a pseudo-terminal (``args`` default: record to tmp_path/ui.csv); what it
    writes to the terminal is collected in ``seen``. ``controlling``: the pty is the UI's
    controlling terminal (else it is in a session without one: no SIGHUP)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True)
    out = tmp_path / "ui.csv"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = dict(os.environ, TERM="xterm-256color", TUIMETER_POWERCAP_ROOT=str(fake.sensor_root),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               TMPDIR=str(tmp_path / "tmp"))
    if args is None:
        args = ["-o", str(out), "--interval", "0.2", "--no-socket", "--no-gpu"]
    # a new session; without a controlling terminal losing the pty sends it no SIGHUP
    proc = subprocess.Popen([sys.executable, "-m", "tuimeter", *args], stdin=slave,
                            stdout=slave, stderr=slave, cwd=ROOT, env=env,
                            start_new_session=not controlling,
                            preexec_fn=_controlling_terminal if controlling else None)
    os.close(slave)

    return proc, Terminal(master, seen), out


class Terminal:
    """The pty's other end, as a terminal window holds it: what the app draws is read (and
    kept in ``seen``) so it never blocks; :meth:`close` closes it, as a window closing does.

    The reading thread closes it itself: a ``close`` from another thread while this one
    waits in ``read`` would not release the pty until the next byte came (Linux holds the
    file for the read in progress), and a paused UI writes none, so the terminal would
    never hang up."""

    def __init__(self, fd: int, seen: bytearray | None) -> None:
        self.fd = fd
        self.seen = seen
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while not self._closing.is_set():
                if not select.select([self.fd], [], [], 0.05)[0]:
                    continue
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return
                if not data:
                    return
                if self.seen is not None:
                    self.seen.extend(data)
        finally:
            os.close(self.fd)

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        self._closing.set()
        self._thread.join(10)


def _stop_with(proc, term: Terminal, sig) -> None:
    """Send ``sig``, wait for the UI to exit, then close the terminal."""
    try:
        proc.send_signal(sig)
        wait_for(lambda: proc.poll() is not None, 30, f"the UI to exit after signal {sig}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        term.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_hung_up_terminal_ends_the_session_cleanly(tmp_path):
    """The terminal disappears without a SIGHUP (another session's process, `su`): the UI
    notices within a few seconds, takes its final tick, closes the file and exits."""
    proc, term, out = _start_in_pty(tmp_path)
    try:
        wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
        assert proc.poll() is None, "the UI did not start"
        term.close()
        wait_for(lambda: proc.poll() is not None, 30, "the UI to exit after the hang-up")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 3
    assert out.read_text().endswith("\n")  # closed after whole rows


#: when the terminal is closed, as conditions on (what the UI drew, ticks in its file):
#: while it starts, at its first output, at its first full frame, after ticks, with the
#: help open, paused, and again after ticks (a run is a few seconds)
CLOSE_AT = {
    "starting": lambda seen, ticks: True,
    "first-output": lambda seen, ticks: len(seen) > 0,
    "first-frame": lambda seen, ticks: b"total" in seen,
    "first-numbers": lambda seen, ticks: re.search(rb"\d\.\d W", seen) is not None,
    "ticks": lambda seen, ticks: ticks >= 3,
    "help-open": lambda seen, ticks: b"Keys" in seen,
    "paused": lambda seen, ticks: b"PAUSED" in seen,
    "later": lambda seen, ticks: ticks >= 8,
}
#: keys typed once the first frame is out, per moment
CLOSE_KEYS = {"help-open": b"?", "paused": b"p"}


#: the start-up moments again at the default interval (1 s), whose first tick is the
#: short one (0.15 s after the sensors' first readings: about as the first frame is drawn)
START_MOMENTS = ("starting", "first-output", "first-frame", "first-numbers")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
@pytest.mark.parametrize("when,interval", [(w, "0.2") for w in CLOSE_AT] * 2
                         + [(w, "1") for w in START_MOMENTS] * 2)
def test_closing_its_controlling_terminal_ends_the_ui(tmp_path, when, interval):
    """The terminal window closed, `tmux kill-session`, SSH dropped: the pty is the UI's
    controlling terminal and goes away. The process exits within seconds every time, its
    file complete. Before, the kernel's SIGCONT (sent with the hang-up's SIGHUP) made
    Textual's driver start a new input thread while the app quit; that thread waited in
    select() for ever and kept the process alive (7 closes in 8)."""
    seen = bytearray()
    args = ["-o", str(tmp_path / "ui.csv"), "--interval", interval, "--no-socket", "--no-gpu"]
    proc, term, out = _start_in_pty(tmp_path, args, seen=seen, controlling=True)
    try:
        if when in CLOSE_KEYS:
            wait_for(lambda: b"total" in seen or proc.poll() is not None, 60, "the first frame")
            term.write(CLOSE_KEYS[when])
        wait_for(lambda: CLOSE_AT[when](seen, count_totals(out)) or proc.poll() is not None,
                 60, f"the moment to close ({when})")
        assert proc.poll() is None, "the UI ended before its terminal was closed"
        term.close()
        wait_for(lambda: proc.poll() is not None, 15, f"the UI to exit (closed: {when})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # a SIGHUP once tuimeter's own code runs is handled (0, or 2: said before any file);
    # only one during Python's start-up, before anything is made, is death by the signal
    assert proc.returncode in (0, 2) or (proc.returncode == -signal.SIGHUP
                                         and not out.exists()), (proc.returncode, bytes(seen[-600:]))
    if out.exists():
        assert out.read_text() == "" or out.read_text().endswith("\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_sighup_quits_like_q(tmp_path):
    """SIGHUP (an SSH session dropping) ends the session as `q` does: exit status 0."""
    proc, term, out = _start_in_pty(tmp_path)
    wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, term, signal.SIGHUP)
    assert proc.returncode == 0
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 3 and out.read_text().endswith("\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_sigterm_ends_the_ui_with_its_summary(tmp_path):
    """SIGTERM (`kill`, a service stopping) ends the session as `q` does: exit 0, the
    summary and where the session is; before, the process died on the spot."""
    seen = bytearray()
    proc, term, out = _start_in_pty(tmp_path, seen=seen)
    wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, term, signal.SIGTERM)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text[-2000:]
    assert " J (" in text and f"session saved to {out}" in text
    assert (pd.read_csv(out).kind == "total").sum() >= 3 and out.read_text().endswith("\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
@pytest.mark.parametrize("when", ["drawn", "starting"])
def test_sigterm_during_replay_leaves_no_temporary_file(tmp_path, when):
    """`tuimeter --replay F` records the replay in a temporary file that goes at exit;
    SIGTERM used to leave /tmp/tuimeter-replay-*.csv behind. Also when it comes as soon
    as the file exists, before the app is up."""
    demo = ROOT / "tests" / "data" / "sessions" / "demo.csv"
    seen = bytearray()
    proc, term, _ = _start_in_pty(tmp_path, ["--replay", str(demo), "--speed", "2"], seen)
    temps = lambda: sorted((tmp_path / "tmp").glob("tuimeter-replay-*.csv"))  # noqa: E731
    wait_for(lambda: (temps() and (when == "starting" or b"REPLAY" in seen))
             or proc.poll() is not None, 60, f"the replay's file ({when})")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, term, signal.SIGTERM)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text[-2000:]
    assert temps() == []
    assert "replay not saved" in text and " J (" in text
