"""Cgroups: the path read from a fake ``/proc/<pid>/cgroup`` for every layout a runtime
writes (v2, v1, hybrid), what each path is named (systemd, Docker, Podman, containerd,
CRI-O, Kubernetes, SLURM), hostile and unreadable files, the per-pid cache (pid reuse,
exec, refresh, exited processes) and the energy summed per cgroup, through the real
attributor and engine over a fake /proc tree, with the truth in joules."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import CARBON, make_engine
from tuimeter.engine import cgroups
from tuimeter.engine.attribution import Attributor
from tuimeter.engine.cgroups import UNKNOWN, CgroupTally, describe, parse_cgroup, read_cgroup
from tuimeter.engine.procscan import ProcFsScanner
from tuimeter.model import DomainKind

ID = "a09343ca97901516c25036e2b954421254f8c68b384b536064e8999f0c4ed18d"
ID2 = "3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"
POD = "2c9f8a79-5391-454b-88cb-86190881cb96"
POD_ = POD.replace("-", "_")


def write_cgroup(root: Path, pid: int, text: str | bytes) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    (d / "cgroup").write_bytes(data)


# -- naming: (file contents, path kept, kind, name, container, pod, job) ----------------
# Kubernetes and container paths as Kepler's resolve_container_test.go and NeuVector's
# cgroup_test.go record them; SLURM as treydock/cgroup_exporter's tests record them.
CASES = [
    ("0::/system.slice/nginx.service\n", "/system.slice/nginx.service", "systemd",
     "nginx.service", "", "", ""),
    ("0::/user.slice/user-1000.slice/session-3.scope\n",
     "/user.slice/user-1000.slice/session-3.scope", "systemd", "session-3.scope (uid 1000)",
     "", "", ""),
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service\n",
     "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "systemd",
     "foo.service (uid 1000)", "", "", ""),
    (f"0::/system.slice/docker-{ID}.scope\n", f"/system.slice/docker-{ID}.scope", "docker",
     f"docker {ID[:12]}", ID, "", ""),
    (f"0::/docker/{ID}\n", f"/docker/{ID}", "docker", f"docker {ID[:12]}", ID, "", ""),
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_}.slice/"
     f"cri-containerd-{ID}.scope\n",
     f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_}.slice/"
     f"cri-containerd-{ID}.scope", "kubernetes", f"pod {POD[:8]} containerd {ID[:12]}", ID,
     POD, ""),
    (f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_}.slice/"
     f"crio-{ID}.scope\n",
     f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD_}.slice/"
     f"crio-{ID}.scope", "kubernetes", f"pod {POD[:8]} cri-o {ID[:12]}", ID, POD, ""),
    (f"0::/kubepods.slice/kubepods-pod{POD_}.slice/cri-containerd-{ID}.scope\n",
     f"/kubepods.slice/kubepods-pod{POD_}.slice/cri-containerd-{ID}.scope", "kubernetes",
     f"pod {POD[:8]} containerd {ID[:12]}", ID, POD, ""),
    (f"0::/kubepods/burstable/pod{POD}/{ID}\n", f"/kubepods/burstable/pod{POD}/{ID}",
     "kubernetes", f"pod {POD[:8]} container {ID[:12]}", ID, POD, ""),
    (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_}.slice\n",
     f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_}.slice",
     "kubernetes", f"pod {POD[:8]}", "", POD, ""),
    (f"13:memory:/system.slice/containerd.service/kubepods-besteffort-pod{POD_}.slice:"
     f"cri-containerd:{ID}\n",
     f"/system.slice/containerd.service/kubepods-besteffort-pod{POD_}.slice:"
     f"cri-containerd:{ID}", "kubernetes", f"pod {POD[:8]} containerd {ID[:12]}", ID, POD, ""),
    (f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID2}.scope/"
     "container\n",
     f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID2}.scope/container",
     "podman", f"podman {ID2[:12]}", ID2, "", ""),
    (f"0::/machine.slice/libpod-{ID2}.scope/container\n",
     f"/machine.slice/libpod-{ID2}.scope/container", "podman", f"podman {ID2[:12]}", ID2,
     "", ""),
    (f"0::/machine.slice/libpod-conmon-{ID2}.scope\n", f"/machine.slice/libpod-conmon-{ID2}.scope",
     "podman", f"podman {ID2[:12]} conmon", ID2, "", ""),
    (f"0::/system.slice/kepler.service/libpod-payload-{ID2}\n",
     f"/system.slice/kepler.service/libpod-payload-{ID2}", "podman", f"podman {ID2[:12]}",
     ID2, "", ""),
    ("0::/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0\n",
     "/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0", "slurm",
     "slurm job 1392969 step 0", "", "", "1392969"),
    ("0::/system.slice/node7_slurmstepd.scope/job_42/step_batch/user/task_special\n",
     "/system.slice/node7_slurmstepd.scope/job_42/step_batch/user/task_special", "slurm",
     "slurm job 42 step batch", "", "", "42"),
    ("0::/system.slice/slurmstepd.scope/job_42\n", "/system.slice/slurmstepd.scope/job_42",
     "slurm", "slurm job 42", "", "", "42"),
    ("0::/system.slice/slurmstepd.scope/system\n", "/system.slice/slurmstepd.scope/system",
     "systemd", "slurmstepd.scope", "", "", ""),
    # SLURM's v1 plugin: jobs in its controllers, the hybrid 0:: line still in slurmd
    ("10:devices:/slurm/uid_2101171/job_280678/step_interactive/task_0\n"
     "4:memory:/slurm/uid_2101171/job_280678/step_interactive/task_0\n"
     "1:name=systemd:/system.slice/slurmd.service\n0::/system.slice/slurmd.service\n",
     "/slurm/uid_2101171/job_280678/step_interactive/task_0", "slurm",
     "slurm job 280678 step interactive", "", "", "280678"),
    ("0::/\n", "/", "root", "/", "", "", ""),
    ("0::/my/own/group\n", "/my/own/group", "cgroup", "group", "", "", ""),
    # "job_" outside SLURM's layout is not a job
    ("0::/user.slice/job_7\n", "/user.slice/job_7", "systemd", "user.slice", "", "", ""),
    # v1 only (CentOS 7): Docker in every hierarchy
    (f"12:pids:/docker/{ID}\n6:cpu,cpuacct:/docker/{ID}\n1:name=systemd:/docker/{ID}\n",
     f"/docker/{ID}", "docker", f"docker {ID[:12]}", ID, "", ""),
    # v1 only, nothing recognised: name=systemd first, then cpu
    ("4:memory:/user.slice\n2:cpu,cpuacct:/user.slice/cpu\n"
     "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n",
     "/user.slice/user-1000.slice/session-2.scope", "systemd", "session-2.scope (uid 1000)",
     "", "", ""),
    ("4:memory:/a/b\n2:cpu,cpuacct:/a/cpu\n", "/a/cpu", "cgroup", "cpu", "", "", ""),
    # hybrid whose unified tree nobody manages: 0::/ loses to name=systemd
    ("1:name=systemd:/system.slice/cron.service\n0::/\n", "/system.slice/cron.service",
     "systemd", "cron.service", "", "", ""),
    # hybrid, managed: the 0:: path wins over v1 ones that say no more
    ("4:memory:/system.slice\n1:name=systemd:/system.slice/sshd.service\n"
     "0::/system.slice/sshd.service\n", "/system.slice/sshd.service", "systemd",
     "sshd.service", "", "", ""),
    # a cgroup namespace: a container's own view of another runtime's cgroup
    (f"0::/../docker-{ID}.scope\n", f"/../docker-{ID}.scope", "docker", f"docker {ID[:12]}",
     ID, "", ""),
]


@pytest.mark.parametrize("text,path,kind,name,container,pod,job", CASES,
                         ids=[c[1][:60] for c in CASES])
def test_each_layout_gives_its_path_and_is_named(tmp_path, text, path, kind, name, container,
                                                 pod, job):
    """The path kept from each real layout, and what it is recognised as (no trailing
    newline reads the same)."""
    write_cgroup(tmp_path, 77, text)
    assert read_cgroup(77, str(tmp_path)) == path
    assert parse_cgroup(text.rstrip("\n").encode()) == path
    info = describe(path)
    assert (info.path, info.kind, info.name, info.container, info.pod, info.job) == (
        path, kind, name, container, pod, job)


# -- hostile and unreadable files ---------------------------------------------------------
@pytest.mark.parametrize("data", [
    b"",  # empty
    b"\n\n",
    b"garbage\n",
    b"random garbage without colons",
    b"0::relative/path\n",  # not a path
    b"x:cpu:/a\n",  # not a hierarchy id
    # a name with a newline that fakes a second 0:: line (ambiguous: which one is real?)
    b"0::/user.slice/evil\n0::/system.slice/sshd.service\n",
    # a v1 name with a newline that fakes a 0:: line before the real one
    b"4:memory:/x\n0::/system.slice/sshd.service\n0::/user.slice/me.scope\n",
    # a name with a newline whose second half is not a cgroup line
    b"0::/user.slice/evil\nfoo\n",
    b"\x00\xff\xfe" * 20,
    b"0::/" + b"a" * (cgroups.MAX_FILE_BYTES + 10),  # cut short by the read
], ids=["empty", "blank", "garbage", "no-colons", "relative", "bad-id", "two-v2",
        "fake-v2-in-v1", "half-line", "binary", "huge"])
def test_malformed_or_ambiguous_files_give_no_path(tmp_path, data):
    """A hostile name can hide its own cgroup but never pass for another one."""
    write_cgroup(tmp_path, 5, data)
    assert read_cgroup(5, str(tmp_path)) is None
    assert parse_cgroup(data) is None


def test_control_characters_and_bad_bytes_are_escaped_and_long_paths_cut(tmp_path):
    """What leaves the module is printable: escapes and bidi controls shown, bytes that are
    not UTF-8 as \\xNN, and a path no longer than MAX_PATH_CHARS."""
    write_cgroup(tmp_path, 5, b"0::/user.slice/\x1b[31mred\xe9\xe2\x80\xae.scope\n")
    path = read_cgroup(5, str(tmp_path))
    assert path == "/user.slice/\\x1b[31mred\\xe9\\u202e.scope"
    assert path.isprintable()
    long = "/" + "x" * 2000
    write_cgroup(tmp_path, 6, f"0::{long}\n")
    cut = read_cgroup(6, str(tmp_path))
    assert len(cut) == cgroups.MAX_PATH_CHARS and cut.endswith("…") and cut.startswith("/xxx")


def test_missing_unreadable_and_denied_files_give_none(tmp_path, monkeypatch):
    """No process, no /proc, a file that cannot be read (a directory here), and a denied
    open (hidepid, another user's process): None, never an exception."""
    assert read_cgroup(123, str(tmp_path)) is None
    assert read_cgroup(1, str(tmp_path / "no-proc")) is None
    (tmp_path / "9" / "cgroup").mkdir(parents=True)
    assert read_cgroup(9, str(tmp_path)) is None
    write_cgroup(tmp_path, 10, "0::/system.slice/a.service\n")

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cgroups.os, "open", denied)
    assert read_cgroup(10, str(tmp_path)) is None


