"""The node's power from its BMC over Redfish: ``/redfish/v1/Chassis/{id}/Power``
(``PowerControl[].PowerConsumedWatts``) or the newer ``EnvironmentMetrics``
(``PowerWatts.Reading``, ``EnergykWh.Reading``) that a chassis beside its
``PowerSubsystem`` links to.

Facts (../shared/SENSORS.md section 6; DMTF Redfish schemas ``Power`` v1 (deprecated),
``EnvironmentMetrics`` v1): HTTPS with basic auth, BMCs slow (seconds) and often with
self-signed certificates: a CA file (``TUIMETER_REDFISH_CA_FILE``), never "verify off".
The URL and the credentials come from the environment or the config file only, never the
command line (a process list shows it).

Which chassis: ``TUIMETER_REDFISH_CHASSIS``, else the one chassis with a power reading
that is not an enclosure, rack or other container of several nodes (its power is not
this node's); several candidates are refused in one line naming them. The chassis and
its resource are found by the meter's thread on its first fetch (no network I/O in
``open``), then polled every ``redfish_interval_s`` (5 s, at least 2 s) with a timeout
(:class:`BackgroundMeter`: each reading held until the next; a slow, refusing or
garbled BMC is one event and the rest goes on). ``EnergykWh`` where the BMC keeps it is
named in the status line but not used for ticks: its steps are whole kWh/1000 (3.6 kJ).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping, Sequence

from ..model import Domain, SensorStatus
from .base import SensorUnavailable
from . import node_options
from .node_common import shown
from .node_poller import FetchError, PolledNodeSensor

#: every option of this sensor (the settings layer takes them from here); the password
#: is a secret (a config file holding it should be private)
OPTIONS = node_options.REDFISH
URL, USER, PASSWORD, CA_FILE, CHASSIS, INTERVAL, TIMEOUT = OPTIONS
MIN_INTERVAL_S = 2.0
DOMAIN_ID = "redfish-node"
NOT_SET = "no Redfish URL set"
#: chassis types that hold several nodes (DMTF Chassis.ChassisType): never one node's power
CONTAINERS = frozenset({"Enclosure", "Rack", "RackGroup", "Row", "Pod", "Expansion",
                        "StorageEnclosure", "PowerStrip", "Zone", "Shelf", "IPBasedDrive"})
MAX_BODY = 1 << 20  # bytes of one answer read at most


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def power_of(resource: dict) -> float | None:
    """The node's power in a ``Power`` or ``EnvironmentMetrics`` resource, W (None: none)."""
    reading = resource.get("PowerWatts")
    if isinstance(reading, dict) and _number(reading.get("Reading")) is not None:
        return _number(reading["Reading"])
    controls = resource.get("PowerControl")
    if isinstance(controls, list):
        for c in controls:
            if isinstance(c, dict) and _number(c.get("PowerConsumedWatts")) is not None:
                return _number(c["PowerConsumedWatts"])
    return None


