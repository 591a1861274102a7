"""Replay: a recorded session served by ReplaySensor through the same engine and UI.
Deterministic replays use a fake clock; the `--replay` command line test runs the real
sampler thread at 100x and waits on conditions (bounded), never on timings."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from tests.fakes.scripted import FakeClock
from tuimeter.model import Status
from tuimeter.sensors.replay import ReplayError, ReplaySensor
from tuimeter.session.schema import guess_kind as kind_of
from tuimeter.replay_engine import ReplayPlayer, make_replay
from tuimeter.tui.run import build, parser
from tuimeter.tui.widgets import DomainTable, TopBar

from .conftest import DEMO, drawn, play, replay_app, tick, wait_for

RECORDED = pd.read_csv(DEMO)
SAMPLES = RECORDED[RECORDED["kind"] == "sample"]


def test_replay_gives_back_each_recorded_interval():
    """Ticking a replay at the recording's own interval yields its per-domain power,
    domains, in_total flags, provenance and lost intervals."""
    clock = FakeClock()
    engine, sensor = make_replay(str(DEMO), clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    assert [d.id for d in engine.domains] == ["package-0", "package-0/core", "package-0/dram",
                                             "psys", "gpu0", "gpu1"]
    flags = {d.id: d.in_total for d in engine.domains}
    assert flags == {"package-0": True, "package-0/core": False, "package-0/dram": True,
                     "psys": False, "gpu0": True, "gpu1": True}
    snaps = []
    for _ in range(120):
        clock.advance(1.0)
        snaps.append(engine.tick())
    for tick_no in (1, 50, 120):
        snap = snaps[tick_no - 1]
        rows = SAMPLES[SAMPLES["elapsed_s"] == tick_no]
        for _, row in rows.iterrows():
            d = snap.domain(row["domain"])
            if row["provenance"] == "lost":
                assert d.status is Status.LOST
            else:
                assert d.power_w == pytest.approx(row["power_w"], rel=1e-6)
    assert snaps[91].domain("gpu1").status is Status.LOST
    assert snaps[-1].host == "demo-node"
    assert snaps[-1].carbon.g_per_kwh == 475.0
    recorded_total = RECORDED[RECORDED["kind"] == "total"]["energy_j"].sum()
    assert snaps[-1].total.total_energy_j == pytest.approx(recorded_total, rel=0.02)
    labels = [m.label for m in snaps[-1].markers]
    assert labels == ["warmup", "train", "eval", "cooldown"]
    assert [m.elapsed_s for m in snaps[-1].markers] == [15.5, 35.5, 80.5, 100.5]
    assert sensor.finished(snaps[-1].elapsed_s)


def test_replayed_markers_land_where_they_were_recorded():
    """A replayed marker keeps its recorded elapsed time and wall time, however long the
    tick that first reads past it (here 10 s ticks; a starved sampler thread at --speed 100
    is the same case): it was placed at the read, up to a whole tick late."""
    clock = FakeClock()
    engine, _ = make_replay(str(DEMO), clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    snaps = []
    for _ in range(12):
        clock.advance(10.0)
        snaps.append(engine.tick())
    got = [(m.label, m.elapsed_s) for m in snaps[-1].markers]
    assert got == [("warmup", 15.5), ("train", 35.5), ("eval", 80.5), ("cooldown", 100.5)]
    assert [m.label for m in snaps[1].new_markers] == ["warmup"]  # the tick that holds it
    recorded = RECORDED[RECORDED["kind"] == "marker"]["timestamp"]
    want = [pd.Timestamp(t).timestamp() for t in recorded]
    assert [m.timestamp for m in snaps[-1].markers] == pytest.approx(want, abs=1e-6)


def test_speed_scales_time_but_not_power():
    """At 10x, one real second replays ten recorded seconds at their recorded power."""
    clock = FakeClock()
    engine, _ = make_replay(str(DEMO), speed=10.0, clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    clock.advance(1.0)
    snap = engine.tick()
    assert snap.elapsed_s == pytest.approx(10.0)
    first10 = SAMPLES[(SAMPLES["domain"] == "package-0") & (SAMPLES["elapsed_s"] <= 10)]
    assert snap.domain("package-0").power_w == pytest.approx(first10["power_w"].mean(), rel=1e-6)


def test_bad_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ReplayError, match="not a tuimeter session"):
        ReplaySensor(bad)
    with pytest.raises(ReplayError, match="cannot read"):
        ReplaySensor(tmp_path / "missing.csv")
    empty = tmp_path / "e.csv"
    empty.write_text(",".join(RECORDED.columns) + "\n")
    with pytest.raises(ReplayError, match="no sample rows"):
        ReplaySensor(empty)


def test_unreadable_contents_are_one_line_errors(tmp_path):
    """A binary file or a cell past the csv module's limit (a corrupt or wrong file given
    to --replay) is a one-line ReplayError naming the file, not a traceback from the csv
    or codecs module. Bytes that are not UTF-8 are read as the report reads them
    (replaced), not refused."""
    head = ",".join(RECORDED.columns) + "\n"
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    huge = tmp_path / "huge.csv"
    huge.write_text(head + '2026-01-01T00:00:01+00:00,1,1,h,s,sample,pkg,rapl,1,1,1,,measured,"'
                    + "x" * 200_000 + '",\n')
    for path in (binary, huge):
        with pytest.raises(ReplayError) as info:
            ReplaySensor(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(head.encode() + "2026-01-01T00:00:01+00:00,1,1,h\xe9,s,sample,pkg,rapl,"
                      "1,1,1,,measured,,\n".encode("latin-1"))
    assert ReplaySensor(latin).host == "h\ufffd"


#: a session with one of each malformed row the report skips (line numbers in comments)
BAD_ROWS = """\
2026-01-01T00:00:00+00:00,0,0,h,s,session,,,,,,,,tuimeter schema 1,
2026-01-01T00:00:01+00:00,1,1,h,s,sample,pkg,rapl,1,10,10,,measured,,
2026-01-01T00:00:01+00:00,1,1,h,s,sample,dram,rapl,1,1,1,,measured,,
2026-01-01T00:00:02+00:00,2,1,h,s,sample,pkg,rapl,1,,nan,,measured,,
2026-01-01T00:00:02+00:00,2,1,h,s,sample,dram,rapl,1,1,1,,measured,,
2026-01-01T00:00:03+00:00,3,1,h,s,sample,pkg,rapl,1,-5,-5,,measured,,
2026-01-01T00:00:03+00:00,3,1,h,s,sample,dram,rapl,1,1,1,,measured,,
2026-01-01T00:00:04+00:00,4,1,h,s,sample,pkg,rapl,1,1e400,1e400,,measured,,
2026-01-01T00:00:04+00:00,inf,1,h,s,sample,dram,rapl,1,1,1,,measured,,
2026-01-01T00:00:04+00:00,4.5,0,h,s,marker,,cli,,,,,,bad pid,inf
2026-01-01T00:00:04+00:00,4.5,0,h,s,marker,,cli,,,,,,good,
2026-01-01T00:00:05+00:00,5,1,h,s,sample,pkg,rapl,1,1000,1000,,measured,,,extra
2026-01-01T00:00:05+00:00,5,1,h,s,sample
2026-01-01T00:00:05+00:00,5,1,h,s,sample,dram,rapl,1,1,1,,measured,,
2026-01-01T00:00:06+00:00,6,1,h,s,sample,pkg,rapl,1,10,10,,measured,,
2026-01-01T00:00:06+00:00,6,1,h,s,sample,dram,rapl,1,1,1,,measured,,
"""


def test_replay_keeps_the_rows_the_report_keeps(tmp_path):
    """Guards one reader for both: replay accepted 16-cell and 5-cell rows the report
    skipped, turned nan into a lost interval and summed negative energy. The same bad
    file through both: the same joules per domain, the same markers, and the same
    problems naming the same lines."""
    from tuimeter.session.report import build_report, load_file

    path = tmp_path / "bad.csv"
    path.write_text(",".join(RECORDED.columns) + "\n" + BAD_ROWS)
    res = load_file(str(path))
    (host,) = build_report([res]).hosts
    reported = {d: v.energy_j for d, v in host.domains.items()}
    assert reported == {"pkg": 20.0, "dram": 5.0}
    assert [s.label for s in host.segments] == ["(start)", "good"]
    engine, snaps, sensor = play(path)
    assert {d.domain.id: d.total_energy_j for d in snaps[-1].domains} == reported
    assert [m.label for m in snaps[-1].markers] == ["good"]
    assert sensor.problems == res.problems
    assert [p.split(": ")[1] for p in res.problems] == [
        "line 5", "line 7", "line 9", "line 10", "line 11", "2 more malformed rows skipped"]



def _write_long_session(path, ticks: int, domains: int = 4) -> None:
    """A session of ``ticks`` 1 s ticks (a marker every 100), quickly."""
    lines = [",".join(RECORDED.columns),
             "2026-01-01T00:00:00+00:00,0,0,big,b1,session,,,,,,,,tuimeter schema 1,"]
    for t in range(1, ticks + 1):
        ts = f"2026-01-01T{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}+00:00"
        if t % 100 == 50:
            lines.append(f"{ts},{t - 0.5},0,big,b1,marker,,cli,,,,,,m{t},")
        for d in range(domains):
            lines.append(f"{ts},{t},1,big,b1,sample,package-{d},rapl,1,{d + 1},{d + 1},,"
                         f"measured,,")
        lines.append(f"{ts},{t},1,big,b1,total,total,,,10,10,,measured,,")
    path.write_text("\n".join(lines) + "\n")


def test_replay_streams_the_file(tmp_path):
    """Guards replay memory (a 1.09 GB session took 69 s and 1.21 GB before the first
    frame: the whole file was loaded). The replay reads as it plays: when the first
    snapshot is out it has read only the file's start, and while it plays it holds a few
    intervals per domain, however long the recording; every joule still comes back."""
    path = tmp_path / "long.csv"
    ticks = 20_000
    _write_long_session(path, ticks)
    size = path.stat().st_size
    assert size > 3_000_000
    clock = FakeClock()
    engine, sensor = make_replay(str(path), clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    snaps = []
    engine.subscribe(snaps.append)
    player = ReplayPlayer(engine, sensor)
    clock.advance(1.0)
    player.run_due()
    assert len(snaps) == 1
    assert sensor.bytes_read < 200_000 < size  # the start of the file, not all of it
    held = []
    for _ in range(ticks // 1000):
        clock.advance(1000.0)
        player.run_due()
        held.append(max(len(t.ivs) for t in sensor._tracks.values()))
        held.append(len(sensor._bounds) + len(sensor._markers))
    assert player.finished and sensor.bytes_read == size
    assert max(held) <= 4
    assert {d.domain.id: d.total_energy_j for d in snaps[-1].domains} == pytest.approx(
        {f"package-{d}": (d + 1.0) * ticks for d in range(4)})
    assert len(snaps[-1].markers) == ticks // 100


def test_kind_from_domain_id():
    assert str(kind_of("package-0/dram")) == "dram"
    assert str(kind_of("package-1/core")) == "core"
    assert str(kind_of("gpu3")) == "gpu"
    assert str(kind_of("estimate/cpu")) == "package"


def test_replay_module_does_not_load_textual():
    code = ("import sys, tuimeter.sensors.replay; "
            "sys.exit(1 if 'textual' in sys.modules or 'tuimeter.tui' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.asyncio
async def test_replay_through_the_ui_on_a_fake_clock():
    """The UI shows the replay's domains, markers and end."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 125)
        assert "REPLAY demo.csv: replay finished" in str(app.query_one(TopBar).content)
        assert set(app.query_one(DomainTable).row_keys) >= {"gpu0", "gpu1", "psys", "total"}
        shown = " ".join(str(n.message) for n in app._notifications)
        assert "replay finished" in shown
        await pilot.press("q")


