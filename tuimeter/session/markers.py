"""Markers from anywhere: a per-user UNIX socket per running session.

Every running tuimeter (the UI, ``record``, a Python :class:`~tuimeter.api.Meter` that
samples on its own) listens on ``<dir>/<pid>-<n>.sock``, where ``<dir>`` is
``$XDG_RUNTIME_DIR/tuimeter`` or else ``<tmp>/tuimeter-<uid>``. The directory is created
0700 and refused when it is not a real directory owned by this user with no group/other
access (someone else could otherwise plant sockets or read labels); each socket is
chmod 0600.

Protocol (:mod:`.protocol`, the one module both ends import, holds its field names and
limits): the client connects, sends one JSON line (a ``mark``, a ``count`` of work or a
``status``) and reads one JSON line back.

``expires`` (seconds since the epoch) is the client's deadline: a message read after it
is refused, not recorded (a session stopped with SIGSTOP finds it in its socket when it
is continued, long after the client reported it as not delivered). The client waits for
the reply a little longer than that (:data:`~.mark_client.REPLY_GRACE_S`), so a marker a
session recorded is one its client was told about; see ``tuimeter.session.mark_client``.

``session`` / ``session_path`` target one session: its id (the ``session`` column of
its CSV, or a random id when it writes no file; :attr:`MarkerServer.session_id`) or
its CSV's real path. Other sessions answer ``{"ok": false, "other": true}`` and record
nothing.

``meter`` / ``meter_state`` (``start`` or ``end``) come from a Python
:class:`~tuimeter.api.Meter` attached to the session: the server keeps the meters that
started and have not ended (:meth:`MarkerServer.open_meters`), so a sampling Meter can go
on measuring until the ranks attached to it have ended their last phase.

A marker from the API (``source`` ``api``: a :class:`~tuimeter.api.Meter`,
``tuimeter.mark()``) also makes the session follow the marking process's tree as an
*owner* (:mod:`tuimeter.engine.trees`), from that marker on; ``rank`` in the message is
what the process says its rank is, used only where its environment cannot be read. The
process is the socket's peer as the kernel reports it (``SO_PEERCRED``); a claimed
``pid`` is never trusted for that: where the kernel cannot say, the claimed process must
belong to this user. Every reply to it then carries ``own``: that tree's cumulative
attributed energy per domain (``cpu`` and each GPU) at the last tick, with its power, so
the client computes its own energy as it computes the machine's.

A ``count`` (``tuimeter count``, ``tuimeter.count()``, ``Meter.count``) is work done:
each unit a positive finite number (:mod:`tuimeter.work`), recorded as ``work`` rows at
the instant it is read; it is delivered, targeted and expires exactly as a marker is.

The reply is ``{"ok": true, ...}`` with the session's state at the marker (see
:func:`.protocol.session_state`), or ``{"ok": false, "error": "..."}`` for a refused message. The
server never raises into the engine: a bad, oversized, slow or half-closed client costs
it one log line at most, and a label is checked (:func:`tuimeter.labels.check_label`)
before it reaches the engine. Clients beyond :data:`MAX_CONNECTIONS` wait in the
listen queue (they are served in turn, or expire), never dropped unanswered.
"""

from __future__ import annotations

import itertools
import logging
import os
import selectors
import socket
import stat
import struct
import tempfile
import threading
import time

from ..labels import MAX_LABEL_CHARS, check_label  # noqa: F401 (part of this module's API)
from ..model import pid_problem
from . import protocol
from .ids import new_session_id
from .protocol import MAX_MESSAGE_BYTES, session_state

log = logging.getLogger(__name__)

#: a connection that has not sent a full line by then is dropped (seconds)
SERVER_CONN_TIMEOUT_S = 2.0
#: at most this many clients are served at once; more wait in the listen queue
MAX_CONNECTIONS = 64
#: the listen queue (the kernel caps it at net.core.somaxconn)
LISTEN_BACKLOG = 1024

_counter = itertools.count(1)


class UnsafeDirectory(OSError):
    """The socket directory exists but another user could use it."""


