"""Energy per stack: the engine's ticks spread over the sampler's stacks.

The model (docs/profile.md):

* **Ticks.** Each tick of tuimeter's engine gives the profiled process (the followed job)
  an attributed energy (:mod:`tuimeter.engine.attribution`, not computed again here):
  a CPU part (its share of the CPU-side domains) and a GPU part (its share of each GPU).
* **CPU part** of a tick: spread over the samples that fall in the tick, weighted by the
  CPU seconds each sampled thread used since the previous sample. A thread waiting on
  I/O, a lock or ``join()`` used none: it gets nothing. CPU time no Python thread accounts
  for (native threads, threads that ended between two samples) goes to the Python stacks
  running in the same sample, in proportion to their CPU (evenly when none used any,
  ``[other threads]`` when there was no Python thread). tuimeter's own threads get their
  own line, ``[tuimeter]``; the interpreter's start before sampling began,
  ``[interpreter startup]``.
* **GPU part** of a tick: spread over the tick's samples by wall time (the tick's GPU
  power taken as constant within it), each sample's part going to the threads that used
  CPU in it (evenly when none did, e.g. all waiting on a synchronising call). So
  asynchronous kernels are charged to the Python code that ran while the GPU was busy,
  not to the line that launched them.
* Energy of a tick that holds no usable sample goes to ``[interpreter startup]`` when the
  tick ended before sampling began (a slow start), ``[interpreter exit]`` when it began
  after sampling ended, else ``[unsampled]``: the parts always add up to the process's
  attributed energy.

Pure computation over records (:class:`SampleLog`) and ticks (:class:`Tick`); no I/O
except :meth:`SampleLog.read_file`.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Sequence

from .sampler import STARTUP_FRAME, TUIMETER_FRAME

OTHER_FRAME = "[other threads]"
UNSAMPLED_FRAME = "[unsampled]"
EXIT_FRAME = "[interpreter exit]"
#: pseudo functions (negative frame ids; each is its own one-frame stack, same id)
PSEUDO = {-1: TUIMETER_FRAME, -2: STARTUP_FRAME, -3: OTHER_FRAME, -4: UNSAMPLED_FRAME,
          -5: EXIT_FRAME}
TUIMETER_STACK, STARTUP_STACK, OTHER_STACK, UNSAMPLED_STACK, EXIT_STACK = -1, -2, -3, -4, -5
#: longest name or path kept from a record (anything longer is cut)
MAX_TEXT = 1000


class Tick(NamedTuple):
    """One engine tick on the sampler's clock: ``(t0_s, t1_s]``, and the profiled
    process's attributed energy in it, J."""

    t0_s: float
    t1_s: float
    cpu_j: float
    gpu_j: float


class Charge(NamedTuple):
    """Energy given to one stack at one sample: the unit every output sums."""

    t_s: float
    stack: int
    energy_j: float
    cpu_s: float  # CPU time the thread used in this stack (0 where unknown)
    wall_s: float  # wall time the thread spent in it (0 for pseudo stacks)
    sampled: bool  # a real sample of a Python thread (counts in ``samples``)


