"""Sessions and reports as pandas DataFrames: ``tuimeter.read_session``, ``tuimeter.read_report``.

pandas is an optional extra (``pip install 'tuimeter[pandas]'``) and is imported only when
one of these functions is called, so ``import tuimeter`` never loads it.

* :func:`read_session` reads a session CSV through :class:`~tuimeter.session.reader.SessionReader`
  (the reader every other command uses: same header check, same malformed and truncated rows
  skipped) and gives each column its type. Text is never turned into NaN: a label or host
  that reads ``NA``, ``null`` or ``nan`` stays that text, which ``pandas.read_csv`` with its
  defaults does not do.
* :func:`read_report` is ``tuimeter report --format csv`` (the same code: load, merge, split
  into segments), typed.

What cannot be read is said, never hidden: each problem of a file is a ``RuntimeWarning``
naming the file and line, and a row whose cell is not what its column holds (a number that
is not a finite number, an ``in_total`` that is not 0 or 1, a pid that is not an integer, a
timestamp that is not ISO 8601) is skipped with such a warning.
"""

from __future__ import annotations

import os
import warnings
from typing import Iterable

from .session.reader import MAX_PROBLEMS_LISTED, SessionReader
from .session.schema import COLUMNS, MARKER, ROW_KINDS, SAMPLE, TOTAL, WORK, Row

EXTRA_HINT = "pip install 'tuimeter[pandas]'"
#: every row kind of the session CSV (the reader passes over kinds not asked for)
ALL_KINDS = ROW_KINDS
#: float columns of the session CSV
SESSION_FLOATS = ("elapsed_s", "interval_s", "power_w", "energy_j", "co2_g")
#: text columns of the session CSV (pandas ``string`` dtype; an empty cell is "")
SESSION_TEXT = ("host", "session", "kind", "domain", "source", "provenance", "label")
#: the phase of ticks before a host's first marker (as in ``tuimeter report``)
START_LABEL = "(start)"
#: float columns of the report
#: rows typed at a time (bounds the memory of rows still held as text)
CHUNK_ROWS = 1 << 16
REPORT_FLOATS = ("duration_s", "energy_j", "wh", "avg_w", "co2_g", "share", "lost_s")


def _pandas():
    """The pandas module, or an ImportError whose one line names the extra to install."""
    try:
        import pandas
    except ImportError:
        raise ImportError(f"tuimeter needs pandas for DataFrames: {EXTRA_HINT}") from None
    return pandas


def _warn(problems: list[str]) -> None:
    for p in problems:
        warnings.warn(p, RuntimeWarning, stacklevel=3)


# -- typing string columns ---------------------------------------------------------------
def _typed(pd, raw, floats: tuple, text: tuple, lines=None):
    """``raw`` (a DataFrame of str) with its columns typed; rows with a bad cell dropped.

    Returns (frame, bad, n_bad): ``bad`` lists (line, column, cell) of the first few bad
    rows (``lines``: the file line of each row of ``raw``), ``n_bad`` counts them all.
    Repeated text (hosts, domains, a tick's timestamp...) shares one string object.
    """
    import numpy as np

    out = {}
    bad = np.zeros(len(raw), dtype=bool)
    why = np.full(len(raw), "", dtype=object)

    def flag(mask, column):
        mask = np.asarray(mask, dtype=bool) & ~bad
        bad[mask] = True
        why[mask] = column

    for col in raw.columns:
        s = raw[col]
        empty = (s == "").to_numpy()
        if col in floats:
            v = pd.to_numeric(s.where(~empty), errors="coerce").astype("float64")
            flag(~empty & ~np.isfinite(v.to_numpy()), col)
            out[col] = v
        elif col in text:
            codes, uniques = pd.factorize(s.to_numpy(dtype=object))
            out[col] = pd.Series(uniques.take(codes), index=s.index, dtype="string")
        elif col in ("timestamp", "start"):
            v = pd.to_datetime(s.where(~empty), utc=True, format="ISO8601", errors="coerce")
            flag(v.isna().to_numpy() & (~empty | (col == "timestamp")), col)
            out[col] = v
        elif col == "in_total":
            flag(~s.isin(("", "0", "1")).to_numpy(), col)
            out[col] = s.map({"1": True, "0": False}).astype("boolean")
        else:  # pid, segment: non-negative integers or empty
            ok = s.str.fullmatch(r"\d{1,18}").to_numpy()
            flag(~empty & ~ok, col)
            out[col] = pd.to_numeric(s.where(ok), errors="coerce").astype("Int64")
    frame = pd.DataFrame(out, columns=list(raw.columns))
    idx = np.flatnonzero(bad)
    listed = [(None if lines is None else lines[i], why[i], raw.iloc[i][why[i]])
              for i in idx[:MAX_PROBLEMS_LISTED]]
    if len(idx):
        frame = frame[~bad].reset_index(drop=True)
    return frame, listed, len(idx)


