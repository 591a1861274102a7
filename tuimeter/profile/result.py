"""A profile: energy and time per function, built from the charges (:mod:`.spread`),
and what it is written as (the stdout table, JSON, folded stacks, speedscope).

A function is (qualified name, file, first line). Its *self* figures come from the
samples where it was the innermost frame, its *inclusive* (``total_``) figures from the
samples where it was anywhere on the stack (once per sample, however often it recurses).
``samples`` is how many samples of a Python thread it appeared in; under
:data:`MIN_SAMPLES` the figures are marked ``uncertain``. Times are wall seconds a thread
spent there (a thread waiting in a function counts; several threads count each), CPU
seconds apart (``self_cpu_s``/``total_cpu_s``).
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..text import safe_text
from .spread import Charge, SampleLog

#: a function resting on fewer samples than this is marked uncertain
MIN_SAMPLES = 10
#: functions in the stdout table
TABLE_ROWS = 20

Key = tuple  # (qualified name, file, line)


@dataclass(frozen=True)
class FunctionStat:
    """One function's share of the profiled process's energy and time."""

    function: str
    file: str
    line: int
    self_energy_j: float
    total_energy_j: float
    self_s: float
    total_s: float
    self_cpu_s: float
    total_cpu_s: float
    samples: int
    self_samples: int
    uncertain: bool

    @property
    def total_power_w(self) -> float | None:
        """Average power while the function was on a stack, W (None: no time)."""
        return self.total_energy_j / self.total_s if self.total_s > 0 else None

    def as_dict(self) -> dict:
        return {"function": self.function, "file": self.file, "line": self.line,
                "self_energy_j": self.self_energy_j, "total_energy_j": self.total_energy_j,
                "self_s": self.self_s, "total_s": self.total_s, "self_cpu_s": self.self_cpu_s,
                "total_cpu_s": self.total_cpu_s, "samples": self.samples,
                "self_samples": self.self_samples, "uncertain": self.uncertain}


@dataclass(frozen=True)
class PhaseProfile:
    """The functions of one phase (between two markers)."""

    label: str
    start_s: float  # since the profile began
    duration_s: float
    energy_j: float
    functions: tuple[FunctionStat, ...]


@dataclass
class Profile:
    """What ``tuimeter profile`` (and ``Meter(profile=True)``) hands back."""

    total_energy_j: float  # the profiled process's attributed energy
    duration_s: float
    rate_hz: float | None
    samples: int
    provenance: str  # attributed | interpolated (a run shorter than one tick) | ...
    functions: tuple[FunctionStat, ...]
    #: energy per stack (outermost function first), J
    stacks: dict[tuple[Key, ...], float] = field(default_factory=dict)
    #: stacks in time order, consecutive repeats merged: (stack, energy J)
    timeline: list[tuple[tuple[Key, ...], float]] = field(default_factory=list)
    phases: tuple[PhaseProfile, ...] = ()
    cpu_energy_j: float = 0.0
    gpu_energy_j: float = 0.0
    power_provenance: str = ""  # where the power itself came from: measured | estimated
    source: str = "tuimeter"  # tuimeter (in-process sampler) | py-spy
    pid: int | None = None
    notes: list[str] = field(default_factory=list)  # one line each, said after the table
    #: samples per second the sampler reached (None: too few samples to say); below the
    #: asked ``rate_hz`` a note says so
    reached_hz: float | None = None

    def function(self, name: str) -> FunctionStat | None:
        """The first function with this qualified name (or a name ending in ``.name``)."""
        for f in self.functions:
            if f.function == name or f.function.endswith("." + name):
                return f
        return None

    def as_dict(self) -> dict:
        out: dict = {"total_energy_j": self.total_energy_j, "cpu_energy_j": self.cpu_energy_j,
               "gpu_energy_j": self.gpu_energy_j, "duration_s": self.duration_s,
               "rate_hz": self.rate_hz, "reached_rate_hz": self.reached_hz,
               "samples": self.samples,
               "provenance": self.provenance, "power_provenance": self.power_provenance,
               "source": self.source, "pid": self.pid, "min_samples": MIN_SAMPLES,
               "functions": [f.as_dict() for f in self.functions]}
        if self.phases:
            out["phases"] = [{"label": p.label, "start_s": p.start_s,
                              "duration_s": p.duration_s, "energy_j": p.energy_j,
                              "functions": [f.as_dict() for f in p.functions]}
                             for p in self.phases]
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def stack_keys(log: SampleLog) -> dict[int, tuple[Key, ...]]:
    """Each stack id of ``log`` as its functions, outermost first."""
    return {sid: tuple(log.frames[f] for f in ids) for sid, ids in log.stacks.items()}


def per_stack(charges: Iterable[Charge], into: dict | None = None) -> dict[int, list]:
    """Charges summed per stack id: ``[energy J, CPU s, wall s, samples]`` (added to
    ``into`` when given: a live profile sums tick after tick)."""
    acc: dict[int, list] = {} if into is None else into
    for c in charges:
        a = acc.get(c.stack)
        if a is None:
            a = acc[c.stack] = [0.0, 0.0, 0.0, 0]
        a[0] += c.energy_j
        a[1] += c.cpu_s
        a[2] += c.wall_s
        a[3] += 1 if c.sampled else 0
    return acc


def functions_of(charges: Iterable[Charge], keys: Mapping[int, tuple[Key, ...]]
                 ) -> tuple[FunctionStat, ...]:
    """Per function, self and inclusive figures (module docstring), by inclusive energy."""
    return functions_of_stacks(per_stack(charges), keys)


def functions_of_stacks(stacks: Mapping[int, list], keys: Mapping[int, tuple[Key, ...]]
                        ) -> tuple[FunctionStat, ...]:
    """:func:`functions_of` from charges already summed per stack (:func:`per_stack`)."""
    acc: dict[Key, list] = {}  # key -> [self_j, tot_j, self_s, tot_s, self_cpu, tot_cpu, n, n_self]
    for sid, (energy, cpu, wall, n) in stacks.items():
        stack = keys[sid]
        if not stack:
            continue
        for k in set(stack):
            a = acc.setdefault(k, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0])
            a[1] += energy
            a[3] += wall
            a[5] += cpu
            a[6] += n
        a = acc[stack[-1]]
        a[0] += energy
        a[2] += wall
        a[4] += cpu
        a[7] += n
    stats = [FunctionStat(k[0], k[1], k[2], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                          uncertain=bool(k[1]) and a[6] < MIN_SAMPLES)
             for k, a in acc.items() if k[1] or a[1] > 0]  # a pseudo line only with energy
    stats.sort(key=lambda f: (-f.total_energy_j, -f.total_s, f.function))
    return tuple(stats)


def build(log: SampleLog, charges: Sequence[Charge], *, provenance: str,
          markers: Sequence[tuple[str, float]] = (), **extra) -> Profile:
    """The profile of ``charges``. ``markers``: (label, time on the sampler's clock);
    with any, ``phases`` holds the functions between each two (the first phase, from
    the start to the first marker, is ``start`` when it holds anything)."""
    keys = stack_keys(log)
    start = log.start_t if log.start_t is not None else 0.0
    stop = log.stop_t if log.stop_t is not None else start
    stacks: dict[tuple[Key, ...], float] = {}
    timeline: list[tuple[tuple[Key, ...], float]] = []
    for c in charges:
        st = keys[c.stack]
        stacks[st] = stacks.get(st, 0.0) + c.energy_j
        if timeline and timeline[-1][0] == st:
            timeline[-1] = (st, timeline[-1][1] + c.energy_j)
        else:
            timeline.append((st, c.energy_j))
    phases = _phases(charges, keys, markers, start, stop)
    return Profile(
        total_energy_j=sum(c.energy_j for c in charges), duration_s=max(0.0, stop - start),
        rate_hz=log.rate_hz, samples=sum(1 for c in charges if c.sampled),
        provenance=provenance, functions=functions_of(charges, keys), stacks=stacks,
        timeline=timeline, phases=phases, pid=log.pid, **extra)


def _phases(charges: Sequence[Charge], keys: Mapping, markers: Sequence[tuple[str, float]],
            start: float, stop: float) -> tuple[PhaseProfile, ...]:
    """Charges from each marker to the next (before the first: the first phase's; after
    the last: the last's)."""
    if not markers:
        return ()
    bounds = sorted((max(t, start), label) for label, t in markers)
    if bounds[0][0] > start:
        bounds.insert(0, (start, "start"))
    ts = [t for t, _label in bounds]
    groups: list[list[Charge]] = [[] for _ in bounds]
    for c in charges:
        groups[max(0, bisect.bisect_right(ts, c.t_s) - 1)].append(c)
    return tuple(
        PhaseProfile(label, t0 - start, (ts[i + 1] if i + 1 < len(ts) else max(t0, stop)) - t0,
                     sum(c.energy_j for c in groups[i]), functions_of(groups[i], keys))
        for i, (t0, label) in enumerate(bounds))


# -- writers ------------------------------------------------------------------------
def frame_label(key: Key, *, short: bool = True) -> str:
    """``name (file:line)`` (the file's base name when ``short``), one line, no ``;``."""
    name, path, line = key
    if not path:
        text = name
    else:
        text = f"{name} ({os.path.basename(path) if short else path}:{line})"
    return safe_text(text).replace(";", ":").replace("\n", " ")


def collapsed(profile: Profile) -> str:
    """Folded stacks weighted by millijoules (``a;b;c 1234``), the format of
    flamegraph.pl, inferno and speedscope; stacks under 0.5 mJ are left out."""
    lines = []
    for stack, energy in sorted(profile.stacks.items(), key=lambda kv: -kv[1]):
        mj = round(energy * 1000)
        if mj > 0:
            lines.append(";".join(frame_label(k) for k in stack) + f" {mj}")
    return "\n".join(lines) + ("\n" if lines else "")


SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(profile: Profile, name: str = "tuimeter profile") -> dict:
    """speedscope's file format: one "sampled" profile, the stacks in time order
    (consecutive repeats merged), each weighted by its energy in millijoules (unit
    ``none``: the format has no energy unit)."""
    index: dict[Key, int] = {}
    frames: list[dict] = []
    samples, weights = [], []
    for stack, energy in profile.timeline:
        ids = []
        for k in stack:
            if k not in index:
                index[k] = len(frames)
                fr = {"name": safe_text(k[0])}
                if k[1]:
                    fr.update(file=safe_text(k[1]), line=k[2])
                frames.append(fr)
            ids.append(index[k])
        samples.append(ids)
        weights.append(energy * 1000.0)
    total = sum(weights)
    return {"$schema": SPEEDSCOPE_SCHEMA, "shared": {"frames": frames},
            "profiles": [{"type": "sampled", "name": f"{name}: energy (mJ)", "unit": "none",
                          "startValue": 0, "endValue": total, "samples": samples,
                          "weights": weights}],
            "name": name, "activeProfileIndex": 0, "exporter": "tuimeter"}


def table(profile: Profile, rows: int = TABLE_ROWS, width: int = 100) -> str:
    """The stdout table: the top functions by inclusive energy."""
    total = profile.total_energy_j
    head = (f"{'incl J':>10} {'self J':>10} {'share':>6} {'time s':>8} {'avg W':>7} "
            f"{'samples':>7}  function")
    out = [head]
    for f in profile.functions[:rows]:
        share = f"{100 * f.total_energy_j / total:5.1f}%" if total > 0 else "   N/A"
        power = f.total_power_w
        flag = "?" if f.uncertain else " "
        label = frame_label((f.function, f.file, f.line))
        room = max(20, width - len(head) + len("function"))
        if len(label) > room:
            label = label[:room - 1] + "…"
        out.append(f"{f.total_energy_j:10.3f} {f.self_energy_j:10.3f} {share:>6} "
                   f"{f.total_s:8.2f} {'N/A' if power is None else f'{power:7.2f}':>7} "
                   f"{f.samples:>6}{flag}  {label}")
    if any(f.uncertain for f in profile.functions[:rows]):
        out.append(f"? fewer than {MIN_SAMPLES} samples: uncertain")
    return "\n".join(out)


def summary(profile: Profile) -> str:
    """One line: the process's energy, how long, how many samples, provenance."""
    return (f"tuimeter: profile of pid {profile.pid}: {profile.total_energy_j:.2f} J "
            f"({profile.provenance}; CPU {profile.cpu_energy_j:.2f} J, GPU "
            f"{profile.gpu_energy_j:.2f} J) over {profile.duration_s:.1f} s, "
            f"{profile.samples} samples")


def dumps(profile: Profile) -> str:
    return json.dumps(profile.as_dict(), indent=1) + "\n"
