"""The value checks of every option, at the bottom of the import graph.

One rule per value, shared by the command line, the environment, ``config.toml`` and the
Python API: the sampling interval, the Prometheus listen address and cgroup count, the
grid carbon intensity and PUE, the live carbon source and its URLs. This module imports
nothing of tuimeter (``tests/test_layering.py`` checks it), so that :mod:`tuimeter.config`
can check a value without importing the session, the exporters or the carbon sources
that the value is for: that is what kept a circle of 14 modules closed.

The error types live here too, each a one-line message for ``tuimeter: error: ...``:
:class:`SetupError` (bad input before anything was recorded), :class:`CarbonError` and
:class:`ExportError` (both ``ValueError``); :mod:`tuimeter.measure`,
:mod:`tuimeter.carbon` and :mod:`tuimeter.export` import them from here.
"""

from __future__ import annotations

import math
import os
import re


class SetupError(Exception):
    """Bad input found before anything was recorded (one line, exit status 2)."""


class CarbonError(ValueError):
    """A country, intensity or PUE that cannot be used; the message says what would."""


class ExportError(ValueError):
    """A bad exporter setting, or a port that cannot be bound (one readable line)."""


# -- the sampling interval ---------------------------------------------------------------
#: shortest sampling interval accepted (s): RAPL updates about every 1 ms, NVML every
#: 10-100 ms, and a tick costs us time too; faster only measures the monitor
MIN_INTERVAL_S = 0.01


def validate_interval(interval_s: float) -> float:
    """``interval_s`` as a float, or SetupError when it is not a number >= MIN_INTERVAL_S."""
    try:
        value = float(interval_s)
    except (TypeError, ValueError):
        raise SetupError(f"interval must be a number of seconds, not {interval_s!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise SetupError(f"interval must be > 0 seconds (got {interval_s})")
    if value < MIN_INTERVAL_S:
        raise SetupError(f"interval must be >= {MIN_INTERVAL_S:g} s (got {interval_s}): "
                         f"sensors update no faster")
    return value


# -- the Prometheus exporter ---------------------------------------------------------------
#: cgroup series served by default (``--prometheus-cgroups``), and the most allowed
DEFAULT_CGROUPS, MAX_CGROUPS = 10, 1000


def parse_listen(text: str) -> tuple[str, int]:
    """``"9100"``, ``"0.0.0.0:9100"``, ``"[::1]:9100"`` -> (host, port); host defaults to
    127.0.0.1 (metrics are not published beyond this machine unless asked)."""
    text = text.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ExportError(f"--prometheus {text!r}: write an IPv6 address in brackets, "
                          "[::1]:9100")
    try:
        port = int(port_text)
    except ValueError:
        raise ExportError(f"--prometheus {text!r}: expected [HOST:]PORT, e.g. 9100 or "
                          "0.0.0.0:9100") from None
    if not 0 <= port <= 65535:
        raise ExportError(f"--prometheus {text!r}: port must be 0..65535")
    return host or "127.0.0.1", port


def parse_cgroups(text: object) -> int:
    """A ``--prometheus-cgroups`` value: a whole number from 0 to MAX_CGROUPS."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ExportError(f"must be a whole number from 0 to {MAX_CGROUPS}, got {text!r}")
    try:
        n = int(text)
    except ValueError:
        raise ExportError(f"must be a whole number from 0 to {MAX_CGROUPS}, "
                          f"got {text!r}") from None
    if not 0 <= n <= MAX_CGROUPS:
        raise ExportError(f"must be a whole number from 0 to {MAX_CGROUPS}, got {n}")
    return n


# -- carbon intensity and PUE -------------------------------------------------------------
#: the largest grid intensity accepted, g CO2e/kWh: no grid exceeds about 2,000 (lignite
#: alone is ~1,100-1,300), so a larger figure is a typo or a unit mix-up (g/MWh)
MAX_INTENSITY_G_PER_KWH = 5000.0
#: the largest PUE accepted: reported data centres lie between 1.0 and about 3
MAX_PUE = 10.0


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


def check_intensity(value: object, origin: str = "carbon intensity") -> float:
    """A grid intensity in g CO2e/kWh, 0 .. MAX_INTENSITY_G_PER_KWH (0: on-site
    renewables, a green tariff)."""
    return _bounded_number(value, f"carbon intensity (g CO2e/kWh, {origin})", 0.0,
                           MAX_INTENSITY_G_PER_KWH, "no grid exceeds about 2000 g/kWh")


def check_pue(value: object, origin: str = "PUE") -> float:
    """A power usage effectiveness, 1.0 .. MAX_PUE (1.0: no overhead beyond the IT load)."""
    return _bounded_number(value, f"PUE ({origin})", 1.0, MAX_PUE,
                           "data centres report 1.0 to about 3")


# -- the live carbon source ---------------------------------------------------------------
TABLE = "table"
ELECTRICITYMAPS = "electricitymaps"
UK = "uk-carbon-intensity"
#: the values of ``--carbon-source``
SOURCES = (TABLE, ELECTRICITYMAPS, UK)


def check_source(value: object) -> str:
    """A ``--carbon-source`` value; ValueError naming the choices otherwise."""
    if not isinstance(value, str) or value.strip().lower() not in SOURCES:
        raise ValueError(f"carbon source must be one of {', '.join(SOURCES)}, got {value!r}")
    return value.strip().lower()


def check_url(value: object) -> str:
    """A base URL: ``http://`` or ``https://`` and a host; a trailing ``/`` dropped."""
    if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?",
                                                      value.strip()):
        raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
    return value.strip().rstrip("/")


# -- config.toml's and the environment's values -----------------------------------------
# (a value there is text or any TOML type; each check returns the typed value or raises
# ValueError with the reason, to which the caller adds where the value came from)
def text(value: object) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


def folder(value: object) -> str:
    """A folder: a non-empty string, ``~`` expanded."""
    return os.path.expanduser(text(value))


def boolean(value: object) -> bool:
    """``true``/``false``, or the words ``1 true yes on`` / ``0 false no off``, any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"must be true or false, got {value!r}")


def interval_value(value: object) -> float:
    """:func:`validate_interval` for config.toml and the environment (no bare bool)."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number of seconds, got {value!r}")
    try:
        return validate_interval(value)  # type: ignore[arg-type]
    except SetupError as exc:
        raise ValueError(str(exc).removeprefix("interval ")) from None


def listen_value(value: object) -> tuple[str, int]:
    """:func:`parse_listen` for config.toml (a port number too) and the environment."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"must be \"[HOST:]PORT\", got {value!r}")
    try:
        return parse_listen(str(value))
    except ValueError as exc:
        raise ValueError(str(exc).split(": ", 1)[-1]) from None

