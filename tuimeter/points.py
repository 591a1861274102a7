"""One neutral projection of a snapshot, which every exporter renders (Scaphandre's
``MetricGenerator``): the labels of a domain, the machine, the job, a marker are built here
once, never again by an exporter.

A :class:`Point` is a name, tags (what a point is about: its host, domain, pid ...),
fields (units in their names: ``power_w``, ``total_energy_j``; None where there is no
value, never 0) and a timestamp in µs since the epoch. Tags and fields keep their types
(float, int, bool, str, a tuple of str, None): each renderer writes its own text (the
session CSV its cells, Prometheus its label values and InfluxDB its tags through
:func:`tuimeter.export._tags.tag_text`, the marker reply its JSON), and none parses a
string back. :func:`points` gives, in this order:

* ``marker`` (one per new marker, at the marker's own instant) host, source: label, pid,
  elapsed_s;
* ``domain`` (one per domain) host, domain, kind, source, provenance, in_total (bool):
  power_w, energy_j (in the interval), total_energy_j, co2_g, total_co2_g, up (bool),
  bridged_s (the lost span this interval's energy was bridged across, else None), note
  (``DomainSample.note``: why a lost interval is lost, ``partial``, ``interpolated``),
  estimated_s (the seconds of energy_j that are an estimate of a span lost to a counter
  reset, else None);
* ``machine`` host, provenance: power_w (the sum of the domains' powers: a bridged one
  averaged over its own span), energy_j, total_energy_j, co2_g, total_co2_g,
  monitor_cpu_ratio (tuimeter's own CPU, fraction of one core), seq, interval_s,
  domains_lost (in-total domains lost in the interval: the total lacks them), lost and
  bridged (those domains' ids, a tuple, empty when none), note (``partial``);
* ``grid`` host, carbon_source, pue (float): g_per_kwh, g_per_j (grams per joule, PUE
  included: the snapshot's ``carbon.g_per_j``, which every CO2e figure here is made with);
* ``job`` (when a job is followed) host, pid (int), name, provenance: power_w, energy_j, co2_g,
  total_energy_j, cpu_energy_j, gpu_energy_j (cumulative), cpu_power_w, gpu_power_w,
  total_co2_g, share, running (bool);
* ``owner`` (one per owner tree: a process tree that marked the session through the API,
  or a rank of the job) host, pid (int), name, rank (None when none), provenance: power_w,
  energy_j, co2_g (in the interval), total_energy_j, in_job, running (bool);
* ``process`` (when attribution ran) host, pid (int; None for the last two), name, provenance:
  power_w, energy_j, co2_g (in the interval): the top processes, then ``idle/system`` and
  ``other processes`` (what the machine total leaves), so that they add up to the total;
* ``cgroup`` (when cgroups were read) host, cgroup (the path; ``unknown`` for processes
  whose cgroup could not be read), kind, name, container, pod, provenance: power_w,
  energy_j, co2_g (in the interval), total_energy_j: the :data:`CGROUP_POINTS` cgroups
  that used most power in the interval, then ``other cgroups`` (the rest, when any) and
  ``idle/system`` (total_energy_j None for those two), so that they add up to the total.

:func:`cgroup_total_points` gives, for an exporter of counters, a ``cgroup_total`` point
per cgroup known (same tags; field total_energy_j), idle ones included.

A renderer picks the points and fields it shows (InfluxDB writes no ``grid`` point;
Prometheus keeps cumulative values only; the session CSV writes the interval's values and
the marker reply the cumulative ones). No renderer depends on the order of the points: a
figure that one point's rows need (the job's CPU and GPU rows: grams per joule) is on the
snapshot. Headless: imports the model only, never an exporter, the session or the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .model import Provenance, Snapshot

#: a tag's or field's value: typed, never rendered (see the module docstring)
Field = Union[float, int, bool, str, tuple[str, ...], None]


@dataclass(frozen=True)
class Point:
    name: str
    tags: dict[str, Field]
    fields: dict[str, Field]
    timestamp_us: int


#: ``cgroup`` points per tick at most (then ``other cgroups``): the session CSV writes one
#: row each, so a node with hundreds of containers does not write hundreds of rows a tick
CGROUP_POINTS = 20
#: the ``cgroup`` tag of the cgroup that could not be read, the rest and the unused power
UNKNOWN_CGROUP, OTHER_CGROUPS, IDLE = "unknown", "other cgroups", "idle/system"


def _us(seconds: float) -> int:
    return int(round(seconds * 1e6))


def points(snap: Snapshot) -> list[Point]:
    """Every point of one snapshot (see the module docstring for names, tags and fields)."""
    host = snap.host
    out = [Point("marker", {"host": host, "source": m.source},
                 {"label": m.label, "pid": m.pid, "elapsed_s": float(m.elapsed_s)},
                 _us(m.timestamp)) for m in snap.new_markers]
    ts = _us(snap.timestamp)
    for d in snap.domains:
        dom = d.domain
        out.append(Point("domain", {"host": host, "domain": dom.id, "kind": str(dom.kind),
                                    "source": dom.source, "provenance": str(dom.provenance),
                                    "in_total": bool(dom.in_total)},
                         {"power_w": d.power_w, "energy_j": d.energy_j,
                          "total_energy_j": float(d.total_energy_j), "co2_g": d.co2_g,
                          "total_co2_g": float(d.total_co2_g), "up": d.status.value == "ok",
                          "bridged_s": d.bridged_s, "note": d.note,
                          "estimated_s": d.estimated_s},
                         ts))
    t = snap.total
    cpu = None if snap.monitor_cpu_percent is None else snap.monitor_cpu_percent / 100.0
    out.append(Point("machine", {"host": host, "provenance": str(t.provenance)},
                     {"power_w": t.power_w, "energy_j": float(t.energy_j),
                      "total_energy_j": float(t.total_energy_j), "co2_g": float(t.co2_g),
                      "total_co2_g": float(t.total_co2_g), "monitor_cpu_ratio": cpu,
                      "seq": int(snap.seq), "interval_s": float(snap.interval_s),
                      "domains_lost": len(t.lost), "lost": tuple(t.lost),
                      "bridged": tuple(t.bridged), "note": t.note}, ts))
    c = snap.carbon
    out.append(Point("grid", {"host": host, "carbon_source": c.source, "pue": float(c.pue)},
                     {"g_per_kwh": float(c.g_per_kwh), "g_per_j": c.g_per_j}, ts))
    job = snap.job
    if job is not None:
        out.append(Point("job", {"host": host, "pid": int(job.pid), "name": job.name,
                                 "provenance": str(job.provenance)},
                         {"power_w": float(job.power_w), "energy_j": float(job.energy_j),
                          "co2_g": float(job.co2_g),
                          "total_energy_j": float(job.total_energy_j),
                          "cpu_energy_j": float(job.cpu_energy_j),
                          "gpu_energy_j": float(job.gpu_energy_j),
                          "cpu_power_w": float(job.cpu_power_w),
                          "gpu_power_w": float(job.gpu_power_w),
                          "total_co2_g": float(job.total_co2_g), "share": float(job.share),
                          "running": bool(job.running)}, ts))
    for o in snap.owners:
        out.append(Point("owner", {"host": host, "pid": int(o.pid), "name": o.name,
                                   "rank": o.rank or None, "provenance": str(o.provenance)},
                         {"power_w": float(o.power_w), "energy_j": float(o.energy_j),
                          "co2_g": float(o.co2_g), "total_energy_j": float(o.total_energy_j),
                          "in_job": bool(o.in_job), "running": bool(o.running)}, ts))
    out.extend(_process_points(snap, ts))
    out.extend(_settled_points(snap, ts))
    out.extend(_cgroup_points(snap, ts))
    return out


def _settled_points(snap: Snapshot, ts: int) -> list[Point]:
    """The ``settled`` points of a full scan (the two-tier scan, docs/scan.md): per process,
    the energy of its CPU time since the last full scan that no tick read, out of the
    window's ``other processes`` (``power_w``: its average over the window)."""
    factor = snap.carbon.g_per_j
    return [Point("settled", {"host": snap.host, "pid": p.pid, "name": p.name,
                              "provenance": str(p.provenance)},
                  {"power_w": p.power_w, "energy_j": p.energy_j,
                   "co2_g": p.energy_j * factor}, ts) for p in snap.settled]


