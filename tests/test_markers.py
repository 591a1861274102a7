"""Markers from anywhere: the per-user socket, `tuimeter mark`, refusal of bad messages."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time

import pytest

from tests.helpers import make_engine, wait_for
from tuimeter.session import mark_client, markers


pytestmark = pytest.mark.usefixtures("runtime_dir")


@pytest.fixture
def engine():
    eng, clock = make_engine()
    eng.open()
    eng.clock_ = clock
    return eng


@pytest.fixture
def server(engine):
    srv = markers.start_marker_server(engine)
    yield srv
    srv.close()


def _raw(path: str, payload: bytes) -> dict | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(path)
    s.sendall(payload)
    try:
        return _reply(s)
    finally:
        s.close()


def _reply(s: socket.socket) -> dict | None:
    """The server's reply line on ``s`` (None: closed without one)."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf) if buf else None


def test_socket_dir_and_socket_are_private(server, runtime_dir):
    """The directory is 0700 and the socket 0600, under $XDG_RUNTIME_DIR."""
    d = os.path.dirname(server.path)
    assert d == str(runtime_dir / "tuimeter")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600


def test_unsafe_directory_refused(runtime_dir):
    """A socket directory readable by others is refused, with the fix in the message."""
    d = runtime_dir / "tuimeter"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    with pytest.raises(markers.UnsafeDirectory, match="chmod 700"):
        markers.socket_dir()


def test_mark_reaches_the_engine_and_the_snapshot(server, engine):
    """`send_mark` adds a marker with source and pid; the next tick carries it."""
    assert mark_client.send_mark("epoch 2", source="cli", pid=4242).delivered == 1
    engine.clock_.advance(1.0)
    snap = engine.tick()
    (m,) = snap.new_markers
    assert (m.label, m.source, m.pid) == ("epoch 2", "cli", 4242)


def test_reply_carries_cumulative_energy(server, engine):
    """A reply holds the session's cumulative energy per domain, for the API's phases."""
    engine.clock_.advance(2.0)
    engine.tick()
    (reply,) = mark_client.request({"op": "status"})
    assert reply["ok"] and reply["tick_seq"] == 1
    assert reply["total_energy_j"] == pytest.approx(90.0)
    pkg = next(d for d in reply["domains"] if d["id"] == "package-0")
    assert pkg["total_energy_j"] == pytest.approx(80.0) and pkg["power_w"] == pytest.approx(40.0)


def test_every_session_is_marked(engine):
    """Two sessions running (UI + record): one `mark` reaches both."""
    a = markers.start_marker_server(engine)
    b = markers.start_marker_server(engine)
    try:
        assert mark_client.send_mark("x").delivered == 2
    finally:
        a.close()
        b.close()


def test_cmd_mark_without_session_exits_1(capsys):
    """With nothing running, `tuimeter mark` says so and exits 1, quickly."""
    assert mark_client.cmd_mark(["phase"]) == 1
    assert "no tuimeter session is running" in capsys.readouterr().err


def test_cmd_mark_ok_and_bad_label(server, capsys):
    assert mark_client.cmd_mark(["compress", "phase"]) == 0
    assert "marked 'compress phase' in 1 session" in capsys.readouterr().out
    assert mark_client.cmd_mark(["bad\x07label"]) == 2
    assert "control characters" in capsys.readouterr().err


