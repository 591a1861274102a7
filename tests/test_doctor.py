"""``tuimeter doctor``: what it finds over fake sensors, how it reports problems, its exit
status, its JSON, and that it never raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynvml as real
import pytest

from tests.fakes.fake_pynvml import FakeGpu, make_fake_pynvml
from tests.fakes.powercap import FakePowercap
from tests.fakes.scripted import FakeClock
from tuimeter.cli import main
from tuimeter.doctor import run_doctor, to_json
from tuimeter.doctor.render import render_text
from tuimeter.sensors import rapl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path):
    """No carbon settings from the environment or the user's config."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def no_nvml(monkeypatch):
    """A machine without the NVIDIA driver, whatever this machine has."""
    monkeypatch.setitem(sys.modules, "pynvml",
                        make_fake_pynvml([], init_error=real.NVML_ERROR_LIBRARY_NOT_FOUND))


@pytest.fixture
def window():
    """A fake clock and a sleep that advances it and runs the given actions (no waiting)."""

    class Window:
        def __init__(self):
            self.clock = FakeClock()
            self.actions = []
            self.slept = []

        def sleep(self, s):
            self.slept.append(s)
            self.clock.advance(s)
            for act in self.actions:
                act(s)

    return Window()


def doctor(w, env, **kw):
    kw.setdefault("platform", "linux")
    return run_doctor(2.0, clock=w.clock, sleep=w.sleep, env=env, **kw)


def errors(report):
    return [p for p in report["problems"] if p["level"] == "error"]


def zones(report):
    return {z["domain"]: z for z in report["sensors"]["rapl"]["zones"]}


# ---- RAPL ------------------------------------------------------------------------------------

def test_rapl_zones_listed_with_range_unit_and_the_power_over_the_window(tmp_path, window, env,
                                                                         no_nvml):
    """Each zone: path, name, range and unit, readable, and the counter's delta over the
    window in W (30 J in 2 s on the package = 15 W, to one counter unit)."""
    pc = FakePowercap(tmp_path / "pc").intel_desktop(dram=True)
    window.actions.append(lambda s: (pc.advance("package-0", 30.0),
                                     pc.advance("package-0/dram", 4.0)))
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    assert window.slept[0] == 2.0  # the window; then the short polls timing the counters
    assert all(x < 1e-3 for x in window.slept[1:])
    z = zones(report)
    assert set(z) == {"package-0", "package-0/core", "package-0/uncore", "package-0/dram", "psys"}
    pkg = z["package-0"]
    assert pkg["zone"] == "intel-rapl:0" and pkg["name"] == "package-0"
    assert pkg["max_energy_range_uj"] == 262143328850 and pkg["unit_uj"] == pytest.approx(61.035, abs=1e-3)
    assert pkg["energy_uj_state"] == "readable" and os.path.isdir(pkg["path"])
    assert pkg["power_w"] == pytest.approx(15.0, abs=pc.quantum_j("package-0"))
    assert z["package-0/dram"]["delta_j"] == pytest.approx(4.0, abs=pc.quantum_j("package-0/dram"))
    assert z["package-0/core"]["power_w"] == 0.0
    assert report["sensors"]["rapl"]["found"] and report["sensors"]["rapl"]["available"]
    assert report["sensors"]["estimate"]["in_use"] is False
    assert errors(report) == [] and report["exit_code"] == 0


def test_a_wrap_during_the_window_is_counted_as_energy(tmp_path, window, env, no_nvml):
    pc = FakePowercap(tmp_path / "pc").intel_desktop(psys=False)
    pc.set_raw("package-0", 2**32 - 10)
    window.actions.append(lambda s: pc.advance("package-0", 50.0))
    pkg = zones(doctor(window, env, powercap_root=str(pc.sensor_root)))["package-0"]
    assert pkg["wrapped"] and pkg["delta_j"] == pytest.approx(50.0, abs=pc.quantum_j("package-0"))


