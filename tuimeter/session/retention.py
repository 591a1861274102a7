"""What the live view keeps in its data folder: the newest sessions, within bounds.

Every UI launch records a session (``session-YYYYmmdd-HHMMSS[-N].csv`` in the data folder,
``tuimeter.config.default_data_dir``), so without a bound the folder only grows. The UI
keeps at most :data:`KEEP_SESSIONS` sessions and :data:`KEEP_BYTES` in it: once its own
new file is made, the oldest go (with the ``.log`` of the command each followed).

Only what tuimeter made is ever removed: a name of that form, a regular file (a link, or
anything reached through one, is left alone: the folder is opened without following a
link and each name is looked at and removed relative to it), owned by this user, whose
first line is tuimeter's CSV header. Files named with ``-o`` (elsewhere, or not of that
form) and the session being recorded are never touched. ``--no-record`` makes no file.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field

#: the most sessions the data folder keeps (the newest)
KEEP_SESSIONS = 50
#: the most bytes of sessions (and their commands' logs) the data folder keeps: 500 MB
KEEP_BYTES = 500 * 10**6
#: a name the UI gives its session files
SESSION_NAME = re.compile(r"session-\d{8}-\d{6}(-\d+)?\.csv")
#: the first bytes of a session file tuimeter wrote
HEADER = b"timestamp,elapsed_s,interval_s,host,session,kind,"


@dataclass
class Pruned:
    """What :func:`prune` removed (names in ``folder``) and what it freed."""

    folder: str
    removed: list[str] = field(default_factory=list)
    freed_bytes: int = 0


def _ours(dir_fd: int, name: str) -> int | None:
    """The size of ``name`` if it is a session file tuimeter made (see module), else None."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        head = os.read(fd, len(HEADER))
    except OSError:
        head = b""
    finally:
        os.close(fd)
    return st.st_size if head == HEADER else None


def _log_size(dir_fd: int, name: str) -> int | None:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() else None


def sessions(folder: str) -> list[tuple[str, int]]:
    """The session files tuimeter made in ``folder``, oldest first: (name, bytes with the
    command's log). Empty when the folder is missing or is a link."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        out = []
        for name in sorted(n for n in os.listdir(dir_fd) if SESSION_NAME.fullmatch(n)):
            size = _ours(dir_fd, name)
            if size is not None:
                log = _log_size(dir_fd, name[:-4] + ".log") or 0
                out.append((name, size + log))
        return out
    finally:
        os.close(dir_fd)


def to_remove(found: list[tuple[str, int]], keep_path: str | None, keep: int = KEEP_SESSIONS,
              keep_bytes: int = KEEP_BYTES) -> list[str]:
    """The names of ``found`` (:func:`sessions`, oldest first) that go so that at most
    ``keep`` sessions and ``keep_bytes`` remain; ``keep_path`` never goes, and counts."""
    current = os.path.basename(keep_path) if keep_path else None
    count, total = len(found), sum(size for _, size in found)
    out = []
    for name, size in found:
        if count <= keep and total <= keep_bytes:
            break
        if name != current:
            out.append(name)
            count -= 1
            total -= size
    return out


def prune(folder: str, keep_path: str | None, keep: int = KEEP_SESSIONS,
          keep_bytes: int = KEEP_BYTES) -> Pruned:
    """Remove the oldest of tuimeter's sessions in ``folder`` until at most ``keep`` of
    them and ``keep_bytes`` remain; ``keep_path`` (the session being recorded) is never
    removed and counts. Errors remove nothing more; never raises for a file."""
    done = Pruned(folder)
    found = sessions(folder)
    sizes = dict(found)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return done
    try:
        for name in to_remove(found, keep_path, keep, keep_bytes):
            size = sizes[name]
            if _ours(dir_fd, name) is None:  # changed since it was listed
                continue
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                continue
            log = name[:-4] + ".log"
            if _log_size(dir_fd, log) is not None:
                try:
                    os.unlink(log, dir_fd=dir_fd)
                except OSError:
                    pass
            done.removed.append(name)
            done.freed_bytes += size
    finally:
        os.close(dir_fd)
    return done
