"""A faithful fake of Linux powercap RAPL under a temporary folder.

Built exactly as ``../shared/SENSORS.md`` section 1 describes::

    <root>/class/powercap/intel-rapl      -> ../../devices/virtual/powercap/intel-rapl
    <root>/class/powercap/intel-rapl:0    -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:0
    <root>/class/powercap/intel-rapl:0:0  -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:0
    <root>/devices/virtual/powercap/intel-rapl/{enabled,power/,subsystem,uevent}
    <root>/devices/virtual/powercap/intel-rapl/intel-rapl:0/{name,energy_uj,max_energy_range_uj,
        enabled,constraint_N_*,device,power/,subsystem,uevent}

Pass :attr:`FakePowercap.sensor_root` (``<root>/class/powercap``) to ``RaplSensor``.

Counters copy the kernel: a 32-bit raw counter in whole units of ``unit_nj`` nanojoules,
``energy_uj = raw × unit_nj // 1000`` and ``max_energy_range_uj = 0xFFFFFFFF × unit_nj // 1000``
(Intel 61035 nJ → 262143328850; AMD 15258 nJ → 65532610987; server DRAM 15300 nJ →
65712999613). :meth:`advance` adds energy in whole units (the remainder is carried) and
wraps at 2**32 units, as the hardware does. Each counter starts at a different arbitrary
value, as on a machine that has been up a while.

A counter's ``energy_uj`` is rewritten in place by one ``pwrite`` at offset 0, so a reader
that keeps the file open and reads at offset 0 sees each new value, as with sysfs (which
formats the value afresh for every read at offset 0). The file never shrinks while counting:
a value shorter than the file is padded with trailing newlines, which every reader strips, so
no reader sees an empty or half-written value (sysfs never shows one either) and a background
thread may call :meth:`advance` while a real ``tuimeter record`` reads. Other files are
replaced by a renamed sibling. Thread-safe.

Faults seen in the field (SENSORS.md §1), for as long as a test wants:
:meth:`show` makes ``energy_uj`` read a given text (``"0"``, ``""``, ``"n/a"``, a 200-digit
or negative value, a value far ahead) while the counter runs on underneath; :meth:`clear`
ends it. :meth:`jump` moves a counter forward for good without any energy;
:meth:`reset` restarts it. :meth:`set_max_range` writes another ``max_energy_range_uj``
(``0`` on broken firmware). :meth:`reregister` removes a zone and registers the same counter
under a new id (module reload, hotplug).

Read failures: :meth:`unplug` / :meth:`replug` empty and move away ``energy_uj``, then put it
back (works across processes: a kept descriptor reads an empty value, and opening the path
fails with FileNotFoundError; in sysfs a kept descriptor of a removed zone fails with
ENODEV). :meth:`deny` injects a PermissionError (or another OSError) in this process through
:meth:`install`, which patches ``tuimeter.sensors.rapl._read_text`` and ``_pread_text``:
tests run as root, and root reads a 0400 file anyway.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path

INTEL_UNIT_NJ = 61035  # 1e9 / 2**14, truncated by the kernel (ESU 14): ≈61.04 µJ
AMD_UNIT_NJ = 15258  # 1e9 / 2**16 (ESU 16): ≈15.26 µJ
SERVER_DRAM_UNIT_NJ = 15300  # fixed 15.3 µJ DRAM unit on Xeons
PSYS_1J_UNIT_NJ = 10**9  # Sapphire Rapids psys
RAW_MOD = 2**32

#: i5-13500 package limits (SENSORS.md): (name, power_limit_uw, time_window_us)
CLIENT_PACKAGE_CONSTRAINTS = (("long_term", 65_000_000, 7_995_392), ("short_term", 117_000_000, 2440))
SERVER_PACKAGE_CONSTRAINTS = (("long_term", 205_000_000, 999_424), ("short_term", 246_000_000, 2440))
SUBZONE_CONSTRAINTS = (("long_term", 0, 976),)  # core/uncore/dram: present, limit 0
PSYS_CONSTRAINTS = (("long_term", 0, 27_983_872), ("short_term", 0, 976))


def max_range_uj(unit_nj: int) -> int:
    """``max_energy_range_uj`` as the kernel computes it for a unit of ``unit_nj`` nJ."""
    return (RAW_MOD - 1) * unit_nj // 1000


def _write(path: Path, text: str) -> None:
    """Replace a file's text atomically: write a sibling, then rename it over the file.

    A reader in another thread or process sees the old text or the new, never an empty or
    half-written file, as sysfs behaves (a counter read is one value). The mode of an
    existing file is kept.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)
    try:
        os.chmod(tmp, os.stat(path).st_mode & 0o777)
    except FileNotFoundError:
        pass
    os.replace(tmp, path)


