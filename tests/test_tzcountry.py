"""The grid's country guessed from the time zone (offline), over fake zone files under
``TUIMETER_TZ_ROOT``: labelled as a guess wherever the figure shows, and overridden by
``--country``, the environment and the config file."""

from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from tests.helpers import env_for, tuimeter
from tests.fakes.powercap import FakePowercap
from tuimeter.carbon import lookup_country
from tuimeter.settings import resolve_carbon
from tuimeter.tzcountry import guess_country

ZONE_TAB = ("# tzdb timezone descriptions\n#\nAD\t+4230+00131\tEurope/Andorra\n"
            "DE\t+5230+01322\tEurope/Berlin\nFR\t+4852+00220\tEurope/Paris\n")
ZONE1970 = ("#codes\tcoordinates\tTZ\tcomments\nDE,DK,NO,SE,SJ\t+5230+01322\tEurope/Berlin\n"
            "CH,DE,LI\t+4723+00832\tEurope/Zurich\nIN\t+2232+08822\tAsia/Kolkata\n")


def zone_root(tmp_path, zone: str | None = "Europe/Berlin", zone_tab: bool = True):
    """A root with usr/share/zoneinfo/{zone.tab,zone1970.tab} and etc/localtime linked to
    ``zone`` (as Debian and Fedora make it)."""
    root = tmp_path / "root"
    info = root / "usr" / "share" / "zoneinfo"
    info.mkdir(parents=True)
    if zone_tab:
        (info / "zone.tab").write_text(ZONE_TAB)
    (info / "zone1970.tab").write_text(ZONE1970)
    (root / "etc").mkdir()
    if zone:
        os.symlink(f"../usr/share/zoneinfo/{zone}", root / "etc" / "localtime")
    return root


def test_the_zone_of_etc_localtime_gives_its_country(tmp_path):
    env = {"TUIMETER_TZ_ROOT": str(zone_root(tmp_path))}
    assert guess_country(env) == ("DE", "Europe/Berlin")
    info = resolve_carbon(env=env, config_path=tmp_path / "none.toml")
    assert info.g_per_kwh == lookup_country("DEU").g_per_kwh and not info.is_default
    assert info.source.endswith("guessed from time zone Europe/Berlin (--country sets it)")


@pytest.mark.parametrize("zone,tz,expected", [
    ("Europe/Berlin", ":Europe/Paris", ("FR", "Europe/Paris")),  # $TZ wins
    (None, "Asia/Kolkata", ("IN", "Asia/Kolkata")),  # zone1970.tab, one country
    (None, "Europe/Zurich", None),  # zone1970.tab: three countries share it
    (None, "UTC", None),
    (None, "../../etc/passwd", None),  # not a zone name
    (None, "", None),  # nothing at all
])
def test_tz_and_the_zone_tables(tmp_path, zone, tz, expected):
    env = {"TUIMETER_TZ_ROOT": str(zone_root(tmp_path, zone, zone_tab=tz != "Asia/Kolkata")),
           "TZ": tz}
    assert guess_country(env) == expected


def test_debian_etc_timezone_and_hostile_tables(tmp_path):
    root = zone_root(tmp_path, zone=None)
    (root / "etc" / "timezone").write_text("Europe/Andorra\n")
    env = {"TUIMETER_TZ_ROOT": str(root)}
    assert guess_country(env) == ("AD", "Europe/Andorra")
    (root / "usr/share/zoneinfo/zone.tab").write_text("\x1b[2J\t+0\tEurope/Andorra\n")
    (root / "usr/share/zoneinfo/zone1970.tab").write_text("")
    assert guess_country(env) is None  # not a country code: no guess


def test_country_environment_and_config_beat_the_guess(tmp_path):
    env = {"TUIMETER_TZ_ROOT": str(zone_root(tmp_path))}
    assert resolve_carbon("FRA", env=env).source.startswith("FRA ")
    assert resolve_carbon(env={**env, "TUIMETER_COUNTRY": "NO"}).source.startswith("NOR ")
    cfg = tmp_path / "config.toml"
    cfg.write_text('country = "IT"\n')
    assert resolve_carbon(env=env, config_path=cfg).source.startswith("ITA ")


def test_record_labels_the_guess_in_the_session_file(tmp_path):
    """`tuimeter record` with no country set: the session file's grid figure is
    Germany's, its source says it was guessed from the time zone."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    env = env_for(tmp_path, fake)
    env["TUIMETER_TZ_ROOT"] = str(zone_root(tmp_path))
    out = tmp_path / "s.csv"
    subprocess.run(tuimeter("record", "-o", str(out), "--no-gpu", "--no-socket",
                            "--duration", "1", "-i", "0.5"), env=env, check=True,
                   capture_output=True, timeout=120)
    text = out.read_text()
    assert "guessed from time zone Europe/Berlin" in text
    df = pd.read_csv(out)
    assert len(df) > 0


def test_the_totals_panel_marks_the_guess(tmp_path):
    from tuimeter.tui.widgets._totals_panel import grid_source

    env = {"TUIMETER_TZ_ROOT": str(zone_root(tmp_path))}
    assert grid_source(resolve_carbon(env=env, config_path=tmp_path / "x")) == "DEU? (time zone)"
    assert grid_source(resolve_carbon("DEU", env=env)).startswith("DEU 20")
