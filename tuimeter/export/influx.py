"""InfluxDB exporter: the same readings as the Prometheus exporter, pushed as line protocol.

The engine listener only appends the (immutable) snapshot to a queue; a daemon thread
formats points and POSTs them in batches, so a server that is down or slow never stalls
sampling or the UI. Points wait in a buffer bounded by ``max_points``; past the bound the
**oldest** are dropped (a live dashboard wants the present) and counted in
:attr:`InfluxExporter.dropped_points`, which the progress line and the UI show. Failed
sends are retried with a backoff capped at ``max_backoff_s``, so sending resumes by itself
once the server is back.

Two APIs, chosen by the options given:

* InfluxDB 1.x: ``POST {url}/write?db=DB&precision=u`` (credentials in the URL,
  ``http://user:pass@host:8086``, go as HTTP Basic auth). A database that does not exist
  (the server answers 404 ``database not found``) is created with ``CREATE DATABASE``
  through ``POST {url}/query`` and the batch sent again; a user without the privilege
  (403, it needs admin) gets one warning saying the statement an admin must run, and the
  points wait in the buffer (retried) until the database exists;
* InfluxDB 2.x: ``POST {url}/api/v2/write?org=ORG&bucket=BUCKET&precision=us`` with
  ``Authorization: Token TOKEN``.

Measurements (tags, then fields; timestamps in microseconds, the snapshot's wall clock):

* ``tuimeter_domain`` host, domain, kind, source, provenance, in_total: power_w, energy_j
  (in the interval), total_energy_j, co2_g, total_co2_g, up
* ``tuimeter_machine`` host, provenance: power_w, energy_j, total_energy_j, co2_g,
  total_co2_g, monitor_cpu_ratio, seq
* ``tuimeter_job`` host, pid, name, provenance: power_w, energy_j, total_energy_j,
  cpu_energy_j, gpu_energy_j, total_co2_g, share, running
* ``tuimeter_marker`` host, source: label (string), pid (at the marker's own instant)
"""

from __future__ import annotations

import base64
import collections
import json
import logging
import math
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, Mapping

from ..checks import text
from ..keys import Key
from ..model import Snapshot
from ._tags import tag_text
from .base import ExportError, ExporterEntry, HealthMetric
from ..points import points

log = logging.getLogger(__name__)

DEFAULT_MAX_POINTS = 100_000  # about 4.5 h of a 5-domain machine at 1 s
DEFAULT_BATCH_POINTS = 5_000


# -- line protocol ---------------------------------------------------------------------
def _escape_key(text: str) -> str:
    """Tag keys, tag values and field keys: escape comma, equals, space.

    A backslash is left as it is: InfluxDB unescapes only ``\\,`` ``\\=`` ``\\ `` there,
    so a doubled one would be stored doubled. A trailing backslash cannot be written at all
    (it would escape the separator after it, and the server refuses the whole batch), so it
    is dropped. A newline, which line protocol cannot carry, becomes ``\\n``.
    """
    return (text.rstrip("\\").replace("\n", r"\n").replace(",", r"\,").replace("=", r"\=")
            .replace(" ", r"\ "))


