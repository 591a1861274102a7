"""CodeCarbon itself reads ``tuimeter report --format codecarbon``: its ``EmissionsData``
has our columns in our order, its ``FileOutput.has_valid_headers`` accepts our file, and
its ``FileOutput.out`` adds its own row to a tuimeter-written ``emissions.csv`` instead of
moving the file aside as a foreign one (what it does with a header it does not know).

CodeCarbon is a test extra (pyproject.toml); the tests skip, saying so, where it is not
installed. Sessions are recorded as in tests/test_report_codecarbon.py."""

from __future__ import annotations

import dataclasses
import io
import os

import pandas as pd
import pytest

from tests.fakes.scripted import rapl_like
from tests.test_report_codecarbon import gpus, record, run
from tuimeter.session.codecarbon import COLUMNS

codecarbon = pytest.importorskip(
    "codecarbon", reason="codecarbon not installed (pip install -e '.[test]')")
from codecarbon.output_methods.emissions_data import EmissionsData  # noqa: E402
from codecarbon.output_methods.file import FileOutput  # noqa: E402


def _codecarbon_row(run_id: str) -> EmissionsData:
    """One row as CodeCarbon's tracker builds it (its own defaults for the rest)."""
    return EmissionsData(
        timestamp="2027-01-15T10:00:00", project_name="cc", run_id=run_id,
        experiment_id="5b0fa12a-3dd7-45bb-9766-cc326314d9f1", duration=10.0,
        emissions=1e-5, emissions_rate=1e-6, cpu_power=42.5, gpu_power=0.0, ram_power=3.0,
        cpu_energy=1.2e-4, gpu_energy=0.0, ram_energy=8e-6, energy_consumed=1.28e-4,
        water_consumed=0.0, country_name="France", country_iso_code="FRA",
        region="ile-de-france", cloud_provider="", cloud_region="", os="Linux",
        python_version="3.11.2", codecarbon_version=codecarbon.__version__, cpu_count=8,
        cpu_model="Intel(R) Core(TM) i5-13500", gpu_count=0, gpu_model="",
        longitude=2.35, latitude=48.85, ram_total_size=31.2, tracking_mode="machine",
        cpu_utilization_percent=12.5, ram_utilization_percent=40.0, ram_used_gb=12.4)


def _emissions_csv(tmp_path, capsys) -> tuple:
    """A tuimeter emissions.csv of a session with two segments, RAPL and two GPUs."""
    f = record(tmp_path / "s.csv", [rapl_like(), gpus()], ticks=8, marks={0: "a", 4: "b"})
    text = run(capsys, f, "--format", "codecarbon")
    out = tmp_path / "emissions.csv"
    out.write_text(text)
    return out, text


def test_our_columns_are_codecarbons_fields_in_its_order():
    """The header is EmissionsData's fields, in order: a release that adds or moves one
    fails here (and tuimeter's COLUMNS must follow it)."""
    fields = [f.name for f in dataclasses.fields(EmissionsData)]
    assert list(COLUMNS) == fields, f"codecarbon {codecarbon.__version__}"


def test_has_valid_headers_accepts_a_tuimeter_file(tmp_path, capsys):
    out, _ = _emissions_csv(tmp_path, capsys)
    cc = FileOutput(out.name, str(tmp_path))
    assert cc.has_valid_headers(_codecarbon_row("x")), f"codecarbon {codecarbon.__version__}"


@pytest.mark.parametrize("mode", ["append", "update"])
def test_codecarbon_adds_its_row_and_keeps_ours(tmp_path, capsys, mode):
    """CodeCarbon's own writer, in both its modes, on a file tuimeter wrote: no backup
    (``emissions.csv.bak``: the foreign-file path), our rows as they were, its row after."""
    out, text = _emissions_csv(tmp_path, capsys)
    ours = pd.read_csv(io.StringIO(text))
    FileOutput(out.name, str(tmp_path), on_csv_write=mode).out(_codecarbon_row("cc-run"), None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emissions.csv", "s.csv"]
    both = pd.read_csv(out)
    assert list(both.columns) == list(COLUMNS)
    assert len(both) == len(ours) + 1 == 3
    pd.testing.assert_frame_equal(both.iloc[:len(ours)].reset_index(drop=True), ours,
                                  check_dtype=False)
    cc = both.iloc[-1]
    assert (cc.run_id, cc.cpu_power, cc.ram_used_gb, cc.tracking_mode) == (
        "cc-run", 42.5, 12.4, "machine")
    # ours still say nothing about what was not recorded
    assert ours[["cpu_utilization_percent", "ram_used_gb", "water_consumed"]].isna().all().all()


def test_a_codecarbon_tracker_appends_its_run_to_our_file(tmp_path, capsys, monkeypatch):
    """The user's path: CodeCarbon's own (offline) tracker around some work, told to
    write into the emissions.csv tuimeter wrote. It adds its run; ours stay."""
    out, text = _emissions_csv(tmp_path, capsys)
    monkeypatch.chdir(tmp_path)  # CodeCarbon reads ./.codecarbon.config: none here
    for key in [k for k in os.environ if k.startswith("CODECARBON_")]:
        monkeypatch.delenv(key)
    tracker = codecarbon.OfflineEmissionsTracker(
        country_iso_code="FRA", output_dir=str(tmp_path), output_file=out.name,
        project_name="cc-tracker", log_level="error")
    tracker.start()
    sum(range(100_000))
    tracker.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emissions.csv", "s.csv"]
    both = pd.read_csv(out)
    ours = pd.read_csv(io.StringIO(text))
    assert list(both.project_name) == ["tuimeter"] * len(ours) + ["cc-tracker"]
    pd.testing.assert_frame_equal(both.iloc[:len(ours)].reset_index(drop=True), ours,
                                  check_dtype=False)
