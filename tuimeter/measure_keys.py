"""The measurement and carbon settings, each declared once (a :class:`~tuimeter.keys.Key`:
its config key, variable, option, check and docs line), and the argparse types of their
options. The command line adds the options from here (:func:`tuimeter.options.add_measure_options`,
the UI's ``--export-dir``), :mod:`tuimeter.settings` resolves them, and
docs/configuration.md's table is generated from them with the exporters' keys. Imports only
the leaves :mod:`tuimeter.checks` and :mod:`tuimeter.keys`, so every ``--help`` stays light.
"""

from __future__ import annotations

import argparse
from typing import Callable

from . import checks
from .checks import CarbonError, SetupError, check_intensity, check_pue, validate_interval
from .keys import Key


def number(text: str) -> float:
    """A finite float, or ArgumentTypeError."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def interval(text: str) -> float:
    """``--interval``: the one interval rule (``checks.validate_interval``, also
    used by ``Meter(interval_s=...)``), as an argparse type."""
    try:
        return validate_interval(number(text))
    except SetupError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("interval ")) from None


def _carbon_check(check: Callable[[str, str], float]) -> Callable[[str], float]:
    """An argparse type from a checks.check_* function (the same bounds as the
    environment and config.toml)."""
    def parse(text: str) -> float:
        try:
            return check(text, "command line")
        except CarbonError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def carbon_intensity(text: str) -> float:
    return _carbon_check(check_intensity)(text)


def pue(text: str) -> float:
    return _carbon_check(check_pue)(text)


_GPU_WORDS = "`1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`"

#: the measurement keys, before the exporters' in the table and the known-keys list
HEAD_KEYS: tuple[Key, ...] = (
    Key("interval_s", checks.interval_value, "TUIMETER_INTERVAL", "interval",
        type="number, >= 0.01", default="`1`", what="seconds between samples",
        option="`-i`, `--interval`",
        cli=(("-i", "--interval"), dict(type=interval, default=None, metavar="S",
                                         help="seconds between samples (default 1)"))),
    Key("output_dir", checks.folder, "TUIMETER_OUTPUT_DIR", "output_dir",
        type="path (`~` expanded)",
        default="`$XDG_DATA_HOME/tuimeter/sessions` (`~/.local/share/...`; macOS "
                "`~/Library/Application Support/tuimeter/sessions`)",
        what="where a new session file goes without `-o`", option="(`-o FILE` names the file)"),
    Key("export_dir", checks.folder, "TUIMETER_EXPORT_DIR", "export_dir",
        type="path (`~` expanded)", default="`.`", what="where the UI's `e` writes exports",
        option="`--export-dir`",
        cli=(("--export-dir",), dict(
            metavar="DIR", default=None,
            help="where `e` writes exports (default: the current directory)"))),
    Key("gpu", checks.boolean, "TUIMETER_GPU", "no_gpu", negated=True, type="boolean",
        default="`true`", what="use the GPU sensors", env_note=f"({_GPU_WORDS})",
        option="`--no-gpu`"),
    Key("attribution", checks.boolean, "TUIMETER_ATTRIBUTION", "no_attribution",
        negated=True, type="boolean", default="`true`",
        what="attribute power to processes", env_note="(as `gpu`)",
        option="`--no-attribution`",
        cli=(("--no-attribution",), dict(action="store_true", default=None,
                                          help="do not attribute power to processes"))),
)

#: the carbon keys (resolved by tuimeter.carbon's rule over levels) and the theme, after
#: the exporters'
TAIL_KEYS: tuple[Key, ...] = (
    Key("country", checks.text, "TUIMETER_COUNTRY", None, default="none (guessed from the "
        "time zone, else the world average)",
        what="grid carbon intensity of this country (see Carbon)", option="`--country`",
        cli=(("--country",), dict(metavar="CODE", help="grid carbon intensity of this country "
                                                       "(ISO alpha-3/alpha-2 or name)"))),
    Key("carbon_intensity", checks.check_intensity, "TUIMETER_CARBON_INTENSITY", None,
        type="number, 0 to 5000", default="475", what="grid carbon intensity, g CO2e/kWh",
        option="`--carbon-intensity`",
        cli=(("--carbon-intensity",), dict(
            type=carbon_intensity, metavar="G_PER_KWH",
            help="grid carbon intensity in g CO2e per kWh (0: on-site renewables)"))),
    Key("pue", checks.check_pue, "TUIMETER_PUE", None, type="number, 1 to 10",
        default="`1`", what="power usage effectiveness", option="`--pue`",
        cli=(("--pue",), dict(type=pue, metavar="PUE", help="power usage effectiveness (>= 1)"))),
    Key("carbon_source", checks.check_source, "TUIMETER_CARBON_SOURCE", None,
        type="string: " + ", ".join(f"`{s}`" for s in checks.SOURCES), default="`table`",
        what="where each tick's grid intensity comes from (see Carbon)",
        option="`--carbon-source`",
        cli=(("--carbon-source",), dict(
            choices=checks.SOURCES, metavar="SOURCE",
            help=f"where the grid intensity comes from: {', '.join(checks.SOURCES)} "
                 "(live, fetched every 15 min; default table)"))),
    Key("carbon_zone", checks.text, "TUIMETER_CARBON_ZONE", None,
        default="none (UK: all of Great Britain)",
        what="the live source's zone: Electricity Maps zone (`DE`), UK postcode outward "
             "code (`RG10`)", option="`--carbon-zone`",
        cli=(("--carbon-zone",), dict(
            metavar="ZONE",
            help="the live source's area: an Electricity Maps zone (DE, US-CAL-CISO) or a UK "
                 "postcode's outward code (RG10; default all of Great Britain)"))),
    Key("electricitymaps_token", checks.text, "TUIMETER_ELECTRICITYMAPS_TOKEN", None,
        what="Electricity Maps API token (keep the file private)", secret=True),
    Key("electricitymaps_url", checks.check_url, "TUIMETER_ELECTRICITYMAPS_URL", None,
        type="string (http/https URL)", default="`https://api.electricitymaps.com`",
        what="Electricity Maps base URL"),
    Key("uk_carbon_url", checks.check_url, "TUIMETER_UK_CARBON_URL", None,
        type="string (http/https URL)", default="`https://api.carbonintensity.org.uk`",
        what="Carbon Intensity API base URL"),
    Key("theme", checks.text, "TUIMETER_THEME", "theme", default="`textual-dark`",
        what="the UI's theme, a name from ctrl+p, **Theme** (`textual-light`, `nord`, "
             "`gruvbox`, ...); choosing one there writes it here (only this line changes: "
             "the file is rewritten atomically with its other keys and comments; a file it "
             "cannot edit safely, a link, or another user's file or folder is left alone "
             "with a notice and the theme kept for this run; see Security); an unknown name "
             "is a notice and the default",
        env_note="(wins over the file, also after a choice in the UI)"),
)
CORE_KEYS = HEAD_KEYS + TAIL_KEYS


#: every key declared here, by name (``KEY["interval_s"].add_option(parser)``)
KEY = {k.name: k for k in CORE_KEYS}
