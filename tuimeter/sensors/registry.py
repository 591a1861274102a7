"""Every sensor tuimeter knows, one entry each: what discovery, ``--no-gpu`` and the
"unavailable" lines read.

An entry states the sensor's name, the platforms it runs on, what it covers (``cpu``,
``memory``, ``gpu``, ``soc``), the prefixes of its domain ids, how to build it from
:class:`SensorOptions`, and whether it measures the CPU (then the estimate stays out:
docs/what-adds-up.md). The sensor module itself is imported only when the sensor is built,
and a vendor library only inside the sensor's ``is_available``/``open``.

Domain ids must never collide: the engine refuses a clash at open
(:class:`~tuimeter.engine.sampler.DomainClash`), and :func:`register` refuses a prefix that
could produce one, on any platform two sensors share ("gpu" and "gpu-amd" could both
give ``gpu-amd0``; "gpu" and "amdgpu" cannot). Adding a sensor: a module under
``tuimeter/sensors/`` and one :func:`register` line below (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..keys import Key
from ..model import SensorStatus
from . import node_options

#: what a sensor can cover
CPU, MEMORY, GPU, SOC = "cpu", "memory", "gpu", "soc"


@dataclass(frozen=True)
class SensorOptions:
    """The user's settings a sensor may be built from (the command line, the API)."""

    powercap_root: str | None = None  # RAPL: the powercap folder (None: default or env)
    #: the resolved values of the sensors' own keys (``SensorEntry.keys``), by key name
    #: (tuimeter.settings); None: not resolved (a sensor built by hand, as tests do),
    #: and a sensor then reads its own variable the way the resolver would
    values: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SensorEntry:
    """One sensor. ``factory`` is ``"module:Class"`` (imported when built); ``kwargs`` maps
    the options to the class's keyword arguments. ``platforms`` are ``sys.platform``
    prefixes ("linux", "darwin", "win32"); empty: every platform. ``fallback``: built only
    when no available sensor ``measures_cpu`` (the estimate). ``keys``: its own settings,
    each declared once (:class:`~tuimeter.keys.Key`: option, variable, config key, check,
    docs line); their values reach ``kwargs`` as ``options.values[name]`` (None unset)."""

    name: str
    platforms: tuple[str, ...]
    covers: frozenset[str]
    prefixes: tuple[str, ...]
    factory: str
    measures_cpu: bool = False
    fallback: bool = False
    kwargs: Callable[[SensorOptions], dict[str, Any]] = field(default=lambda _opts: {})
    keys: tuple[Key, ...] = ()
    #: a machine without its hardware leaves no trace (no start-up line, no status in the
    #: session row): the node meters, which most machines lack (``tuimeter doctor`` says)
    quiet_absent: bool = False

    def runs_on(self, platform: str) -> bool:
        return not self.platforms or any(platform.startswith(p) for p in self.platforms)

    @property
    def gpu_only(self) -> bool:
        """A sensor of GPUs alone (what ``--no-gpu`` leaves out)."""
        return self.covers == frozenset({GPU})

    def sensor_class(self) -> type:
        module, _, cls = self.factory.partition(":")
        return getattr(importlib.import_module(module), cls)

    def build(self, options: SensorOptions):
        """A new (unopened) sensor."""
        return self.sensor_class()(**self.kwargs(options))


class RegistryError(ValueError):
    """A sensor entry that would clash with another (name or domain-id prefix)."""


SENSORS: list[SensorEntry] = []


def sensor_keys() -> tuple[Key, ...]:
    """Every registered sensor's own keys, in registry order."""
    return tuple(k for e in SENSORS for k in e.keys)


def _overlap(a: SensorEntry, b: SensorEntry) -> bool:
    """Whether two entries can run on one machine."""
    if not a.platforms or not b.platforms:
        return True
    return any(p.startswith(q) or q.startswith(p) for p in a.platforms for q in b.platforms)


