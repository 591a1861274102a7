"""The nodes' cumulative energy counters, read from Prometheus, as one sensor of the engine.

Each remote (node, domain) is a domain named ``NODE/DOMAIN`` (``node03/package-0``,
``node03/gpu1``), so the engine's rules apply unchanged (docs/what-adds-up.md; the
engine's docstring): only ``in_total`` domains add up; a node whose series are missing,
or whose last sample is older than a few scrape intervals, is ``lost`` (never 0 W); on its
return the step is bridged when the counter is plausible, and a counter that went back (a
restarted recorder starts again at 0) is a reset: not energy, the span lost.

Right joules: each read asks for the raw samples of the last few scrape intervals
(``metric{...}[30s]`` in an instant query: each sample with the timestamp of its scrape)
and differences them itself, through :class:`~tuimeter.sensors.base.CounterTracker` fed
with the samples' own timestamps. ``rate()`` and ``increase()`` extrapolate to the window's
edges and are never used for energy.

Sources (``--source``), one per device: tuimeter's own series
(``tuimeter_energy_joules_total``, J); NVIDIA's DCGM exporter
(``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, **mJ**, labels ``Hostname``, ``gpu``, ``UUID``,
``hpc_job``) as ``NODE/gpuN``; Kepler's ``kepler_node_<zone>_joules_total`` (J) as
``NODE/kepler-<zone>``. A device tuimeter itself measures on a node is never taken from
another source too (DCGM's ``gpuN`` of a node whose tuimeter series have ``gpuN``; Kepler's
CPU zones of a node with tuimeter series at all), so no joule counts twice.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..model import Domain, Event, Link, Reading, SensorStatus, Status
from ..sensors.base import CounterTracker, Sensor, SensorUnavailable
from .promapi import PromClient, PromError, Series
from .series import OWN_LABELS, SPECS, Spec, matchers

#: the window of the first query, which finds the series and their scrape interval, s
DISCOVER_WINDOW_S = 60.0
#: a node is lost when its last sample is older than this many of its scrape intervals ...
STALE_SCRAPES = 3.0
#: ... and at least this old, s
MIN_STALE_S = 3.0
#: the ceiling of one remote domain's power, W (a plausibility bound on a step: x10)
MAX_DOMAIN_W = 20_000.0
@dataclass
class _Remote:
    domain: Domain
    host: str
    spec: Spec
    tracker: CounterTracker
    stale_after_s: float
    last_ts: float | None = None  # remote time of the last sample fed to the tracker
    lost: bool = False
    why: str = ""  # why it is lost


@dataclass
class NodeState:
    """What the view shows of a node: its last sample's age, whether it is lost, why."""

    host: str
    age_s: float | None = None
    lost: bool = False
    why: str = ""
    domains: list[str] = field(default_factory=list)


