"""``config.toml``: its reader, and where files go. Imports nothing of tuimeter but the leaves :mod:`tuimeter.keys` (the
:class:`Key` every setting is declared with, and :class:`ConfigError`) and
:mod:`tuimeter.exposure` (its warning about a secret in a file others can read); the keys
carry their checks (:mod:`tuimeter.checks`), so reading the file loads no exporter,
carbon source or session.

Every setting is resolved in one order, first match wins: the command line, then an
environment variable, then ``config.toml``, then the built-in default; that is done once,
at the edge, by :mod:`tuimeter.settings` (docs/configuration.md has the table).

Locations come from ``platformdirs``; on Linux they are the XDG ones:
``$XDG_CONFIG_HOME/tuimeter/config.toml`` (``~/.config/...``) and
``$XDG_DATA_HOME/tuimeter/sessions`` (``~/.local/share/...``); on macOS
``~/Library/Application Support/tuimeter/...``.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
import stat
import sys
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import platformdirs

from .keys import ConfigError, Key, check_value

__all__ = ["ConfigError", "ConfigWarning", "Key", "check_value", "config_dir",
           "default_config_path", "default_data_dir", "read_config_text", "read_table",
           "save_key"]


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigWarning(UserWarning):
    """Something in config.toml was ignored (an unknown key); the message says which."""


def config_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CONFIG_HOME/tuimeter`` (honoured on every system), else platformdirs'
    user config folder: ``~/.config/tuimeter`` on Linux."""
    base = env.get("XDG_CONFIG_HOME") or platformdirs.user_config_dir(roaming=True)
    return Path(base) / "tuimeter"


def default_config_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CONFIG_HOME/tuimeter/config.toml``, or ``~/.config/tuimeter/config.toml``."""
    return config_dir(env) / "config.toml"


def default_data_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_DATA_HOME/tuimeter/sessions``, else platformdirs' user data folder:
    ``~/.local/share/tuimeter/sessions`` on Linux."""
    base = env.get("XDG_DATA_HOME") or platformdirs.user_data_dir(roaming=True)
    return Path(base) / "tuimeter" / "sessions"


_warned_keys: set = set()


#: the largest config.toml read, bytes (it holds three keys)
MAX_CONFIG_BYTES = 64 * 1024


def read_config_text(path: str | os.PathLike) -> str:
    """The text of a config file: a regular file (a link to one is fine) of at most
    MAX_CONFIG_BYTES, UTF-8. FileNotFoundError when there is none; ConfigError with a
    one-line reason for anything else (a device such as /dev/zero, a FIFO, binary data),
    which is never read past the limit nor waited on."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"cannot read config file {path}: not a regular file")
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"cannot read config file {path}: larger than "
                          f"{MAX_CONFIG_BYTES // 1024} KiB")
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text (byte "
                          f"0x{data[exc.start]:02x} at offset {exc.start})") from None


def read_table(path: str | os.PathLike, keys: Sequence[Key]) -> dict[str, Any]:
    """The keys of config file ``path`` ({} when there is none), their values as written
    (unchecked: see :func:`check_value`); a key not among ``keys`` is warned about once
    per file (ConfigWarning) and left out, and a file holding a ``secret`` key that others
    can read is warned about. Raises ConfigError (one line) for a file that cannot be
    read or parsed."""
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        return {}
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    names = [k.name for k in keys]
    secrets = [k.name for k in keys if k.secret and data.get(k.name)]
    if secrets:
        from .exposure import warn_readable_secret_file

        warn_readable_secret_file(path, secrets)
    known = {}
    for key, value in data.items():
        if key in names:
            known[key] = value
        elif (str(path), key) not in _warned_keys:
            _warned_keys.add((str(path), key))
            hint = difflib.get_close_matches(key, names, n=1)
            warnings.warn(
                f"{path}: unknown key {key!r} ignored"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f"; known keys: {', '.join(names)}", ConfigWarning, stacklevel=4)
    return known


# -- writing one key ------------------------------------------------------------------
#: a value :func:`save_key` writes: a bare name (a theme's), so that it needs no escaping
_SAVE_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
#: a ``key = value  # comment`` line: the value is replaced, the rest kept
_KEY_LINE = r"""(?m)^([ \t]*{key}[ \t]*=[ \t]*)("[^"\n]*"|'[^'\n]*'|[^#\n]*?)([ \t]*#.*)?$"""


