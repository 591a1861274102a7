"""``tuimeter report`` over a long session in memory that does not grow with it.

A report keeps each domain's samples (end time, span, energy: 24 bytes a sample) until
every file is read, because a segment's edges (markers of any session of the host, in any
file) and a session's clip (where an earlier one of the host ended) are known only then:
10 M rows of session would be 220 MB of samples. Here a long series moves its samples, a
block of :data:`~tuimeter.phases.SUM_BLOCK` at a time, into a temporary file (unlinked
from the start: the operating system frees it when the report ends) and keeps in memory,
per block, its last end time and its energy sum. A segment then reads back only the
blocks at its two edges (a few per segment: :func:`~tuimeter.phases.energy_between`
asks :class:`Blocks` for its ``bisect_right`` and ``range_sum``), so the sums, the
numbers of whole ticks and every edge are exactly those of the series in memory (the
phase integrator adds a slice in those same blocks either way).

A series is kept in blocks only while the integrator's fast path holds for it: its
samples end and start in time order (a recording's do), each one tick, one carbon
figure for all (no live carbon source). Anything else stays in memory as before; so
does everything where no temporary file can be written.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import os
import tempfile
from array import array

from .. import phases

#: blocks of a series read back and kept, the most recently read ones
CACHED_BLOCKS = 4


class SpillFile:
    """An unlinked temporary file that blocks are appended to and read back from."""

    def __init__(self):
        self._fh = tempfile.TemporaryFile(prefix="tuimeter-report-")
        self.size = 0  # bytes written

    def write(self, data: bytes) -> int:
        """Append ``data``; its offset. Raises OSError (a full disk): nothing kept then."""
        self._fh.seek(self.size)
        self._fh.write(data)
        self._fh.flush()
        offset, self.size = self.size, self.size + len(data)
        return offset

    def read(self, offset: int, n: int) -> bytes:
        fd = self._fh.fileno()
        out = bytearray()
        while len(out) < n:
            chunk = os.pread(fd, n - len(out), offset + len(out))
            if not chunk:
                raise OSError(f"spill file ends at {offset + len(out)} (wanted {n} bytes)")
            out += chunk
        return bytes(out)


class Blocks:
    """A sequence of doubles: whole blocks of ``block`` values in a :class:`SpillFile`,
    the rest (the newest) in memory. ``append`` and ``extend`` are the in-memory part's
    own (C speed); indexing, slices, ``len`` and iteration see the whole sequence.
    ``bisect_right`` (for a sorted sequence) and ``range_sum`` find the block first;
    ``sums``: keep each block's sum (the energies: whole blocks are added unread)."""

    __slots__ = ("_hot", "append", "extend", "_store", "_block", "_offsets", "_lasts",
                 "_sums", "_cache")

    def __init__(self, hot: array, store: SpillFile, sums: bool = False):
        self._hot = hot
        self.append = hot.append
        self.extend = hot.extend
        self._store = store
        self._block = phases.SUM_BLOCK
        self._offsets: list[int] = []  # per block: its place in the store
        self._lasts = array("d")  # per block: its last value
        self._sums = array("d") if sums else None  # per block: sum() of its values
        self._cache: dict[int, array] = {}

    @property
    def cold(self) -> int:
        """Values in the file (whole blocks)."""
        return len(self._offsets) * self._block

    def spill(self, keep: int) -> None:
        """Move whole blocks to the file while ``keep`` values stay in memory. Raises
        OSError (what could not be written stays in memory)."""
        hot, size = self._hot, self._block
        while len(hot) - size >= keep:
            part = hot[:size]
            offset = self._store.write(part.tobytes())
            self._offsets.append(offset)
            self._lasts.append(part[-1])
            if self._sums is not None:
                self._sums.append(sum(part))
            del hot[:size]  # in place: append and extend stay bound to it

    def _load(self, b: int) -> array:
        got = self._cache.get(b)
        if got is None:
            got = array("d")
            got.frombytes(self._store.read(self._offsets[b], self._block * 8))
            if len(self._cache) >= CACHED_BLOCKS:
                del self._cache[next(iter(self._cache))]
            self._cache[b] = got
        return got

    def chunks(self):
        """The values, as arrays: each block, then the part in memory."""
        for b in range(len(self._offsets)):
            part = array("d")
            part.frombytes(self._store.read(self._offsets[b], self._block * 8))
            yield part
        yield self._hot

    def __len__(self) -> int:
        return self.cold + len(self._hot)

    def __iter__(self):
        return itertools.chain.from_iterable(self.chunks())

    def __getitem__(self, i):
        cold = self.cold
        if isinstance(i, slice):
            start, stop, step = i.indices(cold + len(self._hot))
            if step != 1:
                raise ValueError("Blocks: slices with a step are not supported")
            if start >= cold:
                return self._hot[start - cold:max(start, stop) - cold]
            out = array("d")
            k = start
            while k < stop:
                if k >= cold:
                    out.extend(self._hot[k - cold:stop - cold])
                    break
                b, at = divmod(k, self._block)
                end = min(stop - b * self._block, self._block)
                out.extend(self._load(b)[at:end])
                k = b * self._block + end
            return out
        if i < 0:
            i += cold + len(self._hot)
        if i >= cold:
            return self._hot[i - cold]
        if i < 0:
            raise IndexError("Blocks index out of range")
        b, at = divmod(i, self._block)
        return self._load(b)[at]

    def __setitem__(self, i: int, value: float) -> None:
        """Only the values in memory change (a report adds to its last sample)."""
        n = len(self)
        if i < 0:
            i += n
        if not self.cold <= i < n:
            raise IndexError("Blocks: only the values in memory can be set")
        self._hot[i - self.cold] = value

    def bisect_right(self, x: float, lo: int = 0) -> int:
        """``bisect.bisect_right(self, x, lo)`` of a sorted sequence."""
        cold = self.cold
        if not cold or x >= self._lasts[-1]:  # after every block: in memory
            return cold + bisect.bisect_right(self._hot, x, max(lo - cold, 0))
        b = bisect.bisect_right(self._lasts, x)
        return max(lo, b * self._block + bisect.bisect_right(self._load(b), x))

    def range_sum(self, k: int, j: int) -> float:
        """:func:`tuimeter.phases.range_sum` of ``self[k:j]``: block by block, a whole
        block's sum as kept."""
        size, cold, hot = self._block, self.cold, self._hot
        total = 0.0
        while k < j:
            b = k // size
            end = min((b + 1) * size, j)
            if k >= cold:
                total += sum(hot[k - cold:end - cold])
            elif self._sums is not None and k == b * size and end == (b + 1) * size:
                total += self._sums[b]
            else:
                total += sum(self._load(b)[k - b * size:end - b * size])
            k = end
        return total