def test_a_zone_whose_energy_uj_is_denied_is_an_error_with_the_fix(tmp_path, window, env,
                                                                  no_nvml, monkeypatch):
    """Permission denied on one zone (root-only since 5.10): named, with the udev/tmpfiles fix,
    exit 1; the other zones are still measured."""
    pc = FakePowercap(tmp_path / "pc").intel_desktop().install(monkeypatch)
    pc.deny("package-0/core")
    window.actions.append(lambda s: pc.advance("package-0", 20.0))
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    z = zones(report)
    assert z["package-0/core"]["energy_uj_state"] == "permission denied"
    assert z["package-0/core"]["power_w"] is None
    assert z["package-0"]["power_w"] == pytest.approx(10.0, abs=pc.quantum_j("package-0"))
    [err] = errors(report)
    assert "intel-rapl:0:0" in err["what"] and "permission denied" in err["what"]
    assert err["fix"] == rapl.PERMISSION_FIX
    assert report["exit_code"] == 1


def test_every_zone_denied_carries_the_sensors_own_reason(tmp_path, window, env, no_nvml,
                                                          monkeypatch):
    pc = FakePowercap(tmp_path / "pc").intel_desktop().install(monkeypatch)
    pc.deny_all()
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    section = report["sensors"]["rapl"]
    assert not section["available"] and "CVE-2020-8694" in section["reason"]
    assert section["fix"] == rapl.PERMISSION_FIX
    assert len(errors(report)) == 4 and report["exit_code"] == 1  # one per zone
    assert window.slept == []  # nothing to take a delta of: no wait
    assert report["sensors"]["estimate"]["in_use"] is True


def test_a_zone_whose_name_cannot_be_read_is_an_error(tmp_path, window, env, no_nvml,
                                                     monkeypatch):
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    real_read = rapl._read_text

    def read(path):
        if path.endswith("intel-rapl:0:1/name"):
            raise PermissionError(13, "Permission denied", path)
        return real_read(path)

    monkeypatch.setattr(rapl, "_read_text", read)
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    [err] = errors(report)
    assert "intel-rapl:0:1" in err["what"] and "skipped" in err["what"]
    assert "package-0/uncore" not in zones(report)


def test_masked_devices_tree_is_a_problem_not_a_missing_sensor(tmp_path, window, env, no_nvml):
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    pc.mask_devices()
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    [err] = errors(report)
    assert "dangle" in err["what"] and rapl.ROOT_ENV in err["fix"]


# ---- NVML ------------------------------------------------------------------------------------

def install_nvml(monkeypatch, *gpus, fail_field=None):
    """The fake pynvml, with the version and MIG calls the doctor asks for; ``fail_field``:
    that field's entry answers NVML_ERROR_UNKNOWN."""
    fake = make_fake_pynvml(list(gpus))
    fake.nvmlSystemGetDriverVersion = lambda: "570.86.15"
    fake.nvmlSystemGetNVMLVersion = lambda: "12.570.86.15"
    fake.nvmlDeviceGetMigMode = lambda h: [0, 0]
    fields = fake.nvmlDeviceGetFieldValues

    def field_values(handle, ids):
        values = fields(handle, ids)
        for entry in values:
            if entry.fieldId == fail_field:
                entry.nvmlReturn = real.NVML_ERROR_UNKNOWN
        return values

    fake.nvmlDeviceGetFieldValues = field_values
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_nvml_versions_fields_energy_delta_and_capabilities(tmp_path, window, env, monkeypatch):
    gpu = FakeGpu(name="NVIDIA H200", uuid="GPU-1234", power_mw=300_000, energy_mj=7_000_000)
    fake = install_nvml(monkeypatch, gpu)
    window.actions.append(lambda s: gpu.advance(600.0, s, power_w=301.0))
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    nv = report["sensors"]["nvml"]
    assert nv["found"] and nv["driver_version"] == "570.86.15"
    assert nv["nvml_version"] == "12.570.86.15" and nv["nvidia_ml_py_version"]
    [g] = nv["gpus"]
    assert (g["name"], g["uuid"]) == ("NVIDIA H200", "GPU-1234")
    f = {x["field_id"]: x for x in g["fields"]}
    assert f[83]["status"] == "Success" and f[83]["value"] == pytest.approx(7000.0)
    assert f[186]["value"] == pytest.approx(300.0) and f[186]["unit"] == "W"
    assert f[185]["nvml_return"] == 0
    assert g["power_usage_w"] == pytest.approx(300.0)
    assert g["energy_delta_j"] == pytest.approx(600.0)
    assert g["power_from_energy_w"] == pytest.approx(300.0)
    assert g["power_instant_w"] == pytest.approx(301.0)
    assert g["process_utilization"]["supported"] is True  # NotFound: no sample, normal
    assert g["mig_mode"]["status"] == "disabled"
    assert report["exit_code"] == 0 and errors(report) == []
    assert fake.refcount == 0  # every nvmlInit given back


