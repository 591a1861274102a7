"""tuimeter.read_session / read_report: typed DataFrames, the wide form, phases, the extra.

Session files come from the real Engine and SessionWriter on fake clocks (tests.test_report's
``record``), so every joule is known, and the report they are compared with is the one
``tuimeter report`` prints."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings

import pytest

pd = pytest.importorskip("pandas")

import tuimeter  # noqa: E402
from tuimeter import frames  # noqa: E402
from tests.helpers import make_engine  # noqa: E402
from tests.test_report import record  # noqa: E402
from tuimeter.session.csvfile import SessionWriter  # noqa: E402
from tuimeter.session.reader import SessionFormatError  # noqa: E402
from tuimeter.session.recorder import Recorder  # noqa: E402
from tuimeter.session.report_cli import cmd_report  # noqa: E402


def report_json(capsys, *paths) -> dict:
    assert cmd_report([*map(str, paths), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def recording(path, host: str):
    """An engine on a fake clock recording into ``path``: (engine, clock, recorder); the
    test adds markers and ticks itself (``record`` only marks at tick ends)."""
    eng, clock = make_engine(wall_follows_clock=True, host=host)
    rec = Recorder(SessionWriter.create(path, host))
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    return eng, clock, rec


def concat(target, *parts):
    """One file holding the sessions of ``parts`` (one header), as ``append`` writes it."""
    lines = [open(parts[0]).readline()]
    for p in parts:
        lines += open(p).readlines()[1:]
    target.write_text("".join(lines))
    return str(target)


def test_long_form_dtypes_and_values(tmp_path):
    """Each column has its type, and every cell equals the CSV's text read by hand."""
    f = record(tmp_path / "a.csv", ticks=4, marks={1: "train"}, lost=(2,))
    df = tuimeter.read_session(f)
    assert isinstance(df["timestamp"].dtype, pd.DatetimeTZDtype)
    assert str(df["timestamp"].dt.tz) == "UTC"
    for col in ("elapsed_s", "interval_s", "power_w", "energy_j", "co2_g"):
        assert df[col].dtype == "float64", col
    assert df["pid"].dtype == "Int64" and df["in_total"].dtype == "boolean"
    for col in ("host", "session", "kind", "domain", "source", "provenance", "label"):
        assert df[col].dtype == "string", col
    rows = list(csv.DictReader(open(f, newline="")))
    assert len(df) == len(rows)
    for i, r in enumerate(rows):
        got = df.iloc[i]
        assert got["timestamp"] == pd.Timestamp(r["timestamp"])
        for col in ("energy_j", "power_w", "elapsed_s"):
            assert (pd.isna(got[col]) if r[col] == "" else got[col] == float(r[col])), (i, col)
        assert got["in_total"] is pd.NA if r["in_total"] == "" else (
            bool(got["in_total"]) == (r["in_total"] == "1"))
        assert got["label"] == r["label"] and got["kind"] == r["kind"]
    lost = df[(df.kind == "sample") & (df.provenance == "lost")]
    assert len(lost) == 1 and lost.energy_j.isna().all()  # a lost interval stays NaN


def test_na_like_text_is_kept_and_pid_is_integer(tmp_path):
    """A host 'NA' and labels 'nan'/'null' stay text (pandas' defaults make them NaN)."""
    path = tmp_path / "na.csv"
    eng, clock, rec = recording(path, "NA")
    eng.add_marker("nan", "api", 4242)
    clock.advance(1.0)
    eng.tick()
    eng.add_marker("null", "cli")
    clock.advance(1.0)
    eng.tick()
    rec.close()
    df = tuimeter.read_session(path)
    assert set(df["host"]) == {"NA"}
    marks = df[df.kind == "marker"]
    assert list(marks["label"]) == ["nan", "null"]
    assert marks["pid"].iloc[0] == 4242 and marks["pid"].iloc[1] is pd.NA
    assert df["label"].notna().all() and df["domain"].notna().all()  # "" where empty, not NA


