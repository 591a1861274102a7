"""Pilot tests of the live UI: every key, the session file it leaves behind, job
following, resizing and frame skipping. The engine runs on a fake clock, ticked by hand."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
from textual.widgets import Input, Static

from tests.fakes.scripted import ScriptedSensor, domain, rapl_like
from tuimeter.model import DomainKind
from tuimeter.tui.app import INTERVALS_S
from tuimeter.job import JobWatcher
from tuimeter.tui.messages import SnapshotReady
from tuimeter.tui.screens import HelpScreen, LabelScreen
from tuimeter.tui.widgets import DomainTable, JobPanel, PowerChart, TopBar

from .conftest import drawn as drawn_latest, make_app, screen_text, tick, wait_for


def text(widget: Static) -> str:
    return str(widget.content)


def session(tmp_path) -> pd.DataFrame:
    return pd.read_csv(tmp_path / "session.csv")


def markers(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["kind"] == "marker"].reset_index(drop=True)


@pytest.mark.asyncio
async def test_m_adds_numbered_markers_to_the_session_csv(tmp_path):
    """`m` marks the moment it is pressed as 'mark N'; the rows are in the CSV after q."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.press("m")
        await tick(pilot, clock, 2)
        await pilot.press("m")
        await tick(pilot, clock, 1)
        await pilot.press("q")
    m = markers(session(tmp_path))
    assert list(m["label"]) == ["mark 1", "mark 2"]
    assert list(m["elapsed_s"]) == [3.0, 5.0]
    assert set(m["source"]) == {"key"}


@pytest.mark.asyncio
async def test_shift_m_asks_for_a_label(tmp_path):
    """`M` opens a prompt; Enter adds the typed label at the instant M was pressed, Esc
    adds nothing."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        await pilot.press("M")
        assert isinstance(app.screen, LabelScreen)
        prompt = screen_text(app)[0]  # the prompt says which instant the marker takes
        assert "Marker stamped when M was pressed, 0:00:02" in prompt
        await pilot.press(*"train, epoch 1")
        clock.advance(4.0)  # slow typing: the marker stays where M was pressed
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, LabelScreen)
        await tick(pilot, clock, 2)
        await pilot.press("M")
        await pilot.press(*"dropped")
        await pilot.press("escape")
        await tick(pilot, clock, 1)
        await pilot.press("q")
    m = markers(session(tmp_path))
    assert list(m["label"]) == ["train, epoch 1"]
    assert list(m["elapsed_s"]) == [2.0]


@pytest.mark.asyncio
async def test_label_prompt_refuses_a_bidi_override_with_a_notice(tmp_path):
    """Regression (issue 9 item 2): the prompt took any text. A label the session would
    refuse (here U+202E, which shows 'exe.txt' as 'txt.exe') gets a notice naming the
    reason, the prompt stays open to fix it, and nothing is marked until it is valid."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("M")
        field = app.screen.query_one(Input)
        field.value = "evil\u202etxt.exe"  # pasted: no key types U+202E
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LabelScreen)
        assert any("U+202E" in n.message for n in app._notifications)
        field.value = ""
        await pilot.press(*"fixed")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, LabelScreen)
        await tick(pilot, clock, 1)
        await pilot.press("q")
    assert list(markers(session(tmp_path))["label"]) == ["fixed"]


@pytest.mark.asyncio
async def test_marker_typed_while_paused_is_still_recorded(tmp_path):
    """Pausing stops the display, not the session: markers and ticks are recorded."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("p")
        assert app.paused
        assert "PAUSED" in text(app.query_one(TopBar))
        drawn = app.main.frames_drawn
        await tick(pilot, clock, 3)
        await pilot.press("m")
        await tick(pilot, clock, 1)
        assert app.main.frames_drawn == drawn
        assert "0:00:01" in text(app.query_one(TopBar))
        await pilot.press("p")
        assert not app.paused
        assert "0:00:05" in text(app.query_one(TopBar))
        await pilot.press("q")
    df = session(tmp_path)
    assert (df["kind"] == "total").sum() == 5
    assert list(markers(df)["elapsed_s"]) == [4.0]


@pytest.mark.asyncio
async def test_e_exports_the_session_so_far(tmp_path):
    """`e` copies the session written so far to a new file and says where."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.press("m")
        await tick(pilot, clock, 1)
        await pilot.press("e")
        assert await wait_for(pilot, lambda: app.exports)
        path = app.exports[0]
        assert os.path.dirname(path) == str(tmp_path)
        assert os.path.basename(path).startswith("tuimeter-export-")
        shown = " ".join(str(n.message) for n in app._notifications)
        assert os.path.abspath(path) in shown
        await pilot.press("q")
    exported = pd.read_csv(path)
    assert (exported["kind"] == "total").sum() == 4
    assert list(markers(exported)["label"]) == ["mark 1"]


