"""Devices, not just watts: the domain table's device column (GPU model, busy, memory,
temperature, power limit, clock; CPU frequency and temperature) and the devices screen."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from tests.fakes.scripted import DeviceScripted, FakeClock, domain, rapl_like
from tuimeter.model import DeviceInfo, DomainKind
from tuimeter.tui.devices import DeviceScreen, device_text, short_name
from tuimeter.tui.widgets import DomainTable

from .conftest import make_app, replay_app, tick

H200 = DeviceInfo(t_s=0.0, name="NVIDIA H200", util_pct=87.0, mem_util_pct=35.0,
                  mem_used_b=41 * 2**30, mem_total_b=143_771 * 2**20, temp_c=64.0,
                  power_limit_w=700.0, clock_sm_mhz=1980.0, clock_mem_mhz=3201.0)
CPU = DeviceInfo(t_s=0.0, temp_c=55.0, freq_mhz=2994.0)


def test_a_gpu_line_has_each_reading_with_its_unit():
    assert device_text(H200, 40) == "H200 87% 41/140G 64C 700W 1980MHz"
    assert device_text(CPU, 40) == "2.99GHz 55C"
    assert device_text(None, 40) == ""


def test_a_reading_the_driver_does_not_give_is_na_in_its_place():
    no_temp = DeviceInfo(t_s=0.0, name="NVIDIA H200", util_pct=87.0, mem_used_b=2**30,
                         mem_total_b=8 * 2**30, power_limit_w=700.0, clock_sm_mhz=1980.0)
    assert device_text(no_temp, 40) == "H200 87% 1.0/8.0G N/A 700W 1980MHz"
    assert device_text(DeviceInfo(t_s=0.0, temp_c=40.0), 40) == "N/A 40C"


def test_the_line_drops_its_last_fields_to_fit():
    assert device_text(H200, 24) == "H200 87% 41/140G 64C"
    assert device_text(H200, 4) == "H200"


@pytest.mark.parametrize("name,short", [
    ("NVIDIA H200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA RTX A6000", "RTX A6000"),
    ("Tesla V100-SXM2-16GB", "V100"), ("NVIDIA L40S", "L40S"), ("NVIDIA GH200 480GB", "GH200"),
    ("\x1b[31mEVIL GPU", "\\x1b[31mEV"), ("", ""),
])
def test_short_names(name, short):
    assert short_name(name) == short


def gpu_with_readings(info: DeviceInfo = H200) -> DeviceScripted:
    return DeviceScripted("nvml", [domain("gpu0", DomainKind.GPU, source="nvml")],
                          {"gpu0": 150.0}, infos={"gpu0": info})


def cells(app, key: str) -> list[str]:
    table = app.query_one(DomainTable)
    return [table.cell_text(key, column) for column, _ in table.shown_columns]


@pytest.mark.asyncio
async def test_gpu_and_cpu_rows_show_their_readings_at_160_columns(tmp_path):
    rapl = DeviceScripted("rapl", rapl_like()._domains, rapl_like().power_w,
                          infos={"package-0": CPU})
    app, clock = make_app(tmp_path, sensors=[rapl, gpu_with_readings()])
    async with app.run_test(size=(160, 48)) as pilot:
        app.engine.refresh_devices()
        await tick(pilot, clock, 2)
        assert cells(app, "gpu0")[-1] == "H200 87% 41/140G 64C 700W 1980MHz"
        assert cells(app, "package-0")[-1] == "2.99GHz 55C"
        assert cells(app, "psys")[-1] == ""
        await pilot.press("q")


@pytest.mark.asyncio
async def test_the_device_column_is_dropped_at_80x24(tmp_path):
    app, clock = make_app(tmp_path, sensors=[rapl_like(), gpu_with_readings()])
    async with app.run_test(size=(80, 24)) as pilot:
        app.engine.refresh_devices()
        await tick(pilot, clock, 2)
        assert not any("H200" in c for c in cells(app, "gpu0"))
        await pilot.resize_terminal(160, 48)
        await tick(pilot, clock, 1)
        assert "H200" in cells(app, "gpu0")[-1]
        await pilot.press("q")


@pytest.mark.asyncio
async def test_d_shows_every_reading_in_full_and_esc_closes(tmp_path):
    gpu = DeviceInfo(t_s=0.0, name="NVIDIA \x1b[2JH200", util_pct=87.0, temp_c=None,
                     clock_sm_mhz=1980.0, clock_mem_mhz=3201.0)
    app, clock = make_app(tmp_path, sensors=[rapl_like(), gpu_with_readings(gpu)])
    async with app.run_test(size=(100, 30)) as pilot:
        app.engine.refresh_devices()
        await tick(pilot, clock, 2)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, DeviceScreen)
        text = str(app.screen.query_one("#devices", Static).content)
        assert "gpu0  NVIDIA" in text and "busy         87 %" in text
        assert "temperature  N/A" in text and "memory clock 3201 MHz" in text
        assert "\\x1b[2J" in text and "\x1b" not in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DeviceScreen)
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_replay_has_no_readings_no_device_column_and_d_says_why():
    """The session file does not record them: the column would be empty."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await tick(pilot, clock, 3)
        header = app.query_one(DomainTable).row_text("header")
        assert "device" not in header and "energy" in header
        await pilot.press("d")
        await pilot.pause()
        assert "not recorded in the session file" in str(
            app.screen.query_one("#devices", Static).content)
        await pilot.press("escape")
        await pilot.press("q")
