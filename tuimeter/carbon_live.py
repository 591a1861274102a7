"""Live grid carbon intensity: Electricity Maps or the UK National Grid's Carbon
Intensity API, fetched on a background thread; the table (:mod:`tuimeter.carbon`) stays
the fallback.

``--carbon-source`` picks where each tick's g CO2e/kWh comes from:

* ``table`` (default): the fixed figure of :func:`tuimeter.carbon.carbon_info`;
* ``electricitymaps``: ``GET {url}/v3/carbon-intensity/latest?zone=ZONE`` with the
  header ``auth-token`` (``TUIMETER_ELECTRICITYMAPS_TOKEN``); the answer's
  ``carbonIntensity`` is g CO2eq/kWh (lifecycle), ``datetime`` the hour it is for;
* ``uk-carbon-intensity``: ``GET {url}/intensity`` (Great Britain) or
  ``{url}/regional/postcode/OUTCODE`` (the region of a postcode's outward code, e.g.
  ``RG10``); no token. The half-hour's ``actual`` figure where published, else its
  ``forecast`` (regional figures are forecasts only).

Settings, first match wins (as every setting, tuimeter.settings): the argument
(``--carbon-source``, ``--carbon-zone``), the environment (``TUIMETER_CARBON_SOURCE``,
``TUIMETER_CARBON_ZONE``, ``TUIMETER_ELECTRICITYMAPS_TOKEN``,
``TUIMETER_ELECTRICITYMAPS_URL``, ``TUIMETER_UK_CARBON_URL``), then ``config.toml``
(``carbon_source``, ``carbon_zone``, ``electricitymaps_token``, ``electricitymaps_url``,
``uk_carbon_url``). The URLs exist so tests point at a local server.

:class:`LiveCarbon` fetches at start, then again when the answer says (Cache-Control
``max-age``; the end of the UK half-hour), else every :data:`REFRESH_S`. Sampling never
waits for it: the engine asks :meth:`LiveCarbon.current` each tick, which returns what
is known now. No network, a refused token (HTTP 401/403), no answer within the timeout
(:data:`TIMEOUT_S` for each read, :data:`DEADLINE_S` for the whole fetch),
an answer that is not the JSON expected, or an impossible figure (negative, NaN, above
:data:`~tuimeter.carbon.MAX_INTENSITY_G_PER_KWH`): one warning per run of failures, and
the table figure stands in, its source saying why (``FRA France: ... (electricitymaps
failed: HTTP 401)``). A refresh that fails after a good answer keeps that answer for
:data:`STALE_S`, then falls back too. Nothing from the server is trusted: numbers are
bounded, text is cut and only the zone we asked for is named.

This module imports no HTTP code until a fetch runs (``--help`` stays fast).
"""

from __future__ import annotations

import atexit
import json
import math
import re
import threading
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from .checks import ELECTRICITYMAPS, SOURCES, TABLE, UK, check_source, check_url
from .model import CarbonInfo


ENV_SOURCE = "TUIMETER_CARBON_SOURCE"
ENV_ZONE = "TUIMETER_CARBON_ZONE"
ENV_TOKEN = "TUIMETER_ELECTRICITYMAPS_TOKEN"
ENV_EM_URL = "TUIMETER_ELECTRICITYMAPS_URL"
ENV_UK_URL = "TUIMETER_UK_CARBON_URL"
#: config.toml key -> environment variable (tuimeter.settings declares them)
ENV_NAMES = {"carbon_source": ENV_SOURCE, "carbon_zone": ENV_ZONE,
             "electricitymaps_token": ENV_TOKEN, "electricitymaps_url": ENV_EM_URL,
             "uk_carbon_url": ENV_UK_URL}

DEFAULT_URLS = {ELECTRICITYMAPS: "https://api.electricitymaps.com",
                UK: "https://api.carbonintensity.org.uk"}

