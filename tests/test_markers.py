"""Markers from anywhere: the per-user socket, `tuimeter mark`, refusal of bad messages."""

from __future__ import annotations

import json
import os
import socket
import stat

import pytest

from tests.fakes.scripted import FakeClock, rapl_like
from tuimeter.engine.sampler import Engine
from tuimeter.model import CarbonInfo
from tuimeter.session import markers

CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test")


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path, monkeypatch):
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    return d


@pytest.fixture
def engine():
    clock = FakeClock()
    eng = Engine([rapl_like()], CARBON, 1.0, clock=clock, wallclock=FakeClock(1.8e9),
                 cpu_clock=lambda: 0.0, host="h")
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
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    s.close()
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
    assert markers.send_mark("epoch 2", source="cli", pid=4242) == 1
    engine.clock_.advance(1.0)
    snap = engine.tick()
    (m,) = snap.new_markers
    assert (m.label, m.source, m.pid) == ("epoch 2", "cli", 4242)


def test_reply_carries_cumulative_energy(server, engine):
    """A reply holds the session's cumulative energy per domain, for the API's phases."""
    engine.clock_.advance(2.0)
    engine.tick()
    (reply,) = markers.request({"op": "status"})
    assert reply["ok"] and reply["tick_seq"] == 1
    assert reply["total_energy_j"] == pytest.approx(90.0)
    pkg = next(d for d in reply["domains"] if d["id"] == "package-0")
    assert pkg["total_energy_j"] == pytest.approx(80.0) and pkg["power_w"] == pytest.approx(40.0)


def test_every_session_is_marked(engine):
    """Two sessions running (UI + record): one `mark` reaches both."""
    a = markers.start_marker_server(engine)
    b = markers.start_marker_server(engine)
    try:
        assert markers.send_mark("x") == 2
    finally:
        a.close()
        b.close()


def test_cmd_mark_without_session_exits_1(capsys):
    """With nothing running, `tuimeter mark` says so and exits 1, quickly."""
    assert markers.cmd_mark(["phase"]) == 1
    assert "no tuimeter session is running" in capsys.readouterr().err


def test_cmd_mark_ok_and_bad_label(server, capsys):
    assert markers.cmd_mark(["compress", "phase"]) == 0
    assert "marked 'compress phase' in 1 session" in capsys.readouterr().out
    assert markers.cmd_mark(["bad\x07label"]) == 2
    assert "control characters" in capsys.readouterr().err


def test_stale_socket_is_removed(runtime_dir):
    """A socket left by a killed session (nobody listening) is removed by the client."""
    d = runtime_dir / "tuimeter"
    d.mkdir(mode=0o700)
    path = str(d / "99999-1.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    assert markers.send_mark("x") == 0
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
    assert markers.send_mark("after") == 1
    assert server.refused >= 1


def test_client_that_sends_nothing_does_not_block_others(server):
    """A silent client holds no lock: another client is served meanwhile."""
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(server.path)
    try:
        assert markers.send_mark("meanwhile") == 1
    finally:
        idle.close()


def test_close_removes_socket(engine):
    srv = markers.start_marker_server(engine)
    srv.close()
    srv.close()
    assert not os.path.exists(srv.path)
