"""``tuimeter report FILE...``: energy per phase, per host and in all, in five formats.

Exit status: 0 when anything was reported, 2 when no file could be used (each bad file
gets ``tuimeter: error: FILE: line N: why`` on stderr, readable parts still reported;
smaller problems are ``tuimeter: warning: ...``). ``--plot`` draws total power over
time with the markers (plotext, imported lazily from :mod:`tuimeter.report_plot`); it
goes to stdout before a table or markdown report, to stderr with csv, json or codecarbon
(:mod:`.codecarbon`) so those stay machine-readable.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import json
import sys

from ..text import safe_text, spreadsheet_cell
from .codecarbon import DEFAULT_PROJECT, DeviceLoads, to_codecarbon
from .owners import OWNER_KINDS, UNOWNED
from .report import J_PER_WH, Report, avg_w, build_report, load_file
from ..cli_help import help_text
from ..work import check_unit, metric_name

FORMATS = ("table", "csv", "json", "markdown", "codecarbon")
CSV_FIELDS = ("host", "segment", "label", "start", "duration_s", "domain", "in_total",
              "energy_j", "wh", "avg_w", "co2_g", "share", "provenance", "lost_s")


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="milliseconds")


def _avg(e: float, d: float) -> float | None:
    return e / d if d > 0 else None


def _fields(energy_j: float, co2_g: float, duration_s: float, lost_s: float = 0.0,
            avg: float | None = None) -> dict:
    """``avg_w`` is over the measured time (``avg``, else energy / (duration - lost))."""
    if avg is None:
        avg = _avg(energy_j, duration_s - lost_s)
    return {"energy_j": energy_j, "wh": energy_j / J_PER_WH, "co2_g": co2_g,
            "duration_s": duration_s, "avg_w": avg, "lost_s": lost_s}


def _span(x) -> dict:
    """The fields of a segment or host: average W per domain over its measured time."""
    return _fields(x.energy_j, x.co2_g, x.duration_s, x.lost_s, avg_w(x.domains, x.duration_s))


def _domains(doms: dict, duration_s: float) -> dict:
    return {d: {**_fields(v.energy_j, v.co2_g, duration_s, v.lost_s), "in_total": v.in_total,
                "provenance": v.provenance} for d, v in doms.items()}


def _prov(provenance: str, lost_s: float) -> str:
    """The table's provenance cell: ``measured (lost 4.0 s)`` when time was lost."""
    return f"{provenance} (lost {lost_s:.1f} s)" if lost_s > 0 else provenance


def _per_json(seg, units: tuple) -> dict:
    """``per`` (with ``--per``): per unit the segment's ``count``, ``j_per_unit`` (None
    when nothing was counted), ``units_per_s``, and the ``basis`` and ``provenance`` of
    the energy it divides."""
    if not units:
        return {}
    out = {}
    for unit in units:
        e = seg.energy_per(unit)
        out[unit] = {"count": seg.work.get(unit, 0.0),
                     "j_per_unit": None if e is None else e.j_per_unit,
                     "units_per_s": None if e is None else e.units_per_s,
                     "basis": "machine", "provenance": seg.provenance}
    return {"per": out}


def seg_split(seg, baseline) -> tuple[float, float] | None:
    """(idle J, dynamic J) of a segment with ``baseline`` (None: none, another host's)."""
    if baseline is None or seg.host != baseline.host:
        return None
    counted = {d: v for d, v in seg.domains.items() if v.in_total}
    return baseline.split({d: v.energy_j for d, v in counted.items()}, seg.duration_s,
                          {d: v.lost_s for d, v in counted.items()})


def _split_json(seg, baseline) -> dict:
    if baseline is None:
        return {}
    parts = seg_split(seg, baseline)
    return {"idle_energy_j": None if parts is None else parts[0],
            "dynamic_energy_j": None if parts is None else parts[1]}