#: seconds between fetches when the answer does not say (the issue's 15 minutes)
REFRESH_S = 900.0
#: bounds on a refresh time an answer gives (a max-age of 0 must not hammer the API)
MIN_REFRESH_S, MAX_REFRESH_S = 60.0, 3600.0
#: after a failed fetch, the first retry (doubling, up to REFRESH_S)
RETRY_S = 60.0
#: a good answer is kept through failed refreshes this long, then the table stands in
STALE_S = 3600.0
#: the longest one fetch may wait for the server, s (a socket timeout per operation)
TIMEOUT_S = 10.0
#: the longest one fetch may take in all, s: connecting, the headers and the body (a
#: server that sends a byte every few seconds passes every per-read timeout)
DEADLINE_S = 20.0
#: the longest close() waits for the fetch thread, s: a fetch under way is cut short
#: at once, except a name lookup (getaddrinfo cannot be interrupted)
CLOSE_WAIT_S = 2.0
#: the largest answer read, bytes (the real ones are a few hundred)
MAX_BODY_BYTES = 1 << 20

_ZONE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
_OUTCODE = re.compile(r"[A-Z]{1,2}[0-9][A-Z0-9]?")
_TOKEN = re.compile(r"[!-~]{1,1024}")  # an HTTP header value: no space, no newline


class CarbonSourceWarning(UserWarning):
    """The live carbon source failed; the table figure stands in (the message says why)."""


class FetchError(Exception):
    """One fetch failed; ``str()`` is a short reason (``HTTP 401``, ``timed out``)."""


@dataclass(frozen=True)
class LiveSettings:
    """A live source, checked: which, the zone (Electricity Maps zone or UK outward
    code, None for all of Great Britain), the token and the base URL."""

    source: str
    zone: str | None
    token: str | None
    url: str
    #: the longest one fetch may take, s (tests give a short one)
    deadline_s: float = DEADLINE_S


@dataclass(frozen=True)
class Intensity:
    """One good answer: g CO2e/kWh, the text that says where it is from, and after how
    long to ask again (None: :data:`REFRESH_S`)."""

    g_per_kwh: float
    source: str
    refresh_s: float | None = None


# -- settings ----------------------------------------------------------------------------
def _check_zone(source: str, zone: object, where: str) -> str | None:
    if zone is None:
        if source == ELECTRICITYMAPS:
            raise ValueError("--carbon-source electricitymaps needs a zone: --carbon-zone "
                             f"ZONE (DE, FR, US-CAL-CISO), {ENV_ZONE} or carbon_zone in "
                             "config.toml")
        return None
    text = str(zone).strip()
    if source == UK:
        text = text.upper()
        if not _OUTCODE.fullmatch(text):
            raise ValueError(f"carbon zone ({where}) for uk-carbon-intensity must be a "
                             f"postcode's outward code such as RG10 or SW1A, got {zone!r}")
    elif not _ZONE.fullmatch(text):
        raise ValueError(f"carbon zone ({where}) must be an Electricity Maps zone such as "
                         f"DE or US-CAL-CISO, got {zone!r}")
    return text


#: where a value came from, and the value: ``pick(key, given)`` -> (value, where), (None, "")
#: when nothing sets it (:meth:`tuimeter.settings.Sources.pick`)
Pick = Callable[[str, object], "tuple[object, str]"]


