"""Grid carbon intensity and PUE: which g CO2e per kWh turns joules into CO2e.

Where the figure comes from, first match wins, setting by setting:

1. explicit arguments (the CLI's ``--country`` / ``--carbon-intensity`` / ``--pue``);
2. environment variables ``TUIMETER_COUNTRY``, ``TUIMETER_CARBON_INTENSITY`` (g/kWh),
   ``TUIMETER_PUE``;
3. the config file ``$XDG_CONFIG_HOME/tuimeter/config.toml`` (``~/.config/...`` when the
   variable is unset), top-level keys ``country``, ``carbon_intensity``, ``pue``;
4. the country guessed from the system's time zone (:mod:`tuimeter.tzcountry`, offline),
   its source ending ``guessed from time zone Europe/Berlin``;
5. the world average, 475 g CO2e/kWh (IEA Global Energy & CO2 Status Report 2019, the
   figure CodeCarbon uses), flagged ``is_default`` so the UI can say it is a guess.

The grid intensity is one setting: the first level that names a country *or* an
intensity decides it (an explicit ``--country`` beats ``TUIMETER_CARBON_INTENSITY``);
within one level a number beats a country, being the more specific. PUE is resolved on
its own, default 1.0 (no data-centre overhead).

Countries are looked up in ``data/grid_carbon_intensity.csv`` (Our World in Data / Ember,
CC BY 4.0) by ISO 3166 alpha-3 (``FRA``), alpha-2 (``FR``, through
``data/iso_alpha2.csv``, generated from pycountry 26.2.16, ISO 3166-1) or name, any case
(``france``). Anything unusable raises :class:`CarbonError`, a ``ValueError`` whose
one-line message says what was wrong and what would work.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from .model import CarbonInfo

# The table readers (csv, importlib.resources, difflib) and tuimeter.config (platformdirs,
# tomllib) are imported where they are used, so that loading this module stays cheap (every
# --help may). Grams per joule is CarbonInfo.g_per_j (tuimeter.model).

#: g CO2e per kWh when nothing better is known (IEA 2019, as used by CodeCarbon).
WORLD_AVERAGE_G_PER_KWH = 475.0
DEFAULT_SOURCE = (
    "default world average: 475 g/kWh (IEA 2019); "
    "set a country (--country, TUIMETER_COUNTRY) for a better figure"
)
OWID_CITATION = "Our World in Data / Ember, CC BY 4.0"

ENV_COUNTRY = "TUIMETER_COUNTRY"
ENV_INTENSITY = "TUIMETER_CARBON_INTENSITY"
ENV_PUE = "TUIMETER_PUE"

#: common names that are not ISO codes
_ALIASES = {"uk": "GBR", "great britain": "GBR", "england": "GBR", "america": "USA"}


#: the carbon keys of config.toml (tuimeter.config.KEYS has them all)
CONFIG_KEYS = ("country", "carbon_intensity", "pue")
_ENV_NAMES = {"country": ENV_COUNTRY, "carbon_intensity": ENV_INTENSITY, "pue": ENV_PUE}


class CarbonError(ValueError):
    """A country, intensity or PUE that cannot be used; the message says what would."""


@dataclass(frozen=True)
class CountryIntensity:
    """One row of the grid intensity table."""

    iso3: str
    country: str
    g_per_kwh: float
    year: int

    def source(self) -> str:
        return f"{self.iso3} {self.country}: {self.g_per_kwh:.1f} g/kWh ({self.year}, {OWID_CITATION})"


@dataclass(frozen=True)
class CarbonSettings:
    """The raw settings found at one level (arguments, environment or config file).

    Values are as the user wrote them (strings from the environment, anything from TOML);
    ``origin`` names the level in error messages and source texts.
    """

    origin: str
    country: object = None
    intensity_g_per_kwh: object = None
    pue: object = None
    config_path: Path | None = None

    def where(self, key: str) -> str:
        """Where setting ``key`` (a config key name) came from, for error messages."""
        if self.origin == "environment":
            return f"from {_ENV_NAMES[key]}"
        if self.config_path is not None:
            return f"from {key!r} in {self.config_path}"
        return self.origin

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "CarbonSettings":
        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value not in (None, "") else None

        return cls("environment", get(ENV_COUNTRY), get(ENV_INTENSITY), get(ENV_PUE))

    @classmethod
    def from_config(cls, path: Path) -> "CarbonSettings":
        """Settings from a TOML file; a missing file gives empty settings."""
        from .config import read_table

        data = read_table(path)
        return cls(f"config {path}", data.get("country"), data.get("carbon_intensity"),
                   data.get("pue"), Path(path))


#: the largest config.toml read, bytes (it holds three keys)
MAX_CONFIG_BYTES = 64 * 1024


def read_config_text(path: str | os.PathLike) -> str:
    """The text of a config file: a regular file (a link to one is fine) of at most
    MAX_CONFIG_BYTES, UTF-8. FileNotFoundError when there is none; CarbonError with a
    one-line reason for anything else (a device such as /dev/zero, a FIFO, binary data),
    which is never read past the limit nor waited on."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CarbonError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CarbonError(f"cannot read config file {path}: not a regular file")
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise CarbonError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise CarbonError(f"cannot read config file {path}: larger than "
                          f"{MAX_CONFIG_BYTES // 1024} KiB")
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CarbonError(f"cannot read config file {path}: not UTF-8 text (byte "
                          f"0x{data[exc.start]:02x} at offset {exc.start})") from None


def __getattr__(name: str) -> Any:
    """``ConfigWarning`` and ``default_config_path``, re-exported from tuimeter.config
    (imported when first asked for)."""
    if name in ("ConfigWarning", "default_config_path"):
        from . import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _read_data(name: str) -> list[dict[str, str]]:
    import csv
    import io
    from importlib import resources

    text = (resources.files("tuimeter") / "data" / name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=1)
