"""The columnar reader (pyarrow, the ``fast`` extra) gives what the Python reader gives:
the same rows, problems and counts, the same report to the joule in every format and
``--by``, the same DataFrame; and where it cannot judge a file alike, the Python reader
reads it (from the start, or from the block where it took over)."""

from __future__ import annotations

import contextlib
import csv
import io
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from tests.test_report import record  # noqa: E402  (sessions from the real engine)
from tuimeter.session import fastread  # noqa: E402
from tuimeter.session.reader import READ_KINDS  # noqa: E402
from tuimeter.session.reader import SessionReader  # noqa: E402
from tuimeter.session.report_cli import FORMATS, cmd_report  # noqa: E402
from tuimeter.session.schema import COLUMNS, ROW_KINDS  # noqa: E402

SESSIONS = Path(__file__).parent / "data" / "sessions"
COMMITTED = sorted(SESSIONS.glob("*.csv"))


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 4 KiB: dozens per file, so runs, cuts and block edges are exercised; the
    columnar path for files of any size."""
    monkeypatch.setattr(fastread, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(fastread, "MIN_BYTES", 0)


def _report(monkeypatch, reader: str, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("TUIMETER_READER", reader)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cmd_report(list(argv))
    return code, out.getvalue(), err.getvalue()


def _read(monkeypatch, reader: str, path, kinds=ROW_KINDS) -> tuple:
    monkeypatch.setenv("TUIMETER_READER", reader)
    rd = SessionReader(path, kinds=kinds)
    rows = list(rd)
    return rd.engine, rows, rd.problems, rd.rows, rd.bad


def _same_rows(monkeypatch, path, engine="pyarrow", kinds=ROW_KINDS):
    fast_engine, *fast = _read(monkeypatch, "fast", path, kinds)
    _, *slow = _read(monkeypatch, "python", path, kinds)
    assert fast_engine == engine
    assert fast == slow
    return fast


def _mixed_session(tmp_path) -> Path:
    """Two hosts' recordings from the real engine in one file (lost ticks, a bridged
    counter, markers inside ticks and on tick edges), with attribution rows as a
    recording with processes has, a live carbon figure changing mid-file, and bad rows
    of several kinds."""
    a = record(tmp_path / "a.csv", host="a", ticks=120, lost=(7, 8, 40),
               marks={0: "warm", 30.5: "train", 60: "eval", 90.25: ("end", "api")})
    b = record(tmp_path / "b.csv", host="b", start=20.0, ticks=60, lost=(10, 11, 12),
               bridged=True, marks={5: "x", 33.5: "y"})
    with open(a, newline="") as fa, open(b, newline="") as fb:
        ra, rb = list(csv.reader(fa)), list(csv.reader(fb))
    rows = [ra[0]]
    body_a, body_b = ra[1:], rb[1:]
    for i in range(max(len(body_a), len(body_b))):  # the two sessions interleaved
        for body in (body_a, body_b):
            if i < len(body):
                row = body[i]
                rows.append(row)
                if row[5] == "sample" and row[6] == "package-0" and row[12] == "measured":
                    p = list(row)
                    p[5:8] = ["process", "all", "attribution"]
                    p[8] = ""
                    p[12], p[13], p[14] = "attributed", "python3", "4242"
                    rows.append(p)
    out = []
    last_sample = rows[1]
    for n, row in enumerate(rows):
        out.append(row)
        if n == 700:  # a live source's figure from here on (schema 3)
            out.append([row[0], row[1], "0", row[3], row[4], "carbon", "", "table", "", "",
                        "", "", "", '{"g_per_kwh": 120.0, "pue": 1.0, "source": "x", '
                        '"provider": "table"}', ""])
        if row[5] == "sample":
            last_sample = row
        if n in (500, 600):  # a date that does not exist; another form of ISO 8601 (good)
            odd = list(last_sample)
            odd[0] = "2026-02-30T00:00:01.000000+00:00" if n == 500 else odd[0][:19] + "Z"
            out.append(odd)
        if n in (300, 301, 302, 900):  # bad: a provenance, a timestamp, a domain
            bad = list(row)
            if bad[5] == "sample":
                bad[12 if n != 301 else 0] = "guessed" if n != 301 else "yesterday"
                if n == 302:
                    bad[12], bad[6] = "measured", ""
                out.append(bad)
    path = tmp_path / "mixed.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(out)
    return path


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_sessions_report_the_same_in_every_format(monkeypatch, path):
    """`tuimeter report` over each committed session prints the same text, byte for byte,
    through pyarrow and through Python, in every format and with every --by."""
    for fmt in FORMATS:
        fast = _report(monkeypatch, "fast", str(path), "--format", fmt)
        assert fast == _report(monkeypatch, "python", str(path), "--format", fmt)
        assert fast[0] == 0 and fast[1]
    for by in ("process", "job", "rank", "cgroup"):
        for fmt in ("json", "csv"):
            argv = (str(path), "--format", fmt, "--by", by)
            assert _report(monkeypatch, "fast", *argv) == _report(monkeypatch, "python", *argv)
    _same_rows(monkeypatch, path)


def test_mixed_session_rows_problems_and_report_are_the_same(monkeypatch, tmp_path):
    """A file with lost and bridged samples, markers inside ticks, attribution rows, a
    carbon row mid-file, two interleaved hosts and bad rows: the same rows, the same
    problem lines (file and line), the same counts and the same reports."""
    path = _mixed_session(tmp_path)
    rows, problems, n_rows, n_bad = _same_rows(monkeypatch, path)
    assert n_bad >= 2 and len(problems) == n_bad and " line " in problems[0]
    assert any(r.label.startswith("bridged") for r in rows)
    assert any(r.kind == "sample" and r.energy_j is None for r in rows)
    _same_rows(monkeypatch, path, kinds=READ_KINDS)
    for argv in [("--format", f) for f in FORMATS] + [("--format", "json", "--by", "process")]:
        fast = _report(monkeypatch, "fast", str(path), *argv)
        assert fast == _report(monkeypatch, "python", str(path), *argv)
        assert fast[0] == 0 and "4 more" not in fast[2] and "guessed" in fast[2]


def test_several_files_merged_the_same(monkeypatch, tmp_path):
    """Overlapping files of one host and a rotated copy merge the same way."""
    path = _mixed_session(tmp_path)
    copy = tmp_path / "copy.csv"
    shutil.copy(path, copy)
    a = tmp_path / "a.csv"
    argv = (str(path), str(copy), str(a), "--format", "json")
    assert _report(monkeypatch, "fast", *argv) == _report(monkeypatch, "python", *argv)


def _damaged(tmp_path, how: str) -> Path:
    """The mixed session with one damage, late in the file (after many blocks)."""
    src = _mixed_session(tmp_path)
    lines = src.read_bytes().split(b"\n")
    at = len(lines) * 3 // 4
    line = lines[at]
    if how == "nan":
        cells = next(csv.reader([line.decode()]))
        cells[10] = "nan"
        lines[at] = ",".join(cells).encode()
    elif how == "nul":
        lines[at] = line[:10] + b"\0" + line[10:]
    elif how == "cr":
        lines[at] = line + b"\r"
    elif how == "blank":
        lines.insert(at, b"")
    elif how == "short":
        lines[at] = line.rsplit(b",", 3)[0]
    elif how == "not utf-8":
        lines[at] = line.replace(b"h,", b"\xff\xfe,", 1)
    elif how == "truncated":
        lines = lines[:-1]
        lines[-1] = lines[-1][:30]
        path = tmp_path / "damaged.csv"
        path.write_bytes(b"\n".join(lines))
        return path
    path = tmp_path / "damaged.csv"
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.mark.parametrize("how", ["nan", "nul", "cr", "blank", "short", "not utf-8",
                                 "truncated"])
def test_damage_the_columnar_reader_cannot_judge_goes_to_the_python_reader(
        monkeypatch, tmp_path, how):
    """A late nan, NUL byte, carriage return, blank line, short row, bytes not UTF-8 or a
    truncated last line: the Python reader takes over from the block where it begins,
    and rows, problems, counts and the report are what the Python reader alone gives."""
    path = _damaged(tmp_path, how)
    engine = "python" if how in ("nul", "cr", "blank") else None
    fast_engine, *fast = _read(monkeypatch, "fast", path)
    _, *slow = _read(monkeypatch, "python", path)
    assert fast == slow
    if engine:
        assert fast_engine == engine
    for fmt in ("table", "json"):
        argv = (str(path), "--format", fmt)
        assert _report(monkeypatch, "fast", *argv) == _report(monkeypatch, "python", *argv)


def test_read_session_frames_are_the_same(monkeypatch, tmp_path):
    """tuimeter.read_session gives the same DataFrame (long and wide) either way."""
    pd = pytest.importorskip("pandas")
    import tuimeter

    path = _mixed_session(tmp_path)
    frames = {}
    for reader in ("fast", "python"):
        monkeypatch.setenv("TUIMETER_READER", reader)
        with pytest.warns(RuntimeWarning, match="malformed row"):
            frames[reader] = (tuimeter.read_session(path), tuimeter.read_session(path, wide=True))
    for fast, slow in zip(frames["fast"], frames["python"]):
        pd.testing.assert_frame_equal(fast, slow)


def test_the_replay_reads_a_row_at_a_time(tmp_path):
    """The replay's reader does not read ahead in blocks (it streams at its own pace)."""
    from tuimeter.sensors.replay import ReplaySensor  # noqa: F401  (its reader)

    path = record(tmp_path / "r.csv", ticks=5)
    rd = SessionReader(path, columnar=False)
    assert list(rd) and rd.engine == "python"