@dataclass
class SampleLog:
    """The sampler's records, parsed and checked (the file is the profiled program's
    to write: a malformed line is counted in ``bad_lines`` and skipped)."""

    frames: dict[int, tuple[str, str, int]] = field(
        default_factory=lambda: {k: (v, "", 0) for k, v in PSEUDO.items()})
    stacks: dict[int, tuple[int, ...]] = field(
        default_factory=lambda: {k: (k,) for k in PSEUDO})
    #: (t_s, dt_s, [(stack, cpu_s or None)], other_cpu_s, tuimeter_cpu_s)
    samples: list[tuple] = field(default_factory=list)
    begin_t: float | None = None
    startup_cpu_s: float = 0.0
    rate_hz: float | None = None
    pid: int | None = None
    end_t: float | None = None
    bad_lines: int = 0
    _offset: int = 0  # bytes of the file already read (read_file goes on from there)

    def feed(self, rec: object) -> None:
        """Take one record; a malformed one raises ValueError (nothing is kept)."""
        if not isinstance(rec, list) or not rec:
            raise ValueError("not a record")
        kind = rec[0]
        if kind == "S":
            _k, t, dt, entries, other, ours = rec
            parsed = [(_int(sid), None if cpu is None else _num(cpu)) for sid, cpu in entries]
            if any(sid not in self.stacks for sid, _c in parsed):
                raise ValueError("unknown stack")
            self.samples.append((_num(t), _num(dt), parsed, _num(other), _num(ours)))
        elif kind == "K":
            _k, sid, ids = rec
            sid, ids = _int(sid), tuple(_int(i) for i in ids)
            if sid < 0 or any(i not in self.frames for i in ids):
                raise ValueError("bad stack")
            self.stacks[sid] = ids
        elif kind == "F":
            _k, fid, name, path, line = rec
            if _int(fid) < 0 or not isinstance(name, str) or not isinstance(path, str):
                raise ValueError("bad frame")
            self.frames[_int(fid)] = (name[:MAX_TEXT], path[:MAX_TEXT], _int(line))
        elif kind == "B":
            _k, t, cpu, rate, pid = rec
            self.begin_t, self.startup_cpu_s = _num(t), _num(cpu)
            self.rate_hz, self.pid = _num(rate), _int(pid)
        elif kind == "E":
            self.end_t = _num(rec[1])
        else:
            raise ValueError("unknown record")

    def read_file(self, path: str) -> None:
        """Read the records added to ``path`` since the last call (a line not yet
        complete is left for the next one)."""
        with open(path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            try:
                self.feed(json.loads(line.decode("utf-8", "surrogateescape")))
            except (ValueError, TypeError, UnicodeError):
                self.bad_lines += 1

    @property
    def start_t(self) -> float | None:
        return self.begin_t if self.begin_t is not None else (
            self.samples[0][0] - self.samples[0][1] if self.samples else None)

    @property
    def stop_t(self) -> float | None:
        return self.end_t if self.end_t is not None else (
            self.samples[-1][0] if self.samples else self.begin_t)


def _num(x: object) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError("not a number >= 0")
    return float(x)


def _int(x: object) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError("not an integer")
    return x


class _Unit(NamedTuple):
    t_s: float
    stack: int
    cpu_w: float  # weight of the CPU part
    gpu_w: float  # weight of the GPU part
    cpu_s: float
    wall_s: float
    sampled: bool


def _units(log: SampleLog) -> list[_Unit]:
    """Each sample's threads as weighted units (see the module docstring)."""
    out: list[_Unit] = []
    if log.begin_t is not None and log.startup_cpu_s > 0:
        out.append(_Unit(log.begin_t, STARTUP_STACK, log.startup_cpu_s, 0.0,
                         log.startup_cpu_s, 0.0, False))
    for t, dt, entries, other, ours in log.samples:
        if ours > 0:
            out.append(_Unit(t, TUIMETER_STACK, ours, 0.0, ours, 0.0, False))
        if not entries:
            if other > 0:
                out.append(_Unit(t, OTHER_STACK, other, 0.0, other, 0.0, False))
            continue
        n = len(entries)
        if any(cpu is None for _s, cpu in entries):  # no per-thread clock: all alike
            out.extend(_Unit(t, sid, dt / n, dt / n, 0.0, dt, True) for sid, _c in entries)
            continue
        used = sum(cpu for _s, cpu in entries)
        for sid, cpu in entries:
            if used > 0:
                cpu_w = cpu + other * cpu / used
                gpu_w = dt * cpu / used
            else:
                cpu_w, gpu_w = other / n, dt / n
            out.append(_Unit(t, sid, cpu_w, gpu_w, cpu, dt, True))
    return out


def spread(log: SampleLog, ticks: Sequence[Tick]) -> list[Charge]:
    """Every tick's energy given to the stacks sampled in it (module docstring); the
    charges add up to the ticks' energy. A unit belongs to the tick its time falls in
    (before the first tick: the first; after the last: the last)."""
    if not ticks:
        return []
    ends = [tk.t1_s for tk in ticks]
    per_tick: list[list[_Unit]] = [[] for _ in ticks]
    for u in _units(log):
        i = min(bisect.bisect_left(ends, u.t_s), len(ticks) - 1)
        per_tick[i].append(u)
    charges: list[Charge] = []
    for tick, units in zip(ticks, per_tick):
        energy = {id(u): 0.0 for u in units}
        for part_j, weight in ((tick.cpu_j, lambda u: u.cpu_w), (tick.gpu_j, lambda u: u.gpu_w)):
            if part_j <= 0:
                continue
            total = sum(weight(u) for u in units)
            basis = weight
            if total <= 0:  # nothing ran on the CPU: the sampled threads by wall time
                basis = lambda u: u.wall_s  # noqa: E731
                total = sum(u.wall_s for u in units)
            if total <= 0:
                charges.append(Charge(tick.t1_s, _unsampled(log, tick), part_j, 0.0, 0.0,
                                      False))
                continue
            for u in units:
                energy[id(u)] += part_j * basis(u) / total
        charges.extend(Charge(u.t_s, u.stack, energy[id(u)], u.cpu_s, u.wall_s, u.sampled)
                       for u in units)
    return charges


def _unsampled(log: SampleLog, tick: Tick) -> int:
    """Where the energy of a tick with no usable sample goes."""
    if log.begin_t is not None and tick.t1_s <= log.begin_t:
        return STARTUP_STACK
    if log.end_t is not None and tick.t0_s >= log.end_t:
        return EXIT_STACK
    return UNSAMPLED_STACK


def whole_ticks(ticks: Iterable[Tick], t0_s: float, t1_s: float) -> int:
    """How many ticks lie entirely inside ``[t0_s, t1_s]`` (phases' provenance rule)."""
    return sum(1 for tk in ticks if tk.t0_s >= t0_s and tk.t1_s <= t1_s)
