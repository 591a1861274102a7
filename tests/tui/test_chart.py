"""The power chart: which series it draws, its time window and keys ([ ] v), its legend,
braille or ASCII markers, its markers' labels, and that it is built once per change, for
the size it is drawn at."""

from __future__ import annotations

import math

import contextlib

import pytest
from rich.style import Style

from tests.fakes.scripted import FakeClock, ScriptedSensor, domain, rapl_like
from tests.helpers import make_engine
from tuimeter.model import DomainKind
from tuimeter.tui.widgets import PowerChart
from tuimeter.tui.widgets._power_chart import (DEFAULT_WINDOW_S, WINDOWS_S, chart_series,
                                               header_lines, in_window, marker_labels,
                                               window_label)

from .conftest import gpu_sensor, make_app, replay_app, tick

BRAILLE = range(0x2801, 0x2900)  # braille cells with at least one dot


def chart_lines(app) -> list[str]:
    chart = app.query_one(PowerChart)
    return ["".join(seg.text for seg in chart.render_line(y)) for y in range(chart.size.height)]


@contextlib.asynccontextmanager
async def running(tmp_path, size: tuple[int, int], ticks: int = 5, aged: bool = False):
    """The app over scripted sensors at ``size``, ``ticks`` ticks in: (pilot, clock);
    quits at the end. ``aged``: a first tick of 10 minutes makes the session older than
    the window (the x axis then spans the window, as it scrolls)."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        if aged:
            await tick(pilot, clock, 1, dt=600.0)
        await tick(pilot, clock, ticks)
        yield pilot, clock
        await pilot.press("q")


async def pressed(pilot, *keys: str) -> list[str]:
    """Press ``keys``, let the app draw, and return the chart's lines (building its frame)."""
    await pilot.press(*keys)
    await pilot.pause()
    return chart_lines(pilot.app)


def snapshot(sensors, ticks: int = 3):
    engine, clock = make_engine(sensors)
    engine.open()
    for _ in range(ticks):
        clock.advance(1)
        snap = engine.tick()
    return snap


# ---- what is drawn ------------------------------------------------------------------------


def test_series_are_the_total_and_each_device_parts_off():
    """Default: the total, then packages, DRAM and each GPU; core (a part of its package)
    and psys (the whole platform) only when asked."""
    snap = snapshot([rapl_like(), gpu_sensor()])
    keys = [s.key for s in chart_series(snap)]
    assert keys == ["total", "package-0", "package-0/dram", "gpu0"]
    assert [s.key for s in chart_series(snap, parts=True)] == [
        "total", "package-0", "package-0/core", "package-0/dram", "psys", "gpu0"]
    total = chart_series(snap)[0]
    assert total.history_w == snap.total.history_w and total.marker == "@"


def test_a_small_chart_draws_the_total_alone_unless_asked_for_everything():
    snap = snapshot([rapl_like(), gpu_sensor()])
    assert [s.key for s in chart_series(snap, total_only=True)] == ["total"]
    assert len(chart_series(snap, total_only=True, parts=True)) == 6


def test_one_device_is_the_total_so_it_is_not_drawn_twice():
    one = ScriptedSensor("rapl", [domain("package-0"),
                                  domain("package-0/core", DomainKind.CORE, in_total=False)],
                         {"package-0": 30.0, "package-0/core": 20.0})
    snap = snapshot([one])
    assert [s.key for s in chart_series(snap)] == ["total"]
    assert [s.key for s in chart_series(snap, parts=True)] == [
        "total", "package-0", "package-0/core"]


