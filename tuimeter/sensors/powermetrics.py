"""Apple power through ``powermetrics`` (macOS, root only).

``powermetrics --samplers cpu_power,gpu_power[,ane_power] -f plist -i <ms> -b 0`` writes one
complete plist document per sample, with a NUL byte *before* each later document. A
background thread feeds the bytes to :class:`PlistStreamParser`; each sample adds its
energy to cumulative per-domain totals that :meth:`PowermetricsSensor.read` hands out
without blocking.

Keys read (native units stay here): Apple Silicon ``processor.cpu_energy`` /
``gpu_energy`` / ``ane_energy`` in mJ for the sample, else ``*_power`` in mW x
``elapsed_ns``; Intel Macs ``processor.package_joules`` (J), else ``package_watts`` (W) x
``elapsed_ns``, ``cpu_joules`` (J, cores: inside the package), ``igpu_watts`` (W, inside
the package); macOS 12's ``package_energy`` / ``dram_energy`` (mJ). Energy is always
integrated over the sample's own ``elapsed_ns``, never the requested ``-i``, which
powermetrics does not keep to. ``processor.gpu_energy`` is used rather than
``gpu.gpu_energy`` (they differ, 276 vs 284 mJ in one real sample): it is the figure
consistent with ``gpu_power`` and ``combined_power``. A macOS 27 beta was seen reporting
0 mW CPU power under load: that cannot be told from a true 0 and is passed on as read.
"""

from __future__ import annotations

import os
import plistlib
import re
import subprocess
import sys
import threading
from typing import Any, Callable, Sequence

from ..model import Domain, DomainKind, Event, Provenance, Reading, SensorStatus, Status
from .base import Sensor, SensorUnavailable

NOT_ROOT_REASON = "powermetrics must be invoked as the superuser"
NOT_ROOT_FIX = (
    "run tuimeter with sudo, or allow powermetrics without a password with a sudoers line "
    "(sudo visudo -f /etc/sudoers.d/powermetrics): "
    "%admin ALL=(root) NOPASSWD: /usr/bin/powermetrics"
)

# a '&' that does not start an entity: escaped before plistlib sees it
_STRAY_AMP = re.compile(rb"&(?!(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);)")
_END = b"</plist>"


def _parse_document(raw: bytes) -> dict | None:
    """One plist document -> dict, or None if it is not a (complete) plist dict."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        doc = plistlib.loads(_STRAY_AMP.sub(b"&amp;", raw))
    except Exception:  # ExpatError, InvalidFileException, ValueError: not a usable document
        return None
    return doc if isinstance(doc, dict) else None


class PlistStreamParser:
    """Splits powermetrics' NUL-separated plist stream into dicts, incrementally.

    A NUL comes before each later document, so everything before a NUL is complete. The
    trailing document is parsed as soon as it ends in ``</plist>`` (not one interval later
    when the next NUL arrives), and held while it is incomplete. ``close()`` drops a
    document cut off at the end of the stream. Documents that cannot be parsed are counted
    in ``dropped`` and skipped; nothing here raises on bad input.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.dropped = 0
        self.text_seen = bytearray()  # the first bytes that were not a plist (error messages)

    def feed(self, data: bytes) -> list[dict]:
        self._buffer += data
        parts = bytes(self._buffer).split(b"\0")
        out = [doc for doc in map(self._take, parts[:-1]) if doc is not None]
        tail = parts[-1]
        self._buffer = bytearray(tail)
        if tail.rstrip().endswith(_END):
            doc = self._take(tail, final=False)
            if doc is not None:
                out.append(doc)
                self._buffer.clear()
        return out

    def close(self) -> list[dict]:
        """End of stream: the last document if complete; a cut-off one is dropped."""
        tail, self._buffer = bytes(self._buffer), bytearray()
        doc = self._take(tail)
        return [doc] if doc is not None else []

    def _take(self, raw: bytes, final: bool = True) -> dict | None:
        """Parse one part; text before its ``<?xml`` is kept as a message.

        With ``final=False`` (a trailing part that may still grow) a failure changes nothing.
        """
        start = raw.find(b"<?xml")
        if start < 0:
            start = raw.find(b"<plist")
        doc = _parse_document(raw[start:]) if start >= 0 else None
        if doc is None and not final:
            return None
        prefix = (raw if start < 0 else raw[:start]).strip()
        if prefix and len(self.text_seen) < 4096:
            self.text_seen += prefix[: 4096 - len(self.text_seen)] + b"\n"
        if doc is None and (start >= 0 or prefix):
            self.dropped += 1
        return doc


# ----- sample -> energy ------------------------------------------------------------------

_MILLI = 1e-3  # mJ -> J, mW -> W

