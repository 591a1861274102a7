"""`tuimeter report`: segments, formats, merging files and hosts, bad input, --plot.

Session files are made by the real Engine and SessionWriter on fake clocks, so every
expected joule is known exactly."""

from __future__ import annotations

import json

import pytest

from tests.fakes.scripted import FakeClock, rapl_like
from tuimeter.engine.sampler import Engine
from tuimeter.model import CarbonInfo
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.recorder import Recorder
from tuimeter.session.report import build_report, load_file
from tuimeter.session.report_cli import cmd_report, to_json

CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test")
T0 = 1_800_000_000.0


def record(path, host="h", start=0.0, ticks=10, interval=1.0, marks=(), power=None, lost=(),
           bridged=False):
    """Record ``ticks`` ticks from wall time T0+start; ``marks``: {tick index: label, or
    (label, source)}, where an index such as 1.5 is a marker half-way through the second
    tick; ``lost``: tick indices at which package-0 cannot be read; ``bridged``: its
    counter runs on meanwhile and bridges the lost ticks when it reads again.

    rapl_like: package-0 40 W + dram 5 W counted (45 W); core 25 W and psys 60 W not.
    """
    clock = FakeClock(1000.0 + start)  # not 0.0: the engine treats a 0.0 tick time as unset
    sensor = rapl_like(power)
    if bridged:
        sensor.bridging.add("package-0")
    eng = Engine([sensor], CARBON, interval, clock=clock,
                 wallclock=lambda: T0 + clock.t, cpu_clock=lambda: 0.0, host=host)
    rec = Recorder(SessionWriter.create(path, host))
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    marks = dict(marks)

    def mark(at):
        label, source = marks[at] if isinstance(marks[at], tuple) else (marks[at], "cli")
        eng.add_marker(label, source)

    for i in range(ticks):
        if i in marks:
            mark(i)
        sensor.lost = {"package-0"} if i in lost else set()
        if i - 1 in lost and i not in lost and not bridged:
            eng.poll()  # back at the start of this interval: it is measured in full
        done_s = 0.0
        for at in sorted(k for k in marks if i < k < i + 1):  # inside this tick
            clock.advance((at - i) * interval - done_s)
            done_s = (at - i) * interval
            mark(at)
        clock.advance(interval - done_s)
        eng.tick()
    rec.close()
    return str(path)


def report(*paths):
    return build_report([load_file(str(p)) for p in paths])


def test_segments_between_markers(tmp_path):
    """Markers split the session; each segment has its energy, duration, share, provenance."""
    f = record(tmp_path / "a.csv", ticks=10, marks={0: "train", 6: "eval"})
    (host,) = report(f).hosts
    train, ev = host.segments
    assert (train.label, ev.label) == ("train", "eval")
    assert train.duration_s == pytest.approx(6.0) and ev.duration_s == pytest.approx(4.0)
    assert train.energy_j == pytest.approx(270.0) and ev.energy_j == pytest.approx(180.0)
    assert train.domains["package-0/core"].energy_j == pytest.approx(150.0)
    assert not train.domains["psys"].in_total
    assert sum(s.share for s in host.segments) == pytest.approx(1.0)
    assert train.provenance == "measured"
    assert train.co2_g == pytest.approx(270.0 * 360 / 3.6e6)
    assert host.energy_j == pytest.approx(450.0)


def test_marker_inside_a_tick_splits_by_time(tmp_path):
    """A marker between ticks apportions the straddling sample by time: ticks every 2 s
    at 45 W, a marker 1 s into the second tick (at 3 s) gives 3 s and 5 s of 45 W, not
    the whole straddling tick to either side (4 s and 4 s, or 2 s and 6 s)."""
    f = record(tmp_path / "a.csv", ticks=4, interval=2.0, marks={1.5: "mid"})
    (host,) = report(f).hosts
    start, mid = host.segments
    assert mid.label == "mid" and mid.start_t == pytest.approx(T0 + 3.0)
    assert (start.duration_s, mid.duration_s) == (pytest.approx(3.0), pytest.approx(5.0))
    assert start.energy_j == pytest.approx(3 * 45.0) and mid.energy_j == pytest.approx(5 * 45.0)
    assert host.energy_j == pytest.approx(360.0)


