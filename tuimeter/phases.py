"""Energy between two instants, and how sure it is: the one phase integrator.

A :class:`~tuimeter.api.Meter` phase (own mode: from its ticks; attached: from the
cumulative energies a session returns with each marker) and a ``report`` segment are
all computed here, by :func:`energy_between`, and labelled by :func:`provenance`.
docs/PHASES.md describes each case.

Samples are per domain (:class:`Samples`): sample *i* covers ``(t1[i] - iv[i], t1[i]]``
with ``e[i]`` joules, drawn at constant power within it (the piecewise-constant model:
a sample that a phase cuts counts in proportion to the time inside). A bridged sample
(a counter that ran on while its reads failed) simply spans the lost ticks it covers.
Lost intervals (the domain could not be read and nothing bridged them) are kept apart:
they carry no energy, and a phase reports how many seconds of them it holds.

This module is pure computation: no I/O, no engine, no UI.
"""

from __future__ import annotations

import bisect
import math
import operator
from array import array
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

MEASURED = "measured"
ESTIMATED = "estimated"
INTERPOLATED = "interpolated"
LOST = "lost"
#: tolerance (s) when a bridged sample takes the lost intervals it covers
_SPAN_EPS_S = 1e-6
#: how often each source's energy counter updates, s (SENSORS.md: NVML's about every
#: 100 ms, a window shorter than that reads 0; RAPL's about every 1 ms). ``tuimeter
#: doctor`` measures it on a machine (``update_period_s``).
#: The node meters (docs/node-power.md): an ACPI power meter averages over its
#: ``power1_average_interval`` (often 1 s; its label says), DCMI and Redfish BMCs update
#: about once a second, pm_counters at ``raw_scan_hz`` (10 Hz); a rest-of-node row
#: (``hwmon:rest``) has its platform meter's period.
UPDATE_PERIOD_S = {"nvml": 0.1, "rapl": 0.001, "hwmon": 1.0, "pm_counters": 0.1, "ipmi": 1.0,
                   "redfish": 1.0}
#: a phase shorter than this many updates of a counted domain's counter is
#: ``interpolated``: the counter may not have moved inside it, or moved for time outside
FEW_UPDATES = 3


#: where a period from :data:`UPDATE_PERIOD_S` comes from (``Samples.update_note``)
NOMINAL = "nominal"


def source_kind(source: str) -> str:
    """The counter kind of a domain's source: ``rapl:one-core`` is ``rapl``."""
    return source.split(":", 1)[0]


def update_period_s(source: str) -> float:
    """The nominal update period of a source's counter, s (0: none known;
    ``rapl:one-core`` is RAPL's); :meth:`Samples.set_update_period` prefers the one
    ``tuimeter doctor`` measured on the host."""
    return UPDATE_PERIOD_S.get(source_kind(source), 0.0)


def short_reason(period_s: float, note: str | None) -> str:
    """Why a short phase is ``interpolated``, in words: ``counter updates every 100 ms,
    measured by doctor on 2026-12-01`` (``note``: :attr:`Samples.update_note`)."""
    return f"counter updates every {period_s * 1e3:.3g} ms, {note or NOMINAL}"


