"""Markers end to end (issue 9 items 2, 6, 7, 8): real `tuimeter record` processes, the
real `tuimeter mark` and `tuimeter.mark()`, and what their session CSVs hold."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import tuimeter as tm
from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for


class Recorders:
    """Recorders started on demand; all ended (SIGCONT first: some may be stopped)."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=False)
        self.env = env_for(tmp_path, fake)
        self.env.pop("TUIMETER_SESSION", None)
        self.procs: list[subprocess.Popen] = []

    @property
    def sockets(self) -> Path:
        return self.tmp / "run" / "tuimeter"

    def start(self, name: str, *command: str) -> tuple[subprocess.Popen, Path]:
        out = self.tmp / f"{name}.csv"
        args = ["record", "-o", str(out), "--interval", "0.2", "--no-gpu", "--no-attribution",
                "-q"]
        proc = subprocess.Popen(tuimeter(*args, *(("--", *command) if command else ())),
                                env=self.env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        wait_for(lambda: count_totals(out) >= 1, what=f"{name}'s first tick")
        wait_for(lambda: any(p.name.startswith(f"{proc.pid}-") for p in self.sockets.iterdir()),
                 what=f"{name}'s socket")
        return proc, out

    def end(self, proc: subprocess.Popen) -> str:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        return err

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.communicate(timeout=30)


@pytest.fixture
def recorders(tmp_path, monkeypatch):
    r = Recorders(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", r.env["XDG_RUNTIME_DIR"])
    monkeypatch.delenv("TUIMETER_SESSION", raising=False)
    yield r
    r.close()


#: seconds sessions have to answer in these tests: a loaded machine can take seconds (3 s
#: failed once at a load of 40), and a live session answers at once anyway (only stopped
#: ones make a client wait this long)
PATIENCE = "8"


def mark_cli(recorders: Recorders, *args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(tuimeter("mark", "--timeout", PATIENCE, *args), env=recorders.env,
                          cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def marker_labels(path: Path) -> list[str]:
    df = pd.read_csv(path, keep_default_na=False, dtype=str)
    return list(df[df["kind"] == "marker"]["label"])


def session_id(path: Path) -> str:
    return pd.read_csv(path, dtype=str)["session"].iloc[0]


def test_a_bad_label_ends_no_recording(recorders):
    """Regression (issue 9 item 2): `tuimeter mark $'caf\\xe9'` said "marked in 1
    session", then the recorder died writing it (exit 1) and the tick holding the earlier
    marker was lost. Now every entry refuses it and the recorder goes on."""
    proc, out = recorders.start("r")
    assert mark_cli(recorders, "before").returncode == 0
    bad = subprocess.run([sys.executable, "-m", "tuimeter", "mark", b"caf\xe9"],
                         env=recorders.env, cwd=ROOT, capture_output=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.decode().count("\n") == 1 and b"not valid UTF-8" in bad.stderr
    (sock,) = recorders.sockets.glob(f"{proc.pid}-*.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(sock))
        s.sendall(b'{"op": "mark", "label": "\\udcff"}\n')
        reply = json.loads(s.makefile().readline())
    assert reply["ok"] is False and "not valid UTF-8" in reply["error"]
    with pytest.warns(RuntimeWarning, match="not valid UTF-8"):
        r = tm.mark("caf\udce9")
    assert not r and r.error
    n = count_totals(out)
    wait_for(lambda: count_totals(out) >= n + 2, what="two more ticks")
    assert proc.poll() is None  # still recording
    assert mark_cli(recorders, "after").returncode == 0
    err = recorders.end(proc)
    assert proc.returncode == 0, err
    assert marker_labels(out) == ["before", "after"]


def test_stopped_sessions_do_not_block_live_ones(recorders):
    """Regression (issue 9 item 6): with sessions stopped by SIGSTOP, `tuimeter mark`
    said no session was running (exit 1), the live one got nothing, and the stopped
    ones recorded the marker late after SIGCONT. Now: the live one is marked at once,
    the stopped ones are named, exit 3; they never record it, even when continued."""
    live, live_csv = recorders.start("live")
    stopped = [recorders.start(f"stopped{i}") for i in range(2)]
    for proc, _ in stopped:
        proc.send_signal(signal.SIGSTOP)
    r = mark_cli(recorders, "x")
    assert r.returncode == 3, r.stderr
    assert "marked 'x' in 1 of 3 sessions" in r.stdout
    assert r.stderr.count("\n") == 1
    for proc, _ in stopped:
        assert f"pid {proc.pid} did not answer" in r.stderr
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        res = tm.mark("y", timeout_s=float(PATIENCE))
    assert not res and res.delivered == 1
    assert sorted(res.not_answered) == sorted(f"pid {p.pid}" for p, _ in stopped)
    assert any("did not answer" in str(w.message) for w in seen)
    # the live session alone, by id: every targeted session got it, exit 0
    t = mark_cli(recorders, "--session", session_id(live_csv), "z")
    assert t.returncode == 0 and f"in session {session_id(live_csv)}" in t.stdout
    for proc, _ in stopped:
        recorders.end(proc)  # SIGCONT: they now read the queued messages, too late
        assert proc.returncode == 0
    recorders.end(live)
    assert marker_labels(live_csv) == ["x", "y", "z"]
    for _, path in stopped:
        assert marker_labels(path) == []


def test_concurrent_marks_acknowledged_equals_recorded(recorders):
    """Regression (issue 9 item 7): 200 concurrent marks against 5 sessions exited 0
    while the files held 167-200 each. Now each client is told exactly which sessions
    recorded its marker: 30 API threads and 30 CLI processes at once against 2
    recorders, and per label the sessions holding it == the sessions acknowledged."""
    runs = [recorders.start(f"r{i}") for i in range(2)]
    acked: dict[str, int] = {}
    go = threading.Barrier(31)

    def api(label: str) -> None:
        go.wait()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acked[label] = tm.mark(label).delivered

    threads = [threading.Thread(target=api, args=(f"api-{i}",)) for i in range(30)]
    for t in threads:
        t.start()
    clis = [(f"cli-{i}", subprocess.Popen(tuimeter("mark", f"cli-{i}"), env=recorders.env,
                                          cwd=ROOT, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
            for i in range(30)]
    go.wait()
    for t in threads:
        t.join()
    codes = {}
    for label, p in clis:
        out, err = p.communicate(timeout=120)
        m = re.search(r"marked '[^']*' in (\d+)", out)
        acked[label] = int(m.group(1)) if m else 0
        codes[label] = p.returncode
        assert p.returncode == {2: 0, 1: 3, 0: 1}[acked[label]], (out, err)
    recorded: dict[str, int] = {}
    for proc, path in runs:
        recorders.end(proc)
        assert proc.returncode == 0
        for label in marker_labels(path):
            recorded[label] = recorded.get(label, 0) + 1
    assert {k: v for k, v in acked.items() if v} == recorded
    assert sum(acked.values()) > 0


CHILD = """
import subprocess, sys, warnings, tuimeter
warnings.simplefilter("error")
r = tuimeter.mark("from the command", timeout_s=3)
assert r and r.delivered == 1, r
with tuimeter.Meter(label="meter phase") as m:
    m.mark("meter phase 2")
assert m.attached, "the meter should attach to its own session"
sys.exit(subprocess.call([sys.executable, "-m", "tuimeter", "mark", "--timeout", "3",
                          "cli from the command"]))
"""


def test_a_command_marks_its_own_session_only(recorders):
    """Issue 9 item 8: `record -- CMD` sets $TUIMETER_SESSION for the command, so its
    tuimeter.mark(), its Meter and `tuimeter mark` reach that session and no other."""
    other, other_csv = recorders.start("other")
    script = recorders.tmp / "child.py"
    script.write_text(CHILD)
    out = recorders.tmp / "job.csv"
    job = subprocess.run(tuimeter("record", "-o", str(out), "--interval", "0.2", "--no-gpu",
                                  "--no-attribution", "-q", "--", sys.executable, str(script)),
                         env=recorders.env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert job.returncode == 0, job.stderr
    assert marker_labels(out) == ["from the command", "meter phase", "meter phase 2", "end",
                                  "cli from the command"]
    # without a target, every session is marked, as before
    assert mark_cli(recorders, "everyone").returncode == 0
    missing = mark_cli(recorders, "--session", "0123456789ab", "x")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    by_path = mark_cli(recorders, "--session", str(other_csv), "by path")
    assert by_path.returncode == 0
    recorders.end(other)
    assert marker_labels(other_csv) == ["everyone", "by path"]


# -- the socket before the sensors (issue 22) ----------------------------------------------
SLOW_PYNVML = '''\
"""A pynvml whose nvmlInit holds until the test removes a gate file (a probe that takes
as long as the test wants, as a loaded machine's can), then finds no driver."""
import os
import threading


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


def nvmlInit():
    gate = os.environ["TUIMETER_TEST_PROBE_GATE"]
    while os.path.exists(gate):
        threading.Event().wait(0.01)
    raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
'''


def test_a_mark_sent_while_the_sensors_are_probed_reaches_the_session(recorders, tmp_path):
    """Several recorders starting at once on busy cores took > 2.5 s to open their
    sockets, and marks sent meanwhile found "no session is running". The socket is now
    made first, before the sensors are probed: a mark sent while the probe is held
    finds the session, waits in the socket's queue and is recorded once it answers."""
    fakes = tmp_path / "slowfakes"
    fakes.mkdir()
    (fakes / "pynvml.py").write_text(SLOW_PYNVML)
    gate = tmp_path / "probe-gate"
    gate.write_text("held")
    env = {**recorders.env, "PYTHONPATH": str(fakes), "TUIMETER_TEST_PROBE_GATE": str(gate)}
    out = tmp_path / "slow.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "-i", "0.2", "--no-attribution",
                                     "-q"),
                            env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    recorders.procs.append(proc)
    sockets = recorders.sockets
    wait_for(lambda: sockets.is_dir() and any(p.name.startswith(f"{proc.pid}-")
                                              for p in sockets.iterdir()),
             what="the socket, while the GPU probe is held")
    assert not out.exists() or count_totals(out) == 0  # still probing
    (path,) = [p for p in sockets.iterdir() if p.name.startswith(f"{proc.pid}-")]
    early = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what `mark` sends, now
    early.settimeout(90)
    early.connect(str(path))
    early.sendall(json.dumps({"op": "mark", "label": "early bird", "source": "cli",
                              "pid": 1, "expires": time.time() + 90}).encode() + b"\n")
    gate.unlink()  # the probe ends: the session answers what waited in its queue
    reply = json.loads(early.makefile().readline())
    early.close()
    assert reply["ok"] is True, reply
    r = subprocess.run(tuimeter("mark", "--timeout", PATIENCE, "later"), env=recorders.env,
                       cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and "marked 'later' in 1 session" in r.stdout, r.stderr
    wait_for(lambda: count_totals(out) >= 1, what="the first tick")
    recorders.end(proc)
    df = pd.read_csv(out)
    assert list(df[df.kind == "marker"].label) == ["early bird", "later"]
