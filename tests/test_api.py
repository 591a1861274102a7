"""Python API: Meter (own and attached), phases shorter than a tick, @measure, mark()."""

from __future__ import annotations

import csv
import warnings

import pytest

import tuimeter
from tests.helpers import make_engine, wait_for
from tuimeter import api
from tuimeter.engine import sampler
from tuimeter.session import markers
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.recorder import Recorder


@pytest.fixture(autouse=True)
def fresh_api(runtime_dir, monkeypatch):
    monkeypatch.setattr(api, "_warned_none", False)


def test_import_is_light():
    """`import tuimeter` exports the API lazily and names a version."""
    assert tuimeter.__version__
    assert tuimeter.Meter is api.Meter and tuimeter.mark is api.mark
    assert tuimeter.measure is api.measure


def test_own_mode_phases_and_csv(tmp_path):
    """No session running: the meter samples itself, writes the CSV, returns per-phase energy."""
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), label="train", engine=eng, autostart=False) as meter:
        assert not meter.attached
        for _ in range(3):
            clock.advance(1.0)
            eng.tick()
        meter.mark("eval")
        for _ in range(2):
            clock.advance(1.0)
            eng.tick()
    train, ev = meter.phases
    assert (train.label, ev.label) == ("train", "eval")
    assert train.duration_s == pytest.approx(3.0) and train.energy_j == pytest.approx(135.0)
    assert ev.energy_j == pytest.approx(90.0) and ev.provenance == "measured"
    assert train.domains["package-0/core"] == pytest.approx(75.0)  # nested: listed, not added
    assert train.co2_g == pytest.approx(135.0 * 360 / 3.6e6)
    rows = list(csv.DictReader(out.open()))
    assert [r["label"] for r in rows if r["kind"] == "marker"] == ["train", "eval"]
    assert meter.energy_j == pytest.approx(225.0)


def test_phase_shorter_than_a_tick_is_interpolated():
    """A 0.1 s phase inside a 1 s tick gets that tick's power x 0.1 s, labelled interpolated."""
    eng, clock = make_engine()
    with api.Meter(label="before", engine=eng, autostart=False) as meter:
        clock.advance(0.4)
        meter.mark("blink")
        clock.advance(0.1)
        meter.mark("after")
        clock.advance(0.5)
        eng.tick()
    blink = meter.phases[1]
    assert blink.provenance == "interpolated"
    assert blink.energy_j == pytest.approx(4.5)  # 45 W x 0.1 s
    assert blink.energy_j > 0


def test_own_mode_spreads_a_bridged_reading_over_the_lost_ticks_it_covers(tmp_path):
    """Guards own-mode phases against a sensor outage across a marker: package-0 (40 W)
    is lost for ticks 2 and 3, "b" starts between them, and the bridged reading at tick
    4 holds 120 J over 3 s. Each phase gets its true 2 s x 45 W = 90 J (before, "a" got
    50 J and "b" 130 J: the bridged energy went to the tick that read it), as `report`
    counts the same file."""
    eng, clock = make_engine()
    sensor = eng.sensors[0]
    sensor.bridging.add("package-0")
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), label="a", engine=eng, autostart=False) as meter:
        clock.advance(1.0)
        eng.tick()
        sensor.lost = {"package-0"}
        clock.advance(1.0)
        eng.tick()
        meter.mark("b")
        clock.advance(1.0)
        eng.tick()
        sensor.lost = set()
        clock.advance(1.0)
        eng.tick()
    a, b = meter.phases
    assert a.energy_j == pytest.approx(90.0) and b.energy_j == pytest.approx(90.0)
    assert a.domains["package-0"] == pytest.approx(80.0) and a.lost_s == 0.0
    from tuimeter.session.report import build_report, load_file

    (host,) = build_report([load_file(str(out))]).hosts
    assert [(s.label, s.energy_j, s.provenance) for s in host.segments] == [
        (p.label, pytest.approx(p.energy_j), p.provenance) for p in (a, b)]


def test_own_mode_phase_reports_the_time_a_domain_was_lost():
    """A domain lost for a whole phase (no bridge): its energy is not counted, the phase
    says for how long (lost_s), and the rest is still measured."""
    eng, clock = make_engine()
    sensor = eng.sensors[0]
    with api.Meter(label="a", engine=eng, autostart=False) as meter:
        clock.advance(1.0)
        eng.tick()
        sensor.lost = {"package-0"}
        meter.mark("b")
        clock.advance(2.0)
        eng.tick()
    a, b = meter.phases
    assert a.energy_j == pytest.approx(45.0) and a.lost_s == 0.0
    assert b.energy_j == pytest.approx(10.0) and b.lost_s == pytest.approx(2.0)
    assert b.provenance == "measured"


