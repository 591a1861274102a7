"""Energy per phase from session CSVs: segments between markers, merged over files.

**Load** (:func:`load_file`): one streaming pass per file (``csv`` module, no pandas).
Only ``sample`` rows are kept, per (host, session, domain) as three ``array('d')``
(end time, interval, energy): 24 bytes a sample, so a 24-hour 1 s session of 10
domains stays near 20 MB. ``total`` rows are not needed (the total is re-added from
samples with ``in_total``, which is how it was made). Times are wall-clock seconds:
each session's first row fixes ``wall - elapsed_s`` and later rows use ``elapsed_s``
(monotonic inside a session, aligned across files by the clock of each host).

**Merge** (:func:`build_report`): per host, per domain, the sessions that recorded it
are taken in order of start; a session's samples that end before the time already
covered are dropped, a sample straddling it is cut by time. So eight files recorded
together on one host count the machine once, while hosts add up. (A gap inside an
earlier session is not filled from a later one: simple, and never counts twice.) The
parts of one session that ``record --rotate`` wrote to several files are joined end to
end first (:func:`_join_parts`), so they count as the one file they replace.

**Segments**: per host, the markers of all its sessions in time order; a run of
markers with the same label within :data:`MARKER_MERGE_S` (every rank of a job marking
"epoch 2") is one boundary. A sample that spans a boundary is split in proportion to
time; a segment that contains no whole sample is ``interpolated`` (both by
:func:`tuimeter.phases.energy_between`, which computes a :class:`~tuimeter.api.Meter`
phase too). A marker ``end`` from the API (a :class:`~tuimeter.api.Meter` leaving its ``with``) closes its phase: the
time after it until the next marker is the segment :data:`GAP_LABEL`.

**Owners** (``report --by process|job|rank``, :mod:`.owners`): the attribution rows of
that kind are kept per owner like a domain's samples (merged across files the same way),
and each segment gets its owners' energy and an ``unowned`` row (the rest of its total).

**Lost time**: a sample row with no energy (its sensor could not be read) covers lost
time. Per segment and domain ``lost_s`` is that time, and a domain's average power is
its energy over the time it was measured (duration - lost_s).
"""

from __future__ import annotations

import bisect
import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from ..periods import load as load_periods
from ..phases import DomainEnergy, Samples, combine, energy_between
from ..text import safe_text
from ..work import EnergyPer, energy_per
from . import spill
from .owners import OWNER_KINDS, owner_rows
from .reader import READ_KINDS, SessionFormatError, SessionReader
from .schema import (CARBON, DEVICE, MARKER, META_KINDS, SAMPLE, SESSION, WORK, SessionMeta,
                     bridged_span_s, carbon_of, work_of)

#: markers with the same label closer than this (s) on one host are one boundary
MARKER_MERGE_S = 1.0
#: segments shorter than this with no energy (a marker at the very start or end) are dropped
MIN_SEGMENT_S = 1e-3
J_PER_WH = 3600.0
#: parts of one session (``record --rotate``) that meet within this (s) are joined
PART_JOIN_S = 1e-3
#: the segment after an API ``end`` marker, until the next marker
GAP_LABEL = "(between phases)"
#: rows read between two looks for series long enough to keep in blocks (:mod:`.spill`)
SPILL_EVERY = 1 << 16


class _Series(Samples):
    """One domain in one session: parallel arrays of samples (wall-clock s), in time order."""

    __slots__ = ("last_prov", "sid")

    def __init__(self, in_total: bool, sid: tuple):
        super().__init__(in_total)
        self.last_prov = ""
        self.sid = sid

    @property
    def start(self) -> float:
        return self.t1[0] - self.iv[0] if self.t1 else math.inf

    @property
    def end(self) -> float:
        return self.t1[-1] if self.t1 else -math.inf

    def joined(self, later: "_Series") -> "_Series":
        """This series followed by ``later`` (the next part of the same session)."""
        out = _Series(self.in_total, self.sid)
        for name in ("t1", "iv", "e"):  # kept in blocks where either part is
            setattr(out, name, spill.joined(getattr(self, name), getattr(later, name), None))
        for name in ("lost_t1", "lost_iv"):
            getattr(out, name).extend(getattr(self, name))
            getattr(out, name).extend(getattr(later, name))
        out.provs = self.provs | later.provs
        out.last_prov = later.last_prov
        out.g_per_j = self.g_per_j
        out.take_update_period(max((self, later), key=lambda part: part.update_s))
        if self.g is not None or later.g is not None or self.g_per_j != later.g_per_j:
            out.g = array("d")
            for part in (self, later):
                out.g.extend(part.g if part.g is not None else [part.g_per_j] * len(part.t1))
        return out


