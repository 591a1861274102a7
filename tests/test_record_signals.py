"""`tuimeter record` and the hang-up of the terminal or SSH session it runs in (issue 9,
item 10). SIGHUP used to kill it (exit 129) with no final tick, no summary, a stale marker
socket, and a `-- CMD` child left running. Now it ends like SIGTERM, and the child gets
the SIGHUP a shell gives its jobs.

End-to-end runs of the real program: real seconds, waiting on conditions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for


def _sockets(tmp_path) -> list[str]:
    d = tmp_path / "run" / "tuimeter"
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".sock")) if d.is_dir() else []


def _start(tmp_path, *extra):
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "hup.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", "0.1", "--no-gpu",
                                     *extra), env=env_for(tmp_path, fake), cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    return proc, out


def _finish(proc, timeout_s: float = 30) -> str:
    try:
        _, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err


def test_sighup_ends_like_sigterm(tmp_path):
    """SIGHUP: exit 0, the one-line summary, a final tick after the signal, and the
    marker socket removed."""
    proc, out = _start(tmp_path)
    wait_for(lambda: count_totals(out) >= 3 and _sockets(tmp_path), what="three ticks")
    proc.send_signal(signal.SIGHUP)
    err = _finish(proc)
    assert proc.returncode == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tuimeter: ") and " J (" in lines[0], err
    assert _sockets(tmp_path) == []
    assert out.read_text().endswith("\n")
    assert (pd.read_csv(out).kind == "total").sum() >= 3


CHILD = """
import signal, sys, time
def hup(*_):
    open(sys.argv[1], "w").write("hup")
    time.sleep(0.3)  # some clean-up: tuimeter waits for it
    sys.exit(3)
signal.signal(signal.SIGHUP, hup)
open(sys.argv[2], "w").write("ready")
while True:
    time.sleep(0.05)
"""


def test_sighup_reaches_the_command_and_tuimeter_exits_with_its_status(tmp_path):
    """`record -- CMD`: the command gets SIGHUP, tuimeter waits for it to exit and exits
    with its status (3 here), after the final tick and the summary."""
    got, ready = tmp_path / "got-hup", tmp_path / "ready"
    proc, out = _start(tmp_path, "--", sys.executable, "-c", CHILD, str(got), str(ready))
    wait_for(lambda: ready.exists() and count_totals(out) >= 3, what="the command to run")
    proc.send_signal(signal.SIGHUP)
    err = _finish(proc)
    assert got.read_text() == "hup"
    assert proc.returncode == 3, err
    assert " J (" in err and _sockets(tmp_path) == []
    df = pd.read_csv(out)
    assert (df.kind == "job").any() and out.read_text().endswith("\n")


def test_sighup_kills_a_command_that_does_not_handle_it(tmp_path):
    """A command with the default action dies of SIGHUP: exit 129, as a shell says."""
    proc, out = _start(tmp_path, "--", "sleep", "60")
    wait_for(lambda: count_totals(out) >= 3, what="three ticks")
    proc.send_signal(signal.SIGHUP)
    err = _finish(proc)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert " J (" in err


def test_a_command_that_ignores_sighup_is_waited_for_a_bounded_time(tmp_path, monkeypatch,
                                                                     capsys):
    """A nohup'd command runs on after a hang-up, as a shell's job would: tuimeter waits
    HANGUP_WAIT_S for it, then ends the recording cleanly and exits 129, saying so."""
    import threading

    from tuimeter import cli

    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(fake.sensor_root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(cli, "HANGUP_WAIT_S", 0.5)
    ready = tmp_path / "ready"
    script = ("import signal, sys, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
              f"open({str(ready)!r}, 'w').write('x'); time.sleep(60)")
    out = tmp_path / "f.csv"
    children = []
    real_popen = subprocess.Popen

    def popen(*a, **kw):
        children.append(real_popen(*a, **kw))
        return children[-1]

    monkeypatch.setattr(subprocess, "Popen", popen)
    sent = threading.Event()

    def hang_up():  # the signal arrives while the main thread records
        wait_for(lambda: ready.exists() and count_totals(out) >= 2, what="the command")
        os.kill(os.getpid(), signal.SIGHUP)
        sent.set()

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    try:
        rc = cli.main(["record", "-o", str(out), "--interval", "0.1", "--no-gpu",
                       "--no-socket", "-q", "--", sys.executable, "-c", script])
        assert sent.is_set()
        assert rc == 128 + signal.SIGHUP
        assert children[0].poll() is None  # left running, not killed
        err = capsys.readouterr().err
        assert "ignored SIGHUP and still runs" in err and " J (" in err
    finally:
        for c in children:
            c.kill()
            c.wait()
    assert out.read_text().endswith("\n")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_before_the_first_tick_still_ends_cleanly(tmp_path, sig):
    """The handlers are installed before sampling starts: an early signal is not a
    traceback."""
    proc, out = _start(tmp_path)
    wait_for(lambda: out.exists(), what="the session file")
    proc.send_signal(sig)
    err = _finish(proc)
    assert proc.returncode == 0 and "Traceback" not in err, err