# domain id -> (name, kind, in_total, keys tried in order: (key, factor to J or W, is a power))
_APPLE = {
    "cpu": ("CPU", DomainKind.PACKAGE, True,
            [("cpu_energy", _MILLI, False), ("cpu_power", _MILLI, True)]),
    "gpu": ("GPU", DomainKind.GPU, True,
            [("gpu_energy", _MILLI, False), ("gpu_power", _MILLI, True)]),
    "ane": ("Neural Engine", DomainKind.ANE, True,
            [("ane_energy", _MILLI, False), ("ane_power", _MILLI, True)]),
    "dram": ("DRAM", DomainKind.DRAM, True, [("dram_energy", _MILLI, False)]),
}
_INTEL = {
    "package-0": ("CPU package", DomainKind.PACKAGE, True,
                  [("package_joules", 1.0, False), ("package_watts", 1.0, True),
                   ("package_energy", _MILLI, False)]),
    "package-0/core": ("CPU cores", DomainKind.CORE, False,
                       [("cpu_joules", 1.0, False), ("cpu_watts", 1.0, True)]),
    "igpu": ("Integrated GPU", DomainKind.UNCORE, False, [("igpu_watts", 1.0, True)]),
    "dram": ("DRAM", DomainKind.DRAM, True, [("dram_energy", _MILLI, False)]),
}


def _processor(sample: dict) -> dict:
    processor = sample.get("processor")
    return processor if isinstance(processor, dict) else {}


def _layout(sample: dict) -> dict:
    processor = _processor(sample)
    apple = any(k in processor for k in ("cpu_energy", "cpu_power", "gpu_energy", "ane_energy"))
    return _APPLE if apple else _INTEL


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def sample_energy_j(sample: dict) -> dict[str, float]:
    """Energy (J) of each domain present in one sample, integrated over its ``elapsed_ns``."""
    processor = _processor(sample)
    elapsed_s = (_number(sample.get("elapsed_ns")) or 0.0) / 1e9
    energy: dict[str, float] = {}
    for domain_id, (_, _, _, keys) in _layout(sample).items():
        for key, scale, is_power in keys:
            value = _number(processor.get(key))
            if value is not None:
                energy[domain_id] = max(value * scale * (elapsed_s if is_power else 1.0), 0.0)
                break
    return energy


def sample_domains(sample: dict) -> list[Domain]:
    """The domains a sample shows (Apple Silicon or Intel layout)."""
    model = str(sample.get("hw_model", ""))
    found = sample_energy_j(sample)
    return [
        Domain(domain_id, name, kind, "powermetrics", Provenance.MEASURED, in_total, label=model)
        for domain_id, (name, kind, in_total, _) in _layout(sample).items()
        if domain_id in found
    ]