def test_unknown_is_the_empty_path():
    assert describe("") is UNKNOWN and UNKNOWN.kind == "unknown"


# -- the tally ------------------------------------------------------------------------------
class P:
    """What the tally reads of a process (the attributor's record has these fields)."""

    def __init__(self, pid, cpu_j=0.0, gpu_j=0.0, start=100.0, ppid=1, name="p"):
        self.pid, self.start, self.ppid, self.name = pid, start, ppid, name
        self.tick_cpu_j, self.tick_gpu_j = cpu_j, gpu_j


def by_path(shares):
    return {s.info.path: s for s in shares}


def test_energy_is_summed_per_cgroup_and_accumulates(tmp_path):
    """Three processes in two cgroups: 30 J + 10 J in one, 5 J of GPU in the other; the
    next tick adds 6 J; a cgroup idle in a tick keeps its total at 0 W."""
    write_cgroup(tmp_path, 1, f"0::/system.slice/docker-{ID}.scope\n")
    write_cgroup(tmp_path, 2, f"0::/system.slice/docker-{ID}.scope\n")
    write_cgroup(tmp_path, 3, "0::/system.slice/nginx.service\n")
    t = CgroupTally(str(tmp_path))
    out = t.tally([P(1, 30.0), P(2, 10.0), P(3, 0.0, 5.0), P(4, 0.0)], [], 2.0)
    got = by_path(out)
    dock = got[f"/system.slice/docker-{ID}.scope"]
    assert (dock.energy_j, dock.power_w, dock.n_processes) == (40.0, 20.0, 2)
    assert dock.info.kind == "docker" and dock.info.container == ID
    nginx = got["/system.slice/nginx.service"]
    assert (nginx.energy_j, nginx.gpu_energy_j, nginx.cpu_energy_j) == (5.0, 5.0, 0.0)
    assert out[0] is dock  # most power first
    assert t.reads == 3  # p4 used nothing: not read
    out = t.tally([P(3, 6.0)], [], 1.0)
    got = by_path(out)
    assert got["/system.slice/nginx.service"].total_energy_j == 11.0
    assert got[f"/system.slice/docker-{ID}.scope"].energy_j == 0.0
    assert got[f"/system.slice/docker-{ID}.scope"].total_energy_j == 40.0
    assert t.reads == 3  # cached
    again = t.tally([], [], 1.0)  # idle again: the same objects, nothing rebuilt
    assert by_path(again)[f"/system.slice/docker-{ID}.scope"] is got[
        f"/system.slice/docker-{ID}.scope"]


