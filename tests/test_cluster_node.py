"""The node side of ``tuimeter cluster``: ``record --host NAME --tag KEY=VALUE`` (labels on
every exported series and in the session's settings row; the config key and environment
variables), ``tuimeter_info``, the SLURM job and step as labels of the cgroup series, and
a followed or SLURM job's cgroups never folded into ``other``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT, make_engine, wait_for
from tests.servers import LivePowercap, free_port, start_record, stop_record
from tuimeter.config import ConfigError
from tuimeter.settings import from_args
from tuimeter.engine.cgroups import describe, read_cgroup
from tuimeter.export.prometheus import PrometheusExporter
from tuimeter.model import Attribution, CgroupShare, JobSample
from tuimeter.session import schema
from tuimeter.session.reader import SessionReader


def _families(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return {f.name: f for f in text_string_to_metric_families(resp.read().decode())}


def test_record_host_and_tags_label_every_series_and_the_settings_row(tmp_path):
    """Through the command line: every series of /metrics carries host=node07 and the two
    tags; tuimeter_info says host, version, schema and interval; every row of the file
    names node07 and its settings row holds the tags."""
    port = free_port()
    out = tmp_path / "n.csv"
    with LivePowercap(tmp_path / "pc") as pc:
        proc = start_record(pc.root, out, "--host", "node07", "--tag", "job=exp1",
                            "--tag", "partition=gpu", "--prometheus", f"127.0.0.1:{port}",
                            interval_s=0.25)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            fams = wait_for(lambda: (f := _families(url)) and "tuimeter_info" in f and f, 60,
                            "tuimeter_info served")
        finally:
            err = stop_record(proc)
    assert proc.returncode == 0, err
    samples = [s for f in fams.values() for s in f.samples]
    assert len(samples) > 10
    for s in samples:
        assert s.labels.get("job") == "exp1" and s.labels.get("partition") == "gpu", s
        assert s.labels.get("host") == "node07", s
    from tuimeter import __version__

    info = fams["tuimeter_info"].samples[0]
    assert info.value == 1.0 and info.labels["version"] == __version__
    assert info.labels["schema"] == str(schema.SCHEMA_VERSION)
    assert info.labels["interval_s"] == "0.25"
    rows = list(SessionReader(out, kinds=schema.ROW_KINDS))
    assert {r.host for r in rows} == {"node07"}
    settings = next(r for r in rows if r.kind == "settings")
    assert schema.tags_of(settings) == (("job", "exp1"), ("partition", "gpu"))
    assert json.loads(settings.label)["tags"] == {"job": "exp1", "partition": "gpu"}


@pytest.mark.parametrize("args, says", [
    (["--tag", "host=x"], "host"),  # a label of our own
    (["--tag", "job=a", "--tag", "job=b"], "twice"),
    (["--tag", "job"], "KEY=VALUE"),
    (["--tag", "9job=a"], "tag key"),
    (["--tag", "job=a\x1b[31m"], "printable"),
    (["--tag", "__name__=x"], "tag key"),
    (["--host", "a/b"], "host name"),
])
def test_bad_host_or_tag_is_one_line_and_no_file(tmp_path, args, says):
    out = tmp_path / "n.csv"
    r = subprocess.run([sys.executable, "-m", "tuimeter.cli", "record", "-o", str(out),
                        "--duration", "1", "--no-socket", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert "\x1b" not in r.stderr
    assert not out.exists()


def _record_args(argv):
    from tuimeter.cli import _record_parser

    return _record_parser().parse_args(argv)  # applies the environment and config.toml


def test_host_and_tags_from_the_environment_and_the_config_file(tmp_path, monkeypatch):
    """TUIMETER_HOST / TUIMETER_TAGS, else config.toml's ``host`` and ``tags`` table; the
    command line first; a bad value names where it came from."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("TUIMETER_HOST", "TUIMETER_TAGS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "tuimeter").mkdir()
    (tmp_path / "tuimeter" / "config.toml").write_text(
        'host = "fromfile"\n[tags]\njob = "exp2"\nrack = "r7"\n')
    ns = _record_args([])
    assert ns.host == "fromfile" and ns.tags == (("job", "exp2"), ("rack", "r7"))
    monkeypatch.setenv("TUIMETER_HOST", "envhost")
    monkeypatch.setenv("TUIMETER_TAGS", "job=exp3,partition=gpu")
    ns = _record_args([])
    assert ns.host == "envhost" and ns.tags == (("job", "exp3"), ("partition", "gpu"))
    ns = _record_args(["--tag", "job=cli", "--host", "clihost"])
    assert ns.host == "clihost" and ns.tags == [("job", "cli")]
    monkeypatch.setenv("TUIMETER_TAGS", "pid=1")
    with pytest.raises(SystemExit):
        _record_args([])
    with pytest.raises(ConfigError, match="TUIMETER_TAGS"):
        from_args(argparse_namespace(), env={"TUIMETER_TAGS": "pid=1"}, path=tmp_path / "x")