def test_one_failing_field_entry_is_reported_with_its_status(tmp_path, window, env, monkeypatch):
    """Field 185's entry answers UNKNOWN while the call succeeds: that entry's own status is
    shown, the others still read, and the doctor exits 1."""
    gpu = FakeGpu()
    install_nvml(monkeypatch, gpu, fail_field=real.NVML_FI_DEV_POWER_AVERAGE)
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    f = {x["field_id"]: x for x in report["sensors"]["nvml"]["gpus"][0]["fields"]}
    assert f[185]["nvml_return"] == real.NVML_ERROR_UNKNOWN
    assert f[185]["status"] == "Unknown Error" and f[185]["value"] is None
    assert f[186]["status"] == "Success" and f[83]["status"] == "Success"
    [err] = errors(report)
    assert "field 185" in err["what"] and "Unknown Error" in err["what"]
    assert report["exit_code"] == 1


def test_mig_and_no_process_utilisation_are_findings_not_errors(tmp_path, window, env,
                                                                monkeypatch):
    gpu = FakeGpu(supports_process_utilization=False, supports_instant_field=False)
    fake = install_nvml(monkeypatch, gpu)
    fake.nvmlDeviceGetMigMode = lambda h: [1, 1]
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    g = report["sensors"]["nvml"]["gpus"][0]
    assert g["mig_mode"] == {"current": 1, "pending": 1, "status": "enabled"}
    assert g["process_utilization"]["supported"] is False
    assert {x["field_id"]: x["status"] for x in g["fields"]}[186] == "Not Supported"
    assert report["exit_code"] == 0


def test_a_lost_gpu_is_an_error(tmp_path, window, env, monkeypatch):
    gpu = FakeGpu()
    gpu.lose()
    install_nvml(monkeypatch, gpu)
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    assert report["exit_code"] == 1
    assert any("GpuIsLost" in e["what"] and "Xid" in e["fix"] for e in errors(report))


def test_a_driver_that_does_not_answer_is_an_error_with_the_sensors_fix(tmp_path, window, env,
                                                                        monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml",
                        make_fake_pynvml([], init_error=real.NVML_ERROR_DRIVER_NOT_LOADED))
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    [err] = errors(report)
    assert err["what"] == "NVIDIA kernel driver not loaded" and "modprobe nvidia" in err["fix"]


@pytest.mark.parametrize("euid, sudoers, ok", [(0, False, True), (501, True, True),
                                               (501, False, False)])
def test_powermetrics_root_or_sudoers(euid, sudoers, ok, window, env):
    """On a Mac: usable as root or with a NOPASSWD sudoers line; otherwise an error with the
    sensor's own reason and fix."""
    from tuimeter.doctor.other import PowermetricsProbe
    from tuimeter.sensors import powermetrics

    probe = PowermetricsProbe("darwin", geteuid=lambda: euid, sudo_check=lambda: sudoers,
                              which=lambda name: "/usr/bin/powermetrics")
    report = doctor(window, env, platform="darwin", probes=[probe])
    s = report["sensors"]["powermetrics"]
    assert s["found"] and s["root"] == (euid == 0) and s["available"] == ok
    assert report["exit_code"] == (0 if ok else 1)
    if not ok:
        [err] = errors(report)
        assert (err["what"], err["fix"]) == (powermetrics.NOT_ROOT_REASON, powermetrics.NOT_ROOT_FIX)


# ---- nothing, failures, carbon -----------------------------------------------------------------