@pytest.mark.asyncio
async def test_plus_and_minus_step_the_interval_within_bounds(tmp_path):
    """`+` lengthens and `-` shortens the engine interval, never past 0.1 s or 60 s."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("plus")
        assert app.engine.interval_s == 2.0
        assert "every 2 s" in text(app.query_one(TopBar))
        for _ in range(2):
            await pilot.press("minus")
        assert app.engine.interval_s == 0.5
        for _ in range(20):
            await pilot.press("minus")
        assert app.engine.interval_s == INTERVALS_S[0]
        for _ in range(20):
            await pilot.press("plus")
        assert app.engine.interval_s == INTERVALS_S[-1]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_q_ends_with_a_final_tick_and_closes_the_file(tmp_path):
    """`q` closes the last partial interval, closes the session file, returns the snapshot."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        clock.advance(0.5)
        await pilot.press("q")
    assert app.return_value is not None
    assert app.return_value.elapsed_s == 2.5
    assert app.recorder.writer.closed
    assert (session(tmp_path)["kind"] == "total").sum() == 3


@pytest.mark.asyncio
async def test_help_screen_lists_every_key_and_closes(tmp_path):
    """`?` shows the keys, the badge legend and the sensors; Esc closes it."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        body = " ".join(text(s) for s in app.screen.query(Static))
        for word in ("mark N", "pause", "export", "interval", "quit", "[measured]", "[LOST]",
                     "rapl ok", str(tmp_path / "session.csv")):
            assert word in body
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_rows_show_power_energy_and_badges(tmp_path):
    """Each domain row has its badge, W now and cumulative energy; a lost one says LOST."""
    rapl = rapl_like()
    app, clock = make_app(tmp_path, sensors=[rapl])
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 30)
        table = app.query_one(DomainTable)
        pkg = table.row_text("package-0")
        assert "[measured]" in pkg and "40.0 W" in pkg and "1.20 kJ" in pkg
        rapl.lost.add("package-0/dram")
        await tick(pilot, clock, 1)
        dram = table.row_text("package-0/dram")
        assert "[LOST]" in dram and "N/A" in dram
        await pilot.press("q")


@pytest.mark.asyncio
async def test_power_now_is_the_gpus_live_reading_where_it_has_one(tmp_path):
    """A GPU's "now" column shows the driver's instant power (NVML field 186), not the
    interval's average, which lags a load change by a whole interval."""
    from tuimeter.model import Reading

    class LiveGpu(ScriptedSensor):
        def read(self, now_s):
            return [Reading(r.domain_id, r.t_s, r.energy_j, power_w=321.0)
                    for r in super().read(now_s)]

    gpu = LiveGpu("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")], {"gpu0": 150.0})
    app, clock = make_app(tmp_path, sensors=[rapl_like(), gpu])
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 3)
        table = app.query_one(DomainTable)
        assert table.cell_text("gpu0", "power") == "321.0 W"
        # no live reading: the interval's average
        assert table.cell_text("package-0", "power") == "40.0 W"
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_slow_terminal_skips_frames_not_ticks(tmp_path):
    """Snapshots queued behind a newer one are replaced; every tick is still recorded."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        drawn = app.main.frames_drawn
        for _ in range(5):
            clock.advance(1.0)
            app.engine.tick()
        await pilot.pause()
        await drawn_latest(pilot)
        assert app.main.frames_drawn == drawn + 1
        assert "0:00:05" in text(app.query_one(TopBar))
        await pilot.press("q")
    assert (session(tmp_path)["kind"] == "total").sum() == 5


@pytest.mark.asyncio
async def test_drawing_is_throttled_at_short_intervals(tmp_path):
    """Guards the UI's CPU at `-` down to 0.1 s (it drew every tick: 10 frames a second,
    28-44 % of a core): frames are at most one per ``frame_s``; snapshots in between are
    replaced, the latest is drawn when the frame is due, and every tick is recorded.
    (``frame_s`` is raised to 30 s here so that no frame falls due during the burst,
    however slow the machine; the trailing frame is then asked for by lowering it.)"""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(9):
            await pilot.press("minus")
        assert app.engine.interval_s == 0.1
        await tick(pilot, clock, 1, dt=0.1)
        app.main.frame_s = 30.0
        drawn = app.main.frames_drawn
        for _ in range(20):  # each processed on its own: nothing to replace in the queue
            clock.advance(0.1)
            app.engine.tick()
            await pilot.pause()
        assert app.main.frames_drawn == drawn  # no frame was due: the snapshots only wait
        assert "0:00:02" not in text(app.query_one(TopBar))
        app.main.frame_s = 0.01
        assert await wait_for(pilot, lambda: "0:00:02" in text(app.query_one(TopBar)))
        assert app.main.frames_drawn == drawn + 1
        await pilot.press("q")
    assert (session(tmp_path)["kind"] == "total").sum() == 21


@pytest.mark.asyncio
async def test_the_interval_keys_say_they_change_sampling(tmp_path):
    """`+`/`-` change the sampling interval (display and recording), and say so."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("minus")
        shown = " ".join(str(n.message) for n in app._notifications)
        assert "sampling" in shown and "recording" in shown and "0.5 s" in shown
        await pilot.press("q")