def test_cache_keyed_on_pid_and_start_name_changes_and_refresh(tmp_path):
    """A reused pid (another start time) and an exec (another name) are read again; an
    unchanged process is read again only after refresh_ticks plus its pid modulo that
    (moved by hand): pid 9 after 3 ticks, pid 7 after 4."""
    t = CgroupTally(str(tmp_path), refresh_ticks=3)
    for pid in (9, 7):
        write_cgroup(tmp_path, pid, f"0::/system.slice/a{pid}.service\n")
    t.tally([P(9, 1.0), P(7, 1.0)], [], 1.0)
    for pid in (9, 7):
        write_cgroup(tmp_path, pid, f"0::/system.slice/b{pid}.service\n")  # moved
    for _ in range(2):
        got = by_path(t.tally([P(9, 1.0), P(7, 1.0)], [], 1.0))
        assert got["/system.slice/a9.service"].energy_j == 1.0 and t.reads == 2
    got = by_path(t.tally([P(9, 1.0), P(7, 1.0)], [], 1.0))  # 3 ticks since: 9 read again
    assert got["/system.slice/b9.service"].energy_j == 1.0 and t.reads == 3
    assert got["/system.slice/a7.service"].energy_j == 1.0
    got = by_path(t.tally([P(9, 1.0), P(7, 1.0)], [], 1.0))  # 4 ticks since: 7 too
    assert got["/system.slice/b7.service"].energy_j == 1.0 and t.reads == 4
    write_cgroup(tmp_path, 7, "0::/system.slice/c.service\n")
    t.tally([P(7, 1.0, start=555.0)], [], 1.0)  # pid reused
    assert t.reads == 5
    write_cgroup(tmp_path, 7, "0::/system.slice/d.service\n")
    got = by_path(t.tally([P(7, 1.0, start=555.0, name="exec'd")], [], 1.0))
    assert got["/system.slice/d.service"].energy_j == 1.0 and t.reads == 6


