"""A faithful fake of HPE/Cray ``/sys/cray/pm_counters`` under a temporary folder.

As ../shared/SENSORS.md section 6 describes: one file per figure, each one line
``<value> <unit> <timestamp> us`` (``energy``, ``cpu_energy``, ``memory_energy``,
``accelN_energy`` in J; ``power`` in W); ``freshness`` moves at every update,
``raw_scan_hz`` 10, ``startup`` changes when the counters restart, ``version``. Set
``TUIMETER_PM_COUNTERS_ROOT`` to :attr:`root`. Each update rewrites every value file
(atomically, by a renamed sibling) and then moves ``freshness``. Thread-safe.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

COUNTERS = ("energy", "cpu0_energy", "cpu1_energy", "memory_energy", "accel0_energy")


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class FakePmCounters:
    def __init__(self, root: Path, counters=COUNTERS, start_j: int = 2_837_405):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.joules = {name: float(start_j) for name in counters}
        self.freshness = 1000
        self.startup = 1687361000000000
        self.time_us = 1687361251338620
        _write(self.root / "raw_scan_hz", "10\n")
        _write(self.root / "version", "2\n")
        _write(self.root / "startup", f"{self.startup}\n")
        self._flush()

    def _flush(self) -> None:
        for name, j in self.joules.items():
            _write(self.root / name, f"{int(j)} J {self.time_us} us\n")
        node_w = 0
        _write(self.root / "power", f"{node_w} W {self.time_us} us\n")
        self.freshness += 1
        _write(self.root / "freshness", f"{self.freshness}\n")

    def advance(self, energy_j: dict[str, float], dt_us: int = 100_000) -> None:
        """Add joules to counters (the raw values stay whole joules, as on the node)."""
        with self._lock:
            for name, j in energy_j.items():
                self.joules[name] += j
            self.time_us += dt_us
            self._flush()

    def restart(self, to_j: int = 5) -> None:
        """The counters restart (``startup`` changes, values near 0)."""
        with self._lock:
            self.startup += 1
            _write(self.root / "startup", f"{self.startup}\n")
            self.joules = {name: float(to_j) for name in self.joules}
            self._flush()

    def show(self, name: str, text: str) -> None:
        _write(self.root / name, text)
