"""What the main screen says at every size from 80x24: tags, the totals panel's grid
line, the top bar, the sparklines' scale, the help's scrolling, where toasts go."""

from __future__ import annotations

import pytest

from tests.fakes.scripted import FakeClock, domain
from tuimeter.model import DomainKind
from tuimeter.tui.widgets._domain_table import row_name

from .conftest import replay_app, screen_text, tick, wait_for

SIZES = [(80, 24), (100, 30), (120, 40), (160, 48)]


def test_a_part_is_indented_under_its_package_with_its_tag_whole():
    core = domain("package-0/core", DomainKind.CORE, in_total=False)
    assert row_name(core, {"package-0"}, 18) == "└ core (part)"
    assert row_name(core, set(), 18) == "pkg0/core (part)"  # its package short, the tag whole
    assert row_name(core, set(), 12) == "pkg0… (part)"  # then cut
    long = domain("package-0-die-1/uncore", DomainKind.UNCORE, in_total=False)
    assert row_name(long, set(), 18).endswith("… (part)") and len(row_name(long, set(), 18)) == 18
    psys = domain("psys", DomainKind.PSYS, in_total=False)
    assert row_name(psys, {"package-0"}, 18) == "psys (whole)"
    dram = domain("package-0/dram", DomainKind.DRAM)  # counted: not indented, no tag
    assert row_name(dram, {"package-0"}, 18) == "package-0/dram"
    evil = domain("\x1b[2Jzone/core", DomainKind.CORE, in_total=False)
    assert "\x1b" not in row_name(evil, set(), 18) and row_name(evil, set(), 18).endswith("(part)")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_part_and_whole_tags_show_at_every_size(size):
    """Guards `package-0/core (part)` (23 cells in a 20-cell column): the tag wrapped onto
    a second line the one-line row never shows."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 3)
        text = screen_text(app)[0]
        assert "+ └ core (part)" in text and "% psys (whole)" in text
        await pilot.press("q")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_totals_grid_is_one_short_line_and_help_has_the_rest(size):
    """Guards "default world average: / 475 g/kWh (IEA 2019) (see / --country)": the
    source text wrapped over three lines of the 31-cell panel and was cut at 80x24."""
    from tuimeter.tui.screens import HelpScreen
    from tuimeter.tui.widgets import TotalsPanel

    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 3)
        panel = app.query_one(TotalsPanel)
        lines = panel.content.plain.splitlines()
        assert lines[-1] == "Grid    475 g/kWh world avg"
        assert all(len(line) <= panel.content_region.width for line in lines)
        assert lines[-1] in screen_text(app)[0]  # drawn, not cut
        await pilot.press("question_mark")
        help_text = app.screen.query_one("#help-body").render().plain
        assert isinstance(app.screen, HelpScreen)
        assert "default world average (IEA 2019), as recorded" in help_text
        assert "--country" in help_text
        await pilot.press("escape", "q")


def test_grid_source_in_a_few_cells():
    from tuimeter.settings import resolve_carbon
    from tuimeter.tui.widgets._totals_panel import grid_source

    assert grid_source(resolve_carbon()) == "world avg"
    assert grid_source(resolve_carbon("FRA")) == "FRA 2023"
    assert grid_source(resolve_carbon(None, 300)) == ""


def test_sparkline_shows_a_rows_own_variation():
    """Guards the near-solid blocks: scaled from 0 W, a package moving between 40 and
    48 W used only the top two bar heights."""
    from tuimeter.tui.widgets._spark_line import BARS, spark_text

    wave = [40.0, 42.0, 44.0, 46.0, 48.0, 46.0, 44.0, 42.0]
    drawn = spark_text(wave, 8)
    assert drawn[0] == BARS[0] and drawn[4] == BARS[-1]  # the row's full height
    assert len(set(drawn)) == 5
    noisy = [45.0, 45.1, 44.95, 45.05]  # +-0.1 W on 45 W: under 2% of it, drawn small
    assert {BARS.index(c) for c in spark_text(noisy, 4)} <= {2, 3, 4, 5}
    assert spark_text([45.0] * 3, 3) == BARS[4] * 3  # flat: the middle, not a block
    assert spark_text([0.0, 0.0, None], 4) == " " + BARS[0] * 2 + "·"


def test_sparkline_range_text():
    from tuimeter.tui.widgets._spark_line import fmt_range

    assert fmt_range(40.2, 48.4) == "40-48 W"
    assert fmt_range(2.61, 8.93) == "2.6-8.9 W"
    assert fmt_range(0.35, 0.9) == "350-900 mW"
    assert fmt_range(1200.0, 2500.0) == "1.2-2.5 kW"


@pytest.mark.asyncio
async def test_each_row_says_its_range_wide_or_on_hover():
    """From 40 cells the sparkline ends with its min-max; narrower (80x24) hovering it
    shows it. Both are the range of the ticks the bars show."""
    from tuimeter.tui.widgets import DomainTable

    for size, shown in (((120, 40), True), ((80, 24), False)):
        clock = FakeClock()
        app = replay_app(clock)
        async with app.run_test(size=size) as pilot:
            await tick(pilot, clock, 20)  # idle 18 W, then warm-up at 55 W from 15 s
            table = app.query_one(DomainTable)
            history = table.row_data("package-0").history_w
            want = f"{min(history):.0f}-{max(history):.0f} W"
            assert (want in table.row_text("package-0")) is shown
            assert (want in screen_text(app)[0]) is shown
            # the mouse over package-0's sparkline (line 1: after the header), then off it
            x = 1 + sum(w for key, w in table.shown_columns[:2])  # padding, name, badge
            await pilot.hover(DomainTable, offset=(x + 2, 1 + table.row_keys.index("package-0")))
            assert table.tooltip == f"{want} over the ticks shown"
            await pilot.hover(DomainTable, offset=(3, 1))  # its name
            assert table.tooltip is None
            await pilot.press("q")


@pytest.mark.asyncio
async def test_top_bar_separates_the_name_from_the_host():
    """Guards `tuimeterdemo-node`."""
    from tuimeter.tui.widgets import TopBar

    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 1)
        assert str(app.query_one(TopBar).content).startswith("tuimeter · demo-node  0:00:01")
        await pilot.press("q")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)])
async def test_help_says_it_scrolls_and_what_follows(size):
    """Guards the help at 80x24 cutting its Sensors, Carbon and Session file sections
    with nothing saying more follows: the title says how to scroll, the last line how
    much is left, and the keys reach its end."""
    from textual.containers import VerticalScroll

    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("question_mark")
        await pilot.pause()
        title = app.screen.query_one(".title").render().plain
        assert "scroll" in title and "Esc" in title
        scroll = app.screen.query_one(VerticalScroll)
        more = app.screen.query_one("#help-more")
        if size == (80, 24):
            assert scroll.max_scroll_y > 0
            assert "more lines below" in str(more.content)
        await pilot.press("end")
        assert await wait_for(pilot, lambda: str(more.content) == "(end of help)")
        assert "Session file" in screen_text(app)[0]  # the last section, drawn
        await pilot.press("escape", "q")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_notifications_stay_off_the_process_table(size):
    """Guards toasts stacked at the bottom right, over the process table's numbers: they
    are placed over the chart and totals."""
    from textual.widgets._toast import Toast

    from tuimeter.tui.widgets import PowerChart, ProcessPanel

    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=size, notifications=True) as pilot:
        await tick(pilot, clock, 2)
        for i in range(3):
            app.notify(f"notice {i}: " + "a long line of text " * 4, timeout=60)
        assert await wait_for(pilot, lambda: len(app.screen.query(Toast)) == 3)
        await pilot.pause()
        middle = app.query_one(PowerChart).parent.region
        table = app.query_one(ProcessPanel).region
        toasts = [t.region for t in app.screen.query(Toast)]
        assert all(middle.contains_region(r) and not r.overlaps(table) for r in toasts)
        assert "Processes: not replayed" in screen_text(app)[0]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_theme_chosen_while_running_restyles_the_domain_table(tmp_path):
    """The table keeps each line's strip between frames: a theme chosen while it runs
    draws it in the new theme's colours at once, not only the lines whose figures change."""
    from tuimeter.tui.widgets import DomainTable

    from .conftest import make_app

    app, clock = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 3)
        table = app.query_one(DomainTable)

        def colours() -> set:
            return {s.style.bgcolor for line in ("header", "total")
                    for s in table.render_line(0 if line == "header" else
                                               len(table.row_keys)) if s.style}

        dark = colours()
        app.theme = "textual-light"
        await pilot.pause()
        light = colours()
        assert light and light.isdisjoint(dark)
        await pilot.press("q")