def test_the_window_keeps_the_last_seconds_relative_to_now():
    times = [float(t) for t in range(1000)]
    hist = [float(t) for t in range(1000)]
    xs, ys = in_window(times, hist, 300, 1000)
    assert xs[0] == -300.0 and xs[-1] == 0.0 and len(xs) == 301
    assert ys[-1] == 999.0
    xs, ys = in_window(times, hist, 300, 50)  # thinned to about 50, the newest kept
    assert 50 <= len(xs) <= 51 and xs[-1] == 0.0
    hist[-2] = None  # a lost tick: no point, no zero; or a break in the line
    assert -1.0 not in in_window(times, hist, 30, 100)[0]
    xs, ys = in_window(times, hist, 30, 100, gaps=True)
    assert (xs[-2], ys[-2]) == (-1.0, None)
    assert in_window([], [], 300, 10) == ([], [])


def test_window_labels():
    assert [window_label(w) for w in WINDOWS_S] == [
        "30 s", "1 min", "2 min", "5 min", "10 min", "30 min", "1 h"]


def test_legend_fills_two_lines_then_counts_what_is_left():
    base = Style()
    legend = [("━━", f"domain-{i}", base) for i in range(8)]
    lines = header_lines("W, last 5 min", legend, 60, base)
    texts = ["".join(s.text for s in line) for line in lines]
    assert len(texts) == 2 and all(len(t) <= 60 for t in texts)
    assert texts[0].startswith("W, last 5 min  ━━ domain-0")
    shown = sum(t.count("━━") for t in texts)
    assert texts[-1].endswith(f"+{8 - shown}") and shown == 7
    assert ["".join(s.text for s in line) for line in header_lines("T", legend[:1], 60, base)
            ] == ["T  ━━ domain-0"]


# ---- the keys -----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_brackets_zoom_the_window_and_the_title_says_it(tmp_path):
    """`[` shows a shorter window, `]` a longer one, within WINDOWS_S; the first line says
    which; the x axis ends at "now"."""
    async with running(tmp_path, (120, 40), 5) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        assert chart.window_s == DEFAULT_WINDOW_S == 300
        assert chart_lines(app)[0].startswith("W, session (window 5 min)")  # 5 s old
        lines = await pressed(pilot, "left_square_bracket")
        assert chart.window_s == 120
        assert lines[0].startswith("W, session (window 2 min)")
        assert lines[-1].rstrip().endswith("now")
        await pressed(pilot, *["left_square_bracket"] * 5)
        assert chart.window_s == WINDOWS_S[0]
        lines = await pressed(pilot, *["right_square_bracket"] * 9)
        assert chart.window_s == WINDOWS_S[-1] and lines[0].startswith("W, session (window 1 h)")


@pytest.mark.asyncio
async def test_v_toggles_the_parts(tmp_path):
    async with running(tmp_path, (160, 48), 5) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        assert "package-0/core" not in (await pressed(pilot))[0]
        assert chart.series_keys == ("total", "package-0", "package-0/dram", "gpu0")
        lines = await pressed(pilot, "v")
        assert chart.show_parts and "package-0/core" in lines[0] and "psys" in lines[0]
        assert chart.series_keys == ("total", "package-0", "package-0/core", "package-0/dram",
                                     "psys", "gpu0")
        await pressed(pilot, "v")
        assert "psys" not in chart.series_keys


@pytest.mark.asyncio
async def test_at_80x24_the_chart_draws_the_total_alone(tmp_path):
    """Unless `v` asks for every series."""
    async with running(tmp_path, (80, 24), 5) as (pilot, clock):
        app = pilot.app
        lines = await pressed(pilot)
        assert app.query_one(PowerChart).series_keys == ("total",)
        assert "total" in lines[0] and "package-0" not in lines[0]
        await pressed(pilot, "v")
        assert len(app.query_one(PowerChart).series_keys) == 6


@pytest.mark.asyncio
async def test_zoom_while_paused_redraws_the_frozen_data(tmp_path):
    async with running(tmp_path, (120, 40), 5) as (pilot, clock):
        await pilot.press("p")
        await tick(pilot, clock, 5)  # recorded, not drawn
        assert (await pressed(pilot, "left_square_bracket"))[0].startswith(
            "W, session (window 2 min)")


