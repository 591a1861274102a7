"""The process table: its keys (sort, filter, tree, details, signals) and the mouse
(header and row clicks). Scripted attribution on a fake clock; the signal tests signal
child processes they start."""

from __future__ import annotations

import contextlib
import re
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tuimeter.engine import procsignal
from tuimeter.engine.procscan import make_scanner
from tuimeter.tui.process_screens import ProcessDetailScreen, SignalScreen
from tuimeter.tui.widgets import ProcessPanel
from tuimeter.tui.widgets._process_panel import FilterInput, ProcessTable

from .conftest import (JOB, OTHERS, ScriptedAttributor, make_app, proc, screen_text, tick,
                       wait_for)

#: the default order: by power, the followed job's processes first
BY_POWER = [301, 302, 300, 402, 400, 401, 403]


def shown(app) -> list[int]:
    """The pids of the table's rows, top to bottom, as drawn."""
    return [int(cells[1].plain) for cells in app.screen.query_one(ProcessTable).rows]


def panel(app) -> ProcessPanel:
    return app.main.query_one(ProcessPanel)


def selected_pid(app) -> int | None:
    row = panel(app).selected
    return None if row is None else row.pid


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


@contextlib.asynccontextmanager
async def running(tmp_path, attributor=None, size=(120, 40), **kw):
    """``(app, clock, pilot)`` of an app showing ``attributor``'s processes (default: the
    scripted job and four others) after two ticks; quits at the end."""
    app, clock = make_app(tmp_path, attributor=attributor or ScriptedAttributor(),
                          attribution="on", **kw)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 2)
        yield app, clock, pilot


# -- sorting ------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_s_cycles_the_sort_order_and_S_reverses_it(tmp_path):
    """Power, energy, CPU, GPU, name, pid and back to power; S reverses the current one;
    the job's processes stay first whatever the order; the header marks the column."""
    async with running(tmp_path) as (app, clock, pilot):
        assert shown(app) == BY_POWER
        assert app.screen.focused is app.screen.query_one(ProcessTable)
        await pilot.press("s")
        assert shown(app) == [302, 301, 300, 401, 400, 402, 403]  # energy
        assert "ENERGY▼" in screen_text(app)[0]
        await pilot.press("S")
        assert shown(app) == [300, 301, 302, 403, 402, 400, 401]  # energy, smallest first
        assert "ENERGY▲" in screen_text(app)[0]
        await pilot.press("s", "s")  # CPU, GPU
        assert shown(app) == BY_POWER
        await pilot.press("s")
        assert shown(app) == [301, 302, 300, 400, 401, 402, 403]  # name: firefox Xorg yes zsh
        await pilot.press("s")
        assert shown(app) == [300, 301, 302, 400, 401, 402, 403]  # pid
        await pilot.press("s")
        assert shown(app) == BY_POWER and "POWER▼" in screen_text(app)[0]


@pytest.mark.asyncio
async def test_the_cursor_stays_on_its_process_when_the_rows_move(tmp_path):
    """The table's rows are places: a new order, like new numbers, changes the cells in
    place, and the cursor follows its process."""
    att = ScriptedAttributor()

    def swap(new):
        att.procs = tuple(new if p.pid == new.pid else p for p in att.procs)

    async with running(tmp_path, att) as (app, clock, pilot):
        await pilot.press("down", "down", "down", "down")
        assert selected_pid(app) == 400
        table = app.screen.query_one(ProcessTable)
        swap(proc(400, "firefox", 99.0))
        await tick(pilot, clock, 2)  # the table draws every 2 s
        assert shown(app)[3:5] == [400, 402] and selected_pid(app) == 400
        assert table.cursor_row == 3
        swap(proc(401, "Xorg", 4.0, energy_j=900.0))  # new numbers, the same order
        await tick(pilot, clock, 2)  # the table draws every 2 s
        assert shown(app)[3:] == [400, 402, 401, 403]
        assert table.rows[5][5].plain == "4.0 W"
        assert selected_pid(app) == 400


