"""`tuimeter report` keeps a long series a block at a time out of memory
(``tuimeter/session/spill.py``): the report is the same, byte for byte, in every format and
``--by``, through either reader, as with every sample in memory; what stays in memory is
bounded however long the session; without a temporary file everything stays in memory.

Blocks of 16 samples here (``phases.SUM_BLOCK``), looked for every 40 rows, so sessions of a
few hundred ticks from the real engine are kept in dozens of blocks and every segment edge
falls inside one."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_report import record
from tuimeter import phases
from tuimeter.session import fastread, report, spill
from tuimeter.session.report_cli import FORMATS, cmd_report

SESSIONS = Path(__file__).parent / "data" / "sessions"
COMMITTED = sorted(SESSIONS.glob("*.csv"))
READERS = ["python"] + (["fast"] if fastread.available() else [])


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(phases, "SUM_BLOCK", 16)
    monkeypatch.setattr(report, "SPILL_EVERY", 40)
    monkeypatch.setattr(fastread, "BLOCK_BYTES", 32768)
    monkeypatch.setattr(fastread, "MIN_BYTES", 0)


@pytest.fixture
def writes(monkeypatch) -> list:
    """The bytes of each block written to a spill file."""
    seen: list = []
    write = spill.SpillFile.write

    def counted(self, data):
        seen.append(len(data))
        return write(self, data)

    monkeypatch.setattr(spill.SpillFile, "write", counted)
    return seen


def _report(monkeypatch, reader: str, *argv: str, in_memory: bool = False) -> tuple:
    with monkeypatch.context() as m:
        m.setenv("TUIMETER_READER", reader)
        if in_memory:
            m.setattr(spill.Spiller, "sweep", lambda self, series: None)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cmd_report(list(argv))
    return code, out.getvalue(), err.getvalue()


def _long(tmp_path) -> list[Path]:
    """Two hosts, markers inside ticks and on tick edges, an API end marker, lost and
    bridged ticks, a second session of host a overlapping the first (clipped), and a copy
    of the first file (the same session twice: its samples count once)."""
    a = record(tmp_path / "a.csv", host="a", ticks=300, lost=(7, 8, 140),
               marks={0: "warm", 30.5: "train", 61: "train", 150: "eval",
                      200.25: ("end", "api"), 250: "tail"})
    a2 = record(tmp_path / "a2.csv", host="a", start=100.5, ticks=150, marks={40.5: "later"})
    b = record(tmp_path / "b.csv", host="b", start=20.0, ticks=200, lost=(10, 11, 12),
               bridged=True, marks={5: "x", 33.5: "y", 120: "z"})
    copy = tmp_path / "a-copy.csv"
    copy.write_bytes(Path(a).read_bytes())
    return [Path(a), Path(a2), Path(b), copy]


@pytest.mark.parametrize("reader", READERS)
def test_a_long_report_is_the_same_kept_in_blocks(monkeypatch, tmp_path, writes, reader):
    """Every format, --by and --plot over long sessions (several files, two hosts,
    overlaps, lost and bridged ticks, markers inside ticks): the same text as with every
    sample in memory, and blocks were written."""
    files = [str(p) for p in _long(tmp_path)]
    argvs = [("--format", f) for f in FORMATS] + [
        ("--format", "json", "--by", "process"), ("--format", "csv", "--by", "job"),
        ("--format", "table", "--plot")]
    for argv in argvs:
        for paths in (files, files[:1], files[2:3]):
            del writes[:]
            kept = _report(monkeypatch, reader, *paths, *argv)
            assert writes, (paths, argv)
            assert kept == _report(monkeypatch, reader, *paths, *argv, in_memory=True)
            assert kept[0] == 0 and kept[1]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_sessions_are_the_same_kept_in_blocks(monkeypatch, path, writes):
    """The committed sessions (a job's attribution rows, schema 2): the same report in
    every format and --by kept in blocks as in memory, through either reader."""
    for reader in READERS:
        for argv in [("--format", f) for f in FORMATS] + [
                ("--format", "json", "--by", by) for by in ("process", "job", "rank")]:
            kept = _report(monkeypatch, reader, str(path), *argv)
            assert kept == _report(monkeypatch, reader, str(path), *argv, in_memory=True)
    assert writes


@pytest.mark.parametrize("reader", READERS)
def test_memory_of_a_series_does_not_grow_with_the_session(monkeypatch, tmp_path, reader):
    """However many ticks a session has, each series keeps at most a block, the rows
    read between two looks and one more in memory; the rest is in the file."""
    monkeypatch.setenv("TUIMETER_READER", reader)
    path = record(tmp_path / "long.csv", ticks=1500, marks={700: "half"})
    res = report.load_file(str(path))
    series = [s for sess in res.sessions for s in sess.series.values()]
    assert series and all(len(s.t1) >= 1500 for s in series)
    bound = phases.SUM_BLOCK + report.SPILL_EVERY + 1
    for s in series:
        for arr in (s.t1, s.iv, s.e):
            assert isinstance(arr, spill.Blocks)
            assert len(arr) == len(s.t1) and len(arr._hot) <= bound


def test_without_a_temporary_file_everything_stays_in_memory(monkeypatch, tmp_path):
    """No temporary file can be made (a read-only or full /tmp): the same report, from
    memory."""
    files = [str(p) for p in _long(tmp_path)]
    expected = _report(monkeypatch, "python", *files, "--format", "json", in_memory=True)

    def no_file(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill.tempfile, "TemporaryFile", no_file)
    assert _report(monkeypatch, "python", *files, "--format", "json") == expected


def test_blocks_index_slice_bisect_and_sum_as_an_array(tmp_path):
    """Blocks answer as the array they replace: items, slices, bisect_right from any lo,
    and phases.range_sum over any range (every block edge)."""
    import bisect
    from array import array

    values = array("d", [i * 0.5 + (i % 3) * 0.1 for i in range(100)])
    kept = spill.Blocks(array("d", values), spill.SpillFile())
    kept.spill(keep=5)
    assert kept.cold == 80 and list(kept) == list(values) and len(kept) == 100
    for i in (0, 15, 16, 17, 79, 80, 99, -1, -100):
        assert kept[i] == values[i]
    for a, b in ((0, 100), (3, 40), (15, 17), (79, 81), (80, 99), (50, 20)):
        assert kept[a:b] == values[a:b]
        assert phases.range_sum(kept, a, b) == phases.range_sum(values, a, b)
    for x in (-1.0, 0.0, 7.6, 7.5, 39.7, 40.0, 49.7, 100.0):
        for lo in (0, 10, 90):
            assert kept.bisect_right(x, lo) == bisect.bisect_right(values, x, lo)
    kept[-1] = 1e9
    assert kept[99] == 1e9
    with pytest.raises(IndexError):
        kept[0] = 1.0


def test_a_report_does_not_import_pandas_and_read_session_still_does(tmp_path):
    """The report through pyarrow, in a fresh process, never imports pandas (40 MB);
    tuimeter.read_session afterwards in the same process still gets its DataFrame."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    path = record(tmp_path / "s.csv", ticks=30, marks={10: "x"})
    code = f"""
import io, contextlib, sys
from tuimeter.session import fastread
fastread.MIN_BYTES = 0
from tuimeter.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["report", {str(path)!r}, "--format", "json"]) == 0
assert "pyarrow" in sys.modules and "pandas" not in sys.modules, "pandas imported"
import tuimeter
frame = tuimeter.read_session({str(path)!r})
assert "pandas" in sys.modules and len(frame) > 30
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_rotated_parts_join_in_blocks_and_equal_one_file(monkeypatch, tmp_path):
    """`record --rotate` parts of one long session: joined end to end still in blocks
    (written as they are read, no copy in memory), and the report over the parts is
    the report over the one unrotated file, exactly, as in memory."""
    from tests.test_rotate import MIDNIGHT, _record as record_rotating
    from tuimeter.session.rotate import RotatePolicy

    plain, rot, _ = record_rotating(tmp_path, RotatePolicy(max_bytes=40_000),
                                    MIDNIGHT - 5000, 400)
    assert len(rot.paths) >= 3
    made: list = []
    joined = spill.joined

    def seen(a, b, store):
        out = joined(a, b, store)
        made.append((isinstance(a, spill.Blocks) or isinstance(b, spill.Blocks), out))
        return out

    monkeypatch.setattr(spill, "joined", seen)
    parts = _report(monkeypatch, "python", *rot.paths, "--format", "json")
    assert made and all(isinstance(out, spill.Blocks) for kept, out in made if kept)
    assert any(kept for kept, _ in made)
    assert parts == _report(monkeypatch, "python", *rot.paths, "--format", "json",
                            in_memory=True)
    one = json.loads(_report(monkeypatch, "python", str(plain), "--format", "json")[1])
    got = json.loads(parts[1])
    assert got["total"]["energy_j"] == one["total"]["energy_j"]
    assert [s["energy_j"] for s in got["segments"]] == [s["energy_j"] for s in one["segments"]]


def test_whole_blocks_are_added_without_reading_them_back(monkeypatch):
    """A sum over whole blocks in the file takes their kept sums: no block is read."""
    from array import array

    kept = spill.Blocks(array("d", [float(i) for i in range(100)]), spill.SpillFile(), True)
    kept.spill(keep=1)
    reads: list = []
    read = spill.SpillFile.read
    monkeypatch.setattr(spill.SpillFile, "read",
                        lambda self, offset, n: reads.append(n) or read(self, offset, n))
    assert kept.range_sum(16, 96) == sum(range(16, 96)) and not reads
    assert kept.range_sum(17, 96) == sum(range(17, 96)) and len(reads) == 1
