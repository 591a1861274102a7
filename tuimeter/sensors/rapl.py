"""CPU package, core, uncore, DRAM and platform energy from RAPL through Linux powercap.

Layout and counter facts (the kernel's powercap sysfs interface, as real Intel and AMD
machines and containers lay it out): ``/sys/class/powercap`` is a flat folder of links
(``intel-rapl:0``, ``intel-rapl:0:0``, ``intel-rapl:a``: ids are HEX) into
``/sys/devices/virtual/powercap``; only a zone's ``name`` says what it measures;
``energy_uj`` (µJ) is a 32-bit counter in units of ``max_energy_range_uj / 0xFFFFFFFF`` that
wraps. The root can be the class folder or the devices tree (``TUIMETER_POWERCAP_ROOT``),
which is what to use in a container whose ``/sys/devices`` is masked.

Domain ids: ``package-N`` (and ``package-N-die-M``), children ``package-N/core``,
``package-N/uncore``, ``package-N/dram``, top-level ``dram-K``, ``psys`` / ``psys-N``.
Machine total = Σ package + Σ dram; core and uncore are inside the package and psys holds
both, so they are shown but not added (``in_total=False``).

Discovery reads files through :func:`_read_text` (open, read, close). Sampling does not
open files: ``open()`` opens each zone's ``energy_uj`` once and keeps the descriptor, and
every sample is one ``pread`` at offset 0 (:func:`_pread_text`; sysfs formats the value
afresh for a read at offset 0). So sampling never competes for file descriptors with
anything else in the process (a flood of HTTP clients on the Prometheus port once made every
zone "lost: Too many open files"). A descriptor is reopened only after a read error or a bad
value; a zone that stays unreadable is looked up again every :data:`REDISCOVER_S` seconds, by
name and parent, in case it was re-registered under a new id. Tests patch ``_read_text`` and
``_pread_text`` to inject errors.

Faults (as seen on real machines): a value that is not a number, is negative or above
``max_energy_range_uj``, or a step no hardware can make, is rejected (an ``event``, the
domain ``LOST`` for that read) and the next good reading is compared with the last good one
(:class:`~tuimeter.sensors.base.CounterTracker`), so a glitch costs no energy
(``Link.BRIDGED``). A counter reset or a gap longer than the counter can bridge makes a new
base and the span before it is lost (``Link.BROKEN``). A zone whose ``max_energy_range_uj``
is 0 or unreadable is read without wrap handling, and says so in its label.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..model import (DeviceInfo, Domain, DomainKind, Event, Link, Provenance, Reading,
                     SensorStatus, Status)
from .base import CounterStep, CounterTracker, Sensor, SensorUnavailable, read_small
from .capabilities import DeviceInfoSource
from .cpuinfo import CpuPackageReader

DEFAULT_ROOT = "/sys/class/powercap"
ROOT_ENV = "TUIMETER_POWERCAP_ROOT"
PRIMARY_TYPE = "intel-rapl"  # preferred over intel-rapl-mmio / intel-rapl-tpmi for duplicates
RAW_MAX = 0xFFFFFFFF  # the hardware counter is 32 bits; max_energy_range_uj = RAW_MAX × unit

#: sanity ceiling (W) per kind when a zone has no power limit to go by (AMD has none)
DEFAULT_CEILING_W = {DomainKind.PACKAGE: 500.0, DomainKind.PSYS: 1000.0}
OTHER_CEILING_W = 200.0  # core, uncore, dram, unknown
#: how often (s) zones that cannot be read are looked for again (re-registered under a new id)
REDISCOVER_S = 10.0
#: the CSV ``source`` of AMD's ``package-N/core``: one core's counter, not all cores
AMD_CORE_SOURCE = "rapl:one-core"

PERMISSION_FIX = (
    "Give a group read access to energy_uj at every boot (a chmod is lost at reboot): a "
    "systemd-tmpfiles entry, e.g. /etc/tmpfiles.d/tuimeter-rapl.conf with the lines "
    "'z /sys/class/powercap/intel-rapl:*/energy_uj 0440 root power -' and "
    "'z /sys/class/powercap/intel-rapl:*:*/energy_uj 0440 root power -', or a udev rule "
    "(SUBSYSTEM==\"powercap\", ACTION==\"add\", RUN+=\"/bin/chgrp power /sys%p/energy_uj\", "
    "RUN+=\"/bin/chmod g+r /sys%p/energy_uj\"); then add yourself to the group "
    "(sudo groupadd -f power && sudo usermod -aG power $USER, log in again). Or run as root."
)
MASKED_FIX = (
    f"Mount or bind the host's /sys/devices/virtual/powercap into the container and point "
    f"{ROOT_ENV} at it (read-only is enough), or run with the host's /sys."
)
NO_RAPL_FIX = (
    "Load the RAPL driver (sudo modprobe intel_rapl_msr), or on a machine without RAPL use "
    "the estimate."
)

_PACKAGE_RE = re.compile(r"package-(\d+)(?:-die-(\d+))?")
_PSYS_RE = re.compile(r"psys(?:-(\d+))?")


def resolve_root(root: str | os.PathLike | None = None) -> Path:
    """The powercap folder: ``root`` if given, else ``$TUIMETER_POWERCAP_ROOT``, else the default."""
    if root is not None and str(root):
        return Path(root)
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def _read_text(path: str) -> str:
    """A small sysfs file's text (:func:`~tuimeter.sensors.base.read_small`, behind a name
    of this module that the doctor and the tests' fake powercap tree patch). Raises
    OSError (PermissionError, FileNotFoundError, ENODEV)."""
    return read_small(path)


def _pread_text(fd: int, path: str) -> str:
    """An open ``energy_uj``'s value: one ``pread`` at offset 0. Raises OSError."""
    return os.pread(fd, 64, 0).decode("ascii", "replace")


