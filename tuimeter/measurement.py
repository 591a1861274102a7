"""Set up one measurement (beside :mod:`tuimeter.live`, which runs it): discover sensors, resolve carbon settings, open the engine and
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
from typing import TYPE_CHECKING, Any, Callable

from .checks import MIN_INTERVAL_S, SetupError, validate_interval
from .config import default_data_dir
from .engine.sampler import Engine
from .sensors.discover import discover
from .session import files
from .session.csvfile import SessionWriter
from .session.files import NewFile
from .session.recorder import Recorder

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["MIN_INTERVAL_S", "MeasureOptions", "SetupError", "attributor_for", "data_dir",
           "make_engine", "open_recorder", "validate_interval"]


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
    tags: tuple[tuple[str, str], ...] = ()  # record --tag (checked: cluster/options.py)
    #: the settings the command line resolved (tuimeter.settings.from_args); None: the
    #: API's, resolved by make_engine from the fields above, the environment and the file
    settings: "Settings | None" = None

    def resolved(self) -> "Settings":
        """The settings of this measurement: the command line's, or (the API) these
        options over the environment and config.toml, resolved now (once per engine)."""
        if self.settings is not None:
            return self.settings
        from .settings import resolve

        return resolve({"country": self.country, "carbon_intensity": self.carbon_intensity,
                        "pue": self.pue, "carbon_source": self.carbon_source,
                        "carbon_zone": self.carbon_zone})


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


def attributor_for(opts: MeasureOptions, engine: Engine | None = None) -> Any:
    """The process attributor of a measurement, or None when ``opts.attribution`` is off.

    With ``engine``, the attributor finds its GPU sensors (the GPU process split) among
    the engine's sensors and uses its carbon settings for the job's CO2e (none with a live
    carbon source: the job's CO2e then comes from its domains', each tick's figure).
    """
    from .engine.attribution import make_attributor

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
    from .carbon_live import open_live

    interval = validate_interval(opts.interval_s)
    try:  # CarbonError, ConfigError and the live source's ValueError
        settings = opts.resolved()
        carbon = settings.carbon()
        live = open_live(settings.live(), carbon)
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    found = discover(opts.powercap_root, gpu=opts.gpu, values=settings.sensor_values())
    sensors = list(found.sensors) + list(opts.extra_sensors)
    engine = Engine(sensors, carbon, interval, host=opts.host or socket.gethostname(),
                    statuses=found.statuses, live_carbon=live, tags=opts.tags)
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
