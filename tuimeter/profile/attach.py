"""The functions of a running Python program by energy, live, sampled from outside: the
UI's ``f`` key in a ``tuimeter -- CMD`` or ``tuimeter --pid PID`` session.

py-spy (the optional extra ``tuimeter[profile]``) records the process in chunks of
:data:`CHUNK_S` (``py-spy record --duration 1 --format raw``, one after the other, as
``tuimeter profile --pid`` does once). The engine already attributes energy to the
process each tick (:class:`~.ticks.TickLog` with ``pid``: its CPU share of the CPU-side
power plus its GPU share); a chunk gets the process's energy from the end of the chunk
before it to its own end (so the moments between two chunks are not lost), prorated
where a tick straddles the bounds, and spreads it evenly over its samples (py-spy leaves
out threads that are not running: each sample stands for a thread on the CPU). A chunk is
spread once a tick has closed its window, so the panel runs at most a tick and a chunk
behind the program.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from typing import TYPE_CHECKING, Callable, Sequence

from .pyspy import explain_failure, parse_raw, record_command
from .result import FunctionStat, functions_of_stacks
from .sampler import DEFAULT_RATE_HZ
from .ticks import TickLog

if TYPE_CHECKING:
    from ..engine.sampler import Engine
    from ..model import ProcessShare

#: seconds per py-spy run (it counts whole seconds)
CHUNK_S = 1
#: an executable's name that says it is a Python interpreter
_PYTHON_EXE = re.compile(r"^(python|pypy)[0-9.]*(d|m|t)?$")


def is_python(pid: int, proc_root: str = "/proc") -> bool | None:
    """Whether process ``pid`` runs a Python interpreter: its executable is named python
    (or pypy), or it has libpython mapped (an embedded interpreter). None: cannot tell
    (gone, not ours to read, no /proc)."""
    base = f"{proc_root}/{pid}"
    try:
        exe = os.path.basename(os.readlink(f"{base}/exe"))
    except OSError:
        exe = None
    if exe is not None and _PYTHON_EXE.match(exe.removesuffix(" (deleted)")):
        return True
    try:
        with open(f"{base}/maps", "rb") as fh:
            return any(b"libpython" in line for line in fh)
    except OSError:
        return False if exe is not None else None


def python_process(root: int, members: Sequence["ProcessShare"],
                   check: Callable[[int], bool | None] = is_python) -> int | None:
    """The process to sample: ``root`` if it runs Python, else the job member using the
    most energy that does (``tuimeter -- sh -c 'python train.py'``); None: none does.
    A process we cannot tell about counts as Python (py-spy will say if it is not)."""
    if check(root) is not False:
        return root
    for m in sorted(members, key=lambda m: -m.total_energy_j):
        if m.pid != root and check(m.pid):
            return m.pid
    return None


class ChunkedProfile:
    """Samples ``pid`` with py-spy in chunks until :meth:`stop`; ``latest`` is an
    immutable (functions, total J) pair any thread may read (the UI's panel shows it).

    Subscribes to ``engine`` at once (the energy of the process from now on) and
    unsubscribes at :meth:`stop`. :meth:`run` is the loop (a thread of the caller's).
    """

    def __init__(self, pid: int, engine: "Engine", exe: str, *,
                 rate_hz: float = DEFAULT_RATE_HZ, chunk_s: int = CHUNK_S,
                 popen: Callable[..., subprocess.Popen] = subprocess.Popen) -> None:
        self.pid = pid
        self.engine = engine
        self.clock = engine.clock
        self.exe = exe
        self.rate_hz = rate_hz
        self.chunk_s = max(1, int(chunk_s))
        self.popen = popen
        self.ticks = TickLog(clock=engine.clock, pid=pid)
        self.chunks = 0  # chunks recorded
        self.latest: tuple[tuple[FunctionStat, ...], float] = ((), 0.0)
        self._pending: list[tuple[float, float, list]] = []  # (t0, t1, stacks) not spread
        self._covered: float | None = None  # the end of the last chunk spread
        self._stacks: dict[int, list] = {}  # stack id -> [J, CPU s, wall s, samples]
        self._keys: dict[int, tuple] = {}  # stack id -> its functions (name, file, line)
        self._ids: dict[tuple, int] = {}
        self._total_j = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="tuimeter-pyspy-")
        engine.subscribe(self.ticks)
        engine.subscribe(self._on_tick)

    # -- the loop (a thread) ----------------------------------------------------------
    def run(self) -> str | None:
        """Record chunk after chunk until :meth:`stop`; the problem that ended it early
        (one line: py-spy failed, ptrace not permitted, the process is gone), else None."""
        out = os.path.join(self._dir, "chunk.txt")
        cmd = record_command(self.exe, self.pid, self.chunk_s, self.rate_hz, out)
        try:
            while not self._stop.is_set():
                t0 = self.clock()
                try:
                    proc = self.popen(cmd, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True)
                except OSError as exc:
                    return f"py-spy could not start: {exc}"
                self._proc = proc
                if self._stop.is_set():  # stopped while it started
                    proc.terminate()
                try:
                    _out, err = proc.communicate(timeout=self.chunk_s + 60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _out, err = proc.communicate()
                t1 = self.clock()
                if self._stop.is_set():
                    return None
                if proc.returncode != 0 or not os.path.exists(out):
                    return explain_failure(err or "", self.pid)
                try:
                    with open(out, encoding="utf-8", errors="replace") as fh:
                        stacks = parse_raw(fh.read())
                    os.remove(out)
                except OSError as exc:  # stop() removed the folder meanwhile, or worse
                    return None if self._stop.is_set() else f"py-spy's output: {exc}"
                with self._lock:
                    self.chunks += 1
                    self._pending.append((t0, t1, stacks))
                    self._spread_due()
            return None
        finally:
            self._proc = None

    def stop(self) -> None:
        """End the loop (a py-spy running is ended), leave the engine (idempotent)."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
        self.engine.unsubscribe(self.ticks)
        self.engine.unsubscribe(self._on_tick)
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- spreading ----------------------------------------------------------------------
    def _on_tick(self, _snap) -> None:
        with self._lock:
            self._spread_due()

    def _spread_due(self) -> None:
        """Spread every recorded chunk whose window a tick has closed (lock held)."""
        if not self._pending:  # (each engine tick comes here: nothing to do)
            return
        # the ticks since the last chunk spread (the engine's thread calls this: never a
        # copy of the whole session's log)
        since = self._covered if self._covered is not None else self._pending[0][0]
        ticks = self.ticks.ticks(after_s=since)
        if not ticks or self._pending[0][1] > ticks[-1].t1_s:
            return  # no chunk's window closed yet
        closed = ticks[-1].t1_s
        period = 1.0 / self.rate_hz
        while self._pending and self._pending[0][1] <= closed:
            t0, t1, stacks = self._pending.pop(0)
            start = self._covered if self._covered is not None else t0
            self._covered = t1
            energy = sum((tk.cpu_j + tk.gpu_j) * _overlap(tk.t0_s, tk.t1_s, start, t1)
                         for tk in ticks)
            self._total_j += energy
            n = sum(count for _frames, count in stacks)
            for frames, count in stacks if n > 0 else ():  # none: the program was idle
                sid = self._ids.get(frames)
                if sid is None:
                    sid = self._ids[frames] = len(self._ids)
                    self._keys[sid] = frames
                    self._stacks[sid] = [0.0, 0.0, 0.0, 0]
                acc = self._stacks[sid]
                acc[0] += energy * count / n
                acc[1] += count * period
                acc[2] += count * period
                acc[3] += count
        self.latest = (functions_of_stacks(self._stacks, self._keys), self._total_j)


def _overlap(t0: float, t1: float, a: float, b: float) -> float:
    """The fraction of tick ``(t0, t1]`` inside ``(a, b]``."""
    if t1 <= t0:
        return 0.0
    return max(0.0, min(t1, b) - max(t0, a)) / (t1 - t0)