class Samples:
    """One domain's samples, in time order, and its lost intervals.

    ``in_total``: the domain counts in the machine total. ``provs``: the provenance of
    its readings (``measured``, ``estimated``). ``g_per_j``: grams CO2e per joule of
    this series; ``g``: per sample instead, once a sample came with another figure (a
    live carbon source: each tick's own), else None. ``clip``: time before it is not
    counted (an earlier session of the same host already covered it). ``tail_w``: the
    power carried past the end of the data when a phase is extrapolated (:meth:`add`
    sets the last sample's power, :meth:`add_lost` None: a domain that ended lost stays
    lost). ``ticks``: how many whole ticks each sample holds; None when each is one
    tick (a lump of several ticks, or an edge that is part of a tick, comes from a
    marker reply).
    """

    __slots__ = ("t1", "iv", "e", "ticks", "g", "lost_t1", "lost_iv", "in_total", "provs",
                 "g_per_j", "clip", "tail_w", "_ordered", "update_s", "update_note")

    def __init__(self, in_total: bool = True, provs: Iterable[str] = (),
                 g_per_j: float = 0.0):
        self.t1 = array("d")  # end of each sample, s
        self.iv = array("d")  # its span, s (a bridged sample spans the lost ticks before it)
        self.e = array("d")  # energy within it, J
        self.ticks: array | None = None
        self.g: array | None = None  # g CO2e per J of each sample (None: g_per_j for all)
        self.lost_t1 = array("d")  # lost intervals: their ends and spans
        self.lost_iv = array("d")
        self.in_total = in_total
        self.provs: set[str] = set(provs)
        self.g_per_j = g_per_j
        self.clip = -math.inf
        self.tail_w: float | None = None
        self._ordered: tuple[int, bool] | None = None  # (samples, starts in order) cached
        #: how often the domain's counter updates, s (0: unknown; :data:`UPDATE_PERIOD_S`)
        self.update_s = 0.0
        #: where ``update_s`` comes from: :data:`NOMINAL`, or ``measured by doctor on
        #: <date>`` (:mod:`tuimeter.periods`)
        self.update_note = NOMINAL

    def set_update_period(self, source: str, measured=None) -> None:
        """Take the update period of ``source``'s counter: ``measured``
        (:class:`tuimeter.periods.MeasuredPeriods`, this host's) where it has one for the
        kind, else the nominal one."""
        kind = source_kind(source)
        if measured is not None and kind in measured.periods_s:
            self.update_s, self.update_note = measured.periods_s[kind], measured.note
        else:
            self.update_s, self.update_note = update_period_s(source), NOMINAL

    def take_update_period(self, other: "Samples | None") -> None:
        """The period of ``other``'s counter (an own share of a machine domain: that
        domain's counter); none known without it."""
        if other is None:
            self.update_s, self.update_note = 0.0, NOMINAL
        else:
            self.update_s, self.update_note = other.update_s, other.update_note

    def add(self, t1_s: float, span_s: float, energy_j: float,
            ticks: float | None = None, g_per_j: float | None = None) -> None:
        """A sample ending at ``t1_s``. When it spans lost intervals recorded before it
        (a bridged reading), its energy covers them: they are no longer lost.
        ``g_per_j``: its own g CO2e per J (None: the series')."""
        while self.lost_t1 and self.lost_t1[-1] > t1_s - span_s + _SPAN_EPS_S:
            self.lost_t1.pop()
            self.lost_iv.pop()
        if ticks is not None and self.ticks is None:
            self.ticks = array("d", [1.0] * len(self.t1))
        if self.ticks is not None:
            self.ticks.append(1.0 if ticks is None else ticks)
        if g_per_j is not None and self.g is None and g_per_j != self.g_per_j:
            self.g = array("d", [self.g_per_j] * len(self.t1))
        if self.g is not None:
            self.g.append(self.g_per_j if g_per_j is None else g_per_j)
        self.t1.append(t1_s)
        self.iv.append(span_s)
        self.e.append(energy_j)
        self.tail_w = energy_j / span_s if span_s > 0 else self.tail_w

    def add_lost(self, t1_s: float, span_s: float) -> None:
        """An interval ending at ``t1_s`` in which the domain could not be read."""
        self.lost_t1.append(t1_s)
        self.lost_iv.append(span_s)
        self.tail_w = None

    @property
    def data_end(self) -> float:
        """The end of the data: the last sample or lost interval (-inf when none)."""
        return max(self.t1[-1] if self.t1 else -math.inf,
                   self.lost_t1[-1] if self.lost_t1 else -math.inf)

    @property
    def settled_to(self) -> float:
        """Up to when this domain's energy is final: the end of the data, or, when it
        ends lost, the end of its last sample (a bridged reading may still fill the
        lost time after it)."""
        last = self.t1[-1] if self.t1 else -math.inf
        return last if self.lost_t1 and self.lost_t1[-1] > last else self.data_end

    def clipped(self, clip: float) -> "Samples":
        """The same samples (shared, not copied), counted only after ``clip``."""
        out = Samples(self.in_total, self.provs, self.g_per_j)
        out.t1, out.iv, out.e, out.ticks, out.g = self.t1, self.iv, self.e, self.ticks, self.g
        out.lost_t1, out.lost_iv, out.tail_w = self.lost_t1, self.lost_iv, self.tail_w
        out.clip, out.update_s, out.update_note = clip, self.update_s, self.update_note
        if len(self.t1) > _SLICE_MIN:  # checked once here, for every clipped copy
            self.starts_in_order()
        out._ordered = self._ordered
        return out

    def note_appended(self, n0: int, in_order: bool) -> None:
        """Samples from index ``n0`` on were appended in bulk, ``in_order`` among
        themselves (the caller checked it, vectorized): the order check of
        :meth:`starts_in_order` is extended to them without a pass over the rest."""
        if n0 == 0:
            before = True
        elif self._ordered is not None and self._ordered[0] == n0:
            before = self._ordered[1] and (self.t1[n0 - 1] - self.iv[n0 - 1]
                                           <= self.t1[n0] - self.iv[n0])
        else:  # not known: checked when needed
            return
        self._ordered = (len(self.t1), before and in_order)

    def starts_in_order(self) -> bool:
        """Each sample starts no earlier than the one before (as a recording's do): then
        the samples wholly inside a span are one slice, which :func:`_integrate` adds in
        C. Checked once per length (C-speed maps, no copy), not trusted; samples appended
        since the last check are checked from the last one checked (samples are only
        ever appended, or dropped by :meth:`drop_before`, which forgets the check)."""
        n = len(self.t1)
        done = self._ordered
        if done is None or done[0] != n:
            if done is not None and 0 < done[0] < n:  # appended since: check the new ones
                ok = done[1] and _in_order(self.t1[done[0] - 1:], self.iv[done[0] - 1:])
            else:
                ok = _in_order(self.t1, self.iv)
            self._ordered = (n, ok)
        return self._ordered[1]

    def drop_before(self, t: float) -> None:
        """Forget the samples and lost intervals that end at or before ``t``."""
        k = bisect.bisect_right(self.t1, t)
        for arr in (self.t1, self.iv, self.e, self.ticks, self.g):
            if arr is None:
                continue
            del arr[:k]
        k = bisect.bisect_right(self.lost_t1, t)
        del self.lost_t1[:k]
        del self.lost_iv[:k]
        self._ordered = None


