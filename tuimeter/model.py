"""Immutable values shared by sensors, engine, recorder, exporters and UI.

Units are in the names: ``power_w`` (watts), ``energy_j`` (joules), ``interval_s``
(seconds), ``co2_g`` (grams CO2e). Native units of a sensor (µJ, mW, mJ) never leave
the sensor module that reads them.

Every number carries its provenance: ``measured`` (read from a hardware counter or
power sensor), ``estimated`` (a model: TDP x load, W per GiB ...), ``attributed``
(a measured or estimated power divided among processes by their measured use), or
``interpolated`` (a phase shorter than a sensor's update period).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple


#: the largest process id a kernel gives: Linux's ``pid_max`` is at most PID_MAX_LIMIT,
#: 2**22 (macOS and the BSDs stop at 99,999). A larger number is no process.
PID_LIMIT = 1 << 22


def is_pid(value: object) -> bool:
    """Whether ``value`` can name a process: an int (not a bool), 1 .. :data:`PID_LIMIT`.

    The one rule for a pid that enters tuimeter (``--pid``, ``tuimeter mark --pid``, the
    marker socket's ``pid``); the session reader takes back the same range (and 0, the
    kernel_task of macOS's process rows), so a marker that was accepted is never a row the
    reader then skips as malformed."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= PID_LIMIT


def pid_problem(value: object) -> str | None:
    """Why ``value`` is no pid (:func:`is_pid`), in one line; None when it is one. What the
    marker socket answers and the mark/count clients raise."""
    if is_pid(value):
        return None
    return f"pid {str(value)[:24]} is not a process id (1 .. {PID_LIMIT})"


def parse_pid(text: str) -> int:
    """A pid typed on a command line, checked by :func:`is_pid`; ValueError (one line)."""
    try:
        value = int(text) if len(text) <= 32 else None
    except ValueError:
        value = None
    if value is None:
        raise ValueError(f"not a process id: {text[:40]!r}")
    if not is_pid(value):
        raise ValueError(f"no process with PID {text} (a process id is 1 .. {PID_LIMIT})")
    return value


class Provenance(str, enum.Enum):
    MEASURED = "measured"
    ESTIMATED = "estimated"
    ATTRIBUTED = "attributed"
    INTERPOLATED = "interpolated"

    def __str__(self) -> str:  # so f-strings and CSV cells show "measured"
        return self.value


class DomainKind(str, enum.Enum):
    """What part of the machine a domain covers (used to decide what adds up)."""

    PACKAGE = "package"  # a CPU socket (RAPL package, Apple CPU, estimated CPU)
    CORE = "core"  # inside a package
    UNCORE = "uncore"  # inside a package (integrated GPU on clients)
    DRAM = "dram"  # memory; NOT inside the package even though its zone nests there
    PSYS = "psys"  # the whole platform (contains package and dram)
    GPU = "gpu"
    MODULE = "module"  # a whole module's counter: CPU + GPU + memory (GH200's NVML energy)
    ANE = "ane"  # Apple Neural Engine
    MEMORY = "memory"  # estimated memory power
    #: a whole-node meter (ACPI power meter, IPMI DCMI, Redfish, pm_counters' node energy):
    #: where one is measured it is the node's total, the chips its parts (never in_total
    #: itself: the engine adds its ``rest`` instead, so nothing counts twice)
    PLATFORM = "platform"
    #: what the in-total chips do not explain: platform minus their sum, made by the engine
    #: (measured minus measured; fans, disks, NICs, regulators, PSU losses)
    REST = "rest"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


class Status(str, enum.Enum):
    OK = "ok"
    LOST = "lost"  # the sensor failed mid-run (GPU lost, file vanished)

    def __str__(self) -> str:
        return self.value


class Link(str, enum.Enum):
    """How a reading's cumulative energy follows from its domain's last good reading."""

    CONTINUOUS = "continuous"  # the usual; after a LOST reading it is taken as BROKEN
    #: reads failed in between but the counter ran on underneath: the difference from the
    #: last good reading is all the energy in between, lost intervals included
    BRIDGED = "bridged"
    #: nothing is known since the last good reading (a counter reset, a too-long gap):
    #: this reading is a new base and the span before it is lost
    BROKEN = "broken"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Domain:
    """One thing whose energy we track.

    ``id`` is stable, unique and readable: ``package-0``, ``package-0/core``,
    ``package-0/dram``, ``psys``, ``gpu0``, ``cpu``, ``estimate/cpu``.
    ``in_total`` says whether the domain adds into the machine total: nested domains
    (core, uncore: inside package) and psys (contains package and dram) do not, so the
    total never counts the same joule twice (rule in docs/what-adds-up.md).
    """

    id: str
    name: str
    kind: DomainKind
    source: str  # sensor name: "rapl", "nvml", "powermetrics", "estimate"
    provenance: Provenance
    in_total: bool = True
    label: str = ""  # human detail: GPU model, CPU model, zone path
    uuid: str = ""  # GPU UUID where known
    index: int | None = None  # GPU index / package number where meaningful


@dataclass(frozen=True)
class Reading:
    """A sensor's state for one domain at one instant.

    ``energy_j`` is the domain's cumulative energy since the sensor was opened,
    already corrected for counter wraparound and resets (monotonic, never negative
    steps). ``power_w`` is an instantaneous power where the hardware offers one
    (NVML instant field), else None. ``t_s`` is on the monotonic clock the engine
    passed to the sensor. ``link`` says whether the step from the domain's last good
    reading is energy (see :class:`Link`): a sensor whose counter bridges failed reads
    returns ``Link.BRIDGED`` on the first good reading after them.
    """

    domain_id: str
    t_s: float
    energy_j: float | None
    power_w: float | None = None
    status: Status = Status.OK
    note: str = ""  # why lost, "reset", ...
    link: Link = Link.CONTINUOUS
    #: with ``Link.BROKEN``: when the new base began and the cumulative energy there, if
    #: before this reading (a counter that jumped for good counts from its first jumped
    #: value on: only the span before that is lost); None: the base is this reading
    base_t_s: float | None = None
    base_energy_j: float | None = None


@dataclass(frozen=True)
class SensorStatus:
    """Whether a sensor is in use, and if not why not and what fixes it."""

    name: str
    available: bool
    reason: str = ""
    fix: str = ""

    def describe(self) -> str:
        if self.available:
            return f"{self.name}: ok" + (f" ({self.reason})" if self.reason else "")
        text = f"{self.name}: unavailable: {self.reason}"
        if self.fix:
            text += f" Fix: {self.fix}"
        return text


@dataclass(frozen=True)
class Event:
    """Something noteworthy that happened to a sensor (reset, lost, recovered)."""

    t_s: float
    source: str
    domain_id: str
    kind: str  # "reset", "lost", "write-error", ...
    message: str


@dataclass(frozen=True)
class Marker:
    """A user's phase marker: a label at an instant."""

    label: str
    elapsed_s: float
    timestamp: float  # wall clock, seconds since epoch (UTC)
    source: str = "api"  # "key", "cli", "api", "socket"
    pid: int | None = None


@dataclass(frozen=True)
class Work:
    """Work a program counted (``Meter.count``, ``tuimeter count``): units at an instant.

    ``units``: (name, how many) pairs, each a positive finite number (checked by
    :func:`tuimeter.work.check_units` before it gets here)."""

    units: tuple[tuple[str, float], ...]
    elapsed_s: float
    timestamp: float  # wall clock, seconds since epoch (UTC)
    source: str = "api"  # "cli", "api", "socket"
    pid: int | None = None
    #: how many of the tick's new markers came before it: the file keeps that order, so
    #: a count made just before a marker at the same clock reading stays before it
    after_markers: int = 0


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is doing besides drawing power: the readings a GPU or CPU monitor
    shows (nvitop, s-tui), measured by the driver and read on a slow cadence of their own
    (``Engine.device_interval_s``), never in the energy read. Every field is optional:
    None is "the driver does not say" (NotSupported, no sensor, a failed read), shown as
    n/a, and a failure costs that field only.

    ``t_s`` is when they were read, on the engine's monotonic clock."""

    t_s: float
    name: str = ""  # the device's model as its driver names it (GPU); untrusted text
    util_pct: float | None = None  # GPU busy, % of the last sample period
    mem_util_pct: float | None = None  # GPU memory controller busy, %
    mem_used_b: int | None = None  # device memory in use, bytes
    mem_total_b: int | None = None  # device memory, bytes
    temp_c: float | None = None  # GPU die / CPU package temperature, degrees C
    power_limit_w: float | None = None  # the power limit the driver enforces, W
    clock_sm_mhz: float | None = None  # GPU SM (graphics) clock now, MHz
    clock_mem_mhz: float | None = None  # GPU memory clock now, MHz
    freq_mhz: float | None = None  # CPU package: mean current frequency of its CPUs, MHz


@dataclass(frozen=True)
class DomainSample:
    """One domain at one tick, as readers (UI, recorder, exporters) see it."""

    domain: Domain
    power_w: float | None  # average over the last interval (energy_j / interval_s)
    energy_j: float | None  # energy within the last interval
    total_energy_j: float  # cumulative since the session started
    co2_g: float | None  # CO2e of energy_j
    total_co2_g: float
    instant_power_w: float | None = None  # hardware's own instant power, where offered
    status: Status = Status.OK
    history_w: tuple[float | None, ...] = ()  # recent power_w, oldest first (bounded)
    #: set when energy_j was bridged across failed reads: the seconds it spans (the lost
    #: intervals just before this one, and this one); power_w is its average over them
    bridged_s: float | None = None
    #: the device's own readings (utilisation, memory, temperature, clocks), from its
    #: sensor's last slow read; None where the sensor has none (or not yet)
    device: DeviceInfo | None = None
    #: why the interval is not a plain measurement: a lost one's cause (``gap``, ``reset``:
    #: part of it is unknown), or ``partial``: shorter than a counter's update period, its
    #: energy counts but power_w is None (no power measurement); ``interpolated``: see
    #: estimated_s
    note: str = ""
    #: seconds of energy_j that are an estimate, not a measurement: a span lost to a
    #: counter reset (a jump), at the mean power measured just before and after it; the
    #: rest of energy_j is this interval's measurement and bridged_s spans both
    estimated_s: float | None = None


@dataclass(frozen=True)
class Totals:
    """The machine total: the sum of the domains with ``in_total``, nothing twice."""

    power_w: float | None
    energy_j: float
    total_energy_j: float
    co2_g: float
    total_co2_g: float
    provenance: Provenance
    history_w: tuple[float | None, ...] = ()
    #: in-total domains lost in the interval: the total lacks them (it is incomplete)
    lost: tuple[str, ...] = ()
    #: in-total domains whose energy was bridged across lost intervals: power_w is the sum
    #: of the domains' powers (each bridged one averaged over its own span), so energy_j
    #: (which holds the bridged joules) is more than power_w x interval_s
    bridged: tuple[str, ...] = ()
    #: "partial": an interval shorter than a counter's update period (power_w is None)
    note: str = ""


@dataclass(frozen=True)
class ProcessShare:
    """A process's attributed share of power over the last interval."""

    pid: int
    name: str
    cpu_share: float  # fraction 0..1 of the machine's CPU time (all CPUs, idle included) in the interval
    gpu_share: float  # fraction 0..1 of GPU power it was given (summed over GPUs, by W)
    power_w: float  # attributed CPU + GPU power over the last interval
    energy_j: float  # attributed energy in the last interval
    total_energy_j: float  # cumulative attributed energy (CPU + GPU)
    cpu_energy_j: float = 0.0  # cumulative, CPU part
    gpu_energy_j: float = 0.0  # cumulative, GPU part
    in_job: bool = False
    provenance: Provenance = Provenance.ATTRIBUTED
    ppid: int = 0  # its parent's pid at the last scan (0: unknown)
    #: the command line, words joined by single spaces ("": unreadable, a kernel thread);
    #: read once per process, so a process that rewrites its argv later keeps the first
    cmdline: str = ""
    uid: int | None = None  # its owner (effective user id); None: unknown
    #: its start time as the process scan reads it (clock ticks since boot on Linux, seconds
    #: since the epoch elsewhere): with ``pid`` it names one process, across pid reuse
    start: float | None = None


@dataclass(frozen=True)
class JobSample:
    """The followed job (``--pid`` or ``-- CMD``): a process tree, all its descendants."""

    pid: int
    name: str
    running: bool
    n_processes: int
    power_w: float
    energy_j: float  # in the last interval
    total_energy_j: float
    cpu_energy_j: float
    gpu_energy_j: float
    co2_g: float
    total_co2_g: float
    share: float  # fraction of the machine total power in the last interval
    exit_code: int | None = None
    provenance: Provenance = Provenance.ATTRIBUTED
    cpu_power_w: float = 0.0  # CPU-side part of power_w (last interval)
    gpu_power_w: float = 0.0  # GPU part of power_w (last interval)
    #: the job's processes, those idle in the interval included (at 0 W), most power first
    #: and bounded (the attributor's ``top_n``): the process table's tree of the job
    members: tuple[ProcessShare, ...] = ()


@dataclass(frozen=True)
class CgroupInfo:
    """A cgroup and what it was recognised as (``tuimeter.engine.cgroups.describe``).

    ``path`` is the cgroup v2 path as the kernel shows it, escaped to printable text
    (``/system.slice/nginx.service``); "" for the processes whose cgroup could not be read.
    ``kind``: systemd, docker, podman, containerd, cri-o, container, kubernetes, slurm,
    root, cgroup (none of those) or unknown. ``name`` is short and readable
    (``docker 3f05ee050f82``, ``pod d0511cd2 cri-o f93ee491b8ed``, ``slurm job 42 step 0``,
    ``nginx.service``); ``container`` the full container id (64 hex), ``pod`` the
    Kubernetes pod UID (with dashes), ``job`` the SLURM job id, each "" where none.
    """

    path: str
    kind: str
    name: str
    container: str = ""
    pod: str = ""
    job: str = ""
    step: str = ""  # the SLURM step (0, batch, extern), "" where none


@dataclass(frozen=True)
class CgroupShare:
    """The attributed power of one cgroup: the sum over its processes' shares."""

    info: CgroupInfo
    power_w: float  # attributed CPU + GPU power over the last interval
    energy_j: float  # in the last interval
    total_energy_j: float  # cumulative since the session started (or the cgroup was seen)
    cpu_energy_j: float = 0.0  # cumulative, CPU part
    gpu_energy_j: float = 0.0  # cumulative, GPU part
    n_processes: int = 0  # its processes that used power in the interval
    provenance: Provenance = Provenance.ATTRIBUTED


@dataclass(frozen=True)
class OwnerDomain:
    """One domain's part of an owner's energy: ``cpu`` (the CPU side: package, DRAM,
    memory, by CPU-time share) or a GPU domain id (by SM utilisation)."""

    id: str
    energy_j: float  # in the last interval
    total_energy_j: float  # cumulative since the tree was first followed


@dataclass(frozen=True)
class OwnerSample:
    """A process tree whose energy is kept apart: one that marked the session through
    the API (a :class:`~tuimeter.api.Meter`, ``tuimeter.mark()``), or a rank of the
    followed job (a member whose environment names its rank). Its energy is what
    attribution gives its processes, counted from when it was first followed; the
    trees of ranks that each use their own GPU add up to the GPUs' energy plus the
    ranks' CPU share, never to N times the machine."""

    pid: int  # the tree's root
    name: str
    rank: str | None  # from RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, LOCAL_RANK
    running: bool  # the root still runs
    n_processes: int  # live members
    power_w: float  # attributed, last interval
    energy_j: float  # in the last interval
    total_energy_j: float
    co2_g: float  # in the last interval
    total_co2_g: float
    domains: tuple[OwnerDomain, ...] = ()
    in_job: bool = False  # the root is in the followed job's tree
    marked: bool = False  # it marked the session (else: found as a rank of the job)
    provenance: Provenance = Provenance.ATTRIBUTED

    @property
    def gpus(self) -> tuple[str, ...]:
        """The GPU domains it has used (some energy attributed)."""
        return tuple(d.id for d in self.domains if d.id != "cpu" and d.total_energy_j > 0)


class Attribution(NamedTuple):
    """What an attributor returns each tick: the top processes, the power no process
    used (W, None when nothing was measured), the followed job, the owner trees (marked
    through the API, or ranks of the job) and every cgroup known so far (most power first;
    empty when cgroups are not read). Shorter tuples (an attributor that knows no owners or
    cgroups) are accepted: ``Attribution(*result)``."""

    processes: tuple[ProcessShare, ...]
    idle_power_w: float | None
    job: JobSample | None
    owners: tuple[OwnerSample, ...] = ()
    cgroups: tuple[CgroupShare, ...] = ()
    #: the processes' CPU time in the interval over all CPUs' time (0..1), None when the
    #: machine's CPU time could not be read
    cpu_busy_ratio: float | None = None
    #: the power of the CPU time of processes this tick did not read (W; the two-tier
    #: scan, docs/attribution.md): in "other processes" and in no cgroup
    unread_power_w: float = 0.0
    #: at a full scan of the two-tier scan: the processes whose CPU time since the last
    #: full scan no tick read, each with that time's energy (``energy_j``, J, taken from
    #: the window's "other processes"; ``power_w``: its average over the window)
    settled: tuple[ProcessShare, ...] = ()


#: joules in a kilowatt-hour
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class CarbonInfo:
    """Where the CO2e numbers come from, and the factor every CO2e figure is made with.

    The engine takes the one in force at each tick (fixed, or a live source's latest) and
    puts it on the :class:`Snapshot`: ``snap.carbon.g_per_j`` is the tick's grams per
    joule, ``snap.carbon.source`` / ``provider`` where it came from."""

    g_per_kwh: float
    pue: float
    source: str  # "default world average (IEA 2019)", "country FRA (Our World in Data / Ember, 2023)", ...
    is_default: bool = False
    #: where the figure came from: "table" (the table, a fixed figure, or the fallback
    #: of a live source that failed), else the live source (tuimeter.carbon_live.SOURCES)
    provider: str = "table"
    #: grams CO2e per joule drawn, PUE included: g_per_kwh x pue / :data:`J_PER_KWH`.
    #: Computed here, once per figure, and read by every CO2e figure (joules x this):
    #: the one place the formula is written
    g_per_j: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "g_per_j", self.g_per_kwh * self.pue / J_PER_KWH)