def test_stale_socket_is_removed(runtime_dir):
    """A socket left by a killed session (nobody listening) is removed by the client."""
    d = runtime_dir / "tuimeter"
    d.mkdir(mode=0o700)
    path = str(d / "99999-1.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    assert mark_client.send_mark("x").delivered == 0
    assert not os.path.exists(path)


@pytest.mark.parametrize("payload, error", [
    (b"x" * 5000, "message over"),
    (b"not json\n", "not a JSON line"),
    (b"[1, 2]\n", "JSON object"),
    (b'{"op": "mark", "label": ""}\n', "empty"),
    (b'{"op": "mark", "label": "' + b"a" * 300 + b'"}\n', "longer than"),
    (b'{"op": "mark", "label": "a\\nb"}\n', "control"),
    (b'{"op": "shutdown"}\n', "unknown op"),
])
def test_bad_messages_refused_session_unharmed(server, engine, payload, error):
    """Malformed or oversized messages get an error reply; no marker; the server goes on."""
    reply = _raw(server.path, payload)
    assert reply is not None and reply["ok"] is False and error in reply["error"]
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()
    assert mark_client.send_mark("after").delivered == 1
    assert server.refused >= 1


def test_client_that_sends_nothing_does_not_block_others(server):
    """A silent client holds no lock: another client is served meanwhile."""
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(server.path)
    try:
        assert mark_client.send_mark("meanwhile").delivered == 1
    finally:
        idle.close()


def test_close_removes_socket(engine):
    srv = markers.start_marker_server(engine)
    srv.close()
    srv.close()
    assert not os.path.exists(srv.path)


# -- issue 9: labels at the socket, delivery, exactness, targeting -------------------
@pytest.mark.parametrize("payload, error", [
    (b'{"op": "mark", "label": "\\udcff"}\n', "not valid UTF-8"),
    (b'{"op": "mark", "label": "caf\\udce9"}\n', "byte 0xe9"),
    (b'{"op": "mark", "label": "a\\u202eb"}\n', "bidirectional"),
    (b'{"op": "mark", "label": "a\\u2066b"}\n', "bidirectional"),
])
def test_socket_refuses_labels_that_are_not_valid_text(server, engine, payload, error):
    """Regression (issue 9 item 2): ``{"label": "\\udcff"}`` was accepted, and the
    recorder died writing it. Now an error reply, nothing reaches the engine."""
    reply = _raw(server.path, payload)
    assert reply["ok"] is False and error in reply["error"]
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


def test_a_long_non_ascii_label_fits_in_one_message(server, engine):
    """200 characters of 4-byte UTF-8 (escaped in JSON) are within the message limit."""
    label = "😀" * markers.MAX_LABEL_CHARS
    assert mark_client.send_mark(label).delivered == 1
    engine.clock_.advance(1.0)
    assert [m.label for m in engine.tick().new_markers] == [label]


def test_a_message_read_after_its_deadline_is_refused_not_recorded(server, engine):
    """A stopped session reads its queued markers on SIGCONT, after the client reported
    them as not delivered: it must not record them then."""
    reply = _raw(server.path, json.dumps({"op": "mark", "label": "late",
                                          "expires": time.time() - 1}).encode() + b"\n")
    assert reply["ok"] is False and reply["expired"]
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


@pytest.fixture
def stopped_session(runtime_dir):
    """A session that accepts connections (the kernel queues them) and never answers:
    what a `tuimeter record` stopped by SIGSTOP looks like to a client."""
    d = markers.socket_dir()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(d, "99998-1.sock"))
    s.listen(8)
    yield s
    s.close()


