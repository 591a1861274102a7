"""Delivering markers: ``tuimeter mark``, ``tuimeter.mark()`` and attached Meters.

Every session socket of this user (see :mod:`tuimeter.session.markers`) is asked at the
same time, one thread each, under one overall deadline: a session stopped with SIGSTOP
(Ctrl-Z) costs the others nothing, and is reported as one that did not answer.

Exactness: a message carries ``expires`` = now + ``timeout_s``; a session refuses one it
reads later, and the client waits for replies :data:`REPLY_GRACE_S` longer than that. So
a marker a session recorded is one whose reply its client received ("delivered"), and a
session that did not answer in time has not recorded it and never will. A socket nobody
listens on (a killed session) is removed and not counted.

Targeting: ``target`` is a session id (the ``session`` column of its CSV, or the value
of ``$TUIMETER_SESSION`` that ``tuimeter -- CMD`` and ``record -- CMD`` give the
command) or the path of the session's CSV; None asks every session. By default the
target is ``$TUIMETER_SESSION`` when it is set and not empty.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..labels import check_label
from ..model import parse_pid, pid_problem
from ..text import safe_text
from . import protocol
from .markers import SESSION_ENV, socket_dir
from ..cli_help import help_text

log = logging.getLogger(__name__)

#: how long a client tries to reach the sessions (seconds); a session reading the
#: message later refuses it. The API's default (``tuimeter.mark()``, ``Meter.mark``: a
#: program's marker must never stall it for long when a session is stopped; a live one
#: answers in milliseconds)
CLIENT_TIMEOUT_S = 1.0
#: ``tuimeter mark``'s default: a command run by hand or by a script can wait, and on a
#: loaded machine (2 busy cores, 3 recorders, 100 marks at once) 1 s reached every session
#: for about half of the marks; a stopped session costs it this long
CLI_TIMEOUT_S = 5.0
#: how much longer the client waits for the reply of a session that read it in time
REPLY_GRACE_S = 1.0
#: the longest ``tuimeter mark --timeout``
MAX_TIMEOUT_S = 60.0
#: the default target: ``$TUIMETER_SESSION`` (None means every session)
FROM_ENV = "$" + SESSION_ENV

#: exit statuses of ``tuimeter mark``
EXIT_MARKED, EXIT_NOTHING_MARKED, EXIT_BAD_INPUT, EXIT_PARTLY_MARKED = 0, 1, 2, 3

_STALE = object()  # a socket nobody listens on


def env_target() -> str | None:
    """The session named by ``$TUIMETER_SESSION`` (None when unset or empty)."""
    return os.environ.get(SESSION_ENV) or None


@dataclass(frozen=True)
class Answer:
    """One session's answer: its reply, or None when it did not answer in time."""

    socket: str
    reply: dict | None

    @property
    def who(self) -> str:
        """``pid 1234`` (the socket is ``<pid>-<n>.sock``), else the socket's name."""
        name = os.path.basename(self.socket)
        pid = name.split("-", 1)[0]
        return f"pid {pid}" if pid.isdigit() else name

    @property
    def other(self) -> bool:
        """Answered that it is not the targeted session."""
        return protocol.is_other(self.reply)


def _sockets(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.endswith(".sock")]


def _resolve(target: str | None) -> str | None:
    return env_target() if target == FROM_ENV else (target or None)


def exchange(message: dict, timeout_s: float | None = None,
             target: str | None = FROM_ENV) -> list[Answer]:
    """Send ``message`` (made by :mod:`.protocol`) to every session (or the ``target``) at
    once; their answers in socket order, stale sockets left out. Never raises; returns
    within about ``timeout_s`` (default :data:`CLIENT_TIMEOUT_S`) + :data:`REPLY_GRACE_S`."""
    timeout_s = CLIENT_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        directory = socket_dir(create=False)
    except OSError as exc:
        log.warning("tuimeter sockets unusable: %s", exc)
        return []
    target = _resolve(target)
    data = protocol.encode_message(message, time.time() + timeout_s, target)
    send_by = time.monotonic() + timeout_s
    reply_by = send_by + REPLY_GRACE_S
    paths = _sockets(directory)
    results: list = [None] * len(paths)

    def ask(i: int) -> None:
        results[i] = _ask(paths[i], data, send_by, reply_by)

    threads = [threading.Thread(target=ask, args=(i,), name="tuimeter-mark", daemon=True)
               for i in range(len(paths))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, reply_by + 0.5 - time.monotonic()))
    return [Answer(p, r) for p, r in zip(paths, results) if r is not _STALE]