def test_snapshot_ready_replaces_only_snapshots():
    from textual.message import Message

    old = SnapshotReady(None, ())  # type: ignore[arg-type]
    assert old.can_replace(SnapshotReady(None, ()))  # type: ignore[arg-type]
    assert not old.can_replace(Message())


@pytest.mark.asyncio
@pytest.mark.parametrize("first,second", [((80, 24), (160, 48)), ((160, 48), (80, 24))])
async def test_resizing_keeps_every_part_on_screen(tmp_path, first, second):
    """At 80x24 and 160x48, and after resizing between them, every domain row, the chart
    and the footer are on screen and the chart follows the size."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=first) as pilot:
        await tick(pilot, clock, 20)
        widths = []
        for size in (first, second):
            await pilot.resize_terminal(*size)
            await tick(pilot, clock, 1)
            w, h = size
            table = app.query_one(DomainTable)
            assert table.region.height == len(table.row_keys) + 1  # and the header
            assert 0 < table.region.bottom <= h - 1 and table.region.width == w
            assert len(table.row_text("total")) == w - 2  # the padding either side
            chart = app.query_one(PowerChart)
            assert chart.region.height >= 5 and chart.region.bottom <= h
            widths.append(chart.region.width)
            assert app.screen.has_class("-compact") == (h < 32)
            assert app.query_one("Footer").region.bottom == h
        assert widths[0] != widths[1]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_pid_of_a_process_that_exits(tmp_path):
    """--pid: the job panel names the process and says when it has exited."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app, clock = make_app(tmp_path, job=JobWatcher(child.pid))
        async with app.run_test(size=(80, 24)) as pilot:
            await tick(pilot, clock, 2)
            panel = text(app.query_one(JobPanel))
            assert f"JOB {child.pid}" in panel and "running" in panel
            child.kill()
            child.wait()
            await tick(pilot, clock, 1)
            panel = text(app.query_one(JobPanel))
            assert "EXITED" in panel and "0:00:03" in panel
            shown = " ".join(str(n.message) for n in app._notifications)
            assert f"job {child.pid}" in shown and "exited" in shown
            await pilot.press("q")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.asyncio