def argparse_namespace():
    import argparse

    return argparse.Namespace(interval=None, host=None, tags=None)


SLURM = "/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0"


class _Cgroups:
    """Three cgroups a tick: a big service, a second service, and a small SLURM step (the
    job's or the followed command's, depending on the test)."""

    def __init__(self, small: str, job_pid: int | None = None):
        self.small, self.job_pid, self.tick = small, job_pid, 0

    def attribute(self, interval_s, domains, now_s):
        self.tick += 1
        infos = [describe("/system.slice/big.service"), describe("/system.slice/mid.service"),
                 describe(self.small)]
        shares = tuple(CgroupShare(info, 1.0, 1.0, (30, 20, 1)[i] * self.tick, 0.0, 0.0, 1)
                       for i, info in enumerate(infos))
        job = None
        if self.job_pid is not None:
            job = JobSample(pid=self.job_pid, name="train", running=True, n_processes=1,
                            power_w=1.0, energy_j=1.0, total_energy_j=1.0, cpu_energy_j=1.0,
                            gpu_energy_j=0.0, co2_g=0.0, total_co2_g=0.0, share=0.1)
        return Attribution((), 0.0, job, cgroups=shares)


def _cgroup_series(attributor, n=1):
    eng, clock = make_engine(host="node7", attributor=attributor)
    eng.open()
    exp = PrometheusExporter(eng, "127.0.0.1", 0, cgroups=n)
    try:
        clock.advance(1.0)
        eng.tick()
        fam = _families(exp.url)["tuimeter_cgroup_energy_joules"]
        return {s.labels["cgroup"]: s.labels for s in fam.samples}
    finally:
        exp.close()
        eng.close()


def test_cgroup_series_carry_the_slurm_job_and_step_read_from_the_path(monkeypatch):
    got = _cgroup_series(_Cgroups(SLURM), n=3)
    assert got[SLURM]["slurm_job"] == "4242" and got[SLURM]["slurm_step"] == "0"
    assert got["/system.slice/big.service"]["slurm_job"] == ""
    assert got["other"]["slurm_job"] == "" and got["other"]["slurm_step"] == ""


def test_the_slurm_job_tuimeter_runs_in_is_never_folded_into_other(monkeypatch):
    """Top 1 of 3: the SLURM job's small step is still served on its own."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert SLURM not in _cgroup_series(_Cgroups(SLURM))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    got = _cgroup_series(_Cgroups(SLURM))
    assert SLURM in got and "/system.slice/big.service" in got


def test_the_followed_jobs_cgroup_is_never_folded_into_other(monkeypatch):
    """The followed command's cgroup (read from /proc for its pid), however small."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    mine = read_cgroup(os.getpid())
    if not mine:
        pytest.skip("this process's cgroup cannot be read here")
    assert mine not in _cgroup_series(_Cgroups(mine))
    got = _cgroup_series(_Cgroups(mine, job_pid=os.getpid()))
    assert mine in got