def _running_session(tmp_path):
    """A tuimeter session as `record` runs it: engine, recorder, marker server."""
    eng, clock = make_engine()
    writer = SessionWriter.create(tmp_path / "session.csv", "h")
    rec = Recorder(writer)
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    return eng, clock, rec, markers.start_marker_server(eng, rec)


def test_attached_mode_marks_the_running_session(tmp_path, monkeypatch):
    """With a session running, Meter starts no sampler and marks that session's file."""
    eng, clock, rec, server = _running_session(tmp_path)
    started = []
    monkeypatch.setattr(sampler.Engine, "open", lambda self: started.append(self))
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with api.Meter(output=str(tmp_path / "ignored.csv"), label="rank0") as meter:
                clock.advance(2.0)
                eng.tick()
                meter.mark("phase2")
                clock.advance(1.0)
                eng.tick()
        assert meter.attached and started == []
        assert any("not written" in str(w.message) for w in seen)
        assert not (tmp_path / "ignored.csv").exists()
        clock.advance(1.0)
        eng.tick()
    finally:
        server.close()
        rec.close()
    rows = list(csv.DictReader((tmp_path / "session.csv").open()))
    assert [r["label"] for r in rows if r["kind"] == "marker"] == ["rank0", "phase2", "end"]
    rank0, phase2 = meter.phases
    assert rank0.energy_j == pytest.approx(90.0) and rank0.provenance == "measured"
    assert phase2.energy_j == pytest.approx(45.0)


def test_attached_phase_spanning_a_tick_edge_but_no_whole_tick_is_interpolated(tmp_path):
    """Attached, a 0.6 s phase across one tick end (no whole tick inside) is labelled
    interpolated, as in own mode, not measured."""
    eng, clock, rec, server = _running_session(tmp_path)
    try:
        clock.advance(1.0)
        eng.tick()
        clock.advance(0.7)
        with api.Meter(label="straddle") as meter:
            clock.advance(0.3)
            eng.tick()
            clock.advance(0.3)
    finally:
        server.close()
        rec.close()
    (phase,) = meter.phases
    assert phase.provenance == "interpolated" and phase.energy_j == pytest.approx(0.6 * 45.0)


def test_attached_short_phase_is_interpolated(tmp_path):
    """Attached, a phase with no tick inside it is extrapolated from the last tick's power."""
    eng, clock, rec, server = _running_session(tmp_path)
    try:
        clock.advance(1.0)
        eng.tick()
        with api.Meter(label="tiny") as meter:
            clock.advance(0.2)
    finally:
        server.close()
        rec.close()
    (tiny,) = meter.phases
    assert tiny.provenance == "interpolated" and tiny.energy_j == pytest.approx(9.0)


def test_two_meters_in_one_process_count_once():
    """A second Meter while one samples attaches to it (one sampler for a multi-rank job)."""
    eng, clock = make_engine()
    with api.Meter(label="owner", engine=eng, autostart=False) as owner:
        with api.Meter(label="rank1") as rank1:
            clock.advance(1.0)
            eng.tick()
        assert rank1.attached and not owner.attached
    assert rank1.phases[0].energy_j == pytest.approx(45.0)


def test_meter_mark_with_an_undecodable_label_warns_and_is_not_sent(tmp_path):
    """Regression (issue 9 item 2): ``Meter.mark("caf\\udce9")`` reached the session and
    the recorder died writing it. Now a warning, and nothing is marked: neither a phase
    nor a row; the session goes on. (A bad first ``label=`` is a ValueError at once.)"""
    eng, clock, rec, server = _running_session(tmp_path)
    try:
        with api.Meter(label="train") as meter:
            assert meter.attached
            with pytest.warns(RuntimeWarning, match="not valid UTF-8.*not marked"):
                meter.mark("caf\udce9")
            with pytest.warns(RuntimeWarning, match="bidirectional"):
                meter.mark("x\u202ey")
            clock.advance(1.0)
            eng.tick()
        with pytest.raises(ValueError, match="not valid UTF-8"):
            api.Meter(label="caf\udce9")
        clock.advance(1.0)
        eng.tick()
    finally:
        server.close()
        rec.close()
    assert not rec.failed.is_set()
    assert [p.label for p in meter.phases] == ["train"]
    rows = list(csv.DictReader((tmp_path / "session.csv").open()))
    assert [r["label"] for r in rows if r["kind"] == "marker"] == ["train", "end"]