def socket_dir(create: bool = True) -> str:
    """The per-user socket directory (created 0700 when ``create``).

    Raises :class:`UnsafeDirectory` when it exists with the wrong owner, type or mode.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        path = os.path.join(runtime, "tuimeter")
    else:
        path = os.path.join(tempfile.gettempdir(), f"tuimeter-{os.getuid()}")
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory (a symlink or file); remove it")
    if st.st_uid != os.getuid():
        raise UnsafeDirectory(f"{path} belongs to another user; remove it or set XDG_RUNTIME_DIR")
    if st.st_mode & 0o077:
        raise UnsafeDirectory(f"{path} is open to other users (mode {st.st_mode & 0o777:o}); "
                              f"run: chmod 700 {path}")
    return path


def peer_of(conn) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a UNIX socket, as the kernel says
    (``SO_PEERCRED``, Linux); None where it cannot say."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt,
                                                             struct.calcsize("3i")))
    except OSError:
        return None
    return (pid, uid) if pid > 0 else None


def owner_pid(claimed: int | None, peer: tuple[int, int] | None) -> int | None:
    """The process whose tree a marker makes the session follow: the socket's peer as the
    kernel reports it (a claimed pid is ignored: the peer is who marked), if it is this
    user's (or root's); where the kernel cannot say, the claimed pid, only if that
    process belongs to this user. None otherwise."""
    me = os.getuid()
    if peer is not None:
        pid, uid = peer
        return pid if uid in (me, 0) else None
    if claimed is None:
        return None
    try:
        import psutil

        return claimed if psutil.Process(claimed).uids().real == me else None
    except Exception:  # gone, no permission, no psutil support: not followed
        return None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    import psutil

    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _handle(server: "MarkerServer", line: bytes,
            peer: tuple[int, int] | None = None) -> dict:
    from ..engine.sampler import SessionEnded  # loaded already: the server serves an engine

    try:
        msg = protocol.decode_message(line)
    except protocol.ProtocolError as exc:
        return protocol.refused(str(exc))
    if not server.is_target(msg):
        return protocol.other_session(server.session_id)
    if msg.op == protocol.STATUS:
        return server.state()
    if msg.op not in (protocol.MARK, protocol.COUNT):
        return protocol.refused(f"unknown op {str(msg.op)[:20]!r}")
    if msg.expired():
        # the client has given up on this session: recording it now would be a marker
        # it reported as not delivered (and late, e.g. after SIGSTOP/SIGCONT)
        return protocol.expired()
    pid = msg.pid
    problem = None if pid is None else pid_problem(pid)
    if problem is not None:
        return protocol.refused(problem)
    if msg.op == protocol.COUNT:
        return _count(server, msg.units, msg.source, pid)
    try:
        label = check_label(msg.label)
    except ValueError as exc:
        return protocol.refused(str(exc))
    try:
        marker = server.engine.add_marker(label, source=msg.source, pid=pid)
    except SessionEnded as exc:
        return protocol.refused(str(exc))
    if msg.meter is not None and pid is not None:
        server._meter_event(msg.meter, pid, msg.meter_state)
    owner = (owner_pid(pid, peer) if msg.source == "api" and server.engine.tracks_owners
             else None)
    if owner is not None and msg.meter_state != "end":
        server.engine.track_owner(owner, marker.elapsed_s, msg.rank)
    return server.state(marker, owner)


def _count(server: "MarkerServer", units, source: str, pid: int | None) -> dict:
    """``{"op": "count", "units": {"samples": 64}}``: work counted in the session now
    (:mod:`tuimeter.work`'s rules: a bad unit or count is refused, nothing recorded)."""
    from ..engine.sampler import SessionEnded
    from ..work import check_units

    if not isinstance(units, dict):
        return protocol.refused("units must be a JSON object of UNIT: N")
    try:
        checked = check_units(units)
    except ValueError as exc:
        return protocol.refused(str(exc))
    try:
        work = server.engine.add_work(checked, source=source, pid=pid)
    except SessionEnded as exc:
        return protocol.refused(str(exc))
    return server.state(work)


class MarkerServer:
    """Serves one engine on one socket from a daemon thread. Call :meth:`close`.

    ``session_id`` / ``path``: the session's id and CSV (see the module docstring: a
    client can target them); without an id the server makes up a random one.

    ``engine`` None: the socket is made and listens now, and serving starts at
    :meth:`attach` (the command line listens first thing, before the sensors are probed,
    which takes seconds on a loaded machine: a ``mark`` sent meanwhile finds the session
    and waits in the listen queue, within its own deadline, instead of finding none).
    """

    def __init__(self, engine=None, directory: str | None = None, *,
                 session_id: str | None = None, path: str | None = None):
        self.engine = engine
        self.session_id = session_id or new_session_id()
        self.csv_path = os.path.abspath(path) if path else None
        self._csv_real = os.path.realpath(path) if path else None
        self.directory = directory or socket_dir()
        self.path = os.path.join(self.directory, f"{os.getpid()}-{next(_counter)}.sock")
        self.refused = 0  # messages refused (malformed, oversized, too slow)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # bound under another name, listening, then renamed into place: a client that
        # finds the .sock connects to a socket that listens (between bind and listen it
        # was refused: a mark sent as a session started found "no session")
        early = self.path[:-len(".sock")] + ".new"
        try:
            for name in (early, self.path):
                if os.path.lexists(name):
                    os.unlink(name)
            self._sock.bind(early)
            os.chmod(early, 0o600)
            self._sock.listen(LISTEN_BACKLOG)
            self._sock.setblocking(False)
            os.rename(early, self.path)
        except OSError:
            self._sock.close()
            try:
                os.unlink(early)
            except OSError:
                pass
            raise
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._sock, selectors.EVENT_READ, None)
        self._accepting = True
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: dict[socket.socket, list] = {}  # conn -> [buffer, deadline]
        self._meters: dict[str, int] = {}  # attached meters started, not ended: id -> pid
        self._meters_changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        if engine is not None:
            self.attach(engine, session_id, path)

    def attach(self, engine, session_id: str | None = None, path: str | None = None) -> None:
        """Serve ``engine`` (the session ``session_id``, CSV ``path``) from now on: the
        messages that waited in the listen queue are read first."""
        self.engine = engine
        self.session_id = session_id or self.session_id
        self.csv_path = os.path.abspath(path) if path else None
        self._csv_real = os.path.realpath(path) if path else None
        self._thread = threading.Thread(target=self._run, name="tuimeter-markers", daemon=True)
        self._thread.start()

    def _timeout_s(self) -> float | None:
        """How long the listener may sleep: until the first open connection's deadline,
        or (none open) until a client or :meth:`close` (the wake socket) comes. A fixed
        0.5 s poll woke the thread twice a second in every session (about 0.1 % of a
        core on a VM, where a wake-up costs 0.3-0.5 ms)."""
        if not self._conns:
            return None
        deadline = min(state[1] for state in self._conns.values())
        return max(deadline - time.monotonic(), 0.0)

    def _run(self) -> None:
        while not self._closed:
            try:
                events = self._sel.select(timeout=self._timeout_s())
                for key, _mask in events:
                    if key.data == "wake":
                        return
                    if key.fileobj is self._sock:
                        self._accept()
                    else:
                        self._read(key.fileobj)
                now = time.monotonic()
                for conn, (_buf, deadline, _peer) in list(self._conns.items()):
                    if now > deadline:
                        self._finish(conn, protocol.refused("timed out"), refused=True)
            except Exception:  # never let the listener die, never disturb the engine
                log.exception("marker server error")

    def is_target(self, msg: protocol.Message) -> bool:
        """Whether a message's target (none: every session) is this session."""
        if not msg.targeted:
            return True
        if msg.session is not None and msg.session == self.session_id:
            return True
        return (msg.session_path is not None and self._csv_real is not None
                and msg.session_path == self._csv_real)  # the client sends its real path

    def state(self, marker=None, owner: int | None = None) -> dict:
        return session_state(self.engine, marker, self.session_id, self.csv_path, owner)

    def _accept(self) -> None:
        while len(self._conns) < MAX_CONNECTIONS:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self._conns[conn] = [b"", time.monotonic() + SERVER_CONN_TIMEOUT_S, peer_of(conn)]
            self._sel.register(conn, selectors.EVENT_READ, "conn")
        if self._accepting:
            self._sel.unregister(self._sock)  # the rest wait in the listen queue
            self._accepting = False

    def _read(self, conn) -> None:
        state = self._conns.get(conn)
        if state is None:
            return
        try:
            data = conn.recv(MAX_MESSAGE_BYTES + 1 - len(state[0]))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        state[0] += data
        buf = state[0]
        if b"\n" in buf:
            line = buf.split(b"\n", 1)[0]
            reply = _handle(self, line, state[2])
            self._finish(conn, reply, refused=not protocol.accepted(reply))
        elif len(buf) > MAX_MESSAGE_BYTES:
            self._finish(conn, protocol.refused(f"message over {MAX_MESSAGE_BYTES} bytes"),
                         refused=True)
        elif not data:  # closed without a full line
            self._finish(conn, None, refused=bool(buf))

    def _meter_event(self, meter: str, pid: int, state: str) -> None:
        with self._meters_changed:
            if state == "start":
                self._meters[meter] = pid
            else:
                self._meters.pop(meter, None)
            self._meters_changed.notify_all()

    def open_meters(self, ignore=lambda meter_id: False) -> list[str]:
        """Attached meters that started a phase and have not sent "end", whose process
        still runs (a meter of a process that is gone counts as ended)."""
        with self._meters_changed:
            for meter, pid in list(self._meters.items()):
                if not pid_alive(pid):
                    del self._meters[meter]
            return [m for m in self._meters if not ignore(m)]

    def wait_for_meters(self, timeout_s: float, ignore=lambda meter_id: False) -> list[str]:
        """Wait (at most ``timeout_s``) until :meth:`open_meters` is empty; return what is
        still open then. Processes that exit are noticed within half a second."""
        deadline = time.monotonic() + timeout_s
        while True:
            left_open = self.open_meters(ignore)
            left = deadline - time.monotonic()
            if not left_open or left <= 0:
                return left_open
            with self._meters_changed:
                if set(self._meters) >= set(left_open):
                    self._meters_changed.wait(min(left, 0.5))

    def _finish(self, conn, reply: dict | None, refused: bool = False) -> None:
        self.refused += refused and not protocol.is_other(reply)
        self._conns.pop(conn, None)
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        if reply is not None:
            try:
                conn.setblocking(True)
                conn.settimeout(0.2)
                conn.sendall(protocol.encode_reply(reply))
            except OSError:
                pass
        conn.close()
        if not self._accepting and len(self._conns) < MAX_CONNECTIONS and not self._closed:
            self._sel.register(self._sock, selectors.EVENT_READ, None)
            self._accepting = True

    def close(self) -> None:
        """Stop listening and remove the socket (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        for conn in list(self._conns):
            conn.close()
        self._conns.clear()
        for s in (self._sock, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def start_marker_server(engine, recorder=None,
                        listening: MarkerServer | None = None) -> MarkerServer:
    """Listen for markers for ``engine``; raises OSError if the socket cannot be made.

    With ``recorder``, the server answers to its session id and file (targeting).
    ``listening``: a server made earlier by :func:`listen_early`, which serves from now."""
    writer = getattr(recorder, "writer", None)
    session_id, path = getattr(writer, "session_id", None), getattr(writer, "path", None)
    if listening is not None:
        listening.attach(engine, session_id, path)
        return listening
    return MarkerServer(engine, session_id=session_id, path=path)


def listen_early() -> tuple[MarkerServer | None, OSError | None]:
    """A marker socket made and listening now, served once an engine exists
    (:meth:`MarkerServer.attach`); (None, why) when it cannot be made."""
    try:
        return MarkerServer(), None
    except OSError as exc:
        return None, exc


#: the environment variable naming the session a command run by tuimeter belongs to
SESSION_ENV = "TUIMETER_SESSION"


def child_env(session_id: str | None) -> dict | None:
    """The environment for a command tuimeter runs (``record -- CMD``, ``tuimeter --
    CMD``): ours, with :data:`SESSION_ENV` naming its session, so the command's own
    ``tuimeter.mark()``, ``Meter`` and ``tuimeter mark`` reach that session only. None
    (inherit unchanged) when there is no session to name (``--no-socket``)."""
    if session_id is None:
        return None
    return {**os.environ, SESSION_ENV: session_id}


