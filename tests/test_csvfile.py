"""Session CSV: pandas reads it as is, rows per tick, markers as rows, flushed every tick,
a write error keeps what was written before."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.fakes.scripted import FakeClock
from tests.helpers import make_engine
from tuimeter.model import CarbonInfo
from tuimeter.session.csvfile import COLUMNS, SessionWriter
from tuimeter.session.recorder import Recorder

CARBON = CarbonInfo(475.0, 1.0, "default world average", is_default=True)


def record(tmp_path, ticks=5, marker_at=None):
    path = tmp_path / "s.csv"
    wall = FakeClock(1_800_000_000.0)
    eng, clock = make_engine(carbon=CARBON, wallclock=wall, host="node1")
    eng.open()
    rec = Recorder(SessionWriter.create(path, "node1"))
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    for i in range(ticks):
        clock.advance(1.0)
        wall.advance(1.0)
        if marker_at == i:
            eng.add_marker("phase two", source="cli", pid=42)
        eng.tick()
    return path, eng, rec


def test_pandas_reads_it_with_no_options(tmp_path):
    """pd.read_csv(path) gives the documented columns and numeric power/energy."""
    path, _, rec = record(tmp_path)
    rec.close()
    df = pd.read_csv(path)
    assert tuple(df.columns) == COLUMNS
    samples = df[df.kind == "sample"]
    assert set(samples.domain) == {"package-0", "package-0/core", "package-0/dram", "psys"}
    assert len(samples) == 5 * 4
    assert samples.energy_j.dtype.kind == "f"
    totals = df[df.kind == "total"]
    assert len(totals) == 5
    assert totals.energy_j.sum() == pytest.approx(45.0 * 5)
    # the in_total column lets a user sum sample rows without double counting
    assert samples[samples.in_total == 1].energy_j.sum() == pytest.approx(totals.energy_j.sum())
    ts = pd.to_datetime(df.timestamp)
    assert str(ts.dt.tz) == "UTC"
    assert df.timestamp.iloc[1].endswith("+00:00") and "." in df.timestamp.iloc[1]
    assert (df.host == "node1").all()
    assert set(df.provenance.dropna()) == {"measured"}


@pytest.mark.parametrize("raw", [bytes.fromhex("123456789012"), bytes.fromhex("12345e678901"),
                                 bytes.fromhex("000000000000")])
def test_the_session_id_reads_as_text_whatever_the_random_bits(tmp_path, monkeypatch, raw):
    """An id of hex digits only (``123456789012``) or one pandas reads as a float
    (``12345e678901``: infinity) would make the ``session`` column a number and lose the
    id; ids start with a letter, so pandas gives the id back as written."""
    monkeypatch.setattr("tuimeter.session.ids.secrets.token_bytes", lambda n: raw[:n])
    path, _, rec = record(tmp_path, ticks=2)
    rec.close()
    sid = rec.writer.session_id
    assert len(sid) == 12 and sid[1:] == raw.hex()[1:]  # the random bits, bar the first
    df = pd.read_csv(path)
    assert all(isinstance(v, str) for v in df.session) and set(df.session) == {sid}


def test_marker_rows_have_label_time_and_pid(tmp_path):
    """A marker is its own row with its label, its instant and who sent it."""
    path, _, rec = record(tmp_path, marker_at=2)
    rec.close()
    df = pd.read_csv(path)
    m = df[df.kind == "marker"]
    assert list(m.label) == ["phase two"]
    assert m.elapsed_s.iloc[0] == pytest.approx(3.0)  # marked after the third advance
    assert int(m.pid.iloc[0]) == 42


def test_timestamps_are_the_wall_time_at_the_end_of_each_interval(tmp_path):
    """Guards the timestamp's value, not only its format: the session started at wall time
    1.8e9; every row is stamped start + elapsed_s, where a tick's elapsed_s is the end of
    its interval (the first ends 1 s in) and a marker's is its instant."""
    path, _, rec = record(tmp_path, marker_at=2)
    rec.close()
    df = pd.read_csv(path)
    start = pd.Timestamp(1_800_000_000, unit="s", tz="UTC")
    assert (pd.to_datetime(df.timestamp) == start + pd.to_timedelta(df.elapsed_s, unit="s")).all()
    totals = df[df.kind == "total"]
    assert list(totals.elapsed_s) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (totals.interval_s == 1.0).all()
    assert df[df.kind == "session"].timestamp.iloc[0] == "2027-01-15T08:00:00.000000+00:00"
    assert df[df.kind == "marker"].timestamp.iloc[0] == "2027-01-15T08:00:03.000000+00:00"


def test_each_tick_is_on_disk_before_the_next(tmp_path):
    """Flushed every tick: a reader sees every completed tick while the session runs."""
    path, eng, rec = record(tmp_path, ticks=3)
    df = pd.read_csv(path)  # file still open
    assert len(df[df.kind == "total"]) == 3
    rec.close()