def _per_domain_joules(df: pd.DataFrame) -> dict[str, float]:
    samples = df[df["kind"] == "sample"]
    return samples.groupby("domain")["energy_j"].sum().to_dict()


def _lost_ticks(df: pd.DataFrame) -> set[tuple[str, float]]:
    samples = df[df["kind"] == "sample"]
    lost = samples[samples["provenance"] == "lost"]
    return {(d, round(t, 6)) for d, t in zip(lost["domain"], lost["elapsed_s"])}


def test_player_at_speed_10_gives_back_every_recorded_joule():
    """Guards the --speed N replay (it ticked every ~10 session s, so each tick touching
    gpu1's 4 s lost period lost all of its 10 s, and it stopped short of the end): the
    player ticks at every recorded tick time, the last one the recording's end, so each
    domain's joules, the lost intervals and the tick times are the file's."""
    clock = FakeClock()
    engine, sensor = make_replay(str(DEMO), speed=10.0, clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    snaps = []
    engine.subscribe(snaps.append)
    player = ReplayPlayer(engine, sensor)
    for _ in range(13):  # 130 session s: more than the recording
        clock.advance(1.0)
        player.run_due()
    assert player.finished
    assert [s.elapsed_s for s in snaps] == pytest.approx([float(t) for t in range(1, 121)])
    assert all(s.interval_s == pytest.approx(1.0) for s in snaps)
    got = {d.domain.id: d.total_energy_j for d in snaps[-1].domains}
    assert got == pytest.approx(_per_domain_joules(RECORDED), rel=1e-9)
    lost = {(d.domain.id, round(s.elapsed_s, 6)) for s in snaps for d in s.domains
            if d.status is Status.LOST}
    assert lost == _lost_ticks(RECORDED)
    assert engine.interval_s == 1.0


@pytest.mark.asyncio
async def test_replay_command_line_reproduces_the_recording(tmp_path):
    """`tuimeter --replay FILE --speed 100 -o OUT` on the real clock and player thread:
    OUT has the recording's 1 s ticks up to its end, every domain's joules (lost intervals
    stay lost, nothing else is lost) and its markers; the UI says the replay finished."""
    out = tmp_path / "replayed.csv"
    session, problem = build(["--replay", str(DEMO), "--speed", "100", "-o", str(out)])
    assert problem is None
    app = session.app
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: app._replay_done, tries=600)
        await drawn(pilot)
        assert "replay finished" in str(app.query_one(TopBar).content)
        await pilot.press("q")
    assert session.close() == 0
    df = pd.read_csv(out)
    assert _per_domain_joules(df) == pytest.approx(_per_domain_joules(RECORDED), abs=1e-3)
    assert _lost_ticks(df) == _lost_ticks(RECORDED)
    ticks = sorted(set(df[df["kind"] == "sample"]["elapsed_s"].round(6)))
    assert ticks == [float(t) for t in range(1, 121)]
    m = df[df["kind"] == "marker"]
    assert list(m["label"]) == ["warmup", "train", "eval", "cooldown"]
    assert list(m["elapsed_s"]) == pytest.approx([15.5, 35.5, 80.5, 100.5], abs=1e-6)


