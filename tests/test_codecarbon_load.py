"""The machine's CPU load and the GPUs' busy %: recorded in the session file as ``device``
rows and written by ``tuimeter report --format codecarbon`` as CodeCarbon's
``cpu_utilization_percent`` and ``gpu_utilization_percent`` (its means over the run: here
over each segment).

Sessions are recorded by the real Engine, Attributor and SessionWriter on a fake clock:
RAPL scripted, the GPUs through the real NVML sensor over the fake pynvml (its device
readings), the processes' CPU time from a scripted scanner, so every figure is known."""

from __future__ import annotations

import io
import json
import sys

import pandas as pd
import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.scripted import rapl_like
from tests.helpers import CARBON, make_engine
from tests.test_attribution import FakeScanner
from tuimeter.engine.attribution import Attributor
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.recorder import Recorder
from tuimeter.session.report_cli import cmd_report
from tuimeter.session.schema import DEVICE_READINGS
from tuimeter.sensors.nvml import NvmlSensor

NCPU = 4
#: per tick: (the machine's CPU load 0..1, the GPUs' busy % read before it, or None)
SEGMENT_A = [(0.25, (90, 30)), (0.75, None), (0.5, None), (1.0, (20, 20))]
SEGMENT_B = [(1.0, (10, 30)), (0.0, None)]


def record(path, monkeypatch, attribution=True) -> str:
    """Two segments, ``a`` (SEGMENT_A) and ``b`` (SEGMENT_B): a process using the given
    share of the machine's CPUs, the GPUs' readings refreshed where given."""
    gpus = [FakeGpu(), FakeGpu(name="NVIDIA A100-SXM4-80GB")]
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus))
    sensors = [rapl_like(), NvmlSensor()]
    scanner = FakeScanner()
    scanner.run(10, 0.0)
    att = Attributor(sensors, CARBON, scanner=scanner, cgroups=False) if attribution else None
    eng, clock = make_engine(sensors, attributor=att, wall_follows_clock=True)
    rec = Recorder(SessionWriter.create(path, "h"))
    eng.open()
    rec.start(eng.snapshot)
    eng.subscribe(rec)
    for label, ticks in (("a", SEGMENT_A), ("b", SEGMENT_B)):
        eng.add_marker(label, "cli")
        for load, utils in ticks:
            if utils is not None:
                for gpu, pct in zip(gpus, utils):
                    gpu.util_gpu_pct = pct
                eng.refresh_devices()
            clock.advance(1.0)
            scanner.machine += NCPU
            scanner.add(10, load * NCPU)
            eng.tick()
    rec.close()
    eng.close()
    return str(path)


def codecarbon(capsys, *files):
    assert cmd_report([*map(str, files), "--format", "codecarbon"]) == 0
    out = capsys.readouterr()
    return pd.read_csv(io.StringIO(out.out)), out.err


def _mean(xs):
    return sum(xs) / len(xs)


def test_utilisation_columns_are_the_segments_means(tmp_path, monkeypatch, capsys):
    """CPU: the ticks' load of the machine, averaged over the segment; GPU: every reading
    of every GPU in the segment alike (CodeCarbon's mean), each reading counted once even
    though the ticks between reads carry it too. RAM use is not read: empty."""
    df, err = codecarbon(capsys, record(tmp_path / "s.csv", monkeypatch))
    assert err == ""
    for (_, row), ticks in zip(df.iterrows(), (SEGMENT_A, SEGMENT_B)):
        assert row.cpu_utilization_percent == pytest.approx(100 * _mean([t[0] for t in ticks]))
        assert row.gpu_utilization_percent == pytest.approx(
            _mean([pct for _, utils in ticks if utils for pct in utils]))
    assert list(df.cpu_utilization_percent) == pytest.approx([62.5, 50.0])
    assert list(df.gpu_utilization_percent) == pytest.approx([40.0, 20.0])
    assert df[["ram_utilization_percent", "ram_used_gb"]].isna().all().all()


def test_device_rows_once_per_reading_with_units_in_their_keys(tmp_path, monkeypatch):
    """A GPU's row only when it was read again (3 reads x 2 GPUs), the machine's CPU load
    every tick (domain total); the readings' keys are DeviceInfo's, units in the names."""
    df = pd.read_csv(record(tmp_path / "s.csv", monkeypatch), keep_default_na=False)
    dev = df[df.kind == "device"]
    gpu_rows = dev[dev.domain != "total"]
    assert sorted(gpu_rows.domain) == ["gpu0", "gpu0", "gpu0", "gpu1", "gpu1", "gpu1"]
    assert set(gpu_rows.source) == {"nvml"}
    labels = [json.loads(x) for x in gpu_rows.label]
    assert all(set(obj) <= set(DEVICE_READINGS) and "util_pct" in obj for obj in labels)
    assert labels[0]["mem_total_b"] == 143_771 * 2**20  # bytes, as DeviceInfo
    cpu_rows = dev[dev.domain == "total"]
    assert len(cpu_rows) == len(SEGMENT_A) + len(SEGMENT_B)
    assert set(cpu_rows.source) == {"attribution"} and set(cpu_rows.provenance) == {"measured"}


def test_without_attribution_the_cpu_load_is_empty(tmp_path, monkeypatch, capsys):
    """No attribution (``--no-attribution``): no CPU load was measured, so none is claimed;
    the GPUs' readings still count."""
    df, _ = codecarbon(capsys, record(tmp_path / "s.csv", monkeypatch, attribution=False))
    assert df.cpu_utilization_percent.isna().all()
    assert list(df.gpu_utilization_percent) == pytest.approx([40.0, 20.0])


def test_bad_device_rows_are_skipped_with_a_warning(tmp_path, monkeypatch, capsys):
    """A device row from a hostile or damaged file (a busy % of 150, a label that is not
    JSON) is no reading: skipped, one warning naming its line, the rest still count."""
    path = tmp_path / "s.csv"
    record(path, monkeypatch)
    lines = path.read_text().splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if ",device,gpu0," in ln)
    bad = lines[first].replace('"{""util_pct"":90.0', '"{""util_pct"":150.0')
    assert bad != lines[first]
    lines[first] = bad
    cpu = next(i for i, ln in enumerate(lines) if ",device,total," in ln)
    lines.insert(cpu + 1, lines[cpu].rsplit('"{', 1)[0] + "not json,\n")
    path.write_text("".join(lines))
    df, err = codecarbon(capsys, path)
    warnings = [ln for ln in err.splitlines() if "device label" in ln]
    assert len(warnings) == 2 and f"line {first + 1}: " in warnings[0], err
    assert df.gpu_utilization_percent[0] == pytest.approx(_mean([30, 20, 20]))
    assert df.cpu_utilization_percent[0] == pytest.approx(62.5)
