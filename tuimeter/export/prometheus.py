"""Prometheus exporter: ``/metrics`` in the Prometheus text format, over the engine's latest
snapshot.

The collector reads :attr:`Engine.snapshot` (immutable) when Prometheus scrapes, so the
sampling thread does no exporting work at all, except one cheap listener that counts
markers (a scrape every 15 s must not miss the markers of the ticks in between).

Metric names follow Prometheus conventions (base units as suffix, counters end in
``_total``). Every series carries ``host``; per-domain series carry ``domain``, ``kind``,
``source``, ``provenance`` and ``in_total`` (``"1"`` if the domain adds into the machine
total: sum only those, or use the ``tuimeter_machine_*`` series, so no joule counts twice).
A counter restarts at 0 with each tuimeter session; ``rate()``/``increase()`` handle that.
The names are listed in docs/exporters.md and used by
``grafana/tuimeter-dashboard.json``.

The series are rendered from :func:`tuimeter.points.points` through the table
:data:`METRICS` (point, field, metric name, labels); every started exporter's own health
(:meth:`~tuimeter.export.base.Exporter.health`: InfluxDB's sent and dropped points ...) is
served too. ``prometheus_client`` is imported when the exporter starts, not with the module,
so building the command line stays cheap.
"""

from __future__ import annotations

import argparse
import gzip
import os
import threading
from typing import Callable, Iterable

from typing import NamedTuple

from ..checks import DEFAULT_CGROUPS, MAX_CGROUPS, listen_value, parse_cgroups, parse_listen
from ..keys import Key
from ..model import Snapshot
from ._http import BoundedHttpServer
from ._tags import tag_text
from .base import ExportError, ExporterEntry, HealthMetric
from .cgroup_counters import CgroupCounters, CgroupSeries
from ..points import Point, cgroup_total_points, points

DOMAIN_LABELS = ("host", "domain", "kind", "source", "provenance", "in_total")
MACHINE_LABELS = ("host", "provenance")
JOB_LABELS = ("host", "pid", "name", "domain", "provenance")
GAUGE, COUNTER = "gauge", "counter"

#: (point, field, metric, type, help, labels, constant labels), in the order served. The
#: series of one metric may come from several fields (the job's energy per part).
METRICS: tuple[tuple[str, str, str, str, str, tuple[str, ...], dict[str, str]], ...] = (
    ("domain", "power_w", "tuimeter_power_watts", GAUGE,
     "Average power of a domain over the last interval, in watts.", DOMAIN_LABELS, {}),
    ("domain", "total_energy_j", "tuimeter_energy_joules", COUNTER,
     "Energy of a domain since the tuimeter session started, in joules.", DOMAIN_LABELS, {}),
    ("domain", "total_co2_g", "tuimeter_co2e_grams", COUNTER,
     "CO2-equivalent of a domain's energy since the session started, in grams.",
     DOMAIN_LABELS, {}),
    ("domain", "up", "tuimeter_domain_up", GAUGE,
     "1 while the domain's sensor reads, 0 once it is lost.", DOMAIN_LABELS, {}),
    ("machine", "power_w", "tuimeter_machine_power_watts", GAUGE,
     "Machine total power over the last interval (domains with in_total=1, nothing counted "
     "twice), in watts.", MACHINE_LABELS, {}),
    ("machine", "domains_lost", "tuimeter_machine_domains_lost", GAUGE,
     "In-total domains lost in the last interval: while above 0 the machine total lacks "
     "them (incomplete).", MACHINE_LABELS, {}),
    ("machine", "total_energy_j", "tuimeter_machine_energy_joules", COUNTER,
     "Machine total energy since the session started, in joules.", MACHINE_LABELS, {}),
    ("machine", "total_co2_g", "tuimeter_machine_co2e_grams", COUNTER,
     "CO2-equivalent of the machine total energy since the session started (grid intensity "
     "x PUE), in grams.", MACHINE_LABELS, {}),
    ("grid", "g_per_kwh", "tuimeter_grid_intensity_grams_per_kilowatt_hour", GAUGE,
     "Grid carbon intensity used for CO2e, in grams CO2e per kWh (before PUE).",
     ("host", "carbon_source", "pue"), {}),
    ("job", "power_w", "tuimeter_job_power_watts", GAUGE,
     "Power attributed to the followed job (process tree) over the last interval, in watts.",
     JOB_LABELS, {"domain": "all"}),
    ("job", "cpu_energy_j", "tuimeter_job_energy_joules", COUNTER,
     "Energy attributed to the followed job since the session started, in joules, per part "
     "(domain=cpu|gpu; sum them for the job).", JOB_LABELS, {"domain": "cpu"}),
    ("job", "gpu_energy_j", "tuimeter_job_energy_joules", COUNTER, "", JOB_LABELS,
     {"domain": "gpu"}),
    ("job", "total_co2_g", "tuimeter_job_co2e_grams", COUNTER,
     "CO2-equivalent of the job's attributed energy, in grams.", JOB_LABELS, {"domain": "all"}),
    ("job", "share", "tuimeter_job_share_ratio", GAUGE,
     "The job's share of the machine total power over the last interval (0..1).",
     JOB_LABELS, {"domain": "all"}),
    ("job", "running", "tuimeter_job_running", GAUGE, "1 while the followed job runs.",
     JOB_LABELS, {"domain": "all"}),
    ("machine", "monitor_cpu_ratio", "tuimeter_monitor_cpu_ratio", GAUGE,
     "CPU used by tuimeter itself over the last interval, as a fraction of one core "
     "(0.002 = 0.2%).", ("host",), {}),
    ("machine", "seq", "tuimeter_samples", COUNTER,
     "Ticks (samples) taken since the session started.", ("host",), {}),
    ("machine", "interval_s", "tuimeter_interval_seconds", GAUGE,
     "Length of the last sampling interval, in seconds.", ("host",), {}),
)
#: points always described (their families are served even without a series); a ``job``
#: family only while a job is followed
ALWAYS = frozenset({"domain", "machine", "grid"})
#: the labels of ``tuimeter_cgroup_energy_joules_total`` (``slurm_job``, ``slurm_step``:
#: read from the cgroup path, "" where it is no SLURM job's)
CGROUP_LABELS = ("host", "cgroup", "kind", "container", "pod", "slurm_job", "slurm_step")


