"""CounterTracker's safety rules at their limits (``tuimeter/sensors/base.py``): every
sensor that reads a wrapping energy counter (RAPL, AMD SMI) feeds it through one tracker,
so these rules are the heart of "the numbers are right". Each row of the boundary table
sits just under or just over one limit and states the truth in joules: what the counter
really did, and so what must be counted.

The small counter of the table: a range of 1000 units of 1 J, a ceiling of 10 W, so

* half the range is 500 J (a step of more cannot be told from a wrap the other way);
* the hard bound is 10 x the ceiling, 100 W: a step may count 100 W x max(gap, 0.1 s)
  + 4 units (104 J over 1 s, 14 J over 0.01 s);
* the gap limit is range / ceiling / 2 = 50 s (a longer silence may hide wraps);
* a read of exactly 0 after a non-zero one is a failed read, never energy;
* a negative value, or one above the range (999.5 units), is not a reading.
"""

from __future__ import annotations

import pytest

from tuimeter.sensors.base import CounterTracker

RANGE, CEILING_W = 1000.0, 10.0


def tracker() -> CounterTracker:
    return CounterTracker(max_range=RANGE, scale_j=1.0, max_power_w=CEILING_W, unit=1.0)


def feed(t: CounterTracker, reads):
    """Feed (raw, t_s) readings; the steps."""
    return [t.update(raw, t_s) for raw, t_s in reads]


#: (case, readings (raw units, t s), the last step's kind, joules counted, the truth in J)
BOUNDARIES = [
    # half the range: forward
    ("forward step of half the range counts", [(100, 0), (600, 10)], "", 500.0, 500.0),
    ("forward step just over half the range is no energy", [(100, 0), (601, 10)],
     "rejected", 0.0, 0.0),
    # half the range: across a wrap
    ("wrap of half the range counts", [(900, 0), (400, 10)], "wrap", 500.0, 500.0),
    ("wrap just over half the range is a step back, no energy", [(900, 0), (401, 10)],
     "rejected", 0.0, 0.0),
    ("a one-unit step back is a glitch, not a 999 J wrap", [(900, 0), (899, 10)],
     "rejected", 0.0, 0.0),
    # the hard power bound over 1 s: 100 W x 1 s + 4 units
    ("a step at the hard bound counts", [(100, 0), (204, 1)], "", 104.0, 104.0),
    ("a step just over the hard bound is no energy", [(100, 0), (205, 1)],
     "rejected", 0.0, 0.0),
    ("a wrap at the hard bound counts", [(950, 0), (54, 1)], "wrap", 104.0, 104.0),
    ("a wrap just over the hard bound is no energy", [(950, 0), (55, 1)],
     "rejected", 0.0, 0.0),
    # the bound's floor: a gap under 0.1 s is taken as 0.1 s (10 J + 4 units)
    ("a step at the floored bound counts", [(100, 0), (114, 0.01)], "", 14.0, 14.0),
    ("a step just over the floored bound is no energy", [(100, 0), (115, 0.01)],
     "rejected", 0.0, 0.0),
    # the gap limit, 50 s
    ("a step after exactly the gap limit is bridged by the counter", [(100, 0), (400, 50.0)],
     "", 300.0, 300.0),
    ("just over the gap limit the span is unknown: a new base, 0 J", [(100, 0), (400, 50.01)],
     "gap", 0.0, 0.0),
    # a read of exactly 0
    ("a read of 0 after a non-zero one is a failed read", [(950, 0), (0, 1)],
     "rejected", 0.0, 0.0),
    ("after a failed 0 the next good read bridges it all", [(950, 0), (0, 1), (130, 2)],
     "bridged", 180.0, 180.0),
    ("a counter at 0 that stays at 0 is 0 J, not a failed read", [(0, 0), (0, 1)],
     "", 0.0, 0.0),
    ("a read of 1 unit across the wrap counts", [(950, 0), (1, 1)], "wrap", 51.0, 51.0),
    # negative and above the range
    ("a negative value is not a reading", [(100, 0), (-1, 1)], "rejected", 0.0, 0.0),
    ("a read of 0 is a reading at the start", [(0, 0), (10, 1)], "", 10.0, 10.0),
    ("the top of the range is a reading", [(999, 0), (9, 1)], "wrap", 10.0, 10.0),
    ("a value above the range is not a reading", [(100, 0), (1000, 1)],
     "rejected", 0.0, 0.0),
    # a counter that restarted: rejected, then a plausible step forward from that value
    ("a reset counts from its first value on", [(900, 0), (500, 1), (550, 2)],
     "reset", 50.0, 50.0),
    ("a stuck bad value is not a reset", [(900, 0), (500, 1), (500, 2)],
     "rejected", 0.0, 0.0),
    ("a bad value then the counter's own is bridged, not a reset",
     [(900, 0), (500, 1), (960, 2)], "bridged", 60.0, 60.0),
]


@pytest.mark.parametrize("case,reads,kind,counted_j,truth_j", BOUNDARIES,
                         ids=[b[0] for b in BOUNDARIES])
