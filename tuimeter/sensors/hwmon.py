"""Whole-node and part power from Linux hwmon (``/sys/class/hwmon``): the ACPI power meter
and any hwmon with an energy counter or power inputs.

Facts (../shared/SENSORS.md section 6; the kernel's ``Documentation/hwmon/sysfs-interface``
and ``acpi_power_meter``): ``/sys/class/hwmon/hwmonN`` links into the devices tree; a
driver's ``name`` says which driver it is, ``powerN_label`` / ``energyN_label`` what a
channel covers, ``device`` links to the hardware (the ACPI power meter's is
``ACPI000D:00``). Units: ``powerN_average`` and ``powerN_input`` in microwatts,
``energyN_input`` in microjoules (cumulative), ``powerN_average_interval`` in
milliseconds. Older drivers keep their files under ``hwmonN/device/``: both are read.

What each channel is, from those files only (never guessed):

* the ACPI power meter (``name`` = ``power_meter``), or a channel whose label names the
  whole system (``sys``, ``system``, ``platform``, ``node``, ``wall``, ``chassis``,
  ``server``, with ``power``/``energy``/``input`` after it): the node,
  :attr:`DomainKind.PLATFORM` (the node's total; the engine adds the rest-of-node row);
* any other labelled channel (a CPU, a rail, a GPU): a part, :attr:`DomainKind.OTHER`,
  shown and never added (it may be inside RAPL's or NVML's counters); a channel without
  a label is no known part and is left out, and so are the drivers another sensor reads
  (:data:`COVERED`: amdgpu, amd_energy).

An energy counter is read like RAPL's (:class:`CounterTracker`: faults, resets). A power
channel is integrated between our reads (:class:`PowerIntegrator`): the reading is the
meter's average over its own window (the label gives it), so the domain's source is
``hwmon:average`` (or ``hwmon:input`` for an instantaneous input), never passed off as a
counter; a failed read makes the next good one a new base (the span in between is lost).
Reads are a few small sysfs files per tick, on the sampling path (no BMC behind them).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..model import Domain, DomainKind, Link, Provenance, Reading, SensorStatus, Status
from .base import CounterTracker, Sensor, SensorUnavailable, read_small
from . import node_options
from .node_common import (MAX_NODE_W, MAX_PART_W, EventLog, PowerIntegrator,
                          counter_reading, node_counter, plausible_power, safe_id,
                          shown)

#: every option of this sensor (the settings layer takes them from here)
OPTIONS = node_options.HWMON
ROOT_OPTION = OPTIONS[0]

NO_FOLDER = "no hwmon folder"
NO_METER = "no hwmon power or energy meter"
ROOT_FIX = f"point {ROOT_OPTION.env} at the host's /sys/class/hwmon (in a container)"

_CHANNEL = re.compile(r"(power|energy)(\d{1,3})_(input|average)")
#: a label naming the whole system, once lower-cased and ``_``/``-`` made spaces
_WHOLE = re.compile(r"(sys|system|platform|node|wall|chassis|server)( (power|energy|input))?")
ACPI_METER = "power_meter"
#: drivers whose meters another sensor reads already (a second copy would only add rows):
#: amdgpu's power is the amdsmi sensor's, amd_energy's counters are RAPL's
COVERED = {"amdgpu": "amdsmi", "amd_energy": "rapl"}


@dataclass
class _Channel:
    """One hwmon value file as opened, and how it becomes joules."""

    path: str  # the value file
    what: str  # "energy" (a counter), "average" or "input" (a power)
    domain: Domain
    ceiling_w: float
    tracker: CounterTracker | None = None
    integrator: PowerIntegrator = field(default_factory=PowerIntegrator)
    fault: str = ""  # the current run of failed reads' cause ("" while it reads)


def resolve_root(root: str | os.PathLike | None = None,
                 values: Mapping[str, Any] | None = None) -> Path:
    """The hwmon folder: ``root`` if given, else ``$TUIMETER_HWMON_ROOT``, else the default."""
    return Path(ROOT_OPTION.value(values, str(root) if root else None))


def _first_text(dirs: Sequence[Path], name: str) -> str:
    for d in dirs:
        try:
            return read_small(d / name).strip()
        except OSError:
            continue
    return ""


def is_whole(driver: str, label: str) -> bool:
    """Whether a channel is the whole node: the ACPI power meter, or a label that says so."""
    if driver == ACPI_METER:
        return True
    return bool(_WHOLE.fullmatch(re.sub(r"[_-]+", " ", label.strip().lower())))


def _channels_of(hw: Path, taken: set[str]) -> list[_Channel]:
    """The power and energy channels of one ``hwmonN`` folder."""
    dirs = [hw, hw / "device"]
    driver = _first_text(dirs, "name")
    if driver in COVERED:
        return []
    device = os.path.basename(os.path.realpath(hw / "device")) if (hw / "device").exists() else ""
    found: dict[tuple[str, int], tuple[str, Path]] = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for fname in names:
            m = _CHANNEL.fullmatch(fname)
            if not m:
                continue
            kind, n, what = m.group(1), int(m.group(2)), m.group(3)
            key = (kind, n)
            # a power channel's average is preferred to its input (the meter's own window)
            if key not in found or (what == "average" and found[key][0] == "input"):
                found[key] = ("energy" if kind == "energy" else what, d / fname)
    out = []
    for (kind, n), (what, path) in sorted(found.items()):
        label = _first_text(dirs, f"{kind}{n}_label")
        whole = is_whole(driver, label)
        if not whole and not label:
            continue  # a part that does not say what it is: no known part, not shown
        base = f"hwmon-{safe_id(driver or hw.name)}-{kind}{n}"
        dom_id = base if base not in taken else f"{base}-{safe_id(hw.name)}"
        taken.add(dom_id)
        out.append(_Channel(str(path), what, _domain(dom_id, hw, driver, device, kind, n, what,
                                                   label, whole, dirs),
                            MAX_NODE_W if whole else MAX_PART_W))
    return out


def _domain(dom_id: str, hw: Path, driver: str, device: str, kind: str, n: int, what: str,
            label: str, whole: bool, dirs: Sequence[Path]) -> Domain:
    """The domain of one channel; its label says what it reads and how it is integrated."""
    where = f"{shown(driver) or hw.name}" + (f" ({shown(device)})" if device else "")
    said = f" '{shown(label)}'" if label else " (no label)"
    if what == "energy":
        how = f"energy{n}_input, a µJ counter"
    elif what == "average":
        interval = _first_text(dirs, f"power{n}_average_interval")
        window = f"{shown(interval, 12)} ms" if interval.isdigit() else "a window it does not say"
        how = f"power{n}_average, the meter's average over {window}, integrated between reads"
    else:
        how = f"power{n}_input, instantaneous, integrated between reads"
    part = "the whole node" if whole else "a part, shown and not added"
    name = "node (hwmon)" if whole else f"{shown(driver, 20)} {shown(label, 20) or kind + str(n)}"
    source = "hwmon" if what == "energy" else f"hwmon:{what}"
    return Domain(id=dom_id, name=name, kind=DomainKind.PLATFORM if whole else DomainKind.OTHER,
                  source=source, provenance=Provenance.MEASURED, in_total=False,
                  label=f"{where}{said}: {how}; {part}")


def discover(root: Path) -> list[_Channel]:
    """Every power and energy channel under ``root``; SensorUnavailable if none."""
    try:
        entries = sorted(os.listdir(root), key=lambda e: (len(e), e))
    except OSError:
        raise SensorUnavailable(NO_FOLDER, f"{ROOT_FIX} (looked in {root})") from None
    taken: set[str] = set()
    channels = []
    for entry in entries:
        if re.fullmatch(r"hwmon\d{1,4}", entry):
            channels.extend(_channels_of(root / entry, taken))
    if not channels:
        raise SensorUnavailable(NO_METER, f"{ROOT_FIX} (looked in {root})")
    return channels


class HwmonSensor(EventLog, Sensor):
    """hwmon power meters and energy counters, one domain per channel (module docstring)."""

    name = "hwmon"
    absent_reasons = (NO_FOLDER, NO_METER)

    def __init__(self, root: str | os.PathLike | None = None,
                 values: Mapping[str, Any] | None = None):
        super().__init__()
        self._root_given = root
        self._values = values  # the resolved settings (discovery); None: built bare
        self._channels: list[_Channel] = []

    @property
    def root(self) -> Path:
        return resolve_root(self._root_given, self._values)

    def is_available(self) -> SensorStatus:
        try:
            channels = discover(self.root)
        except SensorUnavailable as exc:
            return SensorStatus(self.name, False, exc.reason, exc.fix)
        except Exception as exc:  # an option or sysfs oddity: say so, don't crash
            return SensorStatus(self.name, False, f"cannot read hwmon: {exc}")
        return SensorStatus(self.name, True, self._summary(channels))

    def _summary(self, channels: list[_Channel]) -> str:
        return ", ".join(c.domain.id for c in channels) + f" from {self.root}"

    def status(self) -> SensorStatus:
        return SensorStatus(self.name, True, self._summary(self._channels))

    def open(self) -> Sequence[Domain]:
        self._channels = discover(self.root)
        for c in self._channels:
            if c.what == "energy":
                c.tracker = node_counter(c.ceiling_w, scale_j=1e-6)  # µJ
        return [c.domain for c in self._channels]

    def close(self) -> None:
        self._channels = []

    def read(self, now_s: float) -> Sequence[Reading]:
        """Per channel: the counter's joules, or the integrated power's; LOST (and one event
        per run of failures) for a channel that cannot be read or reads no power."""
        return [self._read(c, now_s) for c in self._channels]

    def _read(self, c: _Channel, now_s: float) -> Reading:
        dom = c.domain
        try:
            text = read_small(c.path).strip()
            raw = int(text)
        except OSError as exc:
            if c.tracker is not None:
                c.tracker.reject("unreadable")
            return self._lost(c, now_s, f"cannot read {c.path}: {exc.strerror or exc}")
        except ValueError:
            if c.tracker is not None:
                c.tracker.reject("not a number")
            return self._lost(c, now_s, f"{os.path.basename(c.path)} reads {shown(text, 24)!r}, "
                                        f"not a number")
        if c.tracker is not None:
            step = c.tracker.update(raw, now_s)
            if step.kind == "rejected":
                return self._lost(c, now_s, f"{os.path.basename(c.path)}: {step.detail}")
            self._recovered(c, now_s)
            return counter_reading(dom.id, step, now_s, c.path, self._event)
        power_w = raw / 1e6  # µW
        if not plausible_power(power_w, c.ceiling_w):
            return self._lost(c, now_s, f"{os.path.basename(c.path)} reads {power_w:.6g} W, "
                                        f"no power this meter can show")
        regained = bool(c.fault)
        self._recovered(c, now_s)
        energy_j, new_base = c.integrator.add(now_s, power_w)
        if new_base and regained:
            return Reading(dom.id, now_s, energy_j, power_w=power_w, note="regained",
                           link=Link.BROKEN)
        return Reading(dom.id, now_s, energy_j, power_w=power_w)

    def _lost(self, c: _Channel, now_s: float, why: str) -> Reading:
        if not c.fault:
            self._event(now_s, c.domain.id, "lost", f"{why}; lost until it reads again")
        c.fault = why
        c.integrator.restart()  # the power in between is unknown: the next reading is a base
        return Reading(c.domain.id, now_s, None, status=Status.LOST, note=why)

    def _recovered(self, c: _Channel, now_s: float) -> None:
        if c.fault:
            self._event(now_s, c.domain.id, "recovered", f"{c.path} reads again")
            c.fault = ""
