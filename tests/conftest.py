"""Fixtures shared by the whole suite; builders and constants are in tests/helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_time_zone_guess(tmp_path_factory, monkeypatch):
    """No grid figure guessed from this machine's time zone: every test reads zone files
    under an empty root (tests/test_tzcountry.py builds fake ones), so even a ``$TZ``
    names no country."""
    monkeypatch.setenv("TUIMETER_TZ_ROOT", str(tmp_path_factory.getbasetemp() / "no-tz"))


@pytest.fixture(autouse=True)
def _no_node_meters(tmp_path_factory, monkeypatch):
    """No node meter of this machine (a GPU host's ACPI power meter, a Cray node's
    pm_counters) in any test: each reads an empty root unless the test builds a fake
    (tests/fakes/hwmon.py, tests/fakes/pm_counters.py)."""
    empty = tmp_path_factory.getbasetemp() / "no-node-meters"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("TUIMETER_HWMON_ROOT", str(empty))
    monkeypatch.setenv("TUIMETER_PM_COUNTERS_ROOT", str(empty))
    monkeypatch.setenv("TUIMETER_IPMI", "off")  # tests/fakes/bmc.py's tools turn it on
    monkeypatch.delenv("TUIMETER_REDFISH_URL", raising=False)  # tests/fakes/redfish.py's


@pytest.fixture
def runtime_dir(tmp_path, monkeypatch) -> Path:
    """A private ``$XDG_RUNTIME_DIR`` (0700) for the marker sockets, and no
    ``TUIMETER_SESSION`` from outside: the suite may itself run under ``tuimeter -- pytest``.
    A module whose every test needs it says
    ``pytestmark = pytest.mark.usefixtures("runtime_dir")``."""
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.delenv("TUIMETER_SESSION", raising=False)
    return d