@dataclass
class SessionData:
    host: str
    session: str
    path: str
    offset: float  # wall-clock s minus elapsed_s
    series: dict = field(default_factory=dict)  # domain -> _Series
    markers: list = field(default_factory=list)  # (t wall s, label, source)
    g_per_j: float | None = None  # from the first sample's co2_g / energy_j
    #: g CO2e/J from the last ``carbon`` row (schema 3: a live source), None before one
    g_now: float | None = None
    #: what the session's first rows say: carbon settings, domains (either schema)
    meta: SessionMeta = field(default_factory=SessionMeta)
    owners: dict = field(default_factory=dict)  # owner key -> _Series (``--by``)
    work: list = field(default_factory=list)  # (t wall s, unit, count): ``work`` rows
    #: the counters' update periods ``tuimeter doctor`` stored for this host, else None
    periods: Any = None
    #: the label of its first ``session`` row in this file (untrusted text), else None
    session_label: str | None = None


@dataclass
class FileResult:
    path: str
    sessions: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    error: str | None = None  # the file could not be used at all
    rows: int = 0


def load_file(path: str, by: str | None = None, device=None) -> FileResult:
    """Read one session file in one pass. Never raises for bad content: rows the reader
    finds malformed are skipped and listed in ``problems``. ``by``: an owner kind
    (:data:`~.owners.OWNER_KINDS`) whose rows are kept too. ``device``: a callable
    given each good ``device`` row, read in the same pass (``--format codecarbon``'s
    utilisation)."""
    owner_kind = OWNER_KINDS[by] if by is not None else None
    owner_rows_kind = owner_kind.row_kind if owner_kind is not None else None
    res = FileResult(path)
    kinds = READ_KINDS | {WORK} | ({DEVICE} if device is not None else set())
    rd = SessionReader(path, kinds | {owner_rows_kind} if owner_rows_kind else kinds)
    sessions: dict[tuple, SessionData] = {}
    cur = None
    key = (None, None)
    spiller = spill.Spiller()  # long series a block at a time to a temporary file
    added = 0  # samples (or rows) since the last look at the series' lengths
    try:
        for row in rd.items():
            if added >= SPILL_EVERY:
                added = 0
                spiller.sweep(s for sess in sessions.values()
                              for s in (*sess.series.values(), *sess.owners.values()))
            if row.__class__ is list:  # plain samples, whole columns (the columnar reader)
                cur, key = _add_runs(sessions, row, path, cur, key)
                added += sum(len(r.at) for r in row)
                continue
            added += 1
            if device is not None and row.kind == DEVICE:  # no part of a session's time
                device(row)
                continue
            if row.host != key[0] or row.session != key[1]:
                key = (row.host, row.session)
                cur = _session(sessions, key, path, row.wall_s - row.elapsed_s)
            kind = row.kind
            if kind == SAMPLE:
                s = cur.series.get(row.domain) or _new_series(cur, row.domain, row.in_total,
                                                              key, row.source)
                energy = row.energy_j
                if energy is not None:
                    el = row.elapsed_s + cur.offset
                    label = row.label
                    span = bridged_span_s(label) if label else None
                    if span or cur.g_now is not None:  # bridged, or a tick's own carbon
                        s.add(el, span or row.interval_s, energy, g_per_j=cur.g_now)
                    else:  # a plain sample, inline (the hot path): it covers no lost rows
                        s.e.append(energy)
                        s.t1.append(el)
                        s.iv.append(row.interval_s)
                    prov = row.provenance
                    if prov != s.last_prov:
                        s.last_prov = prov
                        s.provs.add(prov)
                    if cur.g_per_j is None and row.co2_g is not None and energy > 0:
                        cur.g_per_j = row.co2_g / energy
                else:
                    s.lost_t1.append(row.elapsed_s + cur.offset)
                    s.lost_iv.append(row.interval_s)
            elif kind == MARKER:
                t = row.elapsed_s + cur.offset
                cur.markers.append((t, row.label, row.source))
                for i in range(len(cur.work) - 1, -1, -1):  # counted just before it, at the
                    if cur.work[i][0] != t:  # same instant: it stays before it
                        break
                    cur.work[i] = (math.nextafter(t, -math.inf),) + cur.work[i][1:]
            elif kind == WORK:
                unit, n = work_of(row)
                cur.work.append((row.elapsed_s + cur.offset, unit, n))
            elif kind == CARBON:  # the figure in force from this tick on
                cur.g_now = carbon_of(row).g_per_j
            elif kind == owner_rows_kind and row.energy_j is not None:
                _add_owner(cur, owner_kind.key(row), row, key)
            elif kind in META_KINDS:
                cur.meta.take(row)
                if kind == SESSION and cur.session_label is None:
                    cur.session_label = row.label
    except SessionFormatError as exc:
        res.error = str(exc)
    res.problems = rd.problems
    res.rows = rd.rows
    res.sessions = list(sessions.values())
    for sess in res.sessions:
        g_per_j = _g_per_j(sess)
        for s in (*sess.series.values(), *sess.owners.values()):
            s.g_per_j = g_per_j
    if not res.error and not any(s.t1 for sess in res.sessions for s in sess.series.values()):
        res.problems.append(f"{safe_text(path)}: no samples (an empty session)")
    return res