def test_mark_without_session_returns_false_and_warns_once():
    with pytest.warns(RuntimeWarning, match="no tuimeter session"):
        r = tuimeter.mark("x")
    assert not r and r.delivered == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not tuimeter.mark("y")  # no second warning


def test_mark_bad_label_never_raises():
    with pytest.warns(RuntimeWarning, match="control"):
        r = tuimeter.mark("a\x00b")
    assert not r and "control" in r.error


def test_mark_with_session_returns_a_true_result(tmp_path):
    """`if tuimeter.mark(...)` reads as before; the result says where it went."""
    eng, clock, rec, server = _running_session(tmp_path)
    try:
        r = tuimeter.mark("hello")
        assert r and r.delivered == 1 and r.sessions == (rec.writer.session_id,)
        assert r.not_answered == () and r.refused == ()
    finally:
        server.close()
        rec.close()


def test_measure_decorator_bare_and_with_options():
    """@measure wraps each call in a Meter; the last meter is kept on the wrapper."""
    eng, clock = make_engine()

    @tuimeter.measure(engine=eng, autostart=False)
    def work(n):
        clock.advance(n)
        eng.tick()
        return n * 2

    assert work(2.0) == 4.0
    (phase,) = work.last_meter.phases
    assert phase.label.endswith("work") and phase.energy_j == pytest.approx(90.0)

    @tuimeter.measure
    def nothing():
        return "ok"

    assert nothing.last_meter is None
    assert callable(nothing)


def test_import_tuimeter_loads_no_engine_or_ui():
    """`import tuimeter` stays light: the API, engine, textual and plotext load on first use."""
    import subprocess
    import sys

    code = ("import sys, tuimeter; heavy = [m for m in ('tuimeter.api', 'tuimeter.engine', "
            "'textual', 'plotext', 'pandas') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_measure_keeps_the_meter_when_the_function_raises():
    eng, clock = make_engine()

    @tuimeter.measure(engine=eng, autostart=False)
    def boom():
        clock.advance(1.0)
        eng.tick()
        raise KeyError("x")

    with pytest.raises(KeyError):
        boom()
    assert boom.last_meter.phases[0].energy_j == pytest.approx(45.0)


#: for the processes of the multi-rank tests: files in the working directory as barriers,
#: waited for with a bound (never a fixed sleep)
_BARRIER = """
import glob, os, sys, time

def touch(name):
    open(name, "w").close()

def count(pattern):
    return len(glob.glob(pattern))

def wait_until(condition, what):
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.01)
"""


def test_ranks_starting_together_elect_one_sampler(tmp_path):
    """Four processes entering Meter at once: one samples, three attach (lock file).

    They enter together (each waits for a ``go`` file once it has imported tuimeter) and
    none leaves before all four are in, so a rank can never find the sampler gone."""
    import subprocess
    import sys

    code = _BARRIER + (
        "import tuimeter\n"
        "touch(f'ready-{os.getpid()}'); wait_until(lambda: os.path.exists('go'), 'go')\n"
        "with tuimeter.Meter(interval_s=0.2, gpu=False, powercap_root='/nonexistent',"
        " carbon_intensity=100) as m:\n"
        "    touch(f'entered-{os.getpid()}')\n"
        "    wait_until(lambda: count('entered-*') == 4, 'every rank to enter')\n"
        "print('attached' if m.attached else 'own')\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                              text=True) for _ in range(4)]
    try:
        wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 4, 60, "every rank to start")
        (tmp_path / "go").touch()
        modes = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert modes == ["attached", "attached", "attached", "own"]


def test_measure_with_output_measures_every_call_into_one_file(tmp_path):
    """@measure(output="f.csv") on a function called twice: the second call does not fail
    on the file the first call wrote; both calls are sessions of that one file, which
    pandas-style readers see with a single header and the report sees as two sessions."""
    from tuimeter.session.report import load_file

    out = tmp_path / "f.csv"

    @tuimeter.measure(output=str(out), interval_s=0.05, gpu=False, attach=False,
                      powercap_root=str(tmp_path / "no-powercap"), carbon_intensity=100)
    def work(n):
        return n + 1

    assert work(1) == 2
    first = work.last_meter
    assert work(2) == 3  # raised SetupError: "f.csv already exists"
    assert work.last_meter is not first and work.last_meter.phases
    lines = out.read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("timestamp,")) == 1
    rows = list(csv.DictReader(lines))
    assert len({r["session"] for r in rows}) == 2
    assert [r["label"] for r in rows if r["kind"] == "marker"] == [
        first.phases[0].label, work.last_meter.phases[0].label]
    res = load_file(str(out))
    assert res.error is None and len(res.sessions) == 2


