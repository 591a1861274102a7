"""powermetrics: the NUL-separated plist stream parser, sample -> joules, and the sensor.

No test starts powermetrics: the sensor's runner is replaced by fakes that serve the
recorded-style streams in tests/data/powermetrics/ (made by generate.py there).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tuimeter.model import DomainKind, Provenance, Status
from tuimeter.sensors.base import SensorUnavailable
from tuimeter.sensors.powermetrics import (
    NOT_ROOT_REASON,
    PlistStreamParser,
    PowermetricsSensor,
    sample_domains,
    sample_energy_j,
)

DATA = Path(__file__).parent / "data" / "powermetrics"


def stream(name: str) -> bytes:
    return (DATA / name).read_bytes()


def parse_all(data: bytes, chunk_bytes: int | None = None) -> tuple[list[dict], PlistStreamParser]:
    parser = PlistStreamParser()
    chunk_bytes = chunk_bytes or len(data) or 1
    docs: list[dict] = []
    for i in range(0, len(data), chunk_bytes):
        docs += parser.feed(data[i : i + chunk_bytes])
    return docs + parser.close(), parser


class FakeProc:
    """Stands in for the Popen object: stdout over bytes or over a pipe the test writes to."""

    def __init__(self, data: bytes | None = None, chunk_bytes: int = 700, exit_code: int = 0):
        self.argv: list[str] | None = None
        self.returncode: int | None = None
        self.terminated = False
        self.terminations = 0
        self._exit_code = exit_code
        if data is None:  # live: the test writes with .write(), EOF on terminate()/end()
            read_fd, self._write_fd = os.pipe()
            self.stdout = os.fdopen(read_fd, "rb")
        else:
            self._write_fd = None
            self.stdout = self
            self._data, self._pos, self._chunk = data, 0, chunk_bytes

    def read1(self, n: int = -1) -> bytes:  # the bytes-backed stdout
        piece = self._data[self._pos : self._pos + min(n, self._chunk)]
        self._pos += len(piece)
        if not piece:
            self.returncode = self._exit_code
        return piece

    def write(self, data: bytes) -> None:
        os.write(self._write_fd, data)

    def end(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def poll(self) -> int | None:
        return self.returncode

    def terminate(self) -> None:
        self.terminated = True
        self.terminations += 1
        self.returncode = -15
        self.end()

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode

    def __call__(self, argv: list[str]) -> "FakeProc":  # used as the runner itself
        self.argv = argv
        return self


def make_sensor(proc: FakeProc, **kw) -> PowermetricsSensor:
    return PowermetricsSensor(500, runner=proc, platform="darwin", geteuid=lambda: 0, **kw)


def by_id(readings) -> dict:
    return {r.domain_id: r for r in readings}


# ----- parser -----------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_bytes", [None, 1, 7, 4096])
def test_parser_splits_on_nul_whatever_the_chunking(chunk_bytes: int | None) -> None:
    """Three documents come out, in order, however the pipe cuts the bytes."""
    docs, parser = parse_all(stream("apple_m4_three_samples.plist"), chunk_bytes)
    assert [d["processor"]["cpu_energy"] for d in docs] == [3049, 1502, 2000]
    assert parser.dropped == 0


def test_parser_emits_a_document_as_soon_as_it_is_complete() -> None:
    """The last sample is not held back until the next sample's NUL (one interval of lag)."""
    parser = PlistStreamParser()
    docs = parser.feed(stream("apple_m4_mac16_5.plist"))
    assert len(docs) == 1 and docs[0]["elapsed_ns"] == 1023685416
    assert parser.feed(b"\0") == []  # the NUL opening the next document adds nothing


def test_parser_holds_an_incomplete_document() -> None:
    """A half-received document yields nothing until its end arrives."""
    data = stream("apple_m4_mac16_5.plist")
    parser = PlistStreamParser()
    assert parser.feed(data[:2000]) == []
    assert len(parser.feed(data[2000:])) == 1


def test_truncated_last_document_is_dropped_without_error() -> None:
    """A stream cut mid-document (powermetrics killed) keeps the complete samples only."""
    docs, parser = parse_all(stream("truncated_last.plist"), 512)
    assert [d["processor"]["cpu_energy"] for d in docs] == [3049]
    assert parser.dropped == 1


