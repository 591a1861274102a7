"""The /metrics server under hostile clients (issue 9 item 9): idle, trickling and piled-up
connections cost neither threads nor unbounded file descriptors, and scrapes still answer.

Real sockets on 127.0.0.1; timeouts are made short so the tests wait on conditions, not on
the 5-second default.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import urllib.request

import pytest

from tests.helpers import make_engine, wait_for
from tuimeter.export.prometheus import PrometheusExporter


@pytest.fixture
def exporter():
    made = []

    def make(**kw):
        eng, _ = make_engine(host="node7")
        eng.open()
        eng.tick()
        e = PrometheusExporter(eng, "127.0.0.1", 0, **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()


def connect(exp) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", exp.port), timeout=10)
    return s


def closed_by_server(s: socket.socket, timeout_s: float = 10.0) -> bool:
    """Whether the server closes ``s`` within ``timeout_s`` (recv sees EOF or a reset)."""
    s.settimeout(timeout_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def scrape(exp) -> str:
    with urllib.request.urlopen(exp.url, timeout=5) as resp:
        assert resp.status == 200
        return resp.read().decode()


def own_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts fds through /proc")
def test_scrape_answers_while_100_idle_connections_are_held(exporter):
    """100 idle connections: no thread each, at most 8 held by the server, and a real scrape
    still answers (before: one thread and one descriptor per idle connection, for ever)."""
    exp = exporter(timeout_s=60.0)  # long enough that no idle one expires during the test
    server = exp._server
    threads_before, fds_before = threading.active_count(), own_fds()
    clients = [connect(exp) for _ in range(100)]
    try:
        # connections are accepted in order: once a later scrape is answered, all 100 are in
        assert "tuimeter_energy_joules_total" in scrape(exp)
        assert threading.active_count() <= threads_before
        # 100 client ends here + at most 8 server ends
        assert own_fds() - fds_before <= 100 + exp.MAX_CONNECTIONS
        assert server.accepted >= 101 and server.open_connections <= exp.MAX_CONNECTIONS
        assert scrape(exp)  # and again
        # the oldest were closed at once to make room, not held
        assert closed_by_server(clients[0], timeout_s=5)
    finally:
        for c in clients:
            c.close()


def test_idle_and_trickling_clients_are_dropped_when_their_time_is_up(exporter):
    """A client that sends nothing, or a byte now and then, is closed after timeout_s: its
    time is for the whole request, not per byte."""
    exp = exporter(timeout_s=0.3)
    idle = [connect(exp) for _ in range(3)]
    trickler = connect(exp)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 500 + b"\r\n\r\n"
    cut_off_after = None
    try:
        for i in range(len(request)):  # 10 s if never cut off
            try:
                trickler.send(request[i:i + 1])
            except OSError:
                cut_off_after = i
                break
            if select.select([trickler], [], [], 0.02)[0]:
                if closed_by_server(trickler, 1):
                    cut_off_after = i
                    break
        assert cut_off_after is not None and cut_off_after < len(request) - 1
        assert all(closed_by_server(s) for s in idle)
        assert wait_for(lambda: exp._server.open_connections == 0, 10)
        assert exp._server.timed_out >= 4
        assert "tuimeter_markers_total" in scrape(exp)  # a prompt client is still served
    finally:
        for s in [*idle, trickler]:
            s.close()


def test_held_connections_never_exceed_the_bound(exporter):
    """Beyond max_connections, the longest-waiting idle connection is closed at once."""
    exp = exporter(max_connections=4, timeout_s=60.0)
    clients = [connect(exp) for _ in range(9)]
    try:
        # the server counts an accepted connection before it makes room for it: wait for
        # the whole step (read half-way, the count is 3 or the eviction not yet counted)
        assert wait_for(lambda: exp._server.accepted >= 9 and exp._server.evicted >= 5
                        and exp._server.open_connections == 4, 10)
        assert all(closed_by_server(c, 5) for c in clients[:5])
        assert exp._server.evicted == 5 and exp._server.open_connections == 4
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("request_bytes, status", [
    (b"\x00\x01\x02\r\n\r\n", b"400"),
    (b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
    (b"GET /favicon.ico HTTP/1.1\r\n\r\n", b"404"),
    (b"GET / HTTP/1.1\r\nX: " + b"y" * 20000, b"431"),
])
def test_bad_requests_get_an_error_and_the_server_goes_on(exporter, request_bytes, status):
    exp = exporter(timeout_s=5.0)
    with connect(exp) as s:
        s.sendall(request_bytes)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    assert answer.split(b" ")[1] == status
    assert "tuimeter_markers_total" in scrape(exp)


def test_gzip_and_head_as_prometheus_asks(exporter):
    """Prometheus sends Accept-Encoding: gzip; HEAD gets headers only."""
    import gzip

    exp = exporter()
    req = urllib.request.Request(exp.url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        assert b"tuimeter_markers_total" in gzip.decompress(resp.read())
    with urllib.request.urlopen(urllib.request.Request(exp.url, method="HEAD"), timeout=5) as resp:
        assert resp.status == 200 and resp.read() == b""
