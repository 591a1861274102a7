"""Pilot tests of the ``tuimeter cluster`` views over a ClusterSensor reading a fake
Prometheus API (tests/fakes/promapi.py) on fake clocks: the nodes view (a dead node lost,
never 0 W), the jobs view, the job detail (straggler, idle GPU flagged), ``/`` filter,
``s`` sort, Enter and Esc; names from outside drawn as text, not markup."""

from __future__ import annotations

import pytest

from tests.fakes.promapi import FakePromAPI, FakePromServer, node_series
from tests.fakes.scripted import FakeClock
from tests.helpers import T0, make_engine
from tuimeter.cluster.promapi import PromClient
from tuimeter.cluster.source import ClusterSensor
from tuimeter.tui.cluster_screen import ClusterApp


@pytest.fixture
def cluster():
    api = FakePromAPI()
    s = T0 - 30
    api.series += (node_series("node01", s, {"package-0": 100.0, "gpu0": 300.0, "gpu1": 20.0},
                               tags={"job": "exp1"})
                   + node_series("node02", s, {"package-0": 100.0, "gpu0": 300.0,
                                               "gpu1": 290.0}, tags={"job": "exp1"})
                   + node_series("node03", s, {"package-0": 50.0, "gpu0": 100.0},
                                 tags={"job": "exp1"})
                   + node_series("node04", s, {"package-0": 80.0}, tags={"job": "[b]exp2"})
                   + node_series("node05", s, {"package-0": 80.0}, tags={"job": "[b]exp2"},
                                 until=T0 + 2))
    with FakePromServer(api) as srv:
        wall = FakeClock(T0)
        sensor = ClusterSensor(PromClient(srv.url, env={}), wallclock=wall)
        eng, clock = make_engine([sensor], wallclock=wall)
        eng.open()
        for _ in range(10):
            clock.advance(1.0)
            wall.advance(1.0)
            eng.tick()
        eng.api, eng.fake_clocks = api, (clock, wall)  # for the tests that change them
        yield eng, sensor
        eng.close()


def _rows(app) -> list[str]:
    return app.shown.splitlines()[2:]


def _cells(row: str) -> list[str]:
    return row[2:].split()  # after the cursor's mark


@pytest.mark.asyncio
async def test_nodes_view_shows_each_node_and_a_dead_one_lost(cluster):
    eng, sensor = cluster
    app = ClusterApp(eng, sensor, refresh_s=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        rows = _rows(app)
        assert [_cells(r)[0] for r in rows] == ["node01", "node02", "node03", "node04",
                                                "node05"]
        n5 = next(r for r in rows if "node05" in r)
        assert " lost " in n5 and "0.0 W" not in n5
        n1 = next(r for r in rows if "node01" in r)
        assert "420.0 W" in n1 and "20.0 W..300.0 W" in n1
        assert "5 nodes, 1 lost" in app.shown.splitlines()[0]
        status = str(app.query_one("#status").render())
        assert "node05: no sample for" in status
        await pilot.press("s")  # by power
        assert _cells(_rows(app)[0])[0] == "node02"
        await pilot.press("slash", "n", "o", "d", "e", "0", "4", "enter")
        assert [_cells(r)[0] for r in _rows(app)] == ["node04"]
        assert "[b]exp2" in _rows(app)[0]  # drawn as text, not as markup
        await pilot.press("escape")
        assert len(_rows(app)) == 5


@pytest.mark.asyncio
async def test_jobs_view_and_job_detail_flag_stragglers_and_idle_gpus(cluster):
    eng, sensor = cluster
    app = ClusterApp(eng, sensor, refresh_s=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("j")
        rows = _rows(app)
        assert _cells(rows[0])[0:3] == ["[b]exp2", "2", "1"]
        exp1 = next(r for r in rows if "exp1" in r and "exp2" not in r)
        assert _cells(exp1)[0:3] == ["exp1", "3", "0"]
        await pilot.press("down", "enter")
        detail = _rows(app)
        assert "job exp1" in app.shown.splitlines()[0]
        node3 = next(r for r in detail if "node03" in r)
        assert "straggler" in node3
        gpu1 = [r for r in detail if "gpu1" in r]
        assert "idle GPU" in gpu1[0] and "idle GPU" not in gpu1[1]
        await pilot.press("enter")  # node01's domains
        assert "node node01" in app.shown.splitlines()[0]
        assert any("node01/gpu1" in r for r in _rows(app))
        await pilot.press("escape")
        assert "job exp1" in app.shown.splitlines()[0]
        await pilot.press("escape")
        assert "jobs:" in app.shown.splitlines()[0]


@pytest.mark.asyncio
async def test_prometheus_down_is_one_line_and_every_node_shown_lost(cluster):
    eng, sensor = cluster
    app = ClusterApp(eng, sensor, refresh_s=3600)
    async with app.run_test(size=(120, 30)) as pilot:
        eng.api.mode = "down"
        clock, wall = eng.fake_clocks
        clock.advance(1.0)
        wall.advance(1.0)
        eng.tick()
        app.redraw()
        await pilot.pause()
        assert "5 nodes, 5 lost" in app.shown.splitlines()[0]
        assert all(" lost " in r for r in _rows(app))
        status = str(app.query_one("#status").render())
        assert "HTTP 503" in status and "\n" not in status


def test_tuimeter_cluster_opens_the_views_in_a_terminal_and_q_quits():
    """The user's path: ``tuimeter cluster --prometheus-url URL`` in a pseudo-terminal over
    the fake API; the nodes view shows, ``j`` the jobs view, ``q`` exits 0."""
    import time

    from tests.tui.conftest import PtyRun

    api = FakePromAPI()
    now = time.time()
    api.series += (node_series("node01", now - 60, {"package-0": 100.0}, tags={"job": "exp1"})
                   + node_series("node02", now - 60, {"package-0": 50.0}, tags={"job": "exp1"}))
    with FakePromServer(api) as srv:
        run = PtyRun(["cluster", "--prometheus-url", srv.url], {}, cols=110, rows=20)
        try:
            assert run.wait_for(b"node02"), bytes(run.received[-2000:])
            assert run.wait_for(b"2 nodes, 0 lost")
            mark = len(run.received)
            run.press("j")
            assert run.wait_for(b"jobs:", start=mark), bytes(run.received[-2000:])
            run.press("q")
            run.proc.wait(timeout=60)
            assert run.proc.returncode == 0
        finally:
            run.close()