def test_raw_ampersand_in_task_name_is_tolerated() -> None:
    """A task named "Foo & Bar" (written unescaped) does not lose the sample."""
    docs, _ = parse_all(stream("raw_ampersand_task.plist"))
    names = [t["name"] for t in docs[0]["tasks"]]
    assert names == ["Foo & Bar Helper", "R&D tool & co"]  # real entities still decoded


def test_duplicate_key_keeps_the_last_value() -> None:
    """A duplicated key in the gpu dict is no error; plistlib keeps the last value."""
    docs, _ = parse_all(stream("duplicate_gpu_key.plist"))
    assert docs[0]["gpu"]["gpu_energy"] == 284
    assert sample_energy_j(docs[0])["gpu"] == pytest.approx(0.276)


def test_text_before_a_document_is_kept_as_a_message() -> None:
    """A warning line printed before the first plist does not cost the sample."""
    data = b"powermetrics: some warning\n" + stream("apple_m1_idle.plist")
    docs, parser = parse_all(data)
    assert len(docs) == 1
    assert b"some warning" in bytes(parser.text_seen)


# ----- sample -> energy -------------------------------------------------------------------


def test_apple_silicon_sample_energy_is_millijoules_of_the_sample() -> None:
    """Mac16,5: cpu_energy 3049 mJ -> 3.049 J; processor.gpu_energy (276), not gpu.gpu_energy (284)."""
    (doc,), _ = parse_all(stream("apple_m4_mac16_5.plist"))
    assert sample_energy_j(doc) == pytest.approx({"cpu": 3.049, "gpu": 0.276, "ane": 0.0})


def test_idle_m1_sample_energy() -> None:
    """Idle M1: 89 mJ CPU and 31 mJ GPU over 2.02 s (44 mW, 15 mW)."""
    (doc,), _ = parse_all(stream("apple_m1_idle.plist"))
    energy_j = sample_energy_j(doc)
    assert energy_j == pytest.approx({"cpu": 0.089, "gpu": 0.031, "ane": 0.0})
    assert energy_j["cpu"] / (doc["elapsed_ns"] / 1e9) == pytest.approx(0.0440773, rel=1e-3)


def test_power_times_elapsed_ns_when_energy_is_missing() -> None:
    """Without cpu_energy, cpu_power (mW) x elapsed_ns gives the energy, not x the -i interval."""
    (doc,), _ = parse_all(stream("apple_m4_mac16_5.plist"))
    del doc["processor"]["cpu_energy"]
    expected_j = 2978.45e-3 * 1023685416e-9  # ~3.049 J, the energy powermetrics reported
    assert sample_energy_j(doc)["cpu"] == pytest.approx(expected_j)
    assert sample_energy_j(doc)["cpu"] == pytest.approx(3.049, rel=1e-3)


def test_intel_mac_domains_and_energy() -> None:
    """Intel: package_joules is the package; cores and iGPU are inside it, out of the total."""
    (doc, _second), _ = parse_all(stream("intel_mac.plist"))
    energy_j = sample_energy_j(doc)
    assert energy_j["package-0"] == pytest.approx(4.52)
    assert energy_j["package-0/core"] == pytest.approx(3.1)
    assert energy_j["igpu"] == pytest.approx(0.35 * 1.004512334)
    domains = {d.id: d for d in sample_domains(doc)}
    assert domains["package-0"].kind is DomainKind.PACKAGE and domains["package-0"].in_total
    assert domains["igpu"].kind is DomainKind.UNCORE and not domains["igpu"].in_total
    assert not domains["package-0/core"].in_total


def test_intel_package_watts_when_joules_missing() -> None:
    """package_watts x elapsed_ns stands in for a missing package_joules."""
    doc = {"elapsed_ns": 2_000_000_000, "processor": {"package_watts": 3.0}}
    assert sample_energy_j(doc) == pytest.approx({"package-0": 6.0})


def test_macos12_package_and_dram_energy_keys() -> None:
    """macOS 12's package_energy / dram_energy (mJ) are read where newer keys are absent."""
    doc = {"elapsed_ns": 1_000_000_000, "processor": {"package_energy": 1500, "dram_energy": 250}}
    assert sample_energy_j(doc) == pytest.approx({"package-0": 1.5, "dram": 0.25})
    kinds = {d.id: d.kind for d in sample_domains(doc)}
    assert kinds == {"package-0": DomainKind.PACKAGE, "dram": DomainKind.DRAM}


# ----- sensor -----------------------------------------------------------------------------


