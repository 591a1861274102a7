"""Fake BMC tools on PATH: ``ipmitool`` and FreeIPMI's ``ipmi-dcmi``, answering as
../shared/SENSORS.md section 6 shows (labels with version-dependent widths), slowly,
with errors or with garbage, as a test sets it (the answer, delay and exit code are read
from files beside the script at every run, so a test can change them mid-run)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

IPMITOOL = """    Instantaneous power reading:                   {w:.0f} Watts
    Minimum during sampling period:                 10 Watts
    Maximum during sampling period:                350 Watts
    Average power reading over sample period:      {w:.0f} Watts
    IPMI timestamp:                           Tue Jun 20 14:12:31 2023
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated

"""
FREEIPMI = """Current Power                        : {w:.0f} Watts
Minimum Power over sampling duration : 10 watts
Maximum Power over sampling duration : 350 watts
Average Power over sampling duration : {w:.0f} watts
Time Stamp                           : 06/20/2023 - 14:12:31
Statistics reporting time period     : 1000 milliseconds
Power Measurement                    : Active
"""
NOT_SUPPORTED = "DCMI request failed because: Invalid command (c1)\n"

_SCRIPT = """#!{python}
import pathlib, sys, time
d = pathlib.Path(__file__).resolve().parent
time.sleep(float((d / "delay").read_text() or 0))
sys.stdout.write((d / "answer").read_text())
sys.stderr.write((d / "stderr").read_text())
sys.exit(int((d / "rc").read_text() or 0))
"""


class FakeTool:
    """One fake tool (``ipmitool`` or ``ipmi-dcmi``) in its own folder: prepend
    :attr:`bin_dir` to PATH."""

    def __init__(self, root: Path, name: str = "ipmitool"):
        self.bin_dir = Path(root) / f"bin-{name}"
        self.bin_dir.mkdir(parents=True)
        self.name = name
        script = self.bin_dir / name
        script.write_text(_SCRIPT.format(python=sys.executable))
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.answer_w(250.0)
        self.set(delay_s=0.0, rc=0, stderr="")

    def answer_w(self, watts: float) -> None:
        self.answer((IPMITOOL if self.name == "ipmitool" else FREEIPMI).format(w=watts))

    def answer(self, text: str) -> None:
        self._write("answer", text)

    def set(self, *, delay_s: float | None = None, rc: int | None = None,
            stderr: str | None = None) -> None:
        for name, value in (("delay", delay_s), ("rc", rc), ("stderr", stderr)):
            if value is not None:
                self._write(name, str(value))

    def _write(self, name: str, text: str) -> None:
        tmp = self.bin_dir / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.bin_dir / name)

    def install(self, monkeypatch) -> "FakeTool":
        """On PATH first, and IPMI turned on (no BMC device in a test)."""
        monkeypatch.setenv("PATH", f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("TUIMETER_IPMI", "on")
        return self