@dataclass(frozen=True)
class Snapshot:
    """Everything a reader needs at one tick. Immutable: safe to pass across threads."""

    seq: int  # tick number, 0 = the initial (empty) snapshot
    timestamp: float  # wall clock at the end of the interval, seconds since epoch
    elapsed_s: float  # since the session started
    interval_s: float  # length of the last interval (0 for seq 0)
    host: str
    domains: tuple[DomainSample, ...]
    total: Totals
    carbon: CarbonInfo
    sensors: tuple[SensorStatus, ...] = ()
    markers: tuple[Marker, ...] = ()  # every marker so far (bounded)
    new_markers: tuple[Marker, ...] = ()  # markers added since the previous tick
    new_work: tuple[Work, ...] = ()  # work counted since the previous tick
    #: every unit of work counted since the session began: (unit, total), in first-seen order
    work_totals: tuple[tuple[str, float], ...] = ()
    events: tuple[Event, ...] = ()  # events since the previous tick
    processes: tuple[ProcessShare, ...] = ()  # top processes by power (attribution)
    idle_power_w: float | None = None  # power no process used (attribution)
    job: JobSample | None = None
    #: process trees followed apart: marked through the API, or ranks of the job
    owners: tuple[OwnerSample, ...] = ()
    monitor_cpu_percent: float | None = None  # tuimeter's own CPU use, % of one core
    #: attribution per cgroup: every cgroup known (bounded), most power first
    cgroups: tuple[CgroupShare, ...] = ()
    #: the machine's CPU load in the interval: the processes' CPU time over all CPUs' time
    #: (0..1, attribution); None without attribution
    cpu_busy_ratio: float | None = None
    unread_power_w: float = 0.0  # W of processes not read this tick (two-tier scan)
    #: ``record --tag KEY=VALUE``: constant labels of every exported series and the
    #: settings row, in the order given (checked: tuimeter.cluster.options.check_tags)
    tags: tuple[tuple[str, str], ...] = ()
    #: at a full scan: energy settled per process out of the window's "other processes"
    #: (:attr:`Attribution.settled`; docs/scan.md)
    settled: tuple[ProcessShare, ...] = ()

    def domain(self, domain_id: str) -> DomainSample | None:
        for d in self.domains:
            if d.domain.id == domain_id:
                return d
        return None
