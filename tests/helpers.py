"""Builders and constants shared by the test modules (fixtures live in tests/conftest.py).

Import what you need: ``from tests.helpers import CARBON, make_engine, wait_for``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fakes.scripted import FakeClock, rapl_like
from tuimeter.engine.sampler import Engine
from tuimeter.model import CarbonInfo

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root: the working folder of ``tuimeter`` subprocesses."""

CARBON = CarbonInfo(g_per_kwh=360.0, pue=1.0, source="test")
"""The grid most tests run on: 360 g/kWh, PUE 1 (1 kWh = 3.6 MJ, so 0.1 mg per J)."""

CARBON_400 = CarbonInfo(g_per_kwh=400.0, pue=1.0, source="test")
"""The grid of the sensor tests (RAPL faults, registry, amdsmi): 400 g/kWh, PUE 1."""

T0 = 1_800_000_000.0
"""The wall clock's start in the scripted engines (2027-01-15 08:00 UTC)."""


def make_engine(sensors=None, *, carbon: CarbonInfo = CARBON, interval_s: float = 1.0,
                clock: FakeClock | None = None, wallclock=None, wall_follows_clock: bool = False,
                host: str = "h", **kw) -> tuple[Engine, FakeClock]:
    """An Engine over scripted sensors (default: one ``rapl_like()``, 45 W counted) on a
    fake clock, not opened: ``(engine, clock)``; ``clock`` defaults to ``FakeClock()``.

    The wall clock stands still at :data:`T0` unless ``wallclock`` is given (say a
    ``FakeClock`` the test advances itself) or ``wall_follows_clock`` makes it
    ``T0 + clock()``. tuimeter's own CPU time is 0 unless ``cpu_clock`` is given; other
    keywords (``attributor``...) go to :class:`Engine`.
    """
    clock = clock if clock is not None else FakeClock()
    if wall_follows_clock:
        wallclock = lambda: T0 + clock()  # noqa: E731
    elif wallclock is None:
        wallclock = FakeClock(T0)
    kw.setdefault("cpu_clock", lambda: 0.0)
    sensors = list(sensors) if sensors is not None else [rapl_like()]
    return Engine(sensors, carbon, interval_s, clock=clock, wallclock=wallclock, host=host,
                  **kw), clock


def wait_for(condition, timeout_s: float = 30.0, what: str = "condition", poll_s: float = 0.02):
    """Call ``condition()`` until it returns something truthy and return that; fail the test
    after ``timeout_s``. An exception from ``condition`` (a server that does not answer yet,
    a file half written) counts as not yet, and the last one is named in the failure."""
    deadline = time.monotonic() + timeout_s
    last_exc = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last_exc = exc
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}"
                        + (f" (last error: {last_exc!r})" if last_exc else ""))
        threading.Event().wait(poll_s)  # a poll period, not a synchronising sleep


def tuimeter(*args: str) -> list[str]:
    """The command line running this checkout's ``tuimeter`` with ``args``."""
    return [sys.executable, "-m", "tuimeter", *args]


#: the environment variables that carry the developer's carbon settings and tokens
CARBON_ENV = ("TUIMETER_COUNTRY", "TUIMETER_CARBON_INTENSITY", "TUIMETER_PUE",
              "TUIMETER_CARBON_SOURCE", "TUIMETER_CARBON_ZONE",
              "TUIMETER_ELECTRICITYMAPS_TOKEN", "TUIMETER_ELECTRICITYMAPS_URL",
              "TUIMETER_UK_CARBON_URL")


def private_env(monkeypatch, base: Path, powercap_root: Path | None = None) -> None:
    """This process as a user would run tuimeter in it, kept inside ``base``: config and
    data folders of its own, no carbon settings from the developer's shell, and RAPL read
    from ``powercap_root`` when given (``$TUIMETER_POWERCAP_ROOT``). For tests that call
    the public API in-process (``Meter()`` with nothing injected); ``env_for`` is the
    same for a subprocess."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    for k in CARBON_ENV:
        monkeypatch.delenv(k, raising=False)
    if powercap_root is not None:
        monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(powercap_root))


def env_for(tmp_path: Path, fake=None) -> dict:
    """The environment of a ``tuimeter`` subprocess kept inside ``tmp_path``: runtime,
    config and data folders of its own, no carbon settings from the developer's shell, and
    the powercap tree of ``fake`` (a :class:`~tests.fakes.powercap.FakePowercap`) if given."""
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    (tmp_path / "run").mkdir(exist_ok=True)
    for k in CARBON_ENV:
        env.pop(k, None)
    if fake is not None:
        env["TUIMETER_POWERCAP_ROOT"] = str(fake.sensor_root)
    return env


def count_totals(path: Path) -> int:
    """How many machine-total rows (ticks) the session file at ``path`` holds so far."""
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if ",total,total," in line)