def test_exited_process_counts_in_its_cgroup_or_its_parents(tmp_path):
    """A process that exits after its cgroup was read keeps it; one that exited before
    any read counts in its parent's (cached, or read now: the parent waited for it); a GPU
    process in another pid namespace (start < 0), a child of a parent gone too and an
    orphan of init are ``unknown``; gone processes are forgotten."""
    write_cgroup(tmp_path, 10, "0::/system.slice/make.service\n")
    write_cgroup(tmp_path, 11, "0::/system.slice/make.service\n")
    write_cgroup(tmp_path, 20, "0::/system.slice/cron.service\n")
    t = CgroupTally(str(tmp_path))
    t.tally([P(10, 1.0), P(11, 1.0)], [], 1.0)
    os.remove(tmp_path / "11" / "cgroup")
    got = by_path(t.tally([P(11, 2.0), P(12, 3.0, ppid=10), P(13, 4.0, ppid=99),
                           P(14, 5.0, start=-1.0), P(15, 6.0, ppid=20),
                           P(16, 7.0, ppid=1)], [P(11, start=100.0)], 1.0))
    assert got["/system.slice/make.service"].energy_j == 5.0  # 2 J (p11) + 3 J (p12)
    assert got["/system.slice/cron.service"].energy_j == 6.0  # its parent, 20, read now
    assert got[""].energy_j == 16.0 and got[""].info is UNKNOWN  # 4 + 5 + 7 J
    assert 11 not in t._seen  # forgotten once gone


