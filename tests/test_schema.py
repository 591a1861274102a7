"""The session CSV codec (tuimeter/session/schema.py): every row kind survives writer ->
reader, schema 2 carries the carbon settings and each domain's kind in structured form, and
schema 1 files (tests/data/sessions/demo.csv, written by the schema 1 writer) read as before."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain
from tuimeter.engine.sampler import Engine
from tuimeter.model import PID_LIMIT, CarbonInfo, DomainKind, Provenance, Work
from tuimeter.sensors.replay import ReplaySensor
from tuimeter.session import schema
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.reader import SessionReader
from tuimeter.session.recorder import Recorder
from tuimeter.session.report import build_report, load_file
from tuimeter.session.report_cli import to_csv
from tuimeter.session.schema import (COLUMNS, ROW_KINDS, BadRow, Row, SessionMeta, guess_kind,
                                     parse_row, render)

SESSIONS = Path(__file__).resolve().parent / "data" / "sessions"
DEMO_1 = SESSIONS / "demo.csv"  # schema 1, as the schema 1 writer wrote it
DEMO_2 = SESSIONS / "demo-schema2.csv"  # the same recording, schema 2
CARBON = CarbonInfo(g_per_kwh=312.5, pue=1.25, source="country XYZ (a test, \"quoted\"; x)")
T0 = 1_800_000_000.0
#: domains whose kind the id would be guessed wrong (schema 1 cannot tell)
ODD = [domain("soc", DomainKind.PACKAGE, source="fakesoc"),
       domain("amdgpu0/vram", DomainKind.MEMORY, source="amdsmi"),
       domain("acc0", DomainKind.GPU, source="amdsmi", provenance=Provenance.ESTIMATED),
       domain("amdgpu0", DomainKind.GPU, in_total=False, source="amdsmi")]


def _csv_text(rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def _row(kind, **kw) -> Row:
    base = dict(line=0, wall_s=T0 + 0.25, elapsed_s=1.5, interval_s=0.0, host="h",
                session="s1", kind=kind, domain="", source="", in_total=None, power_w=None,
                energy_j=None, co2_g=None, provenance="", label="", pid=None)
    base.update(kw)
    return Row(**base)


EVERY_KIND = [
    _row("session", label="tuimeter schema 2; carbon 312.5 g/kWh (x); pue 1.25; rapl: ok"),
    _row("settings", label=schema.settings_label(CARBON)),
    schema.carbon_row(dataclasses.replace(CARBON, g_per_kwh=212.0, provider="electricitymaps",
                                          source="electricitymaps DE: 212 g/kWh"),
                      T0 + 0.25, 1.5, "h", "s1"),
    schema.domain_row(ODD[1], T0 + 0.25, 1.5, "h", "s1"),
    _row("sample", interval_s=1.0, domain="gpu0", source="nvml", in_total=True, power_w=40.5,
         energy_j=40.5, co2_g=0.003515625, provenance="measured"),
    _row("sample", interval_s=1.0, domain="gpu1", source="nvml", in_total=False,
         provenance="lost"),
    _row("sample", interval_s=1.0, domain="package-0", source="rapl", in_total=True,
         power_w=2.5, energy_j=7.5, co2_g=0.000651042, provenance="measured",
         label=schema.bridged_label(3.0)),
    _row("total", interval_s=1.0, domain="total", power_w=40.5, energy_j=40.5,
         co2_g=0.003515625, provenance="measured"),
    _row("marker", source="socket", label="epoch 2, \"quoted\"", pid=4242),
    _row("event", domain="gpu1", source="nvml", label="lost: GPU is lost"),
    _row("job", interval_s=1.0, domain="cpu", source="attribution", power_w=3.0,
         energy_j=3.0, co2_g=0.00026, provenance="attributed", label="python train.py",
         pid=77),
    _row("process", interval_s=1.0, domain="all", source="attribution", power_w=1.0,
         energy_j=1.0, co2_g=8.7e-05, provenance="attributed", label="idle/system"),
    _row("cgroup", interval_s=1.0, domain="all", source="attribution", power_w=2.0,
         energy_j=2.0, co2_g=0.000174, provenance="attributed",
         label="/kubepods.slice/kubepods-pod2c9f8a79_5391.slice/cri-containerd-ab.scope"),
    _row("tree", interval_s=1.0, domain="all", source="attribution", power_w=250.0,
         energy_j=250.0, co2_g=0.025, provenance="attributed",
         label=schema.tree_label("python train.py", "3", True), pid=78),
    schema.device_row("gpu0", "nvml", {"util_pct": 87.5, "mem_used_b": 8589934592},
                      T0 + 1.0, 2.0, 1.0, "h", "s1"),
    *schema.work_rows(Work((("samples", 64.0), ("tokens", 0.5)), 2.5, T0 + 2.5, "cli", 4242),
                      "h", "s1"),
]


def test_every_row_kind_round_trips_through_the_schema(tmp_path):
    """Each row kind, rendered as the writer renders it and read back by the reader (the
    inline path and parse_row both), is the row it was."""
    assert {r.kind for r in EVERY_KIND} == ROW_KINDS
    for r in EVERY_KIND:
        assert parse_row(list(render(r))) == r
    f = tmp_path / "s.csv"
    f.write_text(_csv_text(render(r) for r in EVERY_KIND), encoding="utf-8")
    rd = SessionReader(f, kinds=ROW_KINDS)
    got = [r._replace(line=0) for r in rd]
    assert got == EVERY_KIND and rd.problems == []


def _record(path, doms, ticks=3, lost_at=(), later=None):
    """The real engine and writer over scripted ``doms``; ``later``: a domain added to the
    tick after the first (as a rediscovered sensor brings one)."""
    clock = FakeClock(1000.0)
    sensor = ScriptedSensor("fake", list(doms), {d.id: 10.0 + i for i, d in enumerate(doms)})
    eng = Engine([sensor], CARBON, 1.0, clock=clock, wallclock=lambda: T0 + clock.t,
                 cpu_clock=lambda: 0.0, host="h")
    writer = SessionWriter.create(path, "h")
    rec = Recorder(writer)
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    for i in range(ticks):
        sensor.lost = {doms[0].id} if i in lost_at else set()
        clock.advance(1.0)
        eng.tick()
    if later is not None:  # a domain first seen now: described before its first sample
        snap = eng.snapshot
        extra = dataclasses.replace(snap.domains[0], domain=later)
        writer.write_snapshot(dataclasses.replace(snap, domains=snap.domains + (extra,),
                                                  new_markers=(), events=()))
    eng.close()
    rec.close()
    return str(path)


def _downgrade(src, dst) -> str:
    """The schema 1 form of a schema 2 file, as the schema 1 writer wrote it: no settings
    or domain rows, the session row's text names schema 1."""
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    out = [rows[0]]
    for r in rows[1:]:
        if r[5] in ("settings", "domain"):
            continue
        if r[5] == "session":
            r = r[:13] + [r[13].replace("tuimeter schema 2;", "tuimeter schema 1;")] + r[14:]
        out.append(r)
    Path(dst).write_text(_csv_text(out[1:]), encoding="utf-8")
    return str(dst)


