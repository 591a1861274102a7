"""What each node meter costs per tick, on the sampling path and off it, beside RAPL's read
(the floor: the one sensor every Linux tick already pays) in the same run.

Prints figures (not a test), each the median of ``--reads`` calls, with the load average:

* on the sampling path (``sensor.read(now)``, what a tick pays): RAPL over a fake Intel
  desktop tree (the floor), hwmon over a fake ACPI power meter, pm_counters over a fake
  node tree, IPMI and Redfish (their read only looks at what their thread left);
* off it, on the meter's own thread (``fetch()``, every few seconds, never in a tick): a
  fake ``ipmitool`` (a Python script: its start-up dominates; a real ipmitool starts in
  a few ms and then waits for the BMC, 100 ms to seconds) and a Redfish GET against a
  local HTTP server (a real BMC answers in seconds).

  python bench/bench_node_meters.py [--reads 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.bmc import FakeTool  # noqa: E402
from tests.fakes.hwmon import FakeHwmon  # noqa: E402
from tests.fakes.pm_counters import FakePmCounters  # noqa: E402
from tests.fakes.powercap import FakePowercap  # noqa: E402
from tests.fakes.redfish import FakeRedfish  # noqa: E402


class _Env:
    """os.environ changes undone at exit (the sensors read their options from it)."""

    def __init__(self):
        self.saved: dict[str, str | None] = {}

    def setenv(self, key: str, value: str) -> None:
        self.saved.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def undo(self) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def median_us(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--fetches", type=int, default=20)
    args = ap.parse_args()
    env = _Env()
    from tuimeter.sensors.hwmon import HwmonSensor
    from tuimeter.sensors.ipmi import IpmiSensor
    from tuimeter.sensors.pm_counters import PmCountersSensor
    from tuimeter.sensors.rapl import RaplSensor
    from tuimeter.sensors.redfish import RedfishSensor

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        pc = FakePowercap(d / "sys").intel_desktop(dram=True)
        hw = FakeHwmon(d / "hw")
        hw.acpi_power_meter(250.0)
        pm = FakePmCounters(d / "pm")
        tool = FakeTool(d)
        bmc = FakeRedfish(d)
        env.setenv("PATH", f"{tool.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        env.setenv("TUIMETER_IPMI", "on")
        env.setenv("TUIMETER_IPMI_INTERVAL", "600")  # the thread's first fetch only
        for k, v in (("URL", bmc.url), ("USER", bmc.user), ("PASSWORD", bmc.password),
                     ("INTERVAL", "600")):
            env.setenv(f"TUIMETER_REDFISH_{k}", v)
        sensors = [("rapl (floor)", RaplSensor(pc.sensor_root)),
                   ("hwmon", HwmonSensor(hw.sensor_root)), ("pm_counters", PmCountersSensor(pm.root)),
                   ("ipmi", IpmiSensor()), ("redfish", RedfishSensor())]
        try:
            for _, s in sensors:
                s.open()
            for name in ("ipmi", "redfish"):  # wait for the first answer (a condition)
                s = dict(sensors)[name]
                deadline = time.monotonic() + 30
                while s._meter.answers < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
            print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
            print("on the sampling path, sensor.read() per tick (median):")
            for name, s in sensors:
                us = median_us(lambda: s.read(time.monotonic()), args.reads)
                print(f"  {name:14s} {us:9.1f} us  ({len(s.read(time.monotonic()))} domain(s))")
            print("off the sampling path, one fetch on the meter's thread (median):")
            ipmi, redfish = dict(sensors)["ipmi"], dict(sensors)["redfish"]
            print(f"  ipmi (fake ipmitool, a Python script) "
                  f"{median_us(ipmi.fetch, args.fetches) / 1e3:9.1f} ms")
            print(f"  redfish (local HTTP, one GET)       "
                  f"{median_us(redfish.fetch, args.fetches) / 1e3:9.1f} ms")
            print(f"load average {os.getloadavg()[0]:.2f}")
        finally:
            for _, s in sensors:
                s.close()
            bmc.close()
            env.undo()


if __name__ == "__main__":
    main()