def _escape_measurement(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", r"\,").replace(" ", r"\ ")


def _field(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None  # line protocol has no NaN/inf
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def line(measurement: str, tags: dict, fields: dict, ts_us: int) -> str | None:
    """One point in line protocol; tags as :func:`~._tags.tag_text` writes them, empty
    ones and None/NaN fields left out.

    Returns None when no field is left (InfluxDB refuses a point without fields).
    """
    head = _escape_measurement(measurement)
    for k in sorted(tags):  # sorted tags: what InfluxDB recommends for write speed
        value = _escape_key(tag_text(tags[k]))
        if value:  # InfluxDB refuses an empty tag value
            head += f",{_escape_key(k)}={value}"
    parts = []
    for k, v in fields.items():
        f = _field(v)
        if f is not None:
            parts.append(f"{_escape_key(k)}={f}")
    if not parts:
        return None
    return f"{head} {','.join(parts)} {ts_us}"


#: the measurement of each point written, and its fields in order (``grid`` is not written)
MEASUREMENTS = {
    "marker": ("tuimeter_marker", ("label", "pid", "elapsed_s")),
    "domain": ("tuimeter_domain", ("power_w", "energy_j", "total_energy_j", "co2_g",
                                   "total_co2_g", "up")),
    "machine": ("tuimeter_machine", ("power_w", "energy_j", "total_energy_j", "co2_g",
                                     "total_co2_g", "monitor_cpu_ratio", "seq",
                                     "domains_lost")),
    "job": ("tuimeter_job", ("power_w", "energy_j", "total_energy_j", "cpu_energy_j",
                             "gpu_energy_j", "total_co2_g", "share", "running")),
    # at most 22 a tick (points.CGROUP_POINTS, other cgroups, idle/system)
    "cgroup": ("tuimeter_cgroup", ("power_w", "energy_j", "co2_g", "total_energy_j")),
}


def snapshot_lines(snap: Snapshot) -> list[str]:
    """Every point of one tick, from :func:`~tuimeter.points.points` (only the
    markers for seq 0, the empty starting snapshot)."""
    out: list[str | None] = []
    for p in points(snap):
        if p.name not in MEASUREMENTS or (snap.interval_s <= 0 and p.name != "marker"):
            continue
        measurement, fields = MEASUREMENTS[p.name]
        tags = {**p.tags, **dict(snap.tags)} if snap.tags else p.tags  # record --tag
        out.append(line(measurement, tags, {k: p.fields[k] for k in fields}, p.timestamp_us))
    return [x for x in out if x]


# -- target ----------------------------------------------------------------------------
@dataclass(frozen=True)
class InfluxTarget:
    """Where to write. ``db`` set: the 1.x API; else ``org``/``bucket``/``token``: 2.x."""

    url: str  # base URL, no trailing slash, no credentials
    db: str | None = None
    org: str | None = None
    bucket: str | None = None
    token: str | None = None
    basic_auth: str | None = None  # "user:password" from the URL (1.x)

    @property
    def api(self) -> str:
        return "v1" if self.db else "v2"

    def write_url(self) -> str:
        if self.db:
            q = urllib.parse.urlencode({"db": self.db, "precision": "u"})
            return f"{self.url}/write?{q}"
        q = urllib.parse.urlencode({"org": self.org, "bucket": self.bucket, "precision": "us"})
        return f"{self.url}/api/v2/write?{q}"

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "text/plain; charset=utf-8"}
        if self.token:
            h["Authorization"] = f"Token {self.token}"
        elif self.basic_auth:
            h["Authorization"] = "Basic " + base64.b64encode(self.basic_auth.encode()).decode()
        return h

    def describe(self) -> str:
        where = f"db {self.db}" if self.db else f"org {self.org}, bucket {self.bucket}"
        return f"InfluxDB at {self.url} ({where})"


class _Rejected(Exception):
    """The server refused the batch (4xx): sending it again cannot help."""

    code = 0  # the HTTP status, when there was one


class _NoDatabase(_Rejected):
    """InfluxDB 1.x: the database does not exist (404 ``database not found``)."""


def _influxql_ident(name: str) -> str:
    """An InfluxQL identifier in double quotes (``"my db"``; quotes and backslashes escaped)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def create_database_statement(db: str) -> str:
    """``CREATE DATABASE "db"``: what the 1.x exporter runs (or asks an admin to run)."""
    return f"CREATE DATABASE {_influxql_ident(db)}"


def _create_database(target: InfluxTarget, timeout_s: float) -> None:
    """``CREATE DATABASE`` through ``POST {url}/query`` (idempotent in InfluxDB 1.x).

    Raises _Rejected when the server refuses it (401/403: the user is not an admin; or an
    error in the answer), OSError when it cannot be reached."""
    import urllib.request  # here, not at the top: `--help` does not need http.client

    body = urllib.parse.urlencode({"q": create_database_statement(target.db)}).encode()
    headers = dict(target.headers(), **{"Content-Type": "application/x-www-form-urlencoded"})
    req = urllib.request.Request(f"{target.url}/query", data=body, method="POST",
                                 headers=headers)
    answer = _request(req, timeout_s)
    try:
        results = json.loads(answer or b"{}").get("results") or [{}]
        error = results[0].get("error")
    except (ValueError, AttributeError, IndexError):
        error = f"unexpected answer {answer[:100]!r}"
    if error:
        raise _Rejected(str(error)[:200])


def _post(target: InfluxTarget, body: bytes, timeout_s: float) -> None:
    """POST one batch; raises _Rejected (4xx) or OSError (down, slow, 5xx)."""
    import urllib.request
    req = urllib.request.Request(target.write_url(), data=body, method="POST",
                                 headers=target.headers())
    try:
        _request(req, timeout_s)
    except _Rejected as exc:
        if target.db and exc.code == 404 and "database not found" in str(exc):
            raise _NoDatabase(str(exc)) from None
        raise


def _request(req: "urllib.request.Request", timeout_s: float) -> bytes:
    """The answer's body; raises _Rejected (4xx, with ``code``) or OSError (down, slow, 5xx)."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.read(1 << 20)
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:200].decode("utf-8", "replace").strip()
        msg = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
        if 400 <= exc.code < 500 and exc.code not in (408, 429):
            rejected = _Rejected(msg)
            rejected.code = exc.code
            raise rejected from None
        raise OSError(msg) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise OSError(getattr(reason, "strerror", None) or str(reason)) from None


