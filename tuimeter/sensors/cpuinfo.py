"""CPU packages' frequency and temperature, as s-tui shows them (through psutil).

* Temperature: ``psutil.sensors_temperatures()``. Intel's ``coretemp`` labels one entry per
  socket ``Package id N`` (N the physical package id, as in RAPL's ``package-N``). AMD's
  ``k10temp`` has no package id: one chip per socket, in PCI order, labelled ``Tctl`` (the
  control temperature, offset by up to 27 C on some Threadripper parts) and, on some parts,
  ``Tdie`` (the real die temperature), preferred. psutil lists every chip's entries under
  the one name, so the k-th ``Tdie`` (or ``Tctl``) is given to package k only when there is
  one per package; otherwise none is (a wrong socket's temperature is worse than n/a).
* Frequency: ``psutil.cpu_freq(percpu=True)``, the current MHz of each CPU (online CPUs in
  order); a package's is the mean over its CPUs, which
  ``/sys/devices/system/cpu/cpuN/topology/physical_package_id`` names. With one package
  every CPU is its; with several and a list that does not match the topology, none.

Nothing here raises: a reading that fails is left out (None, shown as n/a).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Sequence

from ..model import DeviceInfo

#: where the kernel describes each CPU (``cpuN/topology/physical_package_id``)
CPU_ROOT = "/sys/devices/system/cpu"
_PACKAGE_ID = re.compile(r"package id (\d+)", re.IGNORECASE)
_CPU_DIR = re.compile(r"cpu(\d+)")
#: the hwmon chips of AMD packages, and their entries, best first
AMD_CHIPS = ("k10temp", "zenpower")
AMD_LABELS = ("Tdie", "Tctl")


def package_temps_c(temps: dict[str, Sequence[Any]], n_packages: int) -> dict[int, float]:
    """Package id -> degrees C, from ``psutil.sensors_temperatures()``'s result."""
    out: dict[int, float] = {}
    for entry in temps.get("coretemp", ()):
        m = _PACKAGE_ID.fullmatch(str(getattr(entry, "label", "")).strip())
        value = _celsius(entry)
        if m and value is not None:
            out.setdefault(int(m.group(1)), value)
    if out:
        return out
    values = amd_temps_c(temps)
    return dict(enumerate(values)) if len(values) == n_packages else {}


def amd_temps_c(temps: dict[str, Sequence[Any]]) -> list[float]:
    """Each AMD package's ``Tdie`` (else ``Tctl``) in the order psutil lists the chips."""
    for chip in AMD_CHIPS:
        entries = temps.get(chip, ())
        for label in AMD_LABELS:
            values = [_celsius(e) for e in entries if getattr(e, "label", "") == label]
            if values and None not in values:
                return [v for v in values if v is not None]
    return []


def _celsius(entry: Any) -> float | None:
    value = getattr(entry, "current", None)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def cpu_packages(root: str = CPU_ROOT) -> list[int | None]:
    """The physical package id of each CPU that has one, in CPU number order."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    cpus = sorted(int(m.group(1)) for n in names if (m := _CPU_DIR.fullmatch(n)))
    out: list[int | None] = []
    for cpu in cpus:
        try:
            with open(os.path.join(root, f"cpu{cpu}", "topology", "physical_package_id")) as fh:
                out.append(int(fh.read().strip()))
        except (OSError, ValueError):
            continue  # offline CPUs have no topology
    return out


def package_freqs_mhz(freqs: Sequence[Any], package_of: Sequence[int | None],
                      packages: Iterable[int]) -> dict[int, float]:
    """Package id -> mean current MHz of its CPUs, from ``psutil.cpu_freq(percpu=True)``."""
    packages = list(packages)
    current = [getattr(f, "current", None) for f in freqs]
    if not current or any(not isinstance(c, (int, float)) or c <= 0 for c in current):
        return {}
    if len(packages) == 1:
        return {packages[0]: sum(current) / len(current)}
    if len(package_of) != len(current):
        return {}
    out = {}
    for p in packages:
        mine = [c for c, q in zip(current, package_of) if q == p]
        if mine:
            out[p] = sum(mine) / len(mine)
    return out


class CpuPackageReader:
    """Reads each package's frequency and temperature. ``psutil_module`` and ``cpu_root``
    are for tests (a fake module, a fake sysfs tree)."""

    def __init__(self, psutil_module: Any = None, cpu_root: str = CPU_ROOT) -> None:
        self._psutil = psutil_module
        self._cpu_root = cpu_root
        self._package_of: list[int | None] | None = None  # read once: topology is fixed

    def _module(self) -> Any:
        if self._psutil is None:
            try:
                import psutil
            except ImportError:
                return None
            self._psutil = psutil
        return self._psutil

    def read(self, packages: Sequence[int], now_s: float) -> dict[int, DeviceInfo]:
        """Package id -> its readings (only packages with at least one)."""
        ps = self._module()
        if ps is None or not packages:
            return {}
        temps = _call(ps, "sensors_temperatures") or {}
        freqs = _call(ps, "cpu_freq", percpu=True) or []
        if self._package_of is None and len(packages) > 1:
            self._package_of = cpu_packages(self._cpu_root)
        temp_c = package_temps_c(temps, len(packages)) if isinstance(temps, dict) else {}
        freq_mhz = package_freqs_mhz(freqs, self._package_of or [], packages)
        return {p: DeviceInfo(t_s=now_s, temp_c=temp_c.get(p), freq_mhz=freq_mhz.get(p))
                for p in packages if p in temp_c or p in freq_mhz}

    def read_machine(self, now_s: float) -> DeviceInfo | None:
        """The whole machine as one CPU (an estimated CPU domain): the mean frequency of
        every CPU and the hottest package."""
        ps = self._module()
        if ps is None:
            return None
        temps = _call(ps, "sensors_temperatures") or {}
        freqs = _call(ps, "cpu_freq", percpu=True) or []
        found = []
        if isinstance(temps, dict):
            found = list(package_temps_c(temps, 0).values()) or amd_temps_c(temps)
        mean = package_freqs_mhz(freqs, [], [0]).get(0)
        temp = max(found) if found else None
        if mean is None and temp is None:
            return None
        return DeviceInfo(t_s=now_s, temp_c=temp, freq_mhz=mean)


def _call(module: Any, name: str, **kw: Any) -> Any:
    """psutil's reading, or None where it has none (not on this platform, or it failed)."""
    fn = getattr(module, name, None)
    if fn is None:
        return None
    try:
        return fn(**kw)
    except Exception:  # noqa: BLE001 - a reading we can do without: n/a, never fatal
        return None
