"""The marker socket's wire format (:mod:`tuimeter.session.protocol`), which both ends
import: a state that does not read as one is not taken, whoever sent it."""

from __future__ import annotations

import csv
import json
import os
import socket
import threading

import pytest

from tests.helpers import make_engine
from tuimeter import api
from tuimeter.session import markers, protocol
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.recorder import Recorder

pytestmark = pytest.mark.usefixtures("runtime_dir")

#: an accepted state with the energy as text (and in_total as "1"): what a session of
#: another program, or a broken one, could send
ROGUE = {"ok": True, "server": "rogue", "session": "rogue", "host": "h", "elapsed_s": 1.0,
         "tick_seq": 1, "tick_elapsed_s": 1.0, "co2_g_per_j": 0.0,
         "domains": [{"id": "package-0", "source": "rapl", "in_total": "1",
                      "provenance": "measured", "total_energy_j": "12", "total_co2_g": 0.0,
                      "power_w": 5.0}]}


class _RogueSession:
    """A socket in the user's socket directory, listed before every real session's
    (``0-...``: a pid never starts with 0), that takes every message and answers
    :data:`ROGUE`."""

    def __init__(self) -> None:
        self.path = os.path.join(markers.socket_dir(), "0-rogue.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.asked = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    buf = b""
                    while b"\n" not in buf:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        buf += chunk
                    self.asked += 1
                    conn.sendall(json.dumps(ROGUE).encode() + b"\n")
                except OSError:  # a client that gave up: serve the next
                    pass

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)


def test_a_meter_takes_the_real_session_not_one_whose_state_is_malformed(tmp_path):
    """Two sessions answer an attaching Meter, the first with its energy as text: the
    Meter attaches to the real one and its phases are that session's joules (regression:
    it attached to the first that said ok, and reading its phases raised TypeError)."""
    eng, clock = make_engine()
    writer = SessionWriter.create(tmp_path / "session.csv", eng.host)
    rec = Recorder(writer)
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    server = markers.start_marker_server(eng, rec)
    rogue = _RogueSession()
    try:
        with api.Meter(label="rank0") as meter:
            clock.advance(2.0)
            eng.tick()
            meter.mark("phase2")
            clock.advance(1.0)
            eng.tick()
        assert meter.attached and rogue.asked >= 3  # it was asked, and answered, each time
        rank0, phase2 = meter.phases
        clock.advance(1.0)
        eng.tick()  # the end marker goes into the file
    finally:
        rogue.close()
        server.close()
        rec.close()
    assert rank0.energy_j == pytest.approx(90.0) and rank0.provenance == "measured"
    assert phase2.energy_j == pytest.approx(45.0)
    rows = list(csv.DictReader((tmp_path / "session.csv").open()))
    assert [r["label"] for r in rows if r["kind"] == "marker"] == ["rank0", "phase2", "end"]


def _state(**changes) -> dict:
    reply = json.loads(json.dumps(ROGUE))
    reply["domains"][0].update(in_total=True, total_energy_j=12.0)
    for key, value in changes.items():
        if key.startswith("d_"):
            reply["domains"][0][key[2:]] = value
        elif value is None:
            reply.pop(key)
        else:
            reply[key] = value
    return reply


def test_a_well_formed_state_decodes_to_its_figures():
    """The state a session sends, typed: energy at the marker past the last tick is the
    last tick's plus its power over the time since."""
    state = protocol.decode_state(_state(elapsed_s=1.5, co2_g_per_j=1e-4))
    assert (state.server, state.host, state.tick_seq, state.g_per_j) == ("rogue", "h", 1, 1e-4)
    (d,) = state.domains
    assert (d.id, d.in_total, d.source, d.total_energy_j, d.power_w) == (
        "package-0", True, "rapl", 12.0, 5.0)
    assert state.energy_at_marker(state.domains) == {"package-0": pytest.approx(14.5)}
    assert state.co2_at_marker(state.domains) == {"package-0": pytest.approx(2.5e-4)}
    assert state.own is None


@pytest.mark.parametrize("change", [
    {"d_in_total": "1"}, {"d_total_energy_j": "12"}, {"d_total_energy_j": float("nan")},
    {"d_power_w": "5"}, {"d_id": 7}, {"d_provenance": None}, {"tick_seq": True},
    {"elapsed_s": None}, {"elapsed_s": float("inf")}, {"domains": {"package-0": 1}},
    {"ok": False},
])
def test_a_state_with_a_value_of_the_wrong_type_is_not_taken(change):
    """Nothing from another process is trusted: each planted value makes the whole state
    unreadable (None), never a phase built on it."""
    assert protocol.decode_state(_state()) is not None
    assert protocol.decode_state(_state(**change)) is None


def test_what_a_client_encodes_the_server_decodes():
    """One module, both ends: a Meter's mark with its rank, meter and target comes out
    of the server's decoder as it went in; a source it may not claim is ``socket``."""
    msg = protocol.mark_message("epoch 2", "api", 4242, rank="3", meter="4242:1:ab",
                                meter_state="start")
    line = protocol.encode_message(msg, 1.8e9, "s1")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    got = protocol.decode_message(line.rstrip(b"\n"))
    assert (got.op, got.label, got.source, got.pid, got.rank) == (
        "mark", "epoch 2", "api", 4242, "3")
    assert (got.meter, got.meter_state, got.expires) == ("4242:1:ab", "start", 1.8e9)
    assert got.targeted and got.session == "s1" and got.expired(now=1.8e9 + 1)
    odd = protocol.decode_message(json.dumps({"label": "x", "source": "root"}).encode())
    assert (odd.op, odd.source, odd.targeted) == ("mark", "socket", False)
    with pytest.raises(protocol.ProtocolError, match="JSON object"):
        protocol.decode_message(b"[1, 2]")