def _replayed(path):
    sensor = ReplaySensor(path, clock=FakeClock())
    doms = [(d.id, d.kind, d.in_total, d.source, d.provenance) for d in sensor.open()]
    sensor.close()
    return doms, sensor.carbon


def test_a_recorded_session_describes_its_domains_and_settings(tmp_path):
    """Schema 2 (and 3) as written: a settings row with the schema and the carbon settings, and a
    domain row (kind, name, label, source, in_total, provenance) before a domain's first
    sample, also for a domain first seen after the start."""
    later = domain("amdgpu1", DomainKind.MEMORY, source="amdsmi")
    later = dataclasses.replace(later, name="AMD GPU 1 memory", label="MI300X, \"VRAM\"")
    path = _record(tmp_path / "s.csv", ODD, later=later)
    rows = list(SessionReader(path, kinds=ROW_KINDS))
    assert [r.kind for r in rows[:2]] == ["session", "settings"]
    assert rows[0].label.startswith("tuimeter schema 3; carbon 312.5 g/kWh")
    assert schema.settings_of(rows[1]) == (3, CARBON)
    described = {}
    for r in rows:
        if r.kind == "domain":
            described[r.domain] = schema.domain_of(r)
        elif r.kind == "sample":
            assert r.domain in described, r
    assert described == {d.id: d for d in ODD + [later]}
    meta = SessionMeta()
    for r in rows:
        meta.take(r)
    assert (meta.schema, meta.carbon) == (3, CARBON) and meta.structured
    assert "carbon" not in {r.kind for r in rows}  # a fixed figure: no carbon row