def _bad_rows(path: str, listed: list, n_bad: int) -> list[str]:
    """Problem lines for rows skipped for a bad cell: the first few, then a count."""
    out = [f"{path}: {'' if line is None else f'line {line}: '}bad {col} {cell!r}; row skipped"
           for line, col, cell in listed[:MAX_PROBLEMS_LISTED]]
    if n_bad > MAX_PROBLEMS_LISTED:
        out.append(f"{path}: {n_bad - MAX_PROBLEMS_LISTED} more rows with a bad value skipped")
    return out


# -- sessions ------------------------------------------------------------------------------
def read_session(path: str | os.PathLike, *, wide: bool = False):
    """A session CSV as a DataFrame.

    Long form (default): the CSV's rows and columns, typed: ``timestamp`` tz-aware UTC
    datetimes; ``elapsed_s``, ``interval_s``, ``power_w``, ``energy_j``, ``co2_g`` float
    (empty cells NaN); ``in_total`` nullable boolean (NA off sample and domain rows); ``pid``
    nullable ``Int64``; the other columns pandas ``string`` ("" where empty, never NA).

    ``wide=True``: one row per tick (per session: a file holding several sessions gives
    each its ticks, told apart by ``session``) with ``timestamp`` (the tick's end),
    ``host``, ``session``, ``elapsed_s``, ``interval_s``, ``phase``, then
    ``<domain>_power_w`` and ``<domain>_energy_j`` for every domain (e.g.
    ``package-0/dram_energy_j``; NaN where the domain was lost), then ``total_power_w``
    and ``total_energy_j`` (the machine total as recorded), then ``work_<unit>`` for every
    unit of work counted (``Meter.count``, ``tuimeter count``): the count that came in
    the tick (a count belongs to the first tick of its session that ends at or after it;
    0 where none), so ``df.total_energy_j.sum() / df.work_samples.sum()`` is J per
    sample. In the long form a ``work`` row has the unit in ``domain`` and the count in
    ``label`` (``df.label.astype(float)``). Domains that do not add into
    the total (a package's cores, psys) have columns too; ``df.attrs["in_total"]`` maps
    each domain to whether it does. ``phase`` is the label of the phase in force at the
    middle of the tick (markers of the tick's host, all its sessions in the file, as the
    report merges them; ``(start)`` before the first, ``(between phases)`` after an API
    ``end``): a marker inside a tick gives the tick to the phase that holds its midpoint.
    The report splits such a tick by time instead; the wide form keeps rows as recorded.

    Raises :class:`~tuimeter.session.reader.SessionFormatError` for a file that is not a
    session; smaller problems are warnings (see the module docstring).
    """
    pd = _pandas()
    rd = SessionReader(path, kinds=ALL_KINDS)
    chunks, rows = [], []
    for row in rd:  # rows checked by the reader every command uses; typed a chunk at a time
        rows.append(row)
        if len(rows) == CHUNK_ROWS:
            chunks.append(_frame(pd, rows))
            rows.clear()
    if rows or not chunks:
        chunks.append(_frame(pd, rows))
    df = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
    _warn(rd.problems)
    return _wide(pd, df) if wide else df