def test_no_sensors_at_all_is_exit_0_with_the_estimate_standing_in(tmp_path, window, env,
                                                                   no_nvml):
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    s = report["sensors"]
    assert not s["rapl"]["found"] and not s["nvml"]["found"] and not s["powermetrics"]["found"]
    assert "no powercap folder" in s["rapl"]["reason"]
    assert s["estimate"]["in_use"] is True and s["estimate"]["tdp_w"] > 0
    assert window.slept == []
    assert report["exit_code"] == 0
    assert "exit status 0" in render_text(report)


def test_an_exception_inside_a_probe_is_a_reported_problem_not_a_traceback(
        tmp_path, env, no_nvml, monkeypatch, capsys):
    """A probe that blows up (here RAPL's read raising something unforeseen) still gives a
    report of everything else and exit 1, and no traceback."""
    pc = FakePowercap(tmp_path / "pc").intel_desktop()

    def explode(path):
        raise RuntimeError("sysfs said something new")

    monkeypatch.setattr(rapl, "_read_text", explode)
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    rc = main(["doctor", "--powercap-root", str(pc.sensor_root), "--seconds", "0.01"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "the rapl check failed: RuntimeError: sysfs said something new" in out
    assert "estimate:" in out and "carbon:" in out  # the rest still reported
    assert "Traceback" not in out + err


def test_a_probe_failing_after_the_window_keeps_the_first_part(tmp_path, window, env, no_nvml,
                                                               monkeypatch):
    pc = FakePowercap(tmp_path / "pc").intel_desktop(psys=False)

    def broken_after_window(s):
        monkeypatch.setattr(rapl, "_read_text", lambda path: 1 / 0)

    window.actions.append(broken_after_window)
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    assert report["sensors"]["rapl"]["probe_error"].startswith("ZeroDivisionError")
    assert zones(report)["package-0"]["energy_uj_state"] == "readable"
    assert report["exit_code"] == 1


def test_a_bad_carbon_setting_is_an_error(tmp_path, window, env, no_nvml):
    env = dict(env, TUIMETER_COUNTRY="Atlantis")
    report = doctor(window, env, powercap_root=str(tmp_path / "none"))
    [err] = errors(report)
    assert err["sensor"] == "carbon" and "Atlantis" in err["what"]
    assert report["carbon"]["environment"] == {"TUIMETER_COUNTRY": "Atlantis"}


def test_carbon_settings_in_force_are_shown(tmp_path, window, env, no_nvml):
    env = dict(env, TUIMETER_COUNTRY="FRA", TUIMETER_PUE="1.2")
    c = doctor(window, env, powercap_root=str(tmp_path / "none"))["carbon"]
    assert c["pue"] == 1.2 and c["source"].startswith("FRA") and c["is_default"] is False


def test_names_from_the_machine_are_escaped_in_the_text(tmp_path, window, env, no_nvml):
    pc = FakePowercap(tmp_path / "pc")
    pc.add_zone("intel-rapl:0", "package-0\x1b[2J")
    text = render_text(doctor(window, env, powercap_root=str(pc.sensor_root)))
    assert "\x1b" not in text and "package-0\\x1b[2J" in text


# ---- the command line ----------------------------------------------------------------------------

def test_json_is_strict_and_parses_back(tmp_path, env, no_nvml, monkeypatch, capsys):
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # periods stored there
    rc = main(["check", "--json", "--seconds", "0.01", "--powercap-root", str(pc.sensor_root)])
    out = capsys.readouterr().out

    def no_constants(name):
        raise AssertionError(f"not strict JSON: {name}")

    report = json.loads(out, parse_constant=no_constants)
    assert rc == report["exit_code"] == 0
    assert list(report) == ["schema", "tuimeter_version", "host", "platform", "python",
                            "window_s", "sensors", "carbon", "problems", "exit_code"]
    assert set(report["sensors"]) == {"rapl", "nvml", "powermetrics", "estimate"}
    assert report["sensors"]["rapl"]["zones"][0]["energy_uj_state"] == "readable"


def test_json_has_no_nan():
    assert json.loads(to_json({"power_w": float("nan"), "x": [float("inf")]})) == {
        "power_w": None, "x": [None]}


@pytest.mark.parametrize("args", [["--seconds", "0"], ["--seconds", "abc"], ["--bogus"],
                                  ["--seconds", "1000"]])
def test_bad_arguments_are_one_line_and_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["doctor", *args])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_end_to_end_json_over_a_fake_tree_from_the_environment(tmp_path):
    """``tuimeter doctor --json`` in a subprocess, the tree named by TUIMETER_POWERCAP_ROOT and
    its package counter advanced while the doctor waits."""
    pc = FakePowercap(tmp_path / "pc").intel_desktop()
    env = dict(os.environ, TUIMETER_POWERCAP_ROOT=str(pc.sensor_root),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    for k in ("TUIMETER_COUNTRY", "TUIMETER_CARBON_INTENSITY", "TUIMETER_PUE"):
        env.pop(k, None)
    halt = threading.Event()

    def drive():
        while not halt.wait(0.01):
            pc.advance("package-0", 0.25)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        r = subprocess.run([sys.executable, "-m", "tuimeter", "doctor", "--json", "--no-gpu",
                            "--seconds", "0.5"], capture_output=True, text=True, cwd=ROOT,
                           env=env, timeout=60)
    finally:
        halt.set()
        driver.join()
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    z = zones(report)
    assert report["sensors"]["rapl"]["root"] == str(pc.sensor_root)
    assert z["package-0"]["power_w"] > 0 and z["package-0/core"]["power_w"] == 0
    assert "nvml" not in report["sensors"]
    assert r.stderr == ""


def test_doctor_help_loads_no_probe():
    """``tuimeter doctor --help`` imports no probe and no sensor module (they load when
    the doctor runs): every --help must start in at most 0.25 s, and the probes took
    about a third of doctor's (regression: they were imported with tuimeter.doctor)."""
    code = ("import sys\nfrom tuimeter.cli import main\n"
            "try:\n    main(['doctor', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tuimeter.doctor.', "
            "'tuimeter.sensors', 'pynvml'))))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "usage:" in res.stdout
    assert res.stdout.splitlines()[-1] == "[]"


# ---- counter update periods (issue 28 item 4) ----------------------------------------------

class _SteppingGpu(FakeGpu):
    """A GPU at 250 W whose energy counter moves only every 100 ms of the clock, as NVML's
    does (SENSORS.md: a window shorter than that reads 0)."""

    def __init__(self, clock: FakeClock, period_s: float = 0.1):
        self._clock, self._period = clock, period_s
        super().__init__()

    energy_mj = property(lambda self: 5_000_000 + 250 * 1000 * self._period * int(
        self._clock() / self._period + 1e-9), lambda self, value: None)


def test_doctor_measures_each_counters_update_period(tmp_path, window, env, monkeypatch):
    """NVML's counter stepping every 100 ms and RAPL's every 1 ms (on the fake clock the
    window advances; RAPL's files rewritten as the hardware would) are measured as such,
    shown in the text; an idle zone's period is not seen, and says so."""
    install_nvml(monkeypatch, _SteppingGpu(window.clock))
    pc = FakePowercap(tmp_path / "pc").intel_desktop(dram=True)
    ms = [int(window.clock() * 1000)]

    def rapl_hardware(_s):
        now = int(window.clock() * 1000 + 1e-6)
        if now != ms[0]:  # the package counter steps once a millisecond, at 20 W
            pc.advance("package-0", 0.02 * (now - ms[0]))
            ms[0] = now

    window.actions.append(rapl_hardware)
    report = doctor(window, env, powercap_root=str(pc.sensor_root))
    [g] = report["sensors"]["nvml"]["gpus"]
    print("measured update periods:", g["update_period_s"],
          {k: v.get("update_period_s") for k, v in zones(report).items()})
    assert g["update_period_s"] == pytest.approx(0.1, rel=0.01)
    z = zones(report)
    assert z["package-0"]["update_period_s"] == pytest.approx(0.001, rel=0.05)
    assert z["package-0/dram"]["update_period_s"] is None  # idle: it never moved
    text = render_text(report)
    assert "counter updates every 100 ms (measured)" in text
    assert "counter updates every 1 ms (measured)" in text
    assert "counter update period: not seen" in text
