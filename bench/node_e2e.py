"""End-to-end figures for the whole node: `tuimeter record` over a fake Intel desktop
(package-0 40 W, dram 5 W, advanced by a thread every 5 ms) and a fake ACPI power meter
at a constant 250 W, for ``--seconds``; prints the session's total against the truth
(250 W x its span), the rest of node against the total less the chips, and the chips
against their truth (45 W x the span), with the load average.

  python bench/node_e2e.py [--seconds 10] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from tests.fakes.hwmon import FakeHwmon  # noqa: E402
from tests.fakes.powercap import FakePowercap  # noqa: E402
from tests.test_record_faults import ConstantDriver  # noqa: E402

NODE_W, CHIPS_W = 250.0, {"package-0": 40.0, "package-0/dram": 5.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        pc = FakePowercap(d / "sys").intel_desktop(dram=True, psys=False)
        hw = FakeHwmon(d / "hw")
        hw.acpi_power_meter(NODE_W)
        env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(pc.sensor_root),
                   TUIMETER_HWMON_ROOT=str(hw.sensor_root), XDG_RUNTIME_DIR=str(d),
                   XDG_CONFIG_HOME=str(d / "config"), XDG_DATA_HOME=str(d / "data"))
        driver = ConstantDriver(pc, CHIPS_W)
        driver.start()
        out = d / "node.csv"
        proc = subprocess.Popen([sys.executable, "-m", "tuimeter", "record", "-o", str(out),
                                 "--interval", str(args.interval), "--no-gpu", "--duration",
                                 str(args.seconds)], env=env, cwd=ROOT)
        proc.wait(timeout=args.seconds + 60)
        driver.halt.set()
        driver.join()
        df = pd.read_csv(out)
    if proc.returncode != 0:
        raise SystemExit(f"record failed ({proc.returncode})")
    totals = df[df.kind == "total"]
    span_s = float(totals.elapsed_s.iloc[-1])
    samples = df[df.kind == "sample"]
    rest = samples[samples.domain == "rest-of-node"].energy_j.sum()
    chips = samples[samples.domain.isin(list(CHIPS_W))].energy_j.sum()
    total = totals.energy_j.sum()
    print(f"load average {os.getloadavg()[0]:.2f}; session {span_s:.3f} s at {args.interval} s ticks")
    print(f"total        {total:12.3f} J  truth 250 W x span {NODE_W * span_s:12.3f} J  "
          f"({100 * (total / (NODE_W * span_s) - 1):+.6f}%)")
    print(f"chips        {chips:12.3f} J  truth  45 W x span {45.0 * span_s:12.3f} J  "
          f"({100 * (chips / (45.0 * span_s) - 1):+.3f}%)")
    print(f"rest of node {rest:12.3f} J  total - chips      {total - chips:12.3f} J  "
          f"({rest / span_s:.2f} W average; 205 W expected)")
    full = totals[totals.interval_s > 0.1]
    print(f"total rows' power: {full.power_w.min():.6f} .. {full.power_w.max():.6f} W "
          f"over {len(full)} ticks; measured at {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
