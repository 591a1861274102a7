"""The command palette (every action by name) and the theme, remembered in config.toml."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.command import CommandPalette

from .conftest import ScriptedAttributor, make_app, tick, wait_for
from .test_processes import notes, panel


async def started(tmp_path, **kw):
    app, clock = make_app(tmp_path, attributor=ScriptedAttributor(), attribution="on", **kw)
    return app, clock, (120, 40)


# -- palette and theme --------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_palette_lists_every_action_and_runs_one(tmp_path):
    app, clock, size = await started(tmp_path)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 2)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Theme", "Quit", "Mark", "Pause", "Export", "Help",
                      "Sort processes by power", "Sort processes by energy",
                      "Sort processes by CPU", "Sort processes by GPU",
                      "Sort processes by name", "Sort processes by pid",
                      "Reverse the process order", "Filter processes", "Process tree",
                      "Process details", "Send SIGTERM to the selected process",
                      "Send SIGKILL to the selected process"):
            assert title in titles, title
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Process tree")
        await pilot.pause(0.3)  # the palette searches in a worker
        assert await wait_for(pilot, lambda: app.screen.query_one("CommandList").option_count)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: panel(app).tree_view)
        assert app.screen is app.main
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_theme_chosen_is_remembered_in_config_toml(tmp_path):
    """The palette's theme picker sets ``App.theme``: the name is saved in config.toml
    (other lines kept); an app started with it uses it."""
    cfg = tmp_path / "cfg" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text("# mine\npue = 1.2\n")
    app, clock, size = await started(tmp_path, config_path=cfg)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock)
        assert cfg.read_text() == "# mine\npue = 1.2\n"  # starting saves nothing
        app.theme = "textual-light"
        assert await wait_for(pilot, lambda: 'theme = "textual-light"' in cfg.read_text())
        assert cfg.read_text() == '# mine\npue = 1.2\ntheme = "textual-light"\n'
        await pilot.press("q")
    (tmp_path / "again").mkdir()
    again, _ = make_app(tmp_path / "again", theme="textual-light", config_path=cfg)
    async with again.run_test(size=size) as pilot:
        assert again.theme == "textual-light"
        await pilot.press("q")


@pytest.mark.asyncio
async def test_an_unknown_theme_is_a_notice(tmp_path):
    app, clock, size = await started(tmp_path, theme="no-such-theme")
    async with app.run_test(size=size) as pilot:
        assert await wait_for(pilot, lambda: any("unknown theme 'no-such-theme'" in n
                                                 for n in notes(app)))
        assert app.theme == "textual-dark"
        await pilot.press("q")


def test_the_ui_command_reads_the_theme_from_config(tmp_path: Path, monkeypatch):
    """`tuimeter` gives the app the theme of config.toml, and where to save another."""
    from tests.fakes.powercap import FakePowercap
    from tuimeter.tui import run

    for name in list(os.environ):
        if name.startswith("TUIMETER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "tuimeter").mkdir(parents=True)
    cfg = tmp_path / "cfg" / "tuimeter" / "config.toml"
    cfg.write_text('theme = "nord"\n')
    fake = FakePowercap(tmp_path / "sys").amd_zen()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    session, problem = run.build(["--powercap-root", str(fake.sensor_root), "--no-gpu",
                                  "-o", str(tmp_path / "s.csv")], start_engine=False)
    assert problem is None
    try:
        assert session.app.theme == "nord" and Path(session.app.config_path) == cfg
    finally:
        session.close()


@pytest.mark.asyncio
async def test_the_palettes_theme_picker_saves_the_choice(tmp_path):
    """ctrl+p, Theme, a theme's name, Enter: applied, and written to config.toml."""
    cfg = tmp_path / "config.toml"
    app, clock, size = await started(tmp_path, config_path=cfg)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock)

        async def choose(text: str) -> None:
            await pilot.press(*text)
            assert await wait_for(pilot, lambda: app.screen.query_one("CommandList")
                                  .option_count > 0)
            await pilot.pause(0.3)  # the search has settled on the best match
            await pilot.press("enter")

        await pilot.press("ctrl+p")
        commands = app.screen
        await choose("Theme")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                              and app.screen is not commands)  # the themes' palette
        await choose("textual-light")
        assert await wait_for(pilot, lambda: cfg.exists() and "light" in cfg.read_text())
        assert app.theme == "textual-light" and cfg.read_text() == 'theme = "textual-light"\n'
        assert any("theme textual-light saved in" in n for n in notes(app))
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_theme_is_not_saved_through_a_link_and_is_kept_for_this_run(tmp_path):
    """Issue 22 item 2 in the UI: config.toml is a link planted by someone else: the
    theme switch changes the theme, says in one notice why it is not remembered, and
    leaves the link and its (dangling) target alone."""
    cfg = tmp_path / "cfg" / "config.toml"
    cfg.parent.mkdir()
    cfg.symlink_to(tmp_path / "planted.conf")
    app, clock, size = await started(tmp_path, config_path=cfg)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock)
        app.theme = "textual-light"
        assert await wait_for(pilot, lambda: any("not remembered" in n for n in notes(app)))
        (note,) = [n for n in notes(app) if "not remembered" in n]
        assert "kept for this run" in note and "symbolic link" in note
        assert app.theme == "textual-light"
        await pilot.press("q")
    assert cfg.is_symlink() and not (tmp_path / "planted.conf").exists()