class ClusterSensor(Sensor):
    """The remote domains of the nodes that match ``selector`` (label matchers) and
    ``nodes`` (None: all), read through ``client``. ``stale_after_s`` None: three of each
    series' scrape intervals (at least :data:`MIN_STALE_S`). ``wallclock``: the clock
    the samples' ages are measured on (the Prometheus server's, kept in sync by NTP)."""

    name = "cluster"

    def __init__(self, client: PromClient, selector: Sequence[tuple[str, str]] = (),
                 nodes: Sequence[str] | None = None, sources: Sequence[str] = ("tuimeter",),
                 stale_after_s: float | None = None,
                 wallclock: Callable[[], float] = time.time):
        self.client = client
        self.selector = tuple(selector)
        self.nodes = tuple(nodes) if nodes else None
        self.sources = tuple(sources)
        self.stale_after_s = stale_after_s
        self.wallclock = wallclock
        self._remotes: dict[str, _Remote] = {}
        self._events: list[Event] = []
        self._lock = threading.Lock()
        self.error = ""  # the last query's failure, "" while they answer
        #: each node's labels beyond tuimeter's own (its ``--tag``s: job, partition ...)
        self.tags: dict[str, dict[str, str]] = {}
        self._marker_seen: dict[str, int] | None = None  # host -> its last marker's number
        self._new_markers: list[tuple[str, str]] = []  # (host, label) not yet drained
        self.query_s: float | None = None  # how long the last read's queries took
        self.scrape_s: float | None = None  # the nodes' scrape interval (median), s

    # -- the queries -------------------------------------------------------------------
    def _expr(self, spec: Spec, window_s: float, hosts: Sequence[str] | None) -> str:
        if spec.name == "tuimeter":
            sel = matchers(self.selector, hosts or self.nodes, spec.host_label)
            return f"{spec.metric}{sel}[{math.ceil(window_s)}s]"
        # another exporter's series carry none of our tags: the nodes found select them
        sel = matchers((), hosts or self.nodes, spec.host_label)
        if spec.metric.startswith("{"):
            inner = spec.metric[1:-1] + ("," + sel[1:-1] if sel else "")
            return f"{{{inner}}}[{math.ceil(window_s)}s]"
        return f"{spec.metric}{sel}[{math.ceil(window_s)}s]"

    def _query(self, window_s: float, hosts: Sequence[str] | None
               ) -> list[tuple[Spec, Series]]:
        out = []
        for name in self.sources:
            spec = SPECS[name]
            out += [(spec, s) for s in self.client.query(self._expr(spec, window_s, hosts),
                                                        at=self.wallclock())]
        return out

    # -- Sensor --------------------------------------------------------------------------
    def is_available(self) -> SensorStatus:
        return SensorStatus(self.name, True, f"Prometheus at {self.client.url}")

    def open(self) -> Sequence[Domain]:
        try:
            found = self._query(DISCOVER_WINDOW_S, None)
        except PromError as exc:
            raise SensorUnavailable(str(exc), "check --prometheus-url and that it is "
                                    "up") from None
        latest: dict[str, tuple[Spec, Series, str]] = {}
        rank = {name: i for i, name in enumerate(SPECS)}  # tuimeter's own first
        for spec, s in found:
            key = spec.key(s.labels)
            if key is None or not s.samples:
                continue
            did = f"{key[0]}/{key[1]}"
            cur = latest.get(did)
            # one (node, domain) in two series: tuimeter's own over another source's (one
            # source per device), else the newer (a label changed)
            if cur is not None and (rank[cur[0].name], -cur[1].samples[-1][0]) <= (
                    rank[spec.name], -s.samples[-1][0]):
                continue
            latest[did] = (spec, s, key[0])
        own_hosts = {h for sp, _, h in latest.values() if sp.name == "tuimeter"}
        spacings: list[float] = []
        for did, (spec, s, host) in sorted(latest.items()):
            if spec.name == "kepler" and host in own_hosts:
                continue  # tuimeter measures this node's CPU itself: one source per device
            dom = spec.domain(host, did.split("/", 1)[1], s.labels)
            if spec.name == "tuimeter":
                self.tags.setdefault(host, {k: v for k, v in s.labels.items()
                                            if k not in OWN_LABELS and v.isprintable()})
            elif spec.name == "dcgm" and s.labels.get("hpc_job", "").isprintable():
                self.tags.setdefault(host, {"job": s.labels.get("hpc_job", "")})
            spacings.append(_spacing(s.samples))
            stale = self.stale_after_s or max(STALE_SCRAPES * spacings[-1], MIN_STALE_S)
            tracker = CounterTracker(0, spec.scale_j, MAX_DOMAIN_W, unit=1.0)
            self._remotes[did] = _Remote(dom, host, spec, tracker, stale)
        if spacings:
            self.scrape_s = statistics.median(spacings)
        if not self._remotes:
            what = " ".join(f"{k}={v}" for k, v in self.selector) or "any"
            raise SensorUnavailable(
                f"no energy series of {', '.join(self.sources)} for {what} "
                f"{'nodes ' + ','.join(self.nodes) if self.nodes else 'node'} at "
                f"{self.client.url}",
                "check that Prometheus scrapes the nodes' tuimeter record --prometheus "
                "(docs/cluster.md) and the --selector / --nodes")
        return [r.domain for r in self._remotes.values()]

    def read(self, now_s: float) -> Sequence[Reading]:
        # the queries without the lock: the view's nodes_state() never waits on the network
        # (only the engine's thread calls read; the remotes are fixed since open)
        window = max(r.stale_after_s for r in self._remotes.values())
        t0 = time.perf_counter()
        try:
            found = self._query(window, sorted({r.host for r in self._remotes.values()}))
            error = ""
        except PromError as exc:
            error, found = str(exc), []
        if not error and "tuimeter" in self.sources:
            self._read_markers()
        with self._lock:
            self.error = error
            self.query_s = time.perf_counter() - t0
            wall = self.wallclock()
            last: dict[str, tuple[tuple[float, float], ...]] = {}  # the newest 2 samples
            targets: dict[str, set[str]] = {}
            for spec, s in found:
                key = spec.key(s.labels)
                if key is None or not s.samples:
                    continue
                did = f"{key[0]}/{key[1]}"
                r = self._remotes.get(did)
                if r is None or r.spec is not spec:
                    continue
                targets.setdefault(did, set()).add(s.labels.get("instance", ""))
                if did not in last or s.samples[-1][0] > last[did][-1][0]:
                    last[did] = s.samples[-2:]
            out = []
            for did, r in self._remotes.items():
                claim = targets.get(did, set())
                if len(claim) > 1:  # two recorders say they are this node: neither is right
                    out.append(self._lose(r, now_s, _clash(r.host, claim)))
                else:
                    out.append(self._read_one(r, last.get(did), now_s, wall))
            return out

    def _read_one(self, r: _Remote, newest: tuple[tuple[float, float], ...] | None,
                  now_s: float, wall: float) -> Reading:
        did = r.domain.id
        sample = newest[-1] if newest else None
        if sample is None or wall - sample[0] > r.stale_after_s:
            why = self.error or (f"no sample for {r.stale_after_s:.3g} s" if sample is None
                                 else f"last sample {wall - sample[0]:.1f} s old")
            return self._lose(r, now_s, why)
        ts, value = sample
        if not math.isfinite(value):
            return self._lose(r, now_s, f"the series holds {value}")
        if r.last_ts is not None and ts <= r.last_ts:  # no new scrape since the last read
            if r.lost:  # the same sample as when it was lost: still no news
                return self._lose(r, now_s, "no new sample")
            return Reading(did, now_s, r.tracker.energy_j, _scrape_power(r, newest))
        r.last_ts = ts
        step = r.tracker.update(value, ts)
        if step.kind == "rejected":
            return self._lose(r, now_s, step.detail)
        if r.lost:
            r.lost = False
            self._events.append(Event(now_s, self.name, did, "recovered",
                                      f"{did} answers again ({step.kind or 'continuous'})"))
        if step.kind == "reset":
            self._events.append(Event(now_s, self.name, did, "reset", step.detail))
        link = {"bridged": Link.BRIDGED, "reset": Link.BROKEN, "gap": Link.BROKEN}.get(
            step.kind, Link.CONTINUOUS)
        base_t = None if step.base_t_s is None else now_s - (wall - step.base_t_s)
        return Reading(did, now_s, r.tracker.energy_j,
                       None if link is Link.BROKEN else _scrape_power(r, newest),
                       note=step.kind if link is Link.BROKEN else "", link=link,
                       base_t_s=base_t, base_energy_j=step.base_energy_j)

    def _lose(self, r: _Remote, now_s: float, why: str) -> Reading:
        r.why = why
        if not r.lost:
            r.lost = True
            self._events.append(Event(now_s, self.name, r.domain.id, "lost", why))
        r.tracker.reject(why)  # the next good sample is bridged if plausible
        return Reading(r.domain.id, now_s, r.tracker.energy_j, None, Status.LOST, why)

    def _read_markers(self) -> None:
        """The nodes' newest markers (``tuimeter_last_marker_info``): one not seen before
        (another number) is queued for :meth:`drain_markers`. Those already there when
        the view opened are not (they belong to before). A failed query costs nothing."""
        hosts = sorted({r.host for r in self._remotes.values()})
        expr = f"tuimeter_last_marker_info{matchers(self.selector, hosts)}"
        try:
            found = self.client.query(expr, at=self.wallclock())
        except PromError:
            return
        newest: dict[str, tuple[int, str]] = {}  # host -> (number, label)
        for s in found:
            host, label, number = (s.labels.get(k, "") for k in ("host", "label", "marker"))
            if host in self.tags and number.isdigit() and len(number) < 12:
                if int(number) > newest.get(host, (-1, ""))[0]:
                    newest[host] = (int(number), label[:200])
        with self._lock:
            self._merge_markers(newest)

    def _merge_markers(self, newest: dict[str, tuple[int, str]]) -> None:
        if self._marker_seen is not None:
            for host, (n, text) in newest.items():
                if n != self._marker_seen.get(host):  # fewer: its recorder restarted
                    self._new_markers.append((host, text))
        self._marker_seen = {**(self._marker_seen or {}),
                             **{h: n for h, (n, _) in newest.items()}}

    def drain_markers(self) -> list[tuple[str, str]]:
        """(node, label) of each marker a node added since the last call."""
        with self._lock:
            out, self._new_markers = self._new_markers, []
        return out

    def drain_events(self) -> list[Event]:
        with self._lock:
            out, self._events = self._events, []
        return out

    def status(self) -> SensorStatus:
        n = len({r.host for r in self._remotes.values()})
        return SensorStatus(self.name, True, self.error or
                            f"{n} node(s) via Prometheus at {self.client.url}")

    def nodes_state(self) -> list[NodeState]:
        """Each node's staleness (the age of its newest sample) and whether it is lost."""
        wall = self.wallclock()
        out: dict[str, NodeState] = {}
        with self._lock:
            for r in self._remotes.values():
                n = out.setdefault(r.host, NodeState(r.host))
                n.domains.append(r.domain.id)
                if r.last_ts is not None:
                    age = wall - r.last_ts
                    n.age_s = age if n.age_s is None else min(n.age_s, age)
                n.lost = n.lost or r.lost
                if r.lost and not n.why:
                    n.why = r.why
        return list(out.values())


