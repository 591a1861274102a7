"""A replay plays to its last tick, says so, and every key keeps working afterwards.

The hang this guards: `tuimeter --replay demo.csv --speed 20` froze at 0:01:58 of 2:00,
"replay finished" never appeared, and no key seemed to do anything. The app kept its own
flag in ``self._running``, a name Textual uses for "the app is running": setting it to
False when the replay reached its end made Textual drop every later frame (the screen
froze on the last one drawn, the help and the quit never showed) while the app went on
taking keys. Pilot tests run headless, where frames are not written, so the end-to-end
test in a pseudo-terminal is the one that saw it; the attribute check catches the cause.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys

import pandas as pd
import pytest
from textual.message_pump import MessagePump
from textual.reactive import Reactive

from tests.fakes.scripted import FakeClock
from tuimeter.tui.format import fmt_energy, fmt_power
from tuimeter.tui.screens import HelpScreen
from tuimeter.tui.widgets import DomainTable, PowerChart, TopBar

from .conftest import DEMO, PtyRun, replay_app, tick, wait_for

RECORDED = pd.read_csv(DEMO)
LAST_S = float(RECORDED["elapsed_s"].max())  # 120 s


def _ui_classes():
    """Every class of tuimeter.tui that Textual runs (apps, screens, widgets)."""
    names = ["tuimeter.tui.app", "tuimeter.tui.main_screen", "tuimeter.tui.screens"]
    widgets = importlib.import_module("tuimeter.tui.widgets")
    names += [f"tuimeter.tui.widgets.{m.name}" for m in pkgutil.iter_modules(widgets.__path__)]
    for name in names:
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, MessagePump) \
                    and cls.__module__ == name:
                yield cls


def _shadowed(cls) -> list[str]:
    """Attributes ``cls`` assigns (``self.x = ...``) that its Textual base already has,
    other than what Textual means to be set (reactives, properties with a setter)."""
    base = next(b for b in cls.__mro__ if b.__module__.startswith("textual."))
    own = set(vars(base()))  # the base's instance attributes
    tree = ast.parse(inspect.getsource(cls))
    assigned = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                and n.value.id == "self"}
    bad = []
    for name in sorted(assigned):
        found = inspect.getattr_static(base, name, None)
        settable = isinstance(found, Reactive) or (isinstance(found, property)
                                                   and found.fset is not None)
        if name in own or (found is not None and not settable):
            bad.append(f"{cls.__name__}.{name}")
    return bad


def test_ui_classes_never_overwrite_an_attribute_textual_keeps():
    """The cause of the replay hang: TuimeterApp._running (Textual's own flag)."""
    classes = list(_ui_classes())
    assert {c.__name__ for c in classes} >= {"TuimeterApp", "MainScreen", "DomainTable"}
    assert [name for cls in classes for name in _shadowed(cls)] == []


def _last_tick_row(domain: str) -> pd.Series:
    rows = RECORDED[(RECORDED["kind"] == "sample") & (RECORDED["domain"] == domain)]
    return rows[rows["elapsed_s"] == LAST_S].iloc[0]


@pytest.mark.asyncio
async def test_replay_plays_to_its_last_tick_and_keys_work_after():
    """The last recorded tick is drawn (its time, its power, the recording's joules), the
    top line says `replay finished`, the app still runs, and ?, Esc, p, m and q all act;
    q ends with the last tick's snapshot."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, int(LAST_S) + 5)
        assert app.player.finished and app._replay_done
        top = str(app.query_one(TopBar).content)
        assert "0:02:00" in top and "replay finished" in top
        assert "every 1 s" in top
        table = app.query_one(DomainTable)
        pkg = _last_tick_row("package-0")
        assert table.row_data("package-0").now_w == pytest.approx(pkg["power_w"], rel=1e-6)
        cells = " ".join(table.cell_text("package-0", c) for c in ("power", "energy"))
        assert fmt_power(pkg["power_w"]) in cells
        recorded_j = RECORDED[RECORDED["kind"] == "sample"].groupby("domain")["energy_j"].sum()
        assert fmt_energy(recorded_j["package-0"]) in cells
        assert app.is_running  # Textual still draws (the hang: it thought it had stopped)
        # the chart too shows the last tick, though it moves the chart by less than a dot
        assert app.query_one(PowerChart).drawn_snapshot.elapsed_s == LAST_S

        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("p")
        assert app.paused
        await pilot.press("p")
        assert not app.paused
        await pilot.press("m")
        assert await wait_for(pilot, lambda: any("session has ended" in str(n.message)
                                                 for n in app._notifications))
        await pilot.press("q")
    assert app.return_value is not None and app.return_value.elapsed_s == LAST_S


@pytest.mark.asyncio
async def test_the_chart_shows_the_replays_last_tick_even_if_it_moves_no_dot(monkeypatch):
    """The chart draws a tick only when it moves it by a dot; the replay's last tick is
    drawn whatever it moves (here no tick after the first moves the chart)."""
    clock = FakeClock()
    app = replay_app(clock)
    monkeypatch.setattr(PowerChart, "moves", lambda self, snap, times_s: False)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, int(LAST_S) + 5)
        assert app.player.finished
        assert app.query_one(PowerChart).drawn_snapshot.elapsed_s == LAST_S
        await pilot.press("q")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_replay_in_a_terminal_finishes_and_quits_on_q(tmp_path):
    """End to end, as a user runs it: `tuimeter --replay demo.csv --speed 100` in a
    pseudo-terminal. The terminal receives `replay finished`, then the help on `?`, and
    `q` (closing the help) and `q` end the program with its summary, exit status 0."""
    run = PtyRun(["--replay", str(DEMO), "--speed", "100"],
                 {"XDG_DATA_HOME": str(tmp_path / "data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    try:
        assert run.wait_for(b"replay finished"), bytes(run.received[-2000:])
        mark = len(run.received)
        run.press("?")
        assert run.wait_for(b"tuimeter help", start=mark), "? showed no help"
        run.press("q")  # closes the help
        run.press("q")  # quits
        assert run.proc.wait(60) == 0
    finally:
        run.close()
    assert b"tuimeter: 120.0 s" in run.received  # the summary, after the app ended


@pytest.mark.asyncio
async def test_ctrl_c_quits_as_q_does():
    """Ctrl-C (Textual's default only says to press ctrl+q) ends the session like q."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.press("ctrl+c")
        assert await wait_for(pilot, lambda: not app.is_running)
    assert app.return_value is not None and app.return_value.elapsed_s == 3.0