def test_sensor_accumulates_samples_with_provenance() -> None:
    """Three samples add up per domain; domains are measured, from powermetrics, in the total."""
    proc = FakeProc(stream("apple_m4_three_samples.plist"))
    sensor = make_sensor(proc)
    domains = {d.id: d for d in sensor.open()}
    assert list(domains) == ["cpu", "gpu", "ane"]
    assert domains["cpu"].kind is DomainKind.PACKAGE and domains["ane"].kind is DomainKind.ANE
    assert all(d.provenance is Provenance.MEASURED and d.in_total for d in domains.values())
    assert domains["cpu"].source == "powermetrics" and domains["cpu"].label == "Mac16,5"
    wait_for(lambda: sensor.read(1.0)[0].status is Status.LOST, 5)  # the stream ran out
    readings = by_id(sensor.read(2.0))
    assert readings["cpu"].energy_j == pytest.approx(3.049 + 1.502 + 2.0)
    assert readings["gpu"].energy_j == pytest.approx(0.276 + 0.100 + 0.050)
    sensor.close()


def test_stream_end_marks_domains_lost_once() -> None:
    """When powermetrics stops, every domain turns LOST with a reason and one event each."""
    proc = FakeProc(stream("apple_m1_idle.plist"), exit_code=1)
    sensor = make_sensor(proc)
    sensor.open()
    wait_for(lambda: sensor.read(1.0)[0].status is Status.LOST, 5)
    lost = sensor.read(2.0)
    assert {r.status for r in lost} == {Status.LOST}
    assert "exit status 1" in lost[0].note
    assert lost[0].energy_j == pytest.approx(0.089)  # what was measured is kept
    events = sensor.drain_events()
    assert sorted(e.domain_id for e in events) == ["ane", "cpu", "gpu"]
    assert {e.kind for e in events} == {"lost"}
    assert sensor.drain_events() == []
    assert not sensor.status().available
    sensor.close()


def test_live_samples_appear_without_blocking_read() -> None:
    """read() never waits: it returns the latest totals, stamped when first seen."""
    proc = FakeProc()
    docs = stream("apple_m4_three_samples.plist").split(b"\0")
    proc.write(docs[0])
    sensor = make_sensor(proc)
    sensor.open()
    first = by_id(sensor.read(10.0))
    assert first["cpu"].energy_j == pytest.approx(3.049)
    assert first["cpu"].t_s == 10.0
    assert first["cpu"].power_w == pytest.approx(2.97845, rel=1e-3)
    assert by_id(sensor.read(10.5))["cpu"].t_s == 10.0  # no new sample: same reading
    proc.write(b"\0" + docs[1])
    wait_for(lambda: by_id(sensor.read(11.0))["cpu"].energy_j > 3.049, 5)
    later = by_id(sensor.read(11.5))
    assert later["cpu"].energy_j == pytest.approx(3.049 + 1.502)
    assert later["cpu"].status is Status.OK
    sensor.close()
    assert proc.terminated
    assert sensor.drain_events() == []  # our own close() is no loss


def test_argv_asks_for_plist_samples_at_the_interval() -> None:
    """The command line: the power samplers, plist format, -i in ms, unbuffered."""
    proc = FakeProc(stream("apple_m1_idle.plist"))
    sensor = make_sensor(proc, samplers="cpu_power,gpu_power,ane_power")
    sensor.open()
    sensor.close()
    assert proc.argv == [
        "powermetrics", "--samplers", "cpu_power,gpu_power,ane_power",
        "-f", "plist", "-i", "500", "-b", "0",
    ]


def test_not_root_output_becomes_an_actionable_error() -> None:
    """powermetrics run without root prints a line and exits: open() says how to fix it."""
    proc = FakeProc(b"powermetrics must be invoked as the superuser\n", exit_code=1)
    with pytest.raises(SensorUnavailable) as err:
        make_sensor(proc).open()
    assert err.value.reason == NOT_ROOT_REASON
    assert "sudo" in err.value.fix and "NOPASSWD: /usr/bin/powermetrics" in err.value.fix


def test_no_first_sample_in_time_is_unavailable() -> None:
    """A powermetrics that prints nothing makes open() fail within its timeout, not hang."""
    proc = FakeProc()
    with pytest.raises(SensorUnavailable, match="no sample"):
        make_sensor(proc, open_timeout_s=0.2).open()
    assert proc.terminated