@dataclass
class DomainEnergy:
    """One domain over a phase."""

    energy_j: float
    co2_g: float
    in_total: bool
    provenance: str
    lost_s: float = 0.0  # time within the phase when this domain could not be read
    whole_ticks: float = 0.0  # ticks lying entirely inside the phase
    extrapolated_s: float = 0.0  # time past the end of the data, at its last power
    #: the counter's update period when the phase is shorter than FEW_UPDATES of them
    #: (then ``interpolated``), else None
    short_of_s: float | None = None
    #: where ``short_of_s`` comes from (:attr:`Samples.update_note`), else None
    short_note: str | None = None


@dataclass(frozen=True)
class PhaseEnergy:
    """A phase's energy: per domain, and the machine total (domains with ``in_total``)."""

    t0_s: float
    t1_s: float
    energy_j: float
    co2_g: float
    provenance: str
    lost_s: float  # the longest a counted domain was lost within the phase
    domains: dict = field(default_factory=dict)  # domain id -> DomainEnergy
    #: the longest update period of a counted counter the phase is too short for (then
    #: ``interpolated``: fewer than FEW_UPDATES updates inside it), else None
    update_period_s: float | None = None
    #: where that period comes from: ``nominal`` or ``measured by doctor on <date>``
    update_period_note: str | None = None


def average_power_w(energy_j: float | None, duration_s: float) -> float | None:
    """Average power over ``duration_s`` seconds, W: energy / time; None where the
    energy is unknown (None or NaN) or no time has passed."""
    if energy_j is None or energy_j != energy_j or duration_s <= 0:
        return None
    return energy_j / duration_s


def combine(provs: Iterable[str]) -> str:
    """The provenance of a sum: ``measured`` when every part is; ``estimated`` when
    some part is estimated and none is anything else; else the first other kind by
    name (``attributed``, ...)."""
    kinds = set(provs) - {MEASURED}
    if not kinds:
        return MEASURED
    return ESTIMATED if kinds <= {ESTIMATED} else sorted(kinds)[0]


