"""The small things a new user sees at once (issue 24, item 9): no ``-0`` figures, a USER
for every process row (``N/A`` where the owner was never read), ``[ ] chart`` apart in the
help, a cgroup's CPU% ``N/A`` (not measured) rather than ``0.0`` beside its watts, and the
``M`` marker stamped when asked (when M was pressed, or at Enter)."""

from __future__ import annotations

import re

import pytest

from tuimeter.engine.cgroups import describe
from tuimeter.model import Attribution, CgroupShare, JobSample, ProcessShare
from tuimeter.tui.format import fmt_co2, fmt_energy, fmt_share, fmt_wh

from .conftest import FixedJob, make_app, screen_lines, tick, wait_for

#: a figure that reads as zero with a sign: "-0 mW", "-0.0 J", "-0.000 g CO2e" ...
NEGATIVE_ZERO = re.compile(r"-0(\.0+)?\s*(m|k)?(W|J|g|Wh)\b")
ID = "3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"


@pytest.mark.parametrize("fmt,value,shown", [
    (fmt_energy, -0.0, "0.0 J"), (fmt_energy, -1e-9, "0.0 J"), (fmt_energy, -0.4, "-0.4 J"),
    (fmt_co2, -0.0, "0.000 g CO2e"), (fmt_wh, -1e-6, "0.000 Wh"), (fmt_share, -1e-5, "0.0"),
    (fmt_co2, -0.0004, "-0.40 mg CO2e")])
def test_a_figure_that_reads_zero_has_no_sign(fmt, value, shown):
    """A session file's `-0` (idle/system's remainder of exactly nothing) and rounding
    errors below what is shown: `0.0 J`, never `-0.0 J`; a real negative keeps its sign."""
    assert fmt(value) == shown


class _Attributor:
    """A short-lived process whose owner was never read (uid None), idle power a rounding
    error below zero, a cgroup at 95.6 W (whose CPU time no one summed), and a job of
    two processes."""

    def attribute(self, interval_s, domains, now_s):
        gone = ProcessShare(pid=5150, name="cc1", cpu_share=0.3, gpu_share=0.0, power_w=3.0,
                            energy_j=3.0, total_energy_j=3.0, uid=None)
        mine = ProcessShare(pid=5151, name="make", cpu_share=0.1, gpu_share=0.0,
                            power_w=1.0, energy_j=1.0, total_energy_j=1.0, uid=0,
                            in_job=True)
        other = ProcessShare(pid=5152, name="ld", cpu_share=0.2, gpu_share=0.0,
                             power_w=2.0, energy_j=2.0, total_energy_j=2.0, uid=0,
                             in_job=True)
        job = JobSample(pid=300, name="sh", running=True, n_processes=2, power_w=3.0,
                        energy_j=3.0, total_energy_j=3.0, cpu_energy_j=3.0, gpu_energy_j=0.0,
                        co2_g=0.0, total_co2_g=0.0, share=0.1, members=(mine, other))
        cgs = (CgroupShare(describe(f"/system.slice/docker-{ID}.scope"), 95.6, 95.6, 95.6,
                           95.6, 0.0, 3),
               CgroupShare(describe("/user.slice"), -0.0, -0.0, -0.0, 0.0, 0.0, 0))
        return Attribution((gone, mine, other), -0.0003, job, cgroups=cgs)


def _ticks(app, clock, n: int) -> None:
    """``n`` one-second ticks without waiting for a frame (none is drawn under a modal)."""
    for _ in range(n):
        clock.advance(1.0)
        app.engine.tick()


def _row(app, text: str) -> str:
    return next(line for line in screen_lines(app) if text in line)


@pytest.mark.asyncio
async def test_user_na_cgroup_cpu_na_no_negative_zero(tmp_path):
    app, clock = make_app(tmp_path, attributor=_Attributor(), attribution="on",
                          job=FixedJob())
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 2)
        assert await wait_for(pilot, lambda: any("cc1" in line for line in screen_lines(app)))
        assert "idle/system 0 mW" in "\n".join(screen_lines(app))
        assert _row(app, "cc1").split()[:3] == ["5150", "N/A", "30.0"]  # USER: never read
        assert _row(app, "make").split()[2] == "root"
        await pilot.press("g")  # the job as one row: its CPU% is its processes' sum
        assert await wait_for(pilot, lambda: any("job: sh" in line
                                                 for line in screen_lines(app)))
        assert re.search(r"J\s+30\.0\s", _row(app, "job: sh"))
        await pilot.press("g")  # cgroups: their CPU time is not summed: N/A, not 0.0
        assert await wait_for(pilot, lambda: any(f"docker {ID[:12]}" in line
                                                 for line in screen_lines(app)))
        docker = _row(app, f"docker {ID[:12]}")
        assert "95.6 W" in docker and docker.split().count("N/A") == 2
        assert " 0.0 " not in docker.split("95.6 W")[0]
        screen = "\n".join(screen_lines(app))
        assert not NEGATIVE_ZERO.search(screen), NEGATIVE_ZERO.search(screen)
        await pilot.press("q")


def test_help_keeps_each_key_apart_from_its_text():
    """Guards `[ ]chart` in the help: every key is followed by at least a blank."""
    from tuimeter.tui.screens import KEYS, help_text
    from tuimeter.tui.widgets import PROCESS_KEYS

    text = help_text((), None).plain
    assert "  [ ] chart:" in text
    for key, what in KEYS + PROCESS_KEYS:
        assert re.search(rf"^  {re.escape(key)} +{re.escape(what[:12])}", text, re.M), key


@pytest.mark.asyncio
async def test_M_stamps_when_M_was_pressed_unless_asked_for_enter(tmp_path):
    """Guards a marker stamped 7 s before Enter without saying so: the prompt says when
    it stamps (when M was pressed), and ctrl+t switches to the time of Enter."""
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await tick(pilot, clock, 3)
        await pilot.press("M")
        prompt = "\n".join(screen_lines(app))
        assert "when M was pressed" in prompt and "0:00:03" in prompt and "ctrl+t" in prompt
        _ticks(app, clock, 7)  # typing takes a while (frames wait for the prompt to close)
        await pilot.press(*"warmup", "enter")
        await tick(pilot, clock)  # the marker is in the next snapshot (at 0:00:11)
        first = app.engine.snapshot.markers[-1]
        assert first.label == "warmup" and first.elapsed_s == pytest.approx(3.0)
        await pilot.press("M")
        _ticks(app, clock, 5)
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert "when Enter is pressed" in "\n".join(screen_lines(app))
        await pilot.press(*"train", "enter")
        await tick(pilot, clock)
        second = app.engine.snapshot.markers[-1]
        assert second.label == "train" and second.elapsed_s == pytest.approx(16.0)
        await pilot.press("q")
