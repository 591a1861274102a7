"""Which cgroup a process runs in, what that cgroup is, and the attributed energy per cgroup.

**Reading.** :func:`read_cgroup` reads ``<proc root>/<pid>/cgroup`` (one ``open``/``read``)
and :func:`parse_cgroup` picks one path from it. The file holds one line per hierarchy,
``ID:CONTROLLERS:PATH``: on a cgroup v2 machine the single line ``0::/PATH``; on a v1 or
hybrid machine one line per v1 hierarchy (``4:memory:/docker/<id>``) and, hybrid, the
``0::`` line of the unified one. The path we keep:

1. the ``0::`` path when it names a container, a pod or a SLURM job (:func:`describe`);
2. else the first v1 path that does (SLURM's v1 plugin puts jobs in ``/slurm/uid_N/job_N``
   under its controllers while the ``0::`` line of a hybrid machine still says
   ``/system.slice/slurmd.service``);
3. else the ``0::`` path, unless it is ``/`` on a machine that also has v1 lines (a hybrid
   machine whose unified tree nobody manages), then the ``name=systemd`` path, then the
   ``cpu``/``cpuacct`` one, then the first v1 line.

**Untrusted.** Anyone allowed to create cgroups (a container runtime, a user with a
delegated subtree) picks the names, and a name may hold any byte but ``/`` and NUL,
newlines included. So: the file is read up to :data:`MAX_FILE_BYTES`; a line that is not
``ID:CONTROLLERS:PATH`` (a name with a newline leaves one), more than one ``0::`` line, or
a path that does not start with ``/`` makes the whole file unreadable (the process counts
as ``unknown``): a hostile name can hide its own cgroup, never pass for another one. The
path is decoded as UTF-8 (bytes that are not: ``\\xNN``), control and bidi characters are
escaped (:func:`~tuimeter.text.safe_text`) and it is cut at :data:`MAX_PATH_CHARS`, so
what leaves this module is printable text. A file we may not read (``hidepid``), a
process that exited, or no ``/proc`` at all gives None, never an exception.

**Naming** (:func:`describe`): patterns as the runtimes write them. Where each example
was checked: Kepler's ``pkg/cgroup/resolve_container_test.go`` (CRI-O and Docker under
the systemd driver, the cgroupfs ``kubepods/<qos>/pod<uid>/<id>`` layout, v1 containerd's
``<pod slice>:cri-containerd:<id>``, Podman rootless, rootful and quadlet), NeuVector's
``share/system/cgroup_test.go`` (Docker on v1), Elastic Beats' ``add_kubernetes_metadata``
documentation (``cri-containerd-<id>.scope``), CJLove/rt-operator's notes (guaranteed
pods have no QoS slice) and treydock/cgroup_exporter's tests and fixtures (SLURM v1 and
v2):

* Kubernetes, systemd driver: ``/kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid, _ for ->.slice/cri-containerd-<id>.scope`` (``crio-<id>``,
  ``docker-<id>``), ``kubepods-pod<uid>.slice`` for a guaranteed pod; cgroupfs driver:
  ``/kubepods/burstable/pod<uid>/<id>``; v1 containerd with the systemd driver:
  ``.../kubepods-...-pod<uid>.slice:cri-containerd:<id>``;
* Docker: ``/system.slice/docker-<64 hex>.scope`` (systemd driver), ``/docker/<64 hex>``
  (cgroupfs); Podman: ``libpod-<id>.scope`` (rootful under ``machine.slice``, rootless
  under ``user@UID.service``, with a ``/container`` leaf), quadlet's ``libpod-payload-<id>``;
  any other ``<runtime>-<64 hex>.scope`` is a container of that runtime (``-conmon``
  ones, which these runtimes use for their monitor process, are named as such; not
  checked against a source);
* SLURM: ``/slurm/uid_N/job_N/step_M/task_T`` (v1 plugin) and
  ``/system.slice/slurmstepd.scope/job_N/step_M/user/task_T`` (v2 plugin;
  ``slurmstepd.scope/system`` is slurmstepd itself); a scope whose name ends in
  ``_slurmstepd.scope`` (a node name first, seen in SLURM tooling, not checked against
  SLURM's documentation) is taken as SLURM's too;
* systemd: the deepest unit (``nginx.service``, ``session-3.scope``, ``user.slice``).

**Per pid, once** (:class:`CgroupTally`): a process's cgroup is read when it first uses
power, and again when its name changes (an ``exec``: a service manager or a container
runtime places a child in its cgroup before the child execs the program, so a process
first seen between the two is read again once it runs the program) or, while it is
active, after
:data:`REFRESH_TICKS` to twice that many ticks (a process moved by hand; spread by pid so
that the processes first read together are not read again together); the cache is keyed on
pid and start time, as the attribution is, so a reused pid is read again. A process that
exited before its cgroup was read counts in its parent's (a child starts in its parent's
cgroup; the parent is alive, it waited for the child), unless it was an orphan of init.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, NamedTuple

from ..model import CgroupInfo, CgroupShare
from ..text import safe_text

#: bytes of ``/proc/<pid>/cgroup`` read at most (13 v1 hierarchies with 250-character
#: Kubernetes paths make about 3.5 KiB)
MAX_FILE_BYTES = 65536
#: a path longer than this (characters, after escaping) is cut, with "…" at the end
MAX_PATH_CHARS = 512
#: an active process's cgroup is read again after this many ticks
REFRESH_TICKS = 30
#: cgroups remembered with their cumulative energy; beyond, the longest idle is dropped
MAX_CGROUPS = 512
#: the cgroup of processes whose cgroup cannot be known (see the module docstring)
UNKNOWN = CgroupInfo(path="", kind="unknown", name="unknown")

_HEX = "[0-9a-fA-F]"
_UID = f"{_HEX}{{8}}[-_]{_HEX}{{4}}[-_]{_HEX}{{4}}[-_]{_HEX}{{4}}[-_]{_HEX}{{12}}"
#: ``kubepods-burstable-pod<uid>.slice``, ``pod<uid>``
_POD = re.compile(rf"^(?:[A-Za-z0-9_.-]*-)?pod(?P<uid>{_UID})(?:\.slice)?$")
#: ``docker-<id>.scope``, ``cri-containerd-<id>.scope``, ``libpod-conmon-<id>.scope``, ``<id>``
_CONTAINER = re.compile(rf"^(?:(?P<rt>[a-z][a-z0-9-]{{0,30}}?)-)?(?P<id>{_HEX}{{64}})"
                        r"(?:\.scope)?$")
_RUNTIMES = {"docker": "docker", "cri-containerd": "containerd", "containerd": "containerd",
             "crio": "cri-o", "crio-conmon": "cri-o", "libpod": "podman",
             "libpod-conmon": "podman", "libpod-payload": "podman"}
_JOB = re.compile(r"^job_([0-9]{1,20})$")
_STEP = re.compile(r"^step_([A-Za-z0-9_]{1,32})$")
_SLURM_UID = re.compile(r"^uid_[0-9]{1,10}$")
_USER_SLICE = re.compile(r"^user-([0-9]{1,10})\.slice$")
_UNIT_SUFFIXES = (".service", ".scope", ".slice")
#: what a path must hold to be a container, a pod or a SLURM job (a cheap test first)
_MAYBE_SPECIAL = re.compile(rb"pod|job_|[0-9a-fA-F]{64}")
_PLAIN = frozenset({"systemd", "cgroup", "root"})


# -- reading --------------------------------------------------------------------------
def read_cgroup(pid: int, proc_root: str = "/proc") -> str | None:
    """The cgroup path of ``pid`` (see :func:`parse_cgroup`), or None: no such process, a
    file we may not read, or one that is not a cgroup file. Never raises."""
    try:
        fd = os.open(f"{proc_root}/{pid}/cgroup", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, MAX_FILE_BYTES)
    except OSError:  # exited between open and read
        return None
    finally:
        os.close(fd)
    return parse_cgroup(data)


def parse_cgroup(data: bytes) -> str | None:
    """The one path to keep from the contents of a ``/proc/<pid>/cgroup`` file (rules in
    the module docstring), as printable text; None for a file that is empty, cut short,
    malformed or ambiguous."""
    if len(data) >= MAX_FILE_BYTES:
        return None  # cut short: its last line may be a piece of one
    v2: list[bytes] = []
    v1: list[tuple[bytes, bytes]] = []
    for line in data.split(b"\n"):
        if not line:
            continue
        ident, _, rest = line.partition(b":")
        controllers, colon, path = rest.partition(b":")
        if not (colon and ident.isdigit() and len(ident) <= 10 and path.startswith(b"/")):
            return None  # a name with a newline in it, or not a cgroup file
        if ident == b"0" and not controllers:
            v2.append(path)
        else:
            v1.append((controllers, path))
    if len(v2) > 1:
        return None
    raw = v2 + [p for _, p in v1]
    if not raw:
        return None
    for path in dict.fromkeys(raw):  # a container, a pod or a SLURM job, the 0:: line first
        if _MAYBE_SPECIAL.search(path) and describe(_clean(path)).kind not in _PLAIN:
            return _clean(path)
    if v2 and (v2[0] != b"/" or not v1):
        return _clean(v2[0])
    for want in (b"name=systemd", b"cpu", b"cpuacct"):
        for controllers, path in v1:
            if want in controllers.split(b","):
                return _clean(path)
    return _clean(v1[0][1])


def _clean(path: bytes) -> str:
    text = safe_text(path.decode("utf-8", "surrogateescape"))
    return text if len(text) <= MAX_PATH_CHARS else text[:MAX_PATH_CHARS - 1] + "…"


# -- naming ---------------------------------------------------------------------------
def describe(path: str) -> CgroupInfo:
    """What the cgroup at ``path`` is (patterns in the module docstring): a Kubernetes
    pod's container, a container of Docker, Podman, containerd or CRI-O, a SLURM job, a
    systemd unit, the root, or just a cgroup. ``path`` "" is :data:`UNKNOWN`."""
    if not path:
        return UNKNOWN
    parts = [c for c in path.split("/") if c]
    if not parts:
        return CgroupInfo(path=path, kind="root", name="/")
    pod = container = runtime = job = step = unit = ""
    conmon = False
    prev = ""
    for i, part in enumerate(parts):
        piece = part
        pieces = part.split(":")
        if len(pieces) == 3:  # v1, systemd driver: <pod slice>:<runtime>:<id>
            part, piece = pieces[0], f"{pieces[1]}-{pieces[2]}"
        m = _POD.match(part) if "pod" in part else None
        if m:
            pod = m["uid"].replace("_", "-").lower()
        m = _CONTAINER.match(piece) if len(piece) >= 64 else None
        if m:
            rt = (m["rt"] or "").lower()
            container = m["id"].lower()
            runtime = _RUNTIMES.get(rt, rt) or ("docker" if prev == "docker" else "")
            conmon = rt.endswith("-conmon")
        m = _JOB.match(part) if part.startswith("job_") else None
        if m and (prev.endswith("slurmstepd.scope") or (
                _SLURM_UID.match(prev) and i >= 2 and parts[i - 2] == "slurm")):
            job = m[1]
            nxt = _STEP.match(parts[i + 1]) if i + 1 < len(parts) else None
            step = nxt[1] if nxt else ""
        if part.endswith(_UNIT_SUFFIXES):
            unit = part
        prev = part
    if pod:
        name = f"pod {pod[:8]}" + (f" {runtime or 'container'} {container[:12]}"
                                   if container else "")
        return CgroupInfo(path, "kubernetes", name, container=container, pod=pod, job=job)
    if container:
        kind = runtime or "container"
        name = f"{kind} {container[:12]}" + (" conmon" if conmon else "")
        return CgroupInfo(path, kind, name, container=container, job=job)
    if job:
        return CgroupInfo(path, "slurm", f"slurm job {job}" + (f" step {step}" if step else ""),
                          job=job, step=step)
    if unit:
        user = next((m[1] for m in map(_USER_SLICE.match, parts) if m), None)
        name = unit if user is None or unit.startswith("user") else f"{unit} (uid {user})"
        return CgroupInfo(path, "systemd", name)
    return CgroupInfo(path, "cgroup", parts[-1])


# -- the tally per tick ---------------------------------------------------------------
class _Seen(NamedTuple):
    start: float
    name: str
    info: CgroupInfo
    read_tick: int


class _Group:
    __slots__ = ("info", "cpu_j", "gpu_j", "tick_cpu_j", "tick_gpu_j", "n", "active_tick",
                 "share")

    def __init__(self, info: CgroupInfo):
        self.info = info
        self.cpu_j = self.gpu_j = 0.0  # cumulative
        self.tick_cpu_j = self.tick_gpu_j = 0.0
        self.n = 0
        self.active_tick = 0
        self.share: CgroupShare | None = None


class CgroupTally:
    """The attributed energy of each tick summed per cgroup (sampler thread only).

    :meth:`tally` takes the processes the attribution gave energy to in a tick (objects
    with ``pid``, ``start``, ``ppid``, ``name``, ``tick_cpu_j``, ``tick_gpu_j``; a start
    below 0 is a GPU process in another pid namespace, whose cgroup cannot be read) and
    returns every cgroup known so far (at most :data:`MAX_CGROUPS`), most power first:
    the sum of their ``energy_j`` is the sum of the processes', so with idle/system they
    add up to the machine total. ``proc_root`` is ``/proc`` or a copy for tests.
    """

    def __init__(self, proc_root: str = "/proc", *, max_cgroups: int = MAX_CGROUPS,
                 refresh_ticks: int = REFRESH_TICKS):
        self.proc_root = proc_root
        self.max_cgroups = max_cgroups
        self.refresh_ticks = refresh_ticks
        self.reads = 0  # /proc/<pid>/cgroup files read (for the bench and tests)
        self._tick = 0
        self._seen: dict[int, _Seen] = {}  # pid -> its cgroup as last read
        self._infos: dict[str, CgroupInfo] = {}  # path -> what it is (describe, memoised)
        self._groups: dict[str, _Group] = {}  # path -> cumulative energy

    def tally(self, procs: Iterable, gone: Iterable, interval_s: float
              ) -> tuple[CgroupShare, ...]:
        """This tick's energy per cgroup (see the class docstring); then forgets the
        processes in ``gone`` (exited: the attribution's list)."""
        self._tick += 1
        tick, groups = self._tick, self._groups
        for p in procs:
            cpu_j, gpu_j = p.tick_cpu_j, p.tick_gpu_j
            if cpu_j <= 0 and gpu_j <= 0:
                continue
            info = self._info(p)
            g = groups.get(info.path)
            if g is None:
                g = groups[info.path] = _Group(info)
            if g.active_tick != tick:
                g.active_tick, g.tick_cpu_j, g.tick_gpu_j, g.n = tick, 0.0, 0.0, 0
            g.tick_cpu_j += cpu_j
            g.tick_gpu_j += gpu_j
            g.n += 1
        for p in gone:
            seen = self._seen.get(p.pid)
            if seen is not None and seen.start == p.start:
                del self._seen[p.pid]
        if len(groups) > self.max_cgroups:
            idle = sorted(groups.values(), key=lambda g: (g.active_tick, g.cpu_j + g.gpu_j))
            for g in idle[:len(groups) - self.max_cgroups]:
                del groups[g.info.path]
        return self._shares(interval_s)

    def _shares(self, interval_s: float) -> tuple[CgroupShare, ...]:
        tick = self._tick
        out = []
        for g in self._groups.values():
            if g.active_tick == tick:
                g.cpu_j += g.tick_cpu_j
                g.gpu_j += g.tick_gpu_j
                e = g.tick_cpu_j + g.tick_gpu_j
                g.share = CgroupShare(g.info, e / interval_s, e, g.cpu_j + g.gpu_j, g.cpu_j,
                                      g.gpu_j, g.n)
            elif g.share is None or g.share.energy_j:  # idle this tick: 0 W, same totals
                g.share = CgroupShare(g.info, 0.0, 0.0, g.cpu_j + g.gpu_j, g.cpu_j, g.gpu_j, 0)
            out.append(g.share)
        out.sort(key=lambda s: (s.energy_j, s.total_energy_j), reverse=True)
        return tuple(out)

    def _info(self, p) -> CgroupInfo:
        """The cgroup of process ``p``: cached, read, or its parent's (module docstring)."""
        pid, start = p.pid, p.start
        if start < 0:
            return UNKNOWN
        seen = self._seen.get(pid)
        if seen is not None and seen.start == start:
            # read again after refresh_ticks to twice that, spread by pid: processes first
            # read in one tick are not all read again in one tick
            age_max = self.refresh_ticks + pid % self.refresh_ticks
            if seen.name == p.name and self._tick - seen.read_tick < age_max:
                return seen.info
        else:
            seen = None
        self.reads += 1
        path = read_cgroup(pid, self.proc_root)
        if path is None:
            if seen is not None:  # exited (or hidden) since: it was there when last read
                return seen.info
            parent = self._seen.get(p.ppid)
            if parent is not None:
                return parent.info
            if p.ppid <= 1:  # an orphan: init's cgroup says nothing of it
                return UNKNOWN
            self.reads += 1
            path = read_cgroup(p.ppid, self.proc_root)  # the parent that waited for it
            return UNKNOWN if path is None else self._describe(path)
        info = self._describe(path)
        self._seen[pid] = _Seen(start, p.name, info, self._tick)
        return info

    def _describe(self, path: str) -> CgroupInfo:
        """:func:`describe`, memoised per path (bounded)."""
        info = self._infos.get(path)
        if info is None:
            if len(self._infos) >= 4 * self.max_cgroups:
                self._infos.clear()
            info = self._infos[path] = describe(path)
        return info