def test_a_kind_the_id_would_guess_wrong_survives_a_round_trip(tmp_path):
    """Each odd domain's kind (a SoC package, a GPU's memory, an accelerator) and its
    in_total and provenance come back from a schema 2 file; from the same recording in
    schema 1 they are guessed from the id, wrongly for all but ``amdgpu0``: what schema 2
    is for."""
    path = _record(tmp_path / "s2.csv", ODD, lost_at=(0,))
    want = [(d.id, d.kind, d.in_total, d.source, d.provenance) for d in ODD]
    doms, carbon = _replayed(path)
    assert doms == want
    assert (carbon.g_per_kwh, carbon.pue) == (CARBON.g_per_kwh, CARBON.pue)
    old, _ = _replayed(_downgrade(path, tmp_path / "s1.csv"))
    assert [d[1] for d in old] == [guess_kind(d.id) for d in ODD]
    assert [guess_kind(d.id) != d.kind for d in ODD] == [True, True, True, False]


def test_schema_1_and_schema_2_give_the_same_report_and_replay(tmp_path):
    """The demo recording in schema 2 and in its schema 1 form: the same report (to the
    last digit of its CSV), the same replayed domains (kind, in_total, source,
    provenance) and carbon settings. CO2e is the recorded setting times the energy in
    both, not the ratio of rounded cells."""
    s2 = str(DEMO_2)
    s1 = _downgrade(s2, tmp_path / "demo1.csv")
    f1, f2 = load_file(s1), load_file(s2)
    assert f1.problems == f2.problems == []
    assert (f1.sessions[0].meta.schema, f2.sessions[0].meta.schema) == (1, 2)
    assert f1.sessions[0].meta.carbon == f2.sessions[0].meta.carbon
    r1, r2 = build_report([f1]), build_report([f2])
    assert to_csv(r1) == to_csv(r2)
    assert r2.co2_g == pytest.approx(r2.energy_j * 475.0 / 3.6e6, rel=1e-12)
    assert _replayed(s1) == _replayed(s2)


def test_the_committed_schema_1_file_reads_as_its_schema_2_twin(tmp_path):
    """demo.csv, written by the schema 1 writer, stays readable: its report has no
    problems, its replayed domains have the kinds demo-schema2.csv records, its carbon
    settings come from the session row's text."""
    f1 = load_file(str(DEMO_1))
    assert f1.problems == [] and f1.sessions[0].meta.schema == 1
    assert build_report([f1]).hosts[0].domains.keys() == \
        build_report([load_file(str(DEMO_2))]).hosts[0].domains.keys()
    doms1, carbon1 = _replayed(str(DEMO_1))
    doms2, carbon2 = _replayed(str(DEMO_2))
    assert doms1 == doms2
    assert carbon1 == carbon2 == CarbonInfo(
        475.0, 1.0, "default world average (IEA 2019), as recorded")


@pytest.mark.parametrize("kind, label, why", [
    ("domain", "not json", "not JSON"),
    ("domain", "[1, 2]", "not a JSON object"),
    ("domain", '{"kind": 5}', "kind is not text"),
    ("domain", '{"kind": "gpu", "label": null}', "label is not text"),
    ("settings", '{"carbon": {}}', "no schema version"),
    ("settings", '{"schema": true}', "no schema version"),
    ("settings", '{"schema": 2, "carbon": 475}', "carbon is not a JSON object"),
    ("domain", "{" * 5000, "longer than 4096"),
])
def test_a_bad_structured_row_is_a_bad_row(kind, label, why):
    """A settings or domain row whose JSON is not what its kind defines is malformed (the
    reader skips it with a problem naming the line)."""
    cells = list(render(schema.domain_row(ODD[0], T0, 0.0, "h", "s")))
    cells[5], cells[13] = kind, label
    with pytest.raises(BadRow, match=why):
        parse_row(cells)


