"""`tuimeter sessions` lists the live view's sessions in the data folder (name, start,
duration, size, energy), and `tuimeter sessions prune` removes the oldest with the policy
the UI applies at each launch (session/retention.py): only session files tuimeter made
there, never a link, a file of another name, or one that is not tuimeter's CSV."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import env_for, tuimeter
from tuimeter.session.retention import HEADER

DEMO = Path(__file__).parent / "data" / "sessions" / "demo-job.csv"


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(tuimeter("sessions", *args), env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=60)


def folder_of(tmp_path) -> Path:
    """The data folder a UI launch with env_for(tmp_path) records into, with three
    sessions (copies of demo-job.csv, oldest first), a link and two files not ours."""
    folder = tmp_path / "data" / "tuimeter" / "sessions"
    folder.mkdir(parents=True)
    for day in (1, 2, 3):
        shutil.copy(DEMO, folder / f"session-2026120{day}-120000.csv")
    (folder / "session-20261201-120000.log").write_text("the command's output\n")
    outside = tmp_path / "precious.csv"
    shutil.copy(DEMO, outside)
    os.symlink(outside, folder / "session-20200101-000000.csv")  # the oldest name: a link
    (folder / "session-20200102-000000.csv").write_text("someone else's notes\n")
    (folder / "run.csv").write_bytes(HEADER + b"energy_j\n")  # named with -o, say
    return folder


def test_the_listing_names_each_of_our_sessions_with_its_start_duration_size_energy(tmp_path):
    folder = folder_of(tmp_path)
    r = run(tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert [s["name"] for s in listed] == [f"session-2026120{d}-120000.csv" for d in (1, 2, 3)]
    df = pd.read_csv(DEMO, keep_default_na=False, dtype={"label": str})
    total_j = df[df.kind == "total"].energy_j.astype(float).sum()
    first = listed[0]
    assert first["energy_j"] == pytest.approx(total_j) and first["provenance"] == "measured"
    assert first["duration_s"] == pytest.approx(df.elapsed_s.astype(float).max())
    assert first["start"] == df.timestamp.iloc[1]
    log = (folder / "session-20261201-120000.log").stat().st_size
    assert first["size_bytes"] == DEMO.stat().st_size + log  # with its command's log
    text = run(tmp_path)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0].startswith("3 sessions in ") and "keeps the newest 50 and 500 MB" in lines[0]
    assert "session-20261201-120000.csv" in lines[1] and "0:00:59" in lines[1]
    assert f"{total_j / 1000:.2f} kJ measured" in lines[1]
    assert "precious" not in text.stdout and "20200101" not in text.stdout


def test_a_big_session_is_listed_without_reading_it_whole(tmp_path):
    folder = tmp_path / "data" / "tuimeter" / "sessions"
    folder.mkdir(parents=True)
    big = folder / "session-20261205-120000.csv"
    with open(big, "wb") as fh:
        fh.write(DEMO.read_bytes())
        fh.truncate(9 * 10**6)  # past ENERGY_SCAN_BYTES: its end is no row (NULs)
    listed = json.loads(run(tmp_path, "--json").stdout)
    assert listed[0]["energy_j"] is None and listed[0]["start"] is not None
    assert "N/A (over 8 MB: tuimeter report FILE)" in run(tmp_path).stdout


def test_prune_keeps_the_newest_and_touches_nothing_else(tmp_path):
    folder = folder_of(tmp_path)
    before = set(os.listdir(folder))
    dry = run(tmp_path, "prune", "--keep", "1", "--dry-run")
    assert dry.returncode == 0 and set(os.listdir(folder)) == before
    assert "would remove session-20261201-120000.csv" in dry.stdout
    r = run(tmp_path, "prune", "--keep", "1")
    assert r.returncode == 0, r.stderr
    left = set(os.listdir(folder))
    assert "session-20261203-120000.csv" in left
    assert not {"session-20261201-120000.csv", "session-20261202-120000.csv",
                "session-20261201-120000.log"} & left  # its command's log went with it
    assert {"session-20200101-000000.csv", "session-20200102-000000.csv", "run.csv"} <= left
    assert (tmp_path / "precious.csv").read_bytes() == DEMO.read_bytes()
    assert "removed 2 sessions" in r.stdout and "1 left" in r.stdout


def test_prune_by_size(tmp_path):
    folder = folder_of(tmp_path)
    size_mb = DEMO.stat().st_size / 1e6
    r = run(tmp_path, "prune", "--max-mb", f"{2.5 * size_mb:.6f}")
    assert r.returncode == 0 and "removed 1 sessions" in r.stdout  # 3 (and a log) -> 2
    assert not (folder / "session-20261201-120000.csv").exists()


def test_a_linked_data_folder_is_neither_listed_nor_pruned(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    shutil.copy(DEMO, real / "session-20261201-120000.csv")
    (tmp_path / "data" / "tuimeter").mkdir(parents=True)
    os.symlink(real, tmp_path / "data" / "tuimeter" / "sessions")
    assert json.loads(run(tmp_path, "--json").stdout) == []
    assert run(tmp_path, "prune", "--keep", "0").returncode == 0
    assert (real / "session-20261201-120000.csv").exists()


@pytest.mark.parametrize("args,says", [(("prune", "--keep", "-1"), "below 0"),
                                       (("prune", "--max-mb", "lots"), "not a size"),
                                       (("--dry-run",), "--dry-run is for prune")])
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, args, says):
    folder = folder_of(tmp_path)
    before = set(os.listdir(folder))
    r = run(tmp_path, *args)
    assert r.returncode == 2 and says in r.stderr.splitlines()[-1]
    assert set(os.listdir(folder)) == before
