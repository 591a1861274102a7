"""energy_between: the one phase integrator, with the truth in joules for each case."""

from __future__ import annotations

import pytest

from tuimeter.phases import Samples, combine, energy_between, provenance


def ticks(*energies_j, start=0.0, interval=1.0, prov="measured", in_total=True, g_per_j=0.0):
    """A domain ticking every ``interval`` s from ``start``; None is a lost tick."""
    s = Samples(in_total, {prov}, g_per_j)
    for i, e in enumerate(energies_j):
        t1 = start + (i + 1) * interval
        if e is None:
            s.add_lost(t1, interval)
        else:
            s.add(t1, interval, e)
    return s


def test_phase_inside_one_tick_is_that_ticks_power_times_its_duration_interpolated():
    pe = energy_between({"pkg": ticks(45.0)}, 0.4, 0.5)
    assert pe.energy_j == pytest.approx(4.5)  # 45 W x 0.1 s
    assert pe.provenance == "interpolated" and pe.domains["pkg"].whole_ticks == 0


def test_phase_across_several_ticks_cuts_its_edges_by_time():
    """Ticks of 10, 20, 30, 40 J; [0.5, 3.25] holds half of the first, the second and
    third whole and a quarter of the fourth: 5 + 20 + 30 + 10 = 65 J."""
    pe = energy_between({"pkg": ticks(10.0, 20.0, 30.0, 40.0)}, 0.5, 3.25)
    assert pe.energy_j == pytest.approx(65.0)
    assert pe.provenance == "measured" and pe.domains["pkg"].whole_ticks == 2
    assert pe.lost_s == 0.0


def test_phase_straddling_a_lost_interval_counts_what_was_read_and_says_how_long_was_lost():
    s = ticks(10.0, None, 30.0)
    pe = energy_between({"pkg": s}, 0.0, 3.0)
    assert pe.energy_j == pytest.approx(40.0) and pe.lost_s == pytest.approx(1.0)
    assert pe.provenance == "measured"
    cut = energy_between({"pkg": s}, 0.5, 2.5)  # half of each tick, half the lost one
    assert cut.energy_j == pytest.approx(5.0 + 15.0) and cut.lost_s == pytest.approx(1.0)
    assert cut.provenance == "interpolated"
    inside = energy_between({"pkg": s}, 1.2, 1.8)
    assert inside.energy_j == 0.0 and inside.lost_s == pytest.approx(0.6)
    assert inside.provenance == "lost"


def test_bridged_span_spreads_its_energy_over_the_lost_ticks_it_covers():
    """Lost at ticks 2 and 3, then a reading bridged over 3 s with 90 J (30 W): nothing
    is lost any more, and a phase inside the span gets 30 W x its time."""
    s = ticks(10.0, None, None)
    s.add(4.0, 3.0, 90.0)
    assert list(s.lost_t1) == []
    pe = energy_between({"pkg": s}, 0.0, 2.5)
    assert pe.energy_j == pytest.approx(10.0 + 45.0) and pe.lost_s == 0.0
    assert pe.provenance == "measured"
    inside = energy_between({"pkg": s}, 1.5, 2.5)
    assert inside.energy_j == pytest.approx(30.0) and inside.provenance == "interpolated"
    assert energy_between({"pkg": s}, 0.0, 4.0).energy_j == pytest.approx(100.0)


def test_empty_phase_and_phase_before_any_data_are_zero():
    s = ticks(10.0, 20.0)
    empty = energy_between({"pkg": s}, 1.0, 1.0)
    assert empty.energy_j == 0.0 and empty.provenance == "interpolated" and empty.lost_s == 0.0
    before = energy_between({"pkg": ticks(10.0, start=5.0)}, 0.0, 2.0)
    assert before.energy_j == 0.0 and before.provenance == "interpolated"
    assert energy_between({}, 0.0, 1.0).energy_j == 0.0


def test_extrapolated_past_the_data_at_the_last_power_and_lost_when_it_ended_lost():
    s = ticks(10.0, 20.0)
    assert energy_between({"pkg": s}, 1.0, 3.5).energy_j == pytest.approx(20.0)  # not asked
    pe = energy_between({"pkg": s}, 1.0, 3.5, extrapolate=True)
    assert pe.energy_j == pytest.approx(20.0 + 20.0 * 1.5)
    assert pe.provenance == "interpolated" and pe.domains["pkg"].extrapolated_s == pytest.approx(1.5)
    ended_lost = ticks(10.0, None)
    pe = energy_between({"pkg": ended_lost}, 0.0, 3.0, extrapolate=True)
    assert pe.energy_j == pytest.approx(10.0) and pe.lost_s == pytest.approx(2.0)


def test_total_counts_in_total_domains_with_their_co2_and_kinds():
    pe = energy_between({"pkg": ticks(40.0, 40.0, g_per_j=1e-4),
                         "dram": ticks(5.0, 5.0, prov="estimated", g_per_j=1e-4),
                         "core": ticks(25.0, 25.0, in_total=False)}, 0.0, 2.0)
    assert pe.energy_j == pytest.approx(90.0) and pe.co2_g == pytest.approx(90.0 * 1e-4)
    assert pe.domains["core"].energy_j == pytest.approx(50.0)
    assert pe.provenance == "estimated" and pe.domains["pkg"].provenance == "measured"


def test_sessions_covering_parts_of_the_time_each_count_from_their_clip():
    """Two sessions of one domain: the second counts only after the first ended (4 s),
    its straddling tick cut by time: 4 x 10 + 0.5 x 20 + 2 x 20 = 90 J."""
    first = ticks(10.0, 10.0, 10.0, 10.0)
    second = ticks(20.0, 20.0, 20.0, start=3.5).clipped(4.0)
    pe = energy_between({"pkg": [first, second]}, 0.0, 10.0)
    assert pe.energy_j == pytest.approx(90.0) and pe.domains["pkg"].whole_ticks == 6


