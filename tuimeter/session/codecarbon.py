"""``tuimeter report --format codecarbon``: the report as CodeCarbon's ``emissions.csv``.

One row per segment (phase) per host, in every column of CodeCarbon's ``EmissionsData``
and in its order, as CodeCarbon 3.2.1 to 3.3.2 write them (38 columns: 3.2.1 added the
utilisation columns and ``ram_used_gb`` to 3.1's ``water_consumed`` and ``wue``). CodeCarbon's
``FileOutput.has_valid_headers`` compares a file's header with those fields, so CodeCarbon
appends its own rows to a file written here instead of moving it aside as a foreign file,
and its dashboard and scripts that read its CSV read a tuimeter session. CodeCarbon's units:

* ``duration`` s; ``emissions`` kg CO2e; ``emissions_rate`` kg CO2e/s (emissions/duration);
* ``cpu_energy``, ``gpu_energy``, ``ram_energy``, ``energy_consumed`` kWh, and
  ``energy_consumed = cpu_energy + gpu_energy + ram_energy``;
* ``cpu_power``, ``gpu_power``, ``ram_power`` W, here the average over the segment (each
  domain over the time it was measured, as the report's average W).

**PUE.** CodeCarbon multiplies every energy column by the PUE (``core/measure.py``:
"Apply the PUE of the datacenter to the consumed energy") but not the power columns, and
its emissions are that energy x the grid intensity. So do these rows: with the PUE of
1.0 that tuimeter uses unless told otherwise, ``energy_consumed`` is the report's energy
(J / 3.6e6); with a PUE of 1.5 it is 1.5 times that, and ``emissions`` is the report's
CO2e (which already counts the PUE) in kg. The PUE is the one recorded by the sessions
that cover the segment; where they recorded none, or different ones, ``pue`` is empty
and the energies are as measured.

**What goes where.** Only the domains that add into the report's total (``in_total``)
are counted, so nested domains (``core``, ``uncore``, and ``psys`` beside the packages)
are not, and the three energies add up to the segment's total. ``gpu_energy``: GPUs
(``gpuN``, ``amdgpuN``, Apple's ``gpu``) and Apple's neural engine ``ane`` (an
accelerator: CodeCarbon, which has no column for it, does not measure it at all);
``ram_energy``: DRAM (``package-N/dram``) where measured, else the memory estimate
(``estimate/memory``); ``cpu_energy``: the rest (packages, ``estimate/cpu``, Apple's
``cpu``, and any other counted domain a file may hold, so that nothing counted is lost). A column whose kind of domain the host did not record is empty (no GPU measured
is not 0 W of GPU); ``gpu_count`` is the number of GPUs measured.

**What tuimeter does not know is empty**, never made up: ``experiment_id``, ``region``,
``cloud_provider``, ``cloud_region``, ``on_cloud``, ``os``, ``python_version`` (the
session file does not record them), ``codecarbon_version``, ``cpu_count``, ``cpu_model``,
``gpu_model``, ``longitude``, ``latitude``, ``ram_total_size``; the water figures
``water_consumed`` and ``wue`` (CodeCarbon's are a WUE the user supplies, 0 by default,
times the kWh: tuimeter is given none); ``ram_utilization_percent`` and ``ram_used_gb``
(CodeCarbon's means of ``psutil.virtual_memory()``: tuimeter does not read the memory in
use). An empty cell, not CodeCarbon's 0 for "no samples".

**Utilisation** (CodeCarbon: the means over the run of ``psutil.cpu_percent()`` and of
NVML's GPU utilisation, every GPU's samples alike), here over the segment, from the
session's ``device`` rows (read in the report's own pass: :class:`DeviceLoads`):
``cpu_utilization_percent`` is the machine's CPU load the attribution measured at each
tick (the processes' CPU time over all CPUs' time), averaged over the segment's ticks by
their length, empty for a session recorded without attribution; ``gpu_utilization_percent``
the mean of every reading of every GPU whose driver gives its busy % (NVML's, read every
few seconds) in the segment, empty where none was read. ``tracking_mode`` is
``machine`` (tuimeter measures the whole machine); ``country_iso_code`` (ISO 3166
alpha-3, as CodeCarbon) and ``country_name`` come from the carbon source the session
recorded when it is a country of tuimeter's table; ``run_id`` is the session id (several,
joined by ``;``, when several sessions of the host cover the segment); ``timestamp`` is
the segment's end, ISO 8601 UTC. Text cells are :func:`~tuimeter.text.spreadsheet_cell`
safe, numbers in full precision.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import re
from typing import Iterable, Iterator, NamedTuple

from ..carbon import intensity_table
from ..model import J_PER_KWH, DomainKind
from .schema import DEVICE, device_of
from .schema import guess_kind as kind_of
from ..text import spreadsheet_cell
from .reader import SessionFormatError, SessionReader, session_carbon
from .report import FileResult, HostReport, Report, Segment

#: CodeCarbon's ``emissions.csv`` columns (3.2.1 to 3.3.2's ``EmissionsData``), in its order
COLUMNS = (
    "timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions",
    "emissions_rate", "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy",
    "ram_energy", "energy_consumed", "water_consumed", "country_name", "country_iso_code",
    "region", "cloud_provider", "cloud_region", "os", "python_version", "codecarbon_version",
    "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude",
    "ram_total_size", "tracking_mode", "cpu_utilization_percent", "gpu_utilization_percent",
    "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue",
)
DEFAULT_PROJECT = "tuimeter"
#: which CodeCarbon column a counted domain's energy goes to (any other kind: cpu)
_PART = {DomainKind.GPU: "gpu", DomainKind.ANE: "gpu", DomainKind.DRAM: "ram",
         DomainKind.MEMORY: "ram"}
#: the country in a carbon source written by ``CountryIntensity.source()``: ``FRA France: ...``
_COUNTRY = re.compile(r"([A-Z]{3}) ")


class SessionInfo(NamedTuple):
    """What a session's ``session`` row says that CodeCarbon has a column for."""

    pue: float | None
    country_iso3: str | None


