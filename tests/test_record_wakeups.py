"""`tuimeter record` sleeps until something can end it (issue 25: each wake-up of a
Python thread costs CPU), and still ends promptly on each of those things: a signal,
the file's failure, the command's end, ``--pid``'s end, a signal passed on to the
command that is due its next step; with and without a pidfd."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def thread_runs(pid: int) -> dict[int, int]:
    """How many times each thread of ``pid`` has been run by the scheduler
    (``/proc/PID/task/TID/schedstat``, third field), by thread id."""
    runs = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                runs[int(tid)] = int(fh.read().split()[2])
        except (OSError, IndexError):  # the thread ended meanwhile
            continue
    return runs


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="no schedstat")
def test_an_idle_record_wakes_no_thread_but_its_sampler(tmp_path):
    """Over ten ticks of `record` (no command, no --pid, no --duration), only the
    sampling thread runs: the main thread sleeps on the signal flag with no timeout (it
    woke every 0.25 s), the marker server's with no connection open (every 0.5 s), and
    no device thread reads the CPU packages' frequency and temperature, which nothing
    headless uses (every 2 s)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True)
    out = tmp_path / "idle.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.25", "--no-gpu",
                                     "--no-attribution", "-q"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: count_totals(out) >= 2, what="two ticks")
        before = thread_runs(proc.pid)
        wait_for(lambda: count_totals(out) >= 12, what="ten more ticks")
        after = thread_runs(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    woke = {tid for tid, n in after.items() if n > before.get(tid, 0)}
    assert len(woke) == 1, (before, after)  # the sampler's, which wrote the ticks
    assert proc.pid not in woke  # not the main thread


def test_record_ends_by_itself_when_its_file_cannot_be_written(tmp_path):
    """The session file fails (a file size limit: "File too large", as a full disk
    fails it) and no signal comes: `record` ends on its own, exit 1, with the one-line
    error, and the file holds whole ticks. The main thread sleeps without a timeout,
    so the recorder's failure has to wake it."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "full.csv"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.1", "--no-gpu", "-q"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True, preexec_fn=limit)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("record did not end after its file failed")
    assert proc.returncode == 1, err
    (error,) = [line for line in err.splitlines() if line.startswith("tuimeter: error:")]
    assert "File too large" in error and "holds the session up to" in error
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 1


def test_record_pid_ends_when_that_process_ends(tmp_path):
    """`record --pid PID` ends when the process ends (told by a pidfd where there is
    one: no polling), exit 0, with its summary."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "pid.csv"
    target = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.1", "--no-gpu", "-q",
                                     "--pid", str(target.pid)),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: count_totals(out) >= 2, what="two ticks")
        target.communicate(b"", timeout=30)  # it ends: it read all of its stdin
        _, err = proc.communicate(timeout=60)
    finally:
        for p in (target, proc):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert proc.returncode == 0, err
    assert err.startswith("tuimeter: ") and "J" in err


def test_sigint_reaches_a_command_that_did_not_get_it(tmp_path):
    """SIGINT sent to tuimeter alone (`kill -INT`, not Ctrl-C to the group) reaches the
    command a second later: the sleeping main thread wakes for that step, and tuimeter
    exits with the command's status (130)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "int.csv"
    ready = tmp_path / "ready"
    script = (f"import time; open({str(ready)!r}, 'w').close(); time.sleep(120)")
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.1", "--no-gpu", "-q",
                                     "--", sys.executable, "-c", script),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        wait_for(lambda: ready.exists() and count_totals(out) >= 1, what="the command")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err


@pytest.fixture
def watchdog():
    """``watchdog(s)``: SIGTERM to this process after ``s`` seconds unless cancelled
    (``.cancel()``), so that an in-process `record` that would wait forever ends (its
    handler is ours until it returns); ``.fired`` says whether it had to."""

    class Dog:
        def __init__(self):
            self.fired = False
            self.timer = None

        def __call__(self, seconds: float) -> "Dog":
            def bite():
                self.fired = True
                os.kill(os.getpid(), signal.SIGTERM)

            self.timer = threading.Timer(seconds, bite)
            self.timer.start()
            return self

        def cancel(self):
            if self.timer is not None:
                self.timer.cancel()

    dog = Dog()
    yield dog
    dog.cancel()


@pytest.mark.parametrize("target", ["command", "pid"])
def test_without_a_pidfd_the_end_of_the_command_or_pid_is_still_seen(
        tmp_path, monkeypatch, watchdog, target):
    """Where the system gives no pidfd (an older kernel, a sandbox), `record` looks for
    the command's or --pid's end every EXIT_POLL_S, as before: it ends by itself."""
    from tuimeter import cli

    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    for k, v in env_for(tmp_path, fake).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(cli, "exit_fd", lambda pid: None)
    args = ["record", "-o", str(tmp_path / "f.csv"), "-i", "0.1", "--no-gpu", "-q"]
    short = [sys.executable, "-c", "import time; time.sleep(0.5)"]
    other = None
    if target == "command":
        args += ["--", *short]
    else:
        other = subprocess.Popen(short)
        args += ["--pid", str(other.pid)]
        # reaped as soon as it ends, as a process not ours would be (no zombie left)
        threading.Thread(target=other.wait, daemon=True).start()
    watchdog(60)
    try:
        rc = cli.main(args)
    finally:
        watchdog.cancel()
    assert not watchdog.fired, "record did not see the end by itself"
    assert rc == 0


def _tgkill():
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).tgkill  # glibc 2.30
    except (OSError, AttributeError):
        return None


@pytest.mark.skipif(_tgkill() is None, reason="no tgkill in the C library")
def test_a_signal_the_kernel_hands_to_another_thread_still_ends_record(tmp_path):
    """The kernel hands a process's signal to any thread that does not block it (to the
    sampler when the main thread has not run again yet after SIGSTOP and SIGCONT: a
    recorder continued and sent SIGTERM at once hung). Python's handler runs on the
    main thread, which sleeps with no timeout: the C handler's byte on the wake-up fd
    has to wake it. Here SIGTERM goes to the sampling thread itself (tgkill)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "t.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.2", "--no-gpu", "-q",
                                     "--no-attribution"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: count_totals(out) >= 2, what="two ticks")
        (tid, *_) = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")
                     if int(t) != proc.pid]
        assert _tgkill()(proc.pid, tid, int(signal.SIGTERM)) == 0
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert (pd.read_csv(out).kind == "total").sum() >= 2
