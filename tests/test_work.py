"""Energy per unit of work (issue 28): counting work (``Meter.count``, ``tuimeter.count``,
``tuimeter count``), each phase's ``work`` and ``energy_per``, the session file's ``work``
rows, ``report --per`` in every format, ``read_session``, and phase edges that wait for the
GPU (``sync``)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

import pytest

import tuimeter
from tests.fakes.fake_pynvml import make_fake_pynvml
from tests.fakes.nvml_record import ClockedGpu
from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, make_engine, tuimeter as tuimeter_cmd
from tests.test_api import _running_session
from tests.test_mark_delivery import PATIENCE, recorders  # noqa: F401 (a fixture)
from tuimeter import api, sync
from tuimeter.cli import main
from tuimeter.session.reader import SessionReader

PAGE = ROOT / "docs" / "work.md"  # "Energy per sample and per token"


@pytest.fixture(autouse=True)
def fresh(runtime_dir, monkeypatch):
    monkeypatch.setattr(api, "_warned_none", False)
    monkeypatch.setattr(sync, "_warned", False)


def _report(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", *argv]) == 0
    return out.getvalue()


def _rows(path: Path, kind: str) -> list[dict]:
    return [r for r in csv.DictReader(path.open()) if r["kind"] == kind]


# -- the documented example, over a fake GPU ---------------------------------------------
def _page_block(page: Path) -> str:
    """The page's first ``python`` block."""
    return re.search(r"```python\n(.*?)```", page.read_text(), re.S).group(1)


GPU_W = 250.0  # the fake GPU's steady draw under the training loop


