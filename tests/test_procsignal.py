"""Signals from the process table reach the process shown and no other: pid reuse, pid 1,
tuimeter itself and other users' processes are refused with a one-line reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tuimeter.engine import procsignal
from tuimeter.engine.procscan import ProcStat, make_scanner
from tuimeter.engine.procsignal import Refused, check, send

unix_only = pytest.mark.skipif(not hasattr(os, "getuid"), reason="needs POSIX uids")


@pytest.fixture
def sleeper():
    """A child to signal; killed at the end whatever the test did."""
    child = subprocess.Popen(["sleep", "60"])
    yield child
    if child.poll() is None:
        child.kill()
    child.wait()


def start_of(pid: int) -> float:
    st = make_scanner().read_one(pid)
    assert st is not None
    return st.start


@unix_only
def test_term_and_kill_reach_the_child(sleeper):
    target = send(sleeper.pid, start_of(sleeper.pid), signal.SIGTERM)
    assert target.pid == sleeper.pid and target.name == "sleep"
    assert sleeper.wait(timeout=30) == -signal.SIGTERM
    other = subprocess.Popen(["sleep", "60"])
    try:
        send(other.pid, start_of(other.pid), signal.SIGKILL)
        assert other.wait(timeout=30) == -signal.SIGKILL
    finally:
        if other.poll() is None:
            other.kill()
        other.wait()


@unix_only
def test_a_reused_pid_is_not_signalled(sleeper):
    """The row's start time differs from the process now holding the pid: refused, and the
    process is left alone."""
    with pytest.raises(Refused, match="exited; the pid is now another process's"):
        send(sleeper.pid, start_of(sleeper.pid) - 1.0, signal.SIGTERM)
    assert sleeper.poll() is None


@unix_only
def test_a_process_that_exited_is_refused(sleeper):
    start = start_of(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    with pytest.raises(Refused, match="has exited"):
        send(sleeper.pid, start, signal.SIGTERM)


@pytest.mark.parametrize("pid", [1, 0, -5])
def test_init_and_process_groups_are_refused(pid):
    with pytest.raises(Refused, match="not signalled"):
        check(pid, 1.0)


def test_tuimeter_itself_is_refused():
    with pytest.raises(Refused, match="tuimeter itself"):
        send(os.getpid(), start_of(os.getpid()), signal.SIGTERM)


def test_unknown_start_is_refused(sleeper):
    with pytest.raises(Refused, match="start time is unknown"):
        check(sleeper.pid, None)
    assert sleeper.poll() is None


@unix_only
def test_another_users_process_is_refused(sleeper, monkeypatch):
    """As a user that is not root, a process owned by someone else: refused before
    anything is sent (the kernel's rule: our real/effective uid against its real/saved)."""
    me = 4242
    monkeypatch.setattr(procsignal.os, "getuid", lambda: me)
    monkeypatch.setattr(procsignal.os, "geteuid", lambda: me)
    monkeypatch.setattr(procsignal, "_uids", lambda pid: (1000, 1000, 1000))
    with pytest.raises(Refused, match="belongs to .*only they or root may signal it"):
        send(sleeper.pid, start_of(sleeper.pid), signal.SIGKILL)
    assert sleeper.poll() is None
    monkeypatch.setattr(procsignal, "_uids", lambda pid: (me, me, me))
    assert check(sleeper.pid, start_of(sleeper.pid)).pid == sleeper.pid


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to become another user")
def test_another_users_process_is_refused_for_real(sleeper):
    """A process of root's, checked from a process that became `nobody`: refused, and a
    direct send (the kernel's own check) refused too."""
    code = textwrap.dedent(f"""
        import os, pwd, signal
        import psutil  # imported before the switch: the files may not be nobody's to read
        from tuimeter.engine.procsignal import Refused, check, send
        start = {start_of(sleeper.pid)!r}
        os.setgid(65534); os.setuid(65534)
        for fn in (lambda: check({sleeper.pid}, start),
                   lambda: send({sleeper.pid}, start, signal.SIGKILL)):
            try:
                fn()
            except Refused as exc:
                print("refused:", exc)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("refused: ") == 2 and "belongs to root" in r.stdout
    assert sleeper.poll() is None


def test_permission_error_from_the_kernel_is_a_refusal(sleeper, monkeypatch):
    """If the kernel says no after the checks passed (a capability, an LSM), the refusal
    is one line naming the signal and process."""
    def deny(*_a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(procsignal, "_pidfd", lambda pid: None)
    monkeypatch.setattr(procsignal.os, "kill", deny)
    with pytest.raises(Refused, match=f"not permitted to send SIGTERM to pid {sleeper.pid}"):
        send(sleeper.pid, start_of(sleeper.pid), signal.SIGTERM)


def test_pid_reused_between_check_and_send_is_refused(sleeper):
    """The start time is read again after the pidfd is opened: a process that took the
    pid between the check and the send is left alone."""
    real = make_scanner()
    reads = []

    class Swapping:
        def read_one(self, pid):
            st = real.read_one(pid)
            reads.append(st)
            return st if len(reads) == 1 else ProcStat(*st[:2], st.start + 1, *st[3:])

    with pytest.raises(Refused, match="has exited"):
        send(sleeper.pid, start_of(sleeper.pid), signal.SIGKILL, scanner=Swapping())
    assert len(reads) == 2 and sleeper.poll() is None
