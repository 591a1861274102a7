"""Exporters: tuimeter's readings into the systems a cluster already watches.

Two calls for a command (``record``, the UI):

* :func:`add_export_options` adds ``--prometheus [HOST:]PORT``, ``--influx [URL]`` and the
  InfluxDB settings to an argparse parser;
* :func:`start_exporters` starts what was asked for an (unopened or open) engine and returns
  the exporters; call ``close()`` on each after ``engine.stop()``. Bad values and a port
  that cannot be bound raise :class:`ExportError` (one line, for ``tuimeter: error: ...``);
  start the exporters before creating the session file so that nothing is left behind.

Each exporter has ``describe()`` (what it does, for a start-up line) and ``status()``
(a short problem line, "" while all is well: the InfluxDB drop count lives there).
"""

from __future__ import annotations

import argparse
import os
import urllib.parse

from .influx import InfluxExporter, InfluxTarget

__all__ = ["ExportError", "InfluxExporter", "InfluxTarget", "add_export_options",
           "influx_target", "parse_listen", "start_exporters"]

ENV_URL = "TUIMETER_INFLUX_URL"
ENV_DB = "TUIMETER_INFLUX_DB"
ENV_ORG = "TUIMETER_INFLUX_ORG"
ENV_BUCKET = "TUIMETER_INFLUX_BUCKET"
ENV_TOKEN = "TUIMETER_INFLUX_TOKEN"


class ExportError(ValueError):
    """A bad exporter setting, or a port that cannot be bound (one readable line)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``"9100"``, ``"0.0.0.0:9100"``, ``"[::1]:9100"`` -> (host, port); host defaults to
    127.0.0.1 (metrics are not published beyond this machine unless asked)."""
    text = text.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ExportError(f"--prometheus {text!r}: write an IPv6 address in brackets, "
                          "[::1]:9100")
    try:
        port = int(port_text)
    except ValueError:
        raise ExportError(f"--prometheus {text!r}: expected [HOST:]PORT, e.g. 9100 or "
                          "0.0.0.0:9100") from None
    if not 0 <= port <= 65535:
        raise ExportError(f"--prometheus {text!r}: port must be 0..65535")
    return host or "127.0.0.1", port


def _listen_type(text: str) -> tuple[str, int]:
    try:
        return parse_listen(text)
    except ExportError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def add_export_options(p: argparse.ArgumentParser) -> None:
    """The exporter options (README, "Across a cluster")."""
    g = p.add_argument_group("export (Prometheus, InfluxDB)")
    g.add_argument("--prometheus", type=_listen_type, metavar="[HOST:]PORT",
                   help="serve /metrics for Prometheus on PORT (127.0.0.1 unless HOST is given)")
    g.add_argument("--influx", nargs="?", const="", default=None, metavar="URL",
                   help=f"push readings to InfluxDB at URL (default ${ENV_URL})")
    g.add_argument("--influx-db", metavar="DB",
                   help=f"InfluxDB 1.x database (default ${ENV_DB})")
    g.add_argument("--influx-org", metavar="ORG", help=f"InfluxDB 2.x org (default ${ENV_ORG})")
    g.add_argument("--influx-bucket", metavar="BUCKET",
                   help=f"InfluxDB 2.x bucket (default ${ENV_BUCKET})")
    g.add_argument("--influx-token", metavar="TOKEN",
                   help=f"InfluxDB 2.x token (better: ${ENV_TOKEN}, which `ps` does not show)")


def influx_target(url: str | None, db: str | None = None, org: str | None = None,
                  bucket: str | None = None, token: str | None = None,
                  env: dict | None = None) -> InfluxTarget:
    """Resolve the InfluxDB settings (options first, then environment); ExportError if
    they are incomplete."""
    env = os.environ if env is None else env
    url = url or env.get(ENV_URL, "")
    if db and not bucket:  # an option beats the environment: --influx-db means 1.x
        v2 = False
    else:
        v2 = bool(bucket or (not env.get(ENV_DB) and env.get(ENV_BUCKET)))
    db = db or env.get(ENV_DB) or None
    org = org or env.get(ENV_ORG) or None
    bucket = (bucket or env.get(ENV_BUCKET) or None) if v2 else None
    token = token or env.get(ENV_TOKEN) or None
    if not url:
        raise ExportError(f"--influx needs a URL (or ${ENV_URL}), e.g. http://localhost:8086")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ExportError(f"--influx {url!r}: expected http(s)://HOST[:PORT]")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise ExportError(f"--influx {url!r}: bad port") from None
    basic = None
    if parts.username is not None:
        basic = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    if bucket:  # the 2.x API
        missing = [name for name, v in (("--influx-org", org), ("--influx-token", token))
                   if not v]
        if missing:
            raise ExportError(f"InfluxDB 2.x needs {' and '.join(missing)} as well as "
                              f"--influx-bucket (or ${ENV_ORG}, ${ENV_TOKEN})")
        return InfluxTarget(base, org=org, bucket=bucket, token=token)
    if not db:
        raise ExportError("--influx needs --influx-db (InfluxDB 1.x) or --influx-org, "
                          "--influx-bucket and --influx-token (2.x)")
    return InfluxTarget(base, db=db, basic_auth=basic, token=token)


def start_exporters(engine, args: argparse.Namespace, **influx_kw) -> list:
    """Start the exporters that ``args`` asks for; [] when none.

    Raises ExportError (one line) for incomplete settings or a port that cannot be bound;
    then nothing is left running. ``influx_kw`` tunes :class:`InfluxExporter` (tests).
    """
    listen = getattr(args, "prometheus", None)
    influx_url = getattr(args, "influx", None)
    target = None
    if influx_url is not None:
        target = influx_target(influx_url, getattr(args, "influx_db", None),
                               getattr(args, "influx_org", None),
                               getattr(args, "influx_bucket", None),
                               getattr(args, "influx_token", None))
    started: list = []
    try:
        influx = None
        if target is not None:
            influx = InfluxExporter(engine, target, **influx_kw)
            started.append(influx)
        if listen is not None:
            from .prometheus import PrometheusExporter, influx_metrics

            host, port = listen
            extra = [influx_metrics(influx)] if influx is not None else []
            try:
                started.append(PrometheusExporter(engine, host, port, extra=extra))
            except OSError as exc:
                raise ExportError(f"--prometheus: cannot listen on {host}:{port}: "
                                  f"{exc.strerror or exc}") from None
    except BaseException:
        for exporter in started:
            exporter.close()
        raise
    return started