# -- filter -------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_filter_finds_an_idle_process_the_top_rows_leave_out(tmp_path):
    """An idle `sleep` is not among the snapshot's top processes by power: the filter
    showed "0 shown". It looks through every process the machine runs (at 0 W), by pid
    and by its command line, and lets them go again when cleared."""
    from tuimeter.tui.process_rows import every_process_rows

    child = subprocess.Popen(["sleep", "120"])
    try:
        async with running(tmp_path, process_scan=every_process_rows) as (app, clock, pilot):
            assert child.pid not in shown(app)
            await pilot.press("slash", *str(child.pid), "enter")
            assert await wait_for(pilot, lambda: child.pid in shown(app))
            assert f"({len(shown(app))} shown)" in screen_text(app)[0]
            row = next(r for r, _ in app.screen.query_one(ProcessPanel).rows
                       if r.pid == child.pid)
            assert row.name == "sleep" and row.cmdline == "sleep 120" and row.power_w == 0
            await pilot.press("escape")
            await tick(pilot, clock)
            assert child.pid not in shown(app) and shown(app) == BY_POWER
    finally:
        child.kill()
        child.wait()


@pytest.mark.asyncio
async def test_slash_filters_by_name_command_line_user_or_pid(tmp_path):
    async with running(tmp_path) as (app, clock, pilot):
        await pilot.press("slash")
        box = app.screen.query_one(FilterInput)
        assert app.screen.focused is box
        await pilot.press(*"python")
        assert shown(app) == [301, 302]
        await pilot.press("enter")  # keeps the filter, back to the table
        assert app.screen.focused is app.screen.query_one(ProcessTable)
        assert not box.display and shown(app) == [301, 302]
        assert 'filter "python" (2 shown)' in screen_text(app)[0]
        await tick(pilot, clock)  # a new snapshot: still filtered
        assert shown(app) == [301, 302]
        await pilot.press("escape")  # Esc at the table clears it
        assert shown(app) == BY_POWER
        await pilot.press("slash", *"worker")  # the command line
        assert shown(app) == [302]
        await pilot.press("escape")  # Esc in the input clears it too
        assert shown(app) == BY_POWER and app.screen.focused is not box
        await pilot.press("slash", "4", "0")  # a pid
        assert shown(app) == [402, 400, 401, 403]
        await pilot.press("escape", "slash", *"root")  # the user
        assert shown(app) == BY_POWER
        await pilot.press("escape", "slash", *"pythonx", "backspace")  # editing keys work
        assert app.screen.query_one(FilterInput).value == "python" and shown(app) == [301, 302]
        await pilot.press("escape", "slash", *"nothing-like-this")
        assert shown(app) == []
        assert "(0 shown)" in screen_text(app)[0]
        await pilot.press("escape")
        assert shown(app) == BY_POWER


@pytest.mark.asyncio
async def test_keys_typed_at_once_after_slash_go_into_the_filter(tmp_path):
    """A paste or a fast typist: "/yes" and Enter arrive in one read. Before, the keys
    after "/" were queued to the table before the filter opened: "e" exported, "s" sorted
    and Enter opened the details."""
    from textual import events

    async with running(tmp_path) as (app, clock, pilot):
        for key, char in (("slash", "/"), ("y", "y"), ("e", "e"), ("s", "s"), ("enter", "\r")):
            app.post_message(events.Key(key, char))
        await pilot.pause()
        assert app.screen.query_one(FilterInput).value == "yes"
        assert shown(app) == [402] and panel(app).sort.name == "power"
        assert not any("exported" in n for n in notes(app))
        assert app.screen is app.main  # Enter closed the filter, it did not open details
        assert app.screen.focused is app.screen.query_one(ProcessTable)