# ---- how it is drawn ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_figure_is_built_once_per_change_not_per_repaint(tmp_path):
    """A repaint without new data (a notification over it, a timer) reuses the frame; new
    snapshots that move the chart by a dot (two ticks: a dot is ~1.9 s here), a zoom or a
    resize build one."""
    async with running(tmp_path, (120, 40), 5) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        chart_lines(app)
        built = chart.builds
        for _ in range(3):
            chart.refresh()
            await pilot.pause()
            chart_lines(app)
        assert chart.builds == built
        await tick(pilot, clock, 2)
        chart_lines(app)
        assert chart.builds == built + 1
        await pilot.press("right_square_bracket")
        await pilot.pause()
        chart_lines(app)
        assert chart.builds == built + 2


@pytest.mark.asyncio
async def test_a_new_snapshot_under_the_same_axes_reuses_plotexts_frame(tmp_path):
    """plotext's frame (axes, ticks, marker lines) is built again only when the axes
    change (here a marker); the lines drawn over a kept frame are those of a fresh one."""
    async with running(tmp_path, (120, 40), 30, aged=True) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)

        def fresh_lines() -> list[str]:
            chart._axes = chart._cache_key = None  # forget both: build from scratch
            return chart_lines(app)

        chart_lines(app)
        built, axes = chart.builds, chart.axes_builds
        await tick(pilot, clock, 1, dt=2.0)  # a dot's time; constant power: the same axes
        lines = chart_lines(app)
        assert chart.builds == built + 1 and chart.axes_builds == axes
        assert fresh_lines() == lines
        axes = chart.axes_builds
        await pilot.press("m")  # a marker: a line plotext draws
        await tick(pilot, clock, 1)
        lines = chart_lines(app)
        assert chart.axes_builds == axes + 1 and any("│" in line for line in lines[3:-2])
        await tick(pilot, clock, 1, dt=2.0)  # the marker moved left: the axes changed again
        lines = chart_lines(app)
        assert chart.axes_builds == axes + 2 and fresh_lines() == lines


@pytest.mark.asyncio
async def test_braille_in_colour_ascii_characters_under_no_color(tmp_path, monkeypatch):
    """Braille lines when colour tells the series apart; under NO_COLOR each series is its
    own character (the total `@`, the table's key for each domain), the legend says which."""
    for no_color in (False, True):
        if no_color:
            monkeypatch.setenv("NO_COLOR", "1")
        (tmp_path / str(no_color)).mkdir()
        app, clock = make_app(tmp_path / str(no_color))
        async with app.run_test(size=(120, 40)) as pilot:
            await tick(pilot, clock, 30)
            await pilot.press("left_square_bracket", "left_square_bracket")  # last 1 min
            await pilot.pause()
            lines = chart_lines(app)
            plot = "".join(lines[2:])
            has_braille = any(ord(ch) in BRAILLE for ch in plot)
            assert has_braille != no_color
            assert ("@" in plot) == no_color
            assert ("@ total" in lines[0]) == no_color and ("━━ total" in lines[0]) != no_color
            await pilot.press("q")


def test_the_total_and_each_device_have_their_own_colour():
    snap = snapshot([rapl_like(), gpu_sensor()])
    series = chart_series(snap)
    assert series[0].colour == ""  # the text colour, bold: readable on light and dark
    colours = [s.colour for s in series[1:]]
    assert len(set(colours)) == len(colours) and all(colours)
    assert len({s.code for s in series}) == len(series)


@pytest.mark.asyncio
async def test_series_cells_carry_their_colour(tmp_path):
    """The cells plotext draws for a series come out in that series' colour (read from its
    colour matrix), the axes in the widget's."""
    async with running(tmp_path, (120, 40), 30) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        colours = set()
        for y in range(2, chart.size.height):
            for seg in chart.render_line(y):
                if any(ord(ch) in BRAILLE for ch in seg.text) and seg.style is not None:
                    colours.add(seg.style.color.name if seg.style.color else None)
        assert {"bright_cyan", "bright_yellow"} <= colours  # package-0, package-0/dram