def _write_in_place(path: Path, text: str) -> None:
    """Rewrite a counter file with one ``pwrite`` at offset 0 (see the module docstring):
    padded with newlines to the file's size, so the file never shrinks."""
    data = text.encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if len(data) < size:
            data += b"\n" * (size - len(data))
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


@dataclass
class Counter:
    """A RAPL hardware counter: 32-bit raw value in units of ``unit_nj`` nanojoules."""

    unit_nj: int
    raw: int
    carry_nj: int = 0  # energy advanced but not yet a whole unit
    advanced_nj: int = 0  # every nJ given to advance(), for expectations

    @property
    def energy_uj(self) -> int:
        return self.raw * self.unit_nj // 1000


@dataclass
class FakeZone:
    zone: str  # "intel-rapl:0:0"
    name: str  # "core"
    dir: Path  # the real directory under devices/
    counter: Counter
    parent: "FakeZone | None" = None
    children: list["FakeZone"] = field(default_factory=list)
    shown: str | None = None  # a fault's text that energy_uj reads instead of the counter
    constraints: tuple = ()  # (name, power_limit_uw, time_window_us) per constraint file

    @property
    def domain_id(self) -> str:
        """The id RaplSensor should give it (package-0, package-0/core, psys ...)."""
        return f"{self.parent.domain_id}/{self.name}" if self.parent else self.name

    @property
    def energy_file(self) -> Path:
        return self.dir / "energy_uj"