def _ask(path: str, data: bytes, send_by: float, reply_by: float):
    """One session: its reply (a dict), None (no answer in time), or _STALE."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(max(0.001, send_by - time.monotonic()))
        try:
            s.connect(path)
            break
        except (ConnectionRefusedError, FileNotFoundError):
            s.close()
            try:
                os.unlink(path)  # nobody listens: a session that was killed
            except OSError:
                pass
            return _STALE
        except BlockingIOError:  # its listen queue is full: try again until send_by
            s.close()
            if time.monotonic() >= send_by:
                return None
            time.sleep(0.005)
        except OSError:
            s.close()
            return None
    try:
        s.sendall(data)
        buf = b""
        while b"\n" not in buf and len(buf) < protocol.MAX_REPLY_BYTES:
            left = reply_by - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return protocol.decode_reply(buf)
    except OSError:
        return None
    finally:
        s.close()


def request(message: dict, timeout_s: float | None = None,
            target: str | None = FROM_ENV) -> list[dict]:
    """The replies (accepted or refused) of the targeted sessions that answered."""
    return [a.reply for a in exchange(message, timeout_s, target)
            if a.reply is not None and not a.other]


@dataclass(frozen=True)
class MarkResult:
    """What became of one marker. True when every (targeted) session recorded it;
    ``if tuimeter.mark(...)`` reads as before.

    ``delivered``: sessions that recorded it (their ids in ``sessions``);
    ``not_answered``: sessions that did not answer in time (``pid N``; stopped, or too
    busy), which have not recorded it; ``refused``: ``pid N: reason`` for sessions that
    answered no; ``error``: why nothing was sent (a bad label)."""

    delivered: int = 0
    sessions: tuple[str, ...] = ()
    not_answered: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    target: str | None = None
    error: str | None = None

    def __bool__(self) -> bool:
        return self.delivered > 0 and not self.not_answered and not self.refused

    @property
    def exit_status(self) -> int:
        """``tuimeter mark``'s: 0 all marked, 3 some, 1 none."""
        if not self.delivered:
            return EXIT_NOTHING_MARKED
        return EXIT_MARKED if self else EXIT_PARTLY_MARKED

    def missed(self) -> str:
        """The sessions that did not record it, in words (empty when none)."""
        parts = [f"{w} did not answer (stopped or busy)" for w in self.not_answered]
        parts += [f"{w} refused it" for w in self.refused]
        return "; ".join(parts)


def send_mark(label: str, source: str = "cli", pid: int | None = None,
              target: str | None = FROM_ENV, timeout_s: float | None = None) -> MarkResult:
    """Mark every running session (or ``target``). Raises ValueError on a bad label or
    a ``pid`` that is no process id (:func:`tuimeter.model.is_pid`), before anything is
    sent."""
    label = check_label(label)
    return _deliver(lambda p: protocol.mark_message(label, source, p), pid, target, timeout_s)


def send_count(units: dict, source: str = "cli", pid: int | None = None,
               target: str | None = FROM_ENV, timeout_s: float | None = None) -> MarkResult:
    """Count work (``units``: name -> a positive finite number) in every running session
    (or ``target``), delivered as a marker is. Raises ValueError on a bad unit or count
    (:func:`tuimeter.work.check_units`) or a bad ``pid``, before anything is sent."""
    from ..work import check_units

    units = check_units(units)
    return _deliver(lambda p: protocol.count_message(units, source, p), pid, target,
                    timeout_s)


def _deliver(message: Callable[[int], dict], pid: int | None, target: str | None,
             timeout_s: float | None) -> MarkResult:
    """Send ``message(pid)`` (a mark or a count) about ``pid`` (default: this process) and
    say what became of it. Raises ValueError on a ``pid`` that is no process id, before
    anything is sent."""
    problem = None if pid is None else pid_problem(pid)
    if problem is not None:
        raise ValueError(problem)
    target = _resolve(target)
    answers = exchange(message(os.getpid() if pid is None else pid), timeout_s, target)
    ok = [a for a in answers if protocol.accepted(a.reply)]
    silent = tuple(a.who for a in answers if a.reply is None)
    refused = tuple(f"{a.who}: {protocol.error_of(a.reply)[:80]}" for a in answers
                    if a.reply is not None and not protocol.accepted(a.reply) and not a.other)
    if target is not None and ok:
        silent = ()  # the target answered: the silent ones are other sessions
    return MarkResult(len(ok), tuple(protocol.session_of(a.reply) for a in ok), silent,
                      refused, target)


