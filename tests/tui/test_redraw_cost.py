"""The UI's CPU: a frame repaints what changed, and nothing else.

Counted, not timed: every ``refresh`` and ``update`` a frame asks of the main screen's
widgets is recorded while the same snapshot is drawn again (``MainScreen.redraw``, as after
a pause or an interval change). A widget that repaints on every frame whatever its data (the
top bar, the chart, the process table's rows put in again) shows up here. A frame whose
numbers change asks for no layout (a layout walks and places every widget of the screen),
and a domain whose figures change repaints its own line of the table alone.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace

import pytest
from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from tuimeter.job import JobWatcher
from tuimeter.tui.widgets import DomainTable, JobPanel, ProcessPanel, TopBar, TotalsPanel
from tuimeter.tui.widgets._process_table import ProcessTable

from .conftest import JOB, ScriptedAttributor, make_app, proc, screen_text, tick


@contextlib.asynccontextmanager
async def _live(tmp_path):
    """``(app, clock, pilot, attributor)``: the scripted processes shown at 120x40 after
    three ticks; quits at the end."""
    att = ScriptedAttributor()
    app, clock = make_app(tmp_path, attributor=att, attribution="on")
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.pause()
        yield app, clock, pilot, att
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_frame_with_unchanged_data_repaints_nothing(tmp_path, monkeypatch):
    async with _live(tmp_path) as (app, clock, pilot, _):
        calls: list[str] = []
        refresh, update = Widget.refresh, Static.update

        def counted_refresh(self, *a, **k):
            calls.append(f"refresh {type(self).__name__}")
            return refresh(self, *a, **k)

        def counted_update(self, *a, **k):
            calls.append(f"update {type(self).__name__}")
            return update(self, *a, **k)

        monkeypatch.setattr(Widget, "refresh", counted_refresh)
        monkeypatch.setattr(Static, "update", counted_update)
        drawn = app.main.frames_drawn
        app.main.redraw()  # the same snapshot: a frame is drawn, nothing in it changed
        assert app.main.frames_drawn == drawn + 1
        assert calls == []
        await tick(pilot, clock, dt=2.0)  # a new snapshot (a chart dot's time later)
        assert {"refresh TopBar", "refresh PowerChart", "refresh DomainTable"} <= set(calls)
        assert "0:00:05" in str(app.main.query_one(TopBar).content)
        monkeypatch.undo()


class _GrowingJob(ScriptedAttributor):
    """The followed job's joules grow at each tick, as a running job's do."""

    ticks = 0

    def attribute(self, interval_s, domains, now_s):
        procs, idle_w, job = super().attribute(interval_s, domains, now_s)
        self.ticks += 1
        return procs, idle_w, replace(job, total_energy_j=job.total_energy_j * self.ticks)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_frame_with_new_numbers_asks_for_no_layout(tmp_path, monkeypatch, size):
    """Guards a layout of the whole screen on every frame: the followed job's panel was
    updated with Textual's default ``layout=True`` whenever its figures changed. New
    numbers in the domain table, totals, top bar, chart and job panel repaint them, and no
    widget asks for a layout (nor does the screen do one) while their sizes stay, at
    80x24 (the compact layout) too."""
    attributor = _GrowingJob()
    app, clock = make_app(tmp_path, attributor=attributor, attribution="on",
                          job=JobWatcher(os.getpid()))  # a job that keeps running
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 3)
        await pilot.pause()
        asked: list[str] = []
        layouts: list[int] = []
        refresh, refresh_layout = Widget.refresh, Screen._refresh_layout

        def counted_refresh(self, *a, **k):
            if k.get("layout"):
                asked.append(type(self).__name__)
            return refresh(self, *a, **k)

        def counted_layout(self, *a, **k):
            layouts.append(1)
            return refresh_layout(self, *a, **k)

        monkeypatch.setattr(Widget, "refresh", counted_refresh)
        monkeypatch.setattr(Screen, "_refresh_layout", counted_layout)
        job_before = str(app.main.query_one(JobPanel).content)
        drawn = app.main.frames_drawn
        for _ in range(2):
            await tick(pilot, clock)
        await pilot.pause()
        assert app.main.frames_drawn == drawn + 2
        assert str(app.main.query_one(JobPanel).content) != job_before
        assert "0:00:05" in str(app.main.query_one(TopBar).content)
        assert asked == [] and layouts == []
        monkeypatch.undo()
        await pilot.press("q")


@contextlib.asynccontextmanager
async def _three_ticks_in(tmp_path):
    """``(app, pilot, snapshot drawn)``: the scripted sensors at 120x40, three ticks in."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.pause()
        yield app, pilot, app.main.drawn.snapshot