def _session(sessions: dict, key: tuple, path: str, offset_s: float) -> SessionData:
    """The session ``key`` (host, id) of this file; made by its first row (whose
    ``wall - elapsed_s`` is ``offset_s``)."""
    cur = sessions.get(key)
    if cur is None:
        cur = sessions[key] = SessionData(key[0], key[1], path, offset_s,
                                          periods=load_periods(key[0]))
    return cur


def _new_series(cur: SessionData, domain: str, in_total: bool, key: tuple,
                source: str) -> _Series:
    """A domain's series, made by its first sample (in_total and source are that
    sample's: the source says how often its counter updates)."""
    s = cur.series[domain] = _Series(in_total, (key, cur.path))
    s.g_per_j = _g_per_j(cur)
    s.set_update_period(source, cur.periods)
    return s


def _add_runs(sessions: dict, runs: list, path: str, cur, key):
    """Plain samples in columns (:class:`~.fastread.SampleRun`, one list: the rows between
    two other rows of the file), added as :func:`load_file` adds them one by one."""
    from .fastread import doubles, shifted

    first_g: dict = {}  # session -> (line, g CO2e/J) of its first row with an energy
    for run in runs:  # in order of their first rows
        if run.host != key[0] or run.session != key[1]:
            key = (run.host, run.session)
            cur = _session(sessions, key, path, run.wall0_s - run.elapsed0_s)
        s = cur.series.get(run.domain) or _new_series(
            cur, run.domain, run.in_total, key, run.cols["source"][run.at[0].as_py()].as_py() or "")
        if cur.g_now is not None:  # a live carbon source: each tick's own figure
            for t, span, energy in zip(doubles(run.column("elapsed_s")),
                                       doubles(run.column("interval_s")),
                                       doubles(run.column("energy_j"))):
                s.add(t + cur.offset, span, energy, g_per_j=cur.g_now)
        else:  # as the hot path of load_file: end times, spans, energies appended
            n0 = len(s.t1)
            ends, spans, in_order = shifted(run, cur.offset)
            s.e.extend(doubles(run.column("energy_j")))
            s.t1.extend(ends)
            s.iv.extend(spans)
            s.note_appended(n0, in_order)
        s.provs |= run.provs
        s.last_prov = ""
        if cur.g_per_j is None and run.first_line < first_g.get(key, (math.inf,))[0]:
            g = run.g_first()
            if g is not None and g[0] < first_g.get(key, (math.inf,))[0]:
                first_g[key] = g
    for k, (_, g) in first_g.items():
        sessions[k].g_per_j = g
    return cur, key


