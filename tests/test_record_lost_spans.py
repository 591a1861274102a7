"""End to end: a real `tuimeter record` over a fake powercap tree whose counters misbehave
while a background thread spends a known constant power (issue 21, items 3 to 6). Each test
states the truth in joules and checks the rows a reader filters on: a row that says
``measured`` is the truth of its own interval, a lost span says so and why, the machine
total neither spikes nor passes an incomplete sum off as the machine's.

The scenarios are functions (``lost_package``, ``stopped_recorder``, ``jumping_counter``)
so that the figures can be taken from any checkout (issue 21's note)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for
from tests.test_record_cli import start_record
from tests.test_record_faults import ConstantDriver

#: 1 J-ish units and a 98.8 J range (2**32 × 23 nJ): a counter that wraps every 2 s at
#: 50 W; with a 50 W limit (ceiling 100 W) a gap longer than 0.49 s cannot be bridged
FAST_UNIT_NJ = 23
FAST_LIMIT = (("long_term", 50_000_000, 999_424),)


def recording(tmp_path: Path, fake: FakePowercap, interval_s: float) -> tuple:
    """(process, session file) of `tuimeter record` at ``interval_s``, once its first tick
    is in."""
    out = tmp_path / "run.csv"
    return start_record(tmp_path, fake, out, interval_s), out


def ticks(out: Path, n: int, what: str) -> None:
    start = count_totals(out)
    wait_for(lambda: count_totals(out) >= start + n, what=what)


def finish(proc, out: Path, at_a_tick: bool = False) -> pd.DataFrame:
    """Stop the recorder (just after a tick when ``at_a_tick``: the last tick is then a
    sliver) and read its file."""
    try:
        if at_a_tick:
            ticks(out, 1, "a tick to stop after")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return pd.read_csv(out, keep_default_na=False, na_values=[""])


def rows(df, kind: str, domain: str | None = None):
    sel = df[df.kind == kind]
    return sel if domain is None else sel[sel.domain == domain]


def lost_package(tmp_path: Path) -> tuple[pd.DataFrame, dict]:
    """Two sockets (package 60 W and 45 W, DRAM 5 W each) at 0.5 s; package-1's energy_uj
    reads junk text for 5 ticks (2.5 s), then true again; stopped just after a tick, the
    load still on.
    Returns (the rows, {key: joules spent while recording}): the load runs before the
    recorder's first reading and after its last, so the truth is each constant power
    times the session's span (its last row's ``elapsed_s``, from the first reading), not
    the joules the fake advanced while the test waited (under load the recorder's start
    and stop lag the test by tenths of a second)."""
    fake = FakePowercap(tmp_path / "sys").intel_server(sockets=2)
    watts = {"package-0": 60.0, "package-1": 45.0, "package-0/dram": 5.0,
             "package-1/dram": 5.0}
    driver = ConstantDriver(fake, watts)
    driver.start()
    try:
        proc, out = recording(tmp_path, fake, 0.5)
        ticks(out, 4, "clean ticks")
        fake.show("package-1", "junk\n")
        ticks(out, 5, "ticks while package-1 reads junk")
        fake.clear("package-1")
        ticks(out, 4, "ticks after it")
        df = finish(proc, out, at_a_tick=True)  # under load: the last sliver has joules
        span_s = float(rows(df, "total").elapsed_s.max())
        truth = {k: w * span_s for k, w in watts.items()}
    finally:
        driver.halt.set()
        driver.join()
    return df, truth


def test_total_around_a_lost_package_neither_spikes_nor_passes_for_the_machine(tmp_path):
    """A package lost 2.5 s, then bridged (issue 21 item 3). Old: the total's power in the
    bridging tick was all the bridged joules over one interval (about 3x the clean ticks'
    power), and while the package was lost the total said plain ``measured`` at the other
    domains' 70 W. Now the bridging tick's total is the sum of the domains' powers (within
    30% of the clean ticks' median), every total row of a tick in which package-1 is lost
    says ``incomplete: lost package-1``, and the session's total joules are the truth."""
    df, truth = lost_package(tmp_path)
    pkg1 = rows(df, "sample", "package-1")
    total = rows(df, "total").set_index("elapsed_s")
    [bridging] = pkg1[pkg1.label.fillna("").str.startswith("bridged")].elapsed_s
    lost_at = set(pkg1[pkg1.provenance == "lost"].elapsed_s)
    assert len(lost_at) >= 3
    clean = total[(total.label.isna()) & (total.interval_s > 0.4)
                  & (total.power_w > 100)].power_w
    assert len(clean) >= 6
    assert total.power_w[bridging] <= 1.3 * clean.median()
    for el in lost_at:
        assert total.label[el].startswith("incomplete: lost package-1"), el
    assert not any(str(lbl).startswith("incomplete") for el, lbl in total.label.items()
                   if el not in lost_at)
    assert "with bridged package-1" in total.label[bridging]
    assert total.energy_j.sum() == pytest.approx(sum(truth.values()), rel=2e-2)
    assert pkg1.energy_j.sum() == pytest.approx(truth["package-1"], rel=2e-2)


