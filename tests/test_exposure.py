"""One-line warnings at start for settings that expose something beyond this machine or
this user (issue 22): a token over plain http:// to another host, a config.toml holding a
token that others can read, --prometheus on every interface. Through `tuimeter record`
over a fake powercap tree; the InfluxDB case at the settings' resolution (a record would
try to reach the host)."""

from __future__ import annotations

import subprocess
import warnings

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, env_for, tuimeter
from tuimeter import exposure
from tuimeter.export.influx import influx_target


def record(tmp_path, *args, env_extra=None):
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    env = env_for(tmp_path, fake)
    env.update(env_extra or {})
    r = subprocess.run(tuimeter("record", "-o", str(tmp_path / "s.csv"), "--no-gpu", "-i", "0.1",
                                *args, "--", "true"),
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stderr.splitlines() if line.startswith("tuimeter: warning:")]


@pytest.mark.parametrize("listen, warned", [("0.0.0.0:0", True), ("[::]:0", True),
                                            ("127.0.0.1:0", False), ("0", False)])
def test_prometheus_on_every_interface_is_said_once(tmp_path, listen, warned):
    lines = [w for w in record(tmp_path, "--prometheus", listen) if "--prometheus" in w]
    assert len(lines) == (1 if warned else 0), lines
    if warned:
        assert "listens on every interface" in lines[0] and "127.0.0.1:" in lines[0]


@pytest.mark.parametrize("mode, warned", [(0o644, True), (0o640, True), (0o600, False)])
def test_a_config_holding_a_token_that_others_can_read_is_said_once(tmp_path, mode, warned):
    cfg = tmp_path / "config" / "tuimeter" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('influx_token = "s3cr3t"\n')
    cfg.chmod(mode)
    lines = [w for w in record(tmp_path) if "config.toml" in w]
    assert len(lines) == (1 if warned else 0), lines
    if warned:
        assert f"chmod 600 {cfg}" in lines[0] and "s3cr3t" not in lines[0]


@pytest.mark.parametrize("url, warned", [("http://192.0.2.1", True),
                                         ("https://192.0.2.1", False),
                                         ("http://127.0.0.1:9", False),
                                         ("http://localhost:9", False)])
def test_the_carbon_token_over_plain_http_to_another_host_is_said(tmp_path, url, warned):
    lines = [w for w in record(tmp_path, env_extra={
        "TUIMETER_CARBON_SOURCE": "electricitymaps", "TUIMETER_CARBON_ZONE": "DE",
        "TUIMETER_ELECTRICITYMAPS_TOKEN": "s3cr3t", "TUIMETER_ELECTRICITYMAPS_URL": url,
    }) if "clear text" in w]
    assert len(lines) == (1 if warned else 0), lines
    if warned:
        assert "Electricity Maps token" in lines[0] and "192.0.2.1" in lines[0]
        assert "s3cr3t" not in lines[0]


@pytest.mark.parametrize("url, warned", [("http://192.0.2.1:8086", True),
                                         ("https://192.0.2.1:8086", False),
                                         ("http://[::1]:8086", False)])
def test_the_influx_token_over_plain_http_to_another_host_is_said(monkeypatch, url, warned):
    monkeypatch.setattr(exposure, "_said", set())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        influx_target(url, org="o", bucket="b", token="s3cr3t", env={})
    said = [str(w.message) for w in seen if w.category is exposure.ExposureWarning]
    assert len(said) == (1 if warned else 0), said
    if warned:
        assert "InfluxDB token" in said[0] and "s3cr3t" not in said[0]