def _frame(pd, rows: list[Row]):
    """Checked rows (:class:`~tuimeter.session.reader.Row`) as a typed DataFrame with the
    session CSV's columns. Repeated text (hosts, domains...) shares one string object."""
    import numpy as np

    cols = dict(zip(Row._fields, zip(*rows))) if rows else {f: () for f in Row._fields}
    out = {}
    wall = np.asarray(cols["wall_s"], dtype="float64")
    # the file's timestamps have microseconds: a float holds them to 0.25 us, so rounding
    # gives back the exact value written
    out["timestamp"] = pd.Series(pd.to_datetime(wall, unit="s", utc=True)).dt.round("us")
    for col in SESSION_FLOATS:
        out[col] = pd.Series(np.asarray([np.nan if v is None else v for v in cols[col]],
                                        dtype="float64"))
    for col in SESSION_TEXT:
        codes, uniques = pd.factorize(np.asarray(cols[col], dtype=object))
        out[col] = pd.Series(np.asarray(uniques, dtype=object).take(codes), dtype="string") \
            if len(codes) else pd.Series([], dtype="string")
    out["in_total"] = pd.Series(pd.array([pd.NA if v is None else v for v in cols["in_total"]],
                                         dtype="boolean"))
    out["pid"] = pd.Series(pd.array(list(cols["pid"]), dtype="Int64"))
    return pd.DataFrame(out, columns=list(COLUMNS))