def test_replay_without_o_leaves_no_file(tmp_path, capsys):
    import os
    import stat

    session, problem = build(["--replay", str(DEMO)], start_engine=False)
    assert problem is None
    temp = session.temp_path
    assert stat.S_IMODE(os.stat(temp).st_mode) == 0o600  # a copy of a session: private
    assert temp and session.close() == 0

    assert not os.path.exists(temp)
    assert "replay not saved" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--replay", "nope.csv"], "cannot read"),
    (["--speed", "2"], "--speed needs --replay"),
    (["--replay", str(DEMO), "--pid", "1"], "cannot follow"),
    (["--export-dir", "/nonexistent/dir"], "not a directory"),
])
def test_bad_ui_options_fail_before_anything_starts(argv, message):
    session, problem = build(argv, start_engine=False)
    assert session is None and message in problem


def test_parser_has_the_ui_options():
    args = parser().parse_args(["--replay", "x.csv", "--speed", "4"])
    assert args.replay == "x.csv" and args.speed == 4.0


def _two_sessions(tmp_path):
    """demo.csv, then a second session (other id, 3x the energy) appended as `cat a b`
    would: its header line repeated."""
    second = RECORDED.copy()
    second["session"] = "second00001"
    second["energy_j"] = second["energy_j"] * 3
    path = tmp_path / "two.csv"
    path.write_text(DEMO.read_text() + second.to_csv(index=False))
    return path, second