# -- tree ---------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_t_shows_the_tree_the_job_first(tmp_path):
    """Children under their parent, in the sort order; the job's tree first; a filter keeps
    the ancestors of what it finds, so that it is drawn where it belongs."""
    async with running(tmp_path) as (app, clock, pilot):
        await pilot.press("t")
        assert shown(app) == [300, 301, 302, 400, 401, 403, 402]
        text = screen_text(app)[0]
        assert "├─ python3 train.py --epochs 3" in text
        assert "└─ python3 worker.py" in text and "└─ yes" in text
        assert "by power ▼, tree" in text
        await pilot.press("slash", *"yes", "enter")
        assert shown(app) == [403, 402]
        await pilot.press("escape", "t")
        assert shown(app) == BY_POWER and "├─" not in screen_text(app)[0]


# -- details ------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_enter_shows_the_selected_process_in_full(tmp_path):
    long_args = "worker.py " + " ".join(f"--option-{i}=value" for i in range(30))
    att = ScriptedAttributor()
    att.members = (*JOB[:2], proc(302, "python3", 8.0, ppid=300, args=long_args,
                                  in_job=True, energy_j=400.0))
    att.procs = OTHERS + att.members[1:]
    async with running(tmp_path, att) as (app, clock, pilot):
        assert "--option-29=value" not in screen_text(app)[0]  # cut in the table
        await pilot.press("down", "enter")
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen) and screen.row.pid == 302
        details = str(screen.query_one("#details").content)
        assert f"/usr/bin/python3 {long_args}" in details
        assert "part of the followed job" in details and "user         root" in details
        assert "8.0 W" in details and "400.0 J" in details
        await pilot.press("escape")
        assert app.screen is app.main and selected_pid(app) == 302


# -- mouse --------------------------------------------------------------------------------
def header_x(app, column: str) -> int:
    """The x of a column's header cell in the table."""
    x = 0
    for col in app.screen.query_one(ProcessTable).columns:
        if col.key == column:
            return x + 1
        x += col.width + 2
    raise KeyError(column)


@pytest.mark.asyncio
async def test_clicking_a_header_sorts_by_it_and_again_reverses(tmp_path):
    async with running(tmp_path) as (app, clock, pilot):
        await pilot.click(ProcessTable, offset=(header_x(app, "energy"), 0))
        assert shown(app) == [302, 301, 300, 401, 400, 402, 403]
        await pilot.click(ProcessTable, offset=(header_x(app, "energy"), 0))
        assert shown(app) == [300, 301, 302, 403, 402, 400, 401]
        await pilot.click(ProcessTable, offset=(header_x(app, "pid"), 0))
        assert shown(app) == [300, 301, 302, 400, 401, 402, 403]
        await pilot.click(ProcessTable, offset=(header_x(app, "command"), 0))
        assert shown(app) == [301, 302, 300, 400, 401, 402, 403]
        await pilot.click(ProcessTable, offset=(header_x(app, "job"), 0))  # not a sort
        assert shown(app) == [301, 302, 300, 400, 401, 402, 403]


@pytest.mark.asyncio
async def test_clicking_a_row_selects_it_and_again_opens_it(tmp_path):
    async with running(tmp_path) as (app, clock, pilot):
        await pilot.click(ProcessTable, offset=(20, 4))  # the header, then rows 0..3
        assert selected_pid(app) == BY_POWER[3] and app.screen is app.main
        await pilot.click(ProcessTable, offset=(20, 4))
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen.row.pid == 402
        await pilot.press("escape")


# -- signals ------------------------------------------------------------------------------
@pytest.fixture
def children():
    """Child processes to signal (``sleep 60``), killed at the end whatever happened."""
    started_procs: list[subprocess.Popen] = []

    def start() -> tuple[subprocess.Popen, float]:
        child = subprocess.Popen(["sleep", "60"])
        started_procs.append(child)
        st = make_scanner().read_one(child.pid)
        assert st is not None
        return child, st.start

    yield start
    for child in started_procs:
        if child.poll() is None:
            child.kill()
        child.wait()


