"""The real `tuimeter` UI in a pseudo-terminal that goes away: it ends the session cleanly
(final tick, file closed, process gone) instead of running on headless. Before the fix a
hung-up terminal left Textual's input thread spinning at 100 % of a core forever.

End-to-end runs of the real program: these take real seconds, waiting on conditions."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap

ROOT = Path(__file__).resolve().parents[2]


def _wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        threading.Event().wait(0.05)  # a poll period, not a synchronising sleep


def _totals(path: Path) -> int:
    return path.read_text().count(",total,total,") if path.exists() else 0


def _start_in_pty(tmp_path: Path):
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True)
    out = tmp_path / "ui.csv"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", TUIMETER_POWERCAP_ROOT=str(fake.sensor_root),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    # a new session without a controlling terminal: losing the pty sends it no SIGHUP
    proc = subprocess.Popen([sys.executable, "-m", "tuimeter", "-o", str(out), "--interval",
                             "0.2", "--no-socket", "--no-gpu"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=ROOT, env=env, start_new_session=True)
    os.close(slave)

    def drain():  # the terminal's other end: read what the app draws so it never blocks
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    return proc, master, out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_hung_up_terminal_ends_the_session_cleanly(tmp_path):
    """The terminal disappears without a SIGHUP (another session's process, `su`): the UI
    notices within a few seconds, takes its final tick, closes the file and exits."""
    proc, master, out = _start_in_pty(tmp_path)
    try:
        _wait(lambda: _totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
        assert proc.poll() is None, "the UI did not start"
        os.close(master)
        _wait(lambda: proc.poll() is not None, 30, "the UI to exit after the hang-up")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 3
    assert out.read_text().endswith("\n")  # closed after whole rows


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_sighup_quits_like_q(tmp_path):
    """SIGHUP (an SSH session dropping) ends the session as `q` does: exit status 0."""
    proc, master, out = _start_in_pty(tmp_path)
    try:
        _wait(lambda: _totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
        assert proc.poll() is None, "the UI did not start"
        proc.send_signal(signal.SIGHUP)
        _wait(lambda: proc.poll() is not None, 30, "the UI to exit after SIGHUP")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 3 and out.read_text().endswith("\n")