# -- exporter --------------------------------------------------------------------------
class InfluxExporter:
    """Engine listener plus a sender thread. Call :meth:`close` at the end of the session.

    ``min_period_s``: at most one POST per period while the server is healthy (points of
    faster ticks go together). ``close`` tries for ``close_timeout_s`` to send what is
    left, then counts the rest as dropped.
    """

    name = "influx"

    def __init__(self, engine, target: InfluxTarget, *, max_points: int = DEFAULT_MAX_POINTS,
                 batch_points: int = DEFAULT_BATCH_POINTS, min_period_s: float = 1.0,
                 timeout_s: float = 5.0, max_backoff_s: float = 5.0,
                 close_timeout_s: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 post: Callable[[InfluxTarget, bytes, float], None] = _post,
                 create_database: Callable[[InfluxTarget, float], None] = _create_database):
        if max_points < 1:
            raise ValueError("max_points must be >= 1")
        self.engine = engine
        self.target = target
        self.max_points = max_points
        self.batch_points = max(1, batch_points)
        self.min_period_s = min_period_s
        self.timeout_s = timeout_s
        self.max_backoff_s = max_backoff_s
        self.close_timeout_s = close_timeout_s
        self._clock = clock
        self._post = post
        self._create_database = create_database
        self.created_database = False  # this exporter ran CREATE DATABASE (1.x)
        self._warned_no_database = False
        self._cond = threading.Condition()
        self._snaps: collections.deque = collections.deque()  # guarded by _cond
        self._lines: collections.deque = collections.deque()  # sender thread only
        self._stop = False
        self.sent_points = 0
        self.dropped_points = 0
        self.rejected_points = 0  # part of dropped_points: refused by the server (4xx)
        self.last_error: str | None = None  # None while the last send succeeded
        self._thread = threading.Thread(target=self._run, name="tuimeter-influx", daemon=True)
        self._thread.start()
        engine.subscribe(self)

    # -- sampling thread: O(1), never blocks on the network --------------------------
    def __call__(self, snap: Snapshot) -> None:
        with self._cond:
            self._snaps.append(snap)
            self._cond.notify()

    # -- readers ---------------------------------------------------------------------
    @property
    def buffered_points(self) -> int:
        return len(self._lines)

    def describe(self) -> str:
        return f"pushing to {self.target.describe()}"

    def health(self) -> list[HealthMetric]:
        """Sent, dropped and waiting points (Prometheus serves them: drops show in Grafana)."""
        return [HealthMetric("tuimeter_influx_sent_points", "counter",
                             "Points InfluxDB accepted.", float(self.sent_points)),
                HealthMetric("tuimeter_influx_dropped_points", "counter",
                             "Points dropped: buffer full while InfluxDB was down or slow, "
                             "refused by it, or unsent at exit.", float(self.dropped_points)),
                HealthMetric("tuimeter_influx_buffered_points", "gauge",
                             "Points waiting to be sent.", float(self.buffered_points))]

    def status(self) -> str:
        """One short line for a progress line or status bar; "" while all is well."""
        parts = []
        if self.last_error:
            parts.append(f"influx: {self.last_error}, retrying")
        if self.dropped_points:
            parts.append(f"influx: {self.dropped_points} points dropped")
        return "; ".join(parts)

    # -- sender thread ---------------------------------------------------------------
    def _take_snapshots(self) -> None:
        with self._cond:
            snaps = list(self._snaps)
            self._snaps.clear()
        for snap in snaps:
            self._lines.extend(snapshot_lines(snap))
        over = len(self._lines) - self.max_points
        if over > 0:
            for _ in range(over):
                self._lines.popleft()
            self.dropped_points += over

    def _send_batch(self) -> bool:
        """Send the oldest batch; True if the server took it (or refused it for good)."""
        n = min(self.batch_points, len(self._lines))
        batch = [self._lines[i] for i in range(n)]
        body = ("\n".join(batch) + "\n").encode("utf-8")
        try:
            try:
                self._post(self.target, body, self.timeout_s)
            except _NoDatabase:
                if not self._make_database():
                    return False  # the points wait (bounded) until the database exists
                self._post(self.target, body, self.timeout_s)
        except _Rejected as exc:
            self.rejected_points += n
            self.dropped_points += n
            self.last_error = f"server refused {n} points ({exc})"
            log.warning("influx refused %d points: %s", n, exc)
            ok = True
        except Exception as exc:  # down, slow, 5xx: keep the points, retry later
            self.last_error = str(exc) or exc.__class__.__name__
            return False
        else:
            self.sent_points += n
            self.last_error = None
            ok = True
        for _ in range(n):
            self._lines.popleft()
        return ok

    def _make_database(self) -> bool:
        """CREATE DATABASE after a 404; True when it exists now. Without the privilege,
        ``last_error`` (and one warning, the first time) names the statement to run."""
        db = self.target.db
        try:
            self._create_database(self.target, self.timeout_s)
        except _Rejected as exc:
            why = f"HTTP {exc.code}" if exc.code else str(exc)
            self.last_error = (f"InfluxDB database {db!r} does not exist and this user cannot "
                               f"create it ({why}); an admin must run: "
                               f"{create_database_statement(db)}")
            if not self._warned_no_database:
                self._warned_no_database = True
                log.warning("%s", self.last_error)
            return False
        except Exception as exc:  # down or slow in between: retried like a failed send
            self.last_error = str(exc) or exc.__class__.__name__
            return False
        self.created_database = True
        log.info("created InfluxDB database %r", db)
        return True

    def _run(self) -> None:
        next_send = self._clock()
        backoff = self.min_period_s
        while True:
            with self._cond:
                while not self._stop and not self._snaps and not self._lines:
                    self._cond.wait()
                if not self._stop and not self._snaps:
                    wait = next_send - self._clock()
                    if wait > 0:
                        self._cond.wait(wait)
                stopping = self._stop
            self._take_snapshots()
            if stopping:
                break
            if not self._lines or self._clock() < next_send:
                continue
            if self._send_batch():
                backoff = self.min_period_s
                # more than a batch waiting (after an outage): catch up without pausing
                next_send = self._clock() + (0 if self._lines else self.min_period_s)
            else:
                backoff = min(max(backoff * 2, 0.25), self.max_backoff_s)
                next_send = self._clock() + backoff
        self._final_flush()

    def _final_flush(self) -> None:
        deadline = self._clock() + self.close_timeout_s
        while self._lines and self._clock() < deadline:
            if not self._send_batch():
                break
        if self._lines:
            self.dropped_points += len(self._lines)
            self._lines.clear()

    def close(self) -> None:
        """Stop listening, send what is buffered (bounded by close_timeout_s), stop."""
        self.engine.unsubscribe(self)
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout=self.close_timeout_s + self.timeout_s + 1)


