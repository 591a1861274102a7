"""The `tuimeter` command line paths that follow a job: `--pid PID` and `-- CMD ARGS`.
Sensors come from discovery on this machine (the estimate where nothing is measured)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from tuimeter.tui.run import build
from tuimeter.tui.screens import QuitScreen
from tuimeter.tui.widgets import JobPanel

from .conftest import wait_for


async def _tick_until(pilot, condition, tries: int = 200) -> bool:
    """Tick the (unstarted) engine on the real clock until ``condition()`` holds."""
    for _ in range(tries):
        pilot.app.engine.tick()
        if await wait_for(pilot, condition, tries=1):
            return True
        await pilot.pause(0.05)
    return condition()


@pytest.mark.asyncio
async def test_pid_command_line_follows_and_sees_the_exit(tmp_path, capsys):
    """`tuimeter --pid PID`: the job panel shows the process, then that it exited."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = tmp_path / "s.csv"
        session, problem = build(["--pid", str(child.pid), "-o", str(out), "--no-socket",
                                  "--no-gpu"], start_engine=False)
        assert problem is None
        app = session.app
        async with app.run_test(size=(80, 24)) as pilot:
            panel = app.query_one(JobPanel)
            assert await _tick_until(pilot, lambda: "running" in str(panel.content))
            assert f"JOB {child.pid}" in str(panel.content)
            child.kill()
            child.wait()
            assert await _tick_until(pilot, lambda: "EXITED" in str(panel.content))
            await pilot.press("q")
        assert session.close() == 0
        err = capsys.readouterr().err
        assert f"session saved to {out}" in err and "tuimeter:" in err
        assert (pd.read_csv(out)["kind"] == "session").sum() == 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.asyncio
async def test_command_is_started_followed_and_its_code_returned(tmp_path, capsys):
    """`tuimeter -- CMD`: the command runs with its output in a log file; the UI says it
    exited with its code, and tuimeter exits with that code."""
    out = tmp_path / "s.csv"
    session, problem = build(["-o", str(out), "--no-socket", "--no-gpu", "--", sys.executable,
                              "-c", "import sys; print('hello from the job'); sys.exit(3)"],
                             start_engine=False)
    assert problem is None
    app = session.app
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(JobPanel)
        session.job.popen.wait()
        assert await _tick_until(pilot, lambda: "EXITED with code 3" in str(panel.content))
        await pilot.press("q")
    assert session.close() == 3
    assert "hello from the job" in open(session.job.log_path).read()
    assert session.job.log_path in capsys.readouterr().err


def test_command_still_running_at_quit_is_terminated(tmp_path):
    session, problem = build(["-o", str(tmp_path / "s.csv"), "--no-socket", "--no-gpu", "--",
                              sys.executable, "-c", "import time; time.sleep(60)"],
                             start_engine=False)
    assert problem is None
    popen = session.job.popen
    session.close()
    assert popen.poll() is not None


@pytest.mark.asyncio
async def test_ui_serves_prometheus_metrics_and_attributes(tmp_path, capsys):
    """`tuimeter --prometheus PORT`: the UI serves /metrics like `record` does, and the
    attributor it builds sees the engine (its job CO2e uses the session's carbon settings)."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "s.csv"
    session, problem = build(["--prometheus", f"127.0.0.1:{port}", "-o", str(out),
                              "--no-socket", "--no-gpu"], start_engine=False)
    assert problem is None
    app = session.app
    assert app.engine.attributor.carbon is app.engine.carbon
    async with app.run_test(size=(80, 24)) as pilot:
        app.engine.tick()
        await pilot.pause()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b"tuimeter_machine_energy_joules_total" in body
        await pilot.press("q")
    assert session.close() == 0
    with pytest.raises(OSError):  # closed with the session
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_busy_prometheus_port_is_bad_input_and_leaves_no_file(tmp_path):
    """A port already in use: one-line error before anything is created."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = tmp_path / "s.csv"
        session, problem = build(["--prometheus", f"127.0.0.1:{port}", "-o", str(out),
                                  "--no-socket", "--no-gpu"], start_engine=False)
    assert session is None and problem and "\n" not in problem
    assert not out.exists()


def test_command_that_cannot_start_stops_the_exporters(tmp_path):
    """`tuimeter --prometheus PORT -- ./not-executable`: the one-line error leaves no
    file behind and no exporter running (the /metrics server held its port and thread,
    the InfluxDB sender its thread, until the process ended)."""
    import socket
    import threading
    import urllib.request

    script = tmp_path / "job.sh"
    script.write_text("echo hi\n")  # exists, but is not executable
    script.chmod(0o644)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "s.csv"
    before = {t.ident for t in threading.enumerate()}
    session, problem = build(["--prometheus", f"127.0.0.1:{port}", "--influx",
                              "http://127.0.0.1:9", "--influx-db", "x", "-o", str(out),
                              "--no-socket", "--no-gpu", "--", str(script)],
                             start_engine=False)
    assert session is None and problem.startswith("cannot run") and "\n" not in problem
    assert sorted(os.listdir(tmp_path)) == ["job.sh"]  # no session file, no empty .log
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == []


def test_command_log_never_replaces_an_existing_file(tmp_path):
    """`-o run.csv -- CMD` where run.log already exists (the user's own log of an earlier
    run): the command's output goes to a new name, the old file is kept; the session CSV
    refuses to replace a file, and so does its log."""
    old = tmp_path / "run.log"
    old.write_text("last week's training log\n")
    session, problem = build(["-o", str(tmp_path / "run.csv"), "--no-socket", "--no-gpu",
                              "--", sys.executable, "-c", "print('new output')"],
                             start_engine=False)
    assert problem is None
    session.job.popen.wait()
    session.close()
    assert old.read_text() == "last week's training log\n"
    assert session.job.log_path != str(old)
    assert os.path.dirname(session.job.log_path) == str(tmp_path)
    assert open(session.job.log_path).read() == "new output\n"