def _close_fd(z: _Zone) -> None:
    """Close the zone's kept energy_uj descriptor, if any; it has none afterwards."""
    if z.fd is not None:
        fd, z.fd = z.fd, None
        try:
            os.close(fd)
        except OSError:
            pass


def _zone_ids(zone: str) -> tuple[str, tuple[int, ...]] | None:
    """``"intel-rapl:0:a"`` → ``("intel-rapl", (0, 10))``; None if not a zone name."""
    ctype, sep, rest = zone.partition(":")
    if not sep or not ctype:
        return None
    try:
        return ctype, tuple(int(part, 16) for part in rest.split(":"))
    except ValueError:
        return None


@dataclass
class _Zone:
    """One powercap zone as opened: where it lives and how its counter is tracked."""

    zone: str  # "intel-rapl:0:0", also the domain label
    ctype: str
    ids: tuple[int, ...]
    path: str  # the directory it resolved through
    name: str = ""
    max_range_uj: int = 0  # 0: unknown (0 or unreadable in sysfs): no wrap handling
    range_note: str = ""  # why the range is unknown
    limit_w: float | None = None  # largest constraint_*_power_limit_uw, in W
    has_constraints: bool = False  # any constraint_* file (AMD zones have none)
    domain: Domain | None = None
    package: int | None = None
    tracker: CounterTracker | None = None
    lost_note: str = ""  # why energy_uj cannot be read (empty: it can)
    fault: str = ""  # the fault of the current run of rejected readings ("": none)
    fd: int | None = None  # energy_uj, kept open while the sensor is

    #: (path, its energy_uj), joined once
    _energy_path: tuple[str, str] = field(default=("", ""), init=False, repr=False,
                                          compare=False)

    @property
    def energy_path(self) -> str:
        # every read names it (the fakes check it): joined once per path, not per read
        if self._energy_path[0] != self.path:
            self._energy_path = (self.path, os.path.join(self.path, "energy_uj"))
        return self._energy_path[1]

    def sort_key(self) -> tuple:
        return (len(self.ids) > 1, self.ctype != PRIMARY_TYPE, self.ctype, self.ids)


def _candidates(root: Path) -> dict[str, list[str]]:
    """Every zone name under ``root`` with the paths that may lead to it, flat links first."""
    found: dict[str, list[str]] = {}

    def walk(path: str, prefix: str, depth: int) -> None:
        try:
            entries = sorted(os.listdir(path))
        except OSError:
            return  # a dangling link or not a folder
        for entry in entries:
            if entry.startswith(prefix) and depth < 6:
                found.setdefault(entry, []).append(os.path.join(path, entry))
                walk(os.path.join(path, entry), prefix, depth + 1)

    for entry in sorted(os.listdir(root)):
        if ":" in entry:
            found.setdefault(entry, []).append(os.path.join(root, entry))
        else:  # a control type: in a devices tree the zones nest inside it
            walk(os.path.join(root, entry), entry + ":", 0)
    return found


