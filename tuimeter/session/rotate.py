"""A session CSV that rotates: ``tuimeter record -o run.csv --rotate SIZE|daily``.

A long recording (a node exporter that runs for months) is cut into files that can be
compressed, shipped and deleted one by one. Each file is a whole session file on its own:
the header, then the ``session`` row, then whole ticks. The rows are those one unrotated file
would hold, shared out between the files; energy is per interval (never cumulative) and every
tick is written whole into exactly one file, so nothing is counted twice or lost at a
boundary. ``tuimeter report`` over all the files gives what it gives for one file.

**Names.** Files never replace anything (even with a restart): each part takes the next
name that does not exist yet, in order, so the order of the names is the order of time. A
name that is taken by anything (a file, a folder, a symbolic link, dangling or not) is
skipped: it is never opened, followed or removed, and the recording goes on at the next
free name (a link planted in the output folder cannot end a recorder that runs for months).

* ``SIZE`` (``500K``, ``100M``, ``1G``; powers of 1024; a bare number is bytes):
  ``run.csv``, then ``run.1.csv``, ``run.2.csv``, ... A new file starts before the tick
  that would be written to a file that has reached SIZE, so a file passes SIZE by at most
  one tick, and each file holds at least one tick.
* ``daily``: ``run-2026-11-30.csv``, one file per UTC day (``run-2026-11-30.1.csv`` if
  that name is taken); a tick belongs to the day on which it ends, so the tick that
  straddles midnight opens the next day's file.

**Each part's first row** is the session row again: the same session id, the same start
time and ``elapsed_s``, carbon settings and sensors, with ``part N (after PREVIOUS)`` added
to its label. Readers fix a session's clock from its first row, so every part is read on
exactly the same time base as the first.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from dataclasses import dataclass
from typing import Callable

from ..model import Snapshot
from . import files
from .csvfile import SessionWriteError, SessionWriter

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
#: names tried for one part before giving up (each taken name is skipped)
MAX_NAME_TRIES = 10_000


@dataclass(frozen=True)
class RotatePolicy:
    """When a new file starts: past ``max_bytes``, or at UTC midnight (``daily``)."""

    max_bytes: int | None = None
    daily: bool = False

    def describe(self) -> str:
        if self.daily:
            return "a new file each UTC day"
        return f"a new file past {_human(self.max_bytes or 0)}"


def _human(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]} {unit}iB"
    return f"{n} bytes"


def parse_rotate(text: str) -> RotatePolicy:
    """``daily``, or a size: ``100M``, ``1G``, ``500K``, ``4096``. ValueError otherwise."""
    if text.strip().lower() == "daily":
        return RotatePolicy(daily=True)
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"expected a size such as 100M or 1G, or daily; got {text!r}")
    n = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if n <= 0:
        raise ValueError(f"the size must be > 0, got {text!r}")
    return RotatePolicy(max_bytes=n)


def utc_day(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).date().isoformat()


def part_names(path: str, policy: RotatePolicy, after: int = 0, day: str = ""):
    """The names a part may take, in order: ``(index, name)`` from index ``after``.

    Size: index 0 is ``path`` itself, then ``stem.N.ext``. Daily: ``stem-DAY.ext``, then
    ``stem-DAY.N.ext``."""
    stem, ext = os.path.splitext(path)
    if policy.daily:
        stem = f"{stem}-{day}"
    for i in range(after, after + MAX_NAME_TRIES):
        yield i, (f"{stem}{ext}" if i == 0 and (policy.daily or stem + ext == path)
                  else f"{stem}.{i}{ext}")


class RotatingWriter:
    """A :class:`SessionWriter` look-alike (what the Recorder calls) over several files.

    ``paths`` lists the files written so far, in order. ``create`` makes one file (it
    must refuse an existing one with FileExistsError: the next name is tried then) and
    ``now`` gives the wall clock for the first daily file's day; both are for tests.

    The name the user gave (``-o run.csv``, the first part of a size rotation) goes
    through :meth:`SessionWriter.create`, which refuses a link or a device there in one
    line, as an unrotated ``-o`` does; every other name is created with
    ``O_CREAT|O_EXCL|O_NOFOLLOW`` (:func:`_create_part`), so whatever holds it is skipped.
    """

    def __init__(self, path: str | os.PathLike, host: str, policy: RotatePolicy, *,
                 now: Callable[[], float] = time.time,
                 create: Callable[..., SessionWriter] | None = None):
        self.base = os.fspath(path)
        self.host = host
        self.policy = policy
        self._create = create
        self._header: tuple[Snapshot, str] | None = None
        self._ticks = 0  # ticks in the current part
        self.paths: list[str] = []
        self._index = -1
        self._day = utc_day(now()) if policy.daily else ""
        self._w = self._open_part()  # raises OSError (nothing created) when it cannot
        self.session_id = self._w.session_id
        self.closed = False

    @property
    def path(self) -> str:
        """The file being written now."""
        return self._w.path

    @property
    def good_bytes(self) -> int:
        return self._w.good_bytes

    def _open_part(self, session_id: str | None = None) -> SessionWriter:
        after = 0 if self.policy.daily else self._index + 1  # a new day starts at 0
        last_exc: OSError | None = None
        for i, name in part_names(self.base, self.policy, after, self._day):
            create = self._create or (SessionWriter.create if name == self.base
                                      else _create_part)
            try:
                w = create(name, self.host, session_id=session_id)
            except FileExistsError as exc:
                last_exc = exc
                continue
            self._index = i
            self.paths.append(name)
            return w
        raise FileExistsError(f"no free name for the next part of {self.base} "
                              f"({last_exc})")

    def write_header_info(self, snap: Snapshot, details: str = "") -> None:
        self._header = (snap, details)
        self._w.write_header_info(snap, self._details())

    def _details(self) -> str:
        snap_details = self._header[1] if self._header else ""
        part = f"part {len(self.paths)}"
        if len(self.paths) > 1:
            part += f" (after {os.path.basename(self.paths[-2])})"
        return "; ".join(x for x in (snap_details, part) if x)

    def _due(self, snap: Snapshot) -> bool:
        if self._ticks == 0 or snap.interval_s <= 0:
            return False  # every file holds at least one tick
        if self.policy.daily:
            return utc_day(snap.timestamp) != self._day
        return self._w.good_bytes >= (self.policy.max_bytes or 0)

    def rotate(self, snap: Snapshot) -> None:
        """Close this part, open the next with the session row again. On failure the
        old part stays current (closed, complete) and SessionWriteError is raised."""
        old = self._w
        old.close()
        if self.policy.daily:
            self._day = utc_day(snap.timestamp)
        try:
            new = self._open_part(self.session_id)
            self._w = new
            if self._header is not None:
                new.write_header_info(self._header[0], self._details())
        except SessionWriteError:
            raise
        except OSError as exc:
            raise SessionWriteError(f"cannot start the next file after {old.path}: "
                                    f"{exc.strerror or exc}") from exc
        self._ticks = 0

    def write_snapshot(self, snap: Snapshot) -> None:
        if self._due(snap):
            self.rotate(snap)
        self._w.write_snapshot(snap)
        if snap.interval_s > 0:
            self._ticks += 1

    def close(self) -> None:
        self.closed = True
        self._w.close()

    def discard(self) -> None:
        """A start that failed: the current part goes the way of SessionWriter.discard
        (removed only if this run created it)."""
        self.closed = True
        self._w.discard()


def _create_part(path: str, host: str, session_id: str | None = None) -> SessionWriter:
    """A new part at ``path``, which must be free: FileExistsError for any name that is
    taken, a link (dangling or not), a folder or a FIFO included (``O_EXCL`` never follows
    a link), so :meth:`RotatingWriter._open_part` skips it."""
    return SessionWriter.open_new(files.create_new(path), host, session_id)


def open_rotating_recorder(path: str, host: str, policy: RotatePolicy):
    """A Recorder over a :class:`RotatingWriter`; SetupError (nothing created) on failure."""
    from ..checks import SetupError
    from .recorder import Recorder

    try:
        writer = RotatingWriter(path, host, policy)
    except OSError as exc:
        raise SetupError(f"cannot write {path}: {exc.strerror or exc}") from None
    return Recorder(writer)