def _add_owner(sess: SessionData, owner: str | None, row, sid: tuple) -> None:
    """One owner row: its tick's energy joins the owner's series (rows of one owner in
    one tick, such as two trees of one rank, are added)."""
    if owner is None:
        return
    s = sess.owners.get(owner)
    if s is None:
        s = sess.owners[owner] = _Series(True, (sid, sess.path))
        s.provs.add(row.provenance or "attributed")
    t1 = row.elapsed_s + sess.offset
    if s.t1 and s.t1[-1] == t1:
        s.e[-1] += row.energy_j
    else:  # at the carbon figure in force at its tick (a live source's, else the file's)
        s.add(t1, row.interval_s, row.energy_j, g_per_j=sess.g_now)


def _g_per_j(sess: SessionData) -> float:
    """g CO2e per J of a session's samples before any ``carbon`` row: its recorded
    settings, else what its co2_g cells say (0 before one is read)."""
    carbon = sess.meta.carbon
    return carbon.g_per_j if carbon is not None else sess.g_per_j or 0.0


# -- computing -----------------------------------------------------------------------
def _lost_s(domains: dict) -> float:
    """Time during which a counted domain was lost (the longest of them)."""
    return max((d.lost_s for d in domains.values() if d.in_total), default=0.0)


def avg_w(domains: dict, duration_s: float) -> float | None:
    """Average power of the counted domains, each over the time it was measured; the
    energy over the duration when nothing was lost. None for a zero-length span."""
    if duration_s <= 0:
        return None
    total = 0.0
    for d in domains.values():
        if d.in_total:
            measured = duration_s - d.lost_s
            total += d.energy_j / measured if measured > 0 else 0.0
    return total


class _Span:
    """Duration and lost seconds of something with start_t/end_t and per-domain energies."""

    start_t: float
    end_t: float
    domains: dict

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_t - self.start_t)

    @property
    def lost_s(self) -> float:
        return _lost_s(self.domains)


@dataclass
class Segment(_Span):
    host: str
    index: int
    label: str
    start_t: float  # wall-clock s
    end_t: float
    energy_j: float
    co2_g: float
    provenance: str
    share: float  # of its host's energy, 0..1
    domains: dict  # domain -> DomainEnergy
    owners: list | None = None  # ``--by``: OwnerEnergy rows, unowned last (add up to energy_j)
    work: dict = field(default_factory=dict)  # unit -> count in the segment (``work`` rows)
    #: set when ``interpolated`` for being shorter than a few counter updates: the period
    update_period_s: float | None = None
    #: where that period comes from: ``nominal``, or ``measured by doctor on <date>``
    #: (the update periods ``tuimeter doctor`` stored for this host)
    update_period_note: str | None = None

    def energy_per(self, unit: str) -> EnergyPer | None:
        """J per ``unit`` of the segment: the host's energy (``basis`` machine: a report
        adds no own energy) over the work counted in it (every session of the host)."""
        return energy_per(unit, self.work, self.duration_s, None, "", self.energy_j,
                          self.provenance)


@dataclass
class HostReport(_Span):
    host: str
    files: list
    sessions: int
    start_t: float
    end_t: float
    energy_j: float
    co2_g: float
    provenance: str
    domains: dict
    segments: list
    data: list = field(default_factory=list, repr=False)  # SessionData, for plotting