class RedfishSensor(PolledNodeSensor):
    """The BMC's Redfish power reading, polled off the sampling path (module docstring)."""

    name = "redfish"
    absent_reasons = (NOT_SET,)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._values = values  # the resolved settings (discovery); None: built bare
        self._resource: str | None = None  # the URL of the power resource, once found

    # -- settings ----------------------------------------------------------------------
    def _settings(self) -> tuple[str, float, float]:
        """(base URL, interval s, timeout s); SensorUnavailable for a missing or bad URL."""
        url = str(URL.value(self._values)).rstrip("/")
        if not url:
            raise SensorUnavailable(NOT_SET)
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None or parts.password is not None:  # never echoed
            raise SensorUnavailable(f"{URL.env} holds credentials: put them in {USER.env} "
                                    f"and {PASSWORD.env} (a URL shows in logs)")
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise SensorUnavailable(f"{URL.env} must be https://host[:port], not {shown(url)!r}")
        ca = str(CA_FILE.value(self._values))
        if ca and not os.path.isfile(ca):
            raise SensorUnavailable(f"{CA_FILE.env}: no file {shown(ca)!r}")
        every = max(MIN_INTERVAL_S, float(INTERVAL.value(self._values)))
        return url, every, float(TIMEOUT.value(self._values))

    def is_available(self) -> SensorStatus:
        try:
            url, every, _ = self._settings()
        except SensorUnavailable as exc:
            return SensorStatus(self.name, False, exc.reason, exc.fix)
        except ValueError as exc:
            return SensorStatus(self.name, False, str(exc))
        clear = (" (in clear text: use https)"
                 if url.startswith("http:") and USER.value(self._values) else "")
        return SensorStatus(self.name, True, f"{shown(url)} every {every:g} s{clear}")

    # -- HTTP --------------------------------------------------------------------------
    def _get(self, path: str) -> dict:
        """One GET of a Redfish resource below the base URL, as JSON; FetchError."""
        url, _, timeout = self._settings()
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(url + "/", path))
        if urllib.parse.urlsplit(url).netloc != parts.netloc:
            raise FetchError(f"the BMC linked to another host ({shown(parts.netloc)}): refused")
        req = urllib.request.Request(parts.geturl(), headers={"Accept": "application/json"})
        user, password = str(USER.value(self._values)), str(PASSWORD.value(self._values))
        if user:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        context = None
        if parts.scheme == "https":
            ca_file = str(CA_FILE.value(self._values)) or None
            context = ssl.create_default_context(cafile=ca_file)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                body = resp.read(MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise FetchError(f"the BMC refused the credentials (HTTP {exc.code}): check "
                                 f"{USER.env} and {PASSWORD.env}") from None
            raise FetchError(f"HTTP {exc.code} for {shown(parts.path)}") from None
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            if isinstance(why, TimeoutError) or isinstance(exc, TimeoutError):
                raise FetchError(f"the BMC gave no answer in {timeout:g} s") from None
            raise FetchError(f"cannot reach the BMC: {shown(str(why), 80)}") from None
        if len(body) > MAX_BODY:
            raise FetchError(f"{shown(parts.path)}: an answer over {MAX_BODY} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise FetchError(f"{shown(parts.path)} is not JSON") from None
        if not isinstance(data, dict):
            raise FetchError(f"{shown(parts.path)} is not a JSON object")
        return data

    @staticmethod
    def _link(obj: dict, key: str) -> str | None:
        link = obj.get(key)
        target = link.get("@odata.id") if isinstance(link, dict) else None
        return target if isinstance(target, str) and target.startswith("/redfish/") else None

    def _find_resource(self) -> str:
        """The power resource's path: the chosen (or the one node) chassis's
        EnvironmentMetrics where it reads power, else its Power; FetchError."""
        chosen = str(CHASSIS.value(self._values))
        members = self._get("/redfish/v1/Chassis").get("Members")
        ids = [m.get("@odata.id") for m in members if isinstance(m, dict)] if isinstance(
            members, list) else []
        found: list[tuple[str, str, str]] = []  # (chassis id, resource path, schema)
        for path in [p for p in ids if isinstance(p, str) and p.startswith("/redfish/")][:32]:
            cid = path.rstrip("/").rsplit("/", 1)[-1]
            if chosen and cid != chosen:
                continue
            chassis = self._get(path)
            if not chosen and chassis.get("ChassisType") in CONTAINERS:
                continue
            for key in ("EnvironmentMetrics", "Power"):
                target = self._link(chassis, key)
                if target and power_of(self._get(target)) is not None:
                    found.append((cid, target, key))
                    break
        if not found:
            raise FetchError(f"no chassis {shown(chosen)!r} with a power reading" if chosen
                             else "no node chassis with a power reading")
        if len(found) > 1:
            raise FetchError(f"several chassis read power ({', '.join(shown(f[0], 20) for f in found)}):"
                             f" set {CHASSIS.env} to this node's")
        cid, target, schema = found[0]
        energy = " (it keeps an EnergykWh counter)" if schema == "EnvironmentMetrics" and \
            _number((self._get(target).get("EnergykWh") or {}).get("Reading")) is not None else ""
        self.note = f"chassis {shown(cid, 24)}, {schema}{energy}"
        return target

    def fetch(self) -> float:
        """One reading of the node's power, W; FetchError (one line) otherwise."""
        if self._resource is None:
            self._resource = self._find_resource()
        power = power_of(self._get(self._resource))
        if power is None:
            raise FetchError(f"{shown(self._resource)} holds no power reading")
        return power

    # -- life cycle -------------------------------------------------------------------
    def open(self) -> Sequence[Domain]:
        url, every, timeout = self._settings()
        domain = self._start(DOMAIN_ID, "node (Redfish)", f"the BMC at {shown(url)} (Redfish "
                             f"PowerWatts or PowerConsumedWatts)", every, timeout)
        return [domain]