def test_missing_executable_is_unavailable() -> None:
    """A runner that cannot start the program gives SensorUnavailable, not OSError."""

    def runner(argv):
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    sensor = PowermetricsSensor(runner=runner, platform="darwin", geteuid=lambda: 0)
    with pytest.raises(SensorUnavailable, match="cannot start powermetrics"):
        sensor.open()


def test_unavailable_off_macos() -> None:
    """On Linux the sensor says powermetrics is macOS-only, and does not raise."""
    status = PowermetricsSensor(platform="linux").is_available()
    assert not status.available and "only on macOS" in status.reason


def test_unavailable_without_root_says_how_to_fix() -> None:
    """Not root: the reason is powermetrics' own words, the fix names sudo and sudoers."""
    status = PowermetricsSensor(platform="darwin", geteuid=lambda: 501,
                                sudo_check=lambda: False).is_available()
    assert not status.available
    assert status.reason == "powermetrics must be invoked as the superuser"
    assert "sudoers" in status.fix and "NOPASSWD" in status.fix
    with pytest.raises(SensorUnavailable):
        PowermetricsSensor(platform="darwin", geteuid=lambda: 501, sudo_check=lambda: False).open()


def test_not_root_but_allowed_by_sudoers_runs_it_through_sudo() -> None:
    """With the README's NOPASSWD sudoers line, a user's tuimeter runs `sudo -n powermetrics`."""
    sensor = PowermetricsSensor(platform="darwin", geteuid=lambda: 501, sudo_check=lambda: True,
                                runner=lambda argv: None,
                                samplers="cpu_power")
    assert sensor.is_available().available
    assert sensor.argv()[:3] == ["sudo", "-n", "/usr/bin/powermetrics"]
    assert "-f" in sensor.argv() and "plist" in sensor.argv()


def test_is_available_never_raises() -> None:
    """An exploding uid check becomes an unavailable status."""

    def broken() -> int:
        raise RuntimeError("boom")

    status = PowermetricsSensor(platform="darwin", geteuid=broken).is_available()
    assert not status.available and "boom" in status.reason


def test_close_is_idempotent() -> None:
    """close() before open() starts and stops nothing; close() on a running powermetrics
    terminates it once and ends the reader thread; a second close() terminates nothing
    more, raises nothing and reports no loss."""
    proc = FakeProc()  # live: only terminate() ends its stream
    proc.write(stream("apple_m4_three_samples.plist").split(b"\0")[0])
    sensor = make_sensor(proc)
    sensor.close()
    assert proc.argv is None and proc.terminations == 0
    before = set(threading.enumerate())
    sensor.open()
    [reader] = [t for t in set(threading.enumerate()) - before
                if t.name == "powermetrics-reader"]
    sensor.close()
    assert proc.terminations == 1 and not reader.is_alive()
    sensor.close()
    assert proc.terminations == 1
    assert sensor.drain_events() == [] and sensor.status().available


def test_odd_samples_give_no_energy_instead_of_crashing() -> None:
    """A sample without a processor dict (other samplers only) adds nothing and raises nothing."""
    assert sample_energy_j({"elapsed_ns": 1, "processor": "n/a"}) == {}
    assert sample_energy_j({"gpu": {"gpu_energy": 5}}) == {}
    assert sample_domains({}) == []


# ----- end to end: real processes, a fake sudo and a fake powermetrics on PATH -------------

FAKE_POWERMETRICS = r'''#!{python}
"""Fake powermetrics: refuses unless run by the fake sudo (which sets FAKE_EUID=0), checks
its arguments, streams a recorded plist stream NUL-separated, then runs until terminated."""
import os, sys, time
log = open({log!r}, "a")
log.write("powermetrics " + " ".join(sys.argv[1:]) + "\n")
log.close()
if os.environ.get("FAKE_EUID") != "0":
    print("powermetrics must be invoked as the superuser", flush=True)
    sys.exit(1)
want = ["--samplers", "cpu_power,gpu_power,ane_power", "-f", "plist", "-i", "250", "-b", "0"]
if sys.argv[1:] != want:
    print("fake powermetrics: unexpected arguments", sys.argv[1:], flush=True)
    sys.exit(2)
docs = open({data!r}, "rb").read().split(b"\0")
out = sys.stdout.buffer
for i, doc in enumerate(docs):
    out.write((b"\0" if i else b"") + doc)  # a NUL before each later document
    out.flush()
time.sleep(600)
'''

