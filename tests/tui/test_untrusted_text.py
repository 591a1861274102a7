"""Text tuimeter did not write (other users' process names, labels, host names, session
files) reaches the screen escaped: a process named ``ESC[2J ESC[31m EVIL`` shows as
``\\x1b[2J\\x1b[31mEVIL`` and sends the terminal no escape sequence. Before, a root
tuimeter wrote those bytes raw (seen in the pty stream), and a replayed marker label
drew an unterminated OSC."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.fakes.powercap import FakePowercap
from tuimeter.model import JobSample, ProcessShare
from tuimeter.job import JobWatcher
from tuimeter.tui.run import replay_app as make_replay_app
from tests.fakes.scripted import FakeClock

from .conftest import DEMO, PtyRun, make_app, screen_text, tick, wait_for

EVIL = "\x1b[2J\x1b[31mEVIL"
SHOWN = "\\x1b[2J\\x1b[31mEVIL"


class _EvilAttributor:
    """Attribution as another user's processes would make it: names chosen by them."""

    def attribute(self, interval_s, domains, now_s):
        procs = (ProcessShare(pid=666, name=EVIL, cpu_share=0.5, gpu_share=0.0, power_w=20.0,
                              energy_j=20.0 * interval_s, total_energy_j=40.0),
                 ProcessShare(pid=667, name="[b]bold[/b] [link=http://x]x[/link]",
                              cpu_share=0.1, gpu_share=0.0, power_w=5.0, energy_j=5.0,
                              total_energy_j=5.0))
        job = JobSample(pid=666, name=EVIL, running=True, n_processes=1, power_w=20.0,
                        energy_j=20.0, total_energy_j=40.0, cpu_energy_j=40.0,
                        gpu_energy_j=0.0, co2_g=0.1, total_co2_g=0.2, share=0.4)
        return procs, 5.0, job


@pytest.mark.asyncio
async def test_hostile_names_are_shown_escaped_and_send_no_escapes(tmp_path):
    """Process table, job panel, top bar host and chart marker label each hold the
    escaped text, no cell of the screen holds ESC, and the marker's notification is
    escaped too."""
    job = JobWatcher(os.getpid())
    job.name = EVIL  # as psutil reads another user's process name
    app, clock = make_app(tmp_path, job=job, host="\x1b]0;owned\x07node",
                          attributor=_EvilAttributor(), attribution="on")
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 2)
        app._add_marker(EVIL)  # a label as a socket client or a file could send it
        await tick(pilot, clock, 2)
        assert await wait_for(pilot, lambda: SHOWN in screen_text(app)[0])
        text, sent = screen_text(app)
        assert "\x1b" not in text and "\x07" not in text
        assert "\x1b[2J" not in sent and "\x1b[31mEVIL" not in sent and "\x1b]0;" not in sent
        assert f"JOB {os.getpid()} {SHOWN}" in text  # the job panel
        assert "\\x1b]0;owned\\x07node" in text  # the top bar
        assert "[b]bold[/b]" in text  # a process name is text, not markup
        assert text.count("\\x1b[2J") >= 3  # process table, job panel, chart
        notes = [n.message for n in app._notifications]  # toasts: a layer of their own
        assert f"marker '{SHOWN}' at 0:00:02" in notes and not any("\x1b" in n for n in notes)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_replayed_marker_with_an_unterminated_osc_is_escaped(tmp_path):
    """A session file whose marker label opens an OSC and never ends it (it would swallow
    what follows on the terminal), and whose host and domain are hostile too."""
    text = DEMO.read_text().replace(",warmup,", ",\x1b]0;pwned,").replace(
        "demo-node", "demo\x1b[5m").replace("gpu1", "gpu\x9b1")
    path = tmp_path / "hostile.csv"
    path.write_text(text)
    clock = FakeClock()
    app = make_replay_app(str(path), clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 40)
        await pilot.press("left_square_bracket", "left_square_bracket")  # last 1 min: room
        await pilot.pause()
        shown, sent = screen_text(app)
        assert "\\x1b]0;pwn" in shown  # the chart's marker label (cut to its room)
        assert "demo\\x1b[5m" in shown and "gpu\\x9b1" in shown
        assert "\x1b" not in shown and "\x9b" not in shown
        assert "\x1b]" not in sent and "\x1b[5m" not in sent
        await pilot.press("q")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_a_process_named_with_escapes_sends_none_to_the_real_terminal(tmp_path):
    """End to end: `tuimeter -- ./<ESC[2J ESC[31m EVIL>` in a pseudo-terminal. The bytes
    the terminal receives hold the escaped name and not the name's own sequences."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True)
    evil = tmp_path / EVIL
    shutil.copy("/bin/sleep", evil)
    run = PtyRun(["-o", str(tmp_path / "s.csv"), "--interval", "0.2", "--no-socket",
                  "--no-gpu", "--", str(evil), "60"],
                 {"TUIMETER_POWERCAP_ROOT": str(fake.sensor_root),
                  "XDG_DATA_HOME": str(tmp_path / "data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    try:
        assert run.wait_for(SHOWN.encode()), "the job's name never appeared"
        start = len(run.received)
        run.press("q")  # the command still runs: q asks first (its name escaped there too)
        assert run.wait_for(b"still running", start), "q did not ask"
        run.press("s")
        run.proc.wait(60)
    finally:
        run.close()
    received = bytes(run.received)
    assert SHOWN.encode() in received
    assert EVIL.encode() not in received and b"\x1b[31mEVIL" not in received
