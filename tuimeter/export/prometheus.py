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
The names are listed in README ("Across a cluster") and used by
``grafana/tuimeter-dashboard.json``.
"""

from __future__ import annotations

import gzip
import threading
from typing import Callable, Iterable

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
)

from prometheus_client.exposition import choose_encoder

from ..model import Snapshot
from ._http import BoundedHttpServer

DOMAIN_LABELS = ("host", "domain", "kind", "source", "provenance", "in_total")
MACHINE_LABELS = ("host", "provenance")
JOB_LABELS = ("host", "pid", "name", "domain", "provenance")


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


class SnapshotCollector:
    """A ``prometheus_client`` custom collector over a snapshot source.

    ``snapshot``: returns the latest snapshot or None (before the engine opened: only the
    marker and exporter counters are exposed). ``markers``: the marker counter listener.
    ``extra``: callables returning further metric families (the InfluxDB drop counter).
    """

    def __init__(self, snapshot: Callable[[], Snapshot | None], markers: _MarkerCount,
                 extra: Iterable[Callable[[str], Iterable]] = ()):
        self._snapshot = snapshot
        self._markers = markers
        self._extra = list(extra)

    def describe(self):
        return []  # no registration-time collect (the engine may not be open yet)

    def collect(self):
        snap = self._snapshot()
        host = snap.host if snap is not None else ""
        if snap is not None:
            yield from _domain_metrics(snap)
            yield from _machine_metrics(snap)
            yield from _job_metrics(snap)
            yield from _monitor_metrics(snap)
        yield from _marker_metrics(host, self._markers)
        for fn in self._extra:
            yield from fn(host)


def _domain_metrics(snap: Snapshot):
    power = GaugeMetricFamily(
        "tuimeter_power_watts", "Average power of a domain over the last interval, in watts.",
        labels=DOMAIN_LABELS)
    energy = CounterMetricFamily(
        "tuimeter_energy_joules", "Energy of a domain since the tuimeter session started, in "
        "joules.", labels=DOMAIN_LABELS)
    co2 = CounterMetricFamily(
        "tuimeter_co2e_grams", "CO2-equivalent of a domain's energy since the session started, "
        "in grams.", labels=DOMAIN_LABELS)
    up = GaugeMetricFamily(
        "tuimeter_domain_up", "1 while the domain's sensor reads, 0 once it is lost.",
        labels=DOMAIN_LABELS)
    for d in snap.domains:
        dom = d.domain
        labels = [snap.host, dom.id, str(dom.kind), dom.source, str(dom.provenance),
                  "1" if dom.in_total else "0"]
        if d.power_w is not None:
            power.add_metric(labels, d.power_w)
        energy.add_metric(labels, d.total_energy_j)
        co2.add_metric(labels, d.total_co2_g)
        up.add_metric(labels, 1.0 if d.status.value == "ok" else 0.0)
    return power, energy, co2, up


def _machine_metrics(snap: Snapshot):
    t = snap.total
    labels = [snap.host, str(t.provenance)]
    power = GaugeMetricFamily(
        "tuimeter_machine_power_watts", "Machine total power over the last interval (domains "
        "with in_total=1, nothing counted twice), in watts.", labels=MACHINE_LABELS)
    if t.power_w is not None:
        power.add_metric(labels, t.power_w)
    energy = CounterMetricFamily(
        "tuimeter_machine_energy_joules", "Machine total energy since the session started, in "
        "joules.", labels=MACHINE_LABELS)
    energy.add_metric(labels, t.total_energy_j)
    co2 = CounterMetricFamily(
        "tuimeter_machine_co2e_grams", "CO2-equivalent of the machine total energy since the "
        "session started (grid intensity x PUE), in grams.", labels=MACHINE_LABELS)
    co2.add_metric(labels, t.total_co2_g)
    c = snap.carbon
    intensity = GaugeMetricFamily(
        "tuimeter_grid_intensity_grams_per_kilowatt_hour", "Grid carbon intensity used for "
        "CO2e, in grams CO2e per kWh (before PUE).", labels=("host", "carbon_source", "pue"))
    intensity.add_metric([snap.host, c.source, f"{c.pue:g}"], c.g_per_kwh)
    return power, energy, co2, intensity


def _job_metrics(snap: Snapshot):
    job = snap.job
    if job is None:
        return ()
    base = [snap.host, str(job.pid), job.name]
    prov = str(job.provenance)
    power = GaugeMetricFamily(
        "tuimeter_job_power_watts", "Power attributed to the followed job (process tree) over "
        "the last interval, in watts.", labels=JOB_LABELS)
    power.add_metric(base + ["all", prov], job.power_w)
    energy = CounterMetricFamily(
        "tuimeter_job_energy_joules", "Energy attributed to the followed job since the session "
        "started, in joules, per part (domain=cpu|gpu; sum them for the job).",
        labels=JOB_LABELS)
    energy.add_metric(base + ["cpu", prov], job.cpu_energy_j)
    energy.add_metric(base + ["gpu", prov], job.gpu_energy_j)
    co2 = CounterMetricFamily(
        "tuimeter_job_co2e_grams", "CO2-equivalent of the job's attributed energy, in grams.",
        labels=JOB_LABELS)
    co2.add_metric(base + ["all", prov], job.total_co2_g)
    share = GaugeMetricFamily(
        "tuimeter_job_share_ratio", "The job's share of the machine total power over the last "
        "interval (0..1).", labels=JOB_LABELS)
    share.add_metric(base + ["all", prov], job.share)
    running = GaugeMetricFamily(
        "tuimeter_job_running", "1 while the followed job runs.", labels=JOB_LABELS)
    running.add_metric(base + ["all", prov], 1.0 if job.running else 0.0)
    return power, energy, co2, share, running


def _monitor_metrics(snap: Snapshot):
    cpu = GaugeMetricFamily(
        "tuimeter_monitor_cpu_ratio", "CPU used by tuimeter itself over the last interval, as a "
        "fraction of one core (0.002 = 0.2%).", labels=("host",))
    if snap.monitor_cpu_percent is not None:
        cpu.add_metric([snap.host], snap.monitor_cpu_percent / 100.0)
    ticks = CounterMetricFamily(
        "tuimeter_samples", "Ticks (samples) taken since the session started.",
        labels=("host",))
    ticks.add_metric([snap.host], float(snap.seq))
    interval = GaugeMetricFamily(
        "tuimeter_interval_seconds", "Length of the last sampling interval, in seconds.",
        labels=("host",))
    interval.add_metric([snap.host], snap.interval_s)
    return cpu, ticks, interval


def _marker_metrics(host: str, markers: _MarkerCount):
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
                 extra: Iterable[Callable[[str], Iterable]] = (), *,
                 max_connections: int = MAX_CONNECTIONS, timeout_s: float = TIMEOUT_S):
        self.engine = engine
        self._markers = _MarkerCount()
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = SnapshotCollector(lambda: engine.snapshot, self._markers, extra)
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

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.engine.unsubscribe(self._markers)
        self._server.close()


def influx_metrics(influx) -> Callable[[str], Iterable]:
    """Metric families for the InfluxDB exporter's health (drops show up in Grafana too)."""

    def collect(host: str):
        sent = CounterMetricFamily("tuimeter_influx_sent_points", "Points InfluxDB accepted.",
                                   labels=("host",))
        sent.add_metric([host], float(influx.sent_points))
        dropped = CounterMetricFamily(
            "tuimeter_influx_dropped_points", "Points dropped: buffer full while InfluxDB was "
            "down or slow, refused by it, or unsent at exit.", labels=("host",))
        dropped.add_metric([host], float(influx.dropped_points))
        buffered = GaugeMetricFamily("tuimeter_influx_buffered_points",
                                     "Points waiting to be sent.", labels=("host",))
        buffered.add_metric([host], float(influx.buffered_points))
        return sent, dropped, buffered

    return collect