async def test_no_color_keeps_every_state_readable(tmp_path, monkeypatch):
    """With NO_COLOR the app runs colourless and states are still words."""
    monkeypatch.setenv("NO_COLOR", "1")
    rapl = rapl_like()
    rapl.lost.add("psys")
    app, clock = make_app(tmp_path, sensors=[rapl])
    assert app.no_color
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.press("p")
        assert "[LOST]" in app.query_one(DomainTable).row_text("psys")
        assert "PAUSED" in text(app.query_one(TopBar))
        await pilot.press("q")


@pytest.mark.asyncio
async def test_e_twice_in_one_second_makes_two_exports(tmp_path, monkeypatch):
    """Two exports within the same second each get their own file and both are listed:
    the name was chosen on the UI thread before the first copy had created its file, so
    a second `e` while the first copy ran picked the same path."""
    import threading

    from tuimeter.tui import app as app_module

    release = threading.Event()
    real_copy = app_module.copy_complete_rows

    def slow_copy(src, dst):  # a long session: the first copy is still running
        release.wait(10)
        real_copy(src, dst)

    monkeypatch.setattr(app_module, "copy_complete_rows", slow_copy)
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        await pilot.press("e")
        await pilot.press("e")
        release.set()
        assert await wait_for(pilot, lambda: len(app.exports) == 2)
        await pilot.press("q")
    assert len(set(app.exports)) == 2
    for path in app.exports:
        assert (pd.read_csv(path)["kind"] == "total").sum() == 2


def test_export_copies_whole_rows_only(tmp_path, monkeypatch):
    """An export stops at the last complete row (a row being written is left out), and
    a copy that fails half way (disk full) leaves no partial file behind."""
    import errno
    import shutil

    from tuimeter.session.files import create_new
    from tuimeter.tui.app import copy_complete_rows

    src = tmp_path / "s.csv"
    src.write_bytes(b"a,b\n" + b"1,2\n" * 50_000 + b"3,")
    dst = tmp_path / "d.csv"
    copy_complete_rows(str(src), create_new(dst))
    assert dst.read_bytes() == b"a,b\n" + b"1,2\n" * 50_000
    src.write_bytes(b"a,b\n1,2\n")
    copy_complete_rows(str(src), create_new(tmp_path / "d2.csv"))
    assert (tmp_path / "d2.csv").read_bytes() == b"a,b\n1,2\n"

    def full_disk(fin, fout, *a, **kw):
        fout.write(b"a,b\n1,")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full_disk)
    with pytest.raises(OSError):
        copy_complete_rows(str(src), create_new(tmp_path / "x.csv"))
    assert not (tmp_path / "x.csv").exists()


def test_job_line_says_running_once():
    """Guards `running (running)`: the process status is shown only when it says more."""
    from tuimeter.job import JobState
    from tuimeter.tui.widgets._job_panel import job_text

    assert "running (running)" not in job_text(JobState(1, "x", True, "running"), None, None).plain
    assert "running" in job_text(JobState(1, "x", True, "running"), None, None).plain
    assert "running (sleeping)" in job_text(JobState(1, "x", True, "sleeping"), None, None).plain


@pytest.mark.asyncio
async def test_help_scroll_bar_draws_no_sparkline_glyphs(tmp_path):
    """Guards `▅▅` showing at the help window's right edge: that is the help's own
    scroll bar (Textual draws the thumb's ends with ▁..▇, which without colour read as
    a sparkline); its thumb is whole reversed cells."""
    from textual.containers import VerticalScroll

    from tuimeter.tui.widgets._spark_line import BARS

    app, clock = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.max_scroll_y > 0  # at 80x24 the help scrolls: the bar is there
        bar = scroll.vertical_scrollbar
        for position in (0.0, 1.3, 2.6, 7.5):
            segments = bar.renderer.render_bar(size=20, virtual_size=45, window_size=20,
                                               position=position, thickness=2)
            assert not set("".join(s.text for s in segments.segments)) & set(BARS[:-1])
        await pilot.press("escape", "q")


def test_help_lists_the_commands():
    """Guards `tuimeter --help` not naming `record`, `mark` and `report`: an epilog lists
    each with one line."""
    from tuimeter.tui.run import parser

    text = parser().format_help()
    for command in ("tuimeter record", "tuimeter mark", "tuimeter report"):
        line = next(line for line in text.splitlines() if line.strip().startswith(command))
        assert len(line.split(command, 1)[1].strip()) > 10, line


