"""The job panel's work line (issue 28 item 2): units/s and J per unit once counts
arrive, from the engine's cumulative totals (a skipped frame loses nothing)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tuimeter.job import JobWatcher
from tuimeter.tui.widgets import JobPanel
from tuimeter.work import WorkWindow

from .conftest import make_app, tick


@pytest.mark.asyncio
async def test_job_panel_shows_units_per_s_and_j_per_unit_when_counts_arrive(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app, clock = make_app(tmp_path, job=JobWatcher(child.pid))
        async with app.run_test(size=(100, 30)) as pilot:
            await tick(pilot, clock, 2)
            assert "/s" not in str(app.query_one(JobPanel).content)  # no counts yet
            for _ in range(4):  # 32 samples a second; the machine counts 45 W + the GPU
                app.engine.add_work({"samples": 32.0})
                await tick(pilot, clock, 1)
            panel = str(app.query_one(JobPanel).content)
            (line,) = [ln for ln in panel.splitlines() if "samples:" in ln]
            watts = app.engine.snapshot.total.power_w  # no attribution here: the machine's
            assert line.strip() == f"samples: 32/s  {watts / 32:.4g} J/sample [machine energy]"
            await pilot.press("q")
    finally:
        child.kill()
        child.wait()


def test_work_window_rates_over_cumulative_totals():
    """J/unit and units/s over the window, from totals: a frame skipped in between
    changes nothing; a unit that did not move in the window is not shown."""
    w = WorkWindow(window_s=10.0)
    assert w.update(0.0, 0.0, ()) == []
    assert w.update(1.0, 100.0, (("samples", 10.0),)) == []  # one point: no span yet
    assert w.update(3.0, 300.0, (("samples", 30.0), ("tokens", 5.0))) == [
        ("samples", 10.0, 10.0), ("tokens", 2.5, 40.0)]
    # 20 s later (frames skipped): only the last 10 s window counts
    w.update(13.0, 1300.0, (("samples", 130.0), ("tokens", 5.0)))
    got = w.update(23.0, 2300.0, (("samples", 330.0), ("tokens", 5.0)))
    assert got == [("samples", 20.0, 5.0)]
    assert WorkWindow().update(1.0, None, (("samples", 1.0),)) == []