def test_cgroups_beyond_the_bound_drop_the_longest_idle(tmp_path):
    for pid in range(1, 6):
        write_cgroup(tmp_path, pid, f"0::/g{pid}\n")
    t = CgroupTally(str(tmp_path), max_cgroups=3)
    for pid in range(1, 6):
        out = t.tally([P(pid, float(pid))], [], 1.0)
    assert [s.info.path for s in out] == ["/g5", "/g4", "/g3"]


# -- through the attributor and the engine, over a fake /proc ---------------------------
def write_stat(root: Path, pid: int, cpu_ticks: int, ppid: int = 1, name: str = "p",
               start: int = 1000) -> None:
    """``/proc/<pid>/stat`` with the fields the scanner reads (utime, starttime ...)."""
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    f = ["S", str(ppid)] + ["0"] * 9 + [str(cpu_ticks), "0", "0", "0"] + ["0"] * 4 + \
        [str(start)] + ["0"] * 10
    (d / "stat").write_text(f"{pid} ({name}) " + " ".join(f) + "\n")


def write_machine(root: Path, ticks: int) -> None:
    (root / "stat").write_text(f"cpu  {ticks} 0 0 0 0 0 0 0 0 0\n")


def test_engine_snapshot_carries_cgroups_that_add_up_to_the_machine(tmp_path):
    """48 W of CPU side over 4 CPUs for 1 s: a container's process uses 2 CPU s (24 J), a
    service's 1 CPU s (12 J), the rest is idle (12 J): the cgroups and idle add up to the
    machine's 48 J; with cgroups off the snapshot carries none."""
    hz = os.sysconf("SC_CLK_TCK")
    write_machine(tmp_path, 0)
    write_stat(tmp_path, 10, 0)
    write_stat(tmp_path, 11, 0)
    write_cgroup(tmp_path, 10, f"0::/system.slice/docker-{ID}.scope\n")
    write_cgroup(tmp_path, 11, "0::/system.slice/nginx.service\n")
    sensor = ScriptedSensor("rapl", [domain("package-0"), domain("package-0/dram",
                                                                   DomainKind.DRAM)],
                            {"package-0": 40.0, "package-0/dram": 8.0})
    snaps = {}
    for on in (True, False):
        att = Attributor([sensor], CARBON, scanner=ProcFsScanner(str(tmp_path)), cgroups=on)
        eng, clock = make_engine([sensor], attributor=att)
        eng.open()
        write_machine(tmp_path, 4 * hz)
        write_stat(tmp_path, 10, 2 * hz)
        write_stat(tmp_path, 11, 1 * hz)
        clock.advance(1.0)
        snaps[on] = eng.tick()
        write_machine(tmp_path, 0)
        write_stat(tmp_path, 10, 0)
        write_stat(tmp_path, 11, 0)
    snap = snaps[True]
    got = by_path(snap.cgroups)
    assert got[f"/system.slice/docker-{ID}.scope"].energy_j == pytest.approx(24.0)
    assert got["/system.slice/nginx.service"].energy_j == pytest.approx(12.0)
    assert snap.idle_power_w == pytest.approx(12.0)
    assert sum(c.energy_j for c in snap.cgroups) + snap.idle_power_w == pytest.approx(
        snap.total.energy_j)
    assert snaps[False].cgroups == ()