# -- how the command line starts it ---------------------------------------------------------
ENV_URL = "TUIMETER_INFLUX_URL"
ENV_DB = "TUIMETER_INFLUX_DB"
ENV_ORG = "TUIMETER_INFLUX_ORG"
ENV_BUCKET = "TUIMETER_INFLUX_BUCKET"
ENV_TOKEN = "TUIMETER_INFLUX_TOKEN"


def influx_target(url: str | None, db: str | None = None, org: str | None = None,
                  bucket: str | None = None, token: str | None = None,
                  env: Mapping[str, str] | None = None) -> InfluxTarget:
    """Resolve the InfluxDB settings (options first, then the variables ``env`` holds:
    ``TUIMETER_INFLUX_*``, handed in by the resolver, never read here); ExportError if
    they are incomplete."""
    env = {} if env is None else env
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
    if token or basic:
        from ..exposure import warn_secret_over_http

        warn_secret_over_http(base, "the InfluxDB token" if token else "the InfluxDB password")
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


def _settings(sources) -> InfluxTarget | None:
    """The target, None unless asked for: by ``--influx`` (URL or none: the variable's),
    or by ``influx_url`` in config.toml. An option, or a key of the file whose variable
    is unset, is an option here (``--influx-db`` beats ``TUIMETER_INFLUX_BUCKET``: 1.x);
    the variables are the environment of :func:`influx_target`."""
    given = {k.name: sources.cli[k.name] if k.name in sources.cli else
             (sources.file.get(k.name) if k.name not in sources.env else None) for k in KEYS}
    url = given["influx_url"]
    if url is None and "influx_url" in sources.file:
        url = ""  # the file asks for the exporter; the variable gives its URL
    if url is None:
        return None
    env = {k.env: sources.env[k.name] for k in KEYS if k.env and k.name in sources.env}
    return influx_target(url, given["influx_db"], given["influx_org"], given["influx_bucket"],
                         given["influx_token"], env)