def save_key(key: str, value: str, path: str | os.PathLike | None = None,
             env: Mapping[str, str] = os.environ) -> Path:
    """Set ``key = "value"`` in config.toml (default: :func:`default_config_path`),
    keeping every other line of the file as it was (keys, comments, tables, and a comment
    after the key's own value), and return the file's path. Only ``theme`` is written
    (what the UI remembers).

    Safe where root runs with another user's config folder (``sudo -E``, a sudo that
    keeps ``HOME``): the file is refused (ConfigError, one line saying why; the caller
    keeps the theme for this run only) when it is a symbolic link (dangling or not), or
    when it or its folder belongs to another user than the one running tuimeter; a
    missing folder is created (0700) only inside a folder of that user. Nothing is
    written through a link and no owner ever changes: every step works on the folder's
    descriptor (``openat``, ``renameat``), so a link swapped in meanwhile is not followed.

    The file is replaced atomically (a temporary file in the same folder, then a rename)
    with the old file's permissions, or 0600 for a new file, under an exclusive lock on
    the folder (two tuimeters saving at once take turns). The file is read again just
    before the rename: a change made meanwhile by someone else (an editor, ``echo >>``)
    is taken in and the save done again over it, at most :data:`SAVE_TRIES` times, then
    refused; lines appended in the instant between that last look and the rename are
    carried over into the new file. The new text is parsed before it is written: a file
    whose other keys would change, or that does not parse, is left alone (ConfigError).
    OSError when the folder cannot take the file."""
    if key != "theme":
        raise ConfigError(f"{key!r} is not a key the UI saves")
    if not _SAVE_VALUE.fullmatch(value):
        raise ConfigError(f"{key} {value!r}: not a name that can be saved")
    target = Path(path) if path is not None else default_config_path(env)
    dfd = _open_own_folder(target.parent)
    try:
        _lock(dfd)
        for _ in range(SAVE_TRIES):
            old = _read_own(dfd, target)
            try:
                new = _edited(target, old[0] if old else "", key, value)
            except BaseException:
                if old is not None:
                    os.close(old[2])
                raise
            if _replace(dfd, target, new, old):  # closes old's descriptor
                return target
        raise ConfigError(f"{target}: not saved, it kept changing while {key} was saved "
                          f"(try again)")
    finally:
        os.close(dfd)


#: saves tried in a row when the file changes under one (then it is refused)
SAVE_TRIES = 5
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _whose(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _check_owner(what: str, st: os.stat_result) -> None:
    me = os.geteuid()
    if st.st_uid != me:
        raise ConfigError(f"{what}: not saved, it belongs to {_whose(st.st_uid)}, not to "
                          f"{_whose(me)} who runs tuimeter (its owner must save it)")


def _open_own_folder(folder: Path) -> int:
    """The descriptor of config folder ``folder``, made (0700) if missing; ConfigError
    when it is a link, not a folder, or another user's, or would be made inside another
    user's folder."""
    if not os.path.lexists(folder):
        above = folder.parent
        while not above.exists() and above != above.parent:
            above = above.parent
        _check_owner(str(above), os.stat(above))
        os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW)
    except OSError as exc:
        if os.path.islink(folder):
            raise ConfigError(f"{folder}: not saved, the folder is a symbolic link "
                              f"(tuimeter does not write through links)") from None
        raise ConfigError(f"{folder}: not saved ({exc.strerror or exc})") from None
    try:
        _check_owner(str(folder), os.fstat(dfd))
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _lock(dfd: int) -> None:
    try:
        import fcntl

        fcntl.flock(dfd, fcntl.LOCK_EX)
    except (ImportError, OSError):  # no flock here: the re-read before the rename still holds
        pass


