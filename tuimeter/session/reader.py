"""Read a session CSV row by row: the one place where rows are parsed and checked.

``tuimeter report`` and ``tuimeter --replay`` both read through :class:`SessionReader`,
so they keep exactly the same rows. Streaming (one row in memory at a time) with the
``csv`` module: a 24-hour session is a million rows and must not be loaded whole.
Rows come out as :class:`~.schema.Row` tuples (a good row is defined by
:func:`~.schema.parse_row`), numbers parsed, of the kinds asked for; rows of
other kinds (``total``, ``job``, ``process``, ``event``: nobody reading through here
needs them) are passed over without being parsed.

What is wrong with a file is reported, never hidden, and never stops what can be read:

* not a session at all (missing, empty, another header): :class:`SessionFormatError`
  before any row;
* a row with the wrong number of cells, or a cell that is not what the schema says
  (see :func:`~.schema.parse_row`: an impossible number such as ``nan``, ``inf``, ``1e400`` or
  ``-5``, a timestamp that is not ISO 8601, a sample with no domain): skipped, one
  problem line each (the first few, then a count), naming file and line;
* a last line cut short (a recorder killed mid-write leaves no final newline): skipped,
  with a problem that says so;
* a cell longer than the csv module's limit (128 KiB): that row is skipped, with a problem;
* a NUL byte or broken quoting: the rest of the file is skipped, with a problem.

Problems echo the file's content only through :func:`~tuimeter.text.safe_text`: they go
to terminals.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import os
import re
from typing import Iterator, NamedTuple

from ..text import safe_text
from . import fastread
from .schema import (CARBON, COLUMNS, DEVICE, DOMAIN, IN_TOTAL, LOST, MARKER, MAX_NUMBER,
                     N_COLUMNS, SAMPLE, SAMPLE_PROVENANCES, SESSION, SETTINGS, TREE, WORK,
                     BadRow, Row, _new_row, number, parse_row)

__all__ = ["BadRow", "Row", "SessionFormatError", "SessionReader", "check_header",
           "find_sessions", "number", "parse_row"]

#: malformed rows reported one by one; the rest are counted
MAX_PROBLEMS_LISTED = 5
#: the row kinds read by default (the report and the replay need no others)
READ_KINDS = frozenset({SESSION, SETTINGS, DOMAIN, CARBON, SAMPLE, MARKER})
#: kinds never taken by the inline checks: their label (JSON, a count) is checked by parse_row
_SLOW_KINDS = frozenset({SETTINGS, DOMAIN, TREE, CARBON, DEVICE, WORK})


class SessionFormatError(Exception):
    """The file is not a readable tuimeter session; ``str()`` is 'FILE: line N: why'."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path = path
        self.line = line
        self.message = message
        where = f"{safe_text(path)}: line {line}: " if line else f"{safe_text(path)}: "
        super().__init__(where + message)


def check_header(path: str, header: list[str] | None) -> None:
    """Raise SessionFormatError unless ``header`` is the session header."""
    if not header:
        raise SessionFormatError(path, 1, "empty file, not a tuimeter session")
    if header and header[0].startswith("\ufeff"):
        header = [header[0][1:]] + header[1:]
    if tuple(header) != COLUMNS:
        raise SessionFormatError(
            path, 1, f"not a tuimeter session (expected columns {','.join(COLUMNS)})")


class SessionCarbon(NamedTuple):
    """The carbon settings a ``session`` row records (see ``write_header_info``)."""

    g_per_kwh: float
    source: str  # where the intensity came from, as written in the file (untrusted text)
    pue: float | None  # None when the row does not say


_CARBON = re.compile(r"carbon ([0-9.eE+-]+) g/kWh \(")
_SOURCE_END = re.compile(r"\)(?=;|$)")
_PUE = re.compile(r"; pue ([0-9.eE+-]+)(?=;|$)")  # the part after the carbon one


