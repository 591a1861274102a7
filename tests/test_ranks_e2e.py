"""The sum holds, end to end, in the seed's shape: eight rank processes, rank i on GPU i
of a fake NVML (8 GPUs at known powers; fake powercap at a known power), each in a
``tuimeter.Meter`` for about 10 s of 1 s ticks (record's and Meter's default interval),
either attached to one running ``tuimeter record`` (real socket) or on their own (the
first rank's meter samples, the seven others attach to it). Each rank's
``own_energy_j`` is its GPU's energy over its phase plus its small CPU share: the eight
add up to the truth within 1.5% and every rank is within 3% of its own (issue 21, item
2), where the eight *machine* figures add up to about 8 times the machine.
``report --by rank`` over the record's file gives the same split, with the rest
``unowned``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, wait_for
from tests.test_record_faults import ConstantDriver

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/environ"),
                                reason="needs Linux /proc (peer credentials, environ)")

N_RANKS = 8
GPU_W = [100.0 + 20.0 * i for i in range(N_RANKS)]  # GPU i draws this, all the time
CPU_W = 40.0  # package-0 (the CPU side)
INTERVAL_S = 1.0  # the session's ticks: record's default, and Meter's
TICKS = 10  # each rank's phase lasts this many ticks of the session: about 10 s

RANK = """
import json, sys, threading, time
if {own!r}:  # no record runs: the ranks' own sampler reads the same fake GPUs
    from tests.fakes.nvml_record import install
    install({config!r})
import tuimeter
from tuimeter.session import mark_client

def seq():
    return max([r.get("tick_seq") or 0 for r in mark_client.request({{"op": "status"}})
                if r.get("ok")] or [0])

sys.stdin.readline()  # go: the GPUs list this process now
cpu0 = time.process_time()
with tuimeter.Meter(label="train", interval_s={interval!r}) as m:
    start = seq()
    guard = time.monotonic() + 120  # a session that stopped ticking must not hang the test
    while seq() < start + {ticks} and time.monotonic() < guard:  # the session's ticks
        threading.Event().wait(0.05)
cpu_s = time.process_time() - cpu0
(p,) = m.phases
print(json.dumps({{"own_j": m.own_energy_j, "own_domains": p.own_domains,
                  "own_prov": p.own_provenance, "machine_j": p.energy_j,
                  "duration_s": p.duration_s, "cpu_s": cpu_s, "attached": m.attached}}))