def test_meter_refuses_an_existing_file_unless_overwrite_or_append(tmp_path):
    """Meter(output=existing) still refuses to replace a previous session; append=True adds
    a session after it, and refuses a file that is not a tuimeter session."""
    from tuimeter.measurement import SetupError

    out = tmp_path / "run.csv"
    for append in (False, True):
        eng, clock = make_engine()
        with api.Meter(output=str(out), engine=eng, autostart=False, append=append,
                       attach=False):
            clock.advance(1.0)
            eng.tick()
    with pytest.raises(SetupError):
        api.Meter(output=str(out), engine=make_engine()[0], autostart=False).start()
    rows = list(csv.DictReader(out.open()))
    assert len({r["session"] for r in rows}) == 2
    other = tmp_path / "notes.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(SetupError, match="not a tuimeter session"):
        api.Meter(output=str(other), engine=make_engine()[0], autostart=False,
                  append=True).start()
    assert other.read_text() == "a,b\n1,2\n"


def test_measure_does_not_append_to_a_file_it_did_not_write(tmp_path):
    """A first call refused because ``output`` already existed does not make the next call
    append to that file: only a file this decorator wrote is added to."""
    from tuimeter.measurement import SetupError

    out = tmp_path / "theirs.csv"
    eng, _ = make_engine()
    SessionWriter.create(out, "h").close()
    out.write_text(out.read_text() + "keep,me\n")
    before = out.read_text()

    @tuimeter.measure(output=str(out), attach=False, gpu=False, interval_s=0.05,
                      powercap_root=str(tmp_path / "none"))
    def work():
        return 1

    for _ in range(2):
        with pytest.raises(SetupError):
            work()
    assert out.read_text() == before


def test_meter_refuses_an_interval_below_the_minimum(tmp_path):
    """Guards the API like the CLI: interval_s below 10 ms (faster than sensors update,
    and mostly measuring ourselves) is a SetupError naming the minimum, before any file."""
    from tuimeter.measurement import SetupError

    out = tmp_path / "fast.csv"
    with pytest.raises(SetupError, match=">= 0.01 s"):
        api.Meter(output=str(out), interval_s=0.001, gpu=False, attach=False,
                  powercap_root=str(tmp_path / "none")).start()
    assert not out.exists()


_RANK = _BARRIER + """
import csv, json, warnings
import tuimeter
warnings.simplefilter("always")
rank = int(sys.argv[1])

def session_rows():
    [path] = glob.glob("rank*.csv")  # only the sampler writes its file
    with open(path) as fh:
        text = fh.read()
    return list(csv.DictReader(text[:text.rfind("\\n") + 1].splitlines()))

def marker(label, pid):
    found = [r for r in session_rows() if r["kind"] == "marker" and r["label"] == label
             and r["pid"] == str(pid)]
    return float(found[0]["elapsed_s"]) if found else None

def ticks_after(t):
    return len({r["elapsed_s"] for r in session_rows()
                if r["kind"] == "total" and float(r["elapsed_s"]) > t})

with warnings.catch_warnings(record=True) as seen:
    with tuimeter.Meter(output=f"rank{rank}.csv", label="work", interval_s=0.1, gpu=False,
                        powercap_root="/nonexistent", carbon_intensity=100) as m:
        touch(f"entered-{rank}")
        wait_until(lambda: count("entered-*") == 4, "every rank to enter")
        if m.attached:
            # the sampler has left its `with` and marked its own end: what follows is
            # measured only because it keeps sampling for the ranks attached to it
            wait_until(lambda: os.path.exists("sampler"), "the sampler to leave")
            sampler = int(open("sampler").read())
            wait_until(lambda: marker("end", sampler) is not None, "the sampler's end")
            local_t0 = time.monotonic()
            m.mark("tail")
            wait_until(lambda: marker("tail", os.getpid()) is not None, "the tail marker")
            wait_until(lambda: ticks_after(marker("tail", os.getpid())) >= 2,
                       "two ticks in the tail")
        else:
            with open("sampler.tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace("sampler.tmp", "sampler")
    local_s = time.monotonic() - local_t0 if m.attached else None
print(json.dumps({"attached": m.attached, "pid": os.getpid(), "local_tail_s": local_s,
                  "phases": [[p.label, p.start_s, p.duration_s, p.energy_j, p.provenance]
                             for p in m.phases],
                  "warnings": [str(w.message) for w in seen if "ended" in str(w.message)]}))
"""