def test_json_structure(tmp_path, capsys):
    f = record(tmp_path / "a.csv", ticks=5, marks={2: "b"})
    assert cmd_report([f, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for part in [doc["total"]] + doc["hosts"] + doc["segments"]:
        for key in ("energy_j", "wh", "co2_g", "duration_s"):
            assert key in part
    assert doc["total"]["energy_j"] == pytest.approx(225.0)
    assert doc["total"]["wh"] == pytest.approx(225.0 / 3600)
    assert doc["total"]["duration_s"] == pytest.approx(5.0)
    assert [s["label"] for s in doc["segments"]] == ["(start)", "b"]
    assert sum(s["share"] for s in doc["segments"]) == pytest.approx(1.0)


@pytest.mark.parametrize("fmt, needle", [("table", "host total"), ("csv", "host,segment"),
                                         ("markdown", "| segment |")])
def test_other_formats(tmp_path, capsys, fmt, needle):
    f = record(tmp_path / "a.csv", ticks=3, marks={1: "x"})
    assert cmd_report([f, "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert needle in out and "x" in out


def test_eight_files_same_host_counted_once(tmp_path):
    """Eight recorders on one host at the same time: the report is the energy of one."""
    one = report(record(tmp_path / "one.csv", ticks=20, marks={5: "epoch 2"}))
    files = [record(tmp_path / f"r{i}.csv", ticks=20, marks={5: "epoch 2"}) for i in range(8)]
    rep = report(*files)
    (host,) = rep.hosts
    assert host.sessions == 8
    assert rep.energy_j == pytest.approx(one.energy_j) == pytest.approx(900.0)
    assert [s.label for s in host.segments] == ["(start)", "epoch 2"]
    assert host.segments[1].energy_j == pytest.approx(675.0)


def test_overlapping_files_count_the_overlap_once(tmp_path):
    """Two files of one host overlapping 5 s of 10 s each: 15 s of energy, not 20."""
    a = record(tmp_path / "a.csv", start=0.0, ticks=10)
    b = record(tmp_path / "b.csv", start=5.0, ticks=10)
    rep = report(a, b)
    assert rep.energy_j == pytest.approx(45.0 * 15)
    assert rep.duration_s == pytest.approx(15.0)


def test_two_hosts_add_up(tmp_path):
    a = record(tmp_path / "a.csv", host="n1", ticks=10)
    b = record(tmp_path / "b.csv", host="n2", ticks=10, power={"package-0": 100.0})
    rep = report(a, b)
    assert [h.host for h in rep.hosts] == ["n1", "n2"]
    assert rep.hosts[0].energy_j == pytest.approx(450.0)
    assert rep.hosts[1].energy_j == pytest.approx(1050.0)
    assert rep.energy_j == pytest.approx(1500.0)


def test_not_a_session_named_with_line_and_others_reported(tmp_path, capsys):
    """A foreign CSV is an error naming file and line 1; the good file is still reported."""
    bad = tmp_path / "other.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    good = record(tmp_path / "good.csv", ticks=2)
    assert cmd_report([str(bad), good]) == 0
    captured = capsys.readouterr()
    assert f"tuimeter: error: {bad}: line 1: not a tuimeter session" in captured.err
    assert "90.0" in captured.out


def test_every_file_bad_exits_2(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert cmd_report([str(empty), str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "empty file" in err and "missing.csv" in err


def test_truncated_last_line_warns_and_keeps_the_rest(tmp_path, capsys):
    """A recorder killed mid-write: the cut line is named, everything before is reported."""
    f = tmp_path / "killed.csv"
    record(f, ticks=4)
    text = f.read_text()
    f.write_text(text + text.splitlines()[-2][:25])
    n_lines = len(text.splitlines()) + 1
    assert cmd_report([str(f), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert f"{f}: line {n_lines}: truncated last line" in captured.err
    assert json.loads(captured.out)["total"]["energy_j"] == pytest.approx(180.0)


def test_malformed_middle_row_and_bad_number(tmp_path):
    f = tmp_path / "s.csv"
    record(f, ticks=3)
    lines = f.read_text().splitlines()
    lines.insert(3, "garbage,row")
    bad = lines[5].split(",")
    bad[1] = "zzz"
    lines[5] = ",".join(bad)
    f.write_text("\n".join(lines) + "\n")
    res = load_file(str(f))
    assert any("line 4: malformed row" in p for p in res.problems)
    assert any("line 6: malformed row (elapsed_s 'zzz' is not a number)" in p
               for p in res.problems)


def test_empty_session_says_no_samples(tmp_path, capsys):
    f = record(tmp_path / "e.csv", ticks=0)
    assert cmd_report([f]) == 0
    assert "no samples" in capsys.readouterr().err


def test_plot_without_tty(tmp_path, capsys):
    """--plot draws into a string: works with stdout a pipe."""
    f = record(tmp_path / "a.csv", ticks=30, marks={10: "phase b"})
    assert cmd_report([f, "--plot"]) == 0
    out = capsys.readouterr().out
    assert "total power" in out and "host total" in out


def test_report_json_is_pure_with_plot(tmp_path, capsys):
    """--plot with --format json: stdout is the same JSON as without --plot, and the plot
    is drawn on stderr (not dropped, not mixed into the JSON)."""
    f = record(tmp_path / "a.csv", ticks=5)
    assert cmd_report([f, "--format", "json"]) == 0
    plain = capsys.readouterr()
    assert cmd_report([f, "--plot", "--format", "json"]) == 0
    plotted = capsys.readouterr()
    assert plotted.out == plain.out
    assert json.loads(plotted.out)["total"]["energy_j"] == pytest.approx(225.0)
    assert "total power (W)" in plotted.err and "seconds since start" in plotted.err


def test_to_json_shares_per_host(tmp_path):
    a = record(tmp_path / "a.csv", host="n1", ticks=4, marks={2: "m"})
    b = record(tmp_path / "b.csv", host="n2", ticks=4, marks={1: "m"})
    doc = to_json(report(a, b))
    for host in ("n1", "n2"):
        assert sum(s["share"] for s in doc["segments"] if s["host"] == host) == pytest.approx(1)


def test_same_label_from_every_rank_is_one_boundary(tmp_path):
    """Eight ranks marking "epoch 2" within a second make one segment, not eight."""
    f = tmp_path / "s.csv"
    clock = FakeClock(1000.0)
    eng = Engine([rapl_like()], CARBON, 1.0, clock=clock, wallclock=lambda: T0 + clock.t,
                 cpu_clock=lambda: 0.0, host="h")
    rec = Recorder(SessionWriter.create(f, "h"))
    eng.open()
    eng.subscribe(rec)
    for i in range(6):
        if i == 3:
            for rank in range(8):
                clock.advance(0.01)
                eng.add_marker("epoch 2", "api", pid=100 + rank)
        clock.advance(1.0)
        eng.tick()
    rec.close()
    (host,) = report(f).hosts
    assert [s.label for s in host.segments] == ["(start)", "epoch 2"]
    assert sum(s.energy_j for s in host.segments) == pytest.approx(45.0 * 6.08)


def test_bad_timestamp_in_first_row_is_skipped_not_fatal(tmp_path):
    """A broken first row is named; the session is read from the next good row."""
    f = tmp_path / "s.csv"
    record(f, ticks=3)
    lines = f.read_text().splitlines()
    lines[1] = "yesterday" + lines[1][lines[1].index(","):]
    f.write_text("\n".join(lines) + "\n")
    res = load_file(str(f))
    assert any("line 2: malformed row (timestamp 'yesterday' is not an ISO 8601 time)" in p
               for p in res.problems)
    assert build_report([res]).energy_j == pytest.approx(135.0)


def test_bridged_energy_is_spread_over_the_lost_time_it_covers(tmp_path):
    """A counter bridged across 4 lost ticks puts their energy in the next sample row
    (label 'bridged 5.000 s'): the report counts it over those 5 s, so nothing is lost
    (lost_s 0), the average is the true 40 W, and a marker inside the span splits the
    bridged energy by time."""
    f = record(tmp_path / "a.csv", ticks=10, marks={0: "train", 5: "eval"}, lost={3, 4, 5, 6},
               bridged=True)
    (host,) = report(f).hosts
    train, ev = host.segments
    assert train.domains["package-0"].lost_s == 0.0 and ev.domains["package-0"].lost_s == 0.0
    assert train.domains["package-0"].energy_j == pytest.approx(200.0)
    assert ev.domains["package-0"].energy_j == pytest.approx(200.0)
    assert host.domains["package-0"].energy_j == pytest.approx(400.0)


def test_domain_lost_for_part_of_a_segment_reports_the_lost_time(tmp_path, capsys):
    """Guards honest averages: a domain lost for 4 of a segment's 10 s reports lost_s 4
    (json, csv, and a note in the table), and its average W is over the 6 s measured,
    not the energy spread over the whole segment."""
    f = record(tmp_path / "a.csv", ticks=10, marks={0: "train"}, lost={3, 4, 5, 6})
    (host,) = report(f).hosts
    (train,) = host.segments
    pkg = train.domains["package-0"]
    assert pkg.lost_s == pytest.approx(4.0) and train.domains["package-0/dram"].lost_s == 0.0
    assert pkg.energy_j == pytest.approx(240.0)
    assert train.lost_s == pytest.approx(4.0)
    assert cmd_report([f, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (seg,) = doc["segments"]
    assert seg["domains"]["package-0"]["lost_s"] == pytest.approx(4.0)
    assert seg["domains"]["package-0"]["avg_w"] == pytest.approx(40.0)
    assert seg["domains"]["package-0/dram"]["avg_w"] == pytest.approx(5.0)
    assert seg["lost_s"] == pytest.approx(4.0) and seg["avg_w"] == pytest.approx(45.0)
    assert cmd_report([f, "--format", "csv"]) == 0
    rows = list(__import__("csv").DictReader(capsys.readouterr().out.splitlines()))
    [pkg_row] = [r for r in rows if r["domain"] == "package-0" and r["segment"] == "1"]
    assert float(pkg_row["lost_s"]) == pytest.approx(4.0)
    assert float(pkg_row["avg_w"]) == pytest.approx(40.0)
    assert cmd_report([f]) == 0
    table = capsys.readouterr().out
    [line] = [l for l in table.splitlines() if l.strip().startswith("package-0 ")]
    assert "lost 4.0 s" in line and "40.00" in line


def test_segment_of_exactly_one_tick_is_measured(tmp_path):
    """Guards the whole-tick count: a segment from one tick's end to the next holds that
    tick whole, so it is measured (it was labelled interpolated: the first sample after a
    marker at a tick's end was counted as cut)."""
    f = record(tmp_path / "a.csv", ticks=4, marks={1: "a", 2: "b"})
    (host,) = report(f).hosts
    a = [s for s in host.segments if s.label == "a"][0]
    assert a.duration_s == pytest.approx(1.0) and a.energy_j == pytest.approx(45.0)
    assert a.provenance == "measured" and a.domains["package-0"].provenance == "measured"


def test_domain_lost_for_a_whole_segment_is_lost_not_interpolated(tmp_path):
    """A domain that could not be read at all in a segment: 0 J, provenance lost, lost_s
    its duration; the segment's other counted domains are still measured."""
    f = record(tmp_path / "a.csv", ticks=6, marks={2: "a", 4: "b"}, lost={2, 3})
    (host,) = report(f).hosts
    a = [s for s in host.segments if s.label == "a"][0]
    pkg = a.domains["package-0"]
    assert pkg.energy_j == 0.0 and pkg.provenance == "lost" and pkg.lost_s == pytest.approx(2.0)
    assert a.energy_j == pytest.approx(10.0) and a.provenance == "measured"


def test_api_end_marker_closes_the_phase(tmp_path):
    """Guards phase energy in reports of API sessions: an `end` marker from the API ends
    its phase; the time after it until the next marker is `(between phases)`, not a
    phase named `end`. An `end` typed by a user (source cli) is an ordinary label."""
    f = record(tmp_path / "a.csv", ticks=10,
               marks={0: ("train", "api"), 4: ("end", "api"), 6: ("eval", "api"),
                      8: ("end", "cli")})
    (host,) = report(f).hosts
    assert [(s.label, round(s.duration_s, 6)) for s in host.segments] == [
        ("train", 4.0), ("(between phases)", 2.0), ("eval", 2.0), ("end", 2.0)]
    assert host.segments[0].energy_j == pytest.approx(180.0)


def test_csv_format_prints_full_precision(tmp_path, capsys):
    """Guards numbers fed to other tools: csv cells carry full precision, not 6
    significant figures (4.32042e+07)."""
    f = record(tmp_path / "a.csv", ticks=10, interval=1.0, power={"package-0": 4320422.123})
    assert cmd_report([f, "--format", "csv"]) == 0
    rows = list(__import__("csv").DictReader(capsys.readouterr().out.splitlines()))
    [pkg] = [r for r in rows if r["domain"] == "package-0" and r["segment"] == "1"]
    assert "e+" not in pkg["energy_j"]
    assert float(pkg["energy_j"]) == pytest.approx(43204221.23, abs=1e-3)


def _hostile(tmp_path):
    """A session whose host and marker labels hold terminal escapes and formulas (written
    by another tool, or by someone else's recorder: report reads any file)."""
    f = tmp_path / "hostile.csv"
    record(f, host="\x1b]0;owned\x07node", ticks=4,
           marks={0: "\x1b[2J\x1b[31mEVIL", 2: "=HYPERLINK(\"http://x\",\"click\")"})
    return str(f)


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_report_escapes_terminal_controls_from_the_file(tmp_path, capsys, fmt):
    """Guards escape injection: ESC in a CSV's label and host was printed raw by the
    table and markdown reports (clearing the screen, setting the window title). It is
    shown as a visible \\x1b, and no control character reaches the terminal."""
    assert cmd_report([_hostile(tmp_path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[31mEVIL" in out
    assert "\\x1b]0;owned\\x07node" in out


def test_report_json_keeps_the_text_exact_and_escaped(tmp_path, capsys):
    """JSON escapes control characters itself (\\u001b): the label reads back exactly,
    and the output holds no raw ESC."""
    assert cmd_report([_hostile(tmp_path), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    doc = json.loads(out)
    assert doc["hosts"][0]["host"] == "\x1b]0;owned\x07node"
    assert [s["label"] for s in doc["segments"]][:2] == ["\x1b[2J\x1b[31mEVIL",
                                                       "=HYPERLINK(\"http://x\",\"click\")"]


def test_report_csv_neutralises_formulas_in_text_cells_only(tmp_path, capsys):
    """Guards CSV formula injection: `report --format csv` is meant for spreadsheets, so
    a text cell (label, host, domain) starting with = + - @ gets a leading ' and opens
    as text; numbers stay numbers."""
    f = tmp_path / "f.csv"
    record(f, host="-node", ticks=4, marks={0: "@SUM(A1)", 2: "+cmd|' /C calc'!A0"})
    assert cmd_report([str(f), "--format", "csv"]) == 0
    rows = list(__import__("csv").DictReader(capsys.readouterr().out.splitlines()))
    labels = {r["label"] for r in rows}
    assert {"'@SUM(A1)", "'+cmd|' /C calc'!A0"} <= labels
    assert {r["host"] for r in rows} == {"'-node", "(all hosts)"}
    for r in rows:
        for key in ("label", "host", "domain"):
            assert not r[key].startswith(("=", "+", "-", "@")), r
        float(r["energy_j"])  # a number, not a quoted string
    total = [r for r in rows if r["host"] == "(all hosts)"][0]
    assert float(total["energy_j"]) == pytest.approx(180.0)


def _third_package_row_with(tmp_path, col: int, text: str) -> tuple[str, int]:
    """A 6-tick session (package-0 40 W, dram 5 W counted) with cell ``col`` of the
    third package-0 sample replaced by ``text``: (path, its line number)."""
    f = tmp_path / "s.csv"
    record(f, ticks=6)
    lines = f.read_text().splitlines()
    line = [i + 1 for i, l in enumerate(lines) if ",sample,package-0," in l][2]
    cells = lines[line - 1].split(",")
    cells[col] = text
    lines[line - 1] = ",".join(cells)
    f.write_text("\n".join(lines) + "\n")
    return str(f), line


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf", "1e400", "-4324", "1e13", "NaN"])
def test_impossible_energy_is_a_malformed_row_named_with_file_and_line(tmp_path, capsys, cell):
    """Guards totals of NaN / inf / negative joules (and a bare NaN in the JSON): an
    energy_j that is not a finite number from 0 up is no reading; the row is skipped
    with a warning naming file and line, the rest is reported, and the JSON is strict."""
    f, line = _third_package_row_with(tmp_path, 10, cell)
    assert cmd_report([f, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert f"tuimeter: warning: {f}: line {line}: malformed row (energy_j" in captured.err
    doc = json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    assert doc["total"]["energy_j"] == pytest.approx(45.0 * 6 - 40.0)


@pytest.mark.parametrize("col, cell", [(9, "-1"), (9, "nan"), (11, "inf"), (1, "nan"),
                                       (1, "-3"), (2, "1e400"), (2, "-1"), (14, "-7")])
def test_impossible_numbers_in_other_cells_are_malformed_too(tmp_path, col, cell):
    """power_w, co2_g, elapsed_s, interval_s and pid follow the same rule."""
    f, line = _third_package_row_with(tmp_path, col, cell)
    res = load_file(f)
    assert [p for p in res.problems if f"line {line}: malformed row" in p]
    assert build_report([res]).energy_j == pytest.approx(45.0 * 6 - 40.0)


def test_a_big_but_possible_number_is_kept(tmp_path):
    """The ceiling is far above any machine: a 4 MW domain for 10 s still reports."""
    f = record(tmp_path / "a.csv", ticks=10, power={"package-0": 4e6})
    assert load_file(f).problems == []