def test_command_gets_its_session_in_the_environment(tmp_path, monkeypatch):
    """Issue 9 item 8: `tuimeter -- CMD` names its session in $TUIMETER_SESSION for the
    command (the id its marker socket answers to), so the command's markers go there."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    seen = tmp_path / "env.txt"
    session, problem = build(["-o", str(tmp_path / "run.csv"), "--no-gpu", "--", sys.executable,
                              "-c", f"import os; open({str(seen)!r}, 'w').write("
                                    f"os.environ.get('TUIMETER_SESSION', '-'))"],
                             start_engine=False)
    assert problem is None
    try:
        session.job.popen.wait(timeout=30)
        assert seen.read_text() == session.recorder.writer.session_id
        assert session.server.session_id == session.recorder.writer.session_id
    finally:
        session.close()


def _sleeper_build(tmp_path, code: str = "import time; time.sleep(120)"):
    """`tuimeter -o s.csv -- python -c CODE` built for a pilot (the engine unstarted)."""
    session, problem = build(["-o", str(tmp_path / "s.csv"), "--no-socket", "--no-gpu", "--",
                              sys.executable, "-c", code], start_engine=False)
    assert problem is None
    return session


def _end(popen) -> None:
    if popen.poll() is None:
        popen.kill()
        popen.wait()


@pytest.mark.asyncio
@pytest.mark.parametrize("keys", [["q", "s"], ["ctrl+c", "ctrl+c"], ["q", "ctrl+c"]])
async def test_q_with_a_running_command_asks_before_stopping_it(tmp_path, keys):
    """`tuimeter -- CMD` and a reflexive `q`: the command keeps running while the question
    is open; `s` (or Ctrl-C again) stops it and quits: exit 143 (SIGTERM)."""
    session = _sleeper_build(tmp_path)
    popen = session.job.popen
    try:
        async with session.app.run_test(size=(80, 24)) as pilot:
            session.app.engine.tick()
            await pilot.press(keys[0])
            assert await wait_for(pilot, lambda: isinstance(session.app.screen, QuitScreen))
            assert popen.poll() is None and session.app.is_running
            await pilot.press(keys[1])
        assert session.close() == 143
        assert popen.poll() is not None
    finally:
        _end(popen)


@pytest.mark.asyncio
async def test_q_then_stay_keeps_the_command_and_the_ui(tmp_path):
    """`q`, then `n` (or Esc): nothing is stopped, the UI goes on; `q` asks again."""
    session = _sleeper_build(tmp_path)
    popen = session.job.popen
    try:
        async with session.app.run_test(size=(80, 24)) as pilot:
            for stay in ("n", "escape"):
                await pilot.press("q")
                assert await wait_for(pilot, lambda: isinstance(session.app.screen, QuitScreen))
                await pilot.press(stay)
                assert await wait_for(pilot, lambda: not isinstance(session.app.screen,
                                                                    QuitScreen))
                assert session.app.is_running and popen.poll() is None
            await pilot.press("q", "s")
        session.close()
    finally:
        _end(popen)


@pytest.mark.asyncio
@pytest.mark.parametrize("second", ["l", "q"])
async def test_q_then_leave_running_detaches_the_command_with_its_log(tmp_path, capsys,
                                                                      second):
    """`q`, then `l` (or a second `q`): tuimeter quits, the command runs on and its output
    still goes into the log file the question and the last lines name."""
    stamp = tmp_path / "go"
    code = ("import os, sys, time\n"
            f"while not os.path.exists({str(stamp)!r}): time.sleep(0.05)\n"
            "print('after tuimeter left', flush=True)\ntime.sleep(120)\n")
    session = _sleeper_build(tmp_path, code)
    popen = session.job.popen
    try:
        async with session.app.run_test(size=(100, 30)) as pilot:
            session.app.engine.tick()
            await pilot.press("q")
            assert await wait_for(pilot, lambda: isinstance(session.app.screen, QuitScreen))
            question = str(session.app.screen.query_one("#question").render())
            assert session.job.log_path in question
            await pilot.press(second)
        assert session.close() == 0
        err = capsys.readouterr().err
        assert f"left running; its output goes on into {session.job.log_path}" in err
        assert popen.poll() is None  # alive after tuimeter's clean-up
        stamp.write_text("")
        from tests.helpers import wait_for as wait_real

        wait_real(lambda: "after tuimeter left" in open(session.job.log_path).read(), 30,
                  "the detached command's output in its log")
        assert popen.poll() is None
    finally:
        _end(popen)


@pytest.mark.asyncio
async def test_q_with_a_followed_pid_never_signals_it(tmp_path):
    """`tuimeter --pid PID`: `q` quits at once (nothing to ask) and the followed process,
    which tuimeter did not start, runs on."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        session, problem = build(["--pid", str(child.pid), "-o", str(tmp_path / "s.csv"),
                                  "--no-socket", "--no-gpu"], start_engine=False)
        assert problem is None
        async with session.app.run_test(size=(80, 24)) as pilot:
            session.app.engine.tick()
            await pilot.press("q")
            assert await wait_for(pilot, lambda: not session.app.is_running)
        assert session.close() == 0
        assert child.poll() is None
    finally:
        _end(child)
