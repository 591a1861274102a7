"""A small client of the Prometheus HTTP API (``/api/v1/query``), which Thanos, Mimir and
VictoriaMetrics answer too.

Only what the cluster view needs: an instant query, whose answer is a vector (one sample
per series) or a matrix (a range selector ``series[30s]``: the raw samples, each with the
timestamp of its scrape). Nothing in an answer is trusted: it must be the API's JSON
(``{"status": "success", "data": {"resultType": ..., "result": [...]}}``), labels must be
text, values numbers written as text (``"NaN"`` and ``"+Inf"`` are parsed and left to the
caller to refuse), timestamps finite; the body is read up to :data:`MAX_BODY_BYTES`.

Authentication comes from the environment only, never the command line
(:data:`~tuimeter.cluster.options.TOKEN_ENV`: a bearer token;
:data:`~tuimeter.cluster.options.USER_ENV` and
:data:`~tuimeter.cluster.options.PASSWORD_ENV`: basic auth); TLS checks the server against
the system's CA certificates or ``ca_file``, never "verify off". Every failure is one
:class:`PromError` line (down, timed out, refused the credentials, not its API).
"""

from __future__ import annotations

import base64
import json
import math
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .options import PASSWORD_ENV, TOKEN_ENV, USER_ENV

#: the most of an answer read (64 series x 1000 samples is about 3 MB)
MAX_BODY_BYTES = 64 << 20
#: the most series one answer may hold
MAX_SERIES = 200_000


class PromError(Exception):
    """The query failed; ``str()`` is one line for the user."""


@dataclass(frozen=True)
class Series:
    """One series of an answer: its labels and samples ``(unix seconds, value)``, oldest
    first (a vector: one sample)."""

    labels: dict[str, str]
    samples: tuple[tuple[float, float], ...]


def auth_header(env: Mapping[str, str] = os.environ) -> str | None:
    """The ``Authorization`` header the environment asks for, or None. Both a token and
    a user: ValueError (say which one to use)."""
    token = env.get(TOKEN_ENV, "").strip()
    user = env.get(USER_ENV, "")
    if token and user:
        raise ValueError(f"set either {TOKEN_ENV} or {USER_ENV}/{PASSWORD_ENV}, not both")
    if token:
        return f"Bearer {token}"
    if user:
        raw = f"{user}:{env.get(PASSWORD_ENV, '')}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")
    return None


class PromClient:
    """Queries one Prometheus API at ``url`` (``http(s)://HOST:PORT[/prefix]``).

    ``timeout_s`` bounds each query (connect and read); ``ca_file`` the CA certificates
    for https; ``env`` where credentials come from. ``opener`` (tests) replaces
    ``urllib.request.urlopen``."""

    def __init__(self, url: str, timeout_s: float = 5.0, ca_file: str | None = None,
                 env: Mapping[str, str] = os.environ,
                 opener: Callable[..., Any] | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = auth_header(env)
        self._open: Callable[..., Any] = opener or urllib.request.urlopen
        self._ssl = None
        if self.url.startswith("https://"):
            try:
                self._ssl = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"--ca-file {ca_file}: {getattr(exc, 'strerror', None) or exc}"
                                 ) from None
        elif ca_file:
            raise ValueError("--ca-file is for an https:// Prometheus")
        if self._auth:
            from ..exposure import warn_secret_over_http

            warn_secret_over_http(self.url, "the Prometheus credential")

    def query(self, expr: str, at: float | None = None) -> list[Series]:
        """The answer to instant query ``expr`` (at unix time ``at``; None: now)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._auth:
            req.add_header("Authorization", self._auth)
        body = self._fetch(req)
        return parse_answer(body, self.url)

    def _fetch(self, req: urllib.request.Request) -> bytes:
        where = self.url
        try:
            kwargs: dict[str, Any] = {"timeout": self.timeout_s}
            if self._ssl is not None:
                kwargs["context"] = self._ssl
            with self._open(req, **kwargs) as resp:
                body = resp.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            hint = {401: f" (check {TOKEN_ENV} or {USER_ENV}/{PASSWORD_ENV})",
                    403: " (the credentials may not read this data)"}.get(exc.code, "")
            detail = _error_text(exc)
            raise PromError(f"Prometheus at {where} answered HTTP {exc.code}{hint}"
                            + (f": {detail}" if detail else "")) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = getattr(reason, "strerror", None) or str(reason)
            raise PromError(f"cannot reach Prometheus at {where}: {text}") from None
        except (TimeoutError, OSError) as exc:
            text = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            raise PromError(f"cannot reach Prometheus at {where}: {text}") from None
        if len(body) > MAX_BODY_BYTES:
            raise PromError(f"Prometheus at {where} answered more than "
                            f"{MAX_BODY_BYTES >> 20} MiB")
        return body


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The API's own ``error`` text of a failed answer (escaped later), cut short."""
    try:
        obj = json.loads(exc.read(65536))
        return str(obj.get("error", ""))[:160] if isinstance(obj, dict) else ""
    except (OSError, ValueError, AttributeError):
        return ""


def _number(text: object) -> float:
    if not isinstance(text, str):
        raise ValueError("a value that is not text")
    return float(text)  # "NaN", "+Inf" parse: the caller refuses them


def _timestamp(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a timestamp that is not a number")
    ts = float(value)
    if not math.isfinite(ts) or not 0 <= ts < 1e11:
        raise ValueError("a timestamp out of range")
    return ts


def _pair(value: object) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("a sample that is not [timestamp, value]")
    return _timestamp(value[0]), _number(value[1])


def parse_answer(body: bytes, where: str = "Prometheus") -> list[Series]:
    """The series of an API answer; PromError (one line) for anything else."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise PromError(f"Prometheus at {where} answered something that is not its API "
                        "(not JSON)") from None
    if not isinstance(obj, dict) or obj.get("status") != "success":
        err = str(obj.get("error", ""))[:160] if isinstance(obj, dict) else ""
        raise PromError(f"Prometheus at {where} refused the query"
                        + (f": {err}" if err else " (not its API's answer)"))
    data = obj.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    kind = data.get("resultType") if isinstance(data, dict) else None
    if kind not in ("vector", "matrix") or not isinstance(result, list):
        raise PromError(f"Prometheus at {where} answered no vector or matrix")
    if len(result) > MAX_SERIES:
        raise PromError(f"Prometheus at {where} answered more than {MAX_SERIES} series")
    out = []
    try:
        for item in result:
            if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
                raise ValueError("a series without labels")
            labels = item["metric"]
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
                raise ValueError("labels that are not text")
            if kind == "vector":
                samples: tuple = (_pair(item.get("value")),)
            else:
                values = item.get("values")
                if not isinstance(values, list):
                    raise ValueError("a matrix series without values")
                samples = tuple(sorted(_pair(v) for v in values))
            out.append(Series(dict(labels), samples))
    except ValueError as exc:
        raise PromError(f"Prometheus at {where} answered a malformed result: {exc}") from None
    return out