def to_json(rep: Report, per: tuple = (), baseline=None) -> dict:
    """The JSON document: ``total``, ``hosts``, ``segments`` (same fields), ``files``;
    with ``--by``, ``by`` (the owner kind) and each segment's ``owners``; with ``--per
    UNIT``, each segment's ``per.UNIT`` (:func:`_per_json`)."""
    describe = OWNER_KINDS[rep.by].describe if rep.by else None
    return {
        **({"by": rep.by} if rep.by else {}),
        **({"baseline": baseline.describe()} if baseline is not None else {}),
        "total": {**_fields(rep.energy_j, rep.co2_g, rep.duration_s),
                  "lost_s": max((h.lost_s for h in rep.hosts), default=0.0),
                  "start": _iso(rep.start_t), "end": _iso(rep.end_t),
                  "provenance": rep.provenance},
        "hosts": [{"host": h.host, **_span(h),
                   "start": _iso(h.start_t), "end": _iso(h.end_t), "provenance": h.provenance,
                   "files": h.files, "sessions": h.sessions,
                   "domains": _domains(h.domains, h.duration_s)} for h in rep.hosts],
        "segments": [{"host": s.host, "index": s.index, "label": s.label,
                      **_span(s),
                      "start": _iso(s.start_t), "end": _iso(s.end_t), "share": s.share,
                      "provenance": s.provenance, "domains": _domains(s.domains, s.duration_s),
                      **({"update_period_s": s.update_period_s,
                          "update_period_note": s.update_period_note}
                         if s.update_period_s is not None else {}),
                      **_owners_json(s, describe), **_per_json(s, per),
                      **_split_json(s, baseline)}
                     for h in rep.hosts for s in h.segments],
        "files": [{"path": f.path, "rows": f.rows, "error": f.error, "problems": f.problems}
                  for f in rep.files],
    }


def _owners_json(seg, describe=None) -> dict:
    """``owners`` (with ``--by``): per owner its energy, avg W, CO2e and share of the
    segment, ``unowned`` last; they add up to the segment's energy. Where the owner kind
    describes its keys (a cgroup: kind, name, container, pod, job), those fields too."""
    if seg.owners is None:
        return {}
    return {"owners": [{"owner": o.owner, "energy_j": o.energy_j, "wh": o.energy_j / J_PER_WH,
                        "avg_w": _avg(o.energy_j, seg.duration_s), "co2_g": o.co2_g,
                        "share": o.share, "provenance": "attributed",
                        **(describe(o.owner) if describe and o.owner != UNOWNED else {})}
                       for o in seg.owners]}


def _rows(rep: Report):
    """Long rows: per segment its total then each domain; per host; overall. Each is
    (host, segment, label, start, duration, domain, in_total, J, avg W, g, share,
    provenance, lost s)."""
    for h in rep.hosts:
        for s in h.segments:
            base = (h.host, s.index, s.label, _iso(s.start_t), s.duration_s)
            yield base + ("total", "", s.energy_j, avg_w(s.domains, s.duration_s), s.co2_g,
                          s.share, s.provenance, s.lost_s)
            for d, v in s.domains.items():
                yield base + (d, int(v.in_total), v.energy_j,
                              _avg(v.energy_j, s.duration_s - v.lost_s), v.co2_g, None,
                              v.provenance, v.lost_s)
            for o in s.owners or ():
                yield base + (_OWNER, o.owner, o.energy_j, _avg(o.energy_j, s.duration_s),
                              o.co2_g, o.share, "attributed", 0.0)
        share = h.energy_j / rep.energy_j if rep.energy_j > 0 else 0.0
        yield (h.host, "", "(host total)", _iso(h.start_t), h.duration_s, "total", "",
               h.energy_j, avg_w(h.domains, h.duration_s), h.co2_g, share, h.provenance,
               h.lost_s)
    yield ("(all hosts)", "", "(total)", _iso(rep.start_t), rep.duration_s, "total", "",
           rep.energy_j, _avg(rep.energy_j, rep.duration_s), rep.co2_g,
           1.0 if rep.energy_j > 0 else 0.0, rep.provenance,
           max((h.lost_s for h in rep.hosts), default=0.0))


