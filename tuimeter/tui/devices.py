"""Devices as the UI shows them: one short line per device for the domain table's
``device`` column (``H200 87% 41/140G 64C 700W 1980MHz``), and the devices screen (``d``)
with every reading named and in full.

The readings are the snapshot's :class:`~tuimeter.model.DeviceInfo` (read by the sensors
on a slow cadence of their own); a reading the driver does not give is ``N/A`` in its
place, never 0. A device name comes from the driver (or a session file): escaped.
"""

from __future__ import annotations

import re
from typing import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..engine.sampler import DEVICE_INFO_INTERVAL_S
from ..model import DeviceInfo, DomainSample, Snapshot
from ..text import safe_text
from .format import NA, fmt_duration

#: words a GPU's short name leaves out
_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "quadro", "amd", "radeon", "instinct"}
#: a short name keeps the word after these (``RTX 4090``, ``RTX A6000``)
_SERIES_WORDS = {"rtx", "gtx", "titan", "mi"}
#: a short name is at most this long
SHORT_NAME_MAX = 10


def short_name(name: str) -> str:
    """A GPU's model, short: ``NVIDIA H200`` -> ``H200``, ``NVIDIA A100-SXM4-80GB`` ->
    ``A100``, ``NVIDIA GeForce RTX 4090`` -> ``RTX 4090``; escaped."""
    words = [w for w in safe_text(name).split() if w.lower() not in _VENDOR_WORDS]
    if not words:
        return ""
    short = words[0]
    if short.lower() in _SERIES_WORDS and len(words) > 1:
        short = f"{short} {words[1]}"
    short = re.split(r"-(?=[A-Za-z]*\d*GB|SXM|PCIE|NVL|HBM)", short, flags=re.IGNORECASE)[0]
    return short[:SHORT_NAME_MAX]


def _gib(b: int) -> str:
    g = b / 2**30
    return f"{g:.1f}" if g < 10 else f"{g:.0f}"


def _is_cpu(info: DeviceInfo) -> bool:
    """A CPU's readings (frequency, temperature), not a GPU's (which has a name)."""
    return not info.name and all(x is None for x in (
        info.util_pct, info.mem_total_b, info.power_limit_w, info.clock_sm_mhz))


def _fields(info: DeviceInfo) -> list[str]:
    """The line's fields, most telling first (the last ones go first when room is short)."""
    if _is_cpu(info):  # a CPU package: frequency and temperature
        freq = NA if info.freq_mhz is None else f"{info.freq_mhz / 1000:.2f}GHz"
        temp = NA if info.temp_c is None else f"{info.temp_c:.0f}C"
        return [freq, temp]
    mem = NA
    if info.mem_used_b is not None and info.mem_total_b is not None:
        mem = f"{_gib(info.mem_used_b)}/{_gib(info.mem_total_b)}G"
    return [
        short_name(info.name),
        NA if info.util_pct is None else f"{info.util_pct:.0f}%",
        mem,
        NA if info.temp_c is None else f"{info.temp_c:.0f}C",
        NA if info.power_limit_w is None else f"{info.power_limit_w:.0f}W",
        NA if info.clock_sm_mhz is None else f"{info.clock_sm_mhz:.0f}MHz",
    ]


def device_text(info: DeviceInfo | None, width: int) -> str:
    """One line of at most ``width`` characters, fields dropped from the end to fit;
    ``""`` without readings."""
    if info is None:
        return ""
    fields = [f for f in _fields(info) if f]
    while fields and len(" ".join(fields)) > width:
        fields.pop()
    return " ".join(fields)


def _value(x: float | int | None, fmt: str) -> str:
    return NA if x is None else fmt.format(x)


def device_lines(sample: DomainSample) -> Text:
    """Every reading of a domain's device, named, in full (the devices screen)."""
    info = sample.device
    text = Text()
    text.append(f"{safe_text(sample.domain.id)}", style="bold")
    label = sample.domain.label or (info.name if info is not None else "")
    if label:  # a GPU's label is its model (and how it is read)
        text.append(f"  {safe_text(label)}")
    text.append("\n")
    if info is None:
        text.append("  no readings\n")
        return text
    mem = NA
    if info.mem_used_b is not None and info.mem_total_b is not None:
        mem = f"{info.mem_used_b / 2**30:.1f} / {info.mem_total_b / 2**30:.1f} GiB"
    rows = [
        ("busy", _value(info.util_pct, "{:.0f} %")),
        ("memory busy", _value(info.mem_util_pct, "{:.0f} %")),
        ("memory", mem),
        ("temperature", _value(info.temp_c, "{:.0f} C")),
        ("power limit", _value(info.power_limit_w, "{:.0f} W")),
        ("SM clock", _value(info.clock_sm_mhz, "{:.0f} MHz")),
        ("memory clock", _value(info.clock_mem_mhz, "{:.0f} MHz")),
    ]
    if _is_cpu(info):
        rows = [("frequency", _value(info.freq_mhz, "{:.0f} MHz (mean of its CPUs)")),
                ("temperature", _value(info.temp_c, "{:.0f} C"))]
    for name, value in rows:
        text.append(f"  {name:<13}", style="bold")
        text.append(f"{value}\n")
    return text


def devices_text(snap: Snapshot | None) -> Text:
    """The devices screen's text: each domain that has readings, or why there are none."""
    text = Text()
    samples: Sequence[DomainSample] = snap.domains if snap is not None else ()
    shown = [s for s in samples if s.device is not None]
    if not shown:
        text.append("No device readings. They come from the drivers (NVML for NVIDIA GPUs, "
                    "psutil for CPU frequency and temperature) and are not recorded in the "
                    "session file, so a replay has none.\n")
        return text
    if snap is not None:
        text.append(f"At {fmt_duration(snap.elapsed_s)}; read every "
                    f"{DEVICE_INFO_INTERVAL_S:g} s or every interval, whichever is longer. "
                    f"N/A: the driver does not say.\n\n",
                    style="dim")
    for s in shown:
        text.append(device_lines(s))
        text.append("\n")
    return text


class DeviceScreen(ModalScreen[None]):
    """Every device's readings in full (``d``); Esc closes."""

    BINDINGS = [Binding("escape,d,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    DeviceScreen { align: center middle; }
    DeviceScreen > VerticalScroll {
        width: 90%; max-width: 100; height: 90%; border: heavy $accent; padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, text: Text) -> None:
        super().__init__()
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("Devices  (Esc or d to close)", classes="title")
            yield Static(self._text, id="devices")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
