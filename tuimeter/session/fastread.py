"""The session reader's columnar path: pyarrow's CSV reader, a block of rows at a time.

:class:`~.reader.SessionReader` reads through here when pyarrow is installed (the
``fast`` extra), else through the ``csv`` module: the same rows, the same problems, the
same numbers. Parsing a row in Python costs about a microsecond however lean the loop (a
bare ``csv.reader`` loop that does nothing reads 0.74 M rows/s on a 2-core VM), so a
report over a year of recordings would take minutes; pyarrow parses and checks whole
columns in C, on both cores, with memory of a few blocks.

How the rows stay the same as the Python reader's:

* A *plain sample* (a sample row whose every cell passes the reader's inline checks, with
  no label and no pid: nearly every row of a session) is checked here column-wise, by
  the same rules; consumers that can take whole columns get them as :class:`SampleRun`
  (``report``), the others get :class:`~.schema.Row` tuples.
* Every other row of the kinds asked for goes, as its cells, to
  :func:`~.schema.parse_row` (the definition), with its line number: bad ones are
  skipped and counted exactly as the Python reader does.
* What this path cannot judge the way the ``csv`` module does hands the file to the
  Python reader from the block where it is (:class:`Fallback`, raised before any row of
  that block is returned; the Python reader goes on from the block's first line): a NUL
  byte, a ``\\r``, bytes that are not UTF-8, a blank line, a row with another number of
  cells or across lines (a quoted newline), a row longer than a pyarrow block, a cell
  over the ``csv`` module's field limit, a number cell pyarrow cannot parse, or one it
  parses to a value a session never holds (``nan``, ``inf``, negative, above
  ``MAX_NUMBER``: the Python reader's message quotes the cell as written, which this path
  no longer has). Such a file is damaged or hostile; the rest of it is read correctly,
  at the Python reader's speed.

Line numbers: with no blank line and no quoted newline (both hand the file over), row
*i* of the data is line *i + 2* (the header is line 1), or *i + 1* after the lines
before a ``start`` offset.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from array import array
from typing import Iterator, NamedTuple

from .schema import (CGROUP, COLUMNS, DEVICE, IN_TOTAL, JOB, LOST, MARKER, MAX_NUMBER, PROCESS, SAMPLE,
                     SAMPLE_PROVENANCES, TREE, Row, _new_row)

#: files smaller than this are read by the Python reader: pyarrow's import and first
#: calls cost about a second of CPU and 100 MB, which the Python reader spends on about
#: 300,000 rows (about 32 MB of session) on the 2-core development VM
MIN_BYTES = 32 << 20
#: bytes read and parsed at a time (about 40,000 rows): memory is about one piece (8 MB
#: pieces cost 70 MB more at 10 M rows for no gain that stood out of the noise here)
BLOCK_BYTES = 4 << 20
#: parse each block on all cores
USE_THREADS = True
#: number columns, parsed by pyarrow as float64 (empty cells are null)
NUMBER_COLUMNS = ("elapsed_s", "interval_s", "power_w", "energy_j", "co2_g")
_NUMBER_SET = frozenset(NUMBER_COLUMNS)
#: text columns read as dictionary codes (a few distinct values in a whole file)
_CODED = frozenset({"timestamp", "host", "session", "kind", "domain", "source", "in_total",
                    "provenance"})
#: the csv module's default field size limit (characters): a longer cell is its to judge
FIELD_LIMIT = 131072


class Fallback(Exception):
    """This file needs the Python reader (see the module docstring); ``str()`` says why."""


def available() -> bool:
    """pyarrow can be imported (never raises); ``TUIMETER_READER=python`` says no."""
    if os.environ.get("TUIMETER_READER", "").strip().lower() == "python":
        return False
    try:
        import pyarrow.compute  # noqa: F401
        import pyarrow.csv  # noqa: F401
    except Exception:  # any failure to import (missing, broken wheel) means no
        return False
    return True


class SampleRun(NamedTuple):
    """Plain samples of one (host, session, domain), in file order among that domain's
    rows (rows of other domains may lie between them): the rows ``at`` of one block's
    columns, taken when asked for (:meth:`column`)."""

    host: str
    session: str
    domain: str
    in_total: bool  # the first row's
    provs: frozenset  # the provenance words of its rows
    first_line: int
    wall0_s: float  # the first row's timestamp (s since the epoch)
    elapsed0_s: float  # and its elapsed_s
    line0: int  # lines before the block
    at: object  # pyarrow int64 array: the rows' places in the block
    cols: dict  # the block's columns by name (``wall_s``: the timestamps as seconds)

    def column(self, name: str):
        """One column of these rows (pyarrow float64 without nulls for the numbers)."""
        import pyarrow.compute as pc

        return pc.take(self.cols[name], self.at)

    def g_first(self) -> tuple[int, float] | None:
        """(line, co2_g / energy_j) of the first row with an energy above 0, or None."""
        import pyarrow.compute as pc

        energy = self.column("energy_j")
        pos = pc.indices_nonzero(pc.greater(energy, 0.0))
        if not len(pos):
            return None
        j = pos[0].as_py()
        return (self.line0 + 1 + self.at[j].as_py(),
                self.cols["co2_g"][self.at[j].as_py()].as_py() / energy[j].as_py())


def doubles(arr) -> array:
    """A pyarrow float64 array without nulls as ``array('d')`` (one copy, no numpy)."""
    out = array("d")
    if len(arr):
        buf = arr.buffers()[1]
        out.frombytes(memoryview(buf)[arr.offset * 8:(arr.offset + len(arr)) * 8])
    return out


def shifted(run: SampleRun, offset_s: float) -> tuple[array, array, bool]:
    """(the run's end times: ``elapsed_s + offset_s``, element-wise, the same IEEE sums
    as Python's; its intervals, both as ``array('d')``; whether the starts
    ``end - interval_s`` are in order)."""
    import pyarrow.compute as pc

    ends = pc.add(run.column("elapsed_s"), offset_s)
    spans = run.column("interval_s")
    starts = pc.subtract(ends, spans)
    n = len(starts)
    ordered = n < 2 or pc.all(pc.greater_equal(starts.slice(1), starts.slice(0, n - 1))).as_py()
    return doubles(ends), doubles(spans), bool(ordered)


class _NoPandas:
    """A meta path finder that finds no pandas (see :func:`_pandas_unseen`)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("no pandas for pyarrow's first look", name=name)
        return None