@contextlib.contextmanager
def _repainted(monkeypatch):
    """The screen regions the compositor repaints meanwhile."""
    repainted: list[Region] = []
    update_widgets = Compositor.update_widgets

    def recorded(self, widgets):
        update_widgets(self, widgets)
        repainted.extend(self._dirty_regions)

    with monkeypatch.context() as patch:
        patch.setattr(Compositor, "update_widgets", recorded)
        yield repainted


@pytest.mark.asyncio
async def test_one_domains_new_figures_repaint_its_line_alone(tmp_path, monkeypatch):
    """Guards repainting a widget per cell: in a snapshot where only gpu0's figures differ,
    the screen repaints one region of the domain table, gpu0's line."""
    async with _three_ticks_in(tmp_path) as (app, pilot, snap):
        table = app.main.query_one(DomainTable)
        gpu = next(s for s in snap.domains if s.domain.id == "gpu0")
        hotter = replace(gpu, power_w=gpu.power_w + 7.0, total_energy_j=gpu.total_energy_j + 7.0,
                         history_w=(*gpu.history_w[1:], gpu.power_w + 7.0))
        changed = replace(snap, domains=tuple(hotter if s is gpu else s for s in snap.domains))
        with _repainted(monkeypatch) as repainted:
            table.show(changed)
            await pilot.pause()
        content = table.content_region
        line = content.y + 1 + [s.domain.id for s in snap.domains].index("gpu0")  # header
        assert [r for r in repainted if r.overlaps(table.region)] == \
            [Region(content.x, line, content.width, 1)]
        assert f"{gpu.power_w + 7.0:.1f} W" in screen_text(app)[0]
        await pilot.press("q")


def _frame_refreshes(monkeypatch) -> list[tuple[Widget, tuple, bool]]:
    """Every ``refresh`` asked from now on, as (widget, regions, layout)."""
    calls: list[tuple[Widget, tuple, bool]] = []
    refresh = Widget.refresh

    def recorded(self, *regions, **kw):
        calls.append((self, regions, bool(kw.get("layout"))))
        return refresh(self, *regions, **kw)

    monkeypatch.setattr(Widget, "refresh", recorded)
    return calls


@pytest.mark.asyncio
async def test_a_new_set_of_processes_asks_for_no_layout(tmp_path, monkeypatch):
    """The top processes change almost every second: rows added, removed and reordered
    must not re-lay out the screen (a full-screen layout was half the UI's CPU). Before,
    the table (a DataTable) asked for one whenever its row count changed, and the panel
    whenever it grew."""
    from textual.screen import Screen

    async with _live(tmp_path) as (app, clock, pilot, att):
        layouts: list[int] = []
        refresh_layout = Screen._refresh_layout
        monkeypatch.setattr(Screen, "_refresh_layout", lambda self, *a, **k: (
            layouts.append(1), refresh_layout(self, *a, **k))[1])
        calls = _frame_refreshes(monkeypatch)
        table = app.main.query_one(ProcessTable)
        procs = att.procs + tuple(proc(500 + i, f"new{i}", 1.0 + i) for i in range(12))
        for att.procs, att.members, rows in (
                (procs[:2], JOB[:1], 3),  # rows removed
                (procs, JOB, 19),  # rows added, more than fit
                (procs[::-1], JOB[1:], 18)):  # reordered, one removed
            await tick(pilot, clock)
            await pilot.pause()
            assert table.row_count == rows
        assert table.row_count > table.visible_rows
        assert [type(w).__name__ for w, _, layout in calls if layout] == []
        assert layouts == []
        monkeypatch.undo()


