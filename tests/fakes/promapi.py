"""A fake Prometheus HTTP API (``/api/v1/query``) on a loopback port, answering range
selectors (``metric{k="v",host=~"a|b"}[30s]``) with raw samples, as Prometheus does
(docs: the HTTP API; ../shared/SENSORS.md section 7): ``{"status": "success", "data":
{"resultType": "matrix", "result": [{"metric": {...}, "values": [[ts, "value"], ...]}]}}``,
values as text, each sample at its scrape's timestamp.

Each series is a function of wall time: samples on a grid of ``scrape_s`` from
``start``, the value ``value(t)`` (None: no sample: the target was down); so the answers
follow the real clock without a thread. ``mode`` makes the server fail: ``"down"`` (503),
``"garbage"`` (not JSON), ``"error"`` (``status: error``), ``"slow"`` (answers after
``slow_s``). It records every query and Authorization header it saw.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

_SEL = re.compile(r'^(?P<metric>[A-Za-z_:][A-Za-z0-9_:]*)?(\{(?P<m>[^}]*)\})?(\[(?P<w>\d+)s\])?$')
_MATCH = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)(=~|=)"((?:[^"\\]|\\.)*)"')


@dataclass
class FakeSeries:
    labels: dict[str, str]
    value: Callable[[float], float | None]  # J (or mJ) at wall time t; None: no sample
    start: float = 0.0
    scrape_s: float = 1.0


@dataclass
class FakePromAPI:
    series: list[FakeSeries] = field(default_factory=list)
    mode: str = ""
    slow_s: float = 3.0
    queries: list[str] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    want_auth: str | None = None  # answer 401 unless the header is this

    def answer(self, expr: str, at: float) -> dict:
        m = _SEL.match(expr.replace(" ", ""))
        if not m:
            return {"status": "error", "errorType": "bad_data", "error": f"parse error: {expr}"}
        metric, window = m["metric"], float(m["w"] or 300)  # instant: 5 min lookback
        matchers = [(k, op, v.replace('\\"', '"').replace("\\\\", "\\"))
                    for k, op, v in _MATCH.findall(m["m"] or "")]
        out = []
        for s in self.series:
            labels = s.labels
            if metric and labels.get("__name__") != metric:
                continue
            ok = True
            for k, op, v in matchers:
                have = labels.get(k, "")
                ok = ok and (have == v if op == "=" else re.fullmatch(v, have) is not None)
            if not ok:
                continue
            lo = max(s.start, at - window)
            first = s.start + math.ceil((lo - s.start) / s.scrape_s) * s.scrape_s
            values = []
            t = first
            while t <= at:
                v = s.value(t)
                if v is not None:
                    values.append([round(t, 3), repr(float(v))])
                t += s.scrape_s
            if values and m["w"]:
                out.append({"metric": dict(labels), "values": values})
            elif values:  # an instant vector: the newest sample, at the query's time
                out.append({"metric": dict(labels), "value": [at, values[-1][1]]})
        kind = "matrix" if m["w"] else "vector"
        return {"status": "success", "data": {"resultType": kind, "result": out}}


class _Handler(BaseHTTPRequestHandler):
    api: FakePromAPI

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        api = self.server.api  # type: ignore[attr-defined]
        parts = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(parts.query)
        api.auth.append(self.headers.get("Authorization"))
        if parts.path != "/api/v1/query":
            return self._send(404, b"not found")
        expr = q.get("query", [""])[0]
        api.queries.append(expr)
        if api.want_auth is not None and self.headers.get("Authorization") != api.want_auth:
            return self._send(401, b'{"status":"error","error":"unauthorized"}')
        if api.mode == "down":
            return self._send(503, b"Service Unavailable")
        if api.mode == "garbage":
            return self._send(200, b"<html>a login page</html>")
        if api.mode == "error":
            return self._send(400, json.dumps({"status": "error", "error": "bad"}).encode())
        if api.mode == "slow":
            time.sleep(api.slow_s)
        at = float(q.get("time", [time.time()])[0])
        self._send(200, json.dumps(api.answer(expr, at)).encode())

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass


class FakePromServer:
    """``with FakePromServer(api) as srv: srv.url``."""

    def __init__(self, api: FakePromAPI, tls: tuple[str, str] | None = None):
        self.api = api
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.api = api  # type: ignore[attr-defined]
        scheme = "http"
        if tls is not None:  # (certificate, key) files: https
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakePromServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def node_series(host: str, start: float, watts: dict[str, float], scrape_s: float = 1.0,
                tags: dict[str, str] | None = None, until: float | None = None,
                restart_at: float | None = None) -> list[FakeSeries]:
    """tuimeter's ``tuimeter_energy_joules_total`` series of one node: ``watts`` per
    domain (``package-0`` and ``package-0/dram`` in total, ``package-0/core`` not), no
    samples after ``until``; from ``restart_at`` on the counter starts again from 0 (a
    restarted recorder)."""
    out = []
    for dom, w in watts.items():
        kind = {"package-0": "package", "package-0/dram": "dram", "package-0/core": "core"}.get(
            dom, "gpu" if dom.startswith("gpu") else "other")
        labels = {"__name__": "tuimeter_energy_joules_total", "host": host, "domain": dom,
                  "kind": kind, "source": "nvml" if kind == "gpu" else "rapl",
                  "provenance": "measured", "in_total": "0" if kind == "core" else "1",
                  "job": "tuimeter", **(tags or {})}

        def value(t, w=w):
            if until is not None and t > until:
                return None
            if restart_at is not None and t >= restart_at:
                return w * (t - restart_at)
            return w * (t - start)
        out.append(FakeSeries(labels, value, start, scrape_s))
    return out
