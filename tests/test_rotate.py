"""Rotating session files (``record --rotate SIZE|daily``): every part is a whole session
file (pandas reads it, its first row is the session row), the names follow in time order and
never replace a file, and ``report`` over all the parts gives, domain by domain, exactly what
it gives for the one unrotated file written from the same ticks, which is the scripted truth.
Then a real ``tuimeter record --rotate`` over a live fake powercap tree."""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import subprocess
import sys

import pytest

from tests.fakes.scripted import FakeClock, rapl_like
from tests.helpers import make_engine, wait_for
from tests.servers import ROOT, LivePowercap, record_alive, start_record, stop_record
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.recorder import Recorder
from tuimeter.session.report import build_report, load_file
from tuimeter.session.rotate import RotatePolicy, RotatingWriter, parse_rotate

MIDNIGHT = _dt.datetime(2026, 12, 1, tzinfo=_dt.timezone.utc).timestamp()


@pytest.mark.parametrize("text,policy", [
    ("100M", RotatePolicy(max_bytes=100 << 20)), ("1G", RotatePolicy(max_bytes=1 << 30)),
    ("500k", RotatePolicy(max_bytes=500 << 10)), ("4096", RotatePolicy(max_bytes=4096)),
    ("2MiB", RotatePolicy(max_bytes=2 << 20)), ("daily", RotatePolicy(daily=True)),
    ("DAILY", RotatePolicy(daily=True)),
])
def test_parse_rotate(text, policy):
    assert parse_rotate(text) == policy


@pytest.mark.parametrize("text", ["", "0", "-1M", "1.5G", "100X", "hourly", "M"])
def test_parse_rotate_refuses(text):
    with pytest.raises(ValueError):
        parse_rotate(text)