async def select(pilot, pid: int) -> None:
    """Put the cursor on ``pid`` (filtering the table down to it)."""
    await pilot.press("slash", *str(pid), "enter")
    assert selected_pid(pilot.app) == pid


@pytest.mark.asyncio
async def test_k_asks_then_sends_sigterm_and_K_sigkill(tmp_path, children):
    (term, term_start), (kill, kill_start) = children(), children()
    att = ScriptedAttributor(procs=OTHERS + (
        proc(term.pid, "sleep", 1.0, args="60", start=term_start),
        proc(kill.pid, "sleep", 2.0, args="60", start=kill_start)), members=None)
    async with running(tmp_path, att) as (app, clock, pilot):
        await select(pilot, term.pid)
        await pilot.press("k")
        screen = app.screen
        assert isinstance(screen, SignalScreen)
        question = screen.question().plain
        assert question.startswith(f"Send SIGTERM to pid {term.pid} (sleep), user root?")
        await pilot.press("n")  # cancelled: nothing sent
        assert app.screen is app.main and term.poll() is None
        await pilot.press("k", "y")
        assert term.wait(timeout=30) == -signal.SIGTERM
        assert await wait_for(pilot, lambda: f"sent SIGTERM to pid {term.pid} (sleep)"
                              in notes(app))
        await pilot.press("escape")
        await select(pilot, kill.pid)
        await pilot.press("K")
        assert "SIGKILL" in app.screen.question().plain
        await pilot.press("enter")
        assert kill.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.asyncio
async def test_k_from_the_detail_view(tmp_path, children):
    child, start = children()
    att = ScriptedAttributor(procs=(proc(child.pid, "sleep", 1.0, start=start),), members=None)
    async with running(tmp_path, att) as (app, clock, pilot):
        await pilot.press("enter", "k")
        assert isinstance(app.screen, SignalScreen)
        await pilot.press("y")
        assert child.wait(timeout=30) == -signal.SIGTERM


@pytest.mark.asyncio
async def test_refusals_are_notices_not_tracebacks(tmp_path, children, monkeypatch):
    """pid 1, tuimeter itself, a pid now held by another process and another user's process
    are refused before any confirmation, with a notice; the app carries on."""
    child, start = children()
    other, other_start = children()
    att = ScriptedAttributor(procs=(
        proc(1, "init", 4.0), proc(os.getpid(), "tuimeter", 3.0),
        proc(child.pid, "sleep", 2.0, start=start + 1),  # the row's process has exited
        proc(other.pid, "sleep", 1.0, start=other_start)), members=None)
    async with running(tmp_path, att) as (app, clock, pilot):
        for pid, why in ((1, "pid 1 is not signalled"),
                         (os.getpid(), f"pid {os.getpid()} is tuimeter itself"),
                         (child.pid, f"pid {child.pid} has exited; the pid is now another")):
            await select(pilot, pid)
            await pilot.press("K")
            assert app.screen is app.main  # no confirmation
            assert any(n.startswith(f"not sent: {why}") for n in notes(app)), notes(app)
            await pilot.press("escape")
        monkeypatch.setattr(procsignal.os, "getuid", lambda: 4242)
        monkeypatch.setattr(procsignal.os, "geteuid", lambda: 4242)
        await select(pilot, other.pid)
        await pilot.press("k")
        assert app.screen is app.main
        assert any("belongs to root: only they or root may signal it" in n for n in notes(app))
        assert child.poll() is None and other.poll() is None
        assert app.is_running  # no exception ended it