def choose_live(source: str | None, zone: str | None, pick: Pick,
                check: Callable[[str, object, str], Any]) -> LiveSettings | None:
    """The live source to use, None for the table, from the values ``pick`` finds for
    the live keys (the argument ``source``/``zone`` first); ``check(key, value, where)``
    checks a value of config.toml or the environment. Reads no setting itself
    (:mod:`tuimeter.settings` hands them in). ValueError (one line naming where the bad
    value came from) for an unknown source, a bad zone or URL, or Electricity Maps
    without a token or zone."""
    value, where = pick("carbon_source", source)
    if value is None:
        return None
    name = check("carbon_source", value, where)
    if name == TABLE:
        return None
    zone_value, zone_where = pick("carbon_zone", zone)
    checked_zone = _check_zone(name, zone_value, zone_where)
    token = None
    if name == ELECTRICITYMAPS:
        token, token_where = pick("electricitymaps_token", None)
        if not token:
            raise ValueError(f"--carbon-source electricitymaps needs an API token in "
                             f"{ENV_TOKEN} (or electricitymaps_token in config.toml)")
        if not (isinstance(token, str) and _TOKEN.fullmatch(token)):  # never echoed
            raise ValueError(f"the Electricity Maps token ({token_where}) must be printable "
                             f"ASCII without spaces")
    url_key = "electricitymaps_url" if name == ELECTRICITYMAPS else "uk_carbon_url"
    url, url_where = pick(url_key, None)
    url = DEFAULT_URLS[name] if url is None else check(url_key, url, url_where)
    if token:
        from .exposure import warn_secret_over_http

        warn_secret_over_http(url, "the Electricity Maps token")
    return LiveSettings(name, checked_zone, None if token is None else str(token), url)


