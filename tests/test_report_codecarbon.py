"""`tuimeter report --format codecarbon`: CodeCarbon's emissions.csv, read back with pandas
and compared with `report --format json` of the same files.

Sessions are recorded by the real Engine and SessionWriter on a fake clock from scripted
sensors, so every joule is known."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json

import pandas as pd
import pytest

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tuimeter.settings import resolve_carbon
from tuimeter.engine.sampler import Engine
from tuimeter.model import CarbonInfo, DomainKind
from tuimeter.session.codecarbon import COLUMNS
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.reader import session_carbon
from tuimeter.session.recorder import Recorder
from tuimeter.session.report_cli import cmd_report

T0 = 1_800_000_000.0
CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test")
#: CodeCarbon 3.3.2's EmissionsData fields, in its order (written out here from
#: codecarbon/output_methods/emissions_data.py, not taken from the module under test;
#: tests/test_codecarbon_real.py checks them against CodeCarbon itself where it installs)
CODECARBON_COLUMNS = [
    "timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions",
    "emissions_rate", "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy",
    "ram_energy", "energy_consumed", "water_consumed", "country_name", "country_iso_code",
    "region", "cloud_provider", "cloud_region", "os", "python_version", "codecarbon_version",
    "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude",
    "ram_total_size", "tracking_mode", "cpu_utilization_percent", "gpu_utilization_percent",
    "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue"]
UNKNOWN = ["experiment_id", "region", "cloud_provider", "cloud_region", "os",
           "python_version", "codecarbon_version", "cpu_count", "cpu_model", "gpu_model",
           "longitude", "latitude", "ram_total_size", "on_cloud",
           # no WUE is given; no attribution, no device readings: no load recorded
           "water_consumed", "wue", "cpu_utilization_percent", "gpu_utilization_percent",
           "ram_utilization_percent", "ram_used_gb"]


def gpus(power=(200.0, 100.0)) -> ScriptedSensor:
    doms = [domain(f"gpu{i}", DomainKind.GPU, source="nvml") for i in range(len(power))]
    return ScriptedSensor("nvml", doms, {d.id: w for d, w in zip(doms, power)})


def record(path, sensors, *, host="h", carbon=CARBON, start=0.0, ticks=10, interval=1.0,
           marks=(), session_id=None) -> str:
    """Record ``ticks`` ticks of ``sensors`` from wall time T0+start, a marker at each
    tick index in ``marks`` ({index: label})."""
    clock = FakeClock(1000.0 + start)
    eng = Engine(sensors, carbon, interval, clock=clock, wallclock=lambda: T0 + clock.t,
                 cpu_clock=lambda: 0.0, host=host)
    rec = Recorder(SessionWriter.create(path, host, session_id=session_id))
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    marks = dict(marks)
    for i in range(ticks):
        if i in marks:
            eng.add_marker(marks[i], "cli")
        clock.advance(interval)
        eng.tick()
    rec.close()
    return str(path)


def run(capsys, *args) -> str:
    assert cmd_report([str(a) for a in args]) == 0
    return capsys.readouterr().out


def codecarbon(capsys, *args) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(run(capsys, *args, "--format", "codecarbon")))


def report_json(capsys, *files) -> dict:
    return json.loads(run(capsys, *files, "--format", "json"))


def session_id(path) -> str:
    return pd.read_csv(path).session.iloc[0]


def test_columns_units_and_mapping_match_the_json_report(tmp_path, capsys):
    """CodeCarbon's columns in its order, one row per segment; energies in kWh that add up
    (cpu + gpu + ram = energy_consumed = the segment's J / 3.6e6), kg, kg/s, average W;
    core and psys (nested) not counted; DRAM in ram; the country of the carbon source."""
    carbon = resolve_carbon(country="FRA", env={}, config_path=tmp_path / "none.toml")
    f = record(tmp_path / "a.csv", [rapl_like(), gpus()], carbon=carbon, ticks=10,
               marks={0: "train", 6: "eval"})
    df = codecarbon(capsys, f)
    segs = report_json(capsys, f)["segments"]
    assert list(df.columns) == CODECARBON_COLUMNS == list(COLUMNS)
    assert len(df) == len(segs) == 2
    for (_, row), seg in zip(df.iterrows(), segs):
        dur = seg["duration_s"]
        assert row.duration == pytest.approx(dur)
        assert row.energy_consumed * 3.6e6 == pytest.approx(seg["energy_j"], rel=1e-12)
        assert row.cpu_energy + row.gpu_energy + row.ram_energy == pytest.approx(
            row.energy_consumed, rel=1e-12)
        assert row.cpu_energy * 3.6e6 == pytest.approx(40.0 * dur)  # package-0, not core/psys
        assert row.gpu_energy * 3.6e6 == pytest.approx(300.0 * dur)  # gpu0 + gpu1
        assert row.ram_energy * 3.6e6 == pytest.approx(5.0 * dur)  # measured DRAM
        assert (row.cpu_power, row.gpu_power, row.ram_power) == pytest.approx((40.0, 300.0, 5.0))
        assert row.emissions == pytest.approx(seg["co2_g"] / 1000.0, rel=1e-12)
        assert row.emissions_rate == pytest.approx(row.emissions / dur, rel=1e-12)
        assert row.gpu_count == 2
        assert (row.country_iso_code, row.country_name) == ("FRA", "France")
        assert (row.tracking_mode, row.pue, row.project_name) == ("machine", 1.0, "tuimeter")
        assert row.run_id == session_id(f)
    # scripted GPUs have no device readings: utilisation and water empty (never a 0)
    assert df[UNKNOWN].isna().all().all()
    assert df.energy_consumed.sum() * 3.6e6 == pytest.approx(
        sum(s["energy_j"] for s in segs), rel=1e-12)
    ends = [T0 + 1000.0 + 6, T0 + 1000.0 + 10]  # the segments' ends, UTC, as CodeCarbon (s)
    assert list(df.timestamp) == [
        _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds")
        for t in ends]
    assert pd.to_datetime(df.timestamp).dt.tz is not None


def test_unknown_fields_are_empty_not_invented(tmp_path, capsys):
    """What the session does not record is an empty cell: no OS, Python or CodeCarbon
    version, no hardware model, no place; no country for a source that is not one."""
    f = record(tmp_path / "a.csv", [rapl_like()])
    df = codecarbon(capsys, f)
    assert df[UNKNOWN + ["country_name", "country_iso_code"]].isna().all().all()
    # no GPU recorded: its columns are unknown, not 0
    assert df[["gpu_energy", "gpu_power", "gpu_count"]].isna().all().all()
    assert df.cpu_energy.notna().all() and df.ram_energy.notna().all()


def test_known_joules_give_exact_kwh_kg_and_watts(tmp_path, capsys):
    """1,000 W for an hour is 3,600,000 J: 1.0 kWh; at 360 g/kWh 0.36 kg, 1e-4 kg/s."""
    pkg = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 1000.0})
    f = record(tmp_path / "a.csv", [pkg], ticks=60, interval=60.0)
    (row,) = codecarbon(capsys, f).itertuples()
    assert row.duration == pytest.approx(3600.0)
    assert row.cpu_energy == pytest.approx(1.0, rel=1e-12)
    assert row.energy_consumed == pytest.approx(1.0, rel=1e-12)
    assert row.cpu_power == pytest.approx(1000.0)
    assert row.emissions == pytest.approx(0.36, rel=1e-9)
    assert row.emissions_rate == pytest.approx(1e-4, rel=1e-9)
    assert pd.isna(row.ram_energy) and pd.isna(row.ram_power)


def test_pue_scales_the_energies_as_codecarbon_does_not_the_power(tmp_path, capsys):
    """CodeCarbon's energies include the PUE (its emissions are energy x intensity); its
    power columns do not. The report's CO2e already counts the PUE: same kg."""
    carbon = CarbonInfo(g_per_kwh=360.0, pue=1.5, source="test")
    f = record(tmp_path / "a.csv", [rapl_like()], carbon=carbon, ticks=4)
    (row,) = codecarbon(capsys, f).itertuples()
    (seg,) = report_json(capsys, f)["segments"]
    assert row.pue == 1.5
    assert row.energy_consumed * 3.6e6 == pytest.approx(1.5 * seg["energy_j"], rel=1e-12)
    assert row.cpu_energy + row.ram_energy == pytest.approx(row.energy_consumed, rel=1e-12)
    assert row.emissions == pytest.approx(seg["co2_g"] / 1000.0, rel=1e-12)
    assert row.emissions == pytest.approx(row.energy_consumed * 0.360, rel=1e-12)
    assert (row.cpu_power, row.ram_power) == pytest.approx((40.0, 5.0))


def test_several_files_and_hosts_add_up_to_the_report_total(tmp_path, capsys):
    """Two files of host a, the second within the first's "train" (counted once, both
    session ids in that run_id) and host b: one row per segment per host; the kWh add up
    to the report's total."""
    a1 = record(tmp_path / "a1.csv", [rapl_like()], host="a", marks={0: "load", 5: "train"})
    a2 = record(tmp_path / "a2.csv", [rapl_like()], host="a", start=6.0, ticks=3)
    b = record(tmp_path / "b.csv", [rapl_like(), gpus((250.0,))], host="b", start=3.0,
               marks={4: "train"})
    df = codecarbon(capsys, a1, a2, b)
    rep = report_json(capsys, a1, a2, b)
    assert len(df) == len(rep["segments"]) == 4
    assert df.energy_consumed.sum() * 3.6e6 == pytest.approx(rep["total"]["energy_j"], rel=1e-12)
    for (_, row), seg in zip(df.iterrows(), rep["segments"]):
        assert row.energy_consumed * 3.6e6 == pytest.approx(seg["energy_j"], rel=1e-12)
        parts = row[["cpu_energy", "gpu_energy", "ram_energy"]].fillna(0.0).sum()
        assert parts == pytest.approx(row.energy_consumed, rel=1e-12)
    ids = [session_id(p) for p in (a1, a2, b)]
    assert list(df.run_id) == [ids[0], f"{ids[0]};{ids[1]}", ids[2], ids[2]]
    assert list(df.gpu_count.fillna(0)) == [0, 0, 1, 1]


def test_apple_and_estimated_domains(tmp_path, capsys):
    """Apple cpu -> cpu, gpu and ane -> gpu (one GPU); estimate/cpu -> cpu and the memory
    estimate -> ram where no DRAM is measured."""
    apple = ScriptedSensor("powermetrics", [domain("cpu"), domain("gpu", DomainKind.GPU),
                                            domain("ane", DomainKind.ANE)],
                           {"cpu": 3.0, "gpu": 2.0, "ane": 1.0})
    est = ScriptedSensor("estimate", [domain("estimate/cpu", source="estimate"),
                                      domain("estimate/memory", DomainKind.MEMORY,
                                             source="estimate")],
                         {"estimate/cpu": 20.0, "estimate/memory": 4.0})
    (row,) = codecarbon(capsys, record(tmp_path / "m.csv", [apple], ticks=4)).itertuples()
    assert (row.cpu_power, row.gpu_power, row.gpu_count) == pytest.approx((3.0, 3.0, 1))
    assert pd.isna(row.ram_energy)
    (row,) = codecarbon(capsys, record(tmp_path / "e.csv", [est], ticks=4)).itertuples()
    assert (row.cpu_power, row.ram_power) == pytest.approx((20.0, 4.0))
    assert row.ram_energy * 3.6e6 == pytest.approx(16.0)


def test_text_cells_are_spreadsheet_safe(tmp_path, capsys):
    """A formula in the project name or the session id from the file does not run when
    the CSV is opened in a spreadsheet (the same OWASP rule as --format csv)."""
    f = record(tmp_path / "a.csv", [rapl_like()], ticks=2, session_id="=1+cmd|x")
    out = run(capsys, f, "--format", "codecarbon", "--project", "@SUM(A1)")
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert row["project_name"] == "'@SUM(A1)" and row["run_id"] == "'=1+cmd|x"


def test_project_is_an_option_of_the_codecarbon_format_only(tmp_path, capsys):
    f = record(tmp_path / "a.csv", [rapl_like()], ticks=2)
    with pytest.raises(SystemExit) as exc:
        cmd_report([f, "--project", "x"])
    assert exc.value.code == 2
    assert "--project is for --format codecarbon" in capsys.readouterr().err


def test_session_carbon_reads_what_the_writer_wrote(tmp_path):
    """The session row's carbon settings, including a source text that itself holds
    parentheses and the word pue, or a lone parenthesis (a path)."""
    for info, want_pue in ((resolve_carbon(country="FR", pue=1.2, env={},
                                           config_path=tmp_path / "none.toml"), 1.2),
                           (CarbonInfo(100.0, 1.1, "x (y); pue 9"), 1.1),
                           (CarbonInfo(100.0, 1.3, "100 g/kWh (config /a(b/c.toml)"), 1.3)):
        f = record(tmp_path / "s.csv", [rapl_like()], carbon=info, ticks=1)
        label = pd.read_csv(f, keep_default_na=False).label.iloc[0]
        got = session_carbon(label)
        assert (got.g_per_kwh, got.source, got.pue) == (pytest.approx(info.g_per_kwh),
                                                        info.source, want_pue)
        (tmp_path / "s.csv").unlink()
    assert session_carbon("tuimeter schema 1; carbon 56 g/kWh (test)").pue is None
    assert session_carbon("tuimeter schema 1; carbon nan g/kWh (test); pue 1") is None


def test_replay_takes_the_recorded_carbon_settings(tmp_path):
    """The replay reads the session row through the same parser: intensity, source, PUE."""
    from tuimeter.sensors.replay import ReplaySensor

    info = resolve_carbon(country="FRA", pue=1.2, env={}, config_path=tmp_path / "none.toml")
    sensor = ReplaySensor(record(tmp_path / "a.csv", [rapl_like()], carbon=info, ticks=2))
    sensor.open()
    assert (sensor.carbon.g_per_kwh, sensor.carbon.pue) == (info.g_per_kwh, 1.2)
    assert sensor.carbon.source == f"{info.source}, as recorded"


def test_sessions_with_different_pues_leave_pue_empty_and_energy_as_measured(tmp_path, capsys):
    """Two recordings of one host over the same time that recorded different PUEs: no
    one PUE to apply, so none is claimed."""
    a = record(tmp_path / "a.csv", [rapl_like()], ticks=4)
    b = record(tmp_path / "b.csv", [rapl_like()], ticks=4,
               carbon=CarbonInfo(g_per_kwh=360.0, pue=1.5, source="test"))
    (row,) = codecarbon(capsys, a, b).itertuples()
    (seg,) = report_json(capsys, a, b)["segments"]
    assert pd.isna(row.pue)
    assert row.energy_consumed * 3.6e6 == pytest.approx(seg["energy_j"], rel=1e-12)