def _target_options(p: argparse.ArgumentParser) -> None:
    """``--pid``, ``--session`` and ``--timeout``: the same for ``mark`` and ``count``."""
    p.add_argument("--pid", help="process the marker is about (default: this one)")
    p.add_argument("--session", metavar="ID|PATH",
                   help=f"only this session: its id (the CSV's session column) or its CSV "
                        f"file (default: ${SESSION_ENV} if set, else every session)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help=f"how long the sessions have to take it, in seconds (default "
                        f"{CLI_TIMEOUT_S:g}; replies may take {REPLY_GRACE_S:g} s more)")


def _check_timeout(timeout: float | None) -> int | None:
    """EXIT_BAD_INPUT (and one line) for a ``--timeout`` out of range, else None."""
    if timeout is not None and not 0 < timeout <= MAX_TIMEOUT_S:
        print(f"tuimeter: error: --timeout must be > 0 and <= {MAX_TIMEOUT_S:g} seconds",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    return None


def cmd_mark(argv: list[str]) -> int:
    """``tuimeter mark [--session ID|PATH] LABEL``: exit 0 marked in every session, 3 in
    some (the others named), 1 in none (no session, none answered, unknown target),
    2 bad input."""
    p = argparse.ArgumentParser(
        prog="tuimeter mark",
        **help_text("mark"),
        description="Add a phase marker to every running tuimeter session of this user (UI, "
                    "record, Python API), or to one with --session. Exit status: 0 every "
                    "session marked, 3 some did not answer or refused, 1 none marked, 2 bad "
                    "input.")
    p.add_argument("label", nargs="+", help="marker label (words are joined by spaces)")
    _target_options(p)
    args = p.parse_args(argv)
    bad = _check_timeout(args.timeout)
    if bad is not None:
        return bad
    label = " ".join(args.label)
    return _send_from_cli(args, label, "marked", lambda **kw: send_mark(label, **kw))


def cmd_count(argv: list[str]) -> int:
    """``tuimeter count [--session ID|PATH] UNIT=N ...``: work done, in every running
    session (or one); exit statuses as ``tuimeter mark``'s."""
    from ..work import parse_pairs

    p = argparse.ArgumentParser(
        prog="tuimeter count",
        **help_text("count"),
        description="Count work done (samples, tokens, steps ...) in every running tuimeter "
                    "session of this user, or in one with --session: phases and reports "
                    "then give J per unit. Each N is a positive finite number. Exit status: "
                    "0 every session counted it, 3 some did not answer or refused, 1 none, "
                    "2 bad input.")
    p.add_argument("pairs", nargs="+", metavar="UNIT=N", help="a unit and how many, e.g. "
                   "samples=64 tokens=32768")
    _target_options(p)
    args = p.parse_args(argv)
    bad = _check_timeout(args.timeout)
    if bad is not None:
        return bad
    try:
        units = parse_pairs(args.pairs)
    except ValueError as exc:
        print(f"tuimeter: error: {safe_text(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _send_from_cli(args, " ".join(f"{k}={v:g}" for k, v in units.items()), "counted",
                          lambda **kw: send_count(units, **kw))


def _send_from_cli(args: argparse.Namespace, what: str, verb: str, send) -> int:
    """The shared end of ``mark`` and ``count``: ``send(source=, pid=, timeout_s=,
    target=)`` with the ``_target_options``, one line for what became of it, the exit
    status (EXIT_BAD_INPUT and one line for a bad pid or payload)."""
    try:
        pid = None if args.pid is None else parse_pid(args.pid)
        result = send(source="cli", pid=pid,
                      timeout_s=CLI_TIMEOUT_S if args.timeout is None else args.timeout,
                      target=args.session if args.session is not None else FROM_ENV)
    except ValueError as exc:
        print(f"tuimeter: error: {safe_text(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_result(what, result, verb)
    return result.exit_status


def print_result(label: str, r: MarkResult, verb: str = "marked") -> None:
    """One line on stdout for what was marked, one on stderr for what was not."""
    missed = r.missed()
    total = r.delivered + len(r.not_answered) + len(r.refused)
    if r.delivered:
        where = (f"session {r.sessions[0]}" if r.target is not None and r.delivered == 1
                 else f"{r.delivered} session{'s' if r.delivered > 1 else ''}"
                 if not missed else f"{r.delivered} of {total} sessions")
        print(f"tuimeter: {verb} {label!r} in {where}")
        if missed:
            print(f"tuimeter: warning: not {verb} in {total - r.delivered}: {missed}",
                  file=sys.stderr)
    elif missed:
        print(f"tuimeter: error: nothing {verb}: {missed}", file=sys.stderr)
    elif r.target is not None:
        print(f"tuimeter: error: no running session is {r.target!r} (a session id or "
              f"session CSV); nothing {verb}", file=sys.stderr)
    else:
        print("tuimeter: no tuimeter session is running for this user (start `tuimeter` or "
              f"`tuimeter record`); nothing {verb}", file=sys.stderr)