def test_boundary(case, reads, kind, counted_j, truth_j):
    """Each limit, just under and just over: the step's kind, and the joules counted are
    the truth's (to a millijoule)."""
    t = tracker()
    steps = feed(t, reads)
    assert steps[-1].kind == kind, steps
    assert t.energy_j == pytest.approx(truth_j, abs=1e-3) and counted_j == truth_j
    if kind == "rejected":
        assert steps[-1].energy_j is None and steps[-1].detail


def test_limits_of_the_small_counter():
    """The figures the table is built on (a mutated constant shows up here too)."""
    t = tracker()
    assert t.gap_limit_s() == pytest.approx(50.0)
    assert t.safe_interval_s() == pytest.approx(12.5)  # an eighth of the range at 10 W
    assert t.budget_j(1.0) == pytest.approx(104.0)
    assert t.budget_j(0.01) == pytest.approx(14.0)
    assert CounterTracker(0, 1.0, 10.0).gap_limit_s() is None  # no range: no wraps known


def test_intel_glitch_after_200_s_is_not_a_262_kj_wrap():
    """An Intel package counter (range 262,143,328,850 µJ, ceiling 234 W) read again after
    200 s one unit lower (a glitch): across a wrap that would be 262,143 J, within the hard
    bound over 200 s (468 kJ), so only the half-range check refuses it. Truth: 0 J; the
    next good reading, 200 s later at 50 W, bridges 10,000 J (the span since the last good
    reading)."""
    modulus = 262143328850 + 262143328850 / 0xFFFFFFFF
    t = CounterTracker(modulus, 1e-6, 234.0, unit=modulus / 2**32)
    feed(t, [(100_000_000_000, 0.0)])
    glitch = t.update(100_000_000_000 - 61, 200.0)
    assert (glitch.kind, t.energy_j) == ("rejected", 0.0)
    step = t.update(100_000_000_000 + 10_000_000_000, 400.0)
    assert (step.kind, t.energy_j) == ("bridged", pytest.approx(10_000.0))


def test_a_3000_j_step_in_1_s_is_refused_on_a_dram_zone():
    """A server DRAM zone (range 65,712,999,613 µJ, ceiling 30 W: hard bound 300 W) read
    3,000 J higher 1 s later: no DRAM draws 3 kW, so it is refused (truth: 0 J; at a bound
    ten times higher it would pass); the next reading, 299 J above the last good one after
    1 s, is within the bound and bridged."""
    modulus = 65712999613 + 65712999613 / 0xFFFFFFFF
    t = CounterTracker(modulus, 1e-6, 30.0, unit=modulus / 2**32)
    feed(t, [(1_000_000_000, 0.0)])
    assert t.update(1_000_000_000 + 3_000_000_000, 1.0).kind == "rejected"
    assert t.energy_j == 0.0
    assert t.update(1_000_000_000 + 299_000_000, 1.0).kind == "bridged"
    assert t.energy_j == pytest.approx(299.0)


def test_gap_event_names_its_limit():
    """The gap's text names the real limit, not 'the 0 s' (issue 21 item 5)."""
    t = CounterTracker(100.0, 1.0, 100.0, unit=1.0)  # gap limit 0.5 s
    feed(t, [(10, 0.0)])
    step = t.update(20, 1.5)
    assert step.kind == "gap" and step.span_s == pytest.approx(1.5)
    assert "for 1.5 s" in step.detail and "the 0.5 s" in step.detail


def test_reset_says_where_its_new_base_is():
    """A reset's step counts from the first value after the restart and says when that was
    and what had been counted by then, so the engine loses only the span before it."""
    t = tracker()
    feed(t, [(900, 0.0), (500, 1.0)])
    step = t.update(550, 2.0)
    assert (step.kind, step.base_t_s, step.base_energy_j, step.energy_j) == (
        "reset", 1.0, 0.0, 50.0)
    assert step.span_s == pytest.approx(1.0)  # lost: from the last good reading to the base


def test_default_unit_is_a_32_bit_counters_step_and_no_range_means_units_of_one():
    """Without ``unit``, one step is the modulus / 2**32 (a 32-bit counter); without a range
    it is 1 (nothing wraps then: a step back is no energy). The slack of 4 units rides on
    the hard bound: 104 J over 1 s counts, 105 J does not, in both."""
    wide = CounterTracker(max_range=2.0**32, scale_j=1.0, max_power_w=CEILING_W)
    assert wide.unit == 1.0
    none = CounterTracker(max_range=0, scale_j=1.0, max_power_w=CEILING_W)
    assert (none.unit, none.wraps, none.safe_interval_s()) == (1.0, False, None)
    for t in (wide, none):
        feed(t, [(100, 0.0)])
        assert t.update(205, 1.0).kind == "rejected"
        assert t.update(204, 1.0).kind == "bridged" and t.energy_j == pytest.approx(104.0)
    assert none.update(150, 2.0).kind == "rejected"  # back, and no wrap to explain it


@pytest.mark.parametrize("digits,shown", [(24, "1" + "0" * 23), (25, "100000000000...(25 digits)")])
def test_a_huge_value_is_shown_whole_up_to_24_digits(digits, shown):
    """A broken file can hold hundreds of digits: the event text shows at most 24
    characters of it (longer: the first 12 and the count)."""
    t = tracker()
    step = t.update(10 ** (digits - 1), 0.0)
    assert step.kind == "rejected" and step.detail == f"{shown} is above max_energy_range_uj"