def test_documented_training_loop_gives_j_per_sample_within_1_percent(tmp_path, monkeypatch,
                                                                        capsys):
    """The "Energy per sample and per token" page's example (docs/work.md), run as
    written by a plain ``tuimeter.Meter()`` over a fake RAPL tree (idle: its counters do
    not move) and a fake NVML GPU drawing 250 W (its energy counter follows the monotonic
    clock) shared alike by this process and another: each phase's J/sample is on the own
    basis, within 1% of its truth (half of 250 W x the phase's duration), where the
    machine's is 2x."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=False)
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(fake.sensor_root))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    pids = tmp_path / "gpu-pids"
    pids.write_text(f"{os.getpid()} 1\n")  # this program and another (init) share the GPU

    gpu = ClockedGpu(0, GPU_W, str(pids), time.monotonic())
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([gpu]))
    synced = []
    fake_torch = types.ModuleType("torch")
    fake_torch.cuda = types.SimpleNamespace(is_initialized=lambda: True,
                                            synchronize=lambda: synced.append(1))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    namespace: dict = {}
    exec(compile(_page_block(PAGE), str(PAGE), "exec"), namespace)
    meter = namespace["meter"]
    train, ev = meter.phases
    assert train.work == {"samples": 20 * 64, "tokens": 20 * 64 * 512}
    assert ev.work == {"samples": 10 * 64}
    for phase in (train, ev):
        per = phase.energy_per("samples")
        assert per.count == phase.work["samples"]
        # a plain Meter has its own energy (issue 21): J/sample is on the own basis. Two
        # processes use the GPU alike (SM 90% each), so this one's own energy is half
        # the GPU's 250 W x the phase's duration; the idle RAPL tree adds no CPU share
        assert (per.basis, per.energy_j) == ("own", phase.own_energy_j)
        assert per.provenance == phase.own_provenance == "attributed"
        truth = GPU_W / 2 * phase.duration_s / per.count
        machine = phase.energy_j / per.count
        with capsys.disabled():  # the figure for the record (pytest -s)
            print(f"\n{phase.label}: {per.j_per_unit:.6f} J/sample (own, {per.provenance}), "
                  f"truth {truth:.6f}, {100 * (per.j_per_unit / truth - 1):+.3f}%; the "
                  f"machine's {machine:.6f} J/sample")
        assert per.j_per_unit == pytest.approx(truth, rel=0.01)
        assert phase.own_domains["cpu"] == 0.0
        assert machine == pytest.approx(2 * truth, rel=0.01)  # the machine basis: 2x off
        assert per.units_per_s == pytest.approx(phase.work["samples"] / phase.duration_s)
    assert len(synced) == 3  # start, mark, end
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("train: 1280 samples, ") and "J/sample" in lines[0]
    assert lines[1].startswith("eval: 640 samples, ")


# -- own mode, exactly ------------------------------------------------------------------
def test_meter_counts_per_phase_file_report_and_pandas_agree(tmp_path):
    """Over scripted sensors (45 W counted): counts go to the phase current when they are
    made, even a count read at the same clock value as the mark after it; the file's work
    rows keep that order, so ``report --per`` in every format and ``read_session`` give
    the same work and J/unit as the Meter."""
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), label="train", engine=eng, autostart=False) as meter:
        for i in range(3):
            clock.advance(1.0)
            assert meter.count(samples=64, tokens=64 * 128)
            if i == 2:  # in the same tick, at the same clock reading as the last count
                meter.mark("eval")
            eng.tick()
        clock.advance(1.0)
        meter.count(samples=10)
        eng.tick()
    train, ev = meter.phases
    assert train.work == {"samples": 192, "tokens": 192 * 128}
    assert ev.work == {"samples": 10}
    per = train.energy_per("samples")
    assert (per.energy_j, per.j_per_unit, per.basis) == (135.0, 135.0 / 192, "machine")
    assert per.units_per_s == pytest.approx(64.0)
    assert train.energy_per("steps") is None
    assert ev.energy_per("tokens") is None

    rows = _rows(out, "work")
    assert [(r["domain"], r["label"], r["source"]) for r in rows] == [
        ("samples", "64", "api"), ("tokens", "8192", "api")] * 3 + [("samples", "10", "api")]
    doc = json.loads(_report("--per", "samples", "--per", "tokens", "--format", "json",
                             str(out)))
    segs = {s["label"]: s for s in doc["segments"]}
    assert segs["train"]["per"]["samples"] == {
        "count": 192.0, "j_per_unit": pytest.approx(135.0 / 192), "units_per_s": 64.0,
        "basis": "machine", "provenance": "measured"}
    assert segs["eval"]["per"]["samples"]["j_per_unit"] == pytest.approx(4.5)
    assert segs["eval"]["per"]["tokens"] == {"count": 0.0, "j_per_unit": None,
                                             "units_per_s": None, "basis": "machine",
                                             "provenance": "measured"}
    table = list(csv.DictReader(io.StringIO(_report("--per", "samples", "--format", "csv",
                                                    str(out)))))
    totals = {r["label"]: r for r in table if r["domain"] == "total" and r["segment"]}
    assert float(totals["train"]["samples"]) == 192
    assert float(totals["train"]["j_per_sample"]) == pytest.approx(135.0 / 192)
    assert all(r["j_per_sample"] == "" for r in table if r["domain"] != "total")
    for fmt in ("table", "markdown"):
        text = _report("--per", "samples", "--format", fmt, str(out))
        assert "J/samples" in text.splitlines()[1]
        (line,) = [ln for ln in text.splitlines() if "train" in ln]
        assert "192" in line and "0.7031" in line

    df = tuimeter.read_session(out, wide=True)
    by_phase = df.groupby("phase")
    assert by_phase.work_samples.sum().to_dict() == {"train": 192.0, "eval": 10.0}
    j_per = (by_phase.total_energy_j.sum() / by_phase.work_samples.sum()).to_dict()
    assert j_per["train"] == pytest.approx(per.j_per_unit)
    long = tuimeter.read_session(out)
    assert long[long.kind == "work"].label.astype(float).sum() == 202 + 3 * 8192


def test_bad_counts_are_refused_with_one_line_and_the_session_goes_on(tmp_path):
    """NaN, inf, 0, negative, a bool, text, a unit that is not a word: a warning each,
    nothing of it counted, no row written, and the meter keeps measuring."""
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    bad = [dict(samples=float("nan")), dict(samples=float("inf")), dict(samples=0),
           dict(samples=-3), dict(samples=True), dict(samples="64"), {"bad unit": 1},
           {"x" * 41: 1}, {}, dict(samples=64, tokens=-1)]
    with api.Meter(output=str(out), engine=eng, autostart=False) as meter:
        for units in bad:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                assert meter.count(**units) is False
            assert len(seen) == 1 and "\n" not in str(seen[0].message)
            assert "not counted" in str(seen[0].message)
        clock.advance(1.0)
        assert meter.count(samples=1)
        eng.tick()
    assert meter.phases[0].work == {"samples": 1}
    assert [r["label"] for r in _rows(out, "work")] == ["1"]
    assert len([r for r in csv.DictReader(out.open()) if r["kind"] == "total"]) >= 1
    with pytest.warns(RuntimeWarning, match="not counted"):
        assert meter.count(samples=1) is False  # stopped


def test_a_hostile_work_row_is_skipped_and_old_readers_pass_over_work_rows(tmp_path):
    """A work row whose count is no positive number, or whose unit is no word, is a bad
    row (skipped, named); the report's reader (which asks for no work rows, as an older
    tuimeter's did) reads a file with work rows with no problem."""
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), engine=eng, autostart=False) as meter:
        clock.advance(1.0)
        meter.count(samples=8)
        eng.tick()
    plain = SessionReader(out)
    list(plain)
    assert plain.problems == []
    lines = out.read_text().splitlines()
    (good,) = [ln for ln in lines if ",work," in ln]
    hostile = [good.replace(",8,", ",nan,"), good.replace(",8,", ",-8,"),
               good.replace(",samples,", ",=cmd|x,")]
    out.write_text("\n".join(lines + hostile) + "\n")
    rd = SessionReader(out, kinds={"work"})
    assert [r.label for r in rd] == ["8"]
    assert len(rd.problems) == 3 and all("a work row" in p for p in rd.problems)