def test_sampler_that_leaves_first_keeps_measuring_until_every_rank_ends(tmp_path):
    """Guards multi-rank phases: the rank elected sampler leaves its `with` first, yet it
    keeps sampling until every attached rank has sent "end", so their last phase is
    measured (a number, from whole ticks; no warning) and its file holds their end
    markers; its own last phase still ends when it left.

    Ordered by barriers, not sleeps: every rank is in before the sampler leaves, and the
    ranks start their last phase only once the sampler has marked its own end."""
    import json
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", _RANK, str(r)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    owner = [r for r in results if not r["attached"]]
    ranks = [r for r in results if r["attached"]]
    assert len(owner) == 1 and len(ranks) == 3
    [csv_path] = [p for p in tmp_path.glob("rank*.csv")]
    rows = list(csv.DictReader(csv_path.open()))
    marker_rows = [r for r in rows if r["kind"] == "marker"]
    ends = {int(r["pid"]): float(r["elapsed_s"]) for r in marker_rows if r["label"] == "end"}
    assert set(ends) == {r["pid"] for r in results}  # three ranks + the sampler
    sampler_end = ends[owner[0]["pid"]]
    for r in ranks:
        assert r["warnings"] == []
        (work, *_), (tail, tail_t0, tail_s, tail_j, tail_prov) = r["phases"]
        assert (work, tail) == ("work", "tail")
        assert tail_t0 > sampler_end  # wholly after the sampler left
        assert tail_j is not None and tail_j > 0 and tail_prov == "estimated"
        assert 0 < tail_s <= r["local_tail_s"]  # between its marks, as the rank saw them
    [(label, own_t0, own_s, own_j, _)] = owner[0]["phases"]
    assert own_j is not None
    assert own_t0 + own_s == pytest.approx(sampler_end, abs=1e-5)  # ends when it left, not later
    assert sampler_end < min(e for pid, e in ends.items() if pid != owner[0]["pid"])
    assert max(float(r["elapsed_s"]) for r in rows) >= max(ends.values())  # sampled to the end


def test_sampler_does_not_wait_for_a_rank_that_died(tmp_path):
    """Guards against a hung exit: an attached rank that started a phase and died without
    sending "end" counts as ended, so the sampling meter stops without waiting out
    ``wait_attached_s`` (which would warn that it stopped with a meter still running)."""
    import subprocess
    import sys

    eng, clock = make_engine()
    code = ("import os, tuimeter\n"
            "m = tuimeter.Meter(label='doomed'); m.start()\n"
            "assert m.attached\n"
            "os._exit(0)\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with api.Meter(label="owner", engine=eng, autostart=False,
                       wait_attached_s=30.0) as owner:
            subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
            clock.advance(1.0)
            eng.tick()
    assert [str(w.message) for w in seen if "stopped measuring" in str(w.message)] == []
    assert owner.phases[0].energy_j == pytest.approx(45.0)


def test_attached_meter_whose_session_vanished_extrapolates_its_last_phase(tmp_path, monkeypatch):
    """Guards `round(p.energy_j)` in user code: when the session ends before an attached
    meter does, its last phase is the cumulative energy of the last reply plus the last
    power times the local time since, provenance "interpolated", never None."""
    eng, clock, rec, server = _running_session(tmp_path)
    monkeypatch.setattr(api, "_monotonic", clock)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with api.Meter(label="a") as meter:
                clock.advance(1.0)
                eng.tick()
                meter.mark("b")
                server.close()  # the session ends under the meter
                clock.advance(2.0)
    finally:
        server.close()
        rec.close()
    a, b = meter.phases
    assert a.energy_j == pytest.approx(45.0)
    assert b.energy_j == pytest.approx(90.0) and b.provenance == "interpolated"
    assert b.duration_s == pytest.approx(2.0)
    assert round(b.energy_j) == 90