def _record(tmp_path, policy: RotatePolicy, wall_start: float, ticks: int, seed: int = 1):
    """Drive an engine on fake clocks (the wall clock drifting from the monotonic one, as
    NTP makes it) into one unrotated file and a rotating one; returns (the unrotated path,
    the rotating writer, the truth in J per domain)."""
    rng = random.Random(seed)
    wall = FakeClock(wall_start)
    sensor = rapl_like()
    eng, clock = make_engine([sensor], wallclock=wall, host="n1")
    eng.open()
    start_j = dict(sensor.energy_j)
    plain = Recorder(SessionWriter.create(tmp_path / "plain.csv", "n1"))
    rot = RotatingWriter(tmp_path / "run.csv", "n1", policy, now=wall)
    rotating = Recorder(rot)
    for r in (plain, rotating):
        r.start(eng.snapshot)
    for i in range(ticks):
        dt = rng.uniform(0.3, 1.7)
        clock.advance(dt)
        wall.advance(dt * 1.0003 + (0.25 if i == ticks // 2 else 0.0))  # drift, and a step
        sensor.set_power("package-0", rng.uniform(5.0, 90.0), clock())
        if i == 7:
            eng.add_marker("phase 2")
        snap = eng.tick()
        for r in (plain, rotating):
            r(snap)
    for r in (plain, rotating):
        r.close()
    truth = {d: sensor.energy_j[d] - start_j[d] for d in start_j}
    assert not plain.error and not rotating.error
    return tmp_path / "plain.csv", rot, truth


def _per_domain(paths) -> dict:
    rep = build_report([load_file(str(p)) for p in paths])
    assert not rep.problems, rep.problems
    (host,) = rep.hosts
    return rep, {d: v.energy_j for d, v in host.domains.items()}


def test_size_rotation_parts_are_sessions_and_report_equals_one_file(tmp_path):
    pd = pytest.importorskip("pandas")
    plain, rot, truth = _record(tmp_path, RotatePolicy(max_bytes=1500), MIDNIGHT - 5000, 60)
    assert len(rot.paths) >= 5
    assert [p.rsplit("/", 1)[1] for p in rot.paths] == \
        ["run.csv"] + [f"run.{i}.csv" for i in range(1, len(rot.paths))]
    plain_rows = pd.read_csv(plain)
    n_samples = 0
    for i, path in enumerate(rot.paths):
        df = pd.read_csv(path)
        first = df.iloc[0]
        assert first["kind"] == "session"
        assert first["session"] == pd.read_csv(rot.paths[0]).iloc[0]["session"]
        assert first["timestamp"] == pd.read_csv(rot.paths[0]).iloc[0]["timestamp"]
        assert f"part {i + 1}" in first["label"]
        assert (df["kind"] == "sample").any()  # each part holds whole ticks
        assert list(df["kind"][:2]) == ["session", "settings"]  # each part stands alone:
        assert set(df[df.kind == "domain"].domain) == set(df[df.kind == "sample"].domain)
        assert df["session"].nunique() == 1
        n_samples += int((df["kind"] == "sample").sum())
    assert n_samples == int((plain_rows["kind"] == "sample").sum())  # no tick twice or lost
    shuffled = list(reversed(rot.paths))  # the order given does not matter
    rep_parts, parts = _per_domain(shuffled)
    rep_plain, one = _per_domain([plain])
    assert parts == one  # exactly: the same samples, joined end to end
    for d, j in truth.items():
        assert parts[d] == pytest.approx(j, rel=1e-7, abs=1e-4)
    assert rep_parts.hosts[0].sessions == 1
    assert [(s.label, s.energy_j) for s in rep_parts.hosts[0].segments] == \
        [(s.label, s.energy_j) for s in rep_plain.hosts[0].segments]


def test_daily_rotation_at_utc_midnight(tmp_path):
    """Ticks that end on 1 December go to run-2026-12-01.csv, the rest to the
    30 November file; the report over both is the one file's."""
    plain, rot, truth = _record(tmp_path, RotatePolicy(daily=True), MIDNIGHT - 20, 40)
    assert [p.rsplit("/", 1)[1] for p in rot.paths] == \
        ["run-2026-11-30.csv", "run-2026-12-01.csv"]
    for path, day in zip(rot.paths, ("2026-11-30", "2026-12-01")):
        with open(path) as fh:
            rows = [ln.split(",") for ln in fh.read().splitlines()[1:]]
        days = {r[0][:10] for r in rows if r[5] == "sample"}
        assert days == {day}
    assert _per_domain(rot.paths)[1] == _per_domain([plain])[1]


def test_parts_never_replace_a_file(tmp_path):
    """run.csv and run.1.csv exist (an earlier run): the parts go to run.2.csv, run.3.csv."""
    for name in ("run.csv", "run.1.csv"):
        (tmp_path / name).write_text("precious\n")
    _, rot, _ = _record(tmp_path, RotatePolicy(max_bytes=1500), MIDNIGHT - 5000, 12)
    assert rot.paths[0].endswith("run.2.csv") and rot.paths[1].endswith("run.3.csv")
    for name in ("run.csv", "run.1.csv"):
        assert (tmp_path / name).read_text() == "precious\n"


# -- tuimeter record -----------------------------------------------------------------------
def test_record_rotates_and_report_over_the_parts_matches_the_rows(tmp_path):
    """A real ``record -o run.csv --rotate 3K``: several parts, each read by pandas, and
    ``report --format json`` over them equals, per domain, the sum of their sample rows."""
    pd = pytest.importorskip("pandas")
    out = tmp_path / "out"
    out.mkdir()
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, out / "run.csv", "--rotate", "3K", interval_s=0.1)
        try:
            wait_for(lambda: (record_alive(proc) or True) and (out / "run.3.csv").exists(),
                     60, "four parts")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    parts = sorted(out.iterdir())
    assert "files)" in err.splitlines()[-1]
    frames = [pd.read_csv(p) for p in parts]
    rows = pd.concat(frames)
    assert rows["session"].nunique() == 1
    samples = rows[rows["kind"] == "sample"]
    assert samples.groupby("elapsed_s")["domain"].count().max() == 4  # no tick twice
    truth = samples.groupby("domain")["energy_j"].sum()
    res = subprocess.run([sys.executable, "-m", "tuimeter.cli", "report", "--format", "json",
                          *map(str, parts)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    (host,) = json.loads(res.stdout)["hosts"]
    assert host["sessions"] == 1
    for dom, j in truth.items():
        assert host["domains"][dom]["energy_j"] == pytest.approx(j, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("args,words", [
    (["--rotate", "1M"], "--rotate needs -o FILE"),
    (["-o", "x.csv", "--rotate", "1M", "--overwrite"], "never replaces"),
    (["-o", "x.csv", "--rotate", "soon"], "--rotate"),
])
def test_rotate_usage_errors(tmp_path, args, words):
    res = subprocess.run([sys.executable, "-m", "tuimeter.cli", "record", *args],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and words in res.stderr and len(res.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_part_that_cannot_be_created_ends_the_recording_cleanly(tmp_path):
    """The next part cannot be created (disk full, permissions): the recorder fails with
    one line naming the file that holds the session so far, and that file is complete."""
    made = []

    def create(path, host, **kw):
        if made:
            raise PermissionError(13, "Permission denied", path)
        made.append(path)
        return SessionWriter.create(path, host, **kw)

    wall = FakeClock(MIDNIGHT - 5000)
    eng, clock = make_engine(wallclock=wall, host="n1")
    eng.open()
    rec = Recorder(RotatingWriter(tmp_path / "run.csv", "n1", RotatePolicy(max_bytes=1), now=wall,
                                  create=create))
    rec.start(eng.snapshot)
    for _ in range(3):
        clock.advance(1.0)
        wall.advance(1.0)
        rec(eng.tick())
    rec.close()
    assert rec.failed.is_set() and rec.path == str(tmp_path / "run.csv")
    assert rec.error == f"cannot start the next file after {tmp_path / 'run.csv'}: " \
                        "Permission denied"
    assert rec.last_written.seq == 1
    (res,) = [load_file(str(tmp_path / "run.csv"))]
    assert not res.problems and not res.error
    assert os.listdir(tmp_path) == ["run.csv"]


def test_a_link_at_the_next_parts_name_is_skipped_and_the_recording_goes_on(tmp_path):
    """Issue 22 item 4: anyone who can write the output folder plants symbolic links at the
    next parts' names (one dangling, one to a file they want overwritten, one folder): a
    real ``record --rotate`` skips each name as taken, never follows, replaces or deletes
    what is there, and keeps recording into the next free names."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0::/root:/bin/sh\n")
    (out / "run.1.csv").symlink_to(tmp_path / "nowhere.csv")  # dangling
    (out / "run.2.csv").symlink_to(victim)
    (out / "run.3.csv").mkdir()
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, out / "run.csv", "--rotate", "3K", interval_s=0.1)
        try:
            wait_for(lambda: (record_alive(proc) or True) and (out / "run.5.csv").exists(),
                     60, "two parts past the planted names")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    assert os.readlink(out / "run.1.csv") == str(tmp_path / "nowhere.csv")
    assert not (tmp_path / "nowhere.csv").exists()
    assert os.readlink(out / "run.2.csv") == str(victim)
    assert victim.read_text() == "root:x:0:0::/root:/bin/sh\n"
    assert (out / "run.3.csv").is_dir() and not list((out / "run.3.csv").iterdir())
    for name in ("run.csv", "run.4.csv", "run.5.csv"):
        first = (out / name).read_text().splitlines()[1]
        assert ",session," in first  # each part is a whole session file