def spillable(s: phases.Samples) -> bool:
    """The integrator's fast path holds for ``s`` (see the module docstring)."""
    return s.ticks is None and s.g is None and s.starts_in_order()


def spill(s: phases.Samples, store: SpillFile, keep: int = 1) -> None:
    """Move ``s``'s whole blocks of samples (end times, spans, energies alike) to
    ``store`` while at least ``keep`` stay in memory, if ``s`` may be kept in blocks and
    its end times are in order. Raises OSError (the samples stay in memory)."""
    size = phases.SUM_BLOCK
    t1 = s.t1
    hot = t1._hot if isinstance(t1, Blocks) else t1
    if len(hot) - size < keep or not spillable(s):
        return
    last = t1._lasts[-1] if isinstance(t1, Blocks) and t1.cold else -float("inf")
    n = (len(hot) - keep) // size * size  # the values that go
    part = hot[:n + 1]
    if part[0] < last or not all(map(operator.le, part, part[1:])):
        return
    if not isinstance(t1, Blocks):
        s.t1, s.iv, s.e = Blocks(s.t1, store), Blocks(s.iv, store), Blocks(s.e, store, True)
    for arr in (s.t1, s.iv, s.e):
        arr.spill(len(arr._hot) - n)


def joined(a, b, store: SpillFile | None):
    """``a`` followed by ``b`` (arrays or :class:`Blocks`): an array when both are
    arrays, else Blocks in ``store`` (written as they are read: no copy in memory)."""
    if not isinstance(a, Blocks) and not isinstance(b, Blocks):
        out = array("d", a)
        out.extend(b)
        return out
    if store is None:
        store = a._store if isinstance(a, Blocks) else b._store
    out = Blocks(array("d"), store, any(isinstance(x, Blocks) and x._sums is not None
                                        for x in (a, b)))
    for part in itertools.chain(a.chunks() if isinstance(a, Blocks) else (a,),
                                b.chunks() if isinstance(b, Blocks) else (b,)):
        out.extend(part)
        out.spill(1)
    return out


class Spiller:
    """Keeps the long series of one load in blocks, in one :class:`SpillFile` made when
    the first is long enough; after an OSError (no temporary file, a full disk) it
    keeps everything in memory, as before."""

    def __init__(self):
        self.store: SpillFile | None = None
        self.failed = False

    def sweep(self, series) -> None:
        """Each of ``series`` with a whole block and one more sample in memory: its whole
        blocks to the file."""
        if self.failed:
            return
        size = phases.SUM_BLOCK
        for s in series:
            t1 = s.t1
            if len(t1._hot if isinstance(t1, Blocks) else t1) <= size:
                continue
            try:
                if self.store is None:
                    self.store = SpillFile()
                spill(s, self.store)
            except OSError:
                self.failed = True
                return
