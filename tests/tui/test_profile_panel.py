"""``tuimeter profile --ui``: the app shows the live profile's top functions in a panel
below the process table (the app's hook: ``profile_source``)."""

from __future__ import annotations

import pytest

from tuimeter.profile.result import FunctionStat
from tuimeter.tui.widgets import ProfilePanel

from .conftest import make_app, tick


def stat(name, energy_j, samples):
    return FunctionStat(name, "/w/train.py", 10, energy_j, energy_j, 1.0, 1.0, 1.0, 1.0,
                        samples, samples, samples < 10)


@pytest.mark.asyncio
async def test_the_profile_panel_lists_the_top_functions_live(tmp_path):
    """With a profile source the panel appears with the first snapshot and follows it:
    each function's energy, share and samples (``?`` under 10), escaped names."""
    app, clock = make_app(tmp_path)
    latest = [((), 0.0)]
    app.profile_source = lambda: latest[0]
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        panel = app.query_one(ProfilePanel)
        assert "waiting for the first samples" in str(panel.render())
        latest[0] = ((stat("train", 30.0, 120), stat("evil\x1b[2J", 10.0, 3)), 40.0)
        await tick(pilot, clock, 1)
        text = str(panel.render())
        assert "train (train.py:10)" in text and "75.0%" in text and "120 " in text
        assert "3?" in text and "\x1b" not in text
        await pilot.press("q")


@pytest.mark.asyncio
async def test_no_profile_panel_without_a_profile(tmp_path):
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 2)
        assert not app.query(ProfilePanel)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_new_figures_in_the_profile_panel_ask_for_no_layout(tmp_path, monkeypatch):
    """Guards a layout of the whole screen at each update of the panel: new figures on as
    many lines repaint it alone; a function more grows it by a line."""
    from textual.widget import Widget

    app, clock = make_app(tmp_path)
    latest = [((stat("train", 30.0, 120),), 30.0)]
    app.profile_source = lambda: latest[0]
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        panel = app.query_one(ProfilePanel)
        height = panel.region.height
        asked: list[bool] = []
        refresh = Widget.refresh

        def counted(self, *a, **k):
            if self is panel:
                asked.append(bool(k.get("layout")))
            return refresh(self, *a, **k)

        monkeypatch.setattr(Widget, "refresh", counted)
        latest[0] = ((stat("train", 45.0, 180),), 45.0)
        await tick(pilot, clock, 1)
        assert asked == [False] and "45.0 J" in str(panel.render())
        latest[0] = ((stat("train", 50.0, 200), stat("load", 5.0, 20)), 55.0)
        await tick(pilot, clock, 1)
        monkeypatch.undo()
        assert asked[-1] is True
        await pilot.pause()
        assert panel.region.height == height + 1 and "load" in str(panel.render())
        await pilot.press("q")
