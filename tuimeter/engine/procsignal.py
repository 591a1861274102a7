"""Sending a signal to a process the process table shows, to that process only.

A table row was drawn from a snapshot up to an interval old: since then its process may
have exited and its pid been given to another. A row names its process by pid *and* start
time (``ProcessShare.start``, as the scan reads it, in the kernel's 10 ms ticks); :func:`send`
signals only a process that still has both. The pair is the row's process alone: a row
carries a start only once a scan that began in a later tick than that start saw the
process (see :mod:`.procscan`, "Identity"), so a pid reused within the tick its first
owner started in cannot pass for it (the row of a process seen only in its first tick has
no start yet, and is refused, for one interval).

On Linux (5.3+) :func:`send` opens a pidfd first, reads the start time, then checks that
the pidfd's process is still alive (so what was read was that process's, not a later
owner's of the pid) and signals through the pidfd (``pidfd_send_signal``): the process
checked is the one signalled, with no window. Where there is no pidfd (older kernels,
macOS, a seccomp filter) it falls back to ``kill`` a few microseconds after the check, and
:attr:`Target.exact` is False (the UI says so).

Refused, with a one-line reason (:class:`Refused`), never an exception of another kind:
pid 1 and anything below, tuimeter itself, a process that is gone or whose pid was reused,
and a process this user may not signal (the kernel's rule: our real or effective uid is the
target's real or saved uid, or we are root). Headless: no UI import.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
from dataclasses import dataclass

from .procscan import make_scanner


class Refused(Exception):
    """The signal was not sent; ``str()`` says why, in one line."""


@dataclass(frozen=True)
class Target:
    """The process a signal would go to, as it is now."""

    pid: int
    name: str  # the kernel's short name (comm)
    user: str  # its owner's login name (its uid where it has none)
    #: signalled through a pidfd opened before the check (False: ``kill`` after it)
    exact: bool = True


@functools.lru_cache(maxsize=256)
def user_name(uid: int | None) -> str:
    """The login name of ``uid`` (its number where it has none), "" when unknown."""
    if uid is None:
        return ""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError, OverflowError):
        return str(uid)


def _uids(pid: int) -> tuple[int, int, int]:
    """(real, effective, saved) uid of ``pid``; ProcessLookupError when it is gone."""
    import psutil

    try:
        return tuple(psutil.Process(pid).uids())  # type: ignore[return-value]
    except psutil.NoSuchProcess:
        raise ProcessLookupError(pid) from None
    except psutil.Error as exc:  # AccessDenied (hidepid): the kernel will decide
        raise PermissionError(str(exc)) from None


def check(pid: int, start: float | None, *, scanner=None) -> Target:
    """The process ``pid`` with start time ``start``, if this user may signal it; else
    :class:`Refused`. ``scanner`` reads the start time as the attributor did (default: this
    system's scanner)."""
    if pid <= 1:
        raise Refused(f"pid {pid} is not signalled (init or a process group)")
    if pid == os.getpid():
        raise Refused(f"pid {pid} is tuimeter itself (q quits)")
    if start is None:
        raise Refused(f"pid {pid}: its start time is unknown (or it started moments ago, "
                      f"too recently to be told from a process that may reuse its pid: "
                      f"try again in a second), so it may not be the process shown")
    st = (scanner or make_scanner()).read_one(pid)
    if st is None:
        raise Refused(f"pid {pid} has exited")
    if st.start != start:
        raise Refused(f"pid {pid} has exited; the pid is now another process's "
                      f"({st.name})")
    try:
        real, _effective, saved = _uids(pid)
    except ProcessLookupError:
        raise Refused(f"pid {pid} has exited") from None
    except PermissionError:
        return Target(pid, st.name, "?")
    me = {os.getuid(), os.geteuid()}
    if os.geteuid() != 0 and not me & {real, saved}:
        raise Refused(f"pid {pid} ({st.name}) belongs to {user_name(real)}: only they or root "
                      f"may signal it")
    return Target(pid, st.name, user_name(real))


def signal_name(sig: int) -> str:
    """``SIGTERM`` for 15; the number for a signal this system does not name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (Linux 5.3+), None where there is none to be had (old kernel,
    a seccomp filter, not Linux); ProcessLookupError when the process is gone."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not hasattr(signal, "pidfd_send_signal"):
        return None
    try:
        return opener(pid)
    except ProcessLookupError:
        raise
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            raise ProcessLookupError(pid) from None
        return None


def send(pid: int, start: float | None, sig: int, *, scanner=None) -> Target:
    """Send ``sig`` to ``pid`` if it is still the process that started at ``start`` and
    this user may signal it (see :func:`check`); the target, or :class:`Refused`."""
    scanner = scanner or make_scanner()
    target = check(pid, start, scanner=scanner)
    name = signal_name(sig)
    fd = None
    try:
        fd = _pidfd(pid)
        st = scanner.read_one(pid)  # after the pidfd: it holds the process checked here
        if fd is not None:  # alive after the read: what was read was the pidfd's process
            signal.pidfd_send_signal(fd, 0)
        if st is None or st.start != start:
            raise Refused(f"pid {pid} has exited")
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
            target = Target(target.pid, target.name, target.user, exact=False)
    except ProcessLookupError:
        raise Refused(f"pid {pid} has exited") from None
    except PermissionError:
        raise Refused(f"not permitted to send {name} to pid {pid} ({target.name}, "
                      f"{target.user})") from None
    except OSError as exc:
        raise Refused(f"{name} to pid {pid} failed: {exc.strerror or exc}") from None
    finally:
        if fd is not None:
            os.close(fd)
    return target
