"""End to end: a real `tuimeter record` against a fake powercap tree that a background
thread advances at a known power while the test injects the faults of SENSORS.md §1. Each
test states the truth in joules and checks the joules in the session CSV, and its rows."""

from __future__ import annotations

import signal
import threading
import time

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap, max_range_uj
from tests.helpers import count_totals, wait_for
from tests.test_record_cli import start_record


class ConstantDriver(threading.Thread):
    """Advances each counter at a constant power every 5 ms until halted."""

    def __init__(self, fake: FakePowercap, watts: dict[str, float]):
        super().__init__(daemon=True)
        self.fake, self.watts = fake, watts
        self.halt = threading.Event()

    def run(self):
        last = time.monotonic()
        while not self.halt.wait(0.005):
            now = time.monotonic()
            for key, w in self.watts.items():
                self.fake.advance(key, w * (now - last))
            last = now


def record(tmp_path, fake: FakePowercap, watts: dict[str, float], fault=None, clear=None):
    """Record under load: 5 ticks, ``fault(fake)``, 3 ticks, ``clear(fake)``, 5 ticks, then
    2 quiet ticks. Returns (the CSV's rows, {key: joules advanced while recording})."""
    out = tmp_path / "run.csv"
    proc = start_record(tmp_path, fake, out)
    try:
        before = {k: fake.advanced_j(k) for k in watts}
        driver = ConstantDriver(fake, watts)
        driver.start()

        def ticks(n: int, what: str) -> None:
            start = count_totals(out)
            wait_for(lambda: count_totals(out) >= start + n, what=what)

        ticks(5, "ticks under load")
        if fault is not None:
            fault(fake)
            ticks(3, "ticks during the fault")
            clear(fake)
        ticks(5, "ticks after it")
        driver.halt.set()
        driver.join()
        ticks(2, "two quiet ticks")
        truth = {k: fake.advanced_j(k) - before[k] for k in watts}
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return pd.read_csv(out, keep_default_na=False, na_values=[""]), truth


def samples(df, dom: str):
    return df[(df.kind == "sample") & (df.domain == dom)]


def events(df, dom: str) -> list[str]:
    rows = df[(df.kind == "event") & (df.domain == dom)]
    return [label.split(":")[0] for label in rows.label]


def test_record_glitch_to_zero_costs_nothing(tmp_path):
    """energy_uj of a 150 kJ package reads 0 for a while (old: +150 kJ, a session of 12 s
    read +10,000%): the CSV holds the true joules (±0.5%), lost sample rows while it reads
    0, a 'bridged' sample after, and the 'rejected' and 'bridged' event rows."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    fake.set_energy_uj("package-0", 150_000_000_000)
    df, truth = record(tmp_path, fake, {"package-0": 50.0},
                       lambda f: f.show("package-0", "0\n"), lambda f: f.clear("package-0"))
    pkg = samples(df, "package-0")
    assert pkg.energy_j.sum() == pytest.approx(truth["package-0"], rel=5e-3)
    assert (pkg.provenance == "lost").sum() >= 2
    assert pkg.label.fillna("").str.startswith("bridged").sum() == 1
    assert events(df, "package-0") == ["rejected", "bridged"]
    assert df[df.kind == "total"].energy_j.sum() == pytest.approx(truth["package-0"], rel=5e-3)


def test_record_read_far_ahead_is_rejected(tmp_path):
    """A DRAM zone reads 40 kJ ahead for a while (old: counted, 200 kW on a DRAM zone):
    rejected, and the joules in the CSV are the true ones (±0.5%)."""
    fake = FakePowercap(tmp_path / "sys").intel_server(sockets=1)

    def ahead(f):
        f.show("package-0/dram",
               f"{(f.energy_uj('package-0/dram') + 40_000_000_000) % max_range_uj(15300)}\n")

    df, truth = record(tmp_path, fake, {"package-0": 120.0, "package-0/dram": 6.0}, ahead,
                       lambda f: f.clear("package-0/dram"))
    for key, joules in truth.items():
        assert samples(df, key).energy_j.sum() == pytest.approx(joules, rel=5e-3), key
    assert events(df, "package-0/dram") == ["rejected", "bridged"]
    assert events(df, "package-0") == []


def test_record_wrap_at_five_times_the_limit_to_the_unit(tmp_path):
    """A client package (117 W limit) at 585 W crosses its wrap (old: counted as a reset,
    0 J for that interval): the CSV's joules equal the counter's movement to half a unit
    (31 µJ), which also catches a wrap that omits the + unit."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    zone = fake.zone("package-0")
    fake.set_raw("package-0", 2**32 - int(200.0 / (zone.counter.unit_nj / 1e9)))  # 200 J left
    df, _ = record(tmp_path, fake, {"package-0": 585.0})
    truth = (zone.counter.advanced_nj - zone.counter.carry_nj) / 1e9  # what the counter shows
    assert fake.energy_uj("package-0") < 10_000_000_000  # it wrapped
    pkg = samples(df, "package-0")
    assert pkg.energy_j.sum() == pytest.approx(truth, abs=fake.quantum_j("package-0") / 2)
    assert set(pkg.provenance) == {"measured"}
    assert events(df, "package-0") == []
