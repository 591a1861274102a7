"""The options of the whole-node meters (hwmon, pm_counters, IPMI DCMI, Redfish), each
declared once: name, type, default, environment variable, config key and what it means.

A leaf (it imports only :mod:`tuimeter.keys`): the sensor registry turns each into a
:class:`~tuimeter.keys.Key` of its entry (``SensorEntry.keys``) without importing the
sensors, and :mod:`tuimeter.settings` resolves them with every other option (the
environment, then config.toml, then the default: docs/configuration.md); a sensor built by
discovery gets the resolved values (``SensorOptions.values``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

from ..keys import Key


@dataclass(frozen=True)
class SensorOption:
    """One option of a sensor, declared once at the top of its module (name, type,
    default, environment variable, config key, what it means), so the settings layer can
    take them all from one list. Today the sensors read their environment variable
    themselves (:meth:`value`), as RAPL reads ``TUIMETER_POWERCAP_ROOT``."""

    name: str
    type: type
    default: Any
    env: str
    config_key: str
    help: str

    def value(self, values: Mapping[str, Any] | None = None, given: Any = None,
              env: Mapping[str, str] = os.environ) -> Any:
        """``given`` if not None; else, for a sensor built by discovery, ``values`` (what
        :mod:`tuimeter.settings` resolved from the environment and config.toml: the
        value, or the default when unset); else (a sensor built bare, as in a test or a
        probe) the environment variable (converted to ``type``; ValueError naming the
        variable when it does not convert), else the default."""
        if given is not None:
            return given
        if values is not None:
            value = values.get(self.name)
            return self.default if value is None else value
        return self.check_text(env.get(self.env, ""), self.env)

    def check_text(self, text: object, where: str) -> Any:
        """A value from the environment or config.toml, converted and checked."""
        if not isinstance(text, str):
            if isinstance(text, bool) or not isinstance(text, (int, float)):
                raise ValueError(f"{where}={text!r} is not a {self.type.__name__}")
            text = str(text)
        if not text:
            return self.default
        try:
            value = self.type(text)
        except ValueError:
            raise ValueError(f"{where}={text[:40]!r} is not a {self.type.__name__}") from None
        if isinstance(value, float) and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{where}={text[:40]!r} must be a positive number")
        return value

    def key(self) -> Key:
        """Its :class:`~tuimeter.keys.Key`: the config key and variable the settings
        resolver reads (no command-line option: a node meter is set up once per machine)."""
        def check(value: object) -> Any:
            if value in ("", None):
                raise ValueError(f"must be a non-empty {self.type.__name__}")
            return self.check_text(value, "value")
        kind = "number, > 0" if self.type is float else "string"
        default = f"`{self.default}`" if self.default not in ("", None) else "none"
        return Key(self.config_key, check, self.env, None, type=kind, default=default,
                   what=self.help, secret="password" in self.name)

HWMON = (
    SensorOption("hwmon_root", str, "/sys/class/hwmon", "TUIMETER_HWMON_ROOT", "hwmon_root",
                 "the hwmon class folder (a fake tree in tests, the host's in a container)"),
)

PM_COUNTERS = (
    SensorOption("pm_counters_root", str, "/sys/cray/pm_counters", "TUIMETER_PM_COUNTERS_ROOT",
                 "pm_counters_root", "the pm_counters folder (a fake tree in tests)"),
)

IPMI = (
    SensorOption("ipmi", str, "auto", "TUIMETER_IPMI", "ipmi",
                 "auto (where a BMC device and a tool exist), on, or off"),
    SensorOption("ipmi_interval_s", float, 5.0, "TUIMETER_IPMI_INTERVAL", "ipmi_interval_s",
                 "seconds between two BMC readings (at least 2)"),
    SensorOption("ipmi_timeout_s", float, 3.0, "TUIMETER_IPMI_TIMEOUT", "ipmi_timeout_s",
                 "seconds a BMC may take to answer"),
    SensorOption("ipmi_tool", str, "", "TUIMETER_IPMI_TOOL", "ipmi_tool",
                 "ipmitool or ipmi-dcmi (default: the first on PATH)"),
)

REDFISH = (
    SensorOption("redfish_url", str, "", "TUIMETER_REDFISH_URL", "redfish_url",
                 "the BMC's address, https://bmc.example (no Redfish without it)"),
    SensorOption("redfish_user", str, "", "TUIMETER_REDFISH_USER", "redfish_user",
                 "the BMC user (basic auth)"),
    SensorOption("redfish_password", str, "", "TUIMETER_REDFISH_PASSWORD", "redfish_password",
                 "the BMC user's password (secret)"),
    SensorOption("redfish_ca_file", str, "", "TUIMETER_REDFISH_CA_FILE", "redfish_ca_file",
                 "the CA certificate(s) the BMC's certificate is checked against"),
    SensorOption("redfish_chassis", str, "", "TUIMETER_REDFISH_CHASSIS", "redfish_chassis",
                 "the chassis id to read (default: the one node chassis)"),
    SensorOption("redfish_interval_s", float, 5.0, "TUIMETER_REDFISH_INTERVAL",
                 "redfish_interval_s", "seconds between two readings (at least 2)"),
    SensorOption("redfish_timeout_s", float, 5.0, "TUIMETER_REDFISH_TIMEOUT",
                 "redfish_timeout_s", "seconds the BMC may take to answer"),
)



def keys(options: tuple[SensorOption, ...]) -> tuple[Key, ...]:
    """The registry entry's keys of a sensor's options."""
    return tuple(o.key() for o in options)