def _read_own(dfd: int, target: Path) -> tuple[str, os.stat_result, int] | None:
    """(text, stat, descriptor) of the config file in the folder ``dfd``, None when
    there is none; ConfigError for a link, another user's file, or one that is not a
    config file (see :func:`read_config_text`). The caller closes the
    descriptor."""
    try:
        fd = os.open(target.name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW,
                     dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{target}: not saved, it is a symbolic link (tuimeter does "
                              f"not write through links; edit the file it points to)") from None
        raise ConfigError(f"{target}: not saved ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{target}: not saved, it is not a regular file")
        _check_owner(str(target), st)
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{target}: not saved, larger than {MAX_CONFIG_BYTES // 1024} KiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{target}: not saved, it is not UTF-8 text") from None
    except BaseException:
        os.close(fd)
        raise
    return text, st, fd


def _edited(target: Path, text: str, key: str, value: str) -> str:
    """``text`` with ``key = "value"``; ConfigError when that would change anything else."""
    line = f'{key} = "{value}"'

    def replace(m: re.Match[str]) -> str:
        return f'{m[1]}"{value}"{m[3] or ""}'

    new, count = re.subn(_KEY_LINE.format(key=re.escape(key)), replace, text, count=1)
    if not count:  # before the first table, where a top-level key must be
        table = re.search(r"(?m)^[ \t]*\[", text)
        at = table.start() if table else len(text)
        head = text[:at]
        if head and not head.endswith("\n"):
            head += "\n"
        new = head + line + "\n" + ("\n" if table else "") + text[at:]
    try:
        before, after = tomllib.loads(text), tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{target}: not saved, the file does not parse: {exc}") from None
    before[key] = value
    if after != before:
        raise ConfigError(f"{target}: not saved, {key} is written in a way this editor "
                          f"does not change (edit it by hand)")
    return new


def _write_temp(dfd: int, name: str, text: str, mode: int, gid: int | None = None) -> int:
    """A new file ``name`` in the folder ``dfd`` holding ``text`` (synced), with the
    group ``gid`` of the file it replaces (ConfigError when that group cannot be kept);
    its inode."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        if gid is not None and os.fstat(fh.fileno()).st_gid != gid:
            try:
                os.fchown(fh.fileno(), -1, gid)
            except OSError:
                raise ConfigError(f"its group (gid {gid}) could not be kept") from None
        fh.write(text)
        fh.flush()
        os.fchmod(fh.fileno(), mode)
        os.fsync(fh.fileno())
        return os.fstat(fh.fileno()).st_ino


def _replace(dfd: int, target: Path, new: str,
             old: tuple[str, os.stat_result, int] | None) -> bool:
    """Rename a file holding ``new`` over the config file if it still holds what was
    read (``old``); False (nothing changed) when it changed meanwhile."""
    import uuid

    mode = 0o600 if old is None else stat.S_IMODE(old[1].st_mode)
    tmp = f".config-{uuid.uuid4().hex[:12]}.toml"
    try:
        try:
            ino = _write_temp(dfd, tmp, new, mode, None if old is None else old[1].st_gid)
        except ConfigError as exc:
            raise ConfigError(f"{target}: not saved, {exc}") from None
        now = _read_own(dfd, target)
        if now is not None:
            os.close(now[2])
        if (now is None) != (old is None) or (now is not None and old is not None and (
                now[0] != old[0] or now[1].st_ino != old[1].st_ino)):
            os.unlink(tmp, dir_fd=dfd)
            if old is not None:
                os.close(old[2])
            return False
        os.replace(tmp, target.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        if old is not None:
            os.close(old[2])
        raise
    if old is not None:
        try:
            _carry_over(dfd, target, old, ino)
        finally:
            os.close(old[2])
    return True


def _carry_over(dfd: int, target: Path, old: tuple[str, os.stat_result, int], ino: int) -> None:
    """Bytes appended to the old file after it was last read (in the instant before the
    rename) go to the end of the new one, so an ``echo >>`` racing the save loses nothing."""
    fd = old[2]
    with contextlib.suppress(OSError):
        os.lseek(fd, len(old[0].encode("utf-8")), os.SEEK_SET)
        late = os.read(fd, 1 << 16)
        if not late:
            return
        out = os.open(target.name, os.O_WRONLY | os.O_APPEND | _NOFOLLOW, dir_fd=dfd)
        try:
            if os.fstat(out).st_ino == ino:  # still the file this save wrote
                os.write(out, late)
        finally:
            os.close(out)
