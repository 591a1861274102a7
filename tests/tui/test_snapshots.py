"""Screens pinned as SVG snapshots (pytest-textual-snapshot), from a deterministic replay
of tests/data/sessions/demo.csv: fake clock, fixed host, 0% monitor CPU, no blinking.
Update after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the new SVGs before committing them."""

from __future__ import annotations

import pytest

from tests.fakes.scripted import FakeClock

from .conftest import replay_app, tick

#: the replay is shown at this tick: training phase, all markers but the last on screen
TICKS = 90


def _at(ticks: int, *keys: str):
    clock = FakeClock()
    app = replay_app(clock)

    async def run_before(pilot) -> None:
        await tick(pilot, clock, ticks)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_main_screen(snap_compare, size):
    app, run_before = _at(TICKS)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_help_screen(snap_compare):
    app, run_before = _at(10, "question_mark")
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_paused_with_lost_gpu(snap_compare):
    """gpu1 was lost in the recording at 91-94 s: its row says [LOST] and N/A."""
    app, run_before = _at(92, "p")
    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_chart_zoomed_with_parts(snap_compare, size):
    """The chart's last 2 minutes (`[`) with the parts and psys drawn too (`v`): a legend
    entry and a colour per series."""
    app, run_before = _at(TICKS, "left_square_bracket", "v")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def _processes(*keys: str, theme: str | None = None):
    """The live view over scripted sensors and attribution (a followed job of three
    processes, four others) on a fake clock, after ``keys``."""
    import tempfile
    from pathlib import Path

    from .conftest import ScriptedAttributor, make_app

    app, clock = make_app(Path(tempfile.mkdtemp(prefix="tuimeter-snap-")),
                          attributor=ScriptedAttributor(), attribution="on", theme=theme)

    async def run_before(pilot) -> None:
        await tick(pilot, clock, 3)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("size,keys", [((80, 24), ()), ((160, 48), ("s", "t"))])
def test_process_table(snap_compare, size, keys):
    """80x24: the job's processes first; 160x48: sorted by energy, as a tree."""
    app, run_before = _processes(*keys)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_process_details(snap_compare):
    app, run_before = _processes("down", "enter")
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)



def test_light_theme(snap_compare):
    app, run_before = _processes(theme="textual-light")
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
