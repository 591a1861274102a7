"""The UI's CPU: a frame whose data has not changed repaints nothing.

Counted, not timed: every ``refresh`` and ``update`` a frame asks of the main screen's
widgets is recorded while the same snapshot is drawn again (``MainScreen.redraw``, as after
a pause or an interval change). A widget that repaints on every frame whatever its data (the
top bar, the chart, the process table's rows put in again) shows up here.
"""

from __future__ import annotations

import contextlib

import pytest
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static

from tuimeter.tui.widgets import ProcessPanel, TopBar
from tuimeter.tui.widgets._process_table import ProcessTable

from .conftest import JOB, ScriptedAttributor, make_app, proc, tick


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
        await tick(pilot, clock)  # a new snapshot: the count sees what it changes
        assert "update TopBar" in calls and "refresh PowerChart" in calls
        assert "0:00:04" in str(app.main.query_one(TopBar).content)
        monkeypatch.undo()


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
        await tick(pilot, clock)
        await pilot.pause()
        assert [(w, r) for w, r, _ in calls if w is table or w is panel] == [
            (table, (Region(0, line, table.size.width, 1),))]
        assert "13.0 W" in table.rows[line - 1][5].plain
        monkeypatch.undo()