class _MarkerCount:
    """Engine listener: counts every marker and keeps the last (cheap: one tuple test).

    The count and the last marker change together under one lock, and :meth:`read`
    returns them together: a scrape between the two never pairs marker N-1's label with
    number N."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._last = None  # Marker | None

    def __call__(self, snap: Snapshot) -> None:
        if snap.new_markers:
            with self._lock:
                self._count += len(snap.new_markers)
                self._last = snap.new_markers[-1]

    def read(self) -> tuple[int, object]:
        """(markers so far, the last one or None), from one moment."""
        with self._lock:
            return self._count, self._last


def _families(pts: list[Point]) -> list:
    """Metric families of :data:`METRICS` from the points (None fields are left out)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    present = ALWAYS | {p.name for p in pts}
    by_name: dict[str, list[Point]] = {}
    for p in pts:
        by_name.setdefault(p.name, []).append(p)
    families: dict[str, object] = {}
    for point, field, metric, kind, text, labels, const in METRICS:
        if point not in present:
            continue
        fam = families.get(metric)
        if fam is None:
            cls = CounterMetricFamily if kind == COUNTER else GaugeMetricFamily
            fam = families[metric] = cls(metric, text, labels=labels)
        for p in by_name.get(point, ()):
            value = p.fields.get(field)
            if value is not None:
                tags = {**p.tags, **const}
                fam.add_metric([tag_text(tags[k]) for k in labels], float(value))
    return list(families.values())


