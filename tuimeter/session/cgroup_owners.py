"""``tuimeter report --by cgroup``: the energy of each segment per cgroup, from the session
CSV's ``cgroup`` rows, with an ``unowned`` row so that the rows of a segment add up to its
machine total (the report's own, from the samples).

**Rows.** A ``cgroup`` row holds one tick's attributed energy of one cgroup (label: its
path, ``unknown``, ``other cgroups`` or ``idle/system``; see docs/SESSION_FILE.md). A row
covers the tick's interval, and one that spans a segment boundary is split in proportion
to time, as the report splits samples. Per segment, each cgroup gets the sum of its rows,
and ``unowned`` is the segment's energy less what the cgroups got: idle/system, and any
time recorded without ``cgroup`` rows (attribution off, a file from before cgroup rows, a
machine without ``/proc``). It is never below 0.

**Merging.** As the report does: the parts of one session in several files (``record
--rotate``) join, a file given twice counts once, and on one host the sessions recorded
at the same time (eight ranks, one machine) count the machine once: a session's rows that
end before the time an earlier session already covers are dropped (one that straddles
it is cut by time).

What a cgroup is (container, pod, SLURM job, systemd unit) is derived from its path
(:func:`tuimeter.engine.cgroups.describe`); the labels come from files, so they are shown
through :func:`~tuimeter.text.safe_text` and made spreadsheet-safe in CSV.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field

from ..engine.cgroups import describe
from ..model import CgroupInfo
from ..text import safe_text, spreadsheet_cell
from .reader import SessionFormatError, SessionReader
from .report import J_PER_WH, Report
from .schema import CGROUP

#: the row that makes a segment's rows add up to its total
UNOWNED = "unowned"
#: the labels of cgroup rows that are not a cgroup path
IDLE, OTHER, UNKNOWN = "idle/system", "other cgroups", "unknown"
CSV_FIELDS = ("host", "segment", "label", "start", "duration_s", "owner", "kind", "name",
              "container", "pod", "job", "energy_j", "wh", "avg_w", "co2_g", "share")


@dataclass
class Owner:
    """One row of a segment: a cgroup (``owner`` = its path), a synthetic row, or
    ``unowned``, with its energy (J) and CO2e (g) in the segment, and what it is."""

    owner: str
    energy_j: float
    co2_g: float
    info: CgroupInfo


@dataclass
class SegmentOwners:
    host: str
    index: int
    label: str
    start_t: float
    end_t: float
    energy_j: float  # the segment's machine total (the report's)
    co2_g: float
    owners: list = field(default_factory=list)  # Owner, most energy first, unowned last

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_t - self.start_t)


def cgroup_owner(row) -> str | None:
    """The owner of a ``cgroup`` row for a generic ``report --by`` that keys owners by
    text: the cgroup path (``unknown``, ``other cgroups`` as written), None for
    ``idle/system`` (unowned). :func:`describe` names a path."""
    return None if row.label == IDLE else row.label


def _owner(label: str, energy_j: float, co2_g: float) -> Owner:
    if label.startswith("/"):
        return Owner(label, energy_j, co2_g, describe(label))
    kind = {UNKNOWN: "unknown", OTHER: "other", UNOWNED: "unowned"}.get(label, "")
    return Owner(label, energy_j, co2_g, CgroupInfo(label, kind, label))


def _rows_by_session(paths: set[str]) -> dict[tuple, dict]:
    """{(host, session): {(t1 rounded, label): (t1 wall, interval, label, J, g)}} from the
    files' cgroup rows (a row read twice, from a file given twice, is kept once). The
    elapsed times are made wall-clock with each session's offset later."""
    out: dict[tuple, dict] = {}
    for path in sorted(paths):
        rd = SessionReader(path, kinds={CGROUP})
        try:
            for row in rd:
                if row.energy_j is None or row.interval_s <= 0:
                    continue
                rows = out.setdefault((row.host, row.session), {})
                rows[(round(row.elapsed_s, 6), row.label)] = (
                    row.elapsed_s, row.interval_s, row.label, row.energy_j, row.co2_g or 0.0)
        except SessionFormatError:  # the report already said why
            continue
    return out