def test_status_line_is_short_and_complete_at_100_columns():
    """Guards a status line cut in its middle (`Sensors: estimate ok | rapl unavailable:
    cannot read`): each unavailable sensor is its name and a short reason (the reason's
    first clause), with `?` for the fix; the full reason and fix stay in the help."""
    from tuimeter.model import SensorStatus
    from tuimeter.tui.screens import help_text
    from tuimeter.tui.widgets._sensor_status import short_reason, status_text

    rapl = SensorStatus("rapl", False, "cannot read /sys/class/powercap/intel-rapl:0/energy_uj: "
                        "Permission denied (since Linux 5.10 only root can read it)",
                        "sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj")
    nvml = SensorStatus("nvml", False, "NVIDIA driver library libnvidia-ml.so.1 not found",
                        "install the NVIDIA driver")
    sensors = [SensorStatus("estimate", True), rapl, nvml]
    line = status_text(sensors, detail=False).plain
    assert len(line) <= 98, line  # fits 100 columns with the padding
    assert "rapl: permission denied" in line and "nvml: no NVIDIA driver" in line
    assert "? for the fix" in line and "estimate ok" in line
    assert short_reason("no powercap folder at /x (no RAPL driver, or not Linux)") == \
        "no powercap folder"
    full = help_text(sensors, None).plain
    assert "Permission denied (since Linux 5.10" in full and "sudo chmod" in full


@pytest.mark.asyncio
async def test_avg_column_is_energy_over_elapsed_and_matches_the_totals(tmp_path):
    """The `avg` column (one entry in COLUMNS) shows each row's energy since the start over
    the session's seconds: 10 s at 40 W then 10 s at 100 W average 70 W while "now" says
    100 W; the total row's average is the totals panel's."""
    from tuimeter.tui.widgets import TotalsPanel

    rapl = rapl_like()
    app, clock = make_app(tmp_path, sensors=[rapl])
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 10)
        rapl.set_power("package-0", 100.0, clock())
        await tick(pilot, clock, 10)
        table = app.query_one(DomainTable)
        assert table.cell_text("package-0", "avg") == "70.0 W"
        assert table.cell_text("package-0", "power") == "100.0 W"
        assert table.cell_text("header", "avg") == "avg"
        total_avg = table.cell_text("total", "avg")
        assert f"Average {total_avg}" in text(app.query_one(TotalsPanel))
        await pilot.press("q")


@pytest.mark.asyncio
async def test_avg_column_is_dropped_at_80_columns_and_back_when_wider(tmp_path):
    """At 80x24 the sparkline keeps its room: the avg column is not drawn; widened to
    120x40, even while paused, it shows current values."""
    app, clock = make_app(tmp_path, sensors=[rapl_like()])
    async with app.run_test(size=(80, 24)) as pilot:
        await tick(pilot, clock, 4)
        table = app.query_one(DomainTable)
        assert "avg" not in dict(table.shown_columns)
        assert table.cell_text("package-0", "avg") is None
        assert "avg" not in table.row_text("header")
        await pilot.press("p")
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert dict(table.shown_columns)["avg"] == 10
        assert table.cell_text("package-0", "avg") == "40.0 W"
        assert table.cell_text("header", "avg") == "avg"
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "avg" not in dict(table.shown_columns)
        await pilot.press("q")


def test_help_lists_every_table_column():
    """The help screen's column list is built from COLUMNS: a new column is described
    there without touching the screen."""
    from tuimeter.tui.screens import help_text
    from tuimeter.tui.widgets import COLUMNS

    shown = help_text((), None).plain
    assert all(c.help in shown for c in COLUMNS)
    assert "average since start" in shown