def _pandas_unseen(pa) -> None:
    """pyarrow imports pandas (40 MB and 0.6 s, a sixth of a report's memory) the first
    time it converts a Python value, to see whether it is a pandas object; this reader
    gives it none. Unless pandas is imported already, that first look (made here, once)
    finds no pandas; pyarrow imports it after all when asked for pandas objects
    (``to_pandas``: its shim tries again), and a program that imported pandas first is
    left alone."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.scalar(0.0)
    finally:
        sys.meta_path.remove(_NoPandas)


def _chunks(fh, start: int) -> Iterator[bytearray]:
    """The file from byte ``start`` in pieces of about BLOCK_BYTES that end at a newline
    (the last may not): a piece read into its own buffer, then the rest of its last line
    appended in place (no copy of the piece), memory of one piece, no read-ahead. Raises
    Fallback for a byte the csv module reads differently (NUL, CR: memchr, at memory
    speed) or a line longer than many blocks."""
    fh.seek(start)
    limit = 64 * BLOCK_BYTES
    while True:
        data = bytearray(BLOCK_BYTES)
        n = fh.readinto(data)
        if not n:
            return
        del data[n:]
        if data[-1] != 0x0A:  # "\n"
            rest = fh.readline(limit)
            if len(rest) == limit and not rest.endswith(b"\n"):
                raise Fallback("a line longer than a block")
            data += rest
        yield _checked(data)


def _checked(data: bytearray) -> bytearray:
    if b"\0" in data:
        raise Fallback("a NUL byte")
    if b"\r" in data:
        raise Fallback("a carriage return")
    return data


def _options():
    """pyarrow's read, parse and convert options for session rows, made once."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    text = pa.dictionary(pa.int32(), pa.string())  # few distinct values: codes, built once
    types = {c: (pa.float64() if c in _NUMBER_SET else
                 text if c in _CODED else pa.string()) for c in COLUMNS}

    def invalid(row) -> str:  # another number of cells: the Python reader's to judge
        return "error"

    # two blocks per piece, parsed on two threads (pyarrow parallelizes by block; a row
    # longer than a block is refused by pyarrow, and read by the Python reader)
    read = pcsv.ReadOptions(block_size=max(BLOCK_BYTES // 2, 1 << 10),
                            column_names=list(COLUMNS), use_threads=USE_THREADS)
    parse = pcsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=False,
                              invalid_row_handler=invalid)
    convert = pcsv.ConvertOptions(column_types=types, null_values=[""],
                                  strings_can_be_null=False, quoted_strings_can_be_null=False)
    return read, parse, convert


