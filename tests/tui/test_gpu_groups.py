"""Many GPUs at 80x24 and 120x40: the GPUs of one model collapse into one line
(``8 x H200``) when every GPU's line would leave the chart fewer than 5 lines or the
process table fewer than 4 rows; ``x`` expands them (a table that still does not fit is
cut, its rows scroll under the header); nothing overflows into a scroll bar, whose thumb
(``▇▇``) read as stray sparkline cells. Over a fake NVML (tests/fakes/fake_pynvml.py) of
3 and 8 H200s and a followed job, on a fake clock: the snapshots are deterministic."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from textual import events

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.scripted import rapl_like
from tuimeter.tui.device_groups import device_groups, group_sample
from tuimeter.tui.widgets import DomainTable, PowerChart, ProcessPanel
from tuimeter.tui.widgets._process_table import ProcessTable

from .conftest import FixedJob, ScriptedAttributor, make_app, screen_lines, tick

#: each GPU's power, W (gpu i: 600 + i, so that every line differs)
BASE_W = 600.0


def gpu_app(n: int, monkeypatch, tmp_path: Path | None = None):
    """The live view over rapl_like and ``n`` fake H200s behind a fake pynvml, a followed
    job of three processes; (app, clock, gpus)."""
    from tuimeter.sensors.nvml import NvmlSensor

    gpus = [FakeGpu(uuid=f"GPU-snap-{i:04d}", power_mw=int((BASE_W + i) * 1000))
            for i in range(n)]
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus))
    tmp_path = tmp_path or Path(tempfile.mkdtemp(prefix="tuimeter-gpus-"))
    app, clock = make_app(tmp_path, sensors=[rapl_like(), NvmlSensor()],
                          attributor=ScriptedAttributor(), attribution="on", job=FixedJob())
    return app, clock, gpus


async def run(pilot, clock, gpus, n: int = 1) -> None:
    """``n`` one-second ticks, each GPU's counter advanced by its power first; the GPUs'
    own readings (model, busy, memory ...) read before the last."""
    for i in range(n):
        for g in gpus:
            g.advance(g.power_mw / 1000, 1.0)
        if i == n - 1:
            pilot.app.engine.refresh_devices()
        await tick(pilot, clock)


def layout(app) -> tuple[int, int, list[str]]:
    """(the chart's lines, the process rows shown, the screen's lines)."""
    chart = app.query_one(PowerChart)
    table = app.query_one(ProcessTable)
    return chart.region.height, min(table.visible_rows, table.row_count), screen_lines(app)


def assert_fits(app) -> None:
    """Nothing scrolls: the footer is on the last line, the status line above it, and the
    screen has no scroll bar (its thumb is the ``▇▇`` seen in the footer)."""
    assert not app.screen.show_vertical_scrollbar
    lines = screen_lines(app)
    assert "? Help" in lines[-1] and "q Quit" in lines[-1]
    assert lines[-2].startswith(" Sensors:")
    panel = app.query_one(ProcessPanel)
    assert panel.region.bottom <= app.query_one("Footer").region.y


@pytest.mark.asyncio
@pytest.mark.parametrize("n", [3, 8])
async def test_80x24_collapses_the_gpus_into_one_line_and_keeps_chart_and_processes(
        monkeypatch, n):
    """Guards 3 GPUs and a job at 80x24 leaving no process rows and no status line, and
    ``▆▆`` cells (the screen's scroll bar) on the CO2e line."""
    app, clock, gpus = gpu_app(n, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await run(pilot, clock, gpus, 3)
        table = app.query_one(DomainTable)
        assert table.collapsed
        key = device_groups(table.domains)[0].key
        assert key in table.row_keys and "gpu0" not in table.row_keys
        assert table.cell_text(key, "name").endswith(f"{n} x H200")
        # the group's power is its members' sum (instant field: 600 + i W each)
        assert table.row_data(key).now_w == pytest.approx(sum(BASE_W + i for i in range(n)))
        chart_h, rows, lines = layout(app)
        assert chart_h >= 5 and rows >= 4
        assert_fits(app)
        assert any(f"{n} x H200" in line for line in lines)


@pytest.mark.asyncio
async def test_x_expands_the_gpus_and_the_table_scrolls_under_its_header(monkeypatch):
    app, clock, gpus = gpu_app(8, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await run(pilot, clock, gpus, 2)
        await pilot.press("x")
        await run(pilot, clock, gpus)
        table = app.query_one(DomainTable)
        assert not table.collapsed and "gpu7" in table.row_keys
        hidden = table.rows_out_of_sight
        assert hidden > 0  # 12 domains do not fit over a chart of 5 and 4 process rows
        assert f"domain ({hidden} more)" in table.row_text("header")
        chart_h, rows, lines = layout(app)
        assert chart_h >= 5 and rows >= 4
        assert_fits(app)
        assert any(" total " in line for line in lines)  # the total stays in sight
        assert not any("gpu7" in line for line in lines)
        for _ in range(hidden):  # the wheel brings the last GPUs into sight
            table.post_message(events.MouseScrollDown(table, 30, 3, 0, 1, 0, False, False,
                                                      False))
            await pilot.pause()
        await pilot.pause()
        assert any("gpu7" in line for line in screen_lines(app))
        await pilot.press("x")  # back to one line per model
        await run(pilot, clock, gpus)
        assert table.collapsed and table.rows_out_of_sight == 0


@pytest.mark.asyncio
async def test_120x40_shows_eight_gpus_each_and_the_chart_keeps_its_room(monkeypatch):
    """Guards a 2-line chart and ``▇▇`` in the footer at 120x40 with 8 GPUs: the
    process panel gives up rows (not under 4) so that the chart keeps its lines."""
    app, clock, gpus = gpu_app(8, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await run(pilot, clock, gpus, 3)
        table = app.query_one(DomainTable)
        assert not table.collapsed and table.rows_out_of_sight == 0
        chart_h, rows, lines = layout(app)
        assert chart_h >= 8 and rows >= 4
        assert_fits(app)
        assert app.query_one(PowerChart).series_keys[-1] == "gpu7"


def test_a_group_adds_its_members_and_a_lost_tick_is_a_gap():
    from tests.fakes.scripted import domain
    from tuimeter.model import DomainKind, DomainSample, Provenance, Status

    def sample(i, history, status=Status.OK):
        d = domain(f"gpu{i}", DomainKind.GPU, source="nvml")
        return DomainSample(domain=d, power_w=history[-1], energy_j=1.0,
                            total_energy_j=10.0 * (i + 1), co2_g=0.0, total_co2_g=0.0,
                            status=status, history_w=tuple(history))

    g = group_sample([sample(0, [1.0, 2.0, 3.0]), sample(1, [None, 5.0, 7.0]),
                      sample(2, [9.0, 9.0])])
    assert g.history_w == (16.0, 19.0)  # aligned on the newest ticks
    assert g.total_energy_j == 60.0 and g.lost == 0 and g.provenance == Provenance.MEASURED.value
    lost = group_sample([sample(0, [1.0, None], Status.LOST), sample(1, [2.0, 3.0])])
    assert lost.history_w == (3.0, None) and lost.lost == 1


@pytest.mark.parametrize("n", [3, 8])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_snapshot_gpus_and_a_followed_job(snap_compare, monkeypatch, n, size):
    """3 and 8 H200s with a followed job, at 80x24 (one line per model) and 120x40."""
    app, clock, gpus = gpu_app(n, monkeypatch)

    async def run_before(pilot) -> None:
        await run(pilot, clock, gpus, 4)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_every_series_of_an_eight_gpu_machine_has_its_own_character():
    """Guards `*` standing for both package-0 and gpu4 (10 characters for 12 domains):
    under NO_COLOR the character is all that tells the series apart."""
    from tests.fakes.scripted import ScriptedSensor, domain
    from tests.helpers import make_engine
    from tuimeter.model import DomainKind
    from tuimeter.tui.widgets._power_chart import chart_series

    gpus = ScriptedSensor("nvml", [domain(f"gpu{i}", DomainKind.GPU, source="nvml")
                                   for i in range(8)], {f"gpu{i}": 600.0 for i in range(8)})
    engine, clock = make_engine([rapl_like(), gpus])
    engine.open()
    clock.advance(1.0)
    engine.tick()
    series = chart_series(engine.snapshot, parts=True)
    assert len(series) == 13
    assert len({s.marker for s in series}) == 13 and len({s.colour for s in series}) == 13