def _sudo_allows_powermetrics() -> bool:
    """True when ``sudo -n`` may run powermetrics (a NOPASSWD sudoers line), without a prompt."""
    try:
        r = subprocess.run(["sudo", "-n", "-l", "/usr/bin/powermetrics"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _popen(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )


class PowermetricsSensor(Sensor):
    """Cumulative energy per Apple domain (J since open), from a powermetrics child process.

    ``runner(argv)`` starts the process and returns an object with ``.stdout`` (binary,
    readable in chunks), ``.poll()``, ``.terminate()``, ``.wait()``; tests pass one over
    recorded bytes. ``platform`` and ``geteuid`` are injectable for the availability checks.
    Readings carry ``t_s`` = the ``now_s`` of the read that first saw their latest sample.
    """

    name = "powermetrics"

    def __init__(
        self,
        interval_ms: int = 500,
        runner: Callable[[list[str]], Any] | None = None,
        *,
        platform: str = sys.platform,
        geteuid: Callable[[], int] | None = None,
        sudo_check: Callable[[], bool] | None = None,
        samplers: str | None = None,
        open_timeout_s: float | None = None,
    ):
        self.interval_ms = int(interval_ms)
        self._runner = runner or _popen
        self._platform = platform
        self._geteuid = geteuid
        self._sudo_check = sudo_check
        self._samplers = samplers
        if open_timeout_s is None:  # the first sample comes one interval after the start
            open_timeout_s = 5.0 + 3 * interval_ms / 1000
        self.open_timeout_s = open_timeout_s
        self._cond = threading.Condition()
        # run through `sudo -n` (a NOPASSWD sudoers line, not root): decided by is_available(),
        # kept across _reset(), which only clears the state of one stream
        self._use_sudo = False
        self._reset()

    def _reset(self) -> None:
        self._proc: Any = None
        self._thread: threading.Thread | None = None
        self._parser = PlistStreamParser()
        self._domains: list[Domain] = []
        self._energy_j: dict[str, float] = {}
        self._power_w: dict[str, float | None] = {}
        self._samples = 0  # parsed by the reader thread
        self._samples_seen = 0  # as of the last read()
        self._t_s: float | None = None
        self._first: dict | None = None
        self._ended: str | None = None  # why the stream ended, once it has
        self._lost_reported = False
        self._closing = False
        self._events: list[Event] = []

    def argv(self) -> list[str]:
        samplers = self._samplers
        if samplers is None:  # Intel Macs have no Neural Engine, hence no ane_power sampler
            import platform

            arm = platform.machine() == "arm64"
            samplers = "cpu_power,gpu_power,ane_power" if arm else "cpu_power,gpu_power"
        return ["sudo", "-n", "/usr/bin/powermetrics"] * self._use_sudo + [
            "powermetrics"] * (not self._use_sudo) + [
            "--samplers", samplers,
            "-f", "plist", "-i", str(self.interval_ms), "-b", "0",
        ]

    def is_available(self) -> SensorStatus:
        try:
            if self._platform != "darwin":
                return SensorStatus(self.name, False, "powermetrics exists only on macOS")
            euid = (self._geteuid or os.geteuid)()
            # not root: a sudoers NOPASSWD line for powermetrics lets a user run it: `sudo -n`
            self._use_sudo = euid != 0
            if self._use_sudo and not (self._sudo_check or _sudo_allows_powermetrics)():
                return SensorStatus(self.name, False, NOT_ROOT_REASON, NOT_ROOT_FIX)
            if self._runner is _popen and not any(
                os.access(os.path.join(d, "powermetrics"), os.X_OK)
                for d in os.environ.get("PATH", "/usr/bin").split(os.pathsep) + ["/usr/bin"]
            ):
                return SensorStatus(
                    self.name, False, "powermetrics not found", "it ships with macOS in /usr/bin"
                )
            return SensorStatus(self.name, True)
        except Exception as exc:  # never raise from an availability check
            return SensorStatus(self.name, False, f"cannot check powermetrics: {exc}")

    def open(self) -> Sequence[Domain]:
        """Start powermetrics and wait (bounded) for its first sample to learn the domains."""
        status = self.is_available()
        if not status.available:
            raise SensorUnavailable(status.reason, status.fix)
        self.close()
        self._reset()
        try:
            self._proc = self._runner(self.argv())
        except OSError as exc:
            raise SensorUnavailable(f"cannot start powermetrics: {exc}") from None
        self._thread = threading.Thread(target=self._pump, name="powermetrics-reader", daemon=True)
        self._thread.start()
        with self._cond:
            self._cond.wait_for(
                lambda: self._first is not None or self._ended is not None, self.open_timeout_s
            )
            first, ended = self._first, self._ended
            text = bytes(self._parser.text_seen).decode("utf-8", "replace").strip()
        if first is None:
            self.close()
            if "superuser" in text:
                raise SensorUnavailable(NOT_ROOT_REASON, NOT_ROOT_FIX)
            if ended is None:
                raise SensorUnavailable(f"no sample from powermetrics within {self.open_timeout_s:g} s")
            detail = f": {text.splitlines()[0]}" if text else ""
            raise SensorUnavailable(f"powermetrics stopped before its first sample{detail}")
        self._domains = sample_domains(first)
        return list(self._domains)

    def _pump(self) -> None:
        """Reader thread: stdout -> parser -> cumulative totals, until end of stream."""
        stdout = self._proc.stdout
        read = getattr(stdout, "read1", None) or stdout.read
        why = "powermetrics output ended"
        try:
            while True:
                chunk = read(65536)
                if not chunk:
                    break
                self._absorb(self._parser.feed(chunk))
            self._absorb(self._parser.close())
        except Exception as exc:  # the thread must always say the stream ended
            why = f"reading powermetrics failed: {exc!r}"
        code = None
        try:
            code = self._proc.poll()
        except Exception:
            pass
        with self._cond:
            self._ended = why + (f" (exit status {code})" if code is not None else "")
            self._cond.notify_all()

    def _absorb(self, docs: list[dict]) -> None:
        if not docs:
            return
        with self._cond:
            for doc in docs:
                energy = sample_energy_j(doc)
                if not energy:
                    continue
                elapsed_s = (_number(doc.get("elapsed_ns")) or 0.0) / 1e9
                self._power_w = {}  # a domain missing from this sample has no current power
                for domain_id, joules in energy.items():
                    self._energy_j[domain_id] = self._energy_j.get(domain_id, 0.0) + joules
                    self._power_w[domain_id] = joules / elapsed_s if elapsed_s > 0 else None
                if self._first is None:
                    self._first = doc
                self._samples += 1
            self._cond.notify_all()

    def read(self, now_s: float) -> Sequence[Reading]:
        with self._cond:
            if self._samples != self._samples_seen or self._t_s is None:
                self._samples_seen, self._t_s = self._samples, now_s
            ended = self._ended if not self._closing else None
            if ended and not self._lost_reported:
                self._lost_reported = True
                self._events += [Event(now_s, self.name, d.id, "lost", ended) for d in self._domains]
            status, t_s = (Status.LOST, now_s) if ended else (Status.OK, self._t_s)
            return [
                Reading(
                    d.id, t_s, self._energy_j.get(d.id, 0.0),
                    self._power_w.get(d.id) if not ended else None, status, ended or "",
                )
                for d in self._domains
            ]

    def drain_events(self) -> list[Event]:
        with self._cond:
            events, self._events = self._events, []
        return events

    def status(self) -> SensorStatus:
        with self._cond:
            ended = self._ended
        if ended and not self._closing:
            return SensorStatus(self.name, False, ended)
        return SensorStatus(self.name, True, f"every {self.interval_ms} ms")

    def close(self) -> None:
        proc, thread = self._proc, self._thread
        self._closing = True
        if proc is not None:
            try:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        getattr(proc, "kill", proc.terminate)()
            except Exception:
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)
        self._proc, self._thread = None, None
