"""The live view's first numbers: the first tick comes ``Engine.SHORT_FIRST_INTERVAL_S``
after the sensors' first readings (power needs two readings an interval apart), not one
interval later; its frame is drawn at once; its session rows say how long it was and
carry the counter's energy exactly, and the report adds them up as any other.

Through ``tuimeter``'s own command line (``tui.run.build``) over a fake powercap tree;
waits are conditions, never timings."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from textual import events

from tests.fakes.powercap import FakePowercap
from tuimeter.session.report_cli import cmd_report
from tuimeter.tui.run import build
from tuimeter.tui.widgets import PowerChart

from .conftest import screen_text, wait_for

#: a power figure as the domain table shows it (bench/bench_ui_pty.py's FIRST_NUMBER)
POWER = re.compile(r"\d\.\d W")
#: the interval asked for: long, so that a first tick one interval after the start could
#: never be mistaken for the short one however slow the machine
INTERVAL_S = 5.0


def _fake(tmp_path, monkeypatch) -> FakePowercap:
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True)
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(fake.sensor_root))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # no doctor periods
    return fake


def _advance(fake: FakePowercap, units: dict[str, int]) -> dict[str, float]:
    """Advance each counter by whole steps; the joules given, per domain id."""
    given = {}
    for key, n in units.items():
        given[key] = n * fake.quantum_j(key)
        fake.advance(key, given[key])
    return given


@pytest.mark.asyncio
async def test_the_first_power_figure_comes_from_the_short_first_tick(tmp_path, monkeypatch,
                                                                      capsys):
    """`tuimeter -i 5 -o FILE`: the domain table shows a power figure from the first tick,
    whose interval is the short first one (well under 5 s); the session file's first
    sample rows have that interval_s and exactly the energy the counters moved by before
    it, pandas reads them, the final rows have the rest, and `tuimeter report` totals the
    two."""
    fake = _fake(tmp_path, monkeypatch)
    out = tmp_path / "ui.csv"
    session, problem = build(["-i", str(INTERVAL_S), "-o", str(out), "--no-socket",
                              "--no-gpu"])
    assert problem is None
    app = session.app
    # the sensors are open (their first readings taken); the sampling thread starts when
    # the app mounts, so all of this is in the first tick
    first_j = _advance(fake, {"package-0": 40_000, "package-0/dram": 8_000, "psys": 60_000})
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: POWER.search(screen_text(app)[0]), tries=400)
        shown = app.main.drawn.snapshot
        assert shown.seq == 1, "the first figure is the first tick's"
        assert 0 < shown.interval_s < INTERVAL_S
        last_j = _advance(fake, {"package-0": 20_000, "package-0/dram": 4_000,
                                 "psys": 30_000})
        await pilot.press("q")
    assert session.close() == 0
    capsys.readouterr()
    rows = pd.read_csv(out)
    samples = rows[rows.kind == "sample"].set_index("domain")
    first = samples[samples.elapsed_s == samples.elapsed_s.min()]
    final = samples[samples.elapsed_s == samples.elapsed_s.max()]
    assert len(samples) == 2 * len(first), "two ticks: the short first one and the final one"
    for key, joules in first_j.items():
        assert first.loc[key, "interval_s"] == pytest.approx(shown.interval_s, abs=1e-6)
        assert first.loc[key, "energy_j"] == pytest.approx(joules, abs=1e-6)
        assert first.loc[key, "power_w"] == pytest.approx(joules / shown.interval_s, rel=1e-3)
        assert first.loc[key, "provenance"] == "measured"
        assert final.loc[key, "energy_j"] == pytest.approx(last_j[key], abs=1e-6)
    assert cmd_report([str(out), "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    domains = rep["hosts"][0]["domains"]
    for key, joules in first_j.items():
        assert domains[key]["energy_j"] == pytest.approx(joules + last_j[key], abs=1e-5)
    counted = ("package-0", "package-0/dram")  # psys contains them: not added
    assert rep["total"]["energy_j"] == pytest.approx(
        sum(first_j[k] + last_j[k] for k in counted), abs=1e-5)


@pytest.mark.asyncio
async def test_the_first_numbers_are_drawn_at_once_then_the_cadence_holds(tmp_path,
                                                                          monkeypatch):
    """The frame of the session's start (no tick yet) is followed at once by the first
    tick's frame, whatever the frame cadence (here one frame a minute); the second tick
    waits for its frame as every later one does."""
    _fake(tmp_path, monkeypatch)
    session, problem = build(["-i", "1", "-o", str(tmp_path / "ui.csv"), "--no-socket",
                              "--no-gpu"], start_engine=False)
    assert problem is None
    app, engine = session.app, session.live.engine
    app.main.frame_s = 60.0
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_for(pilot, lambda: app.main.drawn is not None)
        assert app.main.drawn.snapshot.seq == 0
        engine.tick()
        assert await wait_for(pilot, lambda: app.main.latest.snapshot.seq == 1)
        await pilot.pause()
        assert app.main.drawn.snapshot.seq == 1
        engine.tick()
        assert await wait_for(pilot, lambda: app.main.latest.snapshot.seq == 2)
        await pilot.pause()
        assert app.main.drawn.snapshot.seq == 1, "a later tick waits for its frame"
        await pilot.press("q")
    session.close()


@pytest.mark.asyncio
async def test_a_resize_after_the_widgets_went_does_not_raise(tmp_path, monkeypatch):
    """A terminal closed as the UI starts: the app quits and its widgets go while a resize
    is still queued. Handling it looked the chart up and raised NoMatches; the traceback,
    printed to the closed terminal, ended the UI with status 1 (1 close in 10 to 40 at
    its first output). Now the layout stands down."""
    _fake(tmp_path, monkeypatch)
    session, problem = build(["-o", str(tmp_path / "ui.csv"), "--no-socket", "--no-gpu"],
                             start_engine=False)
    assert problem is None
    app = session.app
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await app.main.query_one(PowerChart).remove()
        app.main._widgets.clear()  # as at start, before any frame looked them up
        app.main.post_message(events.Resize(app.size, app.size))
        await pilot.pause()
        app.main._place_toasts()
        await pilot.press("q")
    session.close()
