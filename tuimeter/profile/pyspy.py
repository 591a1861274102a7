"""``tuimeter profile --pid PID --duration S``: a running Python program, sampled from
outside by py-spy (an optional extra: ``pip install 'tuimeter[profile]'``) while the
engine follows the process.

py-spy runs as ``py-spy record --pid PID --duration S --rate HZ --format raw --function
--full-filenames -o FILE``: folded stacks with a count each, one frame per function
(``name (file:first line)``). Without ``--idle`` py-spy leaves out threads that are not
running (waiting on I/O, a lock, a sleep), so each count stands for a thread on the CPU:
the process's attributed energy over the window (CPU and GPU) is spread over the samples
evenly, the stand-in for the per-thread CPU time the in-process sampler measures. The
raw format has no time stamps, so phases are not split and a tick's energy is not kept
to its own samples. py-spy counts whole seconds: ``--duration`` is rounded up.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from ..live import LiveSession, StartError
from ..phases import combine, provenance
from .result import Profile, build
from .spread import Charge, SampleLog, whole_ticks
from .ticks import ATTRIBUTED, TickLog

if TYPE_CHECKING:
    from .run import ProfileOptions

EXTRA_HINT = "pip install 'tuimeter[profile]'"
_FRAME = re.compile(r"^(.*) \((.*):(\d+)\)$")


def find_pyspy() -> str | None:
    """py-spy's executable: on PATH, or next to this Python (a venv not activated)."""
    found = shutil.which("py-spy")
    if found:
        return found
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.access(here, os.X_OK) else None


def parse_raw(text: str) -> list[tuple[tuple[tuple[str, str, int], ...], int]]:
    """py-spy's raw output (``frame;frame;... COUNT`` per line, outermost first): each
    stack as functions (name, file, line) with its count. Lines that are not that are
    skipped."""
    out = []
    for line in text.splitlines():
        stack_text, _sp, count_text = line.rstrip().rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        frames = []
        for part in stack_text.split(";"):
            m = _FRAME.match(part)
            frames.append((m.group(1), m.group(2), int(m.group(3))) if m else (part, "", 0))
        out.append((tuple(frames), int(count_text)))
    return out


def record_command(exe: str, pid: int, seconds: int, rate_hz: float, out: str) -> list[str]:
    """py-spy's command line: ``pid`` for ``seconds``, raw folded stacks into ``out``."""
    return [exe, "record", "--pid", str(pid), "--duration", str(seconds), "--rate",
            str(max(1, round(rate_hz))), "--format", "raw", "--function", "--full-filenames",
            "-o", out]


def permission_hint(pid: int) -> str:
    return (f"py-spy may not read process {pid} (ptrace is not permitted): run tuimeter as "
            f"the same user as the program with ptrace allowed (sudo sysctl "
            f"kernel.yama.ptrace_scope=0), or with CAP_SYS_PTRACE (root, or a container "
            f"started with --cap-add SYS_PTRACE)")


def explain_failure(stderr: str, pid: int) -> str:
    """One line for a py-spy that failed: ptrace permission gets the fix."""
    low = stderr.lower()
    if "permission" in low or "operation not permitted" in low or "ptrace" in low:
        return permission_hint(pid)
    first = next((ln.strip() for ln in stderr.splitlines()
                  if ln.strip() and not ln.startswith("py-spy>")), "no message")
    return f"py-spy failed on process {pid}: {first.removeprefix('Error: ')}"


def profile_pid(opts: "ProfileOptions", workdir: str) -> tuple[int, Profile | None, list[str]]:
    """Sample ``opts.pid`` for ``opts.duration_s`` s: (exit status, profile or None,
    problems)."""
    from ..measurement import SetupError
    from .run import open_engine

    exe = find_pyspy()
    if exe is None:
        return 2, None, [f"--pid needs py-spy, an optional extra: {EXTRA_HINT}"]
    out = os.path.join(workdir, "pyspy.txt")
    assert opts.pid is not None  # --pid was given
    seconds = max(1, math.ceil(opts.duration_s))
    cmd = record_command(exe, opts.pid, seconds, opts.rate_hz, out)
    try:
        engine, recorder, ticks = open_engine(opts)
    except (SetupError, OSError) as exc:
        return 2, None, [str(exc)]
    live = LiveSession(engine, recorder, markers=opts.markers)
    try:
        live.open()
    except StartError as exc:
        return 2, None, [str(exc)]
    problems: list[str] = []
    t0 = time.monotonic()
    try:
        live.start()
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=seconds + 60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        r = subprocess.CompletedProcess(cmd, 1, "", f"Error: {exc}")
    t1 = time.monotonic()
    summary = live.stop()
    problems += summary.problems
    if r.returncode != 0 or not os.path.exists(out):
        return 1, None, problems + [explain_failure(r.stderr or "", opts.pid)]
    with open(out, encoding="utf-8", errors="replace") as fh:
        stacks = parse_raw(fh.read())
    return ((1 if problems else 0), profile_from_counts(stacks, ticks, t0, t1, opts.pid,
                                                         opts.rate_hz), problems)


def profile_from_counts(stacks, ticks: TickLog, t0: float, t1: float, pid: int,
                        rate_hz: float) -> Profile:
    """The window's attributed energy spread evenly over py-spy's samples (of process
    ``pid`` at ``rate_hz``)."""
    log = SampleLog()
    log.begin_t, log.end_t, log.rate_hz, log.pid = t0, t1, float(rate_hz), pid
    index: dict = {}
    charges: list[Charge] = []
    tks = ticks.ticks()
    cpu_j, gpu_j = sum(t.cpu_j for t in tks), sum(t.gpu_j for t in tks)
    n = sum(count for _s, count in stacks)
    period = 1.0 / rate_hz
    for sid, (frames, count) in enumerate(stacks):
        ids = []
        for key in frames:
            if key not in index:
                index[key] = len(index)
                log.frames[index[key]] = key
            ids.append(index[key])
        log.stacks[sid] = tuple(ids)
        each = (cpu_j + gpu_j) / n
        charges.extend(Charge(t1, sid, each, period, period, True) for _ in range(count))
    notes = []
    if n == 0:
        notes.append("py-spy saw no running Python thread: the energy is not shared out")
    prov = provenance(whole_ticks(tks, t0, t1), {ATTRIBUTED})
    profile = build(log, charges, provenance=prov, cpu_energy_j=cpu_j, gpu_energy_j=gpu_j,
                    source="py-spy",
                    power_provenance=combine(ticks.power_provs) if ticks.power_provs else "")
    if n == 0:
        profile.total_energy_j = cpu_j + gpu_j
    profile.notes.extend(notes)
    return profile