def _source_end(label: str, start: int) -> int | None:
    """The index just after the ``)`` that closes the source starting at ``start``: the
    matching one when that ends the part (a source may hold parentheses, and even ``;``),
    else the first ``)`` that ends a part (a path in the source with a lone one)."""
    depth, end = 1, start
    while depth and end < len(label):
        depth += {"(": 1, ")": -1}.get(label[end], 0)
        end += 1
    if not depth and (end == len(label) or label[end] == ";"):
        return end
    m = _SOURCE_END.search(label, start)
    return m.end() if m else None


def session_carbon(label: str) -> SessionCarbon | None:
    """The carbon settings in a ``session`` row's label (``...; carbon 56 g/kWh (FRA
    France: ... (2023, ...)); pue 1.2; ...``, as ``write_header_info`` writes it); None
    when it names none, or a number in it is not one :func:`number` accepts."""
    m = _CARBON.search(label)
    end = _source_end(label, m.end()) if m else None
    if end is None:
        return None
    pue_m = _PUE.match(label, end)
    try:
        return SessionCarbon(number(m.group(1), "carbon"), label[m.end():end - 1],
                             number(pue_m.group(1), "pue") if pue_m else None)
    except BadRow:
        return None


class SessionReader:
    """Iterate the checked rows of one session file; problems collect in
    :attr:`problems` as they are found (a bad row is listed once the next row is read,
    or at the end, when it may turn out to be a truncated last line).

    ``kinds``: the row kinds returned (others are passed over unparsed). ``session``: if
    set, rows of other sessions are passed over unparsed too; it may be set while
    iterating (a replay picks the first session it meets). ``start``: (byte offset,
    number of lines before it) to start reading at a row other than the first, e.g.
    one found by :func:`find_sessions`; the header is still checked. ``columnar``:
    read through pyarrow where it is installed (:mod:`.fastread`: the same rows, many
    times faster, a block of megabytes at a time); False for a reader paced by its
    consumer that must not read ahead (the replay).
    """

    def __init__(self, path: str | os.PathLike, kinds=READ_KINDS, session: str | None = None,
                 start: tuple[int, int] | None = None, columnar: bool = True):
        self.path = os.fspath(path)
        self.columnar = columnar
        self.kinds = frozenset(kinds)
        self.session = session
        self.start = start
        self.problems: list[str] = []
        self.rows = 0  # good rows read (of every kind)
        self.bad = 0  # rows skipped as malformed
        self._raw = None
        self._read_to = 0  # bytes read, once the file is closed
        self._pending: tuple[int, str] | None = None  # the last bad row, not listed yet
        #: which reader read the file: ``pyarrow`` or ``python`` (set when reading starts)
        self.engine: str | None = None

    @property
    def bytes_read(self) -> int:
        """How far into the file reading has got, bytes (reads are buffered: up to a
        buffer more than the rows returned); 0 for a pipe."""
        raw = self._raw
        try:
            return raw.tell() if raw is not None else self._read_to
        except (OSError, ValueError):  # closed meanwhile
            return self._read_to

    def problem(self, message: str, line: int | None = None) -> None:
        """Note a problem at ``line`` (or about the whole file)."""
        where = "" if line is None else f" line {line}:"
        self.problems.append(f"{safe_text(self.path)}:{where} {message}")

    def _bad_row(self, line: int, why: str) -> None:
        self._flush_pending()
        self.bad += 1
        self._pending = (line, why)

    def _flush_pending(self) -> None:
        if self._pending is not None:
            line, why = self._pending
            self._pending = None
            if self.bad <= MAX_PROBLEMS_LISTED:
                self.problem(f"malformed row ({why}); skipped", line)

    def _ends_with_newline(self, fh) -> bool:
        try:
            end = fh.seek(0, os.SEEK_END)
            if end == 0:
                return True
            fh.seek(end - 1)
            return fh.read(1) == b"\n"
        except OSError:
            return True

    def _open(self, start):
        try:
            raw = open(self.path, "rb", buffering=0)
        except OSError as exc:
            raise SessionFormatError(self.path, None, exc.strerror or str(exc)) from None
        try:
            ends_nl = True  # a pipe cannot be looked at ahead: its last line is not judged
            if raw.seekable():
                ends_nl = self._ends_with_newline(raw)
                raw.seek(0)
            buffered = io.BufferedReader(raw, 1 << 16)
            if start is None:
                return raw, buffered, ends_nl, 0, None
            header = buffered.readline(1 << 20).decode("utf-8", "replace")
            offset, lines_before = start
            buffered.seek(offset)
            return raw, buffered, ends_nl, lines_before, next(csv.reader([header]), None)
        except OSError as exc:
            raw.close()
            raise SessionFormatError(self.path, None, exc.strerror or str(exc)) from None

    def __iter__(self) -> Iterator[Row]:
        """The good rows, in file order (through pyarrow where it is installed, for a
        file of :data:`~.fastread.MIN_BYTES` or more)."""
        if self._columnar():
            return self._fast(runs=False)
        return self._python(self.start)

    def items(self) -> Iterator[Row | list]:
        """The good rows, where pyarrow reads the file with runs of plain samples as
        lists of :class:`~.fastread.SampleRun` (columns, for consumers that add them up
        whole), in file order; else all as rows (the Python reader)."""
        if self._columnar():
            return self._fast(runs=True)
        return self._python(self.start)

    def _columnar(self) -> bool:
        """Read through pyarrow: asked for, a file big enough to repay pyarrow's start
        (about a second and 100 MB, which a small session would not see back), installed."""
        if not self.columnar:
            return False
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return False  # the Python reader says why
        return size >= fastread.MIN_BYTES and fastread.available()

    def _python(self, start) -> Iterator[Row]:
        self.engine = "python"
        raw, buffered, ends_nl, base, header = self._open(start)
        self._raw = raw
        text = io.TextIOWrapper(buffered, encoding="utf-8", errors="replace", newline="")
        with text:
            reader = csv.reader(text)
            try:
                if header is None:
                    header = next(reader, None)
            except csv.Error as exc:
                raise SessionFormatError(self.path, 1, f"not a tuimeter session ({exc})") from None
            except OSError as exc:
                raise SessionFormatError(self.path, None, exc.strerror or str(exc)) from None
            check_header(self.path, header)
            yield from self._rows(reader, base)
            last_line = base + reader.line_num
            self._read_to = self.bytes_read
        self._raw = None
        self._finish(last_line, ends_nl)

    def _fast(self, runs: bool) -> Iterator[Row | list]:
        """The columnar path (:mod:`.fastread`); the Python reader takes over, from the
        first block it cannot judge alike, for what that module lists."""
        try:
            raw = open(self.path, "rb")
        except OSError as exc:
            raise SessionFormatError(self.path, None, exc.strerror or str(exc)) from None
        with raw:
            try:
                plain = raw.seekable() and \
                    raw.readline(1 << 16).lstrip(b"\xef\xbb\xbf") == _HEADER_LINE
            except OSError:
                plain = False
            if not plain:  # a pipe, or a header the Python reader must judge
                raw.close()
                yield from self._python(self.start)
                return
            at = raw.tell()  # just after the header
            ends_nl = self._ends_with_newline(raw)
            at, base = (at, 1) if self.start is None else self.start
            self.engine = "pyarrow"
            done = base  # lines read
            try:
                for n, passed, items in fastread.blocks(raw, at, base, self.kinds,
                                                        self.session, runs):
                    done += n
                    self.rows += passed
                    yield from self._take(items)
            except fastread.Fallback:
                raw.close()
                yield from self._python(_offset_of_line(self.path, done))
                return
            self._read_to = raw.seek(0, os.SEEK_END)
        self._finish(done, ends_nl)

    def _take(self, items) -> Iterator[Row | list]:
        """The block's items as the Python reader would give them: cells parsed (bad
        ones skipped and counted), rows of another session (one set meanwhile) passed."""
        for item in items:
            cls = item.__class__
            if cls is list:
                if self._pending is not None:
                    self._flush_pending()
                self.rows += sum(len(r.at) for r in item)
                yield item
                continue
            if cls is tuple:  # (line, cells): parse_row's to judge
                line, cells = item
                if self.session is not None and cells[4] != self.session:
                    self.rows += 1
                    continue
                try:
                    item = parse_row(cells, line)
                except BadRow as exc:
                    self._bad_row(line, str(exc))
                    continue
            elif self.session is not None and item.session != self.session:
                self.rows += 1
                continue
            if self._pending is not None:
                self._flush_pending()
            self.rows += 1
            yield item

    def _rows(self, reader, base: int) -> Iterator[Row]:
        """The good rows. The common row is checked inline (a million rows a minute of
        CPU is the budget); any row that fails a check, or has a pid, goes to
        :func:`parse_row`, the definition, which names what is wrong (or accepts it).
        The inline checks only ever accept what parse_row accepts."""
        kinds, top, sample_provs, slow = self.kinds, MAX_NUMBER, SAMPLE_PROVENANCES, _SLOW_KINDS
        iso, new, in_total = _dt.datetime.fromisoformat, _new_row, IN_TOTAL
        last_ts = last_el = last_iv = None  # the rows of a tick share these cells
        wall = elapsed = interval = 0.0
        passed = 0  # rows of other kinds or sessions (counted as read, not returned)
        try:
            for cells in self._whole_rows(reader, base):
                if len(cells) != N_COLUMNS:
                    if cells:  # a blank line is nothing
                        self._bad_row(base + reader.line_num,
                                      f"{len(cells)} cells, expected {N_COLUMNS}")
                    continue
                kind = cells[5]
                if kind not in kinds or (self.session is not None
                                         and cells[4] != self.session):
                    passed += 1
                    continue
                line = base + reader.line_num
                p, e, c = cells[9], cells[10], cells[11]
                try:
                    if cells[0] != last_ts:
                        wall, last_ts = iso(cells[0]).timestamp(), cells[0]
                    if cells[1] != last_el:
                        x = float(cells[1])
                        if not 0.0 <= x <= top:
                            raise ValueError
                        elapsed, last_el = x, cells[1]
                    if cells[2] != last_iv:
                        x = float(cells[2])
                        if not 0.0 <= x <= top:
                            raise ValueError
                        interval, last_iv = x, cells[2]
                    power = float(p) if p else 0.0
                    energy = float(e) if e else 0.0
                    co2 = float(c) if c else 0.0
                    if not (0.0 <= power <= top and 0.0 <= energy <= top and 0.0 <= co2 <= top):
                        raise ValueError
                    if kind == SAMPLE and (not cells[6] or cells[8] not in in_total
                                           or cells[12] not in sample_provs
                                           or (e and cells[12] == LOST)):
                        raise ValueError
                    if cells[14] or kind in slow:
                        raise ValueError
                    row = new(Row, (line, wall, elapsed, interval, cells[3], cells[4], kind,
                                    cells[6], cells[7], in_total.get(cells[8]),
                                    power if p else None,
                                    energy if e else None, co2 if c else None, cells[12],
                                    cells[13], None))
                except (ValueError, OverflowError, OSError):
                    try:
                        row = parse_row(cells, line)
                    except BadRow as exc:
                        self._bad_row(line, str(exc))
                        continue
                if self._pending is not None:
                    self._flush_pending()
                self.rows += 1
                yield row
        except csv.Error as exc:
            self.problem(f"unreadable ({safe_text(exc)}); the rest of the file is skipped",
                         base + reader.line_num)
        except OSError as exc:
            self.problem(f"read failed ({safe_text(exc.strerror or exc)}); the rest of the "
                         f"file is skipped")
        finally:
            self.rows += passed

    def _whole_rows(self, reader, base: int) -> Iterator[list[str]]:
        """The rows of ``reader``; a row with a cell over the csv module's field limit is
        skipped as malformed (the reader goes on at the next line), where any other
        csv.Error ends the file."""
        while True:
            try:
                yield next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                if "field larger than field limit" not in str(exc):
                    raise
                self._bad_row(base + reader.line_num,
                              f"a cell over {csv.field_size_limit() // 1024} KiB")

    def _finish(self, last_line: int, ends_nl: bool) -> None:
        pending = self._pending
        if pending is not None and pending[0] == last_line and not ends_nl:
            self._pending = None
            self.bad -= 1
            self.problem("truncated last line (was the recorder killed?); ignored", last_line)
        self._flush_pending()
        if self.bad > MAX_PROBLEMS_LISTED:
            self.problems.append(f"{safe_text(self.path)}: {self.bad - MAX_PROBLEMS_LISTED} "
                                 f"more malformed rows skipped")


