"""End-to-end `tuimeter record`: the real program, a fake powercap tree whose counters a
background thread advances by a known power curve, and the joules it recorded."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, count_totals, env_for, tuimeter, wait_for


def start_record(tmp_path: Path, fake: FakePowercap, out: Path,
                 interval_s: float = 0.2) -> subprocess.Popen:
    """`tuimeter record -o out` at ``interval_s`` (0.2 s) on ``fake``, once its first tick
    is in."""
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", str(interval_s),
                                     "--no-gpu"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for(lambda: count_totals(out) >= 1, what="first tick")
    except BaseException:
        proc.kill()
        proc.communicate(timeout=30)
        raise
    return proc


class Driver(threading.Thread):
    """Advances the fake counters by a known power curve every 5 ms until stopped."""

    CURVE = {
        "package-0": lambda t: 45.0 + 30.0 * math.sin(t * 3.0),
        "package-0/core": lambda t: 20.0 + 15.0 * math.sin(t * 3.0),
        "package-0/dram": lambda t: 6.0,
        "psys": lambda t: 80.0 + 30.0 * math.sin(t * 3.0),
    }

    def __init__(self, fake: FakePowercap):
        super().__init__(daemon=True)
        self.fake = fake
        self.halt = threading.Event()

    def run(self):
        t0 = last = time.monotonic()
        while not self.halt.wait(0.005):
            now = time.monotonic()
            for key, curve in self.CURVE.items():
                self.fake.advance(key, curve(now - t0) * (now - last))
            last = now


def test_recorded_joules_match_the_truth_within_0_1_percent(tmp_path):
    """Per domain, the joules in the CSV equal what the counters were advanced by (±0.1%),
    across a counter wrap, and the total is package + dram."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop(dram=True, psys=True)
    # put package-0 a few joules before its wrap point so the session crosses it
    zone = fake.zone("package-0")
    fake.set_raw("package-0", 2**32 - int(3.0 / (zone.counter.unit_nj / 1e9)))
    out = tmp_path / "run.csv"
    proc = start_record(tmp_path, fake, out)
    try:
        before = {k: fake.advanced_j(k) for k in Driver.CURVE}
        driver = Driver(fake)
        driver.start()
        n = count_totals(out)
        wait_for(lambda: count_totals(out) >= n + 10, what="ten ticks under load")
        driver.halt.set()
        driver.join()
        n = count_totals(out)
        wait_for(lambda: count_totals(out) >= n + 2, what="two quiet ticks")
        truth = {k: fake.advanced_j(k) - before[k] for k in Driver.CURVE}
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "J" in err and str(out) in err  # one-line summary
    df = pd.read_csv(out)
    samples = df[df.kind == "sample"]
    for key, joules in truth.items():
        got = samples[samples.domain == key].energy_j.sum()
        assert got == pytest.approx(joules, rel=1e-3), key
    total = df[df.kind == "total"].energy_j.sum()
    assert total == pytest.approx(truth["package-0"] + truth["package-0/dram"], rel=1e-3)
    assert set(samples.provenance) == {"measured"}


def test_command_mode_exits_with_the_commands_code(tmp_path):
    """`record -- CMD` runs the command, ends when it ends, and exits with its code."""
    fake = FakePowercap(tmp_path / "sys").amd_zen()
    out = tmp_path / "cmd.csv"
    r = subprocess.run(tuimeter("record", "-o", str(out), "--interval", "0.1", "--no-gpu", "--",
                                sys.executable, "-c", "import time,sys; time.sleep(0.5); sys.exit(3)"),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 3, r.stderr
    df = pd.read_csv(out)
    assert (df.kind == "total").sum() >= 2
    assert set(df[df.kind == "sample"].domain) == {"package-0", "package-0/core"}


def test_sigterm_ends_cleanly_with_summary(tmp_path):
    """SIGTERM: exit 0, one-line summary, every tick so far on disk."""
    fake = FakePowercap(tmp_path / "sys").intel_server(sockets=2)
    out = tmp_path / "t.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", "0.1", "--no-gpu"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: count_totals(out) >= 3, what="three ticks")
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert len([l for l in err.splitlines() if l.strip()]) == 1, err
    df = pd.read_csv(out)
    assert {"package-0", "package-1", "package-0/dram", "package-1/dram"} <= set(df.domain)


