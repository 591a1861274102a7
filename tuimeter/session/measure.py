"""Set up one measurement: discover sensors, resolve carbon settings, open the engine and
the session file. Shared by ``tuimeter record``, the UI and the Python API; never
imports the UI.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..carbon import resolve_carbon
from ..config import default_data_dir
from ..engine.sampler import Engine
from ..sensors.discover import discover
from . import files
from .csvfile import SessionWriter
from .files import NewFile
from .recorder import Recorder


class SetupError(Exception):
    """Bad input found before anything was recorded (one line, exit status 2)."""


@dataclass
class MeasureOptions:
    interval_s: float = 1.0
    output: str | None = None  # None: a new file in the data directory
    overwrite: bool = False
    powercap_root: str | None = None
    gpu: bool = True
    country: str | None = None
    carbon_intensity: float | None = None
    pue: float | None = None
    carbon_source: str | None = None  # table | electricitymaps | uk-carbon-intensity
    carbon_zone: str | None = None  # the live source's zone or UK outward code
    pid: int | None = None  # follow this process tree (attribution)
    attribution: bool = True
    #: two-tier scan: read every process only every ``full_scan_s`` seconds, the busy ones
    #: and the job each tick (docs/scan.md); None: the default (10 s), 0: every tick
    full_scan_s: float | None = None
    extra_sensors: list = field(default_factory=list)  # tests and the API can add sensors
    host: str | None = None


def data_dir() -> Path:
    """Where sessions go by default: ``$XDG_DATA_HOME/tuimeter/sessions`` on Linux
    (tuimeter.config.default_data_dir); ``output_dir`` in config.toml overrides it."""
    return default_data_dir()


def _new_default_file(directory: str | os.PathLike | None = None) -> NewFile:
    """A new ``session-YYYYmmdd-HHMMSS[-N].csv`` in ``directory`` (None: the data
    directory), never an existing name (see files.create_free)."""
    d = Path(directory) if directory else data_dir()
    d.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return files.create_free(d, f"session-{stamp}", ".csv")


#: shortest sampling interval accepted (s): RAPL updates about every 1 ms, NVML every
#: 10-100 ms, and a tick costs us time too; faster only measures the monitor
MIN_INTERVAL_S = 0.01


def validate_interval(interval_s: float) -> float:
    """``interval_s`` as a float, or SetupError when it is not a number >= MIN_INTERVAL_S."""
    try:
        value = float(interval_s)
    except (TypeError, ValueError):
        raise SetupError(f"interval must be a number of seconds, not {interval_s!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise SetupError(f"interval must be > 0 seconds (got {interval_s})")
    if value < MIN_INTERVAL_S:
        raise SetupError(f"interval must be >= {MIN_INTERVAL_S:g} s (got {interval_s}): "
                         f"sensors update no faster")
    return value


def attributor_for(opts: MeasureOptions, engine: Engine | None = None) -> Any:
    """The process attributor of a measurement, or None when ``opts.attribution`` is off.

    With ``engine``, the attributor finds its GPU sensors (the GPU process split) among
    the engine's sensors and uses its carbon settings for the job's CO2e (none with a live
    carbon source: the job's CO2e then comes from its domains', each tick's figure).
    """
    from ..engine.attribution import make_attributor

    if not opts.attribution:
        return None
    if engine is None:
        return make_attributor(opts)
    fixed = engine.carbon if engine.live_carbon is None else None
    return make_attributor(opts, engine.sensors, fixed)


def make_engine(opts: MeasureOptions,
                attributor: Callable[[MeasureOptions, Engine], Any] = attributor_for
                ) -> Engine:
    """Validate options, discover sensors and build an (unopened) engine, with the
    attributor ``attributor(opts, engine)`` returns (:func:`attributor_for`: one unless
    ``opts.attribution`` is off). Every caller (``record``, the UI, ``profile``, ``Meter``,
    ``@measure``, ``%%tuimeter``) builds its engine here, so this is the one place that
    decides whether an engine attributes: a plain ``Meter()`` has its own energy.

    Raises SetupError for bad input (interval, country, carbon intensity, PUE, carbon
    source). A live carbon source (``carbon_source``) is fetched from Engine.open() on.
    """
    from ..carbon import CarbonError
    from ..carbon_live import open_live, resolve_live

    interval = validate_interval(opts.interval_s)
    try:
        carbon = resolve_carbon(country=opts.country, intensity_g_per_kwh=opts.carbon_intensity,
                                pue=opts.pue)
        live = open_live(resolve_live(opts.carbon_source, opts.carbon_zone), carbon)
    except (CarbonError, ValueError) as exc:
        raise SetupError(str(exc)) from None
    found = discover(opts.powercap_root, gpu=opts.gpu)
    sensors = list(found.sensors) + list(opts.extra_sensors)
    engine = Engine(sensors, carbon, interval, host=opts.host or socket.gethostname(),
                    statuses=found.statuses, live_carbon=live)
    engine.attributor = attributor(opts, engine)
    return engine


def open_recorder(path: str | None, host: str, overwrite: bool = False,
                  append: bool = False, *, temp: bool = False,
                  directory: str | os.PathLike | None = None) -> Recorder:
    """Create the session file now (fails early, before sampling) and wrap it.

    ``path`` None: a new file in ``directory`` (None: the data directory), or with ``temp`` a new
    ``tuimeter-replay-*.csv`` in the temporary directory (the caller discards it).
    ``append``: add the session to an existing session file (see SessionWriter.create).
    Raises SetupError with a one-line message."""
    try:
        if path:
            writer = SessionWriter.create(path, host, overwrite=overwrite, append=append)
        else:
            new = (files.create_free(tempfile.gettempdir(),  # private, as mkstemp's
                                     f"tuimeter-replay-{uuid.uuid4().hex[:8]}", ".csv", 0o600)
                   if temp else _new_default_file(directory))
            writer = SessionWriter.open_new(new, host)
    except OSError as exc:
        msg = exc.strerror if getattr(exc, "strerror", None) else str(exc)
        if getattr(exc, "filename", None) and exc.strerror:
            msg = f"cannot write {path}: {exc.strerror}"
        raise SetupError(msg) from None
    return Recorder(writer)