FAKE_SUDO = r'''#!{python}
"""Fake sudo: `-n -l /usr/bin/powermetrics` says the sudoers line allows it; `-n
/usr/bin/powermetrics ARGS` runs the powermetrics found on PATH as "root"; else refuses."""
import os, shutil, sys
log = open({log!r}, "a")
log.write("sudo " + " ".join(sys.argv[1:]) + "\n")
log.close()
args = sys.argv[1:]
if args == ["-n", "-l", "/usr/bin/powermetrics"]:
    sys.exit(0 if {allowed!r} else 1)
if {allowed!r} and args[:2] == ["-n", "/usr/bin/powermetrics"]:
    os.environ["FAKE_EUID"] = "0"
    target = shutil.which("powermetrics")
    os.execv(target, [target] + args[2:])
print("sudo: a password is required", file=sys.stderr)
sys.exit(1)
'''


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """A bin folder first on PATH holding a fake ``sudo`` (sudoers allow it unless told
    otherwise) and a fake ``powermetrics``; returns a function reading the calls log."""
    import sys

    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()

    def install(allowed: bool = True):
        for name, text in (("powermetrics", FAKE_POWERMETRICS), ("sudo", FAKE_SUDO)):
            script = bin_dir / name
            script.write_text(text.format(python=sys.executable, log=str(log), allowed=allowed,
                                          data=str(DATA / "apple_m4_three_samples.plist")))
            script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("FAKE_EUID", "501")  # what the fake powermetrics sees without sudo
        return lambda: log.read_text().splitlines() if log.exists() else []

    return install


def live_sensor(euid: int) -> PowermetricsSensor:
    """The sensor as a user runs it: the real runner and sudoers check, uid injected (the
    tests run as root)."""
    return PowermetricsSensor(250, platform="darwin", geteuid=lambda: euid,
                              samplers="cpu_power,gpu_power,ane_power")


def test_open_through_sudoers_runs_sudo_powermetrics_end_to_end(fake_path) -> None:
    """Regression: a non-root user with the README's NOPASSWD line got "must be invoked as the
    superuser" (open() reset the sudo decision and started plain powermetrics). Through the
    real runner, `sudo -n -l` is asked, `sudo -n /usr/bin/powermetrics ...` started, and the
    three recorded samples (cpu 3.049 + 1.502 + 2.0 J, gpu 0.276 + 0.1 + 0.05 J) are counted."""
    calls = fake_path(allowed=True)
    sensor = live_sensor(euid=501)
    try:
        assert [d.id for d in sensor.open()] == ["cpu", "gpu", "ane"]
        wait_for(lambda: by_id(sensor.read(1.0))["cpu"].energy_j >= 6.5, 5)
        readings = by_id(sensor.read(2.0))
        assert readings["cpu"].energy_j == pytest.approx(6.551, rel=5e-3)
        assert readings["gpu"].energy_j == pytest.approx(0.426, rel=5e-3)
        assert {r.status for r in readings.values()} == {Status.OK}  # still streaming
    finally:
        sensor.close()
    assert calls() == [
        "sudo -n -l /usr/bin/powermetrics",
        "sudo -n /usr/bin/powermetrics --samplers cpu_power,gpu_power,ane_power "
        "-f plist -i 250 -b 0",
        "powermetrics --samplers cpu_power,gpu_power,ane_power -f plist -i 250 -b 0",
    ]
    assert sensor.drain_events() == []  # our own close() is no loss


def test_open_as_root_runs_powermetrics_without_sudo_end_to_end(fake_path, monkeypatch) -> None:
    """Root runs powermetrics itself: sudo is never asked."""
    calls = fake_path(allowed=True)
    monkeypatch.setenv("FAKE_EUID", "0")
    sensor = live_sensor(euid=0)
    try:
        sensor.open()
        wait_for(lambda: by_id(sensor.read(1.0))["cpu"].energy_j >= 6.5, 5)
    finally:
        sensor.close()
    assert [c.split()[0] for c in calls()] == ["powermetrics"]


def test_open_without_sudoers_line_is_unavailable_without_starting_anything(fake_path) -> None:
    """Not root and sudo refuses: unavailable with the fix; powermetrics is never started."""
    calls = fake_path(allowed=False)
    with pytest.raises(SensorUnavailable) as err:
        live_sensor(euid=501).open()
    assert err.value.reason == NOT_ROOT_REASON and "NOPASSWD" in err.value.fix
    assert calls() == ["sudo -n -l /usr/bin/powermetrics"]