def provenance(whole_ticks: float, provs: Iterable[str], *, extrapolated: bool = False,
               lost: bool = False, short: bool = False) -> str:
    """The one provenance rule for an energy over a span of time.

    ``lost`` when nothing was read in it (only lost time); ``interpolated`` when no
    whole tick lies inside it (a phase shorter than a tick, or one that straddles a tick
    edge without holding a tick: its energy is apportioned from cut ticks), when part
    of it is extrapolated past the data, or when it is ``short``: shorter than
    :data:`FEW_UPDATES` updates of the counter (NVML's 100 ms); else :func:`combine` of
    the readings' kinds.
    """
    if lost:
        return LOST
    if whole_ticks <= 0 or extrapolated or short:
        return INTERPOLATED
    return combine(provs)


#: spans holding more samples than this add their inner samples as one slice
_SLICE_MIN = 64
#: a slice of samples is added in blocks of this many, aligned on the series' first
#: sample (each block added alone, then the blocks' sums in order): the same sum whether
#: the series is in memory or kept a block at a time out of it (``tuimeter report`` over
#: a long session: :mod:`tuimeter.session.spill`, whose blocks are these)
SUM_BLOCK = 8192


def _in_order(t1s, ivs) -> bool:
    """Each start ``t1 - iv`` no earlier than the one before (a block at a time: memory
    of one block, whatever the length)."""
    last = -math.inf
    for k in range(0, len(t1s), SUM_BLOCK):
        starts = array("d", map(operator.sub, t1s[k:k + SUM_BLOCK], ivs[k:k + SUM_BLOCK]))
        if starts[0] < last or not all(map(operator.le, starts, starts[1:])):
            return False
        last = starts[-1]
    return True


def _bisect_right(seq, x: float, lo: int = 0) -> int:
    """``bisect.bisect_right``, or the sequence's own (one kept in blocks, which finds
    the block first)."""
    own = getattr(seq, "bisect_right", None)
    return bisect.bisect_right(seq, x, lo) if own is None else own(x, lo)


