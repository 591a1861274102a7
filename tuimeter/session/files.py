"""Files tuimeter writes (session CSVs, a command's ``.log``, exports), created safely in
directories other users may share.

- A new file is created with ``O_CREAT|O_EXCL|O_NOFOLLOW``: a name that exists, a symbolic
  link planted at it included, is never opened, so nothing outside the name is created or
  written.
- Only regular files are written: a device, FIFO, socket, directory or symbolic link given
  as a target is refused with a one-line :class:`UnsafeTarget` and left as it was.
- An existing regular file is replaced (``--overwrite``, or an empty one) through a new
  file in the same directory renamed over it at :meth:`NewFile.commit`: until then the old
  file is untouched, so a start that fails leaves it as it was.
- tuimeter removes only a file it created itself in this run: :meth:`NewFile.remove`
  checks that the name still holds the inode that was created (device and inode number)
  before unlinking it.
"""

from __future__ import annotations

import os
import stat
import uuid

#: mode a new file is created with, before the umask (as ``open(path, "w")`` does)
FILE_MODE = 0o666
_CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class UnsafeTarget(OSError):
    """A path tuimeter will not write to (not a regular file, a symbolic link, exists)."""


def describe(mode: int) -> str:
    """What a non-regular file is, for messages: ``a character device``, ``a FIFO``..."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


class NewFile:
    """A file this run created: ``fd`` open for writing, ``path`` the name it has (or will
    have after :meth:`commit`), identified by its device and inode numbers."""

    def __init__(self, path: str, fd: int, written_at: str | None = None):
        self.path = path
        self.fd = fd
        self.written_at = written_at or path  # a temporary name until commit() when replacing
        st = os.fstat(fd)
        self.ident = (st.st_dev, st.st_ino)

    @property
    def pending(self) -> bool:
        """The file still has its temporary name (the one it replaces is untouched)."""
        return self.written_at != self.path

    def _is_ours(self, name: str) -> bool:
        try:
            st = os.lstat(name)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == self.ident

    def commit(self) -> None:
        """Give a replacing file its final name (rename over the old one; a link there is
        replaced, never followed). Idempotent; raises OSError."""
        if not self.pending:
            return
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):  # changed since it was checked
            raise UnsafeTarget(f"{self.path} is {describe(st.st_mode)}: not replaced")
        os.rename(self.written_at, self.path)
        self.written_at = self.path

    def remove(self) -> bool:
        """Unlink the file if its name still holds the inode created here (never another
        file put there since). True when removed. Call it before closing the descriptor:
        while it is open the inode number cannot be reused by another file."""
        if not self._is_ours(self.written_at):
            return False
        try:
            os.unlink(self.written_at)
        except OSError:
            return False
        return True


def _error(path: str, exc: OSError) -> OSError:
    """A readable one-line OSError for a failed creation of ``path``."""
    if isinstance(exc, FileExistsError):
        return FileExistsError(f"{path} already exists (choose another name or pass "
                               f"--overwrite)")
    if exc.errno is not None and exc.errno == getattr(os, "ELOOP", None):
        return UnsafeTarget(f"{path} is a symbolic link: tuimeter does not write through links")
    parent = os.path.dirname(os.path.abspath(path))
    if isinstance(exc, FileNotFoundError) and not os.path.isdir(parent):
        return FileNotFoundError(f"directory {parent} does not exist")
    return type(exc)(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


def create_new(path: str | os.PathLike) -> NewFile:
    """Create ``path``, which must not exist (no link is followed). Raises OSError with a
    readable message."""
    path = os.fspath(path)
    try:
        fd = os.open(path, _CREATE, FILE_MODE)
    except OSError as exc:
        raise _error(path, exc) from None
    return NewFile(path, fd)


def create_free(directory: str | os.PathLike, stem: str, suffix: str,
                mode: int = FILE_MODE) -> NewFile:
    """A new file ``STEM SUFFIX`` in ``directory``, or ``STEM-2 SUFFIX``, ``STEM-3``... where
    the name is taken (by anything, a link included): never an existing file. ``mode``
    before the umask."""
    n = 1
    while True:
        name = f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}"
        path = os.path.join(os.fspath(directory), name)
        try:
            return NewFile(path, os.open(path, _CREATE, mode))
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise _error(path, exc) from None


def check_target(path: str) -> os.stat_result | None:
    """The ``lstat`` of an existing ``path`` that is a regular file, None when nothing is
    there; UnsafeTarget (or IsADirectoryError) for anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _error(path, exc) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{path} is a directory")
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeTarget(f"{path} is a symbolic link: tuimeter does not write through links "
                           f"(remove it or choose another name)")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeTarget(f"{path} is {describe(st.st_mode)}, not a regular file: "
                           f"a session is not written there")
    return st


def create_target(path: str | os.PathLike, *, overwrite: bool = False) -> NewFile:
    """A new file for ``path``: created if nothing is there; an existing regular file that
    is empty, or any with ``overwrite``, is replaced at :meth:`NewFile.commit` by a file
    written under a temporary name in the same directory. Anything else is refused."""
    path = os.fspath(path)
    st = check_target(path)
    if st is None:
        return create_new(path)
    if st.st_size > 0 and not overwrite:
        raise FileExistsError(f"{path} already exists (choose another name or pass --overwrite)")
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(temp, _CREATE, FILE_MODE)
    except OSError as exc:
        raise _error(path, exc) from None
    return NewFile(path, fd, written_at=temp)


def open_existing(path: str | os.PathLike) -> int:
    """An existing regular file opened for reading and appending (no link followed, a FIFO
    never waited on): its descriptor. Raises UnsafeTarget or OSError."""
    path = os.fspath(path)
    flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _error(path, exc) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeTarget(f"{path} is {describe(st.st_mode)}, not a regular file: "
                           f"a session is not written there")
    os.set_blocking(fd, True)
    return fd