# -- attached, and tuimeter.count -------------------------------------------------------
def test_attached_meter_and_tuimeter_count_reach_the_running_session(tmp_path):
    """An attached Meter's counts are recorded in the running session's file and go to
    its phases; ``tuimeter.count()`` from the program counts there too; a bad count is
    refused by the client (nothing sent) and the session goes on."""
    eng, clock, rec, server = _running_session(tmp_path)
    try:
        with api.Meter(label="train") as meter:
            assert meter.attached
            clock.advance(1.0)
            eng.tick()
            assert meter.count(samples=32)
            clock.advance(1.0)
            eng.tick()
            meter.mark("eval")
            assert meter.count(samples=8, tokens=100)
            clock.advance(1.0)
            eng.tick()
        r = tuimeter.count(steps=2)
        assert r and r.delivered == 1
        with pytest.warns(RuntimeWarning, match="not a positive finite number"):
            bad = tuimeter.count(steps=float("nan"))
        assert not bad and bad.error
        clock.advance(1.0)
        eng.tick()
    finally:
        server.close()
        rec.close()
    train, ev = meter.phases
    assert train.work == {"samples": 32} and ev.work == {"samples": 8, "tokens": 100}
    assert train.energy_per("samples").j_per_unit == pytest.approx(90.0 / 32)
    rows = _rows(tmp_path / "session.csv", "work")
    assert [(r["domain"], r["label"]) for r in rows] == [
        ("samples", "32"), ("samples", "8"), ("tokens", "100"), ("steps", "2")]


# -- the command line -------------------------------------------------------------------
def _count(recorders, *args, **kw) -> subprocess.CompletedProcess:  # noqa: F811
    return subprocess.run(tuimeter_cmd("count", "--timeout", PATIENCE, *args),
                          env=recorders.env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60, **kw)


CHILD = """
import subprocess, sys
import tuimeter
assert tuimeter.count(samples=5)
subprocess.run([sys.executable, "-m", "tuimeter", "count", "tokens=7"], check=True)
"""


def test_cli_count_delivers_like_mark_and_bad_input_ends_nothing(recorders):  # noqa: F811
    """``tuimeter count``: exit 0 and work rows in the running session; bad input exit 2
    with one line and the recorder goes on; no such session exit 1; a command run by
    ``record -- CMD`` counts in its own session only ($TUIMETER_SESSION)."""
    proc, out = recorders.start("r")
    ok = _count(recorders, "samples=64", "tokens=3.2e4")
    assert ok.returncode == 0, ok.stderr
    assert "counted 'samples=64 tokens=32000' in 1 session" in ok.stdout
    for words in (["samples=nan"], ["samples=-1"], ["samples=0"], ["samples"],
                  ["1bad=3"], ["samples=inf"], ["samples=1e400"]):
        bad = _count(recorders, *words)
        assert bad.returncode == 2, (words, bad.stderr)
        assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("tuimeter: error: ")
    missing = _count(recorders, "--session", "0123456789ab", "samples=1")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    script = recorders.tmp / "child.py"
    script.write_text(CHILD)
    job_csv = recorders.tmp / "job.csv"
    job = subprocess.run(tuimeter_cmd("record", "-o", str(job_csv), "--interval", "0.2",
                                      "--no-gpu", "--no-attribution", "-q", "--",
                                      sys.executable, str(script)),
                         env=recorders.env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert job.returncode == 0, job.stderr
    assert proc.poll() is None  # still recording after the bad input
    err = recorders.end(proc)
    assert proc.returncode == 0, err
    assert [(r["domain"], r["label"], r["source"]) for r in _rows(out, "work")] == [
        ("samples", "64", "cli"), ("tokens", "32000", "cli")]
    assert [(r["domain"], r["label"]) for r in _rows(job_csv, "work")] == [
        ("samples", "5"), ("tokens", "7")]
    doc = json.loads(_report("--per", "samples", "--format", "json", str(out)))
    assert sum(s["per"]["samples"]["count"] for s in doc["segments"]) == 64


def test_report_per_refuses_codecarbon_and_a_bad_unit(tmp_path, capsys):
    eng, clock = make_engine()
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), engine=eng, autostart=False):
        clock.advance(1.0)
        eng.tick()
    for argv in (["--per", "samples", "--format", "codecarbon"], ["--per", "a b"]):
        with pytest.raises(SystemExit) as exc:
            main(["report", *argv, str(out)])
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].startswith("tuimeter report: error")