def test_wide_sums_equal_the_report_per_domain(tmp_path, capsys):
    """Wide form: one row per tick; each domain's J summed equals `report --format json`,
    a lost interval included (bridged energy sits in the row that bridged it)."""
    f = record(tmp_path / "a.csv", ticks=12, marks={3: "train", 8: "eval"}, lost=(5, 6),
               bridged=True, power={"package-0": 33.3})
    w = tuimeter.read_session(f, wide=True)
    doc = report_json(capsys, f)
    (host,) = doc["hosts"]
    assert len(w) == 12 and list(w["elapsed_s"]) == [float(i) for i in range(1, 13)]
    for dom, v in host["domains"].items():
        assert w[f"{dom}_energy_j"].sum() == pytest.approx(v["energy_j"], rel=1e-9), dom
        assert w.attrs["in_total"][dom] == v["in_total"]
    assert w["package-0_energy_j"].isna().sum() == 2  # the lost ticks
    assert w["package-0/dram_power_w"].tolist() == [5.0] * 12
    counted = [d for d, v in host["domains"].items() if v["in_total"]]
    assert sum(w[f"{d}_energy_j"].sum() for d in counted) == pytest.approx(
        doc["total"]["energy_j"], rel=1e-9)
    assert w["total_energy_j"].sum() == pytest.approx(doc["total"]["energy_j"], rel=1e-9)


def test_wide_phases_from_markers(tmp_path):
    """`phase` is the marker in force at each tick's middle: (start) before the first,
    a marker inside a tick gives it to the phase holding its midpoint, an API `end` opens
    (between phases)."""
    path = tmp_path / "p.csv"
    eng, clock, rec = recording(path, "h")
    steps = [(0.3, "early"), (0.9, "late"), (None, None), (0.0, "x"), (0.5, "end")]
    for at, label in steps:  # tick i covers [i, i+1]; a marker `at` s into it
        if at is not None:
            clock.advance(at)
            eng.add_marker(label, "api" if label == "end" else "cli")
        clock.advance(1.0 - (at or 0.0))
        eng.tick()
    rec.close()
    w = tuimeter.read_session(path, wide=True)
    # tick 1: "early" at 0.3 holds the midpoint 0.5; tick 2: "late" at 1.9 is after 1.5
    assert list(w["phase"]) == ["early", "early", "late", "x", "(between phases)"]
    assert w["phase"].dtype == "string"
    unmarked = tuimeter.read_session(record(tmp_path / "u.csv", ticks=2), wide=True)
    assert list(unmarked["phase"]) == ["(start)", "(start)"]


def test_several_sessions_in_one_file(tmp_path, capsys):
    """A file holding two sessions: each row says its session; the wide form gives each
    session its ticks and phases; per-domain sums still equal the report's."""
    a = record(tmp_path / "a.csv", ticks=3, marks={0: "first"})
    b = record(tmp_path / "b.csv", start=100.0, ticks=4, marks={0: "second"})
    f = concat(tmp_path / "both.csv", a, b)
    df = tuimeter.read_session(f)
    ids = list(pd.unique(df["session"]))
    assert len(ids) == 2
    w = tuimeter.read_session(f, wide=True)
    assert list(w.groupby("session", sort=False).size()) == [3, 4]
    assert list(w["phase"]) == ["first"] * 3 + ["second"] * 4
    assert list(w["elapsed_s"]) == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0]
    (host,) = report_json(capsys, f)["hosts"]
    assert w["package-0_energy_j"].sum() == pytest.approx(host["domains"]["package-0"]["energy_j"])