@pytest.fixture
def real_cgroup():
    """A real cgroup v2 group of our own, where the machine lets us make one."""
    if not sys.platform.startswith("linux"):
        pytest.skip("cgroups are Linux")
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    v2 = [line.split()[4] for line in mounts if " - cgroup2 " in line]
    if not v2:
        pytest.skip("no cgroup v2 hierarchy mounted")
    base = Path(v2[0])
    group = base / f"tuimeter-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup under {base}: {exc.strerror} (needs root or a "
                    "delegated subtree)")
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # busy
    try:
        try:
            (group / "cgroup.procs").write_text(str(child.pid))
        except OSError as exc:
            pytest.skip(f"cannot move a process into {group}: {exc.strerror}")
        yield child, group
    finally:
        child.kill()
        child.wait(timeout=30)
        try:
            group.rmdir()
        except OSError:
            pass


def test_real_child_moved_into_a_cgroup_is_read_there(real_cgroup):
    """A child moved into a new cgroup reads back as that cgroup (as this machine's cgroup
    namespace shows it: the path ends with the group's name)."""
    child, group = real_cgroup
    path = read_cgroup(child.pid)
    assert path is not None and path.endswith("/" + group.name), path
    assert describe(path).name == group.name


# -- the points and the session CSV -----------------------------------------------------
def fake_snapshot(n_cgroups: int, idle_w: float = 5.0):
    """A one-second tick of the scripted engine with ``n_cgroups`` cgroups of 1..n J."""
    from tuimeter.model import CgroupShare

    eng, clock = make_engine()
    eng.open()
    clock.advance(1.0)
    snap = eng.tick()
    eng.close()
    shares = tuple(CgroupShare(describe(f"/system.slice/s{i}.service"), float(i), float(i),
                               10.0 * i, 10.0 * i, 0.0, 1) for i in range(n_cgroups, 0, -1))
    return dataclasses.replace(snap, cgroups=shares, idle_power_w=idle_w)


def test_points_keep_the_top_cgroups_then_other_cgroups_and_idle():
    """25 cgroups of 1..25 J: the 20 largest (6..25 J) one point each, ``other cgroups``
    1+2+3+4+5 = 15 J, ``idle/system`` 5 J; a cgroup at 0 J this tick is no point."""
    from tuimeter.points import CGROUP_POINTS, cgroup_total_points, points

    snap = fake_snapshot(25)
    snap = dataclasses.replace(snap, cgroups=snap.cgroups + (dataclasses.replace(
        snap.cgroups[0], info=describe("/idle.slice/x.service"), energy_j=0.0, power_w=0.0),))
    pts = [p for p in points(snap) if p.name == "cgroup"]
    assert len(pts) == CGROUP_POINTS + 2
    assert [p.fields["energy_j"] for p in pts[:3]] == [25.0, 24.0, 23.0]
    assert pts[-2].tags["cgroup"] == "other cgroups" and pts[-2].fields["energy_j"] == 15.0
    assert pts[-1].tags["cgroup"] == "idle/system" and pts[-1].fields["energy_j"] == 5.0
    assert pts[0].tags["kind"] == "systemd" and pts[0].tags["name"] == "s25.service"
    totals = cgroup_total_points(snap)
    assert len(totals) == 26 and totals[-1].tags["cgroup"] == "/idle.slice/x.service"