def range_sum(es, k: int, j: int) -> float:
    """The sum of ``es[k:j]``, block by block (:data:`SUM_BLOCK`), or the sequence's own
    (the same sums, kept per block)."""
    own = getattr(es, "range_sum", None)
    if own is not None:
        return own(k, j)
    total = 0.0
    while k < j:
        b = min((k // SUM_BLOCK + 1) * SUM_BLOCK, j)
        total += sum(es[k:b])
        k = b
    return total


def _inside(s: Samples, a: float, t1: float, i: int) -> tuple:
    """(energy, co2, whole ticks, read, next index) of the samples from ``i`` that end
    by ``t1``, starts in order (:meth:`Samples.starts_in_order`): those cut at ``a``
    (a prefix) one by one, the rest as one slice; what :func:`_integrate`'s loop would
    add, in C. Stops, as the loop does, at a sample that starts at or after ``t1``."""
    t1s, ivs, es, gs = s.t1, s.iv, s.e, s.g
    j = _bisect_right(t1s, t1, i)
    while j > i and t1s[j - 1] - ivs[j - 1] >= t1:  # zero-length samples at t1 stop it
        j -= 1
    energy = co2 = 0.0
    k = i
    while k < j and t1s[k] - ivs[k] < a:  # cut at the start
        part = es[k] * ((t1s[k] - a) / ivs[k])
        energy += part
        if gs is not None:
            co2 += part * gs[k]
        k += 1
    energy += range_sum(es, k, j)
    if gs is not None:
        co2 += sum(map(operator.mul, es[k:j], gs[k:j]))
    return energy, co2, float(j - k), j > i, j


def _integrate(s: Samples, t0: float, t1: float, extrapolate: bool) -> tuple:
    """(energy J, CO2e g, whole ticks, lost s, extrapolated s, read) of ``s`` over
    [t0, t1]; ``read``: some sample overlaps the span."""
    a = max(t0, s.clip)
    if not t1 > a:
        return 0.0, 0.0, 0.0, 0.0, 0.0, False
    t1s, ivs, es, ticks, gs = s.t1, s.iv, s.e, s.ticks, s.g
    n = len(t1s)
    energy = whole = co2 = 0.0
    read = False
    i = _bisect_right(t1s, a)
    if ticks is None and n - i > _SLICE_MIN and s.starts_in_order():
        energy, co2, whole, read, i = _inside(s, a, t1, i)
    while i < n:
        end = t1s[i]
        iv = ivs[i]
        start = end - iv
        if start >= t1:
            break
        read = True
        if start >= a and end <= t1:  # entirely inside
            part = es[i]
            whole += 1.0 if ticks is None else ticks[i]
        else:
            frac = (min(end, t1) - max(start, a)) / iv
            part = es[i] * frac
            if ticks is not None:  # a lump's ticks, taken as evenly spaced
                whole += math.floor(ticks[i] * frac + 1e-9)
        energy += part
        if gs is not None:
            co2 += part * gs[i]
        i += 1
    lost = 0.0
    lt1, liv = s.lost_t1, s.lost_iv
    j = bisect.bisect_right(lt1, a)
    while j < len(lt1) and lt1[j] - liv[j] < t1:
        lost += max(0.0, min(lt1[j], t1) - max(lt1[j] - liv[j], a))
        j += 1
    extra = 0.0
    data_end = s.data_end
    if extrapolate and data_end > -math.inf and t1 > max(a, data_end):
        tail = t1 - max(a, data_end)
        if s.tail_w is None:
            lost += tail
        else:
            energy += s.tail_w * tail
            if gs is not None:
                co2 += s.tail_w * tail * (gs[-1] if gs else s.g_per_j)
            extra = tail
    if gs is None:
        co2 = energy * s.g_per_j
    return energy, co2, whole, lost, extra, read


def energy_between(samples: Mapping[str, Samples | Sequence[Samples]], t0_s: float,
                   t1_s: float, *, extrapolate: bool = False) -> PhaseEnergy:
    """Energy per domain and in total over [t0_s, t1_s], with provenance and lost time.

    ``samples``: domain id -> its :class:`Samples`, or several (the sessions that each
    cover part of the time, each from its ``clip``). ``extrapolate``: time past the end
    of a domain's data counts at its ``tail_w`` (a phase not yet ticked); else it counts
    nothing. A domain's energy is never negative.
    """
    domains: dict[str, DomainEnergy] = {}
    kinds: set[str] = set()  # of the counted domains that were read
    for dom, series in samples.items():
        parts = (series,) if isinstance(series, Samples) else tuple(series)
        if not parts:
            continue
        energy = co2 = whole = lost = extra = 0.0
        read = False
        provs: set[str] = set()
        for s in parts:
            e, c, w, ls, x, r = _integrate(s, t0_s, t1_s, extrapolate)
            energy, co2 = energy + e, co2 + c
            whole, lost, extra, read = whole + w, lost + ls, extra + x, read or r
            provs |= s.provs
        is_lost = lost > 0 and not read and extra == 0
        slowest = max(parts, key=lambda s: s.update_s)
        period = slowest.update_s
        short = period if read and 0 < t1_s - t0_s < FEW_UPDATES * period else None
        d = domains[dom] = DomainEnergy(
            max(0.0, energy), max(0.0, co2), parts[0].in_total,
            provenance(whole, provs, extrapolated=extra > 0, lost=is_lost,
                       short=short is not None), lost, whole, extra, short,
            slowest.update_note if short is not None else None)
        if d.in_total and not is_lost:
            kinds |= provs
    counted = [d for d in domains.values() if d.in_total]
    shorts = [d for d in counted if d.short_of_s is not None]
    slow = max(shorts, key=lambda d: d.short_of_s) if shorts else None
    short = slow.short_of_s if slow is not None else None
    prov = provenance(max((d.whole_ticks for d in counted), default=0.0), kinds,
                      extrapolated=any(d.extrapolated_s > 0 for d in counted),
                      lost=bool(counted) and all(d.provenance == LOST for d in counted),
                      short=short is not None)
    return PhaseEnergy(t0_s, t1_s, sum(d.energy_j for d in counted),
                       sum(d.co2_g for d in counted), prov,
                       max((d.lost_s for d in counted), default=0.0), domains, short,
                       slow.short_note if slow is not None else None)
