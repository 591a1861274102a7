"""The node's power from its BMC over IPMI DCMI: ``ipmitool dcmi power reading``, or
FreeIPMI's ``ipmi-dcmi --get-system-power-statistics``.

Facts (../shared/SENSORS.md section 6): ipmitool prints ``Instantaneous power reading:
245 Watts``, ``Minimum during sampling period``, ``Maximum ...``, ``Average power reading
over sample period: 240 Watts``, ``IPMI timestamp``, ``Sampling period: 00000001
Seconds.``, ``Power reading state is: activated``; field widths vary by version, so
lines are parsed by label. FreeIPMI prints ``Current Power : 245 Watts``, ``Average
Power over sampling duration : 240 watts``, ``Statistics reporting time period : 1000
milliseconds``, ``Power Measurement : Active``. A BMC answers in 100 ms to seconds, may
say ``DCMI request failed`` (not supported), and updates about once a second.

So the tool runs on a thread of its own (:class:`BackgroundMeter`), never in a sample
interval, at most every :data:`OPTIONS` ``ipmi_interval_s`` (5 s, never under 2 s), each
run with a timeout; the average over the BMC's sampling period is taken where it is
given (else the instantaneous reading), and held until the next answer. A hang, "not
supported", a deactivated reading or garbage is one event line; the rest goes on. The
domain is the node (:attr:`DomainKind.PLATFORM`), source ``ipmi``.

``auto`` (the default) uses IPMI where a BMC device (``/dev/ipmi0``, ``/dev/ipmi/0``,
``/dev/ipmidev/0``) and one of the tools exist; ``on`` skips the device check (a tool
configured otherwise), ``off`` never runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Mapping, Sequence

from ..model import Domain, SensorStatus
from .base import SensorUnavailable
from . import node_options
from .node_common import shown
from .node_poller import FetchError, PolledNodeSensor

#: every option of this sensor (the settings layer takes them from here)
OPTIONS = node_options.IPMI
MODE, INTERVAL, TIMEOUT, TOOL = OPTIONS
MIN_INTERVAL_S = 2.0
DEVICES = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")
TOOLS = {"ipmitool": ("dcmi", "power", "reading"),
         "ipmi-dcmi": ("--get-system-power-statistics",)}
DOMAIN_ID = "ipmi-node"

NO_BMC = "no IPMI BMC device"
NO_TOOL = "no ipmitool or ipmi-dcmi on PATH"
TURNED_OFF = "turned off"

_WATTS = re.compile(r"\s*(\d{1,6}(?:\.\d{1,6})?)\s*watts?\b", re.IGNORECASE)
_AVERAGE = ("average power reading over sample period", "average power over sampling duration")
_INSTANT = ("instantaneous power reading", "current power")
_STATE = ("power reading state is", "power measurement")


def parse_dcmi(text: str) -> tuple[float, str]:
    """(power W, which reading) from ipmitool's or FreeIPMI's answer; FetchError (one
    line) for a deactivated reading or an answer with no power in it."""
    fields: dict[str, str] = {}
    for line in text.splitlines()[:64]:
        label, sep, value = line.partition(":")
        if sep:
            fields[label.strip().lower()] = value.strip()
    for key in _STATE:
        state = fields.get(key, "").lower()
        if state and state not in ("activated", "active"):
            raise FetchError(f"the BMC's power reading is {shown(state, 20)}: it does not "
                             f"measure (enable it: ipmitool dcmi power activate)")
    for which, keys in (("average", _AVERAGE), ("instantaneous", _INSTANT)):
        for key in keys:
            m = _WATTS.match(fields.get(key, ""))
            if m:
                return float(m.group(1)), which
    first = next((line for line in text.splitlines() if line.strip()), "")
    raise FetchError(f"no power reading in the answer ({shown(first) or 'empty'!r})")


class IpmiSensor(PolledNodeSensor):
    """The BMC's DCMI power reading, polled off the sampling path (module docstring)."""

    name = "ipmi"
    absent_reasons = (NO_BMC, NO_TOOL, TURNED_OFF)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._values = values  # the resolved settings (discovery); None: built bare
        self._tool: tuple[str, ...] | None = None

    def _find(self) -> tuple[str, ...]:
        """The command to run; SensorUnavailable if none (or turned off, or no BMC)."""
        mode = str(MODE.value(self._values)).lower()
        if mode not in ("auto", "on", "off"):
            raise SensorUnavailable(f"{MODE.env}={shown(mode, 20)!r} is not auto, on or off")
        if mode == "off":
            raise SensorUnavailable(TURNED_OFF)
        if mode == "auto":
            present = [d for d in DEVICES if os.path.exists(d)]
            if not present:
                raise SensorUnavailable(NO_BMC)
            if not any(os.access(d, os.R_OK | os.W_OK) for d in present):
                raise SensorUnavailable(
                    f"cannot open {present[0]}: permission denied",
                    f"run as root, or give a group read-write access to {present[0]} with a "
                    f"udev rule (KERNEL==\"ipmi*\", GROUP=\"ipmi\", MODE=\"0660\")")
        wanted = str(TOOL.value(self._values))
        if wanted and wanted not in TOOLS:
            raise SensorUnavailable(f"{TOOL.env}={shown(wanted, 20)!r} is not "
                                    f"{' or '.join(TOOLS)}")
        for tool, args in TOOLS.items():
            path = shutil.which(tool) if wanted in ("", tool) else None
            if path:
                return (path, *args)
        raise SensorUnavailable(NO_TOOL, "install ipmitool or freeipmi-tools")

    def is_available(self) -> SensorStatus:
        try:
            argv = self._find()
            every, timeout = self._timing()
        except SensorUnavailable as exc:
            return SensorStatus(self.name, False, exc.reason, exc.fix)
        except ValueError as exc:
            return SensorStatus(self.name, False, str(exc))
        return SensorStatus(self.name, True, f"{' '.join(argv)} every {every:g} s")

    def _timing(self) -> tuple[float, float]:
        every = max(MIN_INTERVAL_S, float(INTERVAL.value(self._values)))
        return every, float(TIMEOUT.value(self._values))

    def fetch(self) -> float:
        """One run of the tool: the node's power, W. FetchError (one line) otherwise."""
        assert self._tool is not None
        _, timeout = self._timing()
        try:
            done = subprocess.run(self._tool, capture_output=True, text=True, errors="replace",
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise FetchError(f"the BMC gave no answer in {timeout:g} s") from None
        except OSError as exc:
            raise FetchError(f"cannot run {self._tool[0]}: {exc.strerror or exc}") from None
        if done.returncode != 0:
            said = next((line for line in (done.stderr + done.stdout).splitlines()
                         if line.strip()), "")
            raise FetchError(f"{os.path.basename(self._tool[0])} failed "
                             f"({shown(said, 60) or f'exit {done.returncode}'})")
        return parse_dcmi(done.stdout[:8192])[0]

    def open(self) -> Sequence[Domain]:
        self._tool = self._find()
        every, timeout = self._timing()
        tool = os.path.basename(self._tool[0])
        domain = self._start(DOMAIN_ID, "node (IPMI DCMI)", f"the BMC through {tool} (DCMI): "
                             f"its average over its sampling period (else its instantaneous "
                             f"reading)", every, timeout)
        return [domain]
