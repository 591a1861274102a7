"""The session reader: the one place rows are parsed and checked (report and replay both
read through it)."""

from __future__ import annotations

import csv
import io
import itertools

import pytest

from tuimeter.session.csvfile import COLUMNS
from tuimeter.session.reader import (BadRow, SessionReader, find_sessions, parse_row)

HEADER = ",".join(COLUMNS) + "\n"
GOOD = ["2026-01-01T00:00:01.000000+00:00", "1", "1", "h", "s1", "sample", "pkg", "rapl", "1",
        "40", "40", "0.005", "measured", "", ""]
#: text that some cell of a row from elsewhere may hold
NASTY = ["", "1.0", "0.0", "77.0", "nan", "inf", "-inf", "1e400", "-1", "0", "1e12", "1e13", "x", "12", "lost",
         "measured", "2", "\x1b[2J", "2026-01-01T00:00:02+00:00", "1_000", " 5", "٣"]


def _line(cells) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return buf.getvalue()


def test_the_fast_path_keeps_exactly_the_rows_parse_row_accepts(tmp_path):
    """The reader checks common rows inline for speed; parse_row is the definition. Every
    cell of a good sample and a good marker, replaced by each nasty value: the reader
    keeps a row exactly when parse_row accepts it, with the same values."""
    marker = GOOD[:5] + ["marker", "", "cli", "", "", "", "", "", "epoch 2", "77"]
    domain = GOOD[:5] + ["domain", "gpu0", "nvml", "1", "", "", "", "measured",
                         '{"kind": "gpu", "name": "GPU 0"}', ""]
    rows = []
    for base, col, value in itertools.product((GOOD, marker, domain), range(len(COLUMNS)),
                                              NASTY):
        cells = list(base)
        cells[col] = value
        rows.append(cells)
    f = tmp_path / "s.csv"
    f.write_text(HEADER + "".join(_line(r) for r in rows), encoding="utf-8")
    want = []
    for n, cells in enumerate(rows, start=2):
        if cells[5] not in ("sample", "marker", "session", "domain"):
            continue
        try:
            want.append(parse_row(cells, n))
        except BadRow:
            pass
    reader = SessionReader(f)
    got = list(reader)
    assert got == want
    assert 0 < len(got) < len(rows)
    assert reader.bad == len([r for r in rows if r[5] in ("sample", "marker", "session",
                                                            "domain")]) - len(got)


@pytest.mark.parametrize("col, value, why", [
    (10, "nan", "energy_j 'nan' is not a number from 0 to 1e+12"),
    (10, "1e400", "energy_j '1e400' is not a number from 0 to 1e+12"),
    (9, "-3", "power_w '-3' is not a number from 0 to 1e+12"),
    (1, "x", "elapsed_s 'x' is not a number"),
    (0, "\x1b[2Jyesterday", "timestamp '\\x1b[2Jyesterday' is not an ISO 8601 time"),
    (8, "", "in_total '' is not 0 or 1"),
    (12, "lost", "a lost sample with an energy_j"),
    (14, "-1", "pid '-1' is not a process id"),
])
def test_parse_row_names_the_cell_and_escapes_it(col, value, why):
    cells = list(GOOD)
    cells[col] = value
    with pytest.raises(BadRow) as info:
        parse_row(cells)
    assert str(info.value) == why


def test_problems_name_file_and_line_and_count_the_rest(tmp_path):
    lines = [list(GOOD) for _ in range(10)]
    for row in lines[1:9]:
        row[10] = "nan"
    f = tmp_path / "s.csv"
    f.write_text(HEADER + "".join(_line(r) for r in lines))
    reader = SessionReader(f)
    assert len(list(reader)) == 2
    assert reader.problems[0] == (f"{f}: line 3: malformed row (energy_j 'nan' is not a "
                                  f"number from 0 to 1e+12); skipped")
    assert len(reader.problems) == 6 and reader.problems[-1] == f"{f}: 3 more malformed rows skipped"


def test_find_sessions_gives_offsets_to_start_reading_at(tmp_path):
    """find_sessions: each session row's id, byte offset and line; a reader started there
    reads that session with the file's own line numbers."""
    def session(sid, n):
        head = GOOD[:4] + [sid, "session", "", "", "", "", "", "", "", "tuimeter schema 1", ""]
        return [head] + [GOOD[:4] + [sid] + GOOD[5:] for _ in range(n)]
    rows = session("a", 3) + session("b", 2) + session("c", 4)
    f = tmp_path / "s.csv"
    f.write_text(HEADER + "".join(_line(r) for r in rows))
    found = find_sessions(f)
    assert [(sid, line) for sid, _, line in found] == [("a", 1), ("b", 5), ("c", 8)]
    assert find_sessions(f, stop_at="b")[-1][0] == "b"
    sid, offset, before = found[1]
    got = list(SessionReader(f, session="b", start=(offset, before)))
    assert [(r.session, r.kind, r.line) for r in got] == [
        ("b", "session", 6), ("b", "sample", 7), ("b", "sample", 8)]


def _with_a_huge_cell(src, dst, kind: str) -> int:
    """``src`` with, half way through, a copy of its first ``kind`` row whose label is
    200 KiB (over the csv module's 128 KiB field limit); the line number of that row."""
    from pathlib import Path

    lines = Path(src).read_text(encoding="utf-8").splitlines(keepends=True)
    model = next(next(csv.reader([ln])) for ln in lines if f",{kind}," in ln)
    model[13] = "x" * (200 << 10)
    at = len(lines) // 2
    Path(dst).write_text("".join(lines[:at]) + _line(model) + "".join(lines[at:]),
                         encoding="utf-8")
    return at + 1


@pytest.mark.parametrize("kind", ["marker", "total"])
def test_a_cell_over_128_kib_skips_its_row_not_the_rest_of_the_file(tmp_path, kind):
    """Issue 22: one cell over the csv field limit made `report` and `--replay` skip the
    rest of the file (its energy gone). Now that row alone is skipped, named by line:
    the report is the one of the file without it, and the replay plays to the end."""
    import json
    import subprocess
    import sys

    from tests.fakes.scripted import FakeClock
    from tests.helpers import ROOT, tuimeter
    from tests.test_schema import DEMO_2
    from tuimeter.replay_engine import make_replay

    bad = tmp_path / "huge.csv"
    line = _with_a_huge_cell(DEMO_2, bad, kind)
    reports = []
    for path in (DEMO_2, bad):
        res = subprocess.run(tuimeter("report", "--format", "json", str(path)), cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        hosts = json.loads(res.stdout)["hosts"]
        for h in hosts:
            h.pop("files")
        reports.append((hosts, res.stderr))
    assert reports[1][0] == reports[0][0]
    assert f"line {line}: malformed row (a cell over 128 KiB); skipped" in reports[1][1]
    assert "the rest of the file is skipped" not in reports[1][1]
    totals = []
    for path in (DEMO_2, bad):
        clock = FakeClock()
        engine, _ = make_replay(str(path), clock=clock, cpu_clock=lambda: 0.0)
        engine.open()
        for _ in range(200):
            clock.advance(1.0)
            snap = engine.tick()
        totals.append(snap.total.total_energy_j)
        engine.close()
    assert totals[1] == pytest.approx(totals[0]) and totals[0] > 0
