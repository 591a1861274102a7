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

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from .checks import (MAX_INTENSITY_G_PER_KWH, MAX_PUE, CarbonError, check_intensity,
                     check_pue)
from .model import CarbonInfo

# The table readers (csv, importlib.resources, difflib) are imported where they are used,
# so that loading this module stays cheap (every --help may). Grams per joule is
# CarbonInfo.g_per_j (tuimeter.model). This module reads no setting: tuimeter.settings
# hands it the levels.

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


#: the carbon keys of config.toml (tuimeter.settings declares them all)
CONFIG_KEYS = ("country", "carbon_intensity", "pue")
_ENV_NAMES = {"country": ENV_COUNTRY, "carbon_intensity": ENV_INTENSITY, "pue": ENV_PUE}


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


def carbon_info(levels: Sequence[CarbonSettings], env: Mapping[str, str]) -> CarbonInfo:
    """The CarbonInfo the ``levels`` give (highest first: the arguments, the
    environment, the config file), by the priority in the module docstring; ``env`` is
    only read for the time zone (``TZ``). Reads no setting itself: the levels come from
    :func:`tuimeter.settings.resolve_carbon` or a :class:`~tuimeter.settings.Settings`.

    Raises CarbonError for an unknown country, a non-numeric or negative intensity or
    a PUE below 1."""
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