def _cgroup_tags(host: str, info) -> dict[str, Field]:
    return {"host": host, "cgroup": info.path or UNKNOWN_CGROUP, "kind": info.kind,
            "name": info.name, "container": info.container, "pod": info.pod,
            "provenance": str(Provenance.ATTRIBUTED)}


def _cgroup_points(snap: Snapshot, ts: int) -> list[Point]:
    """The ``cgroup`` points: the top cgroups of the interval, ``other cgroups``,
    ``idle/system``."""
    if not snap.cgroups:
        return []
    host, factor, iv = snap.host, snap.carbon.g_per_j, snap.interval_s
    used = sorted((c for c in snap.cgroups if c.energy_j > 0), key=lambda c: c.energy_j,
                  reverse=True)
    out = [Point("cgroup", _cgroup_tags(host, c.info),
                 {"power_w": c.power_w, "energy_j": c.energy_j, "co2_g": c.energy_j * factor,
                  "total_energy_j": c.total_energy_j}, ts) for c in used[:CGROUP_POINTS]]
    rest_j = sum(c.energy_j for c in used[CGROUP_POINTS:])
    # processes not read this tick (the two-tier scan, docs/attribution.md): their share
    # is in no cgroup yet, as it is in the process rows' "other processes"
    rest_j += snap.unread_power_w * iv
    none = {"host": host, "kind": "", "name": "", "container": "", "pod": "",
            "provenance": str(Provenance.ATTRIBUTED)}
    if rest_j > 0:
        out.append(Point("cgroup", {**none, "cgroup": OTHER_CGROUPS, "name": OTHER_CGROUPS},
                         {"power_w": rest_j / iv if iv > 0 else 0.0, "energy_j": rest_j,
                          "co2_g": rest_j * factor, "total_energy_j": None}, ts))
    if snap.idle_power_w is not None:
        w = snap.idle_power_w
        out.append(Point("cgroup", {**none, "cgroup": IDLE, "name": IDLE},
                         {"power_w": w, "energy_j": w * iv, "co2_g": w * iv * factor,
                          "total_energy_j": None}, ts))
    return out


