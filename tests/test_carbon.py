"""Carbon intensity resolution: priority of sources, country look-up, errors users read."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from tuimeter import carbon
from tuimeter.carbon import CarbonError, lookup_country
from tuimeter.model import CarbonInfo
from tuimeter.config import ConfigError, ConfigWarning
from tuimeter.settings import resolve_carbon

DATA = Path(carbon.__file__).parent / "data"


@pytest.fixture
def no_config(tmp_path: Path) -> Path:
    """A config path that does not exist, so the developer's own config never leaks in."""
    return tmp_path / "absent.toml"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_default_is_world_average_and_says_so(no_config: Path) -> None:
    """With nothing set, 475 g/kWh (IEA 2019) is used and flagged as a default."""
    info = resolve_carbon(env={}, config_path=no_config)
    assert info.g_per_kwh == 475.0
    assert info.pue == 1.0
    assert info.is_default
    assert "default" in info.source and "IEA 2019" in info.source


@pytest.mark.parametrize("spelling", ["FRA", "fra", "FR", "fr", "France", "FRANCE", " france "])
def test_country_spellings_resolve_to_france(spelling: str, no_config: Path) -> None:
    """Alpha-3, alpha-2 and names in any case all find the same row."""
    info = resolve_carbon(country=spelling, env={}, config_path=no_config)
    assert info.g_per_kwh == 56.0
    assert info.source == "FRA France: 56.0 g/kWh (2023, Our World in Data / Ember, CC BY 4.0)"
    assert not info.is_default


def test_every_table_country_is_reachable_by_alpha2() -> None:
    """Each alpha-2 code in the mapping points at a row whose alpha-3 matches it."""
    with open(DATA / "iso_alpha2.csv", encoding="utf-8") as fh:
        mapping = {row["alpha3"]: row["alpha2"] for row in csv.DictReader(fh)}
    table = carbon.intensity_table()
    missing = sorted(set(table) - set(mapping))
    assert missing == []
    for iso3 in table:
        assert lookup_country(mapping[iso3]).iso3 == iso3


@pytest.mark.parametrize(
    ("alpha2", "iso3"),
    [("GB", "GBR"), ("US", "USA"), ("DE", "DEU"), ("NA", "NAM"), ("KR", "KOR"), ("CH", "CHE")],
)
def test_alpha2_codes_that_are_easy_to_get_wrong(alpha2: str, iso3: str) -> None:
    """Spot checks: GB (not UK), NA (Namibia, not a missing value), CH (Switzerland)."""
    assert lookup_country(alpha2).iso3 == iso3


def test_iso_long_name_and_alias_resolve() -> None:
    """The ISO name ("Russian Federation") and "UK" work besides the table's own names."""
    assert lookup_country("Russian Federation").iso3 == "RUS"
    assert lookup_country("uk").iso3 == "GBR"


def test_unknown_country_suggests_close_matches(no_config: Path) -> None:
    """A typo gives a one-line error naming the likely country."""
    with pytest.raises(CarbonError) as err:
        resolve_carbon(country="Frnace", env={}, config_path=no_config)
    message = str(err.value)
    assert "\n" not in message
    assert "Frnace" in message and "FRA (France)" in message
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("bad", ["abc", "-3", "-0.001", "nan", "inf", ""])
def test_bad_intensity_is_rejected(bad: str, no_config: Path) -> None:
    """Intensities that are not positive finite numbers raise CarbonError."""
    with pytest.raises(CarbonError, match="carbon intensity"):
        resolve_carbon(intensity_g_per_kwh=bad, env={}, config_path=no_config)


@pytest.mark.parametrize("bad", ["0.9", "x", "0"])
def test_pue_below_one_is_rejected(bad: str, no_config: Path) -> None:
    """PUE is total facility power / IT power, so it is never below 1."""
    with pytest.raises(CarbonError, match="PUE"):
        resolve_carbon(pue=bad, env={}, config_path=no_config)


def test_explicit_beats_env_beats_config(tmp_path: Path) -> None:
    """Arguments override environment variables, which override the config file."""
    config = write_config(tmp_path, 'country = "DEU"\npue = 1.5\n')
    env = {"TUIMETER_COUNTRY": "SWE", "TUIMETER_PUE": "1.2"}
    assert resolve_carbon(env={}, config_path=config).source.startswith("DEU")
    assert resolve_carbon(env={}, config_path=config).pue == 1.5
    from_env = resolve_carbon(env=env, config_path=config)
    assert from_env.source.startswith("SWE") and from_env.pue == 1.2
    given = resolve_carbon(country="FRA", pue=1.1, env=env, config_path=config)
    assert given.source.startswith("FRA") and given.pue == 1.1