def register(entry: SensorEntry, into: list[SensorEntry] | None = None) -> SensorEntry:
    """Add ``entry`` (to ``into``, default :data:`SENSORS`). RegistryError if its name is
    taken, it has no prefix, or one of its prefixes starts another's (or is started by it)
    on a platform they share: their domain ids could then be equal."""
    into = SENSORS if into is None else into
    if not entry.prefixes or not all(entry.prefixes):
        raise RegistryError(f"sensor {entry.name!r} needs a non-empty domain-id prefix")
    for other in into:
        if other.name == entry.name:
            raise RegistryError(f"sensor name {entry.name!r} is registered twice")
        if not _overlap(entry, other):
            continue
        for p in entry.prefixes:
            for q in other.prefixes:
                if p.startswith(q) or q.startswith(p):
                    raise RegistryError(
                        f"domain-id prefix {p!r} of sensor {entry.name!r} can give the same ids "
                        f"as prefix {q!r} of sensor {other.name!r}: choose a vendor prefix")
    into.append(entry)
    return entry


def entry(name: str) -> SensorEntry | None:
    return next((e for e in SENSORS if e.name == name), None)


def gpu_sensor_names() -> list[str]:
    """The sensors ``--no-gpu`` leaves out."""
    return [e.name for e in SENSORS if e.gpu_only]


def is_absent(status: SensorStatus) -> bool:
    """Whether an unavailable status only says this machine has none of that hardware
    (the sensor class lists such reasons in ``absent_reasons``): one short line is enough."""
    e = entry(status.name)
    if e is None or status.available:
        return False
    try:
        reasons = getattr(e.sensor_class(), "absent_reasons", ())
    except ImportError:
        return False
    return status.reason in reasons


# -- the sensors, in discovery order ------------------------------------------------------
register(SensorEntry("rapl", ("linux",), frozenset({CPU, MEMORY, SOC}), ("package-", "psys", "dram-"),
                     "tuimeter.sensors.rapl:RaplSensor", measures_cpu=True,
                     kwargs=lambda o: {"root": o.powercap_root}))
register(SensorEntry("powermetrics", ("darwin",), frozenset({CPU, MEMORY, GPU, SOC}),
                     ("cpu", "gpu", "ane", "dram", "package-0", "igpu"),
                     "tuimeter.sensors.powermetrics:PowermetricsSensor", measures_cpu=True))
register(SensorEntry("nvml", ("linux", "win32"), frozenset({GPU}), ("gpu",),
                     "tuimeter.sensors.nvml:NvmlSensor"))
register(SensorEntry("amdsmi", ("linux",), frozenset({GPU}), ("amdgpu",), "tuimeter.sensors.amdsmi:AmdSmiSensor"))
register(SensorEntry("hwmon", ("linux",), frozenset({SOC}), ("hwmon-",),
                     "tuimeter.sensors.hwmon:HwmonSensor", quiet_absent=True,
                     keys=node_options.keys(node_options.HWMON),
                     kwargs=lambda o: {"values": o.values}))
register(SensorEntry("pm_counters", ("linux",), frozenset({SOC}), ("pm-",),
                     "tuimeter.sensors.pm_counters:PmCountersSensor", quiet_absent=True,
                     keys=node_options.keys(node_options.PM_COUNTERS),
                     kwargs=lambda o: {"values": o.values}))
register(SensorEntry("ipmi", ("linux",), frozenset({SOC}), ("ipmi-",),
                     "tuimeter.sensors.ipmi:IpmiSensor", quiet_absent=True,
                     keys=node_options.keys(node_options.IPMI),
                     kwargs=lambda o: {"values": o.values}))
register(SensorEntry("redfish", (), frozenset({SOC}), ("redfish-",),
                     "tuimeter.sensors.redfish:RedfishSensor", quiet_absent=True,
                     keys=node_options.keys(node_options.REDFISH),
                     kwargs=lambda o: {"values": o.values}))
register(SensorEntry("estimate", (), frozenset({CPU, MEMORY}), ("estimate/",),
                     "tuimeter.sensors.estimate:EstimateSensor", fallback=True))