def _power_limit_w(path: str) -> tuple[float | None, bool]:
    """The largest non-zero ``constraint_*_power_limit_uw`` of a zone, in W (None if none),
    and whether the zone has any ``constraint_*`` file at all."""
    limits = []
    entries = os.listdir(path)
    for entry in entries:
        if entry.startswith("constraint_") and entry.endswith("_power_limit_uw"):
            try:
                limits.append(int(_read_text(os.path.join(path, entry))) / 1e6)
            except (OSError, ValueError):
                continue
    limits = [w for w in limits if w > 0]
    return (max(limits) if limits else None), any(e.startswith("constraint_") for e in entries)


def _classify(z: _Zone, parent: _Zone | None, tops_of_kind: dict[str, int]) -> None:
    """Give ``z`` its domain from its name (and its parent's domain for a child zone)."""
    idx: int | None = None
    source, label = "rapl", z.zone
    if parent is not None:
        assert parent.domain is not None
        kind = {"core": DomainKind.CORE, "uncore": DomainKind.UNCORE,
                "dram": DomainKind.DRAM}.get(z.name, DomainKind.OTHER)
        dom_id, in_total, idx = f"{parent.domain.id}/{z.name}", kind is DomainKind.DRAM, parent.package
        if kind is DomainKind.CORE and not parent.has_constraints and not z.has_constraints:
            # AMD Zen (no constraint files): one core's counter, read on one CPU
            source, label = AMD_CORE_SOURCE, f"{z.zone}: one core's counter (AMD), not all cores"
    elif m := _PACKAGE_RE.fullmatch(z.name):
        dom_id, kind, in_total, idx = z.name, DomainKind.PACKAGE, True, int(m.group(1))
    elif m := _PSYS_RE.fullmatch(z.name):
        dom_id, kind, in_total = z.name, DomainKind.PSYS, False
        idx = int(m.group(1)) if m.group(1) else None
    else:  # top-level dram (some servers) or a name we do not know: number them per type
        key = f"{z.ctype}/{z.name}"
        idx = tops_of_kind[key] = tops_of_kind.get(key, -1) + 1
        kind = DomainKind.DRAM if z.name == "dram" else DomainKind.OTHER
        dom_id, in_total = f"{z.name}-{idx}", kind is DomainKind.DRAM
    if z.range_note:
        label = f"{label}; {z.range_note}"
    z.package = idx
    z.domain = Domain(id=dom_id, name=z.name, kind=kind, source=source,
                      provenance=Provenance.MEASURED, in_total=in_total, label=label, index=idx)


def _same_counter(a: _Zone, b: _Zone) -> bool:
    """Whether two zones read one counter: b's value lies between two reads of a's."""
    try:
        a1 = int(_read_text(a.energy_path))
        b1 = int(_read_text(b.energy_path))
        a2 = int(_read_text(a.energy_path))
    except (OSError, ValueError):
        return False
    return a1 <= b1 <= a2 or (a2 < a1 and (b1 >= a1 or b1 <= a2))


def _max_range_uj(path: str) -> tuple[int, str]:
    """A zone's ``max_energy_range_uj``, or (0, why) when it is 0 or unreadable (broken
    firmware): such a zone is read without wrap handling."""
    try:
        text = _read_text(os.path.join(path, "max_energy_range_uj")).strip()
        value = int(text)
    except OSError as exc:
        return 0, f"max_energy_range_uj unreadable ({exc.strerror or exc}): read without wrap handling"
    except ValueError:
        return 0, f"max_energy_range_uj is {text[:20]!r}: read without wrap handling"
    if value <= 0:
        return 0, f"max_energy_range_uj is {value}: read without wrap handling"
    return value, ""