def test_plotext_colour_codes_are_never_cells():
    """plotext colours the marker lines and labels itself (``ESC[38;5;0m│``) whatever the
    theme; those codes must not reach the terminal as text (the fallback path)."""
    from tuimeter.tui.widgets._power_chart import _plain

    plain = ("  0.0┤ \x1b[0m\x1b[38;5;0m│\x1b[0m \x1b[48;5;15m\x1b[38;5;8mwarmup\x1b[0m *+\x1b[0m\n"
             "     └\x1b[1m─\x1b[0m┘\n")
    assert _plain(plain).splitlines() == ["  0.0┤ │ warmup *+", "     └─┘"]


def test_chart_of_the_running_app_has_no_escape_codes():
    """The app as `tuimeter` runs it (App.run, not run_test): the chart with markers on it
    draws as plain cells."""
    clock = FakeClock()
    app = replay_app(clock)

    async def pilot_fn(pilot):
        await tick(pilot, clock, 92)
        await pilot.press("left_square_bracket")  # the last 2 min: the labels fit
        await pilot.pause()
        app.exit(chart_lines(app))

    lines = app.run(headless=True, auto_pilot=pilot_fn, size=(100, 30))
    assert any("warmup" in line for line in lines)
    assert not [line for line in lines if "\x1b" in line]


@pytest.mark.asyncio
async def test_chart_is_built_for_the_width_it_is_drawn_at():
    """Guards the chart thinned and labelled for the width it had when a snapshot was
    shown, not the one it is drawn at: a frame that falls due before the first layout
    (width 0) drew 10 points a series, and a resize while paused kept the old width's
    points (the snapshot tests' flake). Shown at 80 columns, paused, widened to 160: the
    same chart as one shown at 160."""
    charts = []
    for sizes in (((160, 48),), ((80, 24), (160, 48))):
        clock = FakeClock()
        app = replay_app(clock)
        async with app.run_test(size=sizes[0]) as pilot:
            await tick(pilot, clock, 90)
            await pilot.press("p")
            for size in sizes[1:]:
                await pilot.resize_terminal(*size)
                await pilot.pause()
            charts.append(chart_lines(app))
            await pilot.press("q")
    assert charts[0] == charts[1]


@pytest.mark.asyncio
async def test_the_window_is_the_session_until_the_session_is_older(tmp_path):
    """Guards a first minute drawn as a sliver of a 5-minute chart: until the session is
    older than the window the x axis spans the session (the shortest of SPANS_S that
    holds it), so the line starts at the left edge; then the window, scrolling."""
    from tuimeter.tui.widgets._power_chart import SPANS_S, shown_span

    assert shown_span(0.0, 300) == 10 and shown_span(59.0, 300) == 60
    assert shown_span(299.0, 300) == 300 and shown_span(5000.0, 300) == 300
    assert shown_span(40.0, 30) == 30 and all(s in SPANS_S for s in (10, 60, 120))
    async with running(tmp_path, (120, 40), 59) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        lines = chart_lines(app)
        assert chart.span_s == 60 and lines[0].startswith("W, session (window 5 min)")
        assert "-1m" in lines[-1] and "-5m" not in lines[-1]  # the axis: the last minute
        plot = [line for line in lines if "┤" in line or "│" in line]
        left = min(i for line in plot for i, ch in enumerate(line)
                   if 0x2800 < ord(ch) <= 0x28FF)
        axis = next(line.index("┌") for line in lines if "┌" in line)
        assert left - axis <= 3  # the line starts at the left edge, not 4/5 in
        await tick(pilot, clock, 1, dt=300.0)
        lines = chart_lines(app)
        assert chart.span_s == 300 and lines[0].startswith("W, last 5 min")
        assert "-5m" in lines[-1]