def _replayed_joules(path, session=None) -> dict[str, float]:
    clock = FakeClock()
    engine, sensor = make_replay(str(path), clock=clock, cpu_clock=lambda: 0.0,
                                 session=session)
    engine.open()
    player = ReplayPlayer(engine, sensor)
    while not player.finished:
        clock.advance(10.0)
        player.run_due()
    return {d.domain.id: d.total_energy_j for d in engine.snapshot.domains}


def test_a_file_with_several_sessions_replays_one(tmp_path):
    """Guards replaying a CSV holding several sessions (appended by @measure(output=...),
    or concatenated files): rows of both were interleaved into one replay with wrong
    energies. The first session is replayed (its joules exactly), --session ID picks
    another, and an unknown ID is a one-line error naming the ones there are."""
    path, second = _two_sessions(tmp_path)
    sensor = ReplaySensor(path)
    assert sensor.session_id == "demo0000001"
    assert sensor.find_sessions() == ["demo0000001", "second00001"]
    assert sensor.sessions == ["demo0000001", "second00001"]
    assert _replayed_joules(path) == pytest.approx(_per_domain_joules(RECORDED), rel=1e-9)
    assert _replayed_joules(path, "second00001") == pytest.approx(
        _per_domain_joules(second), rel=1e-9)
    with pytest.raises(ReplayError, match="no session nope.*demo0000001, second00001"):
        ReplaySensor(path, session="nope")
    session, problem = build(["--replay", str(path), "--session", "nope"], start_engine=False)
    assert session is None and "demo0000001, second00001" in problem