@pytest.mark.asyncio
async def test_job_exit_while_paused_under_the_help_screen(tmp_path):
    """Paused, with the help open, the job exits: the main screen's job panel says so when
    the help closes, and the rest of the display stays as it was when paused."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app, clock = make_app(tmp_path, job=JobWatcher(child.pid))
        async with app.run_test(size=(80, 24)) as pilot:
            await tick(pilot, clock, 2)
            await pilot.press("p")
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen) and app.paused
            child.kill()
            child.wait()
            await tick(pilot, clock, 1)
            await pilot.press("escape")
            assert "EXITED" in text(app.main.query_one(JobPanel))
            assert "0:00:02" in text(app.query_one(TopBar))  # still paused as it was
            await pilot.press("q")
        assert app.return_value is not None
    finally:
        child.kill()
        child.wait()


def test_the_job_figures_line_fits_the_panel_with_its_provenance():
    """Guards the job's figures wrapping onto a third line at 80 columns (and a layout of
    the screen on every frame): the line drops the Wh, "of machine", then the CO2e until
    it fits; the provenance always stays."""
    from tuimeter.job import JobState
    from tuimeter.model import JobSample
    from tuimeter.tui.widgets._job_panel import job_text

    job = JobSample(pid=7, name="train", running=True, n_processes=3, power_w=1234.5,
                    energy_j=1.0, total_energy_j=9_876_543.0, cpu_energy_j=1.0,
                    gpu_energy_j=0.0, co2_g=0.1, total_co2_g=1234.5, share=0.456)
    state = JobState(7, "train", True, "running")
    wide = job_text(state, job, None, width=200).plain.split("\n")[1]
    assert " = " in wide and "of machine" in wide and "CO2e" in wide
    for width in (30, 40, 60, 77, 100):
        figures = job_text(state, job, None, width=width).plain.split("\n")[1]
        assert figures.endswith("[attributed]")
        assert len(figures) <= width or width < 35
    assert "of machine" in job_text(state, job, None, width=77).plain


def test_the_ui_engine_ticks_without_quick_handoffs(tmp_path):
    """The UI's process runs no measured program (a followed job is a child): its engine
    takes a tick's readings at the interpreter's own switch interval (handoff.py)."""
    app, _ = make_app(tmp_path)
    assert app.engine.quick_handoffs is False


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_footer_keeps_help_and_quit(tmp_path, size):
    """At 80x24 the footer stopped at `e ▏^p palette`: no `? Help`, no `q Quit`. They show
    at 80 columns and wider (M, + - and k K are in the help and the palette); a sensor
    line cut at 80 columns still starts with where its fixes are."""
    from tests.tui.conftest import ScriptedAttributor
    from tuimeter.model import SensorStatus
    from tuimeter.tui.widgets._sensor_status import status_text

    app, clock = make_app(tmp_path, attributor=ScriptedAttributor(), attribution="on")
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 3)
        assert await wait_for(pilot, lambda: "q Quit" in screen_text(app)[0].splitlines()[-1])
        footer = screen_text(app)[0].splitlines()[-1]
        assert "? Help" in footer and "q Quit" in footer and "p Pause" in footer
    line = status_text([SensorStatus("rapl", False, "cannot read x: Permission denied", "fix"),
                        SensorStatus("nvml", False, "no driver", "install it")],
                       detail=False).plain
    assert line[:80].startswith("Sensors: (? for the fixes)")


def test_the_help_keeps_each_key_apart_from_its_text():
    """The help read `[ ]chart: ...`: a key as wide as its column ran into its text."""
    from tuimeter.tui.screens import help_text

    text = help_text([], None).plain
    assert "[ ] chart: a shorter" in text and "[ ]chart" not in text


@pytest.mark.asyncio
async def test_no_frame_is_drawn_behind_a_modal_and_the_newest_after_it(tmp_path):
    """With the help open the main screen draws nothing (each frame behind a modal made
    Textual compose the whole screen again: 5.9 % of a core against 2.3 %); closing it
    draws the newest snapshot at once."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 2)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        drawn = app.main.frames_drawn
        for _ in range(3):
            clock.advance(1.0)
            app.engine.tick()
            await pilot.pause(0.6)  # past a frame's due time
        assert app.main.frames_drawn == drawn
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.main.drawn is app.main.latest
                              and app.main.frames_drawn == drawn + 1)
        assert "0:00:05" in screen_text(app)[0]