def test_marker_labels_are_cut_before_the_next_marker():
    """Guards overlapping marker labels (`marmarepoch 2, "fa`): on one row a label ends a
    column before the next label, is cut to fit, and is dropped when under 3 characters."""
    assert marker_labels([(10.0, "mark 1"), (14.0, 'epoch 2, "fast"'), (60.0, "eval")],
                         0.0, 100.0, 101) == [(10.0, "mar", "left", 0),
                                              (14.0, 'epoch 2, "fa', "left", 0),
                                              (60.0, "eval", "left", 0)]
    assert marker_labels([(10.0, "mark 1"), (12.0, "epoch 2")], 0.0, 100.0, 101) == [
        (12.0, "epoch 2", "left", 0)]


def test_marker_labels_are_staggered_on_two_rows_and_never_touch():
    """Guards `train coold`: with two rows a label that would run into the one before
    goes on the second row, whole; a third in the same place cuts the one that ends first."""
    labels = marker_labels([(10.0, "training"), (14.0, "cooldown"), (60.0, "eval")],
                           0.0, 100.0, 101, rows=2)
    assert labels == [(10.0, "training", "left", 0), (14.0, "cooldown", "left", 1),
                      (60.0, "eval", "left", 0)]
    crowded = marker_labels([(10.0, "training"), (12.0, "cooldown"), (15.0, "eval 1")],
                            0.0, 100.0, 101, rows=2)
    for row in (0, 1):  # on each row a blank column between two labels, at least
        spans = sorted((round(x) - (len(t) - 1 if a == "right" else 0),
                        round(x) + (0 if a == "right" else len(t) - 1))
                       for x, t, a, r in crowded if r == row)
        assert all(b[0] - a[1] >= 2 for a, b in zip(spans, spans[1:]))
    assert [(t, r) for _, t, _, r in crowded] == [("trai", 0), ("cooldown", 1), ("eval 1", 0)]


def test_a_label_at_the_right_edge_ends_at_its_marker():
    """A marker just added sits at "now": its label goes left of it, where there is room,
    and stops a column after the previous label."""
    assert marker_labels([(98.0, "mark 1")], 0.0, 100.0, 101) == [(98.0, "mark 1", "right", 0)]
    assert marker_labels([(90.0, "warmup"), (98.0, "mark 1")], 0.0, 100.0, 101) == [
        (90.0, "warmup", "left", 0), (98.0, "mar", "left", 0)]  # cut short on the right
    assert marker_labels([(80.0, "warmup"), (98.0, "mark 1")], 0.0, 100.0, 101) == [
        (80.0, "warmup", "left", 0), (98.0, "mark 1", "right", 0)]


@pytest.mark.asyncio
async def test_close_markers_do_not_overprint_their_labels(tmp_path):
    """Two markers a second apart on the running chart: the first label is cut (or
    dropped), the second shown whole, never one written over the other."""
    async with running(tmp_path, (100, 30), 20) as (pilot, clock):
        app = pilot.app
        app.engine.add_marker("mark 1")
        await tick(pilot, clock, 1)
        app.engine.add_marker("epoch 2")
        await tick(pilot, clock, 20)
        await pilot.press("left_square_bracket", "left_square_bracket")  # 1 min: apart
        await pilot.pause()
        lines = chart_lines(app)
        line = next(line for line in lines if "epoch 2" in line)
        before = line[:line.index("epoch 2")].rstrip("│ ")
        assert not before or not before[-1].isalnum(), line  # nothing run into it


@pytest.mark.asyncio
async def test_chart_lines_are_continuous_under_no_color(monkeypatch):
    """Guards dotted chart lines (`* *  * *`) on a wide terminal: with fewer points than
    columns each series is a line, so the top series (the total, `@`) has a cell in every
    column from its first point to its last."""
    monkeypatch.setenv("NO_COLOR", "1")
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await tick(pilot, clock, 90)
        await pilot.press("left_square_bracket", "left_square_bracket")  # 60 points, 1 min
        await pilot.pause()
        lines = chart_lines(app)[2:]
        cols = sorted({i for line in lines for i, ch in enumerate(line) if ch == "@"})
        verticals = {i for line in lines for i, ch in enumerate(line) if ch == "│"}
        gaps = [c for c in range(cols[0], cols[-1] + 1) if c not in cols and c not in verticals]
        assert len(cols) > 60 and gaps == []
        await pilot.press("q")