@dataclass
class Report:
    hosts: list
    files: list  # FileResult
    energy_j: float
    co2_g: float
    start_t: float
    end_t: float
    provenance: str
    by: str | None = None  # the owner kind of the segments' owners (``--by``)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_t - self.start_t)

    @property
    def problems(self) -> list[str]:
        return [p for f in self.files for p in ([f.error] if f.error else []) + f.problems]

    def _repr_html_(self) -> str:
        """Jupyter: segments per host and the total (labels escaped)."""
        from ..htmlrepr import report_html

        return report_html(self)


def _boundaries(sessions: list[SessionData]) -> list[tuple[float, str]]:
    marks = sorted((m for s in sessions for m in s.markers), key=lambda m: m[0])
    out: list[tuple[float, str]] = []
    run_t, run_label = -math.inf, None
    for t, label, source in marks:
        if label == "end" and source == "api":
            label = GAP_LABEL
        if label == run_label and t - run_t <= MARKER_MERGE_S:
            continue
        run_t, run_label = t, label
        out.append((t, label))
    return out


def _join_parts(series: list[_Series]) -> list[_Series]:
    """The parts of one session written to several files (``record --rotate``) joined end
    to end, as one file would hold them: times are rounded in the file, so a part may
    start a microsecond before the last one ended, and clipping it (as for overlapping
    sessions) would lose that sliver at every boundary. Parts that overlap by more than
    :data:`PART_JOIN_S` (the same file given twice) are left to :func:`_kept`."""
    out: list[_Series] = []
    last: dict = {}  # (host, session) -> index in out of its latest part
    for s in sorted(series, key=lambda s: (s.start, -len(s.t1))):
        k = last.get(s.sid[0])
        prev = out[k] if k is not None else None
        if prev is not None and s.t1 and prev.t1 and s.t1[0] > prev.end \
                and s.start >= prev.end - PART_JOIN_S:
            out[k] = prev.joined(s)
            continue
        last[s.sid[0]] = len(out)
        out.append(s)
    return out


def _kept(series: list[_Series]) -> list[tuple[_Series, float]]:
    """Each series with its clip time: the part no earlier session covered."""
    out = []
    covered = -math.inf
    for s in sorted(_join_parts(series), key=lambda s: (s.start, -len(s.t1))):
        if not s.t1 or s.end <= covered:
            continue
        out.append((s, covered))
        covered = s.end
    return out


def _pieces(by_domain: dict[str, list[_Series]]) -> dict[str, list[Samples]]:
    """Per domain, the parts of its series that count (each from its clip)."""
    return {dom: [s.clipped(clip) for s, clip in _kept(series)]
            for dom, series in by_domain.items()}