@pytest.mark.asyncio
async def test_one_processs_new_power_repaints_its_line_only(tmp_path, monkeypatch):
    """A frame in which one process's power changed repaints that row's line of the
    table and nothing else of it. Before, any changed cell made the DataTable render every
    visible cell again."""
    async with _live(tmp_path) as (app, clock, pilot, att):
        panel = app.main.query_one(ProcessPanel)
        table = app.main.query_one(ProcessTable)
        line = 1 + [r.pid for r, _ in panel.rows].index(400)  # below the header
        calls = _frame_refreshes(monkeypatch)
        att.procs = tuple(proc(400, "firefox", 13.0, energy_j=60.0) if p.pid == 400 else p
                          for p in att.procs)  # 12 W before; the order is the same
        await tick(pilot, clock, 2)  # the table draws every 2 s
        await pilot.pause()
        assert [(w, r) for w, r, _ in calls if w is table or w is panel] == [
            (table, (Region(0, line, table.size.width, 1),))]
        assert "13.0 W" in table.rows[line - 1][5].plain
        monkeypatch.undo()


@pytest.mark.asyncio
async def test_a_tick_without_process_rows_keeps_the_table_and_its_focus(tmp_path, monkeypatch):
    """Guards hiding the table whenever a tick had no process rows (at 0.1 s, a tick in
    which no process's CPU time moved): each time the screen was laid out again, the table
    lost the focus and the footer was rebuilt (a quarter of a core at 0.1 s). The table
    stays, empty for that tick, and takes its rows back without a layout."""
    async with _live(tmp_path) as (app, clock, pilot, att):
        table = app.main.query_one(ProcessTable)
        assert app.screen.focused is table and table.row_count > 0
        layouts: list[int] = []
        refresh_layout = Screen._refresh_layout
        monkeypatch.setattr(Screen, "_refresh_layout", lambda self, *a, **k: (
            layouts.append(1), refresh_layout(self, *a, **k))[1])
        calls = _frame_refreshes(monkeypatch)
        procs, members = att.procs, att.members
        att.procs, att.members = (), None
        await tick(pilot, clock)
        await pilot.pause()
        assert table.display and table.row_count == 0 and app.screen.focused is table
        att.procs, att.members = procs, members
        await tick(pilot, clock)
        await pilot.pause()
        assert table.row_count > 0 and app.screen.focused is table
        assert [type(w).__name__ for w, _, layout in calls if layout] == [] and layouts == []
        monkeypatch.undo()


@pytest.mark.asyncio
async def test_new_elapsed_time_and_energy_repaint_those_lines_of_the_totals(tmp_path,
                                                                             monkeypatch):
    """Guards the totals panel drawn whole (a Static re-rendering its seven lines on every
    frame): in a snapshot one second later at the same average power, the screen repaints
    the panel's lines whose text changed (the elapsed time, the joules, the Wh), each alone,
    and makes strips for those lines only."""
    from tuimeter.tui.widgets._totals_panel import totals_lines

    async with _three_ticks_in(tmp_path) as (app, pilot, snap):
        panel = app.main.query_one(TotalsPanel)
        t = snap.total
        later = replace(snap, elapsed_s=snap.elapsed_s + 1.0, total=replace(
            t, total_energy_j=t.total_energy_j * (snap.elapsed_s + 1.0) / snap.elapsed_s))
        old, new = totals_lines(snap), totals_lines(later)
        changed = [y for y, (a, b) in enumerate(zip(old, new)) if a != b]
        assert {0, 3} <= set(changed) and 1 not in changed and 2 not in changed  # Now, Average
        made = panel.lines_made
        with _repainted(monkeypatch) as repainted:
            panel.show(later)
            await pilot.pause()
        region = panel.content_region
        assert sorted((r for r in repainted if r.overlaps(region)), key=lambda r: r.y) == \
            [Region(region.x, region.y + y, region.width, 1) for y in changed]
        assert panel.lines_made - made == len(changed)
        assert f"Elapsed {new[0][1]}" in screen_text(app)[0]
        await pilot.press("q")
