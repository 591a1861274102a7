"""The live view at 80x24 with a followed job, on the machines tuimeter is for: a server's
6 RAPL domains (2 packages with their DRAM, a core, psys), 3 GPUs, 8 GPUs (one line per
model). The chart's plot (the rows the series are drawn in: no title, legend, axis line or
tick labels) keeps at least 5 rows and the process table at least 4 rows; the footer keeps
``? Help`` and ``q Quit``, the status line its line, and no part overlaps another. 120x40
and 160x48 show every domain as before.

The pilot tests go the user's way: ``tuimeter --powercap-root DIR -- CMD`` parsed by the
command line, the RAPL sensor over a fake powercap tree (tests/fakes/powercap.py, as
../shared/SENSORS.md describes a two-socket Xeon), the NVML sensor over a fake pynvml,
the command started and followed, the processes attributed from /proc. The snapshots use
scripted sensors and attribution on a fake clock (deterministic)."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import FakeClock, ScriptedSensor, domain
from tuimeter.model import DomainKind
from tuimeter.tui.run import build
from tuimeter.tui.widgets import (DomainTable, JobPanel, PowerChart, ProcessPanel,
                                  SensorStatusLine, TopBar)
from tuimeter.tui.widgets._process_table import ProcessTable

from .conftest import FixedJob, ScriptedAttributor, make_app, screen_lines, tick, wait_for

#: each RAPL zone's power, W (the fake tree's zones, as bench/bench_ui_pty.py drives them)
ZONES_W = {"package-0": 42.0, "package-0/dram": 5.0, "package-0/core": 25.0,
           "package-1": 38.0, "package-1/dram": 4.0, "psys": 90.0}
#: each GPU's power, W (gpu i: 600 + i)
GPU_W = 600.0
#: the cases: GPUs beside the server's 6 RAPL domains
CASES = {"6-rapl": 0, "3-gpus": 3, "8-gpus": 8}


def server_tree(root: Path) -> FakePowercap:
    """Two Xeon sockets with their DRAM, a core zone and psys: 6 domains."""
    fake = FakePowercap(root).intel_server(sockets=2, psys=True)
    fake.add_zone("intel-rapl:0:1", "core")
    return fake


def plot_rows(app) -> int:
    """The chart's plot rows as the screen shows them: its lines that start with the y
    axis (``100┤`` or ``   │``), not a frame line (``┌──``, ``└┬─``), the title and
    legend or the tick labels."""
    chart = app.query_one(PowerChart).region
    lines = [line[chart.x:chart.right] for line in screen_lines(app)[chart.y:chart.bottom]]
    return sum(1 for line in lines if re.match(r"^ *[0-9.]* ?[┤│]", line))


def assert_fits(app) -> None:
    """Every part in its own lines, top to bottom, none over another or past the
    screen; no scroll bar; the footer's last keys and the status line shown."""
    screen = app.screen
    assert not screen.show_vertical_scrollbar
    parts = [app.query_one(TopBar), app.query_one(DomainTable),
             app.query_one(PowerChart).parent, app.query_one(ProcessPanel),
             app.query_one(SensorStatusLine), app.query_one("Footer")]
    job = app.query_one(JobPanel)
    if job.display:
        parts.insert(1, job)
    regions = [p.region for p in parts]
    assert all(r.height >= 1 for r in regions)
    for above, below in zip(regions, regions[1:]):
        assert above.bottom <= below.y, (above, below)
    assert regions[-1].bottom <= app.size.height
    lines = screen_lines(app)
    assert "? Help" in lines[-1] and "q Quit" in lines[-1]
    assert lines[-2].startswith(" Sensors:")


async def _live(pilot, fake: FakePowercap, gpus: list[FakeGpu], n: int) -> None:
    """``n`` ticks of the engine a second apart on its fake clock (the command runs for
    real), each after every zone's and GPU's counter advanced by a second of its power."""
    for i in range(n):
        pilot.app.engine.clock.advance(1.0)
        for zone, watts in ZONES_W.items():
            fake.advance(zone, watts)
        for g in gpus:
            g.advance(g.power_mw / 1000, 1.0)
        if i == n - 1:
            pilot.app.engine.refresh_devices()
        pilot.app.engine.tick()
        await pilot.pause()
    assert await wait_for(pilot, lambda: not pilot.app.main.frame_pending)


def _session(tmp_path: Path, monkeypatch, n_gpus: int):
    """``tuimeter --powercap-root DIR -o FILE --no-socket [--no-gpu] -- sh -c 'sleep &
    sleep & sleep & wait'`` (a job of 4 processes) as the command line builds it, its
    engine on a fake clock from now (a second a tick): (session, fake tree, GPUs)."""
    for name in [n for n in os.environ if n.startswith("TUIMETER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    fake = server_tree(tmp_path / "sys")
    gpus = [FakeGpu(uuid=f"GPU-small-{i:04d}", power_mw=int((GPU_W + i) * 1000))
            for i in range(n_gpus)]
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus))
    argv = ["--powercap-root", str(fake.sensor_root), "-o", str(tmp_path / "s.csv"),
            "--no-socket", *([] if gpus else ["--no-gpu"]),
            "--", "sh", "-c", "sleep 120 & sleep 120 & sleep 120 & wait"]
    session, problem = build(argv, start_engine=False)
    assert problem is None, problem
    session.app.engine.clock = FakeClock(session.app.engine.clock())
    return session, fake, gpus


