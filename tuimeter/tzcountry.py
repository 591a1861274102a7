"""The country a machine is probably in, guessed offline from its time zone.

CodeCarbon asks a web service where the machine is; tuimeter runs offline, so until a
country is set (``--country``, ``TUIMETER_COUNTRY``, config.toml) it guesses one from the
system's time zone: ``$TZ`` (``Europe/Berlin`` or ``:Europe/Berlin``), else the target of
``/etc/localtime`` (``../usr/share/zoneinfo/Europe/Berlin``), else ``/etc/timezone``
(Debian); then that zone's country in the IANA tables the system ships
(``/usr/share/zoneinfo/zone.tab``: one country per zone; else ``zone1970.tab`` when it
names a single country). A zone shared by several countries, ``UTC`` or anything
unreadable gives no guess (the world average stays).

Every file is read as untrusted: a bounded read, a zone name of tz characters only, a
country code of two capital letters. ``TUIMETER_TZ_ROOT`` moves the root these paths are
read under (tests build fake zone files there).
"""

from __future__ import annotations

import os
import re
from typing import Mapping

#: the environment variable naming another root for /etc/localtime, /etc/timezone and
#: /usr/share/zoneinfo (tests)
ROOT_ENV = "TUIMETER_TZ_ROOT"
#: the most of one zone file read (zone.tab is about 20 kB)
MAX_READ_BYTES = 1 << 20
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+){1,2}")
_CODE = re.compile(r"[A-Z]{2}")


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_READ_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def zone_name(env: Mapping[str, str] = os.environ) -> str | None:
    """The system's IANA time zone (``Europe/Berlin``), or None."""
    root = env.get(ROOT_ENV) or "/"
    tz = env.get("TZ", "").strip().lstrip(":")
    if tz:
        if "zoneinfo/" in tz:  # TZ=/usr/share/zoneinfo/Europe/Berlin
            tz = tz.rsplit("zoneinfo/", 1)[1]
        return tz if _ZONE.fullmatch(tz) else None
    try:
        target = os.readlink(os.path.join(root, "etc", "localtime"))
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        name = target.rsplit("zoneinfo/", 1)[1]
        return name if _ZONE.fullmatch(name) else None
    name = _read(os.path.join(root, "etc", "timezone")).strip()
    return name if _ZONE.fullmatch(name) else None


def zone_country(zone: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The ISO 3166 alpha-2 code of the one country ``zone`` is in, or None."""
    folder = os.path.join(env.get(ROOT_ENV) or "/", "usr", "share", "zoneinfo")
    for table in ("zone.tab", "zone1970.tab"):
        for line in _read(os.path.join(folder, table)).splitlines():
            fields = line.split("\t")
            if line.startswith("#") or len(fields) < 3 or fields[2] != zone:
                continue
            codes = fields[0].split(",")
            if len(codes) == 1 and _CODE.fullmatch(codes[0]):
                return codes[0]
            return None  # several countries share it: no guess
    return None


def guess_country(env: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(alpha-2 code, time zone) guessed from the system's time zone, or None."""
    zone = zone_name(env)
    if zone is None:
        return None
    code = zone_country(zone, env)
    return (code, zone) if code else None