def test_write_error_stops_cleanly_and_keeps_earlier_rows(tmp_path):
    """Disk full mid-session: one-line error, earlier ticks intact, no exception to the engine."""
    path, eng, rec = record(tmp_path, ticks=2)

    class Full:
        def write(self, _):
            raise OSError(28, "No space left on device")

        def flush(self):
            pass

        def close(self):
            pass

    real = rec.writer.fh
    rec.writer.fh = Full()
    eng.clock.advance(1.0)
    eng.tick()
    assert rec.failed.is_set()
    assert "No space left on device" in rec.error and "\n" not in rec.error
    real.close()
    df = pd.read_csv(path)
    assert len(df[df.kind == "total"]) == 2


def test_create_refuses_to_replace_a_session(tmp_path):
    """An existing session is never overwritten by accident."""
    p = tmp_path / "x.csv"
    p.write_text("precious\n")
    with pytest.raises(FileExistsError):
        SessionWriter.create(p, "h")
    assert p.read_text() == "precious\n"
    SessionWriter.create(p, "h", overwrite=True).close()
    assert p.read_text().startswith("timestamp,")


class _HalfFull:
    """A file on a disk that fills up: the first ``room`` characters reach it, then ENOSPC
    (as a real write that stops half-way through a row)."""

    def __init__(self, real, room: int):
        self.real, self.room = real, room

    def write(self, data):
        part = data[:self.room]
        self.real.write(part)
        self.real.flush()
        self.room -= len(part)
        if len(part) < len(data):
            raise OSError(28, "No space left on device")

    def flush(self):
        self.real.flush()

    def fileno(self):
        return self.real.fileno()

    def close(self):
        self.real.close()


def test_write_error_mid_row_cuts_the_file_back_to_the_last_whole_tick(tmp_path):
    """Guards the file after disk full: it ends on a whole row at the end of the last
    complete tick (no half row for `report` to call a killed recorder), and the
    recorder's last_written snapshot is that tick, so a summary matches the file."""
    from tuimeter.session.report import load_file

    path, eng, rec = record(tmp_path, ticks=2)
    size = path.stat().st_size
    rec.writer.fh = _HalfFull(rec.writer.fh, room=150)  # a tick's rows are longer
    eng.clock.advance(1.0)
    eng.tick()
    assert rec.failed.is_set()
    assert path.stat().st_size == size and path.read_bytes().endswith(b"\n")
    assert rec.last_written.seq == 2
    df = pd.read_csv(path)
    assert len(df[df.kind == "total"]) == 2
    assert df[df.kind == "total"].energy_j.sum() == pytest.approx(
        rec.last_written.total.total_energy_j)
    assert load_file(str(path)).problems == []


def test_header_write_failure_leaves_no_file(tmp_path, monkeypatch):
    """Guards the early failure: a header that cannot be written leaves no empty or
    partial file behind."""
    from tuimeter.session import csvfile

    path = tmp_path / "h.csv"
    real_fdopen = csvfile._fdopen
    monkeypatch.setattr(csvfile, "_fdopen", lambda *a: _HalfFull(real_fdopen(*a), 20))
    with pytest.raises(OSError, match="No space left"):
        SessionWriter.create(path, "node1")
    assert not path.exists()


def test_a_row_that_cannot_be_written_is_refused_not_the_session(tmp_path):
    """Regression (issue 9 item 2): a marker label with an undecodable byte
    (``'caf\\udce9'``) ended the recording and lost the tick holding the earlier marker.
    Now that one row is refused (an event row says so), the rest of its tick, the earlier
    marker and the ticks after it are written, and the recorder has not failed."""
    path = tmp_path / "s.csv"
    eng, clock = make_engine(carbon=CARBON, host="node1")  # the wall clock stands at T0
    eng.open()
    rec = Recorder(SessionWriter.create(path, "node1"))
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    clock.advance(1.0)
    eng.add_marker("before", source="cli")
    eng.add_marker("caf\udce9", source="socket")  # as if it had passed every entry check
    eng.add_marker("after", source="api")
    eng.tick()
    clock.advance(1.0)
    eng.tick()
    rec.close()
    assert not rec.failed.is_set() and rec.error is None
    assert rec.writer.refused_rows == 1
    df = pd.read_csv(path)
    assert list(df[df.kind == "marker"].label) == ["before", "after"]
    (event,) = df[df.kind == "event"].label
    assert event == "refused: marker row not written (not valid UTF-8): caf\\udce9"
    assert len(df[df.kind == "total"]) == 2


def test_a_process_name_with_undecodable_bytes_does_not_end_the_file(tmp_path):
    """psutil gives such names surrogate-escaped; the row is refused, the tick goes on."""
    import dataclasses

    from tuimeter.model import ProcessShare

    path, eng, rec = record(tmp_path, ticks=1)
    snap = eng.snapshot
    bad = ProcessShare(pid=7, name="\udcffevil", cpu_share=0.5, gpu_share=0.0, power_w=2.0,
                       energy_j=2.0, total_energy_j=2.0)
    good = dataclasses.replace(bad, pid=8, name="good")
    rec(dataclasses.replace(snap, seq=snap.seq + 1, new_markers=(), processes=(bad, good),
                            idle_power_w=1.0))
    rec.close()
    assert not rec.failed.is_set()
    df = pd.read_csv(path)
    assert list(df[df.kind == "process"].label) == ["good", "idle/system", "other processes"]
    assert df[df.kind == "event"].label.str.startswith("refused: process row").sum() == 1