"""


def run_ranks(tmp_path, mode: str):
    """Eight rank processes, rank i on GPU i, each in a ``Meter`` for about ``TICKS``
    ticks: attached to a running ``record`` (``mode`` "attached"; its file is returned),
    or on their own (one of them samples, the others attach to it). Returns (each
    rank's result, the session file or None)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    pids_file = tmp_path / "pids.txt"
    config = tmp_path / "gpus.json"
    config.write_text(json.dumps({"watts": GPU_W, "pids_file": str(pids_file)}))
    out = tmp_path / "run.csv"
    env = env_for(tmp_path, fake)
    record = None
    if mode == "attached":
        record = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.nvml_record", str(config), "--", "record",
             "-o", str(out), "--interval", str(INTERVAL_S)], env=env, cwd=ROOT,
            stderr=subprocess.PIPE, text=True)
    driver = ConstantDriver(fake, {"package-0": CPU_W})
    driver.start()
    ranks = []
    script = RANK.format(own=mode == "own", config=str(config), interval=INTERVAL_S,
                         ticks=TICKS)
    try:
        if record is not None:
            wait_for(lambda: count_totals(out) >= 1, what="the session's first tick")
        ranks = [subprocess.Popen([sys.executable, "-c", script], env={**env, "RANK": str(i)},
                                  cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for i in range(N_RANKS)]
        tmp = tmp_path / "pids.tmp"
        tmp.write_text("".join(f"{r.pid}\n" for r in ranks))
        os.replace(tmp, pids_file)  # GPU i runs rank i from now on
        for r in ranks:
            r.stdin.write("go\n")
            r.stdin.flush()
        results = []
        for r in ranks:
            stdout, err = r.communicate(timeout=180)
            assert r.returncode == 0, err
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for r in ranks:
            if r.poll() is None:
                r.kill()
        driver.halt.set()
        driver.join()
        if record is not None:
            record.send_signal(signal.SIGINT)
            _, rec_err = record.communicate(timeout=60)
    if record is not None:
        assert record.returncode == 0, rec_err
    return results, (out if record is not None else None)


def check_sum(results, mode: str, capsys) -> list[float]:
    """The eight own energies against the truth: their sum within 1.5%, every rank
    within 3% of its GPU plus its CPU share, its GPU its own only. Returns them."""
    assert [r["own_prov"] for r in results] == ["attributed"] * N_RANKS
    if mode == "attached":
        assert all(r["attached"] for r in results)
    else:  # one rank sampled, the seven others attached to it
        assert sum(not r["attached"] for r in results) == 1
    ncpu = os.cpu_count() or 1
    # the truth, from the fakes: GPU i's energy over rank i's phase, and the rank's CPU
    # share of the package (its CPU seconds over the machine's, ncpu per second)
    gpu_truth = [GPU_W[i] * r["duration_s"] for i, r in enumerate(results)]
    cpu_truth = [CPU_W * r["cpu_s"] / ncpu for r in results]
    own = [r["own_j"] for r in results]
    truth = [g + c for g, c in zip(gpu_truth, cpu_truth)]
    errors = [o / t - 1 for o, t in zip(own, truth)]
    worst = max(range(N_RANKS), key=lambda i: abs(errors[i]))
    with capsys.disabled():
        print(f"\n8 ranks, {mode}: sum of own {sum(own):.1f} J vs truth {sum(truth):.1f} J "
              f"(GPUs {sum(gpu_truth):.1f} J + ranks' CPU {sum(cpu_truth):.2f} J): "
              f"{100 * (sum(own) / sum(truth) - 1):+.2f}%; worst rank {worst} "
              f"{100 * errors[worst]:+.2f}%; phases {min(r['duration_s'] for r in results):.1f}"
              f"-{max(r['duration_s'] for r in results):.1f} s; sum of machine figures "
              f"{sum(r['machine_j'] for r in results) / sum(truth):.2f}x the truth")
    assert sum(own) == pytest.approx(sum(truth), rel=0.015)
    for i, r in enumerate(results):
        assert r["own_j"] == pytest.approx(truth[i], rel=0.03), f"rank {i}"
        gpus = [k for k in r["own_domains"] if k != "cpu" and r["own_domains"][k] > 0]
        assert gpus == [f"gpu{i}"], f"rank {i} used {gpus}"
    # the machine figure of every rank is the whole machine: adding them is the trap
    assert sum(r["machine_j"] for r in results) > 6 * sum(truth)
    return own


def test_eight_ranks_attached_to_record_add_up_to_the_gpus_plus_their_cpu_share(
        tmp_path, capsys):
    """The seed's shape: eight rank processes attached to one running ``record``."""
    results, out = run_ranks(tmp_path, "attached")
    own = check_sum(results, "attached", capsys)

    # the file: report --by rank, the ranks' rows plus unowned = the total in every
    # segment; a rank's rows cover its tree from its first marker to its exit (more than
    # its phase), never more than its own GPU and its CPU share
    from tuimeter.session.report import build_report, load_file

    rep = build_report([load_file(str(out), "rank")], "rank")
    owners: dict[str, float] = {}
    for seg in rep.hosts[0].segments:
        assert sum(o.energy_j for o in seg.owners) == pytest.approx(seg.energy_j)
        for o in seg.owners:
            owners[o.owner] = owners.get(o.owner, 0.0) + o.energy_j
    gpu_file = rep.hosts[0].domains
    for i in range(N_RANKS):
        assert own[i] * 0.99 <= owners[f"rank {i}"] <= gpu_file[f"gpu{i}"].energy_j * 1.01


def test_eight_ranks_on_their_own_add_up_to_the_gpus_plus_their_cpu_share(tmp_path, capsys):
    """No ``record``: the first rank's meter samples and the seven others attach to it."""
    results, _ = run_ranks(tmp_path, "own")
    check_sum(results, "own", capsys)