def session_infos(files: Iterable[FileResult]) -> dict[tuple[str, str], SessionInfo]:
    """(host, session id) -> :class:`SessionInfo`, from each session's first good
    ``session`` row (kept by :func:`~.report.load_file`, checked like any row; the first
    file that has one wins). A session with no such row is left out."""
    out: dict[tuple[str, str], SessionInfo] = {}
    for f in files:
        for sess in f.sessions:
            key = (sess.host, sess.session)
            if sess.session_label is not None and key not in out:
                out[key] = _info(sess.session_label)
    return out


class DeviceLoad(NamedTuple):
    """A host's load readings from its ``device`` rows (wall-clock s, busy %)."""

    cpu: list[tuple[float, float, float]]  # (tick end, interval s, the machine's CPU load)
    gpu: list[tuple[float, float]]  # (reading, one GPU's busy %)


class DeviceLoads:
    """Collects :class:`DeviceLoad` per host from ``device`` rows, one at a time: give
    :meth:`take` to :func:`~.report.load_file` (``device=``) to read them in the report's
    own pass."""

    def __init__(self):
        self.by_host: dict[str, DeviceLoad] = {}

    def take(self, row) -> None:
        """One good ``device`` row (the reader checked it)."""
        util = device_of(row).get("util_pct")
        if util is None:
            return
        load = self.by_host.get(row.host)
        if load is None:
            load = self.by_host[row.host] = DeviceLoad([], [])
        if row.domain == "total":
            load.cpu.append((row.wall_s, row.interval_s, util))
        elif kind_of(row.domain) == DomainKind.GPU:
            load.gpu.append((row.wall_s, util))


def device_loads(files: Iterable[FileResult]) -> dict[str, DeviceLoad]:
    """host -> :class:`DeviceLoad`, from every file's ``device`` rows: a second pass over
    each file, for files loaded without them (``tuimeter report`` reads them in its own
    pass: :class:`DeviceLoads`). Malformed ``device`` rows are skipped and added to the
    file's ``problems``; a file that cannot be read again adds no readings."""
    out = DeviceLoads()
    for f in files:
        if not f.sessions:
            continue
        found = DeviceLoads()
        rd = SessionReader(f.path, kinds={DEVICE})
        try:
            for row in rd:
                found.take(row)
        except (SessionFormatError, OSError):
            continue
        finally:
            f.problems.extend(rd.problems)
        for host, load in found.by_host.items():
            into = out.by_host.setdefault(host, DeviceLoad([], []))
            into.cpu.extend(load.cpu)
            into.gpu.extend(load.gpu)
    return out.by_host


def _load_pct(load: DeviceLoad | None, seg: Segment) -> tuple[float | None, float | None]:
    """(CPU %, GPU %) over the segment, as CodeCarbon's means: the ticks' CPU load
    weighted by their length, and every GPU reading alike (all GPUs together); None
    where there is none."""
    if load is None:
        return None, None
    ticks = [(iv, pct) for t, iv, pct in load.cpu if seg.start_t < t <= seg.end_t and iv > 0]
    span = sum(iv for iv, _ in ticks)
    cpu = sum(iv * pct for iv, pct in ticks) / span if span > 0 else None
    gpus = [pct for t, pct in load.gpu if seg.start_t < t <= seg.end_t]
    return cpu, (sum(gpus) / len(gpus) if gpus else None)