def _full(x: float | None) -> str:
    """A number in full precision (the shortest text that reads back the same float)."""
    return "" if x is None else repr(float(x))


#: the ``domain`` cell of an owner's row (``--by``); its ``owner`` cell names the owner
_OWNER = "(owner)"


def _split_owner(row: tuple) -> tuple[tuple, str]:
    """A long row without its owner (owner rows carry it where ``in_total`` goes)."""
    if row[5] == _OWNER:
        return row[:6] + ("",) + row[7:], row[6]
    return row, ""


def _segments_by_key(rep: Report) -> dict:
    return {(h.host, s.index): s for h in rep.hosts for s in h.segments}


def _per_cells(seg, units: tuple) -> tuple:
    """``UNIT`` (the count) and its J per unit for each unit of ``--per``: a segment's
    total row has them, other rows leave them empty."""
    out: tuple = ()
    for unit in units:
        e = seg.energy_per(unit) if seg is not None else None
        out += ("" if seg is None else _full(seg.work.get(unit, 0.0)),
                "" if e is None else _full(e.j_per_unit))
    return out


def to_csv(rep: Report, by: str | None = None, per: tuple = (), baseline=None) -> str:
    """The long rows for spreadsheets: text from the files (host, label, domain) made
    :func:`~tuimeter.text.spreadsheet_cell` safe (no formula runs when it is opened),
    numbers in full precision. With ``by``, an ``owner`` column and, after each
    segment's domains, a row per owner (domain ``(owner)``), ``unowned`` last. With
    ``per``, the columns ``UNIT`` and ``j_per_UNIT`` (singular: ``samples`` ->
    ``j_per_sample``, :func:`~tuimeter.work.metric_name`) for each unit, on each segment's
    total row (the host's energy over the work counted in it)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS + (("owner",) if by else ())
               + tuple(c for u in per for c in (u, metric_name(u)))
               + (("idle_energy_j", "dynamic_energy_j") if baseline is not None else ()))
    cell = spreadsheet_cell
    segs = _segments_by_key(rep) if per or baseline is not None else {}
    for row in _rows(rep):
        row, owner = _split_owner(row)
        host, seg, label, start, dur, dom, it, e, avg, co2, share, prov, lost = row
        this = segs.get((host, seg)) if dom == "total" else None
        tail = _per_cells(this, per)
        if baseline is not None:
            parts = seg_split(this, baseline) if this is not None else None
            tail += ("", "") if parts is None else (_full(parts[0]), _full(parts[1]))
        w.writerow((cell(host), seg, cell(label), start, _full(dur), cell(dom), it, _full(e),
                    _full(e / J_PER_WH), _full(avg), _full(co2), _full(share), prov,
                    _full(lost)) + ((cell(owner),) if by else ()) + tail)
    return buf.getvalue()


def _owner_name(rep: Report, owner: str) -> str:
    """An owner as the table shows it: the kind's short name for it (a cgroup path ->
    ``docker 3f05ee050f82``), else the key itself."""
    describe = OWNER_KINDS[rep.by].describe if rep.by else None
    return describe(owner)["name"] if describe and owner != UNOWNED else owner


def _num(x: float | None, spec: str) -> str:
    return "N/A" if x is None else format(x, spec)


def _table_lines(rep: Report, md: bool, per: tuple = (), baseline=None) -> list[str]:
    head = ("segment", "duration s", "energy J", "Wh", "avg W", "g CO2e", "share",
            *(c for u in per for c in (u, f"J/{u}")),
            *(("idle J", "dynamic J") if baseline is not None else ()), "provenance")
    lines = [f"{safe_text(baseline.describe())}", ""] if baseline is not None else []
    for h in rep.hosts:
        lines.append(f"{'## ' if md else ''}host {safe_text(h.host)}: {len(h.files)} file(s), "
                     f"{h.sessions} session(s), {_iso(h.start_t)} .. {_iso(h.end_t)}")
        body = []
        for s in h.segments:
            body.append((f"{s.index}. {safe_text(s.label)}", s.duration_s, s.energy_j,
                         avg_w(s.domains, s.duration_s), s.co2_g, s.share,
                         _prov(s.provenance, s.lost_s), s))
            for d, v in s.domains.items():
                mark = "" if v.in_total else " (not added)"
                body.append((f"   {safe_text(d)}{mark}", s.duration_s, v.energy_j,
                             _avg(v.energy_j, s.duration_s - v.lost_s), v.co2_g, None,
                             _prov(v.provenance, v.lost_s), None))
            for o in s.owners or ():
                body.append((f"   {rep.by or 'owner'}: {safe_text(_owner_name(rep, o.owner))}",
                             s.duration_s,
                             o.energy_j, _avg(o.energy_j, s.duration_s), o.co2_g, o.share,
                             "attributed", None))
        body.append(("host total", h.duration_s, h.energy_j, avg_w(h.domains, h.duration_s),
                     h.co2_g, None, _prov(h.provenance, h.lost_s), None))
        cells = [(lab, f"{dur:.1f}", f"{e:.1f}", f"{e / J_PER_WH:.4f}", _num(avg, ".2f"),
                  f"{co2:.4f}", "" if sh is None else f"{sh:.1%}", *_per_text(seg, per),
                  *_split_text(seg, baseline), prov)
                 for lab, dur, e, avg, co2, sh, prov, seg in body]
        lines += _grid(head, cells, md)
        lines.append("")
    lines.append(f"{'**' if md else ''}Total: {rep.energy_j:.1f} J ({rep.energy_j / J_PER_WH:.4f} Wh), "
                 f"{rep.co2_g:.4f} g CO2e over {rep.duration_s:.1f} s, {len(rep.hosts)} host(s), "
                 f"{rep.provenance}{'**' if md else ''}")
    return lines


def _per_text(seg, units: tuple) -> tuple:
    """The table's ``UNIT`` and ``J/UNIT`` cells of a segment (N/A where nothing was
    counted); empty on other rows."""
    out: tuple = ()
    for unit in units:
        if seg is None:
            out += ("", "")
            continue
        e = seg.energy_per(unit)
        out += (f"{seg.work.get(unit, 0.0):g}", _num(None if e is None else e.j_per_unit, ".4g"))
    return out


def _split_text(seg, baseline) -> tuple:
    if baseline is None:
        return ()
    parts = seg_split(seg, baseline) if seg is not None else None
    if parts is None:
        return ("", "") if seg is None else ("N/A", "N/A")
    return (f"{parts[0]:.1f}", f"{parts[1]:.1f}")


def _md_cell(text: str) -> str:
    """Markdown drops leading spaces: a domain row under its segment gets an arrow."""
    cell = text.strip().replace("|", "\\|")
    return f"↳ {cell}" if text.startswith("   ") else cell


def _grid(head: tuple, cells: list[tuple], md: bool) -> list[str]:
    if md:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join(
            "---" if i == 0 or i == len(head) - 1 else "---:" for i in range(len(head))) + "|"]
        return out + ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in cells]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells)]
    fmt = lambda row: "  ".join(  # noqa: E731
        str(c).ljust(w) if i in (0, len(row) - 1) else str(c).rjust(w)
        for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return [fmt(head)] + [fmt(r) for r in cells]


def render(rep: Report, fmt: str, project: str = DEFAULT_PROJECT, loads=None,
           per: tuple = (), baseline=None) -> str:
    """``rep`` in ``fmt``; with ``rep.by`` set, each segment's owners too; ``per``: the
    units whose J per unit each segment gets (``--per``). ``loads``: codecarbon's
    :class:`~.codecarbon.DeviceLoads`' ``by_host`` (read again from ``rep.files`` when None)."""
    if fmt == "json":
        # strict JSON: the reader keeps nan and inf out, and a bare NaN is not JSON;
        # text from the files is escaped by JSON itself (\u001b, ASCII only)
        return json.dumps(to_json(rep, per, baseline), indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        return to_csv(rep, rep.by, per, baseline)
    if fmt == "codecarbon":
        return to_codecarbon(rep, project, loads)
    return "\n".join(_table_lines(rep, md=fmt == "markdown", per=per,
                                   baseline=baseline)) + "\n"


def cmd_report(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="tuimeter report",
        **help_text("report"),
        description="Energy per phase (segments between markers) of one or more session "
                    "files; several files are merged per host, overlaps counted once.")
    p.add_argument("files", nargs="+", metavar="FILE", help="session CSV files")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--plot", action="store_true", help="draw power over time with markers")
    p.add_argument("--by", choices=sorted(OWNER_KINDS),
                   help="each segment's energy per owner too, with 'unowned' (idle, system, "
                        "other processes) so the rows add up to the total: "
                        + "; ".join(f"{k.name}: {k.help}" for k in OWNER_KINDS.values()))
    p.add_argument("--per", action="append", metavar="UNIT", default=[],
                   help="J per UNIT of work in each segment (counted with `tuimeter count`, "
                        "Meter.count): the host's energy over the work; repeatable")
    p.add_argument("--dynamic", action="store_true",
                   help="split each segment's energy into idle (the stored `tuimeter "
                        "baseline` of its host) and dynamic")
    p.add_argument("--project", metavar="NAME",
                   help=f"project_name of --format codecarbon rows (default {DEFAULT_PROJECT})")
    args = p.parse_args(argv)
    if args.project is not None and args.format != "codecarbon":
        p.error("--project is for --format codecarbon")
    if args.by is not None and args.format == "codecarbon":
        p.error("--by is for --format table, markdown, json or csv")
    if args.per and args.format == "codecarbon":
        p.error("--per is for --format table, markdown, json or csv (codecarbon's columns "
                "are fixed)")
    try:
        per = tuple(dict.fromkeys(check_unit(u) for u in args.per))
    except ValueError as exc:
        p.error(f"--per: {exc}")
    if args.dynamic and args.format == "codecarbon":
        p.error("--dynamic is for --format table, markdown, json or csv")
    baseline = None
    if args.dynamic:
        from ..baseline import BaselineError, default_path, load

        try:
            baseline = load(default_path(), any_host=True)
        except BaselineError as exc:
            print(f"tuimeter: error: {exc}", file=sys.stderr)
            return 2
    # codecarbon's utilisation columns: the device rows, read in the report's own pass
    devices = DeviceLoads() if args.format == "codecarbon" else None
    files = [load_file(path, args.by, devices.take if devices is not None else None)
             for path in args.files]
    loads = devices.by_host if devices is not None else None
    for f in files:
        if f.error:
            print(f"tuimeter: error: {f.error}", file=sys.stderr)
        for problem in f.problems:
            print(f"tuimeter: warning: {problem}", file=sys.stderr)
    usable = [f for f in files if f.sessions]
    if not usable:
        return 2
    rep = build_report(usable, args.by)
    rep.files = files
    if args.plot:
        from ..report_plot import plot_report

        text = plot_report(rep)
        print(text, file=sys.stdout if args.format in ("table", "markdown") else sys.stderr)
    if baseline is not None and baseline.host not in {h.host for h in rep.hosts}:
        print(f"tuimeter: warning: the baseline is of host {safe_text(baseline.host)!r}; no "
              f"segment of it here", file=sys.stderr)
    sys.stdout.write(render(rep, args.format, args.project or DEFAULT_PROJECT, loads, per,
                            baseline))
    return 0
