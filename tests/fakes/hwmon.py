"""A faithful fake of Linux hwmon power meters under a temporary folder.

Built as ../shared/SENSORS.md section 6 (and the kernel's acpi_power_meter and
hwmon sysfs-interface) describe::

    <root>/class/hwmon/hwmonN -> ../../devices/<device path>/hwmon/hwmonN
    <root>/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00/hwmon/hwmonN/
        name                      power_meter
        power1_average            microwatts (the meter's average)
        power1_average_interval   milliseconds; _min and _max beside it
        power1_is_battery         0
        device -> ../../../ACPI000D:00

and for other drivers ``energyN_input`` (µJ, cumulative) or ``powerN_input`` (µW) with
``energyN_label`` / ``powerN_label``. Pass :attr:`FakeHwmon.sensor_root`
(``<root>/class/hwmon``) to ``HwmonSensor`` or set ``TUIMETER_HWMON_ROOT`` to it.
Values are replaced by a renamed sibling (atomic: a reader sees the old value or the
new, never an empty file). Thread-safe.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class FakeHwmon:
    """hwmon devices under ``root``; :attr:`sensor_root` is the class folder."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.sensor_root = self.root / "class" / "hwmon"
        self.sensor_root.mkdir(parents=True, exist_ok=True)
        self._n = 0
        self._lock = threading.Lock()
        self._energy_uj: dict[tuple[str, str], int] = {}
        self.dirs: dict[str, Path] = {}  # hwmonN -> its folder in the devices tree

    def add_device(self, name: str, device_path: str, in_device_dir: bool = False) -> str:
        """A new ``hwmonN`` of driver ``name`` under ``devices/<device_path>``; its files
        go under ``hwmonN/device/`` when ``in_device_dir`` (an older driver's layout).
        Returns ``hwmonN``."""
        hw = f"hwmon{self._n}"
        self._n += 1
        dev = self.root / "devices" / device_path
        folder = dev / "hwmon" / hw
        folder.mkdir(parents=True)
        os.symlink(os.path.relpath(dev, folder), folder / "device")
        os.symlink(os.path.relpath(folder, self.sensor_root), self.sensor_root / hw)
        files = dev if in_device_dir else folder
        _write(files / "name", name + "\n")
        self.dirs[hw] = files
        return hw

    def acpi_power_meter(self, power_w: float, interval_ms: int = 1000) -> str:
        """The ACPI power meter (ACPI000D) reading ``power_w``; returns its ``hwmonN``."""
        hw = self.add_device("power_meter", "LNXSYSTM:00/LNXSYBUS:00/ACPI000D:00")
        d = self.dirs[hw]
        _write(d / "power1_average_interval", f"{interval_ms}\n")
        _write(d / "power1_average_interval_min", "1000\n")
        _write(d / "power1_average_interval_max", "3600000\n")
        _write(d / "power1_is_battery", "0\n")
        self.set_power(hw, power_w)
        return hw

    def power_input(self, name: str, label: str, power_w: float, n: int = 1,
                    device_path: str = "platform/soc-power") -> str:
        hw = self.add_device(name, device_path)
        _write(self.dirs[hw] / f"power{n}_label", label + "\n")
        self.set_power(hw, power_w, n, "input")
        return hw

    def energy_counter(self, name: str, labels: list[str], start_uj: int = 123_456_789,
                       device_path: str = "platform/energy-meter",
                       in_device_dir: bool = False) -> str:
        """A driver with ``energyN_input`` counters, one per label (``""``: no label file)."""
        hw = self.add_device(name, device_path, in_device_dir)
        for n, label in enumerate(labels, start=1):
            if label:
                _write(self.dirs[hw] / f"energy{n}_label", label + "\n")
            self._energy_uj[(hw, f"energy{n}")] = start_uj
            self._flush(hw, f"energy{n}")
        return hw

    def set_power(self, hw: str, power_w: float, n: int = 1, what: str = "average") -> None:
        _write(self.dirs[hw] / f"power{n}_{what}", f"{int(round(power_w * 1e6))}\n")

    def show(self, hw: str, file: str, text: str) -> None:
        """Make ``file`` read ``text`` (a fault: ``""``, ``"n/a"``, a huge value)."""
        _write(self.dirs[hw] / file, text)

    def advance(self, hw: str, energy_j: float, n: int = 1) -> None:
        key = (hw, f"energy{n}")
        with self._lock:
            self._energy_uj[key] += int(round(energy_j * 1e6))
            self._flush(*key)

    def reset(self, hw: str, n: int = 1, to_uj: int = 1000) -> None:
        with self._lock:
            self._energy_uj[(hw, f"energy{n}")] = to_uj
            self._flush(hw, f"energy{n}")

    def _flush(self, hw: str, chan: str) -> None:
        _write(self.dirs[hw] / f"{chan}_input", f"{self._energy_uj[(hw, chan)]}\n")