def test_braille_lines_join_their_points_and_leave_labels_alone():
    """Two points a canvas apart make one joined line of dots, bottom-left to top-right,
    in its colour; a label's letters are not drawn over, a marker line is."""
    from tuimeter.tui.widgets._power_chart import draw_braille

    marker = [[" "] * 4 for _ in range(2)]  # 4 x 2 cells: 8 x 8 dots, rows bottom first
    marker[1][3] = "x"  # a label's letter, top right
    marker[0][1] = "│"  # a marker line
    colour = [["default"] * 4 for _ in range(2)]
    draw_braille(marker, colour, range(4), range(2), [(7, [0.0, 1.0], [0.0, 1.0])],
                 (0.0, 1.0, 0.0, 1.0))
    assert marker[0][0] == chr(0x2800 + 0x40 + 0x20)  # dots (0, 0) and (1, 1): "⡠"
    assert marker[0][1] != "│" and ord(marker[0][1]) in BRAILLE and colour[0][1] == 7
    assert marker[1][3] == "x" and colour[1][3] == "default"
    assert marker[1][2] != " " and colour[0][0] == 7


def test_a_lost_tick_breaks_the_braille_line():
    """No power is drawn where none is known: the dots stop before a lost tick and start
    again after it (the sparkline shows it as `·`)."""
    from tuimeter.tui.widgets._power_chart import draw_braille

    def drawn(ys):
        marker = [[" "] * 8]
        draw_braille(marker, [["default"] * 8], range(8), range(1),
                     [(7, [0.0, 1.0, 2.0], ys)], (0.0, 2.0, 0.0, 1.0))
        return "".join(marker[0])

    assert drawn([0.5, 0.5, 0.5]).strip(" ") == drawn([0.5, 0.5, 0.5])  # one joined line
    broken = drawn([0.5, None, 0.5])
    assert broken[0] != " " and broken[-1] != " " and "  " in broken


@pytest.mark.asyncio
async def test_a_new_snapshot_repaints_the_chart_lines_that_changed(tmp_path):
    """Flat series (constant power): a tick repaints the chart's lines that differ, not
    its whole height, makes strips for those lines only (the others are kept), and the
    screen then shows exactly the new frame."""
    from textual.geometry import Region

    from .conftest import screen_text

    async with running(tmp_path, (120, 40), 30, aged=True) as (pilot, clock):
        app = pilot.app
        chart = app.query_one(PowerChart)
        before = chart_lines(app)
        regions: list = []
        refresh = chart.refresh

        def recorded(*regions_, **kw):
            regions.extend(regions_ or [Region(0, 0, *chart.size)])
            return refresh(*regions_, **kw)

        chart.refresh = recorded
        made = chart.lines_made
        # a 4 s tick: the line grows by two braille dots or more (a 300 s window over about
        # 100 columns is 1.5 s a dot: a 1 s tick may add none, as the x axis falls)
        await tick(pilot, clock, 1, dt=4.0)
        del chart.refresh
        after = chart_lines(app)
        changed = {y for y, (a, b) in enumerate(zip(before, after)) if a != b}
        assert changed and len(changed) < chart.size.height
        assert {y for r in regions for y in range(r.y, r.bottom)} == changed
        assert chart.lines_made - made == len(changed)  # strips made for those lines only
        lines = screen_text(app)[0].splitlines()
        x, y = chart.region.offset
        assert [line[x:x + chart.size.width] for line in lines[y:y + chart.size.height]] \
            == [line.ljust(chart.size.width) for line in after]