# -- phases that wait for the GPU -------------------------------------------------------
def _fake_cuda(name: str, log: list, eng, initialised: bool = True) -> types.ModuleType:
    """A fake torch or cupy whose synchronize records itself and the markers the engine
    holds at that moment (so the order of sync and stamp is visible)."""
    mod = types.ModuleType(name)

    def synchronize():
        log.append(("sync", len(eng._pending_markers)))

    if name == "torch":
        mod.cuda = types.SimpleNamespace(is_initialized=lambda: initialised,
                                         synchronize=synchronize)
    else:
        mod.cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(
            synchronize=synchronize))
    return mod


@pytest.mark.parametrize("name", ["torch", "cupy"])
def test_sync_cuda_waits_for_the_device_before_each_edge_is_stamped(monkeypatch, name):
    """``Meter(sync="cuda")``: the already imported torch (or cupy) synchronises before
    the start, each mark and the end are stamped; tuimeter imports neither."""
    eng, clock = make_engine()
    log: list = []
    monkeypatch.setitem(sys.modules, name, _fake_cuda(name, log, eng))
    other = "cupy" if name == "torch" else "torch"
    monkeypatch.delitem(sys.modules, other, raising=False)
    with api.Meter(label="a", engine=eng, autostart=False, sync="cuda") as meter:
        clock.advance(1.0)
        eng.tick()
        meter.mark("b")
        meter.mark("c", sync=False)
    # before the start no marker is pending; before "b" none (the start's was ticked)
    assert log == [("sync", 0), ("sync", 0), ("sync", 2)]
    assert other not in sys.modules


def test_sync_without_torch_or_cupy_warns_once_and_torch_without_cuda_is_left_alone(
        monkeypatch):
    eng, clock = make_engine()
    for name in ("torch", "cupy"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with api.Meter(engine=eng, autostart=False, sync="cuda") as meter:
            meter.mark("x")
        tuimeter.mark("y", sync=True)
    assert [str(w.message) for w in seen if "neither torch nor cupy" in str(w.message)] \
        and len([w for w in seen if "neither torch nor cupy" in str(w.message)]) == 1
    assert "torch" not in sys.modules and "cupy" not in sys.modules
    log: list = []
    eng2, _ = make_engine()
    monkeypatch.setitem(sys.modules, "torch", _fake_cuda("torch", log, eng2, initialised=False))
    with api.Meter(engine=eng2, autostart=False, sync="cuda") as meter:
        meter.mark("x")
    assert log == []  # CUDA never initialised: nothing queued, and none initialised by us
    with pytest.raises(ValueError, match="sync must be"):
        api.Meter(sync="rocm")


# -- short phases, honestly (item 4) ----------------------------------------------------
def test_a_phase_shorter_than_three_nvml_updates_is_interpolated_with_the_period(tmp_path):
    """NVML's energy counter updates every ~100 ms: a 0.2 s phase over 0.1 s ticks holds
    two whole ticks but not three counter updates, so it is ``interpolated`` with
    ``update_period_s`` 0.1, in the Meter and in the report of its file; a 0.4 s phase
    is measured. RAPL (1 ms) alone never makes a tick-long phase short."""
    from tests.fakes.scripted import ScriptedSensor, domain
    from tuimeter.model import DomainKind

    gpu = ScriptedSensor("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                         {"gpu0": 300.0})
    eng, clock = make_engine([gpu], interval_s=0.1)
    out = tmp_path / "run.csv"
    with api.Meter(output=str(out), label="blink", engine=eng, autostart=False) as meter:
        for _ in range(2):
            clock.advance(0.1)
            eng.tick()
        meter.mark("long")
        for _ in range(4):
            clock.advance(0.1)
            eng.tick()
    blink, long = meter.phases
    assert blink.energy_j == pytest.approx(60.0)
    assert (blink.provenance, blink.update_period_s) == ("interpolated", 0.1)
    assert (long.provenance, long.update_period_s) == ("measured", None)
    segs = {s["label"]: s for s in json.loads(_report("--format", "json", str(out)))["segments"]}
    assert segs["blink"]["provenance"] == "interpolated"
    assert segs["blink"]["update_period_s"] == 0.1
    assert segs["long"]["provenance"] == "measured" and "update_period_s" not in segs["long"]
    pkg = ScriptedSensor("rapl", [domain("package-0", source="rapl")], {"package-0": 40.0})
    eng2, clock2 = make_engine([pkg], interval_s=0.01)
    with api.Meter(engine=eng2, autostart=False) as m2:
        for _ in range(2):
            clock2.advance(0.01)
            eng2.tick()
    assert m2.phases[0].provenance == "measured"