def test_duration_stops_recording(tmp_path):
    """--duration S ends the session by itself."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "d.csv"
    r = subprocess.run(tuimeter("record", "-o", str(out), "--interval", "0.1", "--duration", "0.5",
                                "--no-gpu"), env=env_for(tmp_path, fake), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out)
    assert df[df.kind == "total"].interval_s.sum() == pytest.approx(0.5, abs=0.3)


@pytest.mark.parametrize("args, message", [
    (["--interval", "0"], "must be > 0"),
    (["--interval", "-1"], "must be > 0"),
    (["--interval", "0.001"], "must be >= 0.01 s"),
    (["--pid", "999999999"], "no process with PID 999999999"),
    (["--country", "Frnace"], "France"),
    (["--carbon-intensity", "-5"], "must be >= 0"),
    (["--", "definitely-not-a-command-xyz"], "command not found"),
    # issue 9, item 11: each was a traceback or silently accepted
    (["--pid", "2147483648"], "no process with PID 2147483648"),
    (["--carbon-intensity", "1e308"], "at most 5000 (no grid exceeds about 2000 g/kWh)"),
    (["--carbon-intensity", "nan"], "finite number"),
    (["--carbon-intensity", "inf"], "finite number"),
    (["--pue", "1e308"], "PUE (command line) must be at most 10"),
    (["--"], "-- must be followed by a command to run"),
])
@pytest.mark.parametrize("form", ["record", "ui"])
def test_bad_input_is_one_line_exit_2_and_no_file(tmp_path, args, message, form):
    """Bad input: a one-line error naming the problem, exit status 2, no file left behind;
    the same for `record` and the UI form (which fails before it draws anything)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "bad.csv"
    before, after = ([], args) if args and args[0] == "--" else (args, [])
    sub = ["record"] if form == "record" else []
    r = subprocess.run(tuimeter(*sub, "-o", str(out), "--no-gpu", *before, *after),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()


@pytest.mark.parametrize("setting, message", [
    ({"TUIMETER_CARBON_INTENSITY": "1e308"}, "from TUIMETER_CARBON_INTENSITY) must be at most 5000"),
    ({"TUIMETER_CARBON_INTENSITY": "nan"}, "from TUIMETER_CARBON_INTENSITY) must be >= 0"),
    ({"TUIMETER_PUE": "inf"}, "PUE (from TUIMETER_PUE) must be >= 1"),
    ({"config": "/dev/zero"}, "config.toml: not a regular file"),
    ({"config": b"carbon_intensity = \"\xff\xfe\"\n"}, "not UTF-8 text (byte 0xff"),
])
@pytest.mark.parametrize("form", ["record", "ui"])
def test_bad_environment_or_config_is_one_line_exit_2(tmp_path, setting, message, form):
    """The environment and config.toml equivalents: one line, exit 2, no file. A config
    linked to /dev/zero used to be read until memory ran out (this would time out)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    env = env_for(tmp_path, fake)
    config = setting.get("config")
    if config is not None:
        path = tmp_path / "config" / "tuimeter" / "config.toml"
        path.parent.mkdir(parents=True)
        if isinstance(config, bytes):
            path.write_bytes(config)
        else:
            path.symlink_to(config)
    env.update({k: v for k, v in setting.items() if k != "config"})
    out = tmp_path / "bad.csv"
    sub = ["record"] if form == "record" else []
    r = subprocess.run(tuimeter(*sub, "-o", str(out), "--no-gpu", "--no-socket"), env=env,
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()


def test_unwritable_path_is_exit_2(tmp_path):
    """An output path in a folder that does not exist: one line, exit 2."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    r = subprocess.run(tuimeter("record", "-o", str(tmp_path / "nope" / "x.csv"), "--no-gpu"),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "does not exist" in r.stderr


def _unavailable_lines(stderr: str) -> list[str]:
    return [l for l in stderr.splitlines() if " unavailable: " in l]


def test_record_says_why_rapl_is_unavailable_and_how_to_fix_it(tmp_path):
    """Guards the user's first clue: with no readable RAPL zone, `record` prints at start
    one line `tuimeter: rapl unavailable: <reason>. Fix: <fix>` (not only in the CSV's
    session row), and nothing of the kind with -q."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    fake.mask_devices()  # every zone link dangles, as in a container
    out = tmp_path / "m.csv"
    base = ["record", "--interval", "0.1", "--duration", "0.3", "--no-gpu"]
    r = subprocess.run(tuimeter(*base, "-o", str(out)), env=env_for(tmp_path, fake), cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    [line] = _unavailable_lines(r.stderr)
    assert line.startswith("tuimeter: rapl unavailable: ") and ". Fix: " in line, line
    assert "TUIMETER_POWERCAP_ROOT" in line
    q = subprocess.run(tuimeter(*base, "-q", "-o", str(tmp_path / "q.csv")),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert q.returncode == 0 and _unavailable_lines(q.stderr) == [], q.stderr


def test_record_names_the_permission_fix_when_energy_uj_is_root_only(tmp_path, monkeypatch,
                                                                   capsys):
    """Guards the commonest case (Linux >= 5.10 as a user): the start-up line says
    permission denied and gives the group/udev/tmpfiles fix, on one line."""
    from tuimeter import cli

    fake = FakePowercap(tmp_path / "sys").intel_desktop().install(monkeypatch)
    fake.deny_all()
    for k, v in env_for(tmp_path, fake).items():
        monkeypatch.setenv(k, v)
    rc = cli.main(["record", "-o", str(tmp_path / "p.csv"), "--interval", "0.1",
                   "--duration", "0.2", "--no-gpu", "--no-socket", "--no-attribution"])
    err = capsys.readouterr().err
    assert rc == 0, err
    [line] = _unavailable_lines(err)
    assert "permission denied" in line and "Fix: " in line and "tmpfiles" in line


def test_no_nvidia_driver_is_one_short_line(monkeypatch):
    """Guards a quiet start on the many machines without a GPU: NVML's 'driver not found'
    is one short line without the long fix."""
    from tuimeter import cli
    from tuimeter.model import SensorStatus
    from tuimeter.sensors import nvml

    reason, fix = nvml._explain(type("NVMLError_LibraryNotFound", (Exception,), {})())
    [line] = cli.unavailable_lines([SensorStatus("nvml", False, reason, fix),
                                    SensorStatus("rapl", True, "ok")])
    assert line == f"tuimeter: nvml unavailable: {reason}"
    assert len(line) < 100


def test_zero_carbon_intensity_is_accepted(tmp_path):
    """Guards green-tariff users: --carbon-intensity 0 records, with 0 g CO2e."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "z.csv"
    r = subprocess.run(tuimeter("record", "-o", str(out), "--interval", "0.1", "--duration",
                                "0.3", "--no-gpu", "--carbon-intensity", "0"),
                       env=env_for(tmp_path, fake), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(out).co2_g.fillna(0).sum() == 0.0


def test_misspelled_config_key_is_one_warning_line(tmp_path):
    """Guards the CLI's view of a config typo: one `tuimeter: warning:` line naming the
    file and key; the recording goes on."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    env = env_for(tmp_path, fake)
    cfg = tmp_path / "config" / "tuimeter" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('contry = "SE"\n')
    r = subprocess.run(tuimeter("record", "-o", str(tmp_path / "w.csv"), "--interval", "0.1",
                                "--duration", "0.2", "--no-gpu", "-q"),
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    [line] = [l for l in r.stderr.splitlines() if "contry" in l]
    assert line.startswith("tuimeter: warning: ") and str(cfg) in line


def test_duration_with_a_command_stops_recording_not_the_command(tmp_path):
    """Guards "the monitor never ends the job it watches": with --duration S -- CMD the
    recording covers S seconds, the command runs to its end (it writes its file), tuimeter
    says it waits for it, and exits with the command's code. The command waits for the test
    to let it go (after tuimeter said it waits), so no timing on a loaded machine matters."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "d.csv"
    go, done = tmp_path / "go", tmp_path / "done"
    script = (f"import os,time,sys\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
              f"open({str(done)!r}, 'w').write('ok'); sys.exit(3)")
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", "0.1",
                                     "--duration", "0.3", "--no-gpu", "--", sys.executable,
                                     "-c", script),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        lines = []
        while not any("waiting for" in l for l in lines):
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        assert "not recording" in lines[-1]
        df = pd.read_csv(out)  # complete: the recording has ended while the command runs
        go.write_text("")
        _, err = proc.communicate(timeout=60)
    finally:
        go.write_text("")
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, "".join(lines) + err
    assert done.read_text() == "ok"
    assert pd.read_csv(out).equals(df)  # nothing recorded while tuimeter only waited
    assert df[df.kind == "total"].interval_s.sum() >= 0.3 - 1e-6


def test_sigterm_while_waiting_for_the_command_is_passed_on(tmp_path):
    """Guards a clean stop after --duration: SIGTERM to tuimeter while it waits for the
    command reaches the command, and tuimeter exits with its status (143)."""
    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    out = tmp_path / "t.csv"
    proc = subprocess.Popen(tuimeter("record", "-o", str(out), "--interval", "0.1", "--duration",
                                     "0.2", "--no-gpu", "--", "sleep", "60"),
                            env=env_for(tmp_path, fake), cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    while not any("waiting for" in l for l in lines):
        line = proc.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, "".join(lines) + err


def test_failure_after_the_command_started_keeps_waiting_for_it(tmp_path, monkeypatch, capsys):
    """Guards the job against its monitor: an exception once the command runs (following
    it, closing an exporter) is one `tuimeter: error:` line, no traceback; tuimeter still
    waits for the command (it finishes its work) and exits with its code."""
    from tuimeter import cli, export

    class Follower:
        def follow(self, pid):
            raise RuntimeError("cannot follow")

    class Exporter:
        def describe(self):
            return "fake exporter"

        def status(self):
            return ""

        def close(self):
            raise OSError("exporter broke")

    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    for k, v in env_for(tmp_path, fake).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(cli, "make_attributor", lambda opts, engine=None: Follower())
    monkeypatch.setattr(export, "start_exporters", lambda engine, args: [Exporter()])
    done = tmp_path / "done"
    script = f"import time,sys; time.sleep(0.5); open({str(done)!r}, 'w').write('ok'); sys.exit(4)"
    rc = cli.main(["record", "-o", str(tmp_path / "f.csv"), "--interval", "0.1", "--no-gpu",
                   "--no-socket", "--", sys.executable, "-c", script])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert done.read_text() == "ok"
    assert "Traceback" not in err
    errors = [l for l in err.splitlines() if l.startswith("tuimeter: error: ")]
    assert any("cannot follow" in l for l in errors) and any("exporter broke" in l for l in errors)


def _render_terminal(text: str) -> list[str]:
    """What a terminal shows for ``text``: \\r returns to column 0 and overwrites."""
    lines = []
    for raw in text.split("\n"):
        screen: list[str] = []
        col = 0
        for part in raw.split("\r"):
            for i, ch in enumerate(part):
                if col + i < len(screen):
                    screen[col + i] = ch
                else:
                    screen.append(ch)
            col = 0
        lines.append("".join(screen).rstrip())
    return lines


def test_closing_warning_clears_a_long_progress_line(tmp_path, monkeypatch):
    """Guards readable warnings: a progress line longer than the terminal clear (an
    exporter's problem appended) is wiped before the closing warning, so the warning
    line shows nothing of it."""
    import io

    from tuimeter import cli, export

    class Influx:
        def describe(self):
            return "influx"

        def status(self):
            return "influx: 102 points dropped, server down, retrying every 5 s (buffer full)"

        def close(self):
            pass

    class Tty(io.StringIO):
        def isatty(self):
            return True

    fake = FakePowercap(tmp_path / "sys").intel_desktop()
    for k, v in env_for(tmp_path, fake).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(export, "start_exporters", lambda engine, args: [Influx()])
    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    rc = cli.main(["record", "-o", str(tmp_path / "p.csv"), "--interval", "0.1",
                   "--duration", "0.3", "--no-gpu", "--no-socket", "--no-attribution"])
    assert rc == 0
    shown = _render_terminal(err.getvalue())
    [warning] = [l for l in shown if "warning:" in l]
    assert warning == "tuimeter: warning: " + Influx().status(), shown
    [summary] = [l for l in shown if " -> " in l]
    assert summary.startswith("tuimeter: ") and "g CO2e" not in summary.split(" -> ")[1]