@pytest.mark.asyncio
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)], ids=str)
async def test_a_followed_job_leaves_the_plot_5_rows_and_the_processes_4(
        tmp_path, monkeypatch, case, size):
    """Guards the plot of 1 row at 80x24 (a chart of 5 lines: its title and legend, a
    frame line above the plot, the x axis, its tick labels) with a followed job and a
    server's 6 RAPL domains, or 3 or 8 GPUs: the chart spends 2 lines around its plot on
    a short screen, the job panel one, and the domain table is cut to the room left (its
    rows scroll, ``domain (1 more)``). At 120x40 and 160x48 every domain shows."""
    session, fake, gpus = _session(tmp_path, monkeypatch, CASES[case])
    app = session.app
    try:
        async with app.run_test(size=size) as pilot:
            await _live(pilot, fake, gpus, 3)
            table, processes = app.query_one(DomainTable), app.query_one(ProcessTable)
            for _ in range(100):  # until the job's 4 processes are scanned and drawn
                if processes.row_count >= 4:
                    break
                await _live(pilot, fake, gpus, 1)
            await _live(pilot, fake, gpus, 1)
            assert "running" in str(app.query_one(JobPanel).content)
            assert processes.row_count >= 4
            assert plot_rows(app) >= 5, "\n".join(screen_lines(app))
            assert app.query_one(PowerChart).plot_rows >= 5
            shown = min(processes.visible_rows, processes.row_count)
            region = processes.region  # its header, then a line per row
            rows = [line[region.x:region.right] for line in
                    screen_lines(app)[region.y + 1:region.bottom]]
            assert shown >= 4 and sum(1 for line in rows if line.strip()) >= 4
            assert_fits(app)
            # one line per GPU model at 80x24, one line per GPU from 120x40
            assert table.collapsed is (size == (80, 24) and CASES[case] > 0)
            if size != (80, 24):
                assert table.rows_out_of_sight == 0
            if CASES[case]:  # the GPUs' line is in sight
                key = table.groups[0].key if table.collapsed else "gpu0"
                assert table.row_text(key).rstrip() in "\n".join(screen_lines(app))
    finally:
        session.close()  # stops the command


def server_sensor() -> ScriptedSensor:
    """The server's 6 RAPL domains, scripted (as the fake tree's zones, at ZONES_W)."""
    kinds = {"package-0/core": DomainKind.CORE, "psys": DomainKind.PSYS,
             "package-0/dram": DomainKind.DRAM, "package-1/dram": DomainKind.DRAM}
    order = ("package-0", "package-0/core", "package-0/dram", "package-1", "package-1/dram",
             "psys")
    return ScriptedSensor("rapl", [domain(d, kinds.get(d, DomainKind.PACKAGE),
                                          in_total=d not in ("package-0/core", "psys"))
                                   for d in order], dict(ZONES_W))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=str)
def test_snapshot_six_rapl_domains_and_a_followed_job(snap_compare, size):
    """A two-socket server (6 RAPL domains) with a followed job: at 80x24 the table cut
    to 5 of its domains (``domain (1 more)``), a plot of 5 rows, 4 process rows."""
    app, clock = make_app(Path(tempfile.mkdtemp(prefix="tuimeter-small-")),
                          sensors=[server_sensor()], attributor=ScriptedAttributor(),
                          attribution="on", job=FixedJob())

    async def run_before(pilot) -> None:
        await tick(pilot, clock, 4)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.asyncio
async def test_a_replayed_job_fits_80x24_from_the_frame_its_process_rows_come():
    """Guards the screen overflowing (a scroll bar, the status line gone) on the frame
    where a replay's process rows first came: the table was fitted to the process
    panel's single note line before the panel grew to 6 lines. The replay of a recorded
    job (tests/data/sessions/demo-job.csv: a package, 2 GPUs, its processes), 32 s of it
    played at once (as scripts/make_screenshots.py does)."""
    from tuimeter.tui.run import replay_app

    from .conftest import ROOT

    clock = FakeClock()
    app = replay_app(str(ROOT / "tests" / "data" / "sessions" / "demo-job.csv"), clock)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(32):
            clock.advance(1.0)
            app.player.run_due()
        await pilot.pause()
        assert await wait_for(pilot, lambda: not app.main.frame_pending)
        await pilot.pause()
        processes = app.query_one(ProcessTable)
        assert min(processes.visible_rows, processes.row_count) >= 4
        assert plot_rows(app) >= 5
        assert_fits(app)