def intensity_table() -> dict[str, CountryIntensity]:
    """The vendored table, by ISO alpha-3 (parsed once)."""
    table = {}
    for row in _read_data("grid_carbon_intensity.csv"):
        table[row["iso3"]] = CountryIntensity(
            row["iso3"], row["country"], float(row["g_co2e_per_kwh"]), int(row["year"])
        )
    return table


@lru_cache(maxsize=1)
def _country_keys() -> dict[str, str]:
    """Lower-case alpha-2, alpha-3 and names -> alpha-3, for countries in the table."""
    table = intensity_table()
    keys: dict[str, str] = {}
    for row in _read_data("iso_alpha2.csv"):
        if row["alpha3"] in table:
            keys[row["alpha2"].lower()] = row["alpha3"]
            keys.setdefault(row["name"].lower(), row["alpha3"])
    for entry in table.values():
        keys[entry.iso3.lower()] = entry.iso3
        keys[entry.country.lower()] = entry.iso3
    for alias, iso3 in _ALIASES.items():
        keys.setdefault(alias, iso3)
    return keys


def lookup_country(country: str, origin: str = "") -> CountryIntensity:
    """A table row for ``FRA``, ``FR`` or ``france``; CarbonError with suggestions if none
    (``origin``, e.g. "from TUIMETER_COUNTRY", is named in it)."""
    import difflib

    key = " ".join(str(country).split()).lower()
    keys = _country_keys()
    if key in keys:
        return intensity_table()[keys[key]]
    close = difflib.get_close_matches(key, list(keys), n=3, cutoff=0.6)
    names = []
    for match in close:
        entry = intensity_table()[keys[match]]
        label = f"{entry.iso3} ({entry.country})"
        if label not in names:
            names.append(label)
    hint = f"did you mean {', '.join(names)}?" if names else "use an ISO code such as FRA or FR"
    where = f" ({origin})" if origin else ""
    raise CarbonError(f"unknown country {country!r}{where}: {hint}")


def _bounded_number(value: object, what: str, minimum: float, maximum: float,
                    why_max: str) -> float:
    bad = isinstance(value, bool)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        bad = True
        number = math.nan
    if bad or not math.isfinite(number) or number < minimum:
        raise CarbonError(f"{what} must be >= {minimum:g} (a finite number), got {value!r}")
    if number > maximum:
        raise CarbonError(f"{what} must be at most {maximum:g} ({why_max}), got {value!r}")
    return number


#: the largest grid intensity accepted, g CO2e/kWh: no grid exceeds about 2,000 (lignite
#: alone is ~1,100-1,300), so a larger figure is a typo or a unit mix-up (g/MWh)
MAX_INTENSITY_G_PER_KWH = 5000.0
#: the largest PUE accepted: reported data centres lie between 1.0 and about 3
MAX_PUE = 10.0


def check_intensity(value: object, origin: str = "carbon intensity") -> float:
    """A grid intensity in g CO2e/kWh, 0 .. MAX_INTENSITY_G_PER_KWH (0: on-site
    renewables, a green tariff)."""
    return _bounded_number(value, f"carbon intensity (g CO2e/kWh, {origin})", 0.0,
                           MAX_INTENSITY_G_PER_KWH, "no grid exceeds about 2000 g/kWh")


def check_pue(value: object, origin: str = "PUE") -> float:
    """A power usage effectiveness, 1.0 .. MAX_PUE (1.0: no overhead beyond the IT load)."""
    return _bounded_number(value, f"PUE ({origin})", 1.0, MAX_PUE,
                           "data centres report 1.0 to about 3")


def resolve_carbon(
    country: str | None = None,
    intensity_g_per_kwh: float | str | None = None,
    pue: float | str | None = None,
    env: Mapping[str, str] = os.environ,
    config_path: str | os.PathLike | None = None,
) -> CarbonInfo:
    """The CarbonInfo to use, by the priority in the module docstring.

    ``config_path`` overrides the XDG location (None: the default path; a missing file is
    fine). Raises CarbonError for an unknown country, a non-numeric or negative
    intensity, a PUE below 1, or an unreadable config file.
    """
    from .config import default_config_path

    path = Path(config_path) if config_path is not None else default_config_path(env)
    levels = [
        CarbonSettings("given", country, intensity_g_per_kwh, pue),
        CarbonSettings.from_env(env),
        CarbonSettings.from_config(path),
    ]
    pue_value = 1.0
    for level in levels:
        if level.pue is not None:
            pue_value = check_pue(level.pue, level.where("pue"))
            break
    for level in levels:
        if level.intensity_g_per_kwh is not None:
            g = check_intensity(level.intensity_g_per_kwh, level.where("carbon_intensity"))
            return CarbonInfo(g, pue_value, f"{g:g} g/kWh ({level.origin})")
        if level.country is not None:
            origin = "" if level.origin == "given" else level.where("country")
            entry = lookup_country(str(level.country), origin)
            return CarbonInfo(entry.g_per_kwh, pue_value, entry.source())
    from .tzcountry import guess_country

    guess = guess_country(env)
    if guess is not None:
        try:
            entry = lookup_country(guess[0])
        except CarbonError:  # a zone whose country the table lacks
            pass
        else:
            return CarbonInfo(entry.g_per_kwh, pue_value,
                              f"{entry.source()}; {GUESSED} {guess[1]} (--country sets it)")
    return CarbonInfo(WORLD_AVERAGE_G_PER_KWH, pue_value, DEFAULT_SOURCE, is_default=True)


#: how a grid figure guessed from the time zone says so (its source's end)
GUESSED = "guessed from time zone"