def test_csv_cgroup_rows_add_up_to_the_total_and_old_readers_skip_them(tmp_path):
    """The session CSV's cgroup rows of a tick (container, service, idle/system) add up to
    its total row; report reads the file as before (it passes over the new kind)."""
    import pandas as pd

    from tuimeter.session.csvfile import SessionWriter
    from tuimeter.session.report import build_report, load_file

    hz = os.sysconf("SC_CLK_TCK")
    proc = tmp_path / "proc"
    proc.mkdir()
    write_machine(proc, 0)
    write_stat(proc, 10, 0)
    write_stat(proc, 11, 0)
    write_cgroup(proc, 10, f"0::/system.slice/docker-{ID}.scope\n")
    write_cgroup(proc, 11, "0::/system.slice/nginx.service\n")
    sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 48.0})
    att = Attributor([sensor], CARBON, scanner=ProcFsScanner(str(proc)))
    eng, clock = make_engine([sensor], attributor=att)
    eng.open()
    w = SessionWriter.create(tmp_path / "s.csv", "h")
    w.write_header_info(eng.snapshot)
    for k in range(1, 4):
        write_machine(proc, 4 * hz * k)
        write_stat(proc, 10, 2 * hz * k)
        write_stat(proc, 11, hz * k)
        clock.advance(1.0)
        w.write_snapshot(eng.tick())
    w.close()
    df = pd.read_csv(tmp_path / "s.csv")
    cg = df[df.kind == "cgroup"]
    assert set(cg.label) == {f"/system.slice/docker-{ID}.scope", "/system.slice/nginx.service",
                             "idle/system"}
    by_tick = cg.groupby("elapsed_s").energy_j.sum()
    totals = df[df.kind == "total"].set_index("elapsed_s").energy_j
    assert by_tick.to_dict() == pytest.approx(totals.to_dict())
    assert cg[cg.label == "/system.slice/nginx.service"].energy_j.sum() == pytest.approx(36.0)
    rep = build_report([load_file(str(tmp_path / "s.csv"))])
    assert rep.energy_j == pytest.approx(144.0) and rep.problems == []


def test_influx_writes_the_cgroup_points_with_escaped_tags():
    """``tuimeter_cgroup`` lines: one per cgroup point, the container and pod as tags, the
    synthetic rows without a total (a None field is left out)."""
    from tuimeter.export.influx import snapshot_lines

    snap = fake_snapshot(2)
    pod_path = (f"/kubepods.slice/kubepods-pod{POD_}.slice/cri-containerd-{ID}.scope")
    snap = dataclasses.replace(snap, cgroups=(dataclasses.replace(
        snap.cgroups[0], info=describe(pod_path)), snap.cgroups[1]))
    lines = [x for x in snapshot_lines(snap) if x.startswith("tuimeter_cgroup,")]
    assert len(lines) == 3
    assert f"container={ID}" in lines[0] and f"pod={POD}" in lines[0]
    assert r"name=pod\ 2c9f8a79\ containerd\ a09343ca9790" in lines[0]
    assert "total_energy_j=20.0" in lines[0]
    assert "cgroup=idle/system" in lines[2] and "total_energy_j" not in lines[2]


def test_real_busy_child_in_a_cgroup_gets_its_energy_there(real_cgroup):
    """Through the real /proc scanner and attributor: a busy child moved into a new
    cgroup has its attributed energy summed there, and the cgroups plus idle/system add
    up to the machine total in every tick."""
    from tests.helpers import wait_for

    child, group = real_cgroup
    sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 50.0})
    att = Attributor([sensor], CARBON, scanner=ProcFsScanner())
    eng, clock = make_engine([sensor], attributor=att)
    eng.open()
    seen = []

    def ticked():
        threading.Event().wait(0.2)  # real CPU time for the child to use
        clock.advance(1.0)
        snap = eng.tick()
        seen.append(snap)
        return [c for c in snap.cgroups
                if c.info.path.endswith("/" + group.name) and c.energy_j > 0]

    mine = wait_for(ticked, what="energy in the child's cgroup")
    eng.close()
    for snap in seen:
        assert sum(c.energy_j for c in snap.cgroups) + snap.idle_power_w == pytest.approx(
            snap.total.energy_j)
    assert mine[0].n_processes == 1 and mine[0].info.kind == "cgroup"
