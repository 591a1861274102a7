"""``tuimeter sessions``: the sessions the live view recorded into its data folder, and
``tuimeter sessions prune``: remove the oldest, with the policy the UI applies by itself
at each launch (:mod:`.retention`: only session files tuimeter made there, never a link,
never a file of another name or owner).

The listing reads little of each file: its first row (the start), its last row (the
duration) and, for a file up to :data:`ENERGY_SCAN_BYTES`, its ``total`` rows (the
energy); a bigger one says ``tuimeter report FILE`` instead of reading hundreds of MB.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import sys
from dataclasses import asdict, dataclass

from ..cli_help import help_text
from ..text import safe_text
from . import retention
from .schema import COLUMNS

#: a session file up to this size has its energy summed for the listing (a 1 s session
#: grows about 0.3 MB a minute with process rows: 8 MB is about half an hour)
ENERGY_SCAN_BYTES = 8 * 10**6
#: bytes read from a file's end to find its last row
TAIL_BYTES = 65536
_ELAPSED, _KIND, _ENERGY, _PROVENANCE = (COLUMNS.index(c) for c in
                                        ("elapsed_s", "kind", "energy_j", "provenance"))


@dataclass(frozen=True)
class SessionInfo:
    """One session file of the data folder, as the listing shows it."""

    name: str
    size_bytes: int
    """The file and its command's ``.log``."""
    start: str | None
    """Its first row's time, ISO 8601 UTC; None where unreadable."""
    duration_s: float | None
    """Its last complete row's ``elapsed_s``; None where unreadable."""
    energy_j: float | None
    """The sum of its ``total`` rows; None when not read (too big) or unreadable."""
    provenance: str
    """``measured`` when every total row is; else ``estimated``, ``incomplete`` (a domain
    was lost) or ``mixed``; ``""`` when the energy was not read."""


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) < 1e15 else None


def _row(line: bytes) -> list[str] | None:
    try:
        row = next(csv.reader([line.decode("utf-8", "replace")]))
    except (csv.Error, StopIteration):
        return None
    return row if len(row) == len(COLUMNS) else None


def _first_row(fh) -> list[str] | None:
    fh.seek(0)
    fh.readline()  # the header
    return _row(fh.readline(TAIL_BYTES))


def _last_row(fh, size: int) -> list[str] | None:
    fh.seek(max(0, size - TAIL_BYTES))
    lines = fh.read(TAIL_BYTES).split(b"\n")
    for line in reversed(lines[1:-1] if size > TAIL_BYTES else lines[:-1]):  # whole lines
        row = _row(line)
        if row is not None and row[_ELAPSED] != "elapsed_s":
            return row
    return None


def _energy(fh) -> tuple[float | None, str]:
    """The sum of the ``total`` rows' energy, and their provenance in one word."""
    fh.seek(0)
    total, seen = 0.0, set()
    for line in fh:
        if b",total,total," not in line:
            continue
        row = _row(line.rstrip(b"\r\n"))
        if row is None or row[_KIND] != "total":
            continue
        energy = _number(row[_ENERGY])
        if energy is None or energy < 0:
            return None, ""
        total += energy
        seen.add(row[_PROVENANCE])
    if not seen:
        return None, ""
    if seen == {"measured"}:
        return total, "measured"
    if seen <= {"measured", "estimated"}:
        return total, "estimated"
    return total, "incomplete" if "lost" in seen else "mixed"


def describe(folder: str, name: str, size: int) -> SessionInfo:
    """What the listing says of ``name`` (a session file in ``folder``); never raises."""
    start = duration = energy = None
    provenance = ""
    try:
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return SessionInfo(name, size, None, None, None, "")
    with os.fdopen(fd, "rb") as fh:
        try:
            file_size = os.fstat(fh.fileno()).st_size
            first = _first_row(fh)
            last = _last_row(fh, file_size)
            if first is not None:
                start = first[0]
            if last is not None:
                duration = _number(last[_ELAPSED])
            if file_size <= ENERGY_SCAN_BYTES:
                energy, provenance = _energy(fh)
        except OSError:
            pass
    return SessionInfo(name, size, start, duration, energy, provenance)