#: the timestamps the writer writes (UTC, microseconds), in years whose microseconds
#: since the epoch a double holds exactly: pyarrow parses these as Python would
_CANONICAL_TS = r"^(19|20|21)[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\+00:00$"


def _walls(ts) -> tuple:
    """(dictionary-encoded timestamps, wall seconds of each distinct text, None where
    it is not an ISO 8601 time). Each distinct text once: the writer's own form by
    pyarrow (microseconds / 1e6, the same double as ``datetime.timestamp()``), any other
    (and a block where pyarrow refuses one) by Python's parser, as :func:`~.schema.wall_s`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = ts if isinstance(ts.type, pa.DictionaryType) else pc.dictionary_encode(ts)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    texts = enc.dictionary
    canonical = pc.match_substring_regex(texts, _CANONICAL_TS)
    if pc.all(canonical).as_py():
        try:
            us = pc.cast(pc.cast(texts, pa.timestamp("us", tz="UTC")), pa.int64())
            return enc, pc.divide(pc.cast(us, pa.float64()), 1e6).to_pylist()
        except pa.ArrowInvalid:  # a date that does not exist: Python's to say
            pass
    iso = _dt.datetime.fromisoformat
    walls = []
    for text in texts.to_pylist():
        try:
            walls.append(iso(text).timestamp())
        except (ValueError, OverflowError, OSError):
            walls.append(None)
    return enc, walls


def blocks(fh, start: int, base: int, kinds: frozenset, session: str | None,
           runs: bool) -> Iterator[tuple[int, int, list]]:
    """(rows, passed, items) per block of the binary file ``fh`` from byte ``start`` (the
    first data row; ``base`` lines lie before it): ``items`` in file order, each a
    ``(line, cells)`` of a row for :func:`~.schema.parse_row`, a good Row (``runs``
    False: plain samples as rows) or a list of SampleRun (``runs`` True). ``passed``:
    rows of other kinds or sessions. Raises Fallback (before the first block when it
    can) and OSError."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    try:
        _pandas_unseen(pa)
        read, parse, convert = _options()
        line = base  # lines before the block's first row
        kind_set = pa.array(sorted(kinds))
        provs = pa.array(sorted(p for p in SAMPLE_PROVENANCES if p != LOST))
        totals = pa.array(sorted(IN_TOTAL))
        seen: set = set()  # (host, session) of the rows taken so far
        for data in _chunks(fh, start):
            table = pcsv.read_csv(pa.py_buffer(data), read_options=read, parse_options=parse,
                                  convert_options=convert)
            # a quoted newline would make a row of two lines (a blank line reads as a row)
            if b'"' in data and table.num_rows != data.count(b"\n") + \
                    (not data.endswith(b"\n")):
                raise Fallback("a row across lines")
            for batch in table.to_batches():
                yield _block(pa, pc, batch, line, kind_set, provs, totals, session, runs,
                             seen)
                line += batch.num_rows
            del table, data
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError) as exc:
        raise Fallback(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _impossible(pc, col, mask) -> bool:
    """Some number of the rows in ``mask`` is nan, infinite, negative or above MAX_NUMBER."""
    ok = pc.and_(pc.greater_equal(col, 0.0), pc.less_equal(col, MAX_NUMBER))
    bad = pc.and_kleene(mask, pc.invert(pc.fill_null(ok, True)))
    return bool(pc.any(bad).as_py())


def _per_row(pc, coded, per_value):
    """A test of a dictionary-coded column's distinct values (``per_value``, one per
    value of its dictionary) as one per row: comparing the rows' text itself costs
    several times more (pyarrow decodes the column)."""
    return pc.take(per_value, coded.indices)


def _block(pa, pc, batch, line: int, kind_set, provs, totals, session, runs: bool,
           seen: set):
    n = batch.num_rows
    col = {name: batch.column(i) for i, name in enumerate(COLUMNS)}
    kinds = col["kind"].dictionary  # each test on the few distinct values, then per row
    wanted = _per_row(pc, col["kind"], pc.is_in(kinds, value_set=kind_set))
    if session is not None:
        wanted = pc.and_(wanted, _per_row(pc, col["session"],
                                          pc.equal(col["session"].dictionary, session)))
    for name in COLUMNS:  # the csv module's field limit: the Python reader's to judge
        if name in _NUMBER_SET or not len(col[name]):
            continue
        text = col[name].dictionary if name in _CODED else col[name]
        if len(text) and (pc.max(pc.binary_length(text)).as_py() or 0) > FIELD_LIMIT:
            raise Fallback(f"a {name} cell longer than {FIELD_LIMIT} bytes")
    if pc.any(_per_row(pc, col["kind"], pc.equal(kinds, ""))).as_py():  # as a blank line
        raise Fallback("a row with no kind (or a blank line)")
    n_wanted = pc.sum(wanted).as_py() or 0
    passed = n - n_wanted
    if not n_wanted:
        return n, passed, []
    for name in NUMBER_COLUMNS:
        if _impossible(pc, col[name], wanted):
            raise Fallback(f"an impossible {name}")
    if pc.any(pc.and_(wanted, pc.or_(pc.is_null(col["elapsed_s"]),
                                     pc.is_null(col["interval_s"])))).as_py():
        raise Fallback("an empty elapsed_s or interval_s")
    enc, walls = _walls(col["timestamp"])
    good_ts = pa.array([w is not None for w in walls], pa.bool_())
    wall = pc.take(pa.array(walls, pa.float64()), enc.indices)
    plain = pc.and_(wanted, pc.take(good_ts, enc.indices))
    plain = pc.and_(plain, _per_row(pc, col["kind"], pc.equal(kinds, SAMPLE)))
    plain = pc.and_(plain, _per_row(pc, col["domain"],
                                    pc.not_equal(col["domain"].dictionary, "")))
    plain = pc.and_(plain, _per_row(pc, col["in_total"],
                                    pc.is_in(col["in_total"].dictionary, value_set=totals)))
    plain = pc.and_(plain, _per_row(pc, col["provenance"],
                                    pc.is_in(col["provenance"].dictionary, value_set=provs)))
    plain = pc.and_(plain, pc.equal(col["label"], ""))
    plain = pc.and_(plain, pc.equal(col["pid"], ""))
    for name in ("power_w", "energy_j", "co2_g"):
        plain = pc.and_(plain, pc.is_valid(col[name]))
    plain = pc.fill_null(plain, False)
    other = pc.and_(wanted, pc.invert(plain))
    other_at = pc.indices_nonzero(other).to_pylist()
    items: list = []
    if other_at:
        texts = _cells(pa, pc, col, pa.array(other_at, pa.int64()))
    else:
        texts = []
    cols = dict(col, wall_s=wall)
    if runs:
        _runs_into(items, pa, pc, cols, plain, other_at, texts, line, seen)
    else:
        _rows_into(items, pa, pc, cols, plain, other_at, texts, line)
    return n, passed, items


def _cells(pa, pc, col, at) -> list[list[str]]:
    """The text cells of the rows at ``at`` (numbers as Python writes them: a good one
    parses back to the same value, and a bad one sent the file back already)."""
    out = []
    columns = []
    for name in COLUMNS:
        vals = pc.take(col[name], at).to_pylist()
        if name in _NUMBER_SET:
            vals = ["" if v is None else repr(v) for v in vals]
        columns.append(vals)
    for cells in zip(*columns):
        out.append(list(cells))
    return out


def _rows_into(items, pa, pc, col, plain, other_at, texts, line) -> None:
    """Plain samples as Row tuples, the others as (line, cells), all in file order."""
    at = pc.indices_nonzero(plain).to_pylist()
    if at:
        idx = pa.array(at, pa.int64())
        c = {name: pc.take(col[name], idx).to_pylist()
             for name in ("wall_s", "elapsed_s", "interval_s", "host", "session", "kind",
                          "domain", "source", "in_total", "power_w", "energy_j", "co2_g",
                          "provenance")}
        in_total = IN_TOTAL
        plain_rows = [_new_row(Row, (line + 1 + i, w, el, iv, h, s, k, d, src,
                                     in_total[it], p, e, g, prov, "", None))
                      for i, w, el, iv, h, s, k, d, src, it, p, e, g, prov in
                      zip(at, c["wall_s"], c["elapsed_s"], c["interval_s"], c["host"],
                          c["session"], c["kind"], c["domain"], c["source"], c["in_total"],
                          c["power_w"], c["energy_j"], c["co2_g"], c["provenance"])]
    else:
        plain_rows = []
    if not other_at:
        items.extend(plain_rows)
        return
    others = [(line + 1 + i, cells) for i, cells in zip(other_at, texts)]
    # merge the two by line
    a = b = 0
    while a < len(plain_rows) and b < len(others):
        if plain_rows[a].line < others[b][0]:
            items.append(plain_rows[a])
            a += 1
        else:
            items.append(others[b])
            b += 1
    items.extend(plain_rows[a:])
    items.extend(others[b:])


#: rows whose place among the plain samples does not matter to a consumer of runs (once
#: their session has been seen): they may be taken after the runs of their stretch
_UNORDERED = frozenset({MARKER, PROCESS, JOB, TREE, CGROUP, DEVICE})


def _codes(pc, arr):
    """(int64 codes, number of distinct values) of a dictionary-coded text column."""
    import pyarrow as pa

    return arr.indices.cast(pa.int64()), len(arr.dictionary)


def _runs_into(items, pa, pc, col, plain, other_at, texts, line, seen) -> None:
    """Plain samples as lists of SampleRun, in file order with the other rows. A list
    holds the plain rows between two rows whose order matters (a sample that is not
    plain, a carbon or meta row, the first row of a session); markers and attribution
    rows of a known session come after the list of their stretch."""
    import bisect

    if not pc.any(plain).as_py():
        items.extend((line + 1 + i, cells) for i, cells in zip(other_at, texts))
        return
    cuts = []  # (position in the block, index in other_at) of the rows that cut
    for k, (i, cells) in enumerate(zip(other_at, texts)):
        sid = (cells[3], cells[4])
        if cells[5] not in _UNORDERED or sid not in seen:
            cuts.append((i, k))
        seen.add(sid)
    host, _ = _codes(pc, col["host"])
    sess, ns = _codes(pc, col["session"])
    dom, nd = _codes(pc, col["domain"])
    code = pc.add(pc.multiply(pc.add(pc.multiply(host, ns), sess), nd), dom)
    code = pc.if_else(plain, code, -1)  # the other rows sort first, and are left out
    order = pc.sort_indices(code)  # stable: file order within a series
    counts = pc.value_counts(code)
    sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    prov_codes = col["provenance"].indices
    prov_names = col["provenance"].dictionary.to_pylist()
    cut_pos = [p for p, _ in cuts]
    stretches: list[list] = [[] for _ in range(len(cuts) + 1)]
    lo = sizes.pop(-1, 0)
    for c in sorted(sizes):
        n = sizes[c]
        at = order.slice(lo, n)
        lo += n
        if cut_pos:
            pos = at.to_pylist()
            bounds = [0] + [bisect.bisect_left(pos, p) for p in cut_pos] + [n]
        else:
            bounds = [0, n]
        for k in range(len(bounds) - 1):
            a, b = bounds[k], bounds[k + 1]
            if b > a:
                part = at.slice(a, b - a)
                i0 = part[0].as_py()
                provs = frozenset(prov_names[p] for p in
                                  pc.unique(pc.take(prov_codes, part)).to_pylist())
                stretches[k].append(SampleRun(
                    col["host"][i0].as_py(), col["session"][i0].as_py(),
                    col["domain"][i0].as_py(), IN_TOTAL[col["in_total"][i0].as_py()], provs,
                    line + 1 + i0, col["wall_s"][i0].as_py(), col["elapsed_s"][i0].as_py(),
                    line, part, col))
    done = 0  # rows of other_at emitted
    for k, runs in enumerate(stretches):
        end = cuts[k][1] if k < len(cuts) else len(other_at)
        if runs:
            runs.sort(key=lambda r: r.first_line)
            items.append(runs)
        items.extend((line + 1 + other_at[j], texts[j]) for j in range(done, end))
        if k < len(cuts):
            items.append((line + 1 + other_at[end], texts[end]))
            done = end + 1
        else:
            done = end