def _health_families(host: str, exporters: Iterable) -> list:
    """Every exporter's :class:`HealthMetric`, as families labelled with ``host``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    out = []
    for e in exporters:
        for m in e.health():
            cls = CounterMetricFamily if m.kind == COUNTER else GaugeMetricFamily
            fam = cls(m.name, m.help, labels=("host",))
            fam.add_metric([host], float(m.value))
            out.append(fam)
    return out


class SnapshotCollector:
    """A ``prometheus_client`` custom collector over a snapshot source.

    ``snapshot``: returns the latest snapshot or None (before the engine opened: only the
    marker and exporter counters are exposed). ``markers``: the marker counter listener.
    ``exporters``: whose :meth:`~tuimeter.export.base.Exporter.health` to serve as well
    (a live list: exporters started later show up).
    """

    def __init__(self, snapshot: Callable[[], Snapshot | None], markers: _MarkerCount,
                 exporters: Iterable = (), cgroups: int = DEFAULT_CGROUPS,
                 interval_s: float | None = None):
        self._snapshot = snapshot
        self._markers = markers
        self._exporters = exporters
        self._cgroups = CgroupCounters(cgroups) if cgroups > 0 else None
        self._interval_s = interval_s  # the configured interval, for tuimeter_info
        self._job_cgroup: tuple[int, str | None] | None = None  # (pid, its cgroup path)
        self._slurm_job = os.environ.get("SLURM_JOB_ID", "").strip()

    def describe(self):
        return []  # no registration-time collect (the engine may not be open yet)

    def collect(self):
        snap = self._snapshot()
        host = snap.host if snap is not None else ""
        out: list = []
        if snap is not None:
            out += _families(points(snap))
            out.append(_info_family(snap, self._interval_s))
            if self._cgroups is not None:
                out += _cgroup_families(self._cgroups.update(cgroup_total_points(snap),
                                                             self._pinned(snap)))
        out += _marker_metrics(host, self._markers)
        out += _health_families(host, self._exporters)
        tags = dict(snap.tags) if snap is not None else {}
        for fam in out:  # record --tag: constant labels on every series
            if tags:
                fam.samples = [s._replace(labels={**s.labels, **tags}) for s in fam.samples]
            yield fam

    def _pinned(self, snap: Snapshot) -> frozenset[str]:
        """The cgroups served whatever their rank, never folded into ``other``: the
        followed job's (the cgroup of its process) and those of the SLURM job tuimeter
        itself runs in (``srun tuimeter record ...``: ``$SLURM_JOB_ID``)."""
        paths = set()
        job_id = self._slurm_job
        if job_id:
            paths |= {c.info.path for c in snap.cgroups if c.info.job == job_id}
        if snap.job is not None:
            if self._job_cgroup is None or self._job_cgroup[0] != snap.job.pid:
                from ..engine.cgroups import read_cgroup

                self._job_cgroup = (snap.job.pid, read_cgroup(snap.job.pid))
            if self._job_cgroup[1]:
                paths.add(self._job_cgroup[1])
        return frozenset(paths)


def _cgroup_families(series: list[CgroupSeries]) -> list:
    """``tuimeter_cgroup_energy_joules_total``: the top cgroups and ``other``
    (:mod:`.cgroup_counters`); nothing while no cgroup was read."""
    from prometheus_client.core import CounterMetricFamily

    if not series:
        return []
    fam = CounterMetricFamily(
        "tuimeter_cgroup_energy_joules", "Energy attributed to the processes of a cgroup, "
        "in joules: the top cgroups by energy (--prometheus-cgroups), and cgroup=\"other\" "
        "for the energy of the rest while they were not among them (each series counts "
        "only the energy given to it; all add up to the attributed energy).",
        labels=CGROUP_LABELS)
    for s in series:
        fam.add_metric([s.labels[k] for k in CGROUP_LABELS], s.energy_j)
    return [fam]


def _info_family(snap: Snapshot, interval_s: float | None):
    """``tuimeter_info{host, version, schema, interval_s, tags...} 1``: what a cluster
    view reads to know a node (the tags are added with every series' own)."""
    from prometheus_client.core import GaugeMetricFamily

    from ..version import SCHEMA_VERSION, __version__

    iv = interval_s if interval_s is not None else snap.interval_s
    fam = GaugeMetricFamily("tuimeter_info", "The node's tuimeter: its version, session "
                            "schema and sampling interval in seconds (value 1).",
                            labels=("host", "version", "schema", "interval_s"))
    fam.add_metric([snap.host, __version__, str(SCHEMA_VERSION), f"{iv:g}"], 1.0)
    return fam


def _marker_metrics(host: str, markers: _MarkerCount):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

    total = CounterMetricFamily(
        "tuimeter_markers", "Phase markers added since the session started.", labels=("host",))
    count, last = markers.read()
    total.add_metric([host], float(count))
    out = [total]
    if last is not None:
        info = InfoMetricFamily(
            "tuimeter_last_marker", "The latest phase marker: its label, where it came from and "
            "its number (a new series per marker, for Grafana annotations).",
            labels=("host",))
        info.add_metric([host], {"label": last.label, "source": last.source,
                                 "marker": str(count)})
        when = GaugeMetricFamily(
            "tuimeter_last_marker_timestamp_seconds", "When the latest marker was added, in "
            "seconds since the epoch.", labels=("host",))
        when.add_metric([host], last.timestamp)
        out += [info, when]
    return out


class PrometheusExporter:
    """Serves ``/metrics`` for one engine on ``host:port`` until :meth:`close`.

    Binding happens in the constructor, so a busy port raises OSError before anything
    else starts. The server (:class:`~tuimeter.export._http.BoundedHttpServer`) runs on one
    daemon thread, holds at most ``max_connections`` clients and drops any that takes more
    than ``timeout_s`` to send its request or read the answer: idle or slow clients cannot
    use up threads or the file descriptors the sensors need.
    """

    name = "prometheus"
    MAX_CONNECTIONS = 8
    TIMEOUT_S = 5.0

    def __init__(self, engine, host: str = "127.0.0.1", port: int = 9100,
                 exporters: Iterable = (), *,
                 max_connections: int = MAX_CONNECTIONS, timeout_s: float = TIMEOUT_S,
                 cgroups: int = DEFAULT_CGROUPS):
        from prometheus_client.core import CollectorRegistry

        self.engine = engine
        self._markers = _MarkerCount()
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = SnapshotCollector(lambda: engine.snapshot, self._markers, exporters,
                                           cgroups, getattr(engine, "interval_s", None))
        self.registry.register(self.collector)
        self._server = BoundedHttpServer(host, port, self._handle, max_connections=max_connections,
                                         timeout_s=timeout_s, name="tuimeter-prometheus")
        self.host = host
        self.port = self._server.server_port  # the real port when 0 was asked
        engine.subscribe(self._markers)
        self._closed = threading.Event()

    def _handle(self, method: str, path: str, query: dict, headers: dict):
        """As prometheus_client answers: any path but /favicon.ico, format negotiated from
        Accept, gzip when accepted, ``name[]`` to restrict the families."""
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", [("Allow", "GET, HEAD")], b"GET /metrics\n"
        if path == "/favicon.ico":
            return "404 Not Found", [], b""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(headers.get("accept", ""))
        registry = self.registry
        if "name[]" in query:
            registry = registry.restricted_registry(query["name[]"])
        body = encoder(registry)
        out = [("Content-Type", content_type)]
        if "gzip" in [e.split(";")[0].strip() for e in headers.get("accept-encoding", "").split(",")]:
            body = gzip.compress(body)
            out.append(("Content-Encoding", "gzip"))
        return "200 OK", out, body

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def describe(self) -> str:
        return f"Prometheus metrics on {self.url}"

    def status(self) -> str:
        return ""

    def health(self) -> list[HealthMetric]:
        return []

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.engine.unsubscribe(self._markers)
        self._server.close()


# -- how the command line starts it ---------------------------------------------------------

def _listen_type(text: str) -> tuple[str, int]:
    try:
        return parse_listen(text)
    except ExportError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def _cgroups_type(text: str) -> int:
    try:
        return parse_cgroups(text)
    except ExportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class PrometheusSettings(NamedTuple):
    host: str
    port: int
    cgroups: int = DEFAULT_CGROUPS  # cgroup series served (the top N by energy)


def _settings(sources) -> PrometheusSettings | None:
    listen = sources.value("prometheus")
    if listen is None:
        return None
    n = sources.value("prometheus_cgroups")
    return PrometheusSettings(*listen, DEFAULT_CGROUPS if n is None else n)


def _start(engine, settings: PrometheusSettings, exporters: list) -> PrometheusExporter:
    host, port, cgroups = settings
    try:
        exporter = PrometheusExporter(engine, host, port, exporters, cgroups=cgroups)
    except OSError as exc:
        raise ExportError(f"--prometheus: cannot listen on {host}:{port}: "
                          f"{exc.strerror or exc}") from None
    from ..exposure import warn_all_interfaces

    warn_all_interfaces(host, exporter.port, "--prometheus")
    return exporter


KEYS = (
    Key("prometheus", listen_value, "TUIMETER_PROMETHEUS", "prometheus",
        type='string `"[HOST:]PORT"` (or a port number)', default="off",
        what="serve `/metrics`; setting it starts the exporter", option="`--prometheus`",
        cli=(("--prometheus",), dict(
            type=_listen_type, metavar="[HOST:]PORT",
            help="serve /metrics for Prometheus on PORT (127.0.0.1 unless HOST is given)"))),
    Key("prometheus_cgroups", parse_cgroups, "TUIMETER_PROMETHEUS_CGROUPS",
        "prometheus_cgroups", type=f"integer, 0 to {MAX_CGROUPS}", default=f"`{DEFAULT_CGROUPS}`",
        what="cgroups served one `tuimeter_cgroup_energy_joules_total` series each (the rest "
             "in `other`)", option="`--prometheus-cgroups`",
        cli=(("--prometheus-cgroups",), dict(
            type=_cgroups_type, metavar="N",
            help="cgroups served one series each, the top N by energy; the rest add up in "
                 f"cgroup=\"other\" (default {DEFAULT_CGROUPS}; 0: none)"))),
)
ENTRY = ExporterEntry("prometheus", KEYS, _settings, _start)
