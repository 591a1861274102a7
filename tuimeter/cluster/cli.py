"""``tuimeter cluster``: the live view of many nodes over Prometheus, or (``--headless``)
a session CSV of them that ``report`` and ``--replay`` read like any session.

Bad input is one line and exit status 2 before anything is created; a Prometheus that
cannot be reached or finds no node at the start is one line and exit status 1 (nothing to
show); once running, a failed query marks the nodes ``lost`` and the session goes on.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from ..cli_help import help_text
from ..options import Parser, carbon_intensity, fail, interval, positive_float, pue, say
from .options import add_options, resolved

#: the ``host`` column of a cluster session's rows (its domains name their node)
CLUSTER_HOST = "cluster"


def parser() -> Parser:
    p = Parser(prog="tuimeter cluster",
               usage="tuimeter cluster --prometheus-url URL [--selector K=V,...] "
                     "[--slurm-job ID] [--nodes A,B] [--headless -o FILE --duration S]",
               description="The energy of many nodes, each running `tuimeter record "
                           "--prometheus`, read from the Prometheus that scrapes them: "
                           "each node's domains as NODE/DOMAIN, the right joules from the "
                           "raw counters (never rate()), a silent node shown lost. "
                           "Credentials come from the environment only: "
                           "TUIMETER_CLUSTER_TOKEN, or TUIMETER_CLUSTER_USER and "
                           "TUIMETER_CLUSTER_PASSWORD.",
               **help_text("cluster"))
    add_options(p, "cluster")
    p.add_argument("--headless", action="store_true",
                   help="no view: write the session CSV (-o) until --duration or Ctrl-C")
    p.add_argument("-o", "--output", metavar="FILE", help="session CSV to write")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("-i", "--interval", type=interval, default=None, metavar="S",
                   help="seconds between samples (default 1; a node's energy arrives "
                        "with each of its scrapes)")
    p.add_argument("--duration", type=positive_float, metavar="S", help="stop after S seconds")
    p.add_argument("--carbon-intensity", type=carbon_intensity, metavar="G_PER_KWH",
                   help="grid carbon intensity in g CO2e per kWh")
    p.add_argument("--country", metavar="CODE", help="grid carbon intensity of this country")
    p.add_argument("--pue", type=pue, metavar="PUE", help="power usage effectiveness (>= 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    return p


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.prometheus_url is None:
        return "cluster needs --prometheus-url URL (or $TUIMETER_CLUSTER_PROMETHEUS_URL)"
    if args.headless and not args.output:
        return "--headless needs -o FILE"
    if args.nodes and args.slurm_job:
        return "use either --nodes or --slurm-job, not both"
    return None


def open_engine(args: argparse.Namespace, env=os.environ) -> Any:
    """The engine over one :class:`~tuimeter.cluster.source.ClusterSensor` (unopened);
    ValueError (one line) for bad settings."""
    from ..engine.sampler import Engine
    from .promapi import PromClient
    from .source import ClusterSensor

    nodes = args.nodes
    if args.slurm_job:
        from .slurm import SlurmError, job_nodes

        try:
            nodes = job_nodes(args.slurm_job, env)
        except SlurmError as exc:
            raise ValueError(str(exc)) from None
    client = PromClient(args.prometheus_url, resolved(args, "timeout_s"), args.ca_file, env)
    sensor = ClusterSensor(client, args.selector or (), nodes, resolved(args, "sources"),
                           args.stale_after_s)
    try:  # CarbonError or ConfigError
        carbon = args.settings.carbon()
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return Engine([sensor], carbon, args.interval or 1.0, host=CLUSTER_HOST)


def cmd_cluster(argv: list[str], ui: Any = None) -> int:
    """``tuimeter cluster``; its exit status. ``ui(engine, args)`` runs the view (given by
    :mod:`tuimeter.cli`, which alone imports the UI: this package stays headless)."""
    args = parser().parse_args(argv)
    problem = _usage_problem(args)
    if problem:
        return fail(problem)
    try:
        engine = open_engine(args)
    except ValueError as exc:
        return fail(str(exc))
    engine.open()  # the nodes first: no file is made when none is found
    sensor = engine.sensors[0]
    if args.headless and not _interval_given(args) and sensor.scrape_s:
        # a row per scrape: a shorter tick would hold a whole scrape's energy or none
        engine.set_interval(min(max(1.0, sensor.scrape_s), 3600.0))
    if args.slurm_job:  # the jobs view names the job the nodes were chosen by
        for tags in engine.sensors[0].tags.values():
            if tags.get("job") in (None, "", "tuimeter"):
                tags["job"] = f"slurm {args.slurm_job}"
    if not engine.domains:
        st = next(s for s in engine.statuses if s.name == "cluster")
        engine.close()
        return fail(f"{st.reason.rstrip('.')}. Fix: {st.fix}" if st.fix else st.reason, 1)
    recorder = None
    if args.output:
        from ..measurement import SetupError, open_recorder

        try:
            recorder = open_recorder(args.output, CLUSTER_HOST, args.overwrite)
        except SetupError as exc:
            engine.close()
            return fail(str(exc))
    from ..live import Caught, LiveSession

    caught = Caught()
    try:
        live = LiveSession(engine, recorder, markers=False)
        live.open(opened=True)
        engine.subscribe(MergeMarkers(engine))
        if not args.quiet:
            for s in engine.statuses:
                say(f"tuimeter: cluster: {s.reason}")
        live.start()
        if not args.headless:
            assert ui is not None, "tuimeter.cli passes the view"
            try:
                ui(engine, args)
            finally:
                summary = live.stop()
        else:
            _wait(caught.stop, args.duration)
            summary = live.stop()
        for problem in summary.problems:
            say(f"tuimeter: error: {problem}")
        if summary.record_error:
            say(f"tuimeter: error: {summary.record_error}")
        if not args.quiet:
            say(_summary(summary, args.output))
        return 1 if summary.problems or summary.record_error else 0
    finally:
        caught.restore()


def _interval_given(args: argparse.Namespace) -> bool:
    """Whether the command line or $TUIMETER_INTERVAL chose the interval (config.toml's
    ``interval_s`` is the nodes' setting more than the cluster's: not taken as one)."""
    sources = args.settings.sources
    return "interval_s" in sources.cli or "interval_s" in sources.env


class MergeMarkers:
    """An engine listener: each marker a node added (read by the source) becomes a marker
    of the cluster session, ``NODE: LABEL`` (in the file, for ``report``'s phases, and in
    the views): the nodes' markers merged on one timeline."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def __call__(self, _snap: Any) -> None:
        from ..engine.sampler import SessionEnded

        for sensor in self.engine.sensors:
            for host, label in getattr(sensor, "drain_markers", list)():
                try:
                    self.engine.add_marker(f"{host}: {label}", source="cluster")
                except SessionEnded:
                    return


def _wait(stop: Any, duration_s: float | None) -> None:
    """Until ``stop`` (an Event-like flag a signal sets) or ``duration_s``."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    while True:
        left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
        if left <= 0 or stop.wait(left):
            return


def _summary(summary: Any, path: str | None) -> str:
    snap = summary.snapshot
    if snap is None:
        return "tuimeter: nothing recorded"
    nodes = {d.domain.id.split("/", 1)[0] for d in snap.domains}
    lost = {d.domain.id.split("/", 1)[0] for d in snap.domains if d.status.value == "lost"}
    t = snap.total
    line = (f"tuimeter: cluster of {len(nodes)} node(s), {snap.elapsed_s:.1f} s, "
            f"{t.total_energy_j:.1f} J ({t.total_energy_j / 3.6e6:.6f} kWh), "
            f"{t.total_co2_g:.4f} g CO2e")
    if lost:
        line += f"; lost at the end: {', '.join(sorted(lost))}"
    return line + (f" -> {path}" if path else "")