def _discover(root: Path) -> tuple[list[_Zone], list[str]]:
    """The zones to read, deduplicated and classified, plus notes. Raises SensorUnavailable."""
    if not root.is_dir():
        raise SensorUnavailable(f"no powercap folder at {root} (no RAPL driver, or not Linux)",
                                NO_RAPL_FIX)
    zones: list[_Zone] = []
    dangling: list[str] = []
    notes: list[str] = []
    for zone, paths in _candidates(root).items():
        ids = _zone_ids(zone)
        if ids is None:
            continue
        path = next((p for p in paths if os.path.isfile(os.path.join(p, "name"))), None)
        if path is None:
            link = paths[0]
            target = os.readlink(link) if os.path.islink(link) else "?"
            dangling.append(f"{link} -> {target} does not resolve")
            continue
        z = _Zone(zone, ids[0], ids[1], path)
        try:
            z.name = _read_text(os.path.join(path, "name")).strip()
            z.limit_w, z.has_constraints = _power_limit_w(path)
        except OSError as exc:
            notes.append(f"{zone}: skipped, unreadable name ({exc})")
            continue
        z.max_range_uj, z.range_note = _max_range_uj(path)
        if z.range_note:
            notes.append(f"{zone} ({z.name}): {z.range_note}")
        zones.append(z)
    if not zones and dangling:
        raise SensorUnavailable(
            f"the powercap links under {root} dangle ({dangling[0]}): /sys/devices is probably "
            f"masked in this container, so no zone can be read", MASKED_FIX)
    if not zones:
        raise SensorUnavailable(f"no RAPL zones under {root}", NO_RAPL_FIX)
    if dangling:
        notes.append(f"{len(dangling)} zone link(s) dangle, e.g. {dangling[0]}")

    by_zone = {z.zone: z for z in zones}
    kept: dict[str, _Zone] = {}  # domain id -> zone
    tops_of_kind: dict[str, int] = {}
    for z in sorted(zones, key=_Zone.sort_key):
        parent = None
        if len(z.ids) > 1:
            parent = by_zone.get(z.zone.rpartition(":")[0])
            if parent is None or parent.domain is None:
                notes.append(f"{z.zone} ({z.name}): skipped with its parent zone")
                continue
        _classify(z, parent, tops_of_kind)
        assert z.domain is not None
        first = kept.get(z.domain.id)
        if first is None and z.domain.kind is DomainKind.PACKAGE:
            first = next((k for k in kept.values() if k.domain.kind is DomainKind.PACKAGE
                          and k.package == z.package and k.max_range_uj == z.max_range_uj
                          and _same_counter(k, z)), None)
            if first is not None:
                z.domain = None  # its children go too: they would repeat the first's
        if first is not None:
            why = "same counter as" if z.domain is None else "already read from"
            notes.append(f"{z.zone} ({z.name}) dropped: {why} {first.zone}")
            continue
        kept[z.domain.id] = z
        if z.domain.source == AMD_CORE_SOURCE:  # shown with the sensor's status (UI help)
            notes.append(f"{z.domain.id} is one core's counter (AMD), not all cores")
    # each top-level domain followed by its children, in zone order
    tops = {dom_id: i for i, dom_id in enumerate(k for k in kept if "/" not in k)}
    ordered = sorted(kept.values(), key=lambda z: (tops.get(z.domain.id.split("/")[0], 0), len(z.ids)))
    return ordered, notes