def list_sessions(folder: str) -> list[SessionInfo]:
    """Every session file tuimeter made in ``folder``, oldest first."""
    return [describe(folder, name, size) for name, size in retention.sessions(folder)]


def _local(start: str | None) -> str:
    try:
        return _dt.datetime.fromisoformat(start).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return "N/A"


def _duration(s: float | None) -> str:
    if s is None:
        return "N/A"
    s = max(0, int(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _joules(j: float) -> str:
    for factor, unit in ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")):
        if j >= factor:
            return f"{j / factor:.2f} {unit}"
    return f"{j:.1f} J"


def _line(s: SessionInfo) -> str:
    energy = (f"{_joules(s.energy_j)} {s.provenance}" if s.energy_j is not None else
              "N/A (over 8 MB: tuimeter report FILE)" if s.size_bytes > ENERGY_SCAN_BYTES
              else "N/A")
    return (f"  {safe_text(s.name):<34} {_local(s.start):<19}  {_duration(s.duration_s):>8}"
            f"  {s.size_bytes / 1e6:>8.2f} MB  {energy}")


def _folder(args: argparse.Namespace) -> str:
    if args.dir:
        return args.dir
    from ..config import default_data_dir

    return str(default_data_dir())


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def _megabytes(text: str) -> float:
    value = _number(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in MB (0 or more)")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tuimeter sessions", **help_text("sessions"),
        description="The sessions the live view recorded into its data folder (name, "
                    "start, duration, size, energy), oldest first; `prune` removes the "
                    f"oldest. The UI keeps the newest {retention.KEEP_SESSIONS} and "
                    f"{retention.KEEP_BYTES // 10**6} MB by itself. Only session files "
                    "tuimeter made there are listed or removed: never a link, a file of "
                    "another name or owner, or one named with -o.")
    p.add_argument("action", nargs="?", choices=("list", "prune"), default="list",
                   help="list (the default) or prune")
    p.add_argument("--dir", metavar="DIR",
                   help="the folder (default: the data folder, $XDG_DATA_HOME/tuimeter/"
                        "sessions)")
    p.add_argument("--json", action="store_true", help="list as JSON")
    p.add_argument("--keep", type=_count, default=retention.KEEP_SESSIONS, metavar="N",
                   help=f"prune: keep the newest N sessions (default "
                        f"{retention.KEEP_SESSIONS})")
    p.add_argument("--max-mb", type=_megabytes, default=retention.KEEP_BYTES / 10**6,
                   metavar="M", help=f"prune: and at most M MB of them (default "
                                     f"{retention.KEEP_BYTES // 10**6})")
    p.add_argument("--dry-run", action="store_true",
                   help="prune: say what would go, remove nothing")
    return p


def cmd_sessions(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.action == "list" and args.dry_run:
        p.error("--dry-run is for prune")
    folder = _folder(args)
    if args.action == "prune":
        return _prune(folder, args)
    found = list_sessions(folder)
    if args.json:
        json.dump([asdict(s) for s in found], sys.stdout, indent=1)
        print()
        return 0
    total = sum(s.size_bytes for s in found)
    print(f"{len(found)} sessions in {safe_text(folder)} ({total / 1e6:.2f} MB; the UI keeps "
          f"the newest {retention.KEEP_SESSIONS} and {retention.KEEP_BYTES // 10**6} MB)")
    for s in found:
        print(_line(s))
    return 0


def _prune(folder: str, args: argparse.Namespace) -> int:
    keep_bytes = int(args.max_mb * 10**6)
    if args.dry_run:
        names = retention.to_remove(retention.sessions(folder), None, args.keep, keep_bytes)
        for name in names:
            print(f"would remove {safe_text(name)}")
        print(f"{len(names)} of {len(retention.sessions(folder))} sessions would go "
              f"(--keep {args.keep}, --max-mb {args.max_mb:g})")
        return 0
    done = retention.prune(folder, None, args.keep, keep_bytes)
    for name in done.removed:
        print(f"removed {safe_text(name)}")
    print(f"removed {len(done.removed)} sessions ({done.freed_bytes / 1e6:.2f} MB) from "
          f"{safe_text(folder)}; {len(retention.sessions(folder))} left")
    return 0
