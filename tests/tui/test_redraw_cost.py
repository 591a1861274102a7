"""The UI's CPU: a frame whose data has not changed repaints nothing.

Counted, not timed: every ``refresh`` and ``update`` a frame asks of the main screen's
widgets is recorded while the same snapshot is drawn again (``MainScreen.redraw``, as after
a pause or an interval change). A widget that repaints on every frame whatever its data (the
top bar, the chart, the process table's rows put in again) shows up here.
"""

from __future__ import annotations

import pytest
from textual.widget import Widget
from textual.widgets import Static

from tuimeter.tui.widgets import TopBar

from .conftest import ScriptedAttributor, make_app, tick


@pytest.mark.asyncio
async def test_a_frame_with_unchanged_data_repaints_nothing(tmp_path, monkeypatch):
    app, clock = make_app(tmp_path, attributor=ScriptedAttributor(), attribution="on")
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.pause()
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
        await pilot.press("q")