def test_explicit_country_beats_env_intensity(no_config: Path) -> None:
    """The grid figure is one setting: a --country given beats TUIMETER_CARBON_INTENSITY."""
    info = resolve_carbon(country="FR", env={"TUIMETER_CARBON_INTENSITY": "300"}, config_path=no_config)
    assert info.g_per_kwh == 56.0


def test_intensity_beats_country_at_the_same_level(no_config: Path) -> None:
    """Within one level a number is more specific than a country."""
    env = {"TUIMETER_COUNTRY": "FRA", "TUIMETER_CARBON_INTENSITY": "300"}
    info = resolve_carbon(env=env, config_path=no_config)
    assert info.g_per_kwh == 300.0
    assert "environment" in info.source


def test_config_file_under_xdg_config_home(tmp_path: Path) -> None:
    """Without config_path the file is looked up under $XDG_CONFIG_HOME/tuimeter/."""
    (tmp_path / "tuimeter").mkdir()
    (tmp_path / "tuimeter" / "config.toml").write_text("carbon_intensity = 123.5\n", encoding="utf-8")
    info = resolve_carbon(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert info.g_per_kwh == 123.5
    assert "config" in info.source


def test_broken_config_file_is_a_config_error(tmp_path: Path) -> None:
    """A malformed TOML file names its path instead of crashing with a parser traceback
    (a ConfigError, the config reader's own type, not a CarbonError)."""
    config = write_config(tmp_path, "country = \n")
    with pytest.raises(ConfigError, match="config.toml"):
        resolve_carbon(env={}, config_path=config)


def test_empty_env_values_are_ignored(no_config: Path) -> None:
    """`TUIMETER_COUNTRY=` (set but empty) falls through to the default."""
    info = resolve_carbon(env={"TUIMETER_COUNTRY": "", "TUIMETER_PUE": ""}, config_path=no_config)
    assert info.is_default


def test_grams_per_joule_is_intensity_times_pue_over_a_kwh() -> None:
    """The one factor every CO2e figure uses, carried by the carbon settings themselves:
    3.6 MJ at 56 g/kWh and PUE 1.5 is 84 g; 0 g/kWh is 0 g; a changed figure
    (``dataclasses.replace``, as a live source's is made) gets its own factor."""
    import dataclasses

    info = CarbonInfo(g_per_kwh=56.0, pue=1.5, source="test")
    assert 3.6e6 * info.g_per_j == pytest.approx(84.0)
    assert CarbonInfo(g_per_kwh=0.0, pue=1.2, source="renewables").g_per_j == 0.0
    assert dataclasses.replace(info, g_per_kwh=112.0).g_per_j == pytest.approx(168.0 / 3.6e6)
    # the factor is derived, not a setting: two figures that agree are equal
    assert info == CarbonInfo(g_per_kwh=56.0, pue=1.5, source="test")


def test_zero_intensity_is_accepted(no_config: Path) -> None:
    """Guards on-site renewables and green tariffs: 0 g/kWh is a legitimate intensity
    (given, from the environment or from the config file); only negative is an error."""
    assert resolve_carbon(intensity_g_per_kwh=0, env={}, config_path=no_config).g_per_kwh == 0.0
    env = {"TUIMETER_CARBON_INTENSITY": "0"}
    assert resolve_carbon(env=env, config_path=no_config).g_per_kwh == 0.0


def test_misspelled_config_key_warns_once_naming_file_key_and_known_keys(tmp_path: Path) -> None:
    """Guards against a silently ignored setting: `contry = "SE"` warns (not fails) with
    the file, the key and the keys that exist, once however often settings are resolved."""
    config = write_config(tmp_path, 'contry = "SE"\npue = 1.1\n')
    with pytest.warns(ConfigWarning) as seen:
        info = resolve_carbon(env={}, config_path=config)
        resolve_carbon(env={}, config_path=config)
    assert info.pue == pytest.approx(1.1) and info.is_default
    [w] = seen
    message = str(w.message)
    assert str(config) in message and "'contry'" in message
    for known in ("country", "carbon_intensity", "pue"):
        assert known in message


@pytest.mark.parametrize("where, kwargs, needle", [
    ("env", {}, "TUIMETER_COUNTRY"),
    ("config", {}, "config.toml"),
])
def test_unknown_country_says_where_it_came_from(tmp_path: Path, where, kwargs, needle) -> None:
    """Guards a confusing error: an unknown country from TUIMETER_COUNTRY or the config
    file names that origin, so the user knows what to fix."""
    env = {"TUIMETER_COUNTRY": "zzz"} if where == "env" else {}
    config = write_config(tmp_path, 'country = "zzz"\n') if where == "config" else tmp_path / "no"
    with pytest.raises(CarbonError) as err:
        resolve_carbon(env=env, config_path=config)
    assert needle in str(err.value) and "'zzz'" in str(err.value)


def test_bad_env_intensity_names_the_variable(no_config: Path) -> None:
    """The error for TUIMETER_CARBON_INTENSITY=abc names the variable."""
    with pytest.raises(CarbonError, match="TUIMETER_CARBON_INTENSITY"):
        resolve_carbon(env={"TUIMETER_CARBON_INTENSITY": "abc"}, config_path=no_config)


# -- hostile or broken settings (issue 9, item 11) -----------------------------------------
@pytest.mark.parametrize("bad", ["1e308", "5000.1", "1e400", "-inf", "NaN"])
@pytest.mark.parametrize("where", ["given", "env", "config"])
def test_absurd_intensity_is_refused_with_the_reason(bad: str, where: str, tmp_path: Path) -> None:
    """1e308 g/kWh was accepted (CO2e figures of 1e300 g); no grid exceeds ~2,000 g/kWh,
    so anything above 5,000 is refused, saying why, from every level."""
    kw: dict = {"env": {}, "config_path": tmp_path / "absent.toml"}
    if where == "given":
        kw["intensity_g_per_kwh"] = bad
    elif where == "env":
        kw["env"] = {"TUIMETER_CARBON_INTENSITY": bad}
    else:
        kw["config_path"] = write_config(tmp_path, f"carbon_intensity = {bad.lower()}\n")
    with pytest.raises(CarbonError, match="carbon intensity") as err:
        resolve_carbon(**kw)
    if bad in ("1e308", "5000.1"):
        assert "at most 5000 (no grid exceeds about 2000 g/kWh)" in str(err.value)


def test_highest_real_intensity_is_accepted(no_config: Path) -> None:
    assert resolve_carbon(intensity_g_per_kwh="5000", env={}, config_path=no_config).g_per_kwh == 5000


@pytest.mark.parametrize("bad", ["1e308", "10.5", "inf"])
def test_absurd_pue_is_refused(bad: str, no_config: Path) -> None:
    with pytest.raises(CarbonError, match="PUE"):
        resolve_carbon(pue=bad, env={}, config_path=no_config)


@pytest.mark.parametrize("content, reason", [
    (b"country = \"caf\xe9\"\n", "not UTF-8 text (byte 0xe9 at offset 14)"),
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe binary", "not UTF-8 text"),
    (b"# " + b"x" * (64 * 1024) + b"\n", "larger than 64 KiB"),
])
def test_unreadable_config_is_one_line(tmp_path: Path, content: bytes, reason: str) -> None:
    """A binary or non-UTF-8 config.toml raised UnicodeDecodeError (a traceback); a huge
    one is not read past 64 KiB."""
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="cannot read config file") as err:
        resolve_carbon(env={}, config_path=path)
    assert reason in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_config_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path, special) -> None:
    """A config linked to /dev/zero was read until memory ran out; a FIFO would block
    forever. Only regular files are read (a link to one is fine)."""
    if special == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    else:
        target = Path(special)
        if not target.exists():
            pytest.skip("no /dev/zero here")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="not a regular file"):
        resolve_carbon(env={}, config_path=link)
    real = tmp_path / "real.toml"
    real.write_text("country = \"FR\"\n")
    link.unlink()
    link.symlink_to(real)
    assert resolve_carbon(env={}, config_path=link).g_per_kwh == lookup_country("FR").g_per_kwh


def test_help_loads_neither_config_nor_the_tables():
    """``tuimeter record --help``, and then importing tuimeter.carbon (which a command
    that resolves carbon settings loads), import neither tuimeter.config (platformdirs,
    tomllib) nor the table readers: every --help must start in at most 0.25 s
    (regression: tuimeter.carbon imported them at the top)."""
    import subprocess
    import sys

    code = ("import sys\nfrom tuimeter.cli import main\n"
            "try:\n    main(['record', '--help'])\nexcept SystemExit:\n    pass\n"
            "import tuimeter.carbon\n"
            "print(sorted(m for m in ('tuimeter.config', 'platformdirs', 'tomllib', "
            "'importlib.resources', 'urllib.request') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "[]"