def by_cgroup(rep: Report) -> list[SegmentOwners]:
    """Every segment of the report with its energy per cgroup (see the module docstring)."""
    paths = {s.path for h in rep.hosts for s in h.data}
    rows = _rows_by_session(paths)
    out = []
    for h in rep.hosts:
        sessions = {}
        for sess in h.data:  # the offset of a session is the same in each of its parts
            sessions.setdefault((sess.host, sess.session), sess.offset)
        timed = []
        for key, offset in sessions.items():
            got = sorted((el + offset, iv, label, e, g)
                         for el, iv, label, e, g in rows.get(key, {}).values())
            if got:
                timed.append(got)
        kept = _kept(timed)
        for seg in h.segments:
            per: dict[str, list[float]] = {}
            for t1, iv, label, e, g in kept:
                lo, hi = max(t1 - iv, seg.start_t), min(t1, seg.end_t)
                if hi <= lo:
                    continue
                f = (hi - lo) / iv
                acc = per.setdefault(label, [0.0, 0.0])
                acc[0] += e * f
                acc[1] += g * f
            per.pop(IDLE, None)  # in unowned, which also covers time without cgroup rows
            owners = sorted((_owner(label, e, g) for label, (e, g) in per.items()),
                            key=lambda o: (-o.energy_j, o.owner))
            owned_j = sum(o.energy_j for o in owners)
            owned_g = sum(o.co2_g for o in owners)
            owners.append(_owner(UNOWNED, max(seg.energy_j - owned_j, 0.0),
                                 max(seg.co2_g - owned_g, 0.0)))
            out.append(SegmentOwners(h.host, seg.index, seg.label, seg.start_t, seg.end_t,
                                     seg.energy_j, seg.co2_g, owners))
    return out


def _kept(sessions: list[list[tuple]]) -> list[tuple]:
    """The rows that count: sessions in order of start, each from where the time already
    covered ends (a row straddling it keeps the part after)."""
    out = []
    covered = -math.inf
    for rows in sorted(sessions, key=lambda rs: rs[0][0] - rs[0][1]):
        for t1, iv, label, e, g in rows:
            if t1 <= covered:
                continue
            start = t1 - iv
            if start < covered and iv > 0:  # cut by time
                f = (t1 - covered) / iv
                out.append((t1, t1 - covered, label, e * f, g * f))
            else:
                out.append((t1, iv, label, e, g))
        covered = max(covered, rows[-1][0])
    return out


# -- rendering ----------------------------------------------------------------------------
def _share(o: Owner, s: SegmentOwners) -> float:
    return o.energy_j / s.energy_j if s.energy_j > 0 else 0.0


def _avg(o: Owner, s: SegmentOwners) -> float | None:
    return o.energy_j / s.duration_s if s.duration_s > 0 else None


def to_json(segs: list[SegmentOwners], iso) -> dict:
    return {"by": "cgroup", "segments": [
        {"host": s.host, "index": s.index, "label": s.label, "start": iso(s.start_t),
         "end": iso(s.end_t), "duration_s": s.duration_s, "energy_j": s.energy_j,
         "co2_g": s.co2_g,
         "owners": [{"owner": o.owner, "kind": o.info.kind, "name": o.info.name,
                     "container": o.info.container, "pod": o.info.pod, "job": o.info.job,
                     "energy_j": o.energy_j, "wh": o.energy_j / J_PER_WH,
                     "avg_w": _avg(o, s), "co2_g": o.co2_g, "share": _share(o, s)}
                    for o in s.owners]} for s in segs]}


def to_csv(segs: list[SegmentOwners], iso) -> str:
    """Long rows, one per owner per segment; text from the files spreadsheet-safe."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    cell = spreadsheet_cell
    full = lambda x: "" if x is None else repr(float(x))  # noqa: E731
    for s in segs:
        for o in s.owners:
            w.writerow((cell(s.host), s.index, cell(s.label), iso(s.start_t),
                        full(s.duration_s), cell(o.owner), o.info.kind, cell(o.info.name),
                        o.info.container, o.info.pod, o.info.job, full(o.energy_j),
                        full(o.energy_j / J_PER_WH),
                        full(_avg(o, s)), full(o.co2_g), full(_share(o, s))))
    return buf.getvalue()


def table_lines(segs: list[SegmentOwners], md: bool, grid) -> list[str]:
    """Per segment, a line, then its owners: name, kind, J, Wh, avg W, g, share."""
    head = ("cgroup", "kind", "energy J", "Wh", "avg W", "g CO2e", "share")
    lines = []
    for s in segs:
        lines.append(f"{'## ' if md else ''}host {safe_text(s.host)}, segment {s.index}. "
                     f"{safe_text(s.label)}: {s.energy_j:.1f} J over {s.duration_s:.1f} s")
        cells = []
        for o in s.owners:
            avg = _avg(o, s)
            cells.append((safe_text(o.info.name), o.info.kind, f"{o.energy_j:.1f}",
                          f"{o.energy_j / J_PER_WH:.4f}",
                          "N/A" if avg is None else f"{avg:.2f}", f"{o.co2_g:.4f}",
                          f"{_share(o, s):.1%}"))
        lines += grid(head, cells, md)
        lines.append("")
    return lines


def render(rep: Report, fmt: str, iso, grid) -> str:
    """``--by cgroup`` in ``fmt`` (table, markdown, csv, json); ``iso`` formats a time,
    ``grid`` lays out a table (the report's own)."""
    segs = by_cgroup(rep)
    if fmt == "json":
        doc = to_json(segs, iso)
        doc["files"] = [{"path": f.path, "rows": f.rows, "error": f.error,
                         "problems": f.problems} for f in rep.files]
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        return to_csv(segs, iso)
    return "\n".join(table_lines(segs, fmt == "markdown", grid)) + "\n"