def _wall_s(pd, df):
    """Each row's time in wall-clock seconds as the report reckons it: the session's first
    row fixes ``wall - elapsed_s``, later rows add their ``elapsed_s``."""
    wall = (df["timestamp"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    offset = (wall - df["elapsed_s"]).groupby([df["host"], df["session"]]).transform("first")
    return offset + df["elapsed_s"]


def _phases(pd, df, ticks):
    """The phase label of each tick: the last marker of its host at or before its middle
    (``t``: wall-clock seconds of the rows of ``df`` and of the ``ticks``)."""
    import numpy as np

    from .session.report import GAP_LABEL

    marks = df[df["kind"] == MARKER].sort_values("t", kind="stable")
    labels = marks["label"].where(~((marks["label"] == "end") & (marks["source"] == "api")),
                                  GAP_LABEL)
    mid = ticks["t"] - ticks["interval_s"] / 2
    phase = pd.Series(START_LABEL, index=ticks.index, dtype="string")
    for host, idx in ticks.groupby("host").groups.items():
        on_host = (marks["host"] == host).to_numpy(dtype=bool, na_value=False)
        mt = marks["t"].to_numpy()[on_host]
        if not len(mt):
            continue
        k = np.searchsorted(mt, mid.loc[idx].to_numpy(), side="right") - 1
        names = np.asarray(labels.to_numpy()[on_host], dtype=object)
        phase.loc[idx] = np.where(k >= 0, names[np.maximum(k, 0)], START_LABEL)
    return phase


def _wide(pd, df):
    keys = ["host", "session", "elapsed_s"]
    df = df.assign(t=_wall_s(pd, df))
    tick_rows = df[df["kind"].isin((SAMPLE, TOTAL))]
    ticks = (tick_rows.drop_duplicates(keys)[["timestamp"] + keys + ["interval_s", "t"]]
             .reset_index(drop=True))
    samples = df[df["kind"] == SAMPLE].drop_duplicates(keys + ["domain"], keep="last")
    domains = list(pd.unique(samples["domain"]))
    values = samples.set_index(keys + ["domain"])[["power_w", "energy_j"]].unstack("domain")
    cols = {}
    for unit in ("power_w", "energy_j"):
        for d in domains:
            cols[f"{d}_{unit}"] = values[(unit, d)] if len(values) else pd.Series(dtype=float)
    totals = (df[df["kind"] == TOTAL].drop_duplicates(keys, keep="last")
              .set_index(keys)[["power_w", "energy_j"]])
    cols["total_power_w"] = totals["power_w"]
    cols["total_energy_j"] = totals["energy_j"]
    data = pd.DataFrame(cols).astype("float64")
    at = pd.MultiIndex.from_frame(ticks[keys])
    data = data.reindex(at).reset_index(drop=True)
    out = ticks[["timestamp", "host", "session", "elapsed_s", "interval_s"]].copy()
    out["phase"] = _phases(pd, df, ticks)
    out = pd.concat([out, data, _work_columns(pd, df, ticks)], axis=1)
    firsts = samples.drop_duplicates("domain")
    out.attrs["in_total"] = {d: bool(it) if it is not pd.NA else False
                             for d, it in zip(firsts["domain"], firsts["in_total"])}
    return out


def _work_columns(pd, df, ticks):
    """``work_<unit>`` per tick: the counts of its session that came after the previous
    tick's end, up to its own."""
    import numpy as np

    work = df[df["kind"] == WORK]
    units = list(pd.unique(work["domain"]))
    cols = {f"work_{u}": np.zeros(len(ticks)) for u in units}
    if not units:
        return pd.DataFrame(cols, index=ticks.index)
    counts = work["label"].astype("float64").to_numpy()
    for (host, session), idx in work.groupby(["host", "session"]).groups.items():
        mine = ((ticks["host"] == host) & (ticks["session"] == session)).to_numpy(
            dtype=bool, na_value=False)
        where = np.flatnonzero(mine)
        if not len(where):
            continue
        order = np.argsort(ticks["elapsed_s"].to_numpy()[where], kind="stable")
        where = where[order]
        ends = ticks["elapsed_s"].to_numpy()[where]
        pos = work.index.get_indexer(idx)
        k = np.searchsorted(ends, work["elapsed_s"].to_numpy()[pos], side="left")
        keep = k < len(ends)  # after the last tick: no tick holds it
        for unit, at, n in zip(work["domain"].to_numpy()[pos][keep], where[k[keep]],
                               counts[pos][keep]):
            cols[f"work_{unit}"][at] += n
    return pd.DataFrame(cols, index=ticks.index)


# -- reports -------------------------------------------------------------------------------
def read_report(paths: str | os.PathLike | Iterable[str | os.PathLike]):
    """The report of one or more session files as a DataFrame: the rows and columns of
    ``tuimeter report FILES --format csv``, from the same code (files merged per host,
    overlaps counted once), typed.

    Columns: ``host``, ``segment`` (Int64; NA on host and overall rows), ``label``,
    ``start`` (UTC datetime), ``duration_s``, ``domain`` (``total`` on a segment's,
    host's or the overall total row), ``in_total`` (nullable boolean; NA on total rows),
    ``energy_j``, ``wh``, ``avg_w``, ``co2_g``, ``share``, ``provenance``, ``lost_s``.
    Per segment: its total row, then one row per domain; then a ``(host total)`` row per
    host and one ``(all hosts)`` row. Sum ``energy_j`` over one kind of row only (e.g.
    ``df[(df.domain == "total") & df.segment.notna()]``), never the whole column.

    Problems of a file are warnings; a file that cannot be used at all is a warning too
    while another can be; ValueError when none can.
    """
    pd = _pandas()
    import io

    from .session.report import build_report, load_file
    from .session.report_cli import CSV_FIELDS, to_csv

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [load_file(os.fspath(p)) for p in paths]
    usable = [f for f in files if f.sessions]
    if not usable:
        errors = [f.error or f"{f.path}: no session in it" for f in files]
        raise ValueError("; ".join(errors) or "no session file given")
    _warn([p for f in files for p in ([f.error] if f.error else []) + f.problems])
    rep = build_report(usable)
    raw = pd.read_csv(io.StringIO(to_csv(rep)), dtype=str, keep_default_na=False)
    df, listed, n_bad = _typed(pd, raw[list(CSV_FIELDS)], REPORT_FLOATS,
                               ("host", "label", "domain", "provenance"))
    _warn(_bad_rows("report", listed, n_bad))
    return df