@pytest.mark.parametrize("chunk_rows", [None, 3])
def test_bad_rows_are_skipped_with_a_warning(tmp_path, monkeypatch, chunk_rows):
    """A non-number, an inf, a bad in_total or pid: row skipped, a warning naming the line;
    a truncated last line is the reader's warning. Nothing else is lost, also when the
    file is typed in chunks (bad rows in several of them)."""
    if chunk_rows:
        monkeypatch.setattr(frames, "CHUNK_ROWS", chunk_rows)
    f = record(tmp_path / "a.csv", ticks=3)
    lines = open(f).read().splitlines()
    sample = next(line for line in lines if ",sample," in line)
    cells = sample.split(",")
    bad_e = cells[:10] + ["abc"] + cells[11:]
    bad_inf = cells[:9] + ["inf"] + cells[10:]
    bad_it = cells[:8] + ["yes"] + cells[9:]
    bad_pid = cells[:14] + ["-3"]
    text = "\n".join(lines[:2] + [",".join(r) for r in (bad_e, bad_inf, bad_it, bad_pid)]
                     + lines[2:]) + "\n" + sample[:20]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = tuimeter.read_session(path)
    msgs = [str(w.message) for w in caught]
    # the reader's words, as `tuimeter report` and `--replay` give them
    for line, cell in ((3, "energy_j 'abc'"), (4, "power_w 'inf'"), (5, "in_total 'yes'"),
                       (6, "pid '-3'")):
        assert any(f"line {line}: malformed row ({cell}" in m for m in msgs), (line, msgs)
    assert any("truncated last line" in m for m in msgs)
    assert len(df) == len(lines) - 1
    assert df.equals(tuimeter.read_session(f))  # the good rows, as from the clean file


def test_not_a_session_raises(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(SessionFormatError, match="line 1: not a tuimeter session"):
        tuimeter.read_session(bad)


def test_empty_session_has_typed_columns(tmp_path):
    path = tmp_path / "e.csv"
    SessionWriter.create(path, "h").close()
    df = tuimeter.read_session(path)
    assert len(df) == 0 and df["pid"].dtype == "Int64"
    assert len(tuimeter.read_session(path, wide=True)) == 0


def test_read_report_is_the_report_csv(tmp_path, capsys):
    """read_report: the rows of `report --format csv`, typed; totals equal the JSON's."""
    a = record(tmp_path / "a.csv", host="n1", ticks=6, marks={2: "train"})
    b = record(tmp_path / "b.csv", host="n2", ticks=6, power={"package-0": 100.0})
    df = tuimeter.read_report([a, b])
    assert df["segment"].dtype == "Int64" and df["in_total"].dtype == "boolean"
    assert isinstance(df["start"].dtype, pd.DatetimeTZDtype)
    assert df["energy_j"].dtype == "float64" and df["label"].dtype == "string"
    assert cmd_report([a, b, "--format", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert len(rows) == len(df)
    assert [float(r["energy_j"]) for r in rows] == df["energy_j"].tolist()
    doc = report_json(capsys, a, b)
    segs = df[(df.domain == "total") & df.segment.notna()]
    assert segs["energy_j"].sum() == pytest.approx(doc["total"]["energy_j"])
    assert list(segs["label"]) == [s["label"] for s in doc["segments"]]
    overall = df[df.host == "(all hosts)"]
    assert overall["energy_j"].item() == pytest.approx(doc["total"]["energy_j"])
    assert tuimeter.read_report(a)["host"].iloc[0] == "n1"


def test_read_report_warns_for_a_bad_file_and_fails_when_none_usable(tmp_path):
    good = record(tmp_path / "a.csv", ticks=2)
    bad = tmp_path / "x.csv"
    bad.write_text("nope\n")
    with pytest.warns(RuntimeWarning, match="x.csv: line 1: not a tuimeter session"):
        df = tuimeter.read_report([good, bad])
    assert not df.empty
    with pytest.raises(ValueError, match="not a tuimeter session"):
        tuimeter.read_report(bad)


def test_without_pandas_one_line_naming_the_extra(tmp_path, monkeypatch):
    """pandas hidden: a one-line ImportError that names the extra to install."""
    f = record(tmp_path / "a.csv", ticks=1)
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises
    for call in (lambda: tuimeter.read_session(f), lambda: tuimeter.read_report(f)):
        with pytest.raises(ImportError) as exc:
            call()
        msg = str(exc.value)
        assert "tuimeter[pandas]" in msg and "\n" not in msg


def test_import_tuimeter_loads_neither_pandas_nor_ipython():
    code = ("import sys, tuimeter, tuimeter.frames, tuimeter.notebook; tuimeter.read_session; "
            "print([m for m in ('pandas', 'numpy', 'IPython') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
