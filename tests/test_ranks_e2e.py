"""The sum holds, end to end: eight rank processes, each with its own GPU, each using
``tuimeter.Meter`` attached to one running ``tuimeter record`` (real socket, fake NVML
with 8 GPUs at known powers, fake powercap at a known power). Each rank's
``own_energy_j`` is its GPU's energy over its phase (plus its small CPU share); the eight
add up to the GPUs' energy plus the ranks' CPU share, where the eight *machine* figures
add up to about 8 times the machine. ``report --by rank`` over the file gives the same
split, with the rest ``unowned``."""

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
TICKS = 15  # each rank's phase lasts this many ticks of the session (0.2 s): 3 s

RANK = f"""
import json, sys, threading, time
import tuimeter
from tuimeter.session import mark_client

def seq():
    return max([r.get("tick_seq") or 0 for r in mark_client.request({{"op": "status"}})
                if r.get("ok")] or [0])

sys.stdin.readline()  # go: the GPUs list this process now
cpu0 = time.process_time()
with tuimeter.Meter(label="train") as m:
    start = seq()
    while seq() < start + {TICKS}:  # a condition on the session's ticks
        threading.Event().wait(0.05)
cpu_s = time.process_time() - cpu0
(p,) = m.phases
print(json.dumps({{"own_j": m.own_energy_j, "own_domains": p.own_domains,
                  "own_prov": p.own_provenance, "machine_j": p.energy_j,
                  "duration_s": p.duration_s, "cpu_s": cpu_s, "attached": m.attached}}))
"""


def test_eight_ranks_own_energy_adds_up_to_the_gpus_plus_their_cpu_share(tmp_path, capsys):
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    pids_file = tmp_path / "pids.txt"
    config = tmp_path / "gpus.json"
    config.write_text(json.dumps({"watts": GPU_W, "pids_file": str(pids_file)}))
    out = tmp_path / "run.csv"
    env = env_for(tmp_path, fake)
    record = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.nvml_record", str(config), "--", "record",
         "-o", str(out), "--interval", "0.2"], env=env, cwd=ROOT, stderr=subprocess.PIPE,
        text=True)
    driver = ConstantDriver(fake, {"package-0": CPU_W})
    driver.start()
    ranks = []
    try:
        wait_for(lambda: count_totals(out) >= 1, what="the session's first tick")
        ranks = [subprocess.Popen([sys.executable, "-c", RANK], env={**env, "RANK": str(i)},
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
            stdout, err = r.communicate(timeout=120)
            assert r.returncode == 0, err
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for r in ranks:
            if r.poll() is None:
                r.kill()
        driver.halt.set()
        driver.join()
        record.send_signal(signal.SIGINT)
        _, rec_err = record.communicate(timeout=60)
    assert record.returncode == 0, rec_err
    assert all(r["attached"] and r["own_prov"] == "attributed" for r in results)

    ncpu = os.cpu_count() or 1
    # the truth, from the fakes: GPU i's energy over rank i's phase, and the rank's CPU
    # share of the package (its CPU seconds over the machine's, ncpu per second)
    gpu_truth = [GPU_W[i] * r["duration_s"] for i, r in enumerate(results)]
    cpu_truth = [CPU_W * r["cpu_s"] / ncpu for r in results]
    own = [r["own_j"] for r in results]
    truth = sum(gpu_truth) + sum(cpu_truth)
    errors = [abs(o - g) / g for o, g in zip(own, gpu_truth)]
    with capsys.disabled():
        print(f"\n8 ranks: sum of own {sum(own):.1f} J vs truth {truth:.1f} J "
              f"(GPUs {sum(gpu_truth):.1f} J + ranks' CPU {sum(cpu_truth):.2f} J): "
              f"{100 * (sum(own) / truth - 1):+.2f}%; worst rank {100 * max(errors):.2f}% "
              f"(rank {errors.index(max(errors))}); sum of machine figures "
              f"{sum(r['machine_j'] for r in results) / truth:.2f}x the truth")
    assert sum(own) == pytest.approx(truth, rel=0.03)
    for i, r in enumerate(results):
        assert r["own_j"] == pytest.approx(gpu_truth[i], rel=0.05), f"rank {i}"
        gpus = [k for k in r["own_domains"] if k != "cpu" and r["own_domains"][k] > 0]
        assert gpus == [f"gpu{i}"], f"rank {i} used {gpus}"
    # the machine figure of every rank is the whole machine: adding them is the trap
    assert sum(r["machine_j"] for r in results) > 6 * truth

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