def test_the_y_axis_has_round_limits_and_ticks():
    """Guards an axis at ``top * 1.1`` (ticks 16.8, 33.7 ... 101.0; a new plotext frame
    whenever the peak moved): the top and ticks are round steps (1, 2, 2.5, 5 x 10^k)
    above the data, at most as many as asked."""
    from tuimeter.tui.widgets._power_chart import nice_axis

    assert nice_axis(91.8) == (100.0, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0])
    assert nice_axis(48.0)[0] == 60.0 and nice_axis(1234.0)[0] == 1500.0
    assert nice_axis(0.0)[0] == 1.0  # no data yet: an axis all the same
    for top in (0.07, 0.3, 1.0, 7.5, 42.0, 99.0, 101.0, 190.0, 733.0, 5600.0, 48000.0):
        for most in (1, 2, 3, 5):
            y_top, ticks = nice_axis(top, most)
            step = ticks[1] - ticks[0]
            mantissa = step / 10 ** math.floor(math.log10(step))
            assert any(abs(mantissa - m) < 1e-9 for m in (1, 2, 2.5, 5))
            assert y_top >= top and len(ticks) - 1 <= most and ticks[-1] == y_top
    assert nice_axis(91.0) == nice_axis(94.0)  # a peak moving a little keeps the axis


def test_a_short_plot_keeps_a_tight_top_and_shows_fewer_ticks():
    """Guards a short plot (80x24) scaling 615 W of data to a 1000 W top: the top is the
    same as on a tall plot, and only as many ticks as the lines show apart are labelled."""
    from tuimeter.tui.widgets._power_chart import nice_axis, y_axis

    assert y_axis(615.0, 30) == nice_axis(615.0) == (800.0, [0.0, 200.0, 400.0, 600.0, 800.0])
    assert y_axis(615.0, 4) == (800.0, [0.0, 800.0])
    assert y_axis(615.0, 7) == (800.0, [0.0, 400.0, 800.0])
    for top in (0.3, 48.0, 615.0, 1234.0):
        for plot_h in range(3, 30):
            y_top, ticks = y_axis(top, plot_h)
            assert y_top == nice_axis(top)[0] and ticks[-1] == y_top
            assert len(ticks) - 1 <= max(1, (plot_h - 3) // 2)


def test_the_y_axis_of_impossible_data_is_the_empty_one():
    """A replayed file's infinite or NaN power never reaches the axis as a crash."""
    from tuimeter.tui.widgets._power_chart import nice_axis

    assert nice_axis(float("inf")) == nice_axis(float("nan")) == nice_axis(0.0)


@pytest.mark.asyncio
async def test_the_chart_moves_a_dot_at_a_time_and_a_pause_shows_the_tables_tick(tmp_path):
    """Drawing the chart was a quarter of the UI's CPU, and a tick that moves no dot (1 s,
    a dot of the 5-minute window is ~1.9 s at 120 columns; constant power) changes nothing
    a user can see: the chart stays as drawn; the next tick, a dot's time on, draws it. A
    jump of power draws at once; a pause draws the tick the table shows."""
    sensor = rapl_like()
    app, clock = make_app(tmp_path, sensors=[sensor])
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 1, dt=600.0)  # older than the window: the axis scrolls
        await tick(pilot, clock, 5)
        chart = app.query_one(PowerChart)
        latest = lambda: app.main.drawn.snapshot  # noqa: E731 (the table's tick)
        chart_lines(app)
        built, drawn = chart.builds, chart.drawn_snapshot
        assert drawn is latest()
        await tick(pilot, clock, 1)
        chart_lines(app)
        assert chart.builds == built and chart.drawn_snapshot is drawn is not latest()
        await tick(pilot, clock, 1)
        chart_lines(app)
        assert chart.builds == built + 1 and chart.drawn_snapshot is latest()
        sensor.set_power("package-0", 140.0, clock())
        await tick(pilot, clock, 1)  # 1 s on, but the total jumps by 100 W
        assert chart.drawn_snapshot is latest()
        await tick(pilot, clock, 1)  # steady again: waits for its dot
        assert chart.drawn_snapshot is not latest()
        await pilot.press("p")
        assert app.paused and chart.drawn_snapshot is latest()
        await pilot.press("q")