def test_a_stopped_session_does_not_block_the_live_ones(server, engine, stopped_session,
                                                        monkeypatch, capsys):
    """Regression (issue 9 item 6): sessions were asked one after another within one
    second, so a stopped one used the whole budget and the live one got nothing ("no
    tuimeter session is running", exit 1). Now all are asked at once: the live one is
    marked, the stopped one is named as not answering, and the exit status is 3."""
    monkeypatch.setattr(mark_client, "CLIENT_TIMEOUT_S", 0.3)
    monkeypatch.setattr(mark_client, "CLI_TIMEOUT_S", 0.3)
    monkeypatch.setattr(mark_client, "REPLY_GRACE_S", 0.3)
    r = mark_client.send_mark("x")
    assert (r.delivered, r.not_answered, r.refused) == (1, ("pid 99998",), ())
    assert not r and r.exit_status == 3
    assert mark_client.cmd_mark(["y"]) == 3
    out, err = capsys.readouterr()
    assert "marked 'y' in 1 of 2 sessions" in out
    assert err.count("\n") == 1 and "pid 99998 did not answer" in err
    engine.clock_.advance(1.0)
    assert [m.label for m in engine.tick().new_markers] == ["x", "y"]


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "1e9"])
def test_bad_timeout_is_one_line_exit_2(server, engine, timeout, capsys):
    assert mark_client.cmd_mark(["--timeout", timeout, "x"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


def test_nothing_answered_is_exit_1_and_says_who(stopped_session, monkeypatch, capsys):
    monkeypatch.setattr(mark_client, "CLI_TIMEOUT_S", 0.2)
    monkeypatch.setattr(mark_client, "REPLY_GRACE_S", 0.2)
    assert mark_client.cmd_mark(["x"]) == 1
    assert "nothing marked: pid 99998 did not answer" in capsys.readouterr().err


def test_clients_beyond_the_connection_limit_wait_their_turn(server, engine, monkeypatch):
    """Regression (issue 9 item 7): a client arriving while MAX_CONNECTIONS were open was
    closed unanswered. Now it waits in the listen queue and is served in turn; every
    acknowledged marker reaches the engine, and only those."""
    monkeypatch.setattr(markers, "MAX_CONNECTIONS", 2)
    results: dict[int, object] = {}

    def one(i: int) -> None:
        results[i] = mark_client.send_mark(f"c{i}", timeout_s=10.0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acked = {f"c{i}" for i, r in results.items() if r.delivered == 1}
    engine.clock_.advance(1.0)
    recorded = [m.label for m in engine.tick().new_markers]
    assert sorted(recorded) == sorted(acked) and len(acked) == 40


def test_a_session_that_has_ended_refuses_markers(server, engine):
    """Between the final tick and the socket closing, a marker used to be acknowledged
    and never written. The engine now refuses it and the client hears so."""
    engine.stop(final_tick=True)
    r = mark_client.send_mark("too late")
    assert r.delivered == 0 and r.refused and "has ended" in r.refused[0]
    assert mark_client.cmd_mark(["too late"]) == 1


@pytest.fixture
def two_sessions(engine, tmp_path):
    a = markers.MarkerServer(engine, session_id="aaaaaaaaaaaa", path=str(tmp_path / "a.csv"))
    b = markers.MarkerServer(engine, session_id="bbbbbbbbbbbb", path=str(tmp_path / "b.csv"))
    yield a, b
    a.close()
    b.close()


def test_target_by_id_path_or_environment(two_sessions, engine, tmp_path, monkeypatch,
                                          capsys):
    """Issue 9 item 8: `--session ID|PATH` and $TUIMETER_SESSION reach one session."""
    r = mark_client.send_mark("to a", target="aaaaaaaaaaaa")
    assert r and r.sessions == ("aaaaaaaaaaaa",)
    monkeypatch.chdir(tmp_path)
    r = mark_client.send_mark("to b", target="b.csv")  # relative to the client's cwd
    assert r and r.sessions == ("bbbbbbbbbbbb",)
    monkeypatch.setenv("TUIMETER_SESSION", "bbbbbbbbbbbb")
    assert mark_client.cmd_mark(["env", "b"]) == 0
    assert "marked 'env b' in session bbbbbbbbbbbb" in capsys.readouterr().out
    assert mark_client.send_mark("all", target=None).delivered == 2
    monkeypatch.setenv("TUIMETER_SESSION", "")  # empty: every session, as before
    assert mark_client.send_mark("all again").delivered == 2
    engine.clock_.advance(1.0)
    labels = [m.label for m in engine.tick().new_markers]
    assert labels == ["to a", "to b", "env b", "all", "all", "all again", "all again"]


def test_unknown_target_is_one_line_exit_1(two_sessions, engine, capsys):
    assert mark_client.cmd_mark(["--session", "nosuchsession", "x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no running session is 'nosuchsession'" in err
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


def test_cmd_mark_refuses_an_undecodable_argument(server, engine, capsys):
    """`tuimeter mark $'caf\\xe9'`: argv holds 'caf\\udce9'; exit 2, one line, nothing sent."""
    assert mark_client.cmd_mark(["caf\udce9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid UTF-8" in err
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


# -- pids where they enter (issue 22 item 5) ---------------------------------------------
@pytest.mark.parametrize("pid", ["99999999999999999999", str(2**63), str(2**22 + 1), "0",
                                 "-5", "9" * 5000])
def test_cmd_mark_refuses_a_pid_no_kernel_gives(server, engine, pid):
    """`tuimeter mark --pid 99999999999999999999 x` was "marked in 1 session", and the
    reader then skipped the marker row as malformed (the phase vanished): now one line,
    exit 2, and no session records it."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "tuimeter", "mark", "--pid", pid, "x"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and "process id" in res.stderr
    assert res.stdout == ""
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


@pytest.mark.parametrize("pid", [2**63, 2**22 + 1, 0, -1, True, 1.5, "77"])
def test_socket_refuses_a_pid_no_kernel_gives(server, engine, pid):
    """The socket applies the same rule: 2**63 was accepted as readily as a real pid."""
    msg = json.dumps({"op": "mark", "label": "phase", "source": "cli", "pid": pid})
    reply = _raw(server.path, msg.encode() + b"\n")
    assert reply is not None and reply["ok"] is False and "process id" in reply["error"]
    engine.clock_.advance(1.0)
    assert engine.tick().new_markers == ()


def test_the_largest_pid_accepted_is_read_back(server, engine, tmp_path):
    """The entry rule and the reader's agree: a marker about pid 2**22 (Linux's largest
    pid_max) is recorded, written and read back by `report`'s reader with its pid."""
    from tuimeter.session.csvfile import SessionWriter
    from tuimeter.session.reader import SessionReader
    from tuimeter.session.recorder import Recorder

    rec = Recorder(SessionWriter.create(tmp_path / "s.csv", "h"))
    rec.start(engine.snapshot)
    assert mark_client.send_mark("edge", pid=2**22).delivered == 1
    engine.clock_.advance(1.0)
    rec(engine.tick())
    rec.close()
    reader = SessionReader(tmp_path / "s.csv")
    rows = [r for r in reader if r.kind == "marker"]
    assert reader.problems == []
    assert [(r.label, r.pid) for r in rows] == [("edge", 2**22)]


def test_tuimeter_mark_gives_busy_sessions_five_seconds_by_default(runtime_dir):
    """Issue 22: 1 s reached every one of 3 recorders on 2 busy cores for 47 of 100
    concurrent marks. `tuimeter mark` now gives sessions 5 s (the API keeps 1 s: a
    program's marker must not stall it when a session is stopped): the deadline the
    message carries, as a session reads it."""
    d = runtime_dir / "tuimeter"
    d.mkdir(mode=0o700)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(d / "4242-1.sock"))
    srv.listen(4)
    seen = []

    def serve(n):
        for _ in range(n):
            conn, _ = srv.accept()
            line = conn.makefile("rb").readline()
            seen.append((json.loads(line), time.time()))
            conn.sendall(b'{"ok": true, "session": "s1"}\n')
            conn.close()

    t = threading.Thread(target=serve, args=(2,), daemon=True)
    t.start()
    assert mark_client.cmd_mark(["busy"]) == 0
    assert mark_client.send_mark("api").delivered == 1
    t.join(30)
    srv.close()
    (cli, t_cli), (api, t_api) = seen
    assert 2.0 < cli["expires"] - t_cli <= 5.0
    assert 0.0 < api["expires"] - t_api <= 1.0


# -- issue 25: an idle server sleeps -------------------------------------------------
def test_a_silent_client_is_still_timed_out_by_a_server_that_sleeps_when_idle(
        engine, monkeypatch):
    """The serving thread sleeps with no timeout while no connection is open (an idle
    session costs no wake-ups); with one open it wakes at that connection's deadline, so
    a client that never sends its line is still answered "timed out", and closing the
    server ends the thread at once."""
    monkeypatch.setattr(markers, "SERVER_CONN_TIMEOUT_S", 0.3)
    srv = markers.start_marker_server(engine)
    try:
        assert srv._timeout_s() is None  # idle: until a client or close() wakes it
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.settimeout(20)
        silent.connect(srv.path)
        reply = json.loads(silent.makefile().readline())
        silent.close()
        assert reply == {"ok": False, "error": "timed out"}, reply
        wait_for(lambda: srv._timeout_s() is None, what="the connection dropped")
    finally:
        srv.close()
    assert not srv._thread.is_alive()
