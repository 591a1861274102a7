"""The ``g`` key cycles the process table's grouping (process, job, cgroup): under
``cgroup`` the table lists the cgroups by name, and ``g`` again goes back to processes."""

from __future__ import annotations

import pytest

from tuimeter.engine.cgroups import describe
from tuimeter.model import Attribution, CgroupShare, ProcessShare

from .conftest import make_app, screen_text, tick, wait_for

ID = "3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"


class _Attributor:
    def attribute(self, interval_s, domains, now_s):
        procs = (ProcessShare(pid=4321, name="nginx-worker", cpu_share=0.2, gpu_share=0.0,
                              power_w=9.0, energy_j=9.0, total_energy_j=9.0),)
        cgs = (CgroupShare(describe(f"/system.slice/docker-{ID}.scope"), 9.0, 9.0, 9.0,
                           9.0, 0.0, 1),)
        return Attribution(procs, 1.0, None, cgroups=cgs)


@pytest.mark.asyncio
async def test_g_cycles_process_job_cgroup(tmp_path):
    app, clock = make_app(tmp_path, attributor=_Attributor(), attribution="on")
    async with app.run_test(size=(120, 40)) as pilot:
        await tick(pilot, clock, 2)
        assert await wait_for(pilot, lambda: "nginx-worker" in screen_text(app)[0])
        await pilot.press("g")
        assert app.main.grouping == "job"  # no job followed: the processes, as they are
        await pilot.press("g")
        assert app.main.grouping == "cgroup"
        assert await wait_for(pilot, lambda: f"docker {ID[:12]}" in screen_text(app)[0])
        assert "nginx-worker" not in screen_text(app)[0]
        assert "Cgroups by power" in screen_text(app)[0]  # the title says what a row is
        await pilot.press("g")
        assert app.main.grouping == "process"
        assert await wait_for(pilot, lambda: "nginx-worker" in screen_text(app)[0])
        await pilot.press("q")
