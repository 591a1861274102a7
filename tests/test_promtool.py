"""``promtool check metrics`` (Prometheus's own linter, shipped with its Debian package) on
the ``/metrics`` of a real ``tuimeter record`` in which every family is present: domains,
machine, grid carbon, the followed job, cgroups, markers and the InfluxDB exporter's health.
It must pass with no warning at all. Skips, saying so, where promtool is not installed
(``.ci/services.sh`` installs the ``prometheus`` package that ships it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.request

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, env_for, tuimeter, wait_for
from tests.servers import free_port
from tests.test_profile_cli import SteadyDriver

#: a family of each kind the exporter serves, by the name it appears under in /metrics
FAMILIES = {
    "domains": "tuimeter_energy_joules_total",
    "machine": "tuimeter_machine_energy_joules_total",
    "carbon": "tuimeter_grid_intensity_grams_per_kilowatt_hour",
    "jobs": "tuimeter_job_energy_joules_total",
    "cgroups": "tuimeter_cgroup_energy_joules_total",
    "markers": "tuimeter_last_marker_info",
    "health": "tuimeter_influx_dropped_points_total",
}
#: the followed job: it marks the session, then works until the test lets it go
JOB = """\
import pathlib, sys, time, tuimeter
tuimeter.mark("warm-up")
go = pathlib.Path(sys.argv[1])
while not go.exists():
    sum(range(10000))
"""


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not installed (Debian's prometheus package ships it; "
                    ".ci/services.sh installs it)")
    return path


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def _series(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M)}


@pytest.fixture
def full_metrics(tmp_path):
    """/metrics of ``tuimeter record --prometheus --influx -- python JOB`` once every
    family of :data:`FAMILIES` has a series (InfluxDB at a closed port: its points are
    dropped, and its health series say so)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(psys=False)
    driver = SteadyDriver(fake)
    driver.start()
    job, go = tmp_path / "job.py", tmp_path / "go"
    job.write_text(JOB)
    port = free_port()
    proc = subprocess.Popen(
        tuimeter("record", "-o", str(tmp_path / "s.csv"), "-q", "-i", "0.25", "--no-gpu",
                 "--prometheus", f"127.0.0.1:{port}",
                 "--influx", f"http://127.0.0.1:{free_port()}", "--influx-db", "t",
                 "--", sys.executable, str(job), str(go)),
        env=env_for(tmp_path, fake), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def complete():
            assert proc.poll() is None, proc.communicate()[1]
            text = _metrics(url)
            return text if set(FAMILIES.values()) <= _series(text) else None

        yield wait_for(complete, timeout_s=60, what="every family on /metrics")
    finally:
        go.touch()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        driver.halt.set()
        driver.join()


def test_promtool_check_metrics_passes_with_every_family_present(full_metrics):
    promtool = _promtool()
    version = subprocess.run([promtool, "--version"], capture_output=True, text=True)
    r = subprocess.run([promtool, "check", "metrics"], input=full_metrics,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout + r.stderr) == (0, ""), (
        f"{version.stdout.splitlines()[:1]}\n{r.stdout}{r.stderr}")


def test_promtool_reports_what_it_is_checked_for(full_metrics):
    """The check above can fail: tuimeter's own text with one family's HELP line taken
    away is a warning promtool gives (exit 3, naming the family)."""
    promtool = _promtool()
    broken = full_metrics.replace("# HELP tuimeter_samples_total", "# HELP_ tuimeter_samples")
    r = subprocess.run([promtool, "check", "metrics"], input=broken,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "tuimeter_samples_total" in r.stdout + r.stderr