def test_structured_rows_are_read_leniently_where_they_may_grow():
    """A kind a newer writer knows reads as ``other``; carbon out of bounds is left out
    (the replay then uses the caller's settings); unknown keys are ignored."""
    r = schema.domain_row(ODD[0], T0, 0.0, "h", "s")._replace(
        label='{"kind": "npu", "name": "NPU", "future": 1}')
    assert schema.domain_of(parse_row(list(render(r)))).kind is DomainKind.OTHER
    s = _row("settings", label='{"schema": 3, "carbon": {"g_per_kwh": 1e9, "pue": 1}}')
    assert schema.settings_of(parse_row(list(render(s)))) == (3, None)


def test_a_bad_domain_row_is_skipped_and_the_kind_guessed(tmp_path):
    """A domain row with broken JSON: one problem naming its line, and the replay guesses
    that domain's kind as for schema 1 (the rest of the file is read)."""
    path = _record(tmp_path / "s.csv", ODD)
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if ",domain,soc," in line)
    lines[i] = lines[i].replace('{""kind""', '{""kind"" oops')
    Path(path).write_text("".join(lines), encoding="utf-8")
    sensor = ReplaySensor(path, clock=FakeClock())
    kinds = {d.id: d.kind for d in sensor.open()}
    assert kinds["soc"] is guess_kind("soc") and kinds["acc0"] is DomainKind.GPU
    assert [p.split(": ")[1] for p in sensor.problems] == [f"line {i + 1}"]


def test_a_file_pandas_wrote_back_keeps_its_pids(tmp_path):
    """A user loads a session with pandas and writes it back (``df.to_csv``): the pid
    column, a float column because most rows have none, is written ``77.0``. Those rows
    are still good rows with pid 77, every one read, none skipped as malformed.""" 
    import pandas as pd

    src = Path(__file__).parent / "data" / "sessions" / "demo-job.csv"
    df = pd.read_csv(src, keep_default_na=False, na_values=[""], dtype={"label": str})
    assert df.pid.dtype == float and df.pid.notna().any()
    back = tmp_path / "back.csv"
    df.to_csv(back, index=False)
    assert ".0\n" in back.read_text() or ".0," in back.read_text()
    reader = SessionReader(back, kinds=ROW_KINDS)
    rows = list(reader)
    assert reader.problems == [] and len(rows) == len(df)
    assert {r.pid for r in rows if r.pid is not None} == {int(p) for p in df.pid.dropna()}


@pytest.mark.parametrize("pid,ok", [(str(PID_LIMIT), True), (str(PID_LIMIT + 1), False),
                                    ("4294967295", False), ("0", True), ("77.0", True),
                                    ("77.5", False)])
def test_a_pid_is_within_the_kernels_range(pid, ok):
    """The pid cell's bounds: 0 (macOS's kernel_task) to the kernel's largest pid_max
    (2^22, the rule the CLI and the marker socket apply), not one more."""
    if ok:
        assert schema.pid_of(pid) == int(float(pid))
    else:
        with pytest.raises(BadRow):
            schema.pid_of(pid)


def test_a_problem_echoes_at_most_40_characters_of_its_cell():
    """A hostile cell (a 10 kB label) is cut in the problem line: 40 characters, then ..."""
    assert schema.echo("x" * 40) == "'" + "x" * 40 + "'"
    assert schema.echo("x" * 41) == "'" + "x" * 40 + "...'"


def test_structured_labels_keep_their_text_as_utf8():
    """A domain named in another script (a GPU model, a host's own words) is written as
    it is in the JSON label, not as \\u escapes a person cannot read in the file."""
    gpu = dataclasses.replace(domain("gpu0", DomainKind.GPU), name="GPU 日本")
    carbon = CarbonInfo(g_per_kwh=300.0, pue=1.0, source="réseau électrique")
    for label in (schema.domain_row(gpu, 0.0, 0.0, "h", "s").label,
                  schema.settings_label(carbon),
                  schema.carbon_row(carbon, 0.0, 0.0, "h", "s").label):
        assert ("日本" in label or "électrique" in label) and "\\u" not in label, label
