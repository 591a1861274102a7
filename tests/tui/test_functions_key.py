"""The ``f`` key: in a session that follows a Python program, its functions by energy,
live, sampled from outside by py-spy in chunks (a fake py-spy here: each chunk ends when
the test says), each chunk given the process's attributed energy over its window; what
cannot work is a notification naming the fix, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fakes import fake_pyspy
from tuimeter.job import JobWatcher
from tuimeter.tui import functions_key
from tuimeter.tui.widgets import ProfilePanel

from .conftest import ScriptedAttributor, make_app, proc, tick, wait_for


@pytest.fixture
def python_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


@pytest.fixture
def pyspy(tmp_path, monkeypatch):
    """The fake py-spy found; its gate folder (each chunk waits for a file ``go`` there)."""
    gate = tmp_path / "gate"
    gate.mkdir()
    exe = fake_pyspy.install(tmp_path)
    monkeypatch.setattr(functions_key, "find_pyspy", lambda: exe)
    monkeypatch.setenv("FAKE_PYSPY_GATE", str(gate))
    return gate


def app_following(tmp_path, pid, power_w=20.0):
    """The app following ``pid``, which the attribution gives ``power_w`` each 1 s tick."""
    members = (proc(pid, "python3", power_w, in_job=True),)
    return make_app(tmp_path, job=JobWatcher(pid), attributor=ScriptedAttributor(members=members))


def said(app) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


@pytest.mark.asyncio
async def test_f_shows_the_programs_functions_by_energy(tmp_path, python_child, pyspy):
    app, clock = app_following(tmp_path, python_child.pid)
    async with app.run_test(size=(110, 44)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("f")
        assert f"sampling process {python_child.pid} with py-spy" in said(app)
        assert await wait_for(pilot, lambda: (pyspy / "started-1").exists())
        await tick(pilot, clock, 2)  # the process gets 20 J in each tick of the chunk
        panel = app.query_one(ProfilePanel)
        assert "waiting for the first samples" in str(panel.render())
        (pyspy / "go").touch()  # the chunk ends: its 4 samples share the 40 J
        profile = app.functions.profile
        assert await wait_for(pilot, lambda: profile.chunks == 1)
        await tick(pilot, clock, 1)
        functions, total_j = profile.latest
        by_name = {f.function: f for f in functions}
        assert total_j == pytest.approx(40.0)
        assert by_name["train"].total_energy_j == pytest.approx(30.0)
        assert by_name["load"].total_energy_j == pytest.approx(10.0)
        assert by_name["<module>"].total_energy_j == pytest.approx(40.0)
        text = str(panel.render())
        assert "train (train.py:10)" in text and "75.0%" in text and "load (train.py:20)" in text
        # the next chunk covers from the end of this one: the tick since then is its
        assert await wait_for(pilot, lambda: (pyspy / "started-2").exists())
        (pyspy / "go").touch()
        assert await wait_for(pilot, lambda: profile.chunks == 2)
        assert profile.latest[1] == pytest.approx(60.0)
        await pilot.press("f")  # f again: sampling stops, the panel goes
        await pilot.pause()
        assert not app.query(ProfilePanel) and app.functions.profile is None
        assert "functions panel closed" in said(app)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_f_without_py_spy_names_the_extra(tmp_path, python_child, monkeypatch):
    monkeypatch.setattr(functions_key, "find_pyspy", lambda: None)
    app, clock = app_following(tmp_path, python_child.pid)
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("f")
        await tick(pilot, clock, 1)
        assert "pip install 'tuimeter[profile]'" in said(app)
        assert not app.query(ProfilePanel)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_f_without_ptrace_permission_says_how(tmp_path, python_child, pyspy, monkeypatch):
    monkeypatch.setenv("FAKE_PYSPY_FAIL", "Error: Failed to attach to process: Operation "
                       "not permitted (os error 1)")
    app, clock = app_following(tmp_path, python_child.pid)
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("f")
        assert await wait_for(pilot, lambda: "ptrace_scope" in said(app))
        assert app.functions.profile is None and app.profile_source is None
        await tick(pilot, clock, 1)
        assert not app.query(ProfilePanel)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_the_panel_closes_when_the_program_ends(tmp_path, python_child, pyspy,
                                                      monkeypatch):
    app, clock = app_following(tmp_path, python_child.pid)
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("f")
        assert await wait_for(pilot, lambda: (pyspy / "started-1").exists())
        python_child.kill()
        python_child.wait()
        monkeypatch.setenv("FAKE_PYSPY_FAIL", "Error: Failed to find process")  # the next run
        (pyspy / "go").touch()
        assert await wait_for(pilot, lambda: "has ended: functions panel closed" in said(app))
        assert app.functions.profile is None and not app.query(ProfilePanel)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_f_on_a_program_that_is_not_python(tmp_path, pyspy):
    child = subprocess.Popen(["sleep", "60"])
    try:
        app, clock = app_following(tmp_path, child.pid)
        async with app.run_test(size=(110, 40)) as pilot:
            await tick(pilot, clock, 1)
            await pilot.press("f")
            assert f"process {child.pid} (sleep) is not a Python program" in said(app)
            assert not (pyspy / "started-1").exists() and app.functions.profile is None
            await pilot.press("q")
    finally:
        child.kill()
        child.wait()


@pytest.mark.asyncio
async def test_f_without_a_followed_program(tmp_path, pyspy):
    app, clock = make_app(tmp_path)
    async with app.run_test(size=(110, 40)) as pilot:
        await tick(pilot, clock, 1)
        await pilot.press("f")
        assert "tuimeter -- python SCRIPT, or tuimeter --pid PID" in said(app)
        await pilot.press("q")


def test_a_python_child_of_a_shell_is_the_one_sampled():
    """``tuimeter -- sh -c 'python train.py'``: the job's root is a shell; the member
    using the most energy that runs Python is sampled."""
    members = (proc(300, "sh", 0.0, in_job=True), proc(301, "python3", 5.0, energy_j=50.0),
               proc(302, "python3", 9.0, energy_j=90.0), proc(303, "cc", 40.0, energy_j=900.0))
    pythons = {301, 302}
    check = lambda pid: pid in pythons  # noqa: E731
    assert functions_key.python_process(300, members, check) == 302
    assert functions_key.python_process(301, members, check) == 301
    assert functions_key.python_process(300, members[:1], check) is None
