"""Read a session CSV row by row, with errors that name the file and the line.

Streaming (one row in memory at a time) with the ``csv`` module: a 24-hour session is a
million rows and must not be loaded whole. Rows come out as lists of strings in
:data:`~tuimeter.session.csvfile.COLUMNS` order; the caller parses only the cells it
needs (that is where the time goes).

What is wrong with a file is reported, never hidden, and never stops what can be read:

* not a session at all (missing, empty, another header): :class:`SessionFormatError`
  before any row;
* a row with the wrong number of cells: skipped, one problem line each (the first few);
* a last line cut short (a recorder killed mid-write leaves no final newline): skipped,
  with a problem that says so;
* a NUL byte or broken quoting: the rest of the file is skipped, with a problem.
"""

from __future__ import annotations

import csv
import os
from typing import Iterator

from .csvfile import COLUMNS

#: malformed rows reported one by one; the rest are counted
MAX_PROBLEMS_LISTED = 5
N_COLUMNS = len(COLUMNS)


class SessionFormatError(Exception):
    """The file is not a readable tuimeter session; ``str()`` is 'FILE: line N: why'."""

    def __init__(self, path: str, line: int | None, message: str):
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}: line {line}: " if line else f"{path}: "
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


class SessionReader:
    """Iterate the rows of one session file; problems collect in :attr:`problems`.

    ``line`` is the line number of the row last returned (for the caller's own messages,
    e.g. a cell that is not a number: :meth:`problem`).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.problems: list[str] = []
        self.rows = 0  # rows returned
        self._csv = None

    @property
    def line(self) -> int:
        return self._csv.line_num if self._csv is not None else 0

    def problem(self, message: str, line: int | None = None) -> None:
        """Note a problem at ``line`` (default: the current line)."""
        line = self.line if line is None else line
        self.problems.append(f"{self.path}: line {line}: {message}")

    def _ends_with_newline(self) -> bool:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() == 0:
                    return True
                fh.seek(-1, os.SEEK_END)
                return fh.read(1) == b"\n"
        except OSError:
            return True

    def __iter__(self) -> Iterator[list[str]]:
        try:
            fh = open(self.path, newline="", encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SessionFormatError(self.path, None, exc.strerror or str(exc)) from None
        with fh:
            ends_nl = self._ends_with_newline()
            reader = self._csv = csv.reader(fh)
            try:
                header = next(reader, None)
            except csv.Error as exc:
                raise SessionFormatError(self.path, 1, f"not a tuimeter session ({exc})") from None
            check_header(self.path, header)
            bad: list[tuple[int, int]] = []  # (line, cells)
            try:
                for row in reader:
                    if len(row) == N_COLUMNS:
                        self.rows += 1
                        yield row
                    elif row:  # a blank line is nothing
                        bad.append((reader.line_num, len(row)))
            except csv.Error as exc:
                self.problem(f"unreadable ({exc}); the rest of the file is skipped")
            last_line = reader.line_num
        self._report_bad(bad, last_line, ends_nl)

    def _report_bad(self, bad: list[tuple[int, int]], last_line: int, ends_nl: bool) -> None:
        if bad and bad[-1][0] == last_line and not ends_nl:
            line, _cells = bad.pop()
            self.problem("truncated last line (was the recorder killed?); ignored", line)
        for line, cells in bad[:MAX_PROBLEMS_LISTED]:
            self.problem(f"malformed row ({cells} cells, expected {N_COLUMNS}); skipped", line)
        if len(bad) > MAX_PROBLEMS_LISTED:
            self.problems.append(f"{self.path}: {len(bad) - MAX_PROBLEMS_LISTED} more "
                                 f"malformed rows skipped")