def _scrape_power(r: _Remote, newest: tuple[tuple[float, float], ...] | None
                  ) -> float | None:
    """The average power over the node's last scrape interval, W: the difference of its
    two newest raw samples (no extrapolation; None across a reset or with one sample).
    What the views show as power now: a tick shorter than the scrape interval holds the
    energy of a whole scrape or none, so its own average would read 0 W or a spike."""
    if not newest or len(newest) < 2:
        return None
    (t0, v0), (t1, v1) = newest[-2], newest[-1]
    if not t1 > t0 or not v1 >= v0 or not math.isfinite(v1 - v0):
        return None
    w = (v1 - v0) * r.spec.scale_j / (t1 - t0)
    return w if w <= r.tracker.hard_max_w else None


def _clash(host: str, targets: set[str]) -> str:
    shown = ", ".join(sorted(t[:60] or "?" for t in targets)[:3])
    return (f"{len(targets)} targets ({shown}) report host {host}: give each node its own "
            "--host (a config.toml copied to every node?)")


def _spacing(samples: Sequence[tuple[float, float]]) -> float:
    """The median spacing of a series' samples (its scrape interval), s; 15 s (the
    Prometheus default) when there are too few."""
    steps = [b[0] - a[0] for a, b in zip(samples, samples[1:]) if b[0] > a[0]]
    return statistics.median(steps) if steps else 15.0
