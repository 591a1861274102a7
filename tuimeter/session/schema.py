"""The session CSV, defined once: columns, row kinds, the typed :class:`Row`, how a row is
rendered (:func:`render`) and parsed (:func:`parse_row`), and what a session's first rows
say about it (:class:`SessionMeta`). The writer (:mod:`.csvfile`), the reader
(:mod:`.reader`), ``report``, the replay sensor and :mod:`tuimeter.frames` all go through
this module; docs/SESSION_FILE.md describes the format and the data flow.

Schema 2 keeps the 15 columns of schema 1 and adds two row kinds, written
before the first tick of every file (and a ``domain`` row again for a domain first seen,
or changed, later):

* ``settings``: one row after the ``session`` row; its ``label`` is a JSON object
  ``{"schema": 2, "carbon": {"g_per_kwh": 475.0, "pue": 1.0, "source": "..."}}`` (schema
  3 adds ``"provider"`` to ``carbon``).
* ``domain``: one row per domain; ``domain``, ``source``, ``in_total`` and
  ``provenance`` as on its sample rows; ``label`` a JSON object
  ``{"kind": "gpu", "name": "GPU 0", "label": "NVIDIA H100"}``.

Schema 3 adds one row kind, written when a live carbon source (``--carbon-source``)
changes the carbon settings in force, before the sample rows of the first tick that uses
them:

* ``carbon``: ``source`` the provider (``electricitymaps``, ``uk-carbon-intensity``, or
  ``table`` when the table figure stands in), ``label`` a JSON object
  ``{"g_per_kwh": 212.0, "pue": 1.0, "source": "...", "provider": "..."}``. The figure in
  force at a tick is that of the last ``carbon`` row before its samples, else the
  ``settings`` row's (which a table-only session never changes).

The ``session`` row keeps its human text (``tuimeter schema 2; carbon 475 g/kWh (...);
pue 1; sensors ...``). Readers of schema 1 pass over row kinds they do not know, so they
read schema 2 files as before; this reader reads schema 1 files (no ``settings`` row) by
the old means: carbon settings from the session row's text, a domain's kind guessed from
its id (:func:`guess_kind`).

Everything read here came from a file: nothing is trusted (numbers are bounded, JSON is
checked for its types, text is echoed only through :func:`~tuimeter.text.safe_text`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import NamedTuple, Sequence

from ..carbon import CarbonError, check_intensity, check_pue
from ..model import PID_LIMIT, CarbonInfo, Domain, DomainKind, Provenance, Snapshot, Work
from ..text import safe_text
from ..work import check_count, check_unit

COLUMNS = (
    "timestamp",  # ISO 8601 UTC with microseconds, end of the interval (or the marker's instant)
    "elapsed_s",  # seconds since the session started
    "interval_s",  # length of the interval this row covers (0 for markers and events)
    "host",
    "session",  # random id of this recording (merging tells files apart by it)
    "kind",  # see ROW_KINDS
    "domain",  # package-0, package-0/dram, gpu0, total, ... ; job/process rows: cpu, gpu, all
    "source",  # rapl | nvml | powermetrics | estimate | attribution | key | cli | api | socket
    "in_total",  # 1 if this domain adds into the machine total, else 0 (empty: n/a)
    "power_w",  # average power over the interval
    "energy_j",  # energy within the interval (not cumulative)
    "co2_g",  # CO2e of energy_j
    "provenance",  # measured | estimated | attributed | interpolated | lost
    "label",  # marker label, event message, process name, session details, JSON (schema 2)
    "pid",  # process id for job/process/marker rows
)
N_COLUMNS = len(COLUMNS)
#: written into the ``session`` row's text and the ``settings`` row
from ..version import SCHEMA_VERSION  # noqa: E402  (the one place it is set)

# -- row kinds ------------------------------------------------------------------------
SESSION = "session"  # first row of a session (of each file of it): human-readable details
SETTINGS = "settings"  # schema 2: the schema version and carbon settings, JSON in label
DOMAIN = "domain"  # schema 2: one per domain, its kind and names as JSON in label
CARBON = "carbon"  # schema 3: the carbon settings from this tick on (a live source changed)
SAMPLE = "sample"  # one per domain per tick
TOTAL = "total"  # the machine total per tick
MARKER = "marker"
EVENT = "event"
JOB = "job"  # attribution: the followed command
PROCESS = "process"  # attribution: the top processes, idle/system, other processes
#: the ``domain`` of a ``process`` row that settles, at a full scan of the two-tier scan,
#: a process's part of the window's ``other processes`` (docs/scan.md); the tick's own
#: process rows are domain ``all`` and alone add up to its total
SETTLED = "settled"
TREE = "tree"  # attribution: an owner tree (a process tree that marked, a rank of the job)
#: attribution per cgroup: the top cgroups of the tick (label: the cgroup path, or
#: ``unknown``), then ``other cgroups`` and ``idle/system``; older readers pass over it
CGROUP = "cgroup"
#: a domain's own device readings when new (GPU busy %, memory, clocks: JSON in label), and
#: the machine's CPU load each tick (domain ``total``); older readers pass over it
DEVICE = "device"
#: work a program counted (``Meter.count``, ``tuimeter count``): one row per unit, ``domain``
#: the unit's name, ``label`` the count; older readers pass over it
WORK = "work"
ROW_KINDS = frozenset({SESSION, SETTINGS, DOMAIN, CARBON, SAMPLE, TOTAL, MARKER, EVENT, JOB,
                       PROCESS, TREE, CGROUP, DEVICE, WORK})
#: the kinds that describe a session rather than measure it
META_KINDS = frozenset({SESSION, SETTINGS, DOMAIN})

# -- provenance words ------------------------------------------------------------------
#: a sample row whose sensor could not be read (no energy)
LOST = "lost"
#: provenance words of a sample row
SAMPLE_PROVENANCES = frozenset({*(str(p) for p in Provenance), LOST})
#: provenance words of a domain (a ``domain`` row)
DOMAIN_PROVENANCES = frozenset(str(p) for p in Provenance)

#: an ``in_total`` cell (pandas writes a column with empty cells as floats: ``1.0``)
IN_TOTAL = {"1": True, "0": False, "1.0": True, "0.0": False}
#: the largest number a cell may hold (W, J, g, s): no machine comes near a terawatt or a
#: terajoule in one interval, and sums of millions of such cells stay finite
MAX_NUMBER = 1e12
#: cell text echoed in a problem is cut to this many characters
ECHO_MAX = 40
#: a JSON label longer than this is not read (a domain's description is a few dozen bytes)
MAX_JSON_CHARS = 4096


class BadRow(ValueError):
    """A row that breaks the schema; ``str()`` says which cell and why."""


class Row(NamedTuple):
    """One row, typed. Numbers are floats in the units of their names, ``None`` where the
    cell is empty; a sample row with ``energy_j`` None was lost (its sensor could not be
    read). Text cells are as in the file (escape them before showing them)."""

    line: int  # line number in the file (0 for a row being written)
    wall_s: float  # ``timestamp``, seconds since the epoch
    elapsed_s: float
    interval_s: float
    host: str
    session: str
    kind: str
    domain: str
    source: str
    in_total: bool | None  # sample and domain rows: adds into the machine total
    power_w: float | None
    energy_j: float | None
    co2_g: float | None
    provenance: str
    label: str
    pid: int | None


# -- rendering ------------------------------------------------------------------------
def iso_utc(ts: float) -> str:
    """Seconds since the epoch -> ``2026-11-29T19:56:40.123456+00:00``."""
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).isoformat(timespec="microseconds")


def fmt_number(x: float | None, digits: int = 6) -> str:
    """A number cell: ``digits`` decimals, trailing zeros dropped; empty for None or NaN."""
    if x is None:
        return ""
    return f"{x:.{digits}f}".rstrip("0").rstrip(".") if x == x else ""


#: the time cells of the last row rendered: ((wall_s, elapsed_s, interval_s), cells).
#: Every row of a tick has the same three, so a tick renders them once (one tuple,
#: swapped whole: safe from several threads)
_last_time_cells: tuple[tuple, tuple[str, str, str]] = ((None, None, None), ("", "", ""))


def _time_cells(wall: float, elapsed: float, interval: float) -> tuple[str, str, str]:
    global _last_time_cells
    key = (wall, elapsed, interval)
    last = _last_time_cells
    if last[0] == key and None not in key:
        return last[1]
    cells = (iso_utc(wall), fmt_number(elapsed), fmt_number(interval))
    _last_time_cells = (key, cells)
    return cells


def render(row: Row) -> tuple[str, ...]:
    """The cells of ``row`` in COLUMNS order. Raises ValueError, TypeError or
    OverflowError for a value that is not what its column holds (the writer refuses
    that row alone)."""
    return (*_time_cells(row.wall_s, row.elapsed_s, row.interval_s),
            row.host, row.session, row.kind, row.domain, row.source,
            "" if row.in_total is None else ("1" if row.in_total else "0"),
            fmt_number(row.power_w), fmt_number(row.energy_j), fmt_number(row.co2_g, 9),
            row.provenance, row.label, "" if row.pid is None else str(int(row.pid)))


# -- parsing --------------------------------------------------------------------------
def echo(text: str) -> str:
    """Cell text for a problem line: cut, escaped, quoted."""
    cut = text if len(text) <= ECHO_MAX else text[:ECHO_MAX] + "..."
    return "'" + safe_text(cut) + "'"


def number(text: str, name: str) -> float:
    """A cell that must hold a number from 0 to MAX_NUMBER (not nan, inf, negative)."""
    try:
        x = float(text)
    except ValueError:
        raise BadRow(f"{name} {echo(text)} is not a number") from None
    if not 0.0 <= x <= MAX_NUMBER:  # also false for nan; 1e400 reads as inf
        raise BadRow(f"{name} {echo(text)} is not a number from 0 to {MAX_NUMBER:g}")
    return x


def optional_number(text: str, name: str) -> float | None:
    """An empty cell (a missing value) or a :func:`number`."""
    return None if text == "" else number(text, name)


def wall_s(text: str) -> float:
    """An ISO 8601 timestamp as seconds since the epoch."""
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError, OSError):
        raise BadRow(f"timestamp {echo(text)} is not an ISO 8601 time") from None


def pid_of(text: str) -> int | None:
    """An empty cell or a process id (``77``, or ``77.0`` as pandas writes it): 0 ..
    :data:`~tuimeter.model.PID_LIMIT`, the range :func:`~tuimeter.model.is_pid` lets in
    (and 0, macOS's kernel_task)."""
    if text == "":
        return None
    digits = text[:-2] if text.endswith(".0") else text
    if (not (digits.isascii() and digits.isdigit()) or len(digits) > 8
            or int(digits) > PID_LIMIT):
        raise BadRow(f"pid {echo(text)} is not a process id")
    return int(digits)


def parse_row(cells: list[str], line: int = 0) -> Row:
    """Check one row's cells (in COLUMNS order) and parse them; raises BadRow saying
    which cell is wrong. This is the definition of a good row:

    ``timestamp`` is ISO 8601; ``elapsed_s`` and ``interval_s`` are numbers from 0 to
    MAX_NUMBER, and so are ``power_w``, ``energy_j`` and ``co2_g`` where not empty
    (``nan``, ``inf``, ``1e400``, negative: not readings); ``pid`` is empty or a process
    id; a sample has a domain, ``in_total`` 0 or 1, a known provenance, and no energy
    when it says ``lost``; a ``domain`` or ``settings`` row has the JSON label its kind
    defines (:func:`domain_of`, :func:`settings_of`).
    """
    if len(cells) != N_COLUMNS:
        raise BadRow(f"{len(cells)} cells, expected {N_COLUMNS}")
    kind = cells[5]
    energy = optional_number(cells[10], "energy_j")
    if kind == SAMPLE:
        if not cells[6]:
            raise BadRow("a sample with no domain")
        if cells[8] not in IN_TOTAL:
            raise BadRow(f"in_total {echo(cells[8])} is not 0 or 1")
        prov = cells[12]
        if prov not in SAMPLE_PROVENANCES:
            raise BadRow(f"provenance {echo(prov)} is not one of "
                         f"{', '.join(sorted(SAMPLE_PROVENANCES))}")
        if prov == LOST and energy is not None:
            raise BadRow("a lost sample with an energy_j")
    row = _new_row(Row, (line, wall_s(cells[0]), number(cells[1], "elapsed_s"),
                         number(cells[2], "interval_s"), cells[3], cells[4], kind,
                         cells[6], cells[7], IN_TOTAL.get(cells[8]),
                         optional_number(cells[9], "power_w"), energy,
                         optional_number(cells[11], "co2_g"), cells[12], cells[13],
                         pid_of(cells[14])))
    if kind == DOMAIN:
        domain_of(row)
    elif kind == SETTINGS:
        settings_of(row)
    elif kind == TREE:
        tree_of(row)
    elif kind == CARBON:
        carbon_of(row)
    elif kind == DEVICE:
        device_of(row)
    elif kind == WORK:
        work_of(row)
    return row


_new_row = tuple.__new__  # Row(...) without the Python-level __new__: the hot path


# -- schema 2: the structured rows -------------------------------------------------------
def _json_object(label: str, what: str) -> dict:
    if len(label) > MAX_JSON_CHARS:
        raise BadRow(f"a {what} label longer than {MAX_JSON_CHARS} characters")
    try:
        obj = json.loads(label)
    except (ValueError, RecursionError):
        raise BadRow(f"a {what} label {echo(label)} that is not JSON") from None
    if not isinstance(obj, dict):
        raise BadRow(f"a {what} label {echo(label)} that is not a JSON object")
    return obj


def _text(obj: dict, key: str, what: str) -> str:
    value = obj.get(key, "")
    if not isinstance(value, str):
        raise BadRow(f"a {what} label whose {key} is not text")
    return value


def domain_row(d: Domain, wall: float, elapsed: float, host: str, session: str) -> Row:
    """The ``domain`` row that describes ``d``."""
    label = json.dumps({"kind": str(d.kind), "name": d.name, "label": d.label},
                       ensure_ascii=False, separators=(",", ":"))
    return Row(0, wall, elapsed, 0.0, host, session, DOMAIN, d.id, d.source, d.in_total,
               None, None, None, str(d.provenance), label, None)


def domain_of(row: Row) -> Domain:
    """The :class:`~tuimeter.model.Domain` a ``domain`` row describes; BadRow if it does
    not. A kind this version does not know (a newer writer's) reads as ``other``."""
    if not row.domain:
        raise BadRow("a domain row with no domain")
    if row.in_total is None:
        raise BadRow("a domain row with no in_total")
    if row.provenance not in DOMAIN_PROVENANCES:
        raise BadRow(f"provenance {echo(row.provenance)} is not one of "
                     f"{', '.join(sorted(DOMAIN_PROVENANCES))}")
    obj = _json_object(row.label, "domain")
    kind_text = _text(obj, "kind", "domain")
    try:
        kind = DomainKind(kind_text)
    except ValueError:
        kind = DomainKind.OTHER
    return Domain(id=row.domain, name=_text(obj, "name", "domain") or row.domain, kind=kind,
                  source=row.source, provenance=Provenance(row.provenance),
                  in_total=row.in_total, label=_text(obj, "label", "domain"))


class TreeInfo(NamedTuple):
    """What a ``tree`` row says of its tree (besides pid and energy)."""

    name: str
    rank: str | None  # a small number as text, None when the tree is no rank
    in_job: bool


def tree_label(name: str, rank: str | None, in_job: bool) -> str:
    """The JSON label of a ``tree`` row."""
    return json.dumps({"name": name, "rank": rank, "job": in_job}, ensure_ascii=False,
                      separators=(",", ":"))


def tree_of(row: Row) -> TreeInfo:
    """The tree a ``tree`` row describes; BadRow if its label is not one (a rank must be a
    small number, as the writer's check made it)."""
    if row.pid is None:
        raise BadRow("a tree row with no pid")
    obj = _json_object(row.label, "tree")
    rank = obj.get("rank")
    if rank is not None and not (isinstance(rank, str) and 0 < len(rank) <= 9
                                 and rank.isascii() and rank.isdigit()):
        raise BadRow("a tree label whose rank is not a small number")
    return TreeInfo(_text(obj, "name", "tree"), rank, obj.get("job") is True)


#: the readings a ``device`` row holds (units in the keys, as ``DeviceInfo``'s fields) and
#: the values accepted for each; any other key (a later writer's) is passed over
DEVICE_READINGS: dict[str, tuple[float, float]] = {
    "util_pct": (0.0, 100.0), "mem_util_pct": (0.0, 100.0), "mem_used_b": (0.0, 2.0**64),
    "mem_total_b": (0.0, 2.0**64), "temp_c": (-100.0, 500.0), "power_limit_w": (0.0, 1e6),
    "clock_sm_mhz": (0.0, 1e6), "clock_mem_mhz": (0.0, 1e6), "freq_mhz": (0.0, 1e6)}


def device_row(domain: str, source: str, readings: dict[str, float], wall: float,
               elapsed: float, interval: float, host: str, session: str) -> Row:
    """A ``device`` row: ``readings`` (keys of :data:`DEVICE_READINGS`) of ``domain``,
    or of the machine (domain ``total``, source ``attribution``: its CPU load)."""
    label = json.dumps(readings, separators=(",", ":"))
    return Row(0, wall, elapsed, interval, host, session, DEVICE, domain, source, None,
               None, None, None, str(Provenance.MEASURED), label, None)


def device_of(row: Row) -> dict[str, float]:
    """The readings of a ``device`` row; BadRow for no domain, a label that is not a JSON
    object, or a known reading that is not a number within its bounds (a busy % of 150
    is no reading)."""
    if not row.domain:
        raise BadRow("a device row with no domain")
    obj = _json_object(row.label, "device")
    out = {}
    for key, (low, high) in DEVICE_READINGS.items():
        if key not in obj:
            continue
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not low <= value <= high:
            raise BadRow(f"a device label whose {key} {echo(str(value))} is not a number "
                         f"from {low:g} to {high:g}")
        out[key] = float(value)
    return out


def work_rows(work: Work, host: str, session: str) -> list[Row]:
    """The ``work`` rows of one count: one per unit, ``domain`` the unit, ``label`` the
    count (an integer where it is one, else the shortest text that reads back the same
    float), ``source`` and ``pid`` as on a marker row."""
    return [Row(0, work.timestamp, work.elapsed_s, 0.0, host, session, WORK, unit,
                work.source, None, None, None, None, "", count_text(n), work.pid)
            for unit, n in work.units]


def count_text(n: float) -> str:
    """A count as a cell: ``64`` for 64.0, else ``repr`` (``0.5``, ``1e+15``)."""
    return str(int(n)) if n == int(n) and abs(n) < 2**53 else repr(n)


def work_of(row: Row) -> tuple[str, float]:
    """(unit, count) of a ``work`` row; BadRow for a unit that is no name or a count
    that is not a positive finite number (:mod:`tuimeter.work`'s rules)."""
    try:
        unit = check_unit(row.domain)
        try:
            value = float(row.label)
        except ValueError:
            raise ValueError(f"count {echo(row.label)} is not a number") from None
        return unit, check_count(unit, value)
    except ValueError as exc:
        raise BadRow(f"a work row: {exc}") from None


class Settings(NamedTuple):
    """What a ``settings`` row says: the schema version, the carbon settings."""

    schema: int
    carbon: CarbonInfo | None


def _carbon_json(carbon: CarbonInfo) -> dict:
    return {"g_per_kwh": carbon.g_per_kwh, "pue": carbon.pue, "source": carbon.source,
            "provider": carbon.provider}


def _json(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def settings_label(carbon: CarbonInfo, tags: tuple[tuple[str, str], ...] = ()) -> str:
    """The JSON label of a ``settings`` row; ``"tags"`` (``record --tag``, an object of
    text) only when there are some."""
    obj: dict = {"schema": SCHEMA_VERSION, "carbon": _carbon_json(carbon)}
    if tags:
        obj["tags"] = dict(tags)
    return _json(obj)


def _carbon_info(carbon: dict, provider: object = None, what: str = "settings") -> CarbonInfo:
    """A CarbonInfo from the JSON of a settings or carbon row; CarbonError when its
    figures are out of bounds, BadRow when its source is not text."""
    provider = carbon.get("provider", "table") if provider is None else provider
    return CarbonInfo(check_intensity(carbon.get("g_per_kwh")),
                      check_pue(carbon.get("pue", 1.0)), _text(carbon, "source", what),
                      provider=provider if isinstance(provider, str) else "table")


def carbon_row(carbon: CarbonInfo, wall: float, elapsed: float, host: str,
               session: str) -> Row:
    """The ``carbon`` row that puts ``carbon`` in force from this tick on: ``source`` is
    the provider (``table``, ``electricitymaps``, ``uk-carbon-intensity``), ``label``
    ``{"g_per_kwh": 212.0, "pue": 1.0, "source": "...", "provider": "..."}``."""
    return Row(0, wall, elapsed, 0.0, host, session, CARBON, "", carbon.provider, None,
               None, None, None, "", _json(_carbon_json(carbon)), None)


def carbon_of(row: Row) -> CarbonInfo:
    """The carbon settings a ``carbon`` row puts in force; BadRow if it holds none that
    can be used (not JSON, a figure out of bounds: the previous figure stays)."""
    obj = _json_object(row.label, "carbon")
    try:
        return _carbon_info(obj, row.source or None, "carbon")
    except CarbonError as exc:
        raise BadRow(f"a carbon row with {exc}") from None


def settings_of(row: Row) -> Settings:
    """The settings a ``settings`` row holds; BadRow if its label is not one. A carbon
    figure out of bounds (see :func:`~tuimeter.carbon.check_intensity`) is left out."""
    obj = _json_object(row.label, "settings")
    schema = obj.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or not 2 <= schema < 1000:
        raise BadRow("a settings label with no schema version")
    carbon = obj.get("carbon")
    if carbon is None:
        return Settings(schema, None)
    if not isinstance(carbon, dict):
        raise BadRow("a settings label whose carbon is not a JSON object")
    try:
        info = _carbon_info(carbon)
    except CarbonError:
        info = None
    return Settings(schema, info)


def tags_of(row: Row) -> tuple[tuple[str, str], ...]:
    """The ``record --tag`` pairs a ``settings`` row holds (text as the file says it:
    escape it to show it); () when none or not readable."""
    try:
        obj = _json_object(row.label, "settings")
    except BadRow:
        return ()
    raw = obj.get("tags")
    if not isinstance(raw, dict):
        return ()
    return tuple((k, v) for k, v in raw.items() if isinstance(k, str) and isinstance(v, str))[:64]


# -- the session row's text (schema 1 and 2) ----------------------------------------------
def session_label(snap: Snapshot, details: str = "") -> str:
    """The human text of a ``session`` row: schema, carbon settings, sensors, details."""
    parts = [f"tuimeter schema {SCHEMA_VERSION}",
             f"carbon {snap.carbon.g_per_kwh:g} g/kWh ({snap.carbon.source})",
             f"pue {snap.carbon.pue:g}"]
    parts += [s.describe() for s in snap.sensors]
    if details:
        parts.append(details)
    return "; ".join(parts)


_SCHEMA = re.compile(r"tuimeter schema (\d{1,3})(?:;|$)")
_CARBON = re.compile(r"carbon ([0-9.eE+-]+) g/kWh \((.*?)\)(?:;|$)")
_PUE = re.compile(r"pue ([0-9.eE+-]+)")


def schema_from_label(label: str) -> int:
    """The schema a ``session`` row's text names (1 when it names none)."""
    m = _SCHEMA.match(label)
    return int(m.group(1)) if m else 1


def carbon_from_label(label: str) -> CarbonInfo | None:
    """Schema 1: the carbon settings written in a ``session`` row's text, None where it
    has none that can be used."""
    m = _CARBON.search(label)
    if not m:
        return None
    pue_m = _PUE.search(label)
    try:
        return CarbonInfo(check_intensity(m.group(1)),
                          check_pue(pue_m.group(1)) if pue_m else 1.0, m.group(2))
    except CarbonError:
        return None


_KINDS = (("/core", DomainKind.CORE), ("/uncore", DomainKind.UNCORE), ("dram", DomainKind.DRAM),
          ("psys", DomainKind.PSYS), ("gpu", DomainKind.GPU), ("ane", DomainKind.ANE),
          ("memory", DomainKind.MEMORY), ("package", DomainKind.PACKAGE),
          ("cpu", DomainKind.PACKAGE))


def guess_kind(domain_id: str) -> DomainKind:
    """Schema 1: a domain's kind guessed from its id (schema 1 does not store it)."""
    lowered = domain_id.lower()
    for needle, kind in _KINDS:
        if needle in lowered:
            return kind
    return DomainKind.OTHER


def _provenance(row_provenance: str, source: str) -> Provenance:
    """Schema 1: a domain's provenance from a sample row; a lost row does not say, so it
    is guessed from the sensor (the estimate is estimated, every other sensor measures)."""
    try:
        return Provenance(row_provenance)
    except ValueError:
        return Provenance.ESTIMATED if source == "estimate" else Provenance.MEASURED


class SessionMeta:
    """What the ``session``, ``settings`` and ``domain`` rows of one session say, read
    from either schema: feed it those rows (:meth:`take`) as they come."""

    def __init__(self):
        self.schema = 1  # 2 and up: from the settings row (or the session row's text)
        self.carbon: CarbonInfo | None = None
        self.structured = False  # a settings row was read: carbon is not from the text
        self.domains: dict[str, Domain] = {}  # from domain rows

    def take(self, row: Row) -> None:
        """Take in a row of a META_KIND (others are ignored); a row of a checked kind
        is assumed checked (the reader only returns rows :func:`parse_row` accepts)."""
        kind = row.kind
        if kind == DOMAIN:
            self.domains[row.domain] = domain_of(row)
        elif kind == SETTINGS:
            settings = settings_of(row)
            self.schema, self.carbon, self.structured = settings.schema, settings.carbon, True
        elif kind == SESSION and not self.structured:
            self.schema = max(self.schema, schema_from_label(row.label))
            self.carbon = self.carbon or carbon_from_label(row.label)

    def domain(self, sample: Row) -> Domain:
        """The domain of a sample row: as its ``domain`` row describes it (schema 2), or
        as schema 1 allows: kind guessed from its id, name its id."""
        known = self.domains.get(sample.domain)
        if known is not None:
            return known
        return Domain(id=sample.domain, name=sample.domain, kind=guess_kind(sample.domain),
                      source=sample.source, provenance=_provenance(sample.provenance,
                                                                   sample.source),
                      in_total=bool(sample.in_total))


def bridged_label(span_s: float) -> str:
    """``bridged 3.000 s``: the sample's energy spans the last ``span_s`` seconds."""
    return f"{_BRIDGED}{span_s:.3f} s"


def bridged_span_s(label: str) -> float | None:
    """The span of a :func:`bridged_label`, None for any other label."""
    if not label.startswith(_BRIDGED):
        return None
    try:
        span_s = float(label[len(_BRIDGED):].split()[0])
    except (ValueError, IndexError):
        return None
    return span_s if span_s > 0 and span_s != float("inf") else None


#: a sample row's label when its energy was bridged across the lost rows before it
_BRIDGED = "bridged "
INTERPOLATED = str(Provenance.INTERPOLATED)
#: what begins a ``total`` row's label when an in-total domain was lost in its interval
INCOMPLETE = "incomplete"
#: what begins a row's label when its interval is shorter than a counter's update period
PARTIAL = "partial"

#: a lost sample row's label, by the engine's reason (``DomainSample.note``)
_LOST_WHY = {"gap": "gap: the counter may have wrapped unseen; part of the interval unknown",
             "reset": "reset: the counter restarted; part of the interval unknown",
             "regained": "regained: read again on a new base; part of the interval unknown"}


def sample_label(note: str, bridged_s: float | None, estimated_s: float | None = None) -> str:
    """A sample row's label: ``bridged 3.000 s``, with ``; first 1.000 s interpolated``
    when that part of the span is an estimate (a span lost to a counter reset, at the
    powers around it: the row's provenance is ``interpolated``), why a lost interval is
    lost, or that a partial interval's power is not meaningful; "" for a plain
    measurement."""
    if bridged_s is not None and estimated_s:
        return (f"{bridged_label(bridged_s)}; first {estimated_s:.3f} s {INTERPOLATED} "
                f"(lost to a counter reset)")
    if bridged_s is not None:
        return bridged_label(bridged_s)
    if note == PARTIAL:
        return f"{PARTIAL}: shorter than a counter's update period, no power"
    return _LOST_WHY.get(note, note)


def total_label(lost: Sequence[str], bridged: Sequence[str], note: str) -> str:
    """A ``total`` row's label: ``incomplete: lost package-1`` (in-total domains lost in
    the interval, comma-separated: the total lacks them), ``with bridged package-1`` (its power
    averages their bridged energy over their spans), ``partial: no power``; "" when plain."""
    parts = [f"{INCOMPLETE}: lost {','.join(lost)}" if lost else "",
             f"with {_BRIDGED}{','.join(bridged)}" if bridged else "",  # not a sample's prefix
             f"{PARTIAL}: no power" if note == PARTIAL else ""]
    return "; ".join(p for p in parts if p)
