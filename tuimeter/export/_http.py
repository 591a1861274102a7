"""A small HTTP server for ``/metrics`` that a hostile or broken client cannot exhaust.

``prometheus_client.start_http_server`` starts one thread per connection and never times a
client out: 124 idle connections under ``ulimit -n 128`` took every file descriptor, and the
RAPL sensor lost every domain ("Too many open files"). This server instead:

* runs on **one thread** with a selector: an idle connection costs a file descriptor and a
  few hundred bytes, never a thread;
* holds at most ``max_connections`` (default 8) client connections. When a new one arrives
  and all are taken, the connection that has waited longest for its request is closed to
  make room (a scraper sends its request within a millisecond of connecting, so a flood of
  idle connections cannot keep Prometheus out); if every held connection is being answered,
  the newcomer is closed at once. Its descriptors are thus bounded at
  ``max_connections`` + 3 (the listening socket, the selector, a wake-up pipe);
* gives each connection ``timeout_s`` (default 5 s) to send its whole request, and again to
  read the whole answer: a client that sends nothing, or trickles a byte at a time, or
  reads the answer too slowly, is dropped when its time is up, whatever it does meanwhile;
* answers one request per connection (HTTP/1.1 with ``Connection: close``), which is all a
  Prometheus scrape needs. Requests larger than ``max_request_bytes`` are refused.

Nothing a client sends can stop the server thread: an error while answering becomes a 500.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from collections import OrderedDict
from typing import Callable
from urllib.parse import parse_qs, urlsplit

#: ``handler(method, path, query, headers) -> (status line text, headers, body)``
Handler = Callable[[str, str, dict, dict], tuple[str, list, bytes]]

_ACCEPT_ERRORS_PAUSE_S = 0.1  # out of descriptors (EMFILE): stop accepting this long


class _Conn:
    __slots__ = ("sock", "deadline", "inbuf", "out", "sent")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.deadline = deadline
        self.inbuf = bytearray()
        self.out: bytes | None = None  # the answer, once the request is complete
        self.sent = 0


class BoundedHttpServer:
    """Serves ``handler`` on ``host:port`` from one daemon thread until :meth:`close`.

    Binding happens in the constructor (OSError for a busy port). ``clock`` is the monotonic
    clock deadlines use (injectable). Counters for tests and figures: ``accepted``,
    ``refused`` (closed at once: all busy answering), ``evicted`` (an idle connection closed
    to make room), ``timed_out``; :attr:`open_connections` is the number held now.
    """

    def __init__(self, host: str, port: int, handler: Handler, *, max_connections: int = 8,
                 timeout_s: float = 5.0, max_request_bytes: int = 8192,
                 clock: Callable[[], float] = time.monotonic, name: str = "tuimeter-http"):
        if max_connections < 1 or timeout_s <= 0:
            raise ValueError("max_connections must be >= 1 and timeout_s > 0")
        self._handler = handler
        self.max_connections = max_connections
        self.timeout_s = timeout_s
        self.max_request_bytes = max_request_bytes
        self._clock = clock
        family, _, _, _, addr = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                   flags=socket.AI_PASSIVE)[0]
        self._listen = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listen.bind(addr)
            self._listen.listen(128)
            self._listen.setblocking(False)
        except BaseException:
            self._listen.close()
            raise
        self.server_port = self._listen.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listen, selectors.EVENT_READ, "listen")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: OrderedDict[int, _Conn] = OrderedDict()  # oldest first
        self._accept_paused_until: float | None = None
        self._stop = False
        self.accepted = self.refused = self.evicted = self.timed_out = 0
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    # ---- the loop ------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop:
            now = self._clock()
            wakes = [c.deadline for c in self._conns.values()]
            if self._accept_paused_until is not None:
                wakes.append(self._accept_paused_until)
            timeout = max(min(wakes) - now, 0.0) if wakes else None
            try:
                events = self._sel.select(timeout)
            except OSError:  # EINTR and the like: go round again
                continue
            for key, mask in events:
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    self._drain_wake()
                elif key.fd in self._conns:
                    conn = self._conns[key.fd]
                    if mask & selectors.EVENT_READ:
                        self._read(conn)
                    elif mask & selectors.EVENT_WRITE:
                        self._write(conn)
            self._expire(self._clock())

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listen.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: back off instead of spinning
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                self._sel.unregister(self._listen)
                self._accept_paused_until = self._clock() + _ACCEPT_ERRORS_PAUSE_S
                return
            self.accepted += 1
            if len(self._conns) >= self.max_connections:
                idle = next((c for c in self._conns.values() if c.out is None), None)
                if idle is None:
                    self.refused += 1
                    _close(sock)
                    continue
                self.evicted += 1
                self._drop(idle)
            sock.setblocking(False)
            conn = _Conn(sock, self._clock() + self.timeout_s)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, "conn")

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.inbuf += data
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbuf) > self.max_request_bytes:
                self._answer(conn, _response("431 Request Header Fields Too Large", [],
                                             b"request too large\n"))
            return
        self._answer(conn, self._respond(bytes(conn.inbuf[:end])))

    def _respond(self, head: bytes) -> bytes:
        try:
            lines = head.decode("iso-8859-1").split("\r\n")
            parts = lines[0].split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                return _response("400 Bad Request", [], b"bad request line\n")
            method, target = parts[0], parts[1]
            headers = {}
            for line in lines[1:]:
                key, sep, value = line.partition(":")
                if sep:
                    headers[key.strip().lower()] = value.strip()
            url = urlsplit(target)
            status, extra, body = self._handler(method, url.path, parse_qs(url.query), headers)
            return _response(status, extra, b"" if method == "HEAD" else body,
                             content_length=len(body))
        except Exception as exc:  # noqa: BLE001 - a bad request or collector never ends the server
            return _response("500 Internal Server Error", [],
                             f"error: {type(exc).__name__}\n".encode())

    def _answer(self, conn: _Conn, data: bytes) -> None:
        conn.out, conn.sent = data, 0
        conn.deadline = self._clock() + self.timeout_s
        self._sel.modify(conn.sock, selectors.EVENT_WRITE, "conn")
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        try:
            conn.sent += conn.sock.send(conn.out[conn.sent:])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn)
            return
        if conn.sent >= len(conn.out):
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self._drop(conn)

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self.timed_out += 1
            self._drop(conn)
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            self._sel.register(self._listen, selectors.EVENT_READ, "listen")

    def _drop(self, conn: _Conn) -> None:
        self._conns.pop(conn.sock.fileno(), None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        _close(conn.sock)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(64):
                pass
        except OSError:
            pass

    # ---- stopping --------------------------------------------------------------------------
    def close(self) -> None:
        """Stop serving, close every connection and the port. Idempotent."""
        if self._stop:
            return
        self._stop = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(timeout=5)
        for conn in list(self._conns.values()):
            self._drop(conn)
        self._sel.close()
        for s in (self._listen, self._wake_r, self._wake_w):
            _close(s)


def _response(status: str, headers: list, body: bytes, content_length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}"]
    names = {name.lower() for name, _ in headers}
    if "content-type" not in names:
        headers = [*headers, ("Content-Type", "text/plain; charset=utf-8")]
    lines += [f"{name}: {value}" for name, value in headers]
    lines += [f"Content-Length: {len(body) if content_length is None else content_length}",
              "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
