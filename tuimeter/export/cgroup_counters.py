"""Energy counters per cgroup for Prometheus, with bounded cardinality and no counter that
ever goes back.

A node runs hundreds of cgroups over a day (every container, every systemd unit, every
login session), and a series per cgroup ever seen would grow without bound. So each scrape
serves at most ``top_n`` cgroup series plus one ``other``, and the rule that keeps every
counter monotonic is:

* At each scrape, the energy each cgroup was attributed since the previous scrape (its
  cumulative energy now minus then; a cgroup the engine forgot and saw again starts from
  0) goes to **its own series if it is among the ``top_n`` cgroups by cumulative energy
  now**, else to ``other``.
* A series counts only the energy given to it, so a cgroup that enters the top N later
  starts from 0 there (what it used before stays in ``other``), and one that leaves the
  top N stops being served at the value it reached (Prometheus marks it stale); if it
  comes back, it resumes from that value (up to :data:`REMEMBERED` such values are kept,
  least recently served dropped first).
* Hence every served value only grows, ``other`` only grows, and all the series ever
  served plus ``other`` add up to the energy attributed to processes since the session
  started: the machine total less idle/system.

Ranking by cumulative energy, not by the last interval's, keeps the set steady: a cgroup
enters it by using more energy in total than one in it, not by one busy second.
Thread-safe: two Prometheus servers may scrape at once.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Iterable, NamedTuple

from ..points import Point
from ._tags import tag_text

#: served values of cgroups that left the top N, kept to resume from if they come back
REMEMBERED = 1000
#: the ``cgroup`` label of the series that holds the energy of every cgroup not served
OTHER = "other"


class CgroupSeries(NamedTuple):
    """One series to serve: its labels (host, cgroup, kind, container, pod) and value (J)."""

    labels: dict[str, str]
    energy_j: float


class CgroupCounters:
    """The state behind ``tuimeter_cgroup_energy_joules_total`` (rule in the module
    docstring). ``top_n`` >= 0 cgroup series are served, plus ``other``."""

    def __init__(self, top_n: int, remembered: int = REMEMBERED):
        self.top_n = top_n
        self.remembered = remembered
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}  # cgroup -> cumulative J at the last scrape
        self._served: dict[str, float] = {}  # cgroup -> value of its series (top N now)
        self._labels: dict[str, dict[str, str]] = {}
        self._left: OrderedDict[str, float] = OrderedDict()  # values of series no longer served
        self._other_j = 0.0
        self._host = ""  # of the last points seen (for ``other``)

    def update(self, totals: Iterable[Point], pinned: frozenset[str] = frozenset()
               ) -> list[CgroupSeries]:
        """Take the ``cgroup_total`` points of the latest snapshot
        (:func:`tuimeter.points.cgroup_total_points`); return the series to serve, the
        top N by cumulative energy, then ``other``. The cgroups in ``pinned`` (paths: the
        followed job's, a tagged SLURM job's) are always served, beside the top N."""
        pts = list(totals)
        with self._lock:
            if not pts and not self._last and not self._served and not self._other_j:
                return []  # cgroups are not read (or none used power yet): no series
            now = {p.tags["cgroup"]: p for p in pts}
            ranked = sorted((p for p in pts if p.tags["cgroup"] not in pinned),
                            key=lambda p: p.fields["total_energy_j"], reverse=True)
            top = {p.tags["cgroup"] for p in ranked[:self.top_n]} | (pinned & now.keys())
            for key in list(self._served):  # left the top N (or forgotten by the engine)
                if key not in top:
                    self._left[key] = self._served.pop(key)
                    self._left.move_to_end(key)
            while len(self._left) > self.remembered:
                self._left.popitem(last=False)
            for key, p in now.items():
                total = p.fields["total_energy_j"]
                before = self._last.get(key, 0.0)
                delta = total - before if total >= before else total
                self._last[key] = total
                if key in top:
                    if key not in self._served:
                        self._served[key] = self._left.pop(key, 0.0)
                    self._served[key] += delta
                    self._labels[key] = _labels(p)
                else:
                    self._other_j += delta
            for key in self._last.keys() - now.keys():
                del self._last[key]
            for key in self._labels.keys() - self._served.keys():
                del self._labels[key]
            if pts:
                self._host = pts[0].tags["host"]
            host = self._host
            out = [CgroupSeries(self._labels[k], v) for k, v in sorted(
                self._served.items(), key=lambda kv: kv[1], reverse=True)]
            out.append(CgroupSeries({"host": host, "cgroup": OTHER, "kind": "",
                                     "container": "", "pod": "", "slurm_job": "",
                                     "slurm_step": ""}, self._other_j))
            return out


def _labels(p: Point) -> dict[str, str]:
    labels = {k: tag_text(p.tags[k]) for k in ("host", "cgroup", "kind", "container", "pod")}
    labels["slurm_job"], labels["slurm_step"] = slurm_ids(labels["cgroup"])
    return labels


@functools.lru_cache(maxsize=4096)
def slurm_ids(path: str) -> tuple[str, str]:
    """(SLURM job, step) of a cgroup path, as :func:`tuimeter.engine.cgroups.describe`
    reads them ("" where none): labels, so a job is selected by label, not by a regular
    expression on the path."""
    from ..engine.cgroups import describe

    info = describe(path)
    return info.job, info.step