def cgroup_total_points(snap: Snapshot) -> list[Point]:
    """A ``cgroup_total`` point per cgroup known (field total_energy_j, cumulative), for
    an exporter that keeps counters (see the module docstring)."""
    ts = _us(snap.timestamp)
    return [Point("cgroup_total", _cgroup_tags(snap.host, c.info),
                  {"total_energy_j": c.total_energy_j}, ts) for c in snap.cgroups]


def _process_points(snap: Snapshot, ts: int) -> list[Point]:
    """The ``process`` points: the top processes, then ``idle/system`` and ``other
    processes`` (the machine total less idle and the processes shown, never below 0)."""
    if not snap.processes and snap.idle_power_w is None:
        return []
    host, factor, iv = snap.host, snap.carbon.g_per_j, snap.interval_s
    out = [Point("process", {"host": host, "pid": int(p.pid), "name": p.name,
                             "provenance": str(p.provenance)},
                 {"power_w": p.power_w, "energy_j": p.energy_j,
                  "co2_g": p.energy_j * factor}, ts) for p in snap.processes]
    if snap.idle_power_w is not None:
        idle_w = snap.idle_power_w
        shown_w = 0.0
        for p in snap.processes:
            shown_w += p.power_w
        # from the total's energy, not its power: the rows add up to the tick's joules
        # (a bridged domain's power averages over its span, its joules are all here)
        total_w = snap.total.energy_j / iv if iv > 0 else (snap.total.power_w or 0.0)
        other_w = max(total_w - idle_w - shown_w, 0.0)
        prov = str(Provenance.ATTRIBUTED)
        for name, w in (("idle/system", idle_w), ("other processes", other_w)):
            out.append(Point("process", {"host": host, "pid": None, "name": name,
                                         "provenance": prov},
                             {"power_w": w, "energy_j": w * iv, "co2_g": w * iv * factor}, ts))
    return out