def test_a_lump_of_ticks_cut_in_its_first_tick_holds_one_whole_tick_less():
    """A marker reply's lump (2 ticks, 0..2 s) cut at 0.5 s: 1 whole tick is inside."""
    s = Samples(True, {"measured"})
    s.add(2.0, 2.0, 60.0, ticks=2)
    pe = energy_between({"pkg": s}, 0.5, 2.0)
    assert pe.energy_j == pytest.approx(45.0) and pe.domains["pkg"].whole_ticks == 1
    assert pe.provenance == "measured"
    edge = Samples(True, {"measured"})
    edge.add(1.0, 1.0, 30.0, ticks=0)  # energy, but no whole tick
    assert energy_between({"pkg": edge}, 0.0, 1.0).provenance == "interpolated"


def test_provenance_rule():
    assert provenance(1, {"measured"}) == "measured"
    assert provenance(0, {"measured"}) == "interpolated"
    assert provenance(3, {"measured"}, extrapolated=True) == "interpolated"
    assert provenance(0, set(), lost=True) == "lost"
    assert combine({"measured", "estimated"}) == "estimated"
    assert combine({"estimated", "attributed"}) == "attributed"


def _long_series(n: int, g: bool, overlap_at: int | None = None) -> Samples:
    """``n`` one-second samples of varying power, some with their own carbon figure;
    ``overlap_at``: that sample starts before the one before it starts."""
    s = Samples(True, {"measured"}, 0.1)
    for i in range(n):
        t1, span = 100.0 + i + 1, 1.0
        if i == overlap_at:
            span = 2.5
        s.add(t1, span, 10.0 + (i * 7919 % 13), g_per_j=(0.2 if g and i % 3 == 0 else None))
    return s


@pytest.mark.parametrize("g", [False, True])
@pytest.mark.parametrize("overlap_at", [None, 150])
def test_long_spans_add_their_inner_samples_as_a_slice_with_the_same_result(monkeypatch, g,
                                                                             overlap_at):
    """A span of thousands of samples adds the whole ones as one slice (report speed):
    energy, CO2, whole ticks and provenance are those of the sample-by-sample loop, for
    spans cut inside samples, on their edges, by a clip, and for samples out of order
    (one that starts before the last ended: the loop is kept)."""
    import tuimeter.phases as phases

    s = _long_series(3000, g, overlap_at)
    spans = [(100.0, 3100.0), (150.25, 2999.5), (151.0, 152.0), (99.0, 1500.0),
             (2000.0, 5000.0), (140.3, 140.9), (149.7, 2100.2), (248.7, 400.0)]
    for clip in (-float("inf"), 120.5):
        s.clip = clip
        fast = [energy_between({"d": s}, a, b) for a, b in spans]
        monkeypatch.setattr(phases, "_SLICE_MIN", 10**9)
        slow = [energy_between({"d": s}, a, b) for a, b in spans]
        monkeypatch.undo()
        for f, w in zip(fast, slow):
            assert f.energy_j == pytest.approx(w.energy_j, rel=1e-12)
            assert f.co2_g == pytest.approx(w.co2_g, rel=1e-12)
            assert f.domains["d"].whole_ticks == w.domains["d"].whole_ticks
            assert f.provenance == w.provenance
    assert s.starts_in_order() is (overlap_at is None)


def test_average_power_is_energy_over_time_and_none_where_unknown():
    """The one average-power rule (phases, report rows): J / s, None for an unknown energy
    (None or NaN) or no time."""
    from tuimeter.phases import average_power_w

    assert average_power_w(120.0, 4.0) == pytest.approx(30.0)
    assert average_power_w(0.0, 4.0) == 0.0
    assert [average_power_w(e, d) for e, d in ((None, 4.0), (float("nan"), 4.0),
                                                (120.0, 0.0))] == [None, None, None]


def test_a_zero_span_sample_keeps_the_last_power_for_extrapolation():
    """A sample of no duration (two ticks at one instant) adds its joules but says nothing
    of the power: an extrapolated phase goes on at the power before it (40 W)."""
    s = ticks(40.0, 40.0)
    s.add(2.0, 0.0, 0.0)
    pe = energy_between({"pkg": s}, 0.0, 4.0, extrapolate=True)
    assert pe.energy_j == pytest.approx(160.0) and pe.domains["pkg"].extrapolated_s == 2.0


def test_settled_to_looks_at_the_last_lost_interval_not_the_first():
    """Lost, read, lost: the domain's energy is final only up to its last sample (a later
    bridged reading may still fill the last lost interval); the first lost interval, long
    behind, says nothing."""
    s = ticks(None, 40.0, 40.0, None)
    assert (s.settled_to, s.data_end) == (3.0, 4.0)
    s.add(5.0, 1.0, 40.0)
    assert s.settled_to == 5.0


def test_plain_ticks_then_a_lump_keep_one_whole_tick_each():
    """Plain ticks, then a marker reply's lump of 3 ticks: a phase over the plain ones
    still holds one whole tick per plain sample (2), the lump its 3."""
    s = ticks(40.0, 40.0)
    s.add(5.0, 3.0, 120.0, ticks=3)
    assert energy_between({"pkg": s}, 0.0, 2.0).domains["pkg"].whole_ticks == 2
    assert energy_between({"pkg": s}, 0.0, 5.0).domains["pkg"].whole_ticks == 5