@pytest.mark.asyncio
async def test_a_replays_processes_are_not_signalled(tmp_path, children):
    """Rows of a replay were recorded elsewhere, maybe long ago: a pid there names nothing
    here, even when a process here has it now."""
    child, start = children()
    att = ScriptedAttributor(procs=(proc(child.pid, "sleep", 1.0, start=start),), members=None)
    app, clock = make_app(tmp_path, attributor=att, attribution="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 2)
        await pilot.press("k")
        assert app.screen is app.main
        assert any("a replay's processes were recorded" in n for n in notes(app))
        await pilot.press("q")
    assert child.poll() is None


@pytest.mark.asyncio
async def test_a_process_that_exits_while_the_question_is_open(tmp_path, children):
    child, start = children()
    att = ScriptedAttributor(procs=(proc(child.pid, "sleep", 1.0, start=start),), members=None)
    async with running(tmp_path, att) as (app, clock, pilot):
        await pilot.press("k")
        child.kill()
        child.wait()
        await pilot.press("y")
        assert await wait_for(pilot, lambda: f"not sent: pid {child.pid} has exited"
                              in notes(app))


# -- untrusted text -----------------------------------------------------------------------
EVIL = "\x1b[31mEVIL"
SHOWN = "\\x1b[31mEVIL"


@pytest.mark.asyncio
async def test_an_escape_sequence_in_a_name_is_shown_escaped_everywhere(tmp_path, children):
    """Table, details and the question before a signal: the name and command line as
    text (ESC shown as \\x1b), never sent to the terminal, never markup."""
    child, start = children()
    evil = proc(child.pid, EVIL, 1.0, args=f"[b]{EVIL}[/b]", start=start)
    async with running(tmp_path, ScriptedAttributor(procs=(evil,), members=None)) as (app, clock, pilot):
        text, sent = screen_text(app)
        assert f"{SHOWN} [b]{SHOWN}[/b]" in text and "\x1b[31mEVIL" not in sent
        await pilot.press("enter")
        details = str(app.screen.query_one("#details").content)
        assert f"/usr/bin/{SHOWN} [b]{SHOWN}[/b]" in details and "\x1b" not in details
        assert "\x1b[31mEVIL" not in screen_text(app)[1]
        await pilot.press("k")
        assert isinstance(app.screen, SignalScreen)
        assert f"({SHOWN})" in app.screen.question().plain
        assert "\x1b[31mEVIL" not in screen_text(app)[1]
        await pilot.press("n")
    assert child.poll() is None


# -- a real job ---------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_tree_of_a_real_job_shows_its_idle_shell(tmp_path):
    """`sh -c 'sleep 60 & sleep 60 & wait'` followed by the real attributor: the tree has
    the shell (idle, 0 W) with its two children under it, first in the table."""
    from tuimeter.engine.attribution import Attributor
    from tuimeter.job import JobWatcher

    job = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        att = Attributor([])
        att.follow(job.pid)
        app, clock = make_app(tmp_path, attributor=att, attribution="on",
                              job=JobWatcher(job.pid, job))
        async with app.run_test(size=(120, 40)) as pilot:
            async def three() -> bool:
                await tick(pilot, clock)
                snap = app.main.drawn.snapshot
                # both children started and exec'd (between fork and exec one is "sh")
                return snap.job is not None and sorted(
                    m.name for m in snap.job.members) == ["sh", "sleep", "sleep"]

            for _ in range(300):  # until the shell has started both (bounded, no timing)
                if await three():
                    break
            else:
                job_now = app.main.drawn.snapshot.job
                pytest.fail(f"the job's processes: {job_now and job_now.members}")
            await pilot.press("t")
            rows = panel(app).rows
            assert len(rows) >= 3, rows
            assert [r.pid for r, _ in rows[:1]] == [job.pid]
            kids = [(r.name, prefix) for r, prefix in rows[1:3]]
            assert sorted(kids) == sorted([("sleep", "├─ "), ("sleep", "└─ ")])
            assert all(r.in_job for r, _ in rows[:3])
            await pilot.press("q")
    finally:
        subprocess.run(["pkill", "-P", str(job.pid)], check=False)
        job.kill()
        job.wait()


@pytest.mark.asyncio
async def test_the_panels_height_is_the_screens_not_its_rows(tmp_path):
    """Processes come and go every second: a panel that shrank and grew with them moved
    the chart and re-laid out the screen at each frame. With rows, it is 40 % of the
    screen above the footer whatever their number, and a new order or tree does not
    change it."""
    att = ScriptedAttributor()
    async with running(tmp_path, att) as (app, clock, pilot):
        assert panel(app).size.height == 15  # 40 % of the 39 lines above the footer
        chart = app.main.query_one("#middle").size.height
        att.procs, att.members = att.procs[:1], None  # most processes gone
        await tick(pilot, clock, 2)
        assert len(shown(app)) == 1
        await pilot.press("s", "t")
        assert panel(app).size.height == 15
        assert app.main.query_one("#middle").size.height == chart


def many(n: int) -> ScriptedAttributor:
    """``n`` processes, pid 1000 the most power, then 1001 ..."""
    return ScriptedAttributor(procs=tuple(proc(1000 + i, f"p{i}", 100.0 - i) for i in range(n)),
                              members=None)


@pytest.mark.asyncio
async def test_more_rows_than_lines_scroll_with_the_cursor(tmp_path):
    """30 rows, 13 lines: the cursor keys move through all of them, the rows scroll to
    keep the cursor in view, the header stays and says which rows are shown."""
    async with running(tmp_path, many(30)) as (app, clock, pilot):
        table = app.screen.query_one(ProcessTable)
        assert table.visible_rows == 13
        text = screen_text(app)[0]
        assert "1-13 of 30" in text and "p12 " in text and "p13 " not in text
        await pilot.press("end")
        assert selected_pid(app) == 1029
        text = screen_text(app)[0]
        assert "18-30 of 30" in text and "p29" in text and "p16 " not in text
        assert "COMMAND" in text  # the header stays
        await pilot.press("pageup")
        assert selected_pid(app) == 1016 and table.top == 16
        await pilot.press("home", "down", "pagedown")
        assert selected_pid(app) == 1014 and table.top == 2
        await tick(pilot, clock)  # a new frame keeps the view and the cursor
        assert selected_pid(app) == 1014 and table.top == 2
        await pilot.press("pagedown", "pagedown")
        assert selected_pid(app) == 1029
        await pilot.press("up")
        assert selected_pid(app) == 1028 and table.top == 17
        from textual import events

        table.post_message(events.MouseScrollUp(table, 20, 5, 0, -1, 0, False, False, False))
        await pilot.pause()  # the wheel moves the cursor
        assert selected_pid(app) == 1027


@pytest.mark.asyncio
async def test_at_80x24_the_table_has_no_scroll_bar(tmp_path):
    """Compact: the note, the header and 4 rows; no scroll bar drawn (Textual's showed
    as block characters in the table); the header says ``1-4 of 10``."""
    async with running(tmp_path, many(10), size=(80, 24)) as (app, clock, pilot):
        table = app.screen.query_one(ProcessTable)
        assert panel(app).size.height == 6 and table.visible_rows == 4
        lines = screen_text(app)[0].splitlines()
        top = table.region.y
        drawn = lines[top:top + 5]
        assert "1-4 of 10" in drawn[0] and "COMMAND" in drawn[0]
        assert not any(ch in line for line in drawn for ch in "▁▂▃▄▅▆▇█▉▊▋▌▍▎▏▐")
        await pilot.press("down", "down", "down", "down")
        assert "2-5 of 10" in screen_text(app)[0].splitlines()[top]


@pytest.mark.asyncio
async def test_the_cursor_row_shows_whether_the_table_has_focus(tmp_path):
    """The table keeps its styles between frames (looked up once per style change): the
    cursor row must still change its look when the focus leaves the table and comes back."""
    async with running(tmp_path) as (app, clock, pilot):
        table = app.screen.query_one(ProcessTable)

        def cursor_style():
            return list(table.render_lines(table.size.region)[1])[0].style

        focused = cursor_style()
        await pilot.press("slash")  # the filter box takes the focus
        await pilot.pause()
        assert app.screen.focused is not table
        assert cursor_style() != focused
        await pilot.press("enter")  # back to the table
        await pilot.pause()
        assert app.screen.focused is table and cursor_style() == focused


@pytest.mark.asyncio
async def test_the_view_stays_at_the_top_until_the_user_moves_the_cursor(tmp_path):
    """The first row's process falls down the sort: the cursor stays on the first row and
    the view at the top (the busiest rows on screen); it followed that process before and
    the table scrolled away by itself. Once the user moves, the cursor follows its process
    and the view keeps it shown."""
    att = many(30)

    def power(pid, w):
        att.procs = tuple(proc(p.pid, p.name, w) if p.pid == pid else p for p in att.procs)

    async with running(tmp_path, att) as (app, clock, pilot):
        table = app.screen.query_one(ProcessTable)
        assert selected_pid(app) == 1000
        power(1000, 0.5)  # the first row drops to the end of the sort
        await tick(pilot, clock, 2)  # the table draws every 2 s
        assert table.top == 0 and table.cursor_row == 0 and selected_pid(app) == 1001
        assert "1-13 of 30" in screen_text(app)[0]
        await pilot.press("down")  # the user moves: from now on the cursor follows
        assert selected_pid(app) == 1002
        power(1002, 0.25)
        await tick(pilot, clock, 2)  # the table draws every 2 s
        assert selected_pid(app) == 1002 and table.cursor_row == 29
        assert "18-30 of 30" in screen_text(app)[0]


@pytest.mark.asyncio
async def test_a_replay_at_80x24_keeps_the_busiest_rows_shown():
    """`tuimeter --replay demo-job.csv` at 80x24: at 0:00:31 the table showed `7-8 of 13`
    with the two 270 W train.py rows off screen; it shows the first rows."""
    from tests.fakes.scripted import FakeClock
    from tuimeter.tui.run import replay_app

    path = Path(__file__).resolve().parents[1] / "data" / "sessions" / "demo-job.csv"
    clock = FakeClock()
    app = replay_app(str(path), clock)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(ProcessTable)
        for second in range(1, 41):
            await tick(pilot, clock)
            assert (table.top, table.cursor_row) == (0, 0), f"at {second} s"
            if table.rows:
                assert re.search(r"1-\d+ of \d+", screen_text(app)[0]), f"at {second} s"


@pytest.mark.asyncio
async def test_the_table_draws_its_figures_every_two_seconds_and_keys_at_once(tmp_path):
    """The process table was half of a frame's cost: its figures are drawn again every
    PROCESS_EVERY_S (2 s of session time, as htop's 1.5 s; live, the top processes change
    every tick), the job's state and a key (the sort) at once."""
    from tuimeter.tui.widgets._process_panel import PROCESS_EVERY_S

    assert PROCESS_EVERY_S == 2.0
    att = ScriptedAttributor()

    def power(pid, w):
        att.procs = tuple(proc(p.pid, p.name, w) if p.pid == pid else p for p in att.procs)

    def row_of(app, pid):
        return next(r for r, _ in app.screen.query_one(ProcessPanel).rows if r.pid == pid)

    async with running(tmp_path, att) as (app, clock, pilot):
        await tick(pilot, clock, 2)
        power(400, 40.0)
        await tick(pilot, clock)  # 1 s on: the figures stay as drawn
        assert row_of(app, 400).power_w == 12.0
        await tick(pilot, clock)  # 2 s on: drawn
        assert row_of(app, 400).power_w == 40.0
        power(400, 41.0)
        await tick(pilot, clock)
        await pilot.press("s")  # a key: drawn at once, with the newest figures
        await pilot.pause()
        assert row_of(app, 400).power_w == 41.0
        att.procs = att.procs + (proc(777, "new", 1.0),)
        await tick(pilot, clock, 2)  # a process came: within 2 s
        assert any(r.pid == 777 for r, _ in app.screen.query_one(ProcessPanel).rows)
        power(400, 50.0)
        att.members = JOB[:2]  # the job lost a process: the table is drawn at once
        await tick(pilot, clock)
        assert row_of(app, 400).power_w == 50.0