@pytest.mark.asyncio
@pytest.mark.parametrize("gpu,follow", [(True, True), (False, False)],
                         ids=["7-domains-and-a-job", "6-domains"])
async def test_at_80x24_a_followed_job_leaves_the_process_table_whole(tmp_path, gpu, follow):
    """Guards the screen overflowing at 80x24 with a followed job and 7 domains: the
    process panel (fixed at 6 lines) was cut at the bottom, a scrollbar drawn over its
    last row, and its header counted rows that could not be seen. The panel takes what
    room is left (at least its header and a row): everything fits, every row it counts
    shows. With 6 domains and no job (13 lines for the chart and the panel) Textual gave
    the chart all 13 and pushed the panel off the screen, a scrollbar over the totals."""
    import os

    from tests.fakes.scripted import ScriptedSensor, rapl_like
    from tuimeter.job import JobWatcher
    from tuimeter.tui.widgets import ProcessPanel
    from tuimeter.tui.widgets._process_table import ProcessTable

    from .conftest import ScriptedAttributor, gpu_sensor, make_app

    second = ScriptedSensor("rapl1", [domain("package-1"),
                                      domain("package-1/dram", DomainKind.DRAM)],
                            {"package-1": 30.0, "package-1/dram": 4.0})
    app, clock = make_app(tmp_path, sensors=[rapl_like(), second] + [gpu_sensor()] * gpu,
                          attributor=ScriptedAttributor(), attribution="on",
                          job=JobWatcher(os.getpid()) if follow else None)
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.pause()
        panel, table = app.query_one(ProcessPanel), app.query_one(ProcessTable)
        footer = app.query_one("Footer")
        assert panel.region.bottom <= footer.region.y
        assert panel.region.contains_region(table.region) and table.region.height >= 2
        assert not panel.show_vertical_scrollbar and not app.screen.show_vertical_scrollbar
        shown = min(table.visible_rows, table.row_count)
        assert f"1-{shown} of {table.row_count}" in screen_text(app)[0]
        await pilot.press("q")