class FakePowercap:
    """A powercap tree under ``root``; build it with one of the builder methods (chainable)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.devices_root = self.root / "devices" / "virtual" / "powercap"
        self.sensor_root = self.root / "class" / "powercap"
        self.devices_root.mkdir(parents=True, exist_ok=True)
        self.sensor_root.mkdir(parents=True, exist_ok=True)
        self.zones: dict[str, FakeZone] = {}
        self.denied: dict[str, type[OSError]] = {}  # realpath of energy_uj -> error class
        self._lock = threading.RLock()

    # -- building -------------------------------------------------------------------
    def add_control_type(self, ctype: str = "intel-rapl") -> Path:
        d = self.devices_root / ctype
        if not d.exists():
            (d / "power").mkdir(parents=True)
            _write(d / "enabled", "1\n")
            _write(d / "uevent", "")
            os.symlink("../../../../class/powercap", d / "subsystem")
            os.symlink(f"../../devices/virtual/powercap/{ctype}", self.sensor_root / ctype)
        return d

    def add_zone(self, zone: str, name: str, unit_nj: int = INTEL_UNIT_NJ,
                 constraints: tuple = (), enabled: int = 1,
                 counter: Counter | None = None) -> FakeZone:
        """Add zone ``zone`` (e.g. ``"intel-rapl:0:1"``, hex ids) named ``name``.

        Its parent (``intel-rapl:0``) must exist. ``counter`` shares another zone's counter
        (mmio duplicates, the AMD per-CCD regression).
        """
        ctype, _, ids = zone.partition(":")
        parent = self.zones.get(zone.rpartition(":")[0]) if ids.count(":") else None
        base = parent.dir if parent else self.add_control_type(ctype)
        d = base / zone
        (d / "power").mkdir(parents=True)
        if counter is None:  # an arbitrary, zone-specific starting value
            counter = Counter(unit_nj, zlib.crc32(zone.encode()) % (RAW_MOD // 2) + 12345)
        fz = FakeZone(zone, name, d, counter, parent, constraints=constraints)
        _write(d / "name", name + "\n")
        _write(d / "max_energy_range_uj", f"{max_range_uj(counter.unit_nj)}\n")
        _write(d / "enabled", f"{enabled}\n")
        _write(d / "uevent", "")
        for i, (cname, limit_uw, window_us) in enumerate(constraints):
            _write(d / f"constraint_{i}_name", cname + "\n")
            _write(d / f"constraint_{i}_power_limit_uw", f"{limit_uw}\n")
            _write(d / f"constraint_{i}_time_window_us", f"{window_us}\n")
        os.symlink(f"../../{base.name}", d / "device")
        os.symlink("../../../../" + "../" * zone.count(":") + "class/powercap", d / "subsystem")
        rel = d.relative_to(self.root)
        os.symlink(f"../../{rel}", self.sensor_root / zone)
        _write_in_place(fz.energy_file, f"{counter.energy_uj}\n")
        self.zones[zone] = fz
        if parent:
            parent.children.append(fz)
        return fz

    def intel_desktop(self, dram: bool = False, psys: bool = True) -> "FakePowercap":
        """Client Intel (i5-13500-like): package-0 with core, uncore (and dram), psys at :1."""
        self.add_zone("intel-rapl:0", "package-0", constraints=CLIENT_PACKAGE_CONSTRAINTS)
        self.add_zone("intel-rapl:0:0", "core", constraints=SUBZONE_CONSTRAINTS)
        self.add_zone("intel-rapl:0:1", "uncore", constraints=SUBZONE_CONSTRAINTS)
        if dram:
            self.add_zone("intel-rapl:0:2", "dram", constraints=SUBZONE_CONSTRAINTS)
        if psys:  # registers with no parent: a top-level zone, not a second socket
            self.add_zone("intel-rapl:1", "psys", constraints=PSYS_CONSTRAINTS)
        return self

    def intel_server(self, sockets: int = 2, psys: bool = False) -> "FakePowercap":
        """Xeon: package-N each with ``intel-rapl:N:0`` = dram (15.3 µJ unit); optional 1 J psys."""
        for n in range(sockets):
            self.add_zone(f"intel-rapl:{n:x}", f"package-{n}", constraints=SERVER_PACKAGE_CONSTRAINTS)
            self.add_zone(f"intel-rapl:{n:x}:0", "dram", SERVER_DRAM_UNIT_NJ, SUBZONE_CONSTRAINTS)
        if psys:
            self.add_zone(f"intel-rapl:{sockets:x}", "psys", PSYS_1J_UNIT_NJ, PSYS_CONSTRAINTS)
        return self

    def amd_zen(self, packages: int = 1, ccd_duplicates: int = 0) -> "FakePowercap":
        """AMD Zen: package-N + one core child, no constraint files, enabled 0.

        ``ccd_duplicates`` > 0 copies the 2024 regression: that many extra top-level zones per
        package, same name, all reading the package's counter (ids run into hex: ``:a``…).
        """
        n = 0
        for p in range(packages):
            pkg = self.add_zone(f"intel-rapl:{n:x}", f"package-{p}", AMD_UNIT_NJ, enabled=0)
            self.add_zone(f"intel-rapl:{n:x}:0", "core", AMD_UNIT_NJ, enabled=0)
            n += 1
            for _ in range(ccd_duplicates):
                self.add_zone(f"intel-rapl:{n:x}", f"package-{p}", enabled=0, counter=pkg.counter)
                n += 1
        return self

    def many_zones_hex(self, packages: int = 16) -> "FakePowercap":
        """Synthetic: ``packages`` Intel packages, zones ``intel-rapl:0``…``intel-rapl:f`` with core."""
        for n in range(packages):
            self.add_zone(f"intel-rapl:{n:x}", f"package-{n}", constraints=SERVER_PACKAGE_CONSTRAINTS)
            self.add_zone(f"intel-rapl:{n:x}:0", "core", constraints=SUBZONE_CONSTRAINTS)
        return self

    def add_mmio_duplicate(self, ctype: str = "intel-rapl-mmio") -> "FakePowercap":
        """The processor thermal driver's second view of package-0 (same counter)."""
        pkg = self.zone("package-0")
        self.add_zone(f"{ctype}:0", "package-0", constraints=CLIENT_PACKAGE_CONSTRAINTS,
                      counter=pkg.counter)
        return self

    def mask_devices(self) -> Path:
        """Hide ``<root>/devices`` (as a container does) so every class link dangles.

        Returns the powercap devices folder at its new place, which a test can use as root.
        """
        self._move_devices(self.root / "devices", self.root / "devices.masked")
        return self.root / "devices.masked" / "virtual" / "powercap"

    def unmask_devices(self) -> None:
        self._move_devices(self.root / "devices.masked", self.root / "devices")

    def _move_devices(self, old: Path, new: Path) -> None:
        with self._lock:  # counters keep advancing in the tree at its new place
            old.rename(new)
            for z in self.zones.values():
                z.dir = new / z.dir.relative_to(old)

    # -- lookup -----------------------------------------------------------------------
    def zone(self, key: str) -> FakeZone:
        """A zone by zone name (``intel-rapl:0:1``), domain id (``package-0/core``) or name."""
        if key in self.zones:
            return self.zones[key]
        hits = [z for z in self.zones.values() if z.domain_id == key and z.zone.startswith("intel-rapl:")]
        hits = hits or [z for z in self.zones.values() if z.name == key]
        if not hits:
            raise KeyError(key)
        return hits[0]

    def zone_path(self, key: str) -> Path:
        """The zone's class link, as the sensor sees it (``<sensor_root>/intel-rapl:0``)."""
        return self.sensor_root / self.zone(key).zone

    def energy_uj(self, key: str) -> int:
        return self.zone(key).counter.energy_uj

    def quantum_j(self, key: str) -> float:
        """One counter step, in J."""
        return self.zone(key).counter.unit_nj / 1e9

    def advanced_j(self, key: str) -> float:
        """Every joule given to :meth:`advance` for this zone's counter."""
        return self.zone(key).counter.advanced_nj / 1e9

    def max_range_j(self, key: str) -> float:
        return max_range_uj(self.zone(key).counter.unit_nj) / 1e6

    # -- changing counters ---------------------------------------------------------
    def advance(self, key: str, energy_j: float) -> None:
        """Add ``energy_j`` to a counter in whole units, wrapping at 2**32 units."""
        with self._lock:
            fz = self.zone(key)
            c = fz.counter
            nj = round(energy_j * 1e9)
            c.advanced_nj += nj
            units, c.carry_nj = divmod(c.carry_nj + nj, c.unit_nj)
            c.raw = (c.raw + units) % RAW_MOD
            self._flush(fz)

    def set_raw(self, key: str, raw: int) -> None:
        """Set the raw 32-bit counter (no energy accounted)."""
        with self._lock:
            fz = self.zone(key)
            fz.counter.raw = raw % RAW_MOD
            self._flush(fz)

    def set_energy_uj(self, key: str, energy_uj: int) -> None:
        """Set the counter so that energy_uj reads about ``energy_uj`` (whole units)."""
        fz = self.zone(key)
        self.set_raw(key, energy_uj * 1000 // fz.counter.unit_nj)

    def reset(self, key: str, raw: int = 1000) -> None:
        """A driver reload / resume: the counter restarts from a small value."""
        self.set_raw(key, raw)

    def jump(self, key: str, energy_j: float) -> None:
        """The counter moves forward by ``energy_j`` for good, with no energy spent."""
        with self._lock:
            fz = self.zone(key)
            fz.counter.raw = (fz.counter.raw + round(energy_j * 1e9) // fz.counter.unit_nj) % RAW_MOD
            self._flush(fz)

    def _flush(self, fz: FakeZone) -> None:
        for z in self.zones.values():
            if z.counter is fz.counter and z.energy_file.exists():
                text = f"{z.counter.energy_uj}\n" if z.shown is None else z.shown
                _write_in_place(z.energy_file, text)

    # -- faults ----------------------------------------------------------------------
    def show(self, key: str, text: str) -> None:
        """``energy_uj`` reads ``text`` (e.g. ``"0\n"``, ``""``, ``"n/a\n"``) until
        :meth:`clear`; the counter runs on underneath. Not atomic: the file is truncated
        then written, and a reader may catch it empty (one more bad value)."""
        with self._lock:
            fz = self.zone(key)
            fz.shown = text
            os.truncate(fz.energy_file, 0)
            _write_in_place(fz.energy_file, text)

    def clear(self, key: str) -> None:
        """``energy_uj`` reads the counter again."""
        with self._lock:
            fz = self.zone(key)
            fz.shown = None
            self._flush(fz)

    def set_max_range(self, key: str, text: str) -> None:
        """Write ``max_energy_range_uj`` (``"0\n"`` on broken firmware)."""
        _write(self.zone(key).dir / "max_energy_range_uj", text)

    def reregister(self, key: str, new_zone: str) -> FakeZone:
        """Remove the zone and register it again as ``new_zone`` (same name, same parent,
        same counter), as a module reload or hotplug does. A kept descriptor of the old
        file reads empty (sysfs: ENODEV) and its path no longer opens. Children go with it
        and are not re-registered."""
        with self._lock:
            old = self.zone(key)
            os.truncate(old.energy_file, 0)
            shutil.rmtree(old.dir)
            for z in [old, *old.children]:
                (self.sensor_root / z.zone).unlink()
                del self.zones[z.zone]
            if old.parent is not None:
                old.parent.children.remove(old)
            return self.add_zone(new_zone, old.name, old.counter.unit_nj, old.constraints,
                                 counter=old.counter)

    # -- read failures -------------------------------------------------------------
    def unplug(self, key: str) -> None:
        """The zone's ``energy_uj`` vanishes: opening it raises FileNotFoundError and a
        descriptor kept open reads an empty value."""
        with self._lock:
            fz = self.zone(key)
            os.truncate(fz.energy_file, 0)
            fz.energy_file.rename(fz.dir / ".energy_uj.unplugged")

    def replug(self, key: str) -> None:
        with self._lock:
            fz = self.zone(key)
            (fz.dir / ".energy_uj.unplugged").rename(fz.energy_file)
            self._flush(fz)

    def deny(self, key: str, error: type[OSError] = PermissionError) -> None:
        """Make reads of the zone's ``energy_uj`` raise ``error`` (needs :meth:`install`)."""
        self.denied[os.path.realpath(self.zone(key).energy_file)] = error

    def deny_all(self, error: type[OSError] = PermissionError) -> None:
        """Every zone's energy_uj unreadable, as for a user since Linux 5.10."""
        for key in self.zones:
            self.deny(key, error)

    def allow(self, key: str) -> None:
        self.denied.pop(os.path.realpath(self.zone(key).energy_file), None)

    def install(self, monkeypatch) -> "FakePowercap":
        """Route the RAPL sensor's reads through this fake's :meth:`deny` list."""
        from tuimeter.sensors import rapl

        real_read, real_pread = rapl._read_text, rapl._pread_text

        def check(path: str) -> None:
            error = self.denied.get(os.path.realpath(path))
            if error is not None:
                code = errno.EACCES if issubclass(error, PermissionError) else errno.EIO
                raise error(code, os.strerror(code), path)

        def read_text(path: str) -> str:
            check(path)
            return real_read(path)

        def pread_text(fd: int, path: str) -> str:
            check(path)
            return real_pread(fd, path)

        monkeypatch.setattr(rapl, "_read_text", read_text)
        monkeypatch.setattr(rapl, "_pread_text", pread_text)
        return self

    def remove(self) -> None:
        shutil.rmtree(self.root)
