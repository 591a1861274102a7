"""Estimated CPU and memory power, for machines (or domains) without a power counter.

CPU: CodeCarbon's model ``P = TDP x (0.1 + 0.9 x load^3)``, with ``load`` the whole
machine's CPU utilisation (0..1) averaged since the previous read, and the TDP looked up
by CPU model in ``data/cpu_tdp_w.csv`` (CodeCarbon 3.3.2, Intel ARK / AMD product pages).
An unknown CPU is given CodeCarbon's 4 W per logical CPU, and the domain's label says so.
Because the load is an average over the read interval, the cube is taken of the average:
bursty loads are under-estimated, one more reason this is an estimate.

Memory: Green Algorithms' 0.3725 W per GB, applied to the *installed* memory
(``psutil.virtual_memory().total``, counted in GiB since memory is sold in binary "GB"),
constant whatever the use: DRAM power is dominated by refresh and background power, and
Green Algorithms applies the figure to memory available, not touched. 16 GiB -> 5.96 W.

Never stands in for a measured domain: the engine passes ``include_cpu=False`` when RAPL
or powermetrics measures a CPU and ``include_memory=False`` when DRAM is measured.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Callable, Sequence

from ..model import DeviceInfo, Domain, DomainKind, Provenance, Reading, SensorStatus
from .base import Sensor
from .capabilities import DeviceInfoSource
from .cpuinfo import CpuPackageReader

#: CodeCarbon's TDP for a CPU missing from the table, per logical CPU (W).
UNKNOWN_TDP_PER_THREAD_W = 4.0
#: Green Algorithms' memory power, W per GB (GiB here) installed.
MEMORY_W_PER_GIB = 0.3725
#: share of TDP drawn at zero load in CodeCarbon's model.
IDLE_TDP_FRACTION = 0.1

_NOISE = re.compile(
    r"\((?:r|tm|c)\)|\bcpu\b|\bprocessor\b|\bwith\b.*$|@.*$|\b\d+-core\b|,", re.IGNORECASE
)


def _tokens(name: str) -> tuple[str, ...]:
    """Lower-case words of a CPU name, without (R), (TM), "CPU", "@ 3.70GHz", "16-Core"."""
    return tuple(_NOISE.sub(" ", name).lower().split())


#: a word after a matched name that makes it another, bigger chip ("Apple M1" + "Pro")
_VARIANT_WORDS = frozenset({"pro", "max", "ultra", "plus", "extreme"})


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    """Whether ``needle`` is a run of adjacent words of ``haystack`` not followed by a tier word."""
    n = len(needle)
    return any(
        haystack[i : i + n] == needle
        and (i + n == len(haystack) or haystack[i + n] not in _VARIANT_WORDS)
        for i in range(len(haystack) - n + 1)
    )


@lru_cache(maxsize=1)
def tdp_table() -> tuple[tuple[str, tuple[str, ...], float], ...]:
    """(name, name tokens, TDP W) for every row of the vendored table, parsed once."""
    text = (resources.files("tuimeter") / "data" / "cpu_tdp_w.csv").read_text(encoding="utf-8")
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        try:
            tdp_w = float(row["tdp_w"])
        except (TypeError, ValueError):
            continue
        tokens = _tokens(row["name"])
        # safe matching: a bare number ("460", "3280") could be any part of a model string
        if tokens and any(c.isdigit() for c in "".join(tokens)) and (
            len(tokens) > 1 or not tokens[0].replace(".", "").isdigit()
        ):
            rows.append((row["name"], tokens, tdp_w))
    return tuple(rows)


@dataclass(frozen=True)
class TdpMatch:
    """The TDP chosen for a CPU model string, and whether it came from the table."""

    model: str
    tdp_w: float
    table_name: str | None  # None: not in the table, per-thread default used

    def describe(self) -> str:
        if self.table_name:
            return f"{self.table_name}, TDP {self.tdp_w:g} W (CodeCarbon table)"
        return f"unknown CPU {self.model!r}: TDP assumed {self.tdp_w:g} W (4 W per thread)"


def lookup_tdp(model: str, threads: int) -> TdpMatch:
    """TDP for a ``/proc/cpuinfo`` model name.

    A table name matches when its words appear, in order and adjacent, among the model's
    words once (R)/(TM)/"CPU"/"@ x GHz"/"N-Core" are dropped, so "Intel(R) Core(TM)
    i7-8700K CPU @ 3.70GHz" finds "Intel Core i7-8700K" and never "Intel Core i7-8700".
    The longest match wins; equally long matches with different TDPs count as unknown, and so
    does a match followed by Pro/Max/Ultra ("Apple M1 Pro" is not the table's "Apple M1").
    Names made of one bare number are never matched. Unknown: 4 W x ``threads``.
    """
    words = _tokens(model)
    best: list[tuple[str, float]] = []
    best_len = 0
    for name, tokens, tdp_w in tdp_table():
        if len(tokens) >= best_len and _contains(words, tokens):
            if len(tokens) > best_len:
                best, best_len = [], len(tokens)
            best.append((name, tdp_w))
    if best and len({tdp for _, tdp in best}) == 1:
        return TdpMatch(model, best[0][1], best[0][0])
    return TdpMatch(model, UNKNOWN_TDP_PER_THREAD_W * max(threads, 1), None)


def cpu_model_name(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU model string: ``model name`` in /proc/cpuinfo, else the platform's. Never raises."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model name") and value.strip():
                    return value.strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            import subprocess

            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=2, check=False,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    import platform

    return platform.processor() or "unknown CPU"


class CpuTimesLoad:
    """Machine-wide CPU utilisation (0..1) since the previous call, from ``cpu_times``.

    Keeps its own previous sample rather than using ``psutil.cpu_percent(interval=None)``,
    whose single module-level baseline would be shared with (and reset by) any other
    caller in the process, such as process attribution.
    """

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._last = psutil.cpu_times()

    def __call__(self) -> float:
        now = self._psutil.cpu_times()
        last, self._last = self._last, now
        idle_fields = ("idle", "iowait")
        busy = total = 0.0
        for field in now._fields:
            if field in ("guest", "guest_nice"):  # already counted in user / nice
                continue
            delta = max(getattr(now, field) - getattr(last, field), 0.0)
            total += delta
            if field not in idle_fields:
                busy += delta
        return busy / total if total > 0 else 0.0


def _installed_memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def _logical_cpus() -> int:
    return os.cpu_count() or 1


class EstimateSensor(Sensor, DeviceInfoSource):
    """Estimated ``estimate/cpu`` and ``estimate/memory`` energy (J), provenance ESTIMATED.

    Injectable for tests: ``load_fn()`` (utilisation 0..1 since its previous call),
    ``model_name`` (CPU model string), ``threads`` and ``memory_bytes``.
    """

    #: a package's frequency and temperature: drawn by the UI, recorded nowhere
    device_info_recorded = False

    name = "estimate"

    def __init__(
        self,
        include_cpu: bool = True,
        include_memory: bool = True,
        *,
        load_fn: Callable[[], float] | None = None,
        model_name: str | None = None,
        threads: int | None = None,
        memory_bytes: int | None = None,
    ):
        self.include_cpu = include_cpu
        self.include_memory = include_memory
        self._load_fn = load_fn
        self._model_name = model_name
        self._threads = threads
        self._memory_bytes = memory_bytes
        self.tdp: TdpMatch | None = None
        self.memory_power_w = 0.0
        self._domains: list[Domain] = []
        self._last_t_s: float | None = None
        self._energy_j: dict[str, float] = {}
        self.cpu_info = CpuPackageReader()  # the CPUs' frequency and temperature (psutil)

    def is_available(self) -> SensorStatus:
        return SensorStatus(self.name, True, "estimate: CPU from load x TDP, memory from GiB installed")

    def open(self) -> Sequence[Domain]:
        self._domains = []
        if self.include_cpu:
            threads = self._threads if self._threads is not None else _logical_cpus()
            model = self._model_name if self._model_name is not None else cpu_model_name()
            self.tdp = lookup_tdp(model, threads)
            if self._load_fn is None:
                self._load_fn = CpuTimesLoad()
            self._domains.append(
                Domain(
                    "estimate/cpu", "CPU (estimated)", DomainKind.PACKAGE, self.name,
                    Provenance.ESTIMATED, True,
                    label=f"{self.tdp.describe()} x (0.1 + 0.9 x load^3)",
                )
            )
        if self.include_memory:
            total = self._memory_bytes if self._memory_bytes is not None else _installed_memory_bytes()
            gib = total / 2**30
            self.memory_power_w = gib * MEMORY_W_PER_GIB
            self._domains.append(
                Domain(
                    "estimate/memory", "Memory (estimated)", DomainKind.MEMORY, self.name,
                    Provenance.ESTIMATED, True,
                    label=f"{gib:.1f} GiB x {MEMORY_W_PER_GIB} W/GiB (Green Algorithms)"
                    f" = {self.memory_power_w:.2f} W",
                )
            )
        self._energy_j = {d.id: 0.0 for d in self._domains}
        self._last_t_s = None
        return list(self._domains)

    def cpu_power_w(self, load: float) -> float:
        """CodeCarbon's model: TDP x (0.1 + 0.9 x load^3), load clamped to 0..1."""
        assert self.tdp is not None
        load = min(max(load, 0.0), 1.0)
        return self.tdp.tdp_w * (IDLE_TDP_FRACTION + (1 - IDLE_TDP_FRACTION) * load**3)

    def read(self, now_s: float) -> Sequence[Reading]:
        """Adds estimated power x time since the previous read. The first read counts 0 J."""
        load = self._load_fn() if self.include_cpu and self._load_fn else 0.0
        dt_s = 0.0 if self._last_t_s is None else max(now_s - self._last_t_s, 0.0)
        if self._last_t_s is None or now_s >= self._last_t_s:
            self._last_t_s = now_s
        if self.include_cpu:
            self._energy_j["estimate/cpu"] += self.cpu_power_w(load) * dt_s
        if self.include_memory:
            self._energy_j["estimate/memory"] += self.memory_power_w * dt_s
        # power_w stays None: it is for a hardware's own instant power, and an estimate has none
        return [Reading(d.id, now_s, self._energy_j[d.id]) for d in self._domains]

    def device_info(self, now_s: float) -> dict[str, DeviceInfo]:
        """The estimated CPU's mean frequency and hottest package (``cpuinfo``)."""
        if not any(d.id == "estimate/cpu" for d in self._domains):
            return {}
        info = self.cpu_info.read_machine(now_s)
        return {} if info is None else {"estimate/cpu": info}

    def close(self) -> None:
        self._last_t_s = None