def test_last_partial_tick_has_no_power(tmp_path):
    """The last tick of a session stopped just after a tick is a sliver (issue 21 item 4;
    old: its power was energy over a few ms, hundreds of W on a 120 W machine). A tick
    shorter than 0.1 s (and half the interval) counts its energy but gives no power: empty
    ``power_w`` and a ``partial`` label on its sample and total rows; every power shown is
    at most 1.5 x the machine's 115 W."""
    df, _ = lost_package(tmp_path)
    total, samples = rows(df, "total"), rows(df, "sample")
    short = total[(total.interval_s > 0) & (total.interval_s < 0.1)]
    if short.empty:  # a loaded machine stopped it late: then no sliver to check
        pytest.skip("the recorder's last tick was not shorter than 0.1 s this time")
    assert short.power_w.isna().all()
    assert short.label.str.contains("partial").all()
    last = samples[samples.elapsed_s == short.elapsed_s.iloc[-1]]
    assert last.power_w.isna().all() and last.energy_j.notna().all()
    assert last.label.str.startswith("partial").all()
    assert total.power_w.max() <= 1.5 * 115.0
    assert samples[samples.in_total == 1].power_w.max() <= 1.5 * 60.0


def stopped_recorder(tmp_path: Path) -> tuple[pd.DataFrame, float, list[str]]:
    """A package whose counter wraps every 2 s at 50 W (98.8 J range), `record --interval
    2`, the recorder stopped (SIGSTOP) for 1.5 s just after a tick, inside the interval
    (issue 21 item 5). Returns (the rows, the package's watts, the report's JSON)."""
    fake = FakePowercap(tmp_path / "sys")
    fake.add_zone("intel-rapl:0", "package-0", FAST_UNIT_NJ, FAST_LIMIT)
    proc, out = recording(tmp_path, fake, 2.0)
    driver = ConstantDriver(fake, {"package-0": 50.0})
    try:
        driver.start()
        ticks(out, 2, "clean ticks")
        ticks(out, 1, "the tick before the stop")
        proc.send_signal(signal.SIGSTOP)
        try:
            start_j = fake.advanced_j("package-0")
            wait_for(lambda: fake.advanced_j("package-0") >= start_j + 75.0,
                     what="1.5 s of energy spent while the recorder is stopped")
        finally:
            proc.send_signal(signal.SIGCONT)
        ticks(out, 3, "ticks after the stop")
    finally:
        driver.halt.set()
        driver.join()
    df = finish(proc, out)
    report = subprocess.run(tuimeter("report", "--format", "json", str(out)), cwd=ROOT,
                            env=env_for(tmp_path), capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    return df, 50.0, report.stdout


def test_gap_inside_an_interval_is_lost_not_measured(tmp_path):
    """Old: the interval holding the 1.5 s stop said ``measured`` with the joules read
    before and after the gap (31 J where the truth was 101 J), the report and the totals
    counted it as measured, and the event said 'longer than the 0 s'. Now every
    ``measured`` row is the truth of its own interval (50 W x interval_s, within 20%: the
    driver thread's own jitter), the interval holding the gap is ``lost`` with a label
    saying why, the report holds that lost time, and the event names the real limit."""
    df, watts, report = stopped_recorder(tmp_path)
    pkg = rows(df, "sample", "package-0")
    # from the second tick on: the driver starts once the first is in (its truth is 0 J)
    measured = pkg[(pkg.provenance == "measured") & (pkg.interval_s > 1.0)].iloc[1:]
    assert len(measured) >= 4
    ratio = measured.energy_j / (watts * measured.interval_s)
    assert ratio.between(0.8, 1.2).all(), list(zip(measured.elapsed_s, measured.energy_j))
    gaps = pkg[pkg.label.fillna("").str.startswith("gap")]
    assert len(gaps) >= 1 and (gaps.provenance == "lost").all() and gaps.energy_j.isna().all()
    [event] = [e for e in rows(df, "event", "package-0").label if e.startswith("gap")]
    assert "the 0 s" not in event and "0.494 s" in event, event
    assert json.loads(report)  # the report reads the file
    assert '"lost_s"' in report
    assert max(_lost_values(json.loads(report))) >= 1.5  # the interval holding the gap


def _lost_values(obj):
    """Every ``lost_s`` in the report's JSON."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "lost_s" and isinstance(v, (int, float)):
                yield v
            else:
                yield from _lost_values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _lost_values(v)


def jumping_counter(tmp_path: Path) -> tuple[pd.DataFrame, float]:
    """A client package at 40 W recorded at 0.5 s for about 8 s; its counter jumps 100 kJ
    forward for good (not energy) after 6 ticks (issue 21 item 6). Returns (the rows, the
    joules spent while recording)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    fake.set_energy_uj("package-0", 10_000_000_000)
    proc, out = recording(tmp_path, fake, 0.5)
    driver = ConstantDriver(fake, {"package-0": 40.0})
    try:
        before = fake.advanced_j("package-0")
        driver.start()
        ticks(out, 6, "ticks before the jump")
        fake.jump("package-0", 100_000.0)
        ticks(out, 10, "ticks after the jump")
    finally:
        driver.halt.set()
        driver.join()
    truth = fake.advanced_j("package-0") - before
    ticks(out, 1, "a quiet tick")
    return finish(proc, out), truth


def test_a_bogus_jump_costs_one_interval_estimated_within_half_a_percent(tmp_path):
    """Old: the jump was rejected but two intervals were lost (-3.7% to -4.6% of a 16 s
    session). Now one interval is lost, and the next carries an estimate of it at the
    powers around it: provenance ``interpolated``, label 'bridged ...; first ... s
    interpolated', so the session is within 0.5% of the truth and says which seconds are
    estimated; the report still reads the file."""
    df, truth = jumping_counter(tmp_path)
    pkg = rows(df, "sample", "package-0")
    assert (pkg.provenance == "lost").sum() == 1
    [est] = pkg[pkg.provenance == "interpolated"].itertuples()
    [lost] = pkg[pkg.provenance == "lost"].itertuples()
    assert est.label.startswith("bridged ") and "interpolated" in est.label
    first_s = float(est.label.split("first ")[1].split()[0])
    assert first_s == pytest.approx(lost.interval_s, abs=1e-3)
    assert pkg.energy_j.sum() == pytest.approx(truth, rel=5e-3)
    assert rows(df, "total").energy_j.sum() == pytest.approx(truth, rel=5e-3)
    assert [e.split(":")[0] for e in rows(df, "event", "package-0").label] == ["rejected",
                                                                              "reset"]