def _host_report(host: str, sessions: list[SessionData], by: str | None = None) -> HostReport:
    bounds = _boundaries(sessions)
    cuts = [-math.inf] + [t for t, _ in bounds] + [math.inf]  # segment k: cuts[k]..cuts[k+1]
    labels = ["(start)"] + [label for _, label in bounds]
    by_domain: dict[str, list[_Series]] = {}
    for sess in sessions:
        for dom, s in sess.series.items():
            by_domain.setdefault(dom, []).append(s)
    pieces = _pieces(dict(sorted(by_domain.items())))
    start_t, end_t = math.inf, -math.inf
    for parts in pieces.values():
        for s in parts:
            start_t = min(start_t, max(s.t1[0] - s.iv[0], s.clip))
            end_t = max(end_t, s.t1[-1])
            if s.lost_t1:  # time lost at a session's edges is still its time
                start_t = min(start_t, max(s.lost_t1[0] - s.lost_iv[0], s.clip))
                end_t = max(end_t, s.lost_t1[-1])
    per_seg = [energy_between(pieces, cuts[k], cuts[k + 1]) for k in range(len(labels))]
    per_seg_owners = [None] * len(labels)
    if by is not None:
        by_owner: dict[str, list[_Series]] = {}
        for sess in sessions:
            for owner, s in sess.owners.items():
                by_owner.setdefault(owner, []).append(s)
        owner_pieces = _pieces(by_owner)
        per_seg_owners = [energy_between(owner_pieces, cuts[k], cuts[k + 1]).domains
                          for k in range(len(labels))]
    seg_domains: list[dict] = [{} for _ in labels]
    dom_totals: dict[str, DomainEnergy] = {}
    for dom, parts in pieces.items():
        in_total = by_domain[dom][0].in_total
        for k, pe in enumerate(per_seg):  # a domain with no part that counts: 0 J
            seg_domains[k][dom] = pe.domains.get(dom) or DomainEnergy(0.0, 0.0, in_total,
                                                                      "interpolated")
        doms = [d[dom] for d in seg_domains]
        dom_totals[dom] = DomainEnergy(sum(d.energy_j for d in doms),
                                       sum(d.co2_g for d in doms), in_total,
                                       combine(p for s in parts for p in s.provs),
                                       sum(d.lost_s for d in doms))
    if start_t == math.inf:  # no samples at all
        t = [m[0] for s in sessions for m in s.markers] or [s.offset for s in sessions]
        start_t, end_t = min(t), max(t)
    host_e = sum(d.energy_j for d in dom_totals.values() if d.in_total)
    host_co2 = sum(d.co2_g for d in dom_totals.values() if d.in_total)
    work: list[dict] = [{} for _ in labels]
    for sess in sessions:
        for t, unit, n in sess.work:  # segment k holds cuts[k] <= t < cuts[k + 1]
            k = bisect.bisect_right(cuts, t) - 1
            work[k][unit] = work[k].get(unit, 0.0) + n
    segments = []
    for k, pe in enumerate(per_seg):
        s0, s1 = max(cuts[k], start_t), min(cuts[k + 1], end_t)
        if s1 - s0 < MIN_SEGMENT_S and pe.energy_j == 0 and not work[k]:
            continue
        owners = per_seg_owners[k]
        segments.append(Segment(host, len(segments) + 1, labels[k], s0, max(s0, s1),
                                pe.energy_j, pe.co2_g, pe.provenance,
                                pe.energy_j / host_e if host_e > 0 else 0.0, seg_domains[k],
                                None if owners is None else
                                owner_rows(owners, pe.energy_j, pe.co2_g), work[k],
                                pe.update_period_s, pe.update_period_note))
    counted = {d.provenance for d in dom_totals.values() if d.in_total}
    return HostReport(host, sorted({s.path for s in sessions}),
                      len({s.session for s in sessions}), start_t,
                      max(start_t, end_t), host_e, host_co2, combine(counted),
                      dom_totals, segments, sessions)


def build_report(files: list[FileResult], by: str | None = None) -> Report:
    """Merge loaded files: per host (overlaps counted once), then all hosts added;
    ``by``: each segment's energy per owner of that kind too (load the files with it)."""
    by_host: dict[str, list[SessionData]] = {}
    for f in files:
        for s in f.sessions:
            by_host.setdefault(s.host, []).append(s)
    hosts = [_host_report(h, ss, by) for h, ss in sorted(by_host.items())]
    provs = {h.provenance for h in hosts if h.energy_j > 0}
    return Report(hosts, files, sum(h.energy_j for h in hosts), sum(h.co2_g for h in hosts),
                  min((h.start_t for h in hosts), default=0.0),
                  max((h.end_t for h in hosts), default=0.0), combine(provs), by)


def power_series(host: HostReport, points: int = 200) -> tuple[list[float], list[float]]:
    """(times, total W) in ``points`` bins over the host's span, for plotting."""
    span = max(host.duration_s, 1e-9)
    width = span / points
    cuts = [-math.inf] + [host.start_t + width * i for i in range(1, points)] + [math.inf]
    by_domain: dict[str, list[_Series]] = {}
    for sess in host.data:
        for dom, s in sess.series.items():
            if s.in_total:
                by_domain.setdefault(dom, []).append(s)
    pieces = _pieces(by_domain)
    times = [host.start_t + width * (i + 0.5) for i in range(points)]
    return times, [energy_between(pieces, cuts[i], cuts[i + 1]).energy_j / width
                   for i in range(points)]
