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
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import count_totals, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _start_in_pty(tmp_path: Path, args=None, seen: bytearray | None = None):
    """The UI in a pseudo-terminal (``args`` default: record to tmp_path/ui.csv); what it
    writes to the terminal is collected in ``seen``."""
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
    # a new session without a controlling terminal: losing the pty sends it no SIGHUP
    proc = subprocess.Popen([sys.executable, "-m", "tuimeter", *args], stdin=slave,
                            stdout=slave, stderr=slave, cwd=ROOT, env=env,
                            start_new_session=True)
    os.close(slave)

    def drain():  # the terminal's other end: read what the app draws so it never blocks
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            if seen is not None:
                seen.extend(data)

    threading.Thread(target=drain, daemon=True).start()
    return proc, master, out


def _stop_with(proc, master, sig) -> None:
    """Send ``sig``, wait for the UI to exit, then close the terminal."""
    try:
        proc.send_signal(sig)
        wait_for(lambda: proc.poll() is not None, 30, f"the UI to exit after signal {sig}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_hung_up_terminal_ends_the_session_cleanly(tmp_path):
    """The terminal disappears without a SIGHUP (another session's process, `su`): the UI
    notices within a few seconds, takes its final tick, closes the file and exits."""
    proc, master, out = _start_in_pty(tmp_path)
    try:
        wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
        assert proc.poll() is None, "the UI did not start"
        os.close(master)
        wait_for(lambda: proc.poll() is not None, 30, "the UI to exit after the hang-up")
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
    wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, master, signal.SIGHUP)
    assert proc.returncode == 0
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 3 and out.read_text().endswith("\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_sigterm_ends_the_ui_with_its_summary(tmp_path):
    """SIGTERM (`kill`, a service stopping) ends the session as `q` does: exit 0, the
    summary and where the session is; before, the process died on the spot."""
    seen = bytearray()
    proc, master, out = _start_in_pty(tmp_path, seen=seen)
    wait_for(lambda: count_totals(out) >= 3 or proc.poll() is not None, 60, "three ticks")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, master, signal.SIGTERM)
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
    proc, master, _ = _start_in_pty(tmp_path, ["--replay", str(demo), "--speed", "2"], seen)
    temps = lambda: sorted((tmp_path / "tmp").glob("tuimeter-replay-*.csv"))  # noqa: E731
    wait_for(lambda: (temps() and (when == "starting" or b"REPLAY" in seen))
             or proc.poll() is not None, 60, f"the replay's file ({when})")
    assert proc.poll() is None, "the UI did not start"
    _stop_with(proc, master, signal.SIGTERM)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text[-2000:]
    assert temps() == []
    assert "replay not saved" in text and " J (" in text