_HEADER_LINE = (",".join(COLUMNS) + "\n").encode()


def _offset_of_line(path: str, lines: int) -> tuple[int, int]:
    """(byte offset just after the first ``lines`` newlines, ``lines``): where the Python
    reader takes over from the columnar one (which counted lines as rows: no quoted
    newline before that point)."""
    offset = 0
    left = lines
    with open(path, "rb") as fh:
        while left:
            chunk = fh.read(_CHUNK)
            if not chunk:
                break
            n = chunk.count(b"\n")
            if n < left:
                left -= n
                offset += len(chunk)
                continue
            pos = -1
            for _ in range(left):
                pos = chunk.index(b"\n", pos + 1)
            return offset + pos + 1, lines
    return offset, lines - left


#: a session row holds this (its ``kind`` cell): what :func:`find_sessions` looks for
_SESSION_CELL = b",session,"
_CHUNK = 1 << 20


def find_sessions(path: str | os.PathLike, stop_at: str | None = None
                  ) -> list[tuple[str, int, int]]:
    """The sessions of a file from their ``session`` rows: (id, byte offset of the row,
    lines before it), in file order; stops after the session ``stop_at`` if given.

    A byte scan for ``,session,`` (each hit parsed as a row), not a CSV parse: a
    gigabyte takes about a second, with memory of one chunk. A session that has no
    session row is not listed. Raises OSError."""
    found: list[tuple[str, int, int]] = []
    seen: set[str] = set()
    with open(path, "rb") as fh:
        carry = b""  # a partial line left from the previous chunk
        offset = 0  # file offset of carry[0]
        lines = 0  # newlines before carry[0]
        while True:
            chunk = fh.read(_CHUNK)
            buf = carry + chunk
            end = buf.rfind(b"\n") + 1 if chunk else len(buf)
            pos = buf.find(_SESSION_CELL, 0, end)
            while pos >= 0:
                start = buf.rfind(b"\n", 0, pos) + 1
                stop = buf.find(b"\n", pos, end)
                stop = end if stop < 0 else stop
                try:
                    cells = next(csv.reader([buf[start:stop].decode("utf-8", "replace")]), [])
                except csv.Error:  # a cell over the field limit: no session row
                    cells = []
                if len(cells) == N_COLUMNS and cells[5] == SESSION and cells[4] not in seen:
                    seen.add(cells[4])
                    found.append((cells[4], offset + start, lines + buf.count(b"\n", 0, start)))
                    if cells[4] == stop_at:
                        return found
                pos = buf.find(_SESSION_CELL, stop, end)
            if not chunk:
                return found
            lines += buf.count(b"\n", 0, end)
            offset += end
            carry = buf[end:]
            if len(carry) > _CHUNK:  # one line longer than a chunk is no session row
                offset += len(carry)
                carry = b""