def _key(name: str, env: str, dest: str, what: str, option: str, cli: dict, *,
         secret: bool = False, default: str = "none", type: str = "string") -> Key:
    """A key whose value :func:`influx_target` checks (its variables too)."""
    return Key(name, text, env, dest, what=what, default=default, option=f"`{option}`",
               cli=((option,), cli), check_env=False, secret=secret, type=type)


KEYS = (
    _key("influx_url", ENV_URL, "influx", "InfluxDB to write to; setting it in the file "
         "starts the exporter (the variable alone only gives `--influx` its URL)", "--influx",
         dict(nargs="?", const="", default=None, metavar="URL",
              help=f"push readings to InfluxDB at URL (default ${ENV_URL})"), default="off",
         type="string (URL)"),
    _key("influx_db", ENV_DB, "influx_db", "InfluxDB 1.x database", "--influx-db",
         dict(metavar="DB", help=f"InfluxDB 1.x database (default ${ENV_DB})")),
    _key("influx_org", ENV_ORG, "influx_org", "InfluxDB 2.x org", "--influx-org",
         dict(metavar="ORG", help=f"InfluxDB 2.x org (default ${ENV_ORG})")),
    _key("influx_bucket", ENV_BUCKET, "influx_bucket", "InfluxDB 2.x bucket", "--influx-bucket",
         dict(metavar="BUCKET", help=f"InfluxDB 2.x bucket (default ${ENV_BUCKET})")),
    _key("influx_token", ENV_TOKEN, "influx_token", "InfluxDB 2.x token (keep the file "
         "private)", "--influx-token",
         dict(metavar="TOKEN",
              help=f"InfluxDB 2.x token (better: ${ENV_TOKEN}, which `ps` does not show)"),
         secret=True),
)
ENTRY = ExporterEntry("influx", KEYS, _settings,
                      lambda engine, target, _exporters: InfluxExporter(engine, target))