# -- fetching ------------------------------------------------------------------------
class _Deadline:
    """Ends a fetch at its deadline, or when :meth:`expire` is called (the fetcher is
    closed): the sockets it opened are shut down then, so a connect or a read under way
    returns at once, however slowly the server drips its answer."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._socks: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True
        self._timer.name = "tuimeter-carbon-deadline"

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def track(self, sock: Any) -> Any:
        with self._lock:
            self._socks.append(sock)
            if self.expired:
                _shut(sock)
        return sock

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)

    def connect(self, address: tuple[str, int], timeout: Any = None,
                source_address: Any = None, **_: Any) -> Any:
        """``socket.create_connection``, but each socket is tracked *before* it connects:
        a connect to a host that never answers is cut short by the deadline too (a
        shutdown aborts a pending connect)."""
        import socket

        host, port = address
        error: OSError | None = None
        for family, kind, proto, _name, where in socket.getaddrinfo(
                host, port, 0, socket.SOCK_STREAM):
            sock = self.track(socket.socket(family, kind, proto))
            try:
                if self.expired:
                    raise OSError("the fetch was stopped")
                if timeout is not None and timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:
                    sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect(where)
                return sock
            except OSError as exc:
                error = exc
                sock.close()
        raise error if error is not None else OSError("getaddrinfo returned no address")

    def handlers(self) -> list[Any]:
        """urllib handlers whose connections :meth:`track` their sockets (a TLS one
        before its handshake, so a handshake that drips is bounded too)."""
        import http.client
        import urllib.request

        deadline = self

        def tracked(base: type) -> type:
            class Conn(base):  # type: ignore[misc,valid-type]
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    super().__init__(*args, **kwargs)
                    self._create_connection = deadline.connect
            return Conn

        http_conn = tracked(http.client.HTTPConnection)
        https_conn = tracked(http.client.HTTPSConnection)

        class Http(urllib.request.HTTPHandler):
            def http_open(self, req: Any) -> Any:
                return self.do_open(http_conn, req)

        class Https(urllib.request.HTTPSHandler):
            def https_open(self, req: Any) -> Any:
                return self.do_open(https_conn, req, context=self._context)

        return [Http(), Https()]


def _shut(sock: Any) -> None:
    import socket

    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the descriptor's, under any TLS
    except OSError:
        pass


class Abort:
    """Stops the fetches it is handed to: :meth:`abort` ends the one under way at once
    (its sockets are shut) and every later one before it connects."""

    def __init__(self) -> None:
        self.aborted = False
        self._lock = threading.Lock()
        self._current: _Deadline | None = None

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            current = self._current
        if current is not None:
            current.expire()

    def _begin(self, deadline: _Deadline) -> None:
        with self._lock:
            self._current = deadline
            aborted = self.aborted
        if aborted:
            deadline.expire()

    def _end(self) -> None:
        with self._lock:
            self._current = None


def get_json(url: str, headers: Mapping[str, str], timeout_s: float,
             deadline_s: float = DEADLINE_S, abort: Abort | None = None) -> tuple[Any, Any]:
    """(the decoded JSON, the response headers) of ``GET url``; FetchError with a short
    reason for anything else (a redirect too: the token is never sent elsewhere). Each
    read waits at most ``timeout_s``, the whole fetch at most ``deadline_s``; ``abort``
    ends it sooner."""
    with _Deadline(deadline_s) as deadline:
        if abort is not None:
            abort._begin(deadline)
        try:
            answer = _get_json(url, headers, min(timeout_s, deadline_s), deadline.handlers())
        except FetchError:
            if abort is not None and abort.aborted:
                raise FetchError("stopped") from None
            if deadline.expired:
                raise FetchError(f"no complete answer within {deadline_s:g} s") from None
            raise
        finally:
            if abort is not None:
                abort._end()
    if deadline.expired:
        raise FetchError(f"no complete answer within {deadline_s:g} s")
    return answer


def _get_json(url: str, headers: Mapping[str, str], timeout_s: float,
              handlers: list[Any]) -> tuple[Any, Any]:
    import http.client
    import socket
    import urllib.error
    import urllib.request

    from .version import __version__

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        """A redirect is an error: urllib would send the token on to any host."""

        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    req = urllib.request.Request(url, headers={"Accept": "application/json",
                                               "User-Agent": f"tuimeter/{__version__}",
                                               **headers})
    try:
        opener = urllib.request.build_opener(NoRedirect, *handlers)
        with opener.open(req, timeout=timeout_s) as resp:
            body = resp.read(MAX_BODY_BYTES + 1)
            answer_headers = resp.headers
    except urllib.error.HTTPError as exc:
        exc.close()
        hint = " (is the token right?)" if exc.code in (401, 403) else ""
        raise FetchError(f"HTTP {exc.code}{hint}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (socket.timeout, TimeoutError)):
            raise FetchError(f"no answer within {timeout_s:g} s") from None
        raise FetchError(f"cannot connect ({_short(exc.reason)})") from None
    except (socket.timeout, TimeoutError):
        raise FetchError(f"no answer within {timeout_s:g} s") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise FetchError(f"{type(exc).__name__}: {_short(exc)}") from None
    if len(body) > MAX_BODY_BYTES:
        raise FetchError(f"an answer larger than {MAX_BODY_BYTES // 1024} KiB")
    try:
        return json.loads(body), answer_headers
    except (ValueError, RecursionError):
        raise FetchError("an answer that is not JSON") from None


def _short(value: object, limit: int = 80) -> str:
    from .text import safe_text

    text = safe_text(str(value))
    return text if len(text) <= limit else text[:limit] + "..."


def check_g(value: object) -> float:
    """A figure from an answer as g CO2e/kWh; FetchError when it is none or impossible."""
    from .checks import MAX_INTENSITY_G_PER_KWH

    if value is None:
        raise FetchError("no carbon intensity in the answer")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FetchError(f"a carbon intensity that is not a number ({_short(repr(value), 40)})")
    try:
        g = float(value)
    except OverflowError:  # an integer past any float
        g = math.inf
    if not (math.isfinite(g) and 0.0 <= g <= MAX_INTENSITY_G_PER_KWH):
        raise FetchError(f"an impossible carbon intensity ({_short(repr(value), 40)} g/kWh)")
    return g


def _when(value: object) -> float | None:
    """An ISO 8601 time from an answer (``2026-12-01T00:30Z``) as epoch s, or None."""
    import datetime as dt

    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(ts))


def _max_age_s(headers: Any) -> float | None:
    m = re.search(r"max-age=(\d{1,9})", str(headers.get("Cache-Control", "") or ""))
    return float(m.group(1)) if m else None


def parse_electricitymaps(obj: Any, headers: Any, zone: str) -> Intensity:
    """An Electricity Maps ``/v3/carbon-intensity/latest`` answer."""
    if not isinstance(obj, dict):
        raise FetchError("an answer that is not a JSON object")
    g = check_g(obj.get("carbonIntensity"))
    when = _when(obj.get("datetime"))
    at = f" at {_utc(when)}" if when is not None else ""
    estimated = " (estimated)" if obj.get("isEstimated") is True else ""
    return Intensity(g, f"electricitymaps {zone}: {g:g} g/kWh{at}{estimated}",
                     _max_age_s(headers))


def parse_uk(obj: Any, outcode: str | None, now_s: float) -> Intensity:
    """A Carbon Intensity API answer: ``/intensity`` (``data[0].intensity``) or
    ``/regional/postcode/OUTCODE`` (``data[0].data[0].intensity``). Asks again just
    after the half-hour it covers ends."""
    try:
        entry = obj["data"][0]
        region = None
        if outcode is not None:
            region = entry.get("shortname")
            entry = entry["data"][0]
        intensity = entry["intensity"]
        actual, forecast = intensity.get("actual"), intensity.get("forecast")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise FetchError("an answer without data[0].intensity") from None
    kind = "actual" if actual is not None else "forecast"
    g = check_g(actual if actual is not None else forecast)
    name = (f"{outcode} ({_short(region, 40)})" if isinstance(region, str) and region
            else outcode or "national")
    start, end = _when(entry.get("from")), _when(entry.get("to"))
    span = f", {_utc(start)}-{_utc(end)}" if start is not None and end is not None else ""
    refresh = None if end is None else end + 30.0 - now_s
    return Intensity(g, f"uk-carbon-intensity {name}: {g:g} g/kWh ({kind}{span})", refresh)


class Fetch:
    """One answer for its settings each call (raises FetchError); :meth:`abort` stops
    the call under way and every later one."""

    def __init__(self, settings: LiveSettings, timeout_s: float,
                 wallclock: Callable[[], float]):
        import urllib.parse

        self.settings = settings
        self.timeout_s = timeout_s
        self.wallclock = wallclock
        self._abort = Abort()
        if settings.source == ELECTRICITYMAPS:
            self.url = (f"{settings.url}/v3/carbon-intensity/latest?"
                        f"{urllib.parse.urlencode({'zone': settings.zone})}")
            self.headers = {"auth-token": settings.token or ""}
        else:
            path = ("/intensity" if settings.zone is None
                    else f"/regional/postcode/{urllib.parse.quote(settings.zone)}")
            self.url, self.headers = settings.url + path, {}

    def __call__(self) -> Intensity:
        s = self.settings
        obj, headers = get_json(self.url, self.headers, self.timeout_s, s.deadline_s,
                                self._abort)
        if s.source == ELECTRICITYMAPS:
            return parse_electricitymaps(obj, headers, s.zone or "")
        return parse_uk(obj, s.zone, self.wallclock())

    def abort(self) -> None:
        self._abort.abort()


def make_fetch(settings: LiveSettings, timeout_s: float = TIMEOUT_S,
               wallclock: Callable[[], float] = time.time) -> Fetch:
    """The fetch of one answer for ``settings`` (raises FetchError)."""
    return Fetch(settings, timeout_s, wallclock)


# -- the background fetcher ---------------------------------------------------------------
def _warn(message: str) -> None:
    warnings.warn(message, CarbonSourceWarning, stacklevel=2)


class LiveCarbon:
    """The carbon settings of each tick from a live source (see the module docstring).

    ``fetch`` returns an :class:`Intensity` or raises FetchError; ``fallback`` is the
    table figure (its PUE applies to the live figures too). ``warn`` is told, once per
    run of failures, what failed (default: a :class:`CarbonSourceWarning`);
    :meth:`drain_warnings` hands the same lines to the engine (event rows in the file).
    """

    def __init__(self, name: str, fetch: Callable[[], Intensity], fallback: CarbonInfo, *,
                 refresh_s: float = REFRESH_S, retry_s: float = RETRY_S,
                 stale_s: float = STALE_S, clock: Callable[[], float] = time.monotonic,
                 warn: Callable[[str], None] | None = _warn):
        self.name = name
        self.fetch = fetch
        self.fallback = fallback
        self.refresh_s = refresh_s
        self.retry_s = retry_s
        self.stale_s = stale_s
        self.clock = clock
        self.warn = warn
        self._cond = threading.Condition()
        self._value = self._table(f"{name}: waiting for the first answer")
        self._good: tuple[CarbonInfo, float] | None = None  # the last answer, when
        self._failures = 0  # failed fetches in a row
        self._warnings: list[str] = []
        self.answers = 0  # fetches finished, good or not
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _table(self, why: str) -> CarbonInfo:
        f = self.fallback
        return CarbonInfo(f.g_per_kwh, f.pue, f"{f.source} ({why})", f.is_default)

    def current(self) -> CarbonInfo:
        """The carbon settings in force now; never waits for the network."""
        return self._value

    def start(self) -> None:
        """Fetch now and then as the answers say, on a daemon thread (until close(),
        which runs at interpreter exit too)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tuimeter-carbon",
                                            daemon=True)
            self._thread.start()
            atexit.register(self.close)

    def close(self) -> None:
        """Stop fetching: the fetch under way is cut short (its sockets shut) and the
        thread is waited for, at most :data:`CLOSE_WAIT_S`. The wait matters at exit: a
        thread left inside OpenSSL (loading the CA certificates, a handshake) while the
        process exits crashes it (SIGSEGV in OPENSSL_cleanup)."""
        self._stop.set()
        abort = getattr(self.fetch, "abort", None)
        if abort is not None:
            abort()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
        atexit.unregister(self.close)

    def _run(self) -> None:
        delay = 0.0
        while not self._stop.wait(delay):
            delay = self.fetch_once()

    def fetch_once(self) -> float:
        """One fetch, its result put in force; seconds until the next one."""
        try:
            answer = self.fetch()
        except FetchError as exc:
            if self._stop.is_set():  # closed under it: nothing to say
                return 0.0
            return self._failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug here must not end the fetching
            return self._failed(f"{type(exc).__name__}: {_short(exc)}")
        value = CarbonInfo(answer.g_per_kwh, self.fallback.pue, answer.source,
                           provider=self.name)
        with self._cond:
            self._value, self._good, self._failures = value, (value, self.clock()), 0
            self.answers += 1
            self._cond.notify_all()
        refresh = self.refresh_s if answer.refresh_s is None else answer.refresh_s
        return min(max(refresh, MIN_REFRESH_S), MAX_REFRESH_S)

    def _failed(self, reason: str) -> float:
        good = self._good
        if good is not None and self.clock() - good[1] < self.stale_s:
            value = replace(good[0], source=f"{good[0].source} (refresh failed: {reason})")
            line = (f"carbon source {self.name}: refresh failed ({reason}); keeping "
                    f"{good[0].g_per_kwh:g} g/kWh for now")
        else:
            value = self._table(f"{self.name} failed: {reason}")
            line = (f"carbon source {self.name} failed ({reason}); using "
                    f"{self.fallback.g_per_kwh:g} g/kWh from the table")
        with self._cond:
            self._failures += 1
            first = self._failures == 1
            self._value = value
            if first:
                self._warnings.append(line)
            self.answers += 1
            self._cond.notify_all()
        if first and self.warn is not None:
            self.warn(line)
        return min(self.retry_s * 2 ** (self._failures - 1), max(self.refresh_s, self.retry_s))

    def drain_warnings(self) -> list[str]:
        """The warning lines since the last call (the engine writes them as events)."""
        with self._cond:
            out, self._warnings = self._warnings, []
        return out

    def wait_answers(self, n: int, timeout_s: float | None = None) -> bool:
        """Wait until ``n`` fetches have finished (good or not); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.answers >= n, timeout_s)


def open_live(settings: LiveSettings | None, fallback: CarbonInfo,
              **kwargs: Any) -> LiveCarbon | None:
    """The fetcher for ``settings`` (None: the table, no fetcher); not started."""
    if settings is None:
        return None
    return LiveCarbon(settings.source, make_fetch(settings), fallback, **kwargs)
