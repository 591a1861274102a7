"""deploy/: the systemd unit passes ``systemd-analyze verify`` (where systemd-analyze is
installed) and keeps its hardening; the group it reads RAPL through is the one the tmpfiles,
udev and sysusers files grant; and the command lines of the unit and of the Containerfile
run as written (a real ``tuimeter record`` serving /metrics over a live fake powercap tree,
the container's through the devices tree its README mount gives)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.servers import ROOT, LivePowercap, free_port, record_alive, stop_record

DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "tuimeter.service"


def _unit(path: Path = UNIT) -> dict[str, list[str]]:
    """``Key`` -> its values (a key may repeat), over all sections."""
    keys: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";", "[")):
            k, _, v = line.partition("=")
            keys.setdefault(k.strip(), []).append(v.strip())
    return keys


def _tuimeter_bin() -> str:
    found = Path(sys.executable).with_name("tuimeter")
    if not found.exists():
        pytest.skip(f"no tuimeter entry point beside {sys.executable} (pip install -e .)")
    return str(found)


def test_unit_passes_systemd_analyze_verify(tmp_path):
    """No warning at all: an unknown key or a bad value is only a warning (exit 0) for
    systemd, so stderr must be empty too. ExecStart names /usr/local/bin/tuimeter, which
    verify wants to exist: the copy checked here names this checkout's entry point."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    unit = tmp_path / "tuimeter.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/tuimeter", _tuimeter_bin()))
    res = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_unit_hardening_and_restart():
    keys = _unit()
    want = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
            "Restart": "on-failure", "StateDirectory": "tuimeter", "User": "tuimeter",
            "SupplementaryGroups": "power"}
    for k, v in want.items():
        assert keys.get(k) == [v], k
    # NVML opens /dev/nvidia*: nothing that puts a device allow-list in place
    for k in ("PrivateDevices", "ProtectClock", "DevicePolicy", "DeviceAllow"):
        assert k not in keys, k


def test_the_rapl_group_is_granted_where_the_unit_reads_it():
    group = _unit()["SupplementaryGroups"][0]
    tmpfiles = (DEPLOY / "tuimeter-rapl.tmpfiles").read_text()
    entries = [ln.split() for ln in tmpfiles.splitlines() if ln and not ln.startswith("#")]
    assert entries and all(e[0] == "z" and e[1].endswith("/energy_uj") and e[2] == "0440"
                           and e[4] == group for e in entries)
    assert f"chgrp {group} " in (DEPLOY / "60-tuimeter-rapl.rules").read_text()
    sysusers = (DEPLOY / "tuimeter.sysusers").read_text().splitlines()
    assert f"m tuimeter {group}" in sysusers and f"g {group} -" in sysusers


def _containerfile() -> tuple[dict, list[str]]:
    """(ENV, the argv of ENTRYPOINT + CMD) of deploy/Containerfile."""
    text = (DEPLOY / "Containerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(dict(kv.split("=", 1) for kv in shlex.split(line[4:])))
        elif line.startswith(("ENTRYPOINT ", "CMD ")):
            argv += json.loads(line.split(" ", 1)[1])
    return env, argv


def _serve(argv: list[str], env: dict, cwd: Path) -> str:
    """Run ``argv`` (a record command serving /metrics) until RAPL energy shows; its stderr."""
    port = free_port()
    argv = [a.replace("0.0.0.0:9900", f"127.0.0.1:{port}") for a in argv]
    assert f"127.0.0.1:{port}" in argv  # the port was there to swap
    proc = subprocess.Popen([sys.executable, "-m", "tuimeter.cli", *argv[1:], "--no-gpu"],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)

    def energy():
        record_alive(proc)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return False
        # RAPL itself (not the estimate that stands in when the tree cannot be read)
        m = re.search(r'^tuimeter_energy_joules_total\{[^}]*domain="package-0"[^}]*'
                      r'source="rapl"[^}]*\} (\S+)$', text, re.M)
        return m is not None and float(m.group(1)) > 0

    try:
        wait_for(energy, 30, "energy on /metrics")
    finally:
        err = stop_record(proc)
    assert proc.returncode == 0, err
    return err


def test_the_units_command_runs_as_written(tmp_path):
    (exec_start,) = _unit()["ExecStart"]
    argv = shlex.split(exec_start)
    assert argv[0].endswith("/tuimeter") and argv[1] == "record"
    with LivePowercap(tmp_path / "pc") as pc:
        env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(pc.root), XDG_CONFIG_HOME="/etc")
        _serve(argv, env, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pc"]  # no file written


def test_the_containers_command_runs_with_the_devices_tree(tmp_path):
    """The image's ENTRYPOINT + CMD and ENV, with TUIMETER_POWERCAP_ROOT standing for the
    mount the README gives (-v /sys/devices/virtual/powercap:/host/powercap:ro)."""
    image_env, argv = _containerfile()
    assert argv[0] == "tuimeter" and image_env["TUIMETER_POWERCAP_ROOT"] == "/host/powercap"
    with LivePowercap(tmp_path / "pc") as pc:
        env = dict(os.environ, **{k: v for k, v in image_env.items()
                                  if k != "TUIMETER_POWERCAP_ROOT"},
                   TUIMETER_POWERCAP_ROOT=str(pc.fake.devices_root))
        _serve(argv, env, tmp_path)