class RaplSensor(Sensor, DeviceInfoSource):
    """RAPL energy counters through powercap, one domain per zone (deduplicated).

    ``root``: the powercap folder (see :func:`resolve_root`). ``max_power_w``: the sanity
    ceiling for every zone, overriding the default (2 × the zone's largest power limit,
    else :data:`DEFAULT_CEILING_W`). It sets how often the engine must poll
    (:meth:`max_poll_interval_s`) and how long a gap can be bridged, never whether a step
    is energy: that takes a bound ten times higher (:class:`CounterTracker`).
    """

    #: a package's frequency and temperature: drawn by the UI, recorded nowhere
    device_info_recorded = False

    name = "rapl"

    def __init__(self, root: str | os.PathLike | None = None, max_power_w: float | None = None):
        self.root = resolve_root(root)
        self.max_power_w = max_power_w
        self._zones: list[_Zone] = []
        self._notes: list[str] = []
        self._events: list[Event] = []
        self._rediscover_t: float | None = None  # when unreadable zones were last looked for
        self.cpu_info = CpuPackageReader()  # packages' frequency and temperature (psutil)

    # -- availability -----------------------------------------------------------
    def _probe(self) -> tuple[list[_Zone], list[str]]:
        """Discover, then keep the zones whose energy_uj reads. Raises SensorUnavailable."""
        zones, notes = _discover(self.root)
        readable: list[_Zone] = []
        first_error: tuple[str, OSError] | None = None
        for z in zones:
            try:
                _read_text(z.energy_path)
            except OSError as exc:
                first_error = first_error or (z.energy_path, exc)
                notes.append(f"{z.zone} ({z.name}): cannot read energy_uj ({exc.strerror})")
                continue
            readable.append(z)
        if not readable and first_error is not None:
            path, exc = first_error
            if isinstance(exc, PermissionError):
                raise SensorUnavailable(
                    f"cannot read {path}: permission denied (energy_uj is readable by root only "
                    f"since Linux 5.10, CVE-2020-8694)", PERMISSION_FIX)
            raise SensorUnavailable(f"cannot read {path}: {exc.strerror or exc}")
        return readable, notes

    def is_available(self) -> SensorStatus:
        """Whether RAPL can be read here; the reason and fix if not. Never raises."""
        try:
            zones, notes = self._probe()
        except SensorUnavailable as exc:
            return SensorStatus(self.name, False, exc.reason, exc.fix)
        except Exception as exc:  # a sysfs oddity we did not foresee: say so, don't crash
            return SensorStatus(self.name, False, f"cannot read {self.root}: {exc!r}")
        return SensorStatus(self.name, True, self._summary(zones, notes))

    def _summary(self, zones: list[_Zone], notes: list[str]) -> str:
        ids = ", ".join(z.domain.id for z in zones if z.domain)
        return "; ".join([f"{ids} from {self.root}", *notes])

    def status(self) -> SensorStatus:
        return SensorStatus(self.name, True, self._summary(self._zones, self._notes))

    # -- life cycle ---------------------------------------------------------------
    def open(self) -> Sequence[Domain]:
        """Resolve every zone and open its ``energy_uj`` (kept open until :meth:`close`);
        the first ``read`` sets each counter's baseline.

        Raises SensorUnavailable (no powercap folder, no zones, dangling links, energy_uj
        unreadable), with the fix in ``.fix``.
        """
        self.close()
        self._zones, self._notes = self._probe()
        for z in self._zones:
            self._track(z)
            self._reopen(z)
        self._rediscover_t = None
        return [z.domain for z in self._zones if z.domain]

    def _track(self, z: _Zone) -> None:
        assert z.domain is not None
        ceiling_w = self.max_power_w or (2.0 * z.limit_w if z.limit_w else
                                         DEFAULT_CEILING_W.get(z.domain.kind, OTHER_CEILING_W))
        # the raw counter wraps at 2**32 units: one unit more than max_energy_range_uj
        modulus_uj = z.max_range_uj + z.max_range_uj / RAW_MAX
        z.tracker = CounterTracker(max_range=modulus_uj, scale_j=1e-6, max_power_w=ceiling_w,
                                   unit=modulus_uj / (RAW_MAX + 1) if modulus_uj else 1.0)

    def _reopen(self, z: _Zone) -> None:
        """(Re)open the zone's energy_uj. Raises OSError; the zone then has no descriptor."""
        _close_fd(z)
        z.fd = os.open(z.energy_path, os.O_RDONLY)

    def close(self) -> None:
        for z in self._zones:
            _close_fd(z)
        self._zones = []

    def device_info(self, now_s: float) -> dict[str, DeviceInfo]:
        """Each package's frequency and temperature where psutil has them (``cpuinfo``);
        DRAM, core and the others have none."""
        packages: dict[int, list[str]] = {}  # a multi-die package has a zone per die
        for z in list(self._zones):
            d = z.domain
            if d is not None and d.kind is DomainKind.PACKAGE and d.index is not None:
                packages.setdefault(d.index, []).append(d.id)
        infos = self.cpu_info.read(sorted(packages), now_s)
        return {i: info for p, info in infos.items() for i in packages[p]}

    def max_poll_interval_s(self) -> float | None:
        """Longest gap (s) at which no counter can wrap twice, even at its ceiling power."""
        intervals = [z.tracker.safe_interval_s() for z in self._zones if z.tracker]
        intervals = [i for i in intervals if i is not None]
        return min(intervals) if intervals else None

    def drain_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def _read_raw(self, z: _Zone) -> str:
        """The zone's energy_uj text from its kept descriptor; after an error, or while its
        values are bad, the file is opened again (it may have been re-created). Raises
        OSError when it cannot be read."""
        if z.fd is None or z.lost_note or z.fault:
            self._reopen(z)
            assert z.fd is not None
            return _pread_text(z.fd, z.energy_path)
        try:
            text = _pread_text(z.fd, z.energy_path)
            if text.strip():
                return text
        except OSError:
            pass
        # an error or nothing: open the path again (the zone may be gone or re-created)
        self._reopen(z)
        assert z.fd is not None
        return _pread_text(z.fd, z.energy_path)

    def read(self, now_s: float) -> Sequence[Reading]:
        """Cumulative energy (J) per domain since the first read, wraps unwrapped.

        A zone that cannot be read, or reads a value that cannot be energy (see the module
        docstring), gives ``status=LOST`` and ``energy_j=None``, with one event per run of
        failures ("lost" or "rejected") while the others go on. The next good reading says
        what became of the span: "bridged" (its energy counted, ``Link.BRIDGED``), "reset"
        or "gap" (a new base, the span lost, ``Link.BROKEN``).
        """
        self._maybe_rediscover(now_s)
        readings = []
        for z in self._zones:
            dom, tracker = z.domain, z.tracker
            assert dom is not None and tracker is not None
            try:
                text = self._read_raw(z)
            except OSError as exc:
                if not z.lost_note:
                    z.lost_note = f"cannot read {z.energy_path}: {exc.strerror or exc}"
                    self._event(now_s, dom.id, "lost", z.lost_note)
                tracker.reject(z.lost_note)
                readings.append(Reading(dom.id, now_s, None, status=Status.LOST, note=z.lost_note))
                continue
            was_unreadable, z.lost_note = bool(z.lost_note), ""
            try:
                step = tracker.update(int(text), now_s)
            except ValueError:
                shown = text.strip()[:40]
                step = tracker.reject(f"{shown!r} is not a number" if shown else "empty")
            readings.append(self._reading(z, step, now_s, was_unreadable))
        return readings

    def _reading(self, z: _Zone, step: CounterStep, now_s: float, was_unreadable: bool) -> Reading:
        """The reading (and events) for one zone's counter step."""
        dom = z.domain
        assert dom is not None
        if step.kind == "rejected":
            if not z.fault:
                z.fault = step.detail
                self._event(now_s, dom.id, "rejected",
                            f"{z.zone} energy_uj: {step.detail}; not counted, lost until it "
                            f"reads true again")
            return Reading(dom.id, now_s, None, status=Status.LOST, note=f"rejected: {step.detail}")
        z.fault = ""
        if step.kind == "bridged":
            self._event(now_s, dom.id, "bridged", f"{z.zone} energy_uj reads true again: "
                        f"{step.detail}")
            return Reading(dom.id, now_s, step.energy_j, note="bridged", link=Link.BRIDGED)
        if step.kind in ("reset", "gap"):
            self._event(now_s, dom.id, step.kind, f"{z.zone} energy_uj {step.detail}: the "
                        f"{step.span_s:.3g} s since its last good reading are lost (not counted)")
            return Reading(dom.id, now_s, step.energy_j, note=step.kind, link=Link.BROKEN,
                           base_t_s=step.base_t_s, base_energy_j=step.base_energy_j)
        if was_unreadable:  # a new counter (re-registered with another range): a new base
            self._event(now_s, dom.id, "recovered", f"{z.energy_path} reads again")
        return Reading(dom.id, now_s, step.energy_j)

    def _maybe_rediscover(self, now_s: float) -> None:
        """Look again, at most every :data:`REDISCOVER_S`, for zones that cannot be read:
        a zone re-registered under a new id (module reload, hotplug) is the same domain
        (same name under the same parent) at a new path."""
        lost = [z for z in self._zones if z.lost_note]
        if not lost:
            self._rediscover_t = None
            return
        if self._rediscover_t is not None and now_s - self._rediscover_t < REDISCOVER_S:
            return
        self._rediscover_t = now_s
        try:
            found, _ = _discover(self.root)
        except (SensorUnavailable, OSError):
            return
        by_id = {(f.ctype, f.domain.id): f for f in found if f.domain is not None}
        for z in lost:
            assert z.domain is not None
            new = by_id.get((z.ctype, z.domain.id))
            if new is None or new.path == z.path:
                continue
            old = z.zone
            z.zone, z.ids, z.path = new.zone, new.ids, new.path
            if (new.max_range_uj, new.limit_w) != (z.max_range_uj, z.limit_w):
                z.max_range_uj, z.limit_w = new.max_range_uj, new.limit_w
                self._track(z)  # another counter: its first reading is a new base
            try:
                self._reopen(z)
            except OSError:
                continue
            self._event(now_s, z.domain.id, "rediscovered",
                        f"{old} is now {new.zone} ({new.name}), read from {z.energy_path}")

    def _event(self, t_s: float, domain_id: str, kind: str, message: str) -> None:
        self._events.append(Event(t_s, self.name, domain_id, kind, message))