@pytest.mark.asyncio
async def test_the_ui_says_which_session_it_replays(tmp_path):
    """With several sessions in the file, the UI says it replays the first of N and how
    to pick another."""
    path, _ = _two_sessions(tmp_path)
    session, problem = build(["--replay", str(path)], start_engine=False)
    assert problem is None
    app = session.app
    async with app.run_test(size=(100, 30)) as pilot:
        def shown() -> str:
            return " ".join(str(n.message) for n in app._notifications)

        assert await wait_for(pilot, lambda: "2 sessions" in shown())
        assert "demo0000001" in shown() and "--session" in shown()
        await pilot.press("q")
    session.close()


def test_replay_keeps_bridged_energy_and_lost_intervals(tmp_path):
    """Guards the joules of a recording in which a counter was bridged across lost ticks:
    the replay gives the lost ticks back lost and the bridged tick with all its energy
    (not a new base that drops it), so every domain's joules are the file's."""
    from tests.test_report import record

    path = record(tmp_path / "bridged.csv", ticks=10, lost={3, 4, 5}, bridged=True)
    df = pd.read_csv(path)
    assert df["label"].fillna("").str.startswith("bridged").sum() == 1
    clock = FakeClock()
    engine, _ = make_replay(path, clock=clock, cpu_clock=lambda: 0.0)
    engine.open()
    snaps = [engine.tick(clock.advance(1.0)) for _ in range(10)]
    got = {d.domain.id: d.total_energy_j for d in snaps[-1].domains}
    assert got == pytest.approx(_per_domain_joules(df), rel=1e-9)
    assert got["package-0"] == pytest.approx(400.0)
    lost = {(d.domain.id, round(s.elapsed_s, 6)) for s in snaps for d in s.domains
            if d.status is Status.LOST}
    assert lost == _lost_ticks(df)
    assert snaps[6].domain("package-0").bridged_s == pytest.approx(4.0)


@pytest.mark.asyncio
async def test_the_ui_says_which_rows_it_skipped(tmp_path):
    """The reader's warnings (file and line) reach the replay's user as notifications."""
    from tuimeter.tui.run import replay_app as make_replay_app

    path = tmp_path / "bad.csv"
    path.write_text(",".join(RECORDED.columns) + "\n" + BAD_ROWS)
    clock = FakeClock()
    app = make_replay_app(str(path), clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 8)
        shown = " ".join(str(n.message) for n in app._notifications)
        assert f"{path}: line 5: malformed row (energy_j 'nan'" in shown
        assert "2 more malformed rows skipped" in shown
        await pilot.press("q")


def test_a_pipe_replays_once_and_is_not_scanned(tmp_path):
    """`--replay <(zcat s.csv.gz)`: a pipe streams like a file; the sessions scan (which
    would open it a second time and take rows from the replay) leaves it alone."""
    import os
    import threading

    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(DEMO.read_bytes()), daemon=True)
    writer.start()
    engine, snaps, sensor = play(fifo, speed=10.0)
    writer.join(10)
    assert sensor.find_sessions() == ["demo0000001"]
    got = {d.domain.id: d.total_energy_j for d in snaps[-1].domains}
    assert got == pytest.approx(_per_domain_joules(RECORDED), rel=1e-9)


def test_recorded_interval_is_stated_as_set_not_as_measured(tmp_path):
    """A 1 s recording's ticks land microseconds either side of each second (the gaps
    read 0.999983 s, 1.000044 s...): the replay's interval, shown as `every ... s`, is
    1 s. Before, it was one of those gaps, picked by chance."""
    from tuimeter.sensors.replay import stated_interval_s

    jitter = [0.00023, -0.000017, 0.000044, 0.00027, -0.000022, 0.000185]
    lines = [",".join(RECORDED.columns),
             "2026-01-01T00:00:00+00:00,0,0,h,s1,session,,,,,,,,tuimeter schema 1,"]
    last = 0.0
    for t, j in enumerate(jitter * 2, start=1):
        el = t + j
        lines.append(f"2026-01-01T00:00:{t:02d}+00:00,{el},{el - last},h,s1,sample,pkg,rapl,1,"
                     f"10,{10 * (el - last)},,measured,,")
        last = el
    path = tmp_path / "jitter.csv"
    path.write_text("\n".join(lines) + "\n")
    assert ReplaySensor(path).interval_s == 1.0
    assert [stated_interval_s(s) for s in (0.999983, 0.2003, 0.25, 15.02, 0.0)] == [
        1.0, 0.2, 0.25, 15.0, 1.0]