def _info(label: str) -> SessionInfo:
    recorded = session_carbon(label)
    if recorded is None:
        return SessionInfo(None, None)
    m = _COUNTRY.match(recorded.source)
    iso3 = m.group(1) if m and m.group(1) in intensity_table() else None
    return SessionInfo(recorded.pue, iso3)


def _sessions_of(host: HostReport, seg: Segment) -> list[str]:
    """The ids of the host's sessions whose samples overlap the segment, in order."""
    ids = []
    for sess in host.data:
        spans = [(s.start, s.end) for s in sess.series.values() if s.t1]
        if spans and min(a for a, _ in spans) < seg.end_t \
                and max(b for _, b in spans) > seg.start_t and sess.session not in ids:
            ids.append(sess.session)
    return ids or sorted({sess.session for sess in host.data})


def _agreed(values: list):
    """The one value all give (None counts as a value): None when they differ."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _num(x: float | None) -> str:
    """A number in full precision (the shortest text that reads back the same float)."""
    return "" if x is None else repr(float(x))


def _row(project: str, host: HostReport, seg: Segment,
         infos: dict[tuple[str, str], SessionInfo],
         loads: dict[str, DeviceLoad]) -> dict[str, str]:
    sids = _sessions_of(host, seg)
    known = [infos.get((host.host, sid), SessionInfo(None, None)) for sid in sids]
    pue = _agreed([i.pue for i in known])
    iso3 = _agreed([i.country_iso3 for i in known])
    energy = {}  # part -> J
    power = {}  # part -> W
    gpus = 0
    for dom, v in seg.domains.items():
        if not v.in_total:
            continue
        kind = kind_of(dom)
        part = _PART.get(kind, "cpu")
        gpus += kind == DomainKind.GPU
        energy[part] = energy.get(part, 0.0) + v.energy_j
        measured = seg.duration_s - v.lost_s
        power[part] = power.get(part, 0.0) + (v.energy_j / measured if measured > 0 else 0.0)
    scale = (pue or 1.0) / J_PER_KWH
    kwh = {part: e * scale for part, e in energy.items()}
    kg = seg.co2_g / 1000.0
    dur = seg.duration_s
    row = dict.fromkeys(COLUMNS, "")
    row.update(
        timestamp=_dt.datetime.fromtimestamp(seg.end_t, _dt.timezone.utc)
        .isoformat(timespec="seconds"),
        project_name=spreadsheet_cell(project),
        run_id=spreadsheet_cell(";".join(sids)),
        duration=_num(dur), emissions=_num(kg), emissions_rate=_num(kg / dur if dur > 0 else None),
        energy_consumed=_num(sum(kwh.values())),
        gpu_count=str(gpus) if gpus else "",
        tracking_mode="machine", pue=_num(pue),
    )
    cpu_pct, gpu_pct = _load_pct(loads.get(host.host), seg)
    row.update(cpu_utilization_percent=_num(cpu_pct), gpu_utilization_percent=_num(gpu_pct))
    for part in ("cpu", "gpu", "ram"):
        row[f"{part}_energy"] = _num(kwh.get(part))
        row[f"{part}_power"] = _num(power.get(part) if dur > 0 else None)
    if iso3 is not None:
        row.update(country_iso_code=iso3,
                   country_name=spreadsheet_cell(intensity_table()[iso3].country))
    return row


def codecarbon_rows(rep: Report, project: str = DEFAULT_PROJECT,
                    infos: dict[tuple[str, str], SessionInfo] | None = None,
                    loads: dict[str, DeviceLoad] | None = None
                    ) -> Iterator[dict[str, str]]:
    """The rows (column -> cell text), host by host, segment by segment. ``infos``:
    from :func:`session_infos`, ``loads`` from :func:`device_loads` (each read from
    ``rep.files`` when None)."""
    if infos is None:
        infos = session_infos(rep.files)
    if loads is None:
        loads = device_loads(rep.files)
    for host in rep.hosts:
        for seg in host.segments:
            yield _row(project, host, seg, infos, loads)


def to_codecarbon(rep: Report, project: str = DEFAULT_PROJECT,
                  loads: dict[str, DeviceLoad] | None = None) -> str:
    """The CSV text: CodeCarbon's header, then :func:`codecarbon_rows`."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(codecarbon_rows(rep, project, loads=loads))
    return buf.getvalue()