def test_header_only_and_foreign_files_are_judged_as_before(monkeypatch, tmp_path):
    """An empty session, a file that is not a session: the same outcome either way."""
    empty = tmp_path / "empty.csv"
    empty.write_text(",".join(COLUMNS) + "\n")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    for path in (empty, other):
        assert _report(monkeypatch, "fast", str(path)) == _report(monkeypatch, "python",
                                                                   str(path))


def test_a_small_file_is_read_by_the_python_reader(monkeypatch, tmp_path):
    """Below MIN_BYTES the Python reader reads (pyarrow's start would cost more than it
    saves); at or above it, pyarrow does."""
    path = record(tmp_path / "s.csv", ticks=5)
    monkeypatch.setattr(fastread, "MIN_BYTES", Path(path).stat().st_size + 1)
    assert _read(monkeypatch, "fast", path)[0] == "python"
    monkeypatch.setattr(fastread, "MIN_BYTES", Path(path).stat().st_size)
    assert _read(monkeypatch, "fast", path)[0] == "pyarrow"


def test_codecarbon_reads_device_rows_in_the_one_pass_the_same_either_way(monkeypatch,
                                                                          tmp_path):
    """--format codecarbon over a session with device rows (the machine's CPU load, the
    GPUs' busy %) and two bad ones: the same CSV and the same warnings through pyarrow
    and through Python, every figure read in the report's own pass (no second reader)."""
    pytest.importorskip("pandas")
    from tests.test_codecarbon_load import record as record_loads
    from tuimeter.session import codecarbon

    path = tmp_path / "loads.csv"
    record_loads(path, monkeypatch)
    lines = path.read_text().splitlines(keepends=True)
    gpu = next(i for i, ln in enumerate(lines) if ",device,gpu0," in ln)
    lines[gpu] = lines[gpu].replace('"{""util_pct"":', '"{""util_pct"":150', 1)
    cpu = next(i for i, ln in enumerate(lines) if ",device,total," in ln)
    lines.insert(cpu + 1, lines[cpu].rsplit('"{', 1)[0] + "not json,\n")
    path.write_text("".join(lines))
    monkeypatch.setattr(codecarbon, "SessionReader", None)  # a second pass would fail
    fast = _report(monkeypatch, "fast", str(path), "--format", "codecarbon")
    assert fast == _report(monkeypatch, "python", str(path), "--format", "codecarbon")
    rows = list(csv.DictReader(io.StringIO(fast[1])))
    assert fast[0] == 0 and len(rows) == 2
    assert all(r["gpu_utilization_percent"] and r["cpu_utilization_percent"] for r in rows)
    assert rows[0]["pue"] == "1.0"  # the session row's, kept by the same pass
    assert fast[2].count("device label") == 2, fast[2]
