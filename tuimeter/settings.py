"""Settings, resolved once at the edge: the command line (or the API's keywords), then the
environment, then ``config.toml``, then the default, for every option (carbon and
exporters included).

This is the one module that reads the environment and ``config.toml`` for options. The
command line (:class:`tuimeter.options.Parser`) calls :func:`from_args` once, right after
parsing; the Python API calls :func:`resolve` once per measurement. What comes out is a
frozen :class:`Settings`, handed down as plain values: the engine's set-up, the session
file and the exporters never see an argparse Namespace nor read a variable.

Each setting is declared once, as a :class:`~tuimeter.keys.Key` (its config key,
environment variable, option, check and the docs' line): the measurement and carbon keys
in :mod:`tuimeter.measure_keys` (:data:`CORE_KEYS`), each sensor's and exporter's in its
registry entry (``SensorEntry.keys``, ``ExporterEntry.keys``). docs/configuration.md's table is
generated from them (:func:`options_table`; ``python -m tuimeter.settings`` rewrites it,
and tests/test_settings.py fails when the page and the declarations disagree).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .config import default_config_path, read_table
from .keys import Key, check_value
from .measure_keys import CORE_KEYS, HEAD_KEYS, TAIL_KEYS
from .tzcountry import ROOT_ENV

if TYPE_CHECKING:
    from .carbon_live import LiveSettings
    from .export.base import ExporterEntry
    from .model import CarbonInfo

__all__ = ["CORE_KEYS", "HEAD_KEYS", "TAIL_KEYS", "Settings", "Sources", "all_keys",
           "from_args", "options_table", "resolve", "resolve_carbon", "resolve_live"]

#: the built-in defaults of the options that have one (the rest stay None)
_DEFAULTS = {"interval": 1.0, "no_gpu": False, "no_attribution": False, "export_dir": "."}


def exporter_entries() -> "tuple[ExporterEntry, ...]":
    """Every registered exporter (tuimeter.export.registry), looked up when asked: a test
    may add one."""
    from .export import registry

    return tuple(registry.EXPORTERS)


def all_keys() -> tuple[Key, ...]:
    """Every key config.toml may hold, in the order of the docs' table: the measurement
    keys, the sensors' own, the exporters', the carbon keys and the theme, then the node
    side's and ``tuimeter cluster``'s (tuimeter.cluster.options)."""
    from .cluster.options import KEYS as CLUSTER_KEYS
    from .sensors.registry import sensor_keys

    return (HEAD_KEYS + sensor_keys() + tuple(k for e in exporter_entries() for k in e.keys)
            + TAIL_KEYS + CLUSTER_KEYS)


@dataclass(frozen=True)
class Sources:
    """What the command line, the environment and config.toml say, each by key name:
    ``cli`` the values given (in the key's sense: ``gpu``, not ``no_gpu``; only those
    given), ``env`` the variables' non-empty text, ``file`` the file's values as written.
    Values of the file and the environment are checked when asked for (:meth:`value`),
    and the whole file once by :func:`from_args`."""

    cli: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    file: Mapping[str, Any] = field(default_factory=dict)
    path: Path = Path("config.toml")
    keys: tuple[Key, ...] = ()

    def key(self, name: str) -> Key:
        return next(k for k in self.keys if k.name == name)

    def where(self, name: str, level: str) -> str:
        """How an error names the place a value came from."""
        if level == "cli":
            return "command line"
        if level == "env":
            return self.key(name).env or name
        return f"{self.path}: {name!r}"

    def pick(self, name: str, given: object = None) -> tuple[object, str]:
        """(value as written, where) of the first level that sets ``name``, ``given``
        (an argument) first; (None, "") when none does. Unchecked."""
        if given is not None:
            return given, "command line"
        if name in self.cli:
            return self.cli[name], "command line"
        if name in self.env:
            return self.env[name], self.where(name, "env")
        if name in self.file:
            return self.file[name], self.where(name, "file")
        return None, ""

    def value(self, name: str) -> Any:
        """The value of ``name``: the command line's as given, else the environment's or
        the file's checked (ConfigError naming where), else None."""
        if name in self.cli:
            return self.cli[name]
        for level, values in (("env", self.env), ("file", self.file)):
            if name in values:
                return check_value(self.key(name), values[name], self.where(name, level))
        return None

    def check(self, name: str, value: object, where: str) -> Any:
        """``value`` of key ``name`` checked; ConfigError naming ``where``."""
        return check_value(self.key(name), value, where)


def read_sources(cli: Mapping[str, Any], env: Mapping[str, str] = os.environ,
                 path: str | os.PathLike | None = None) -> Sources:
    """The :class:`Sources` of one resolution: ``cli`` (None values dropped), the
    variables of every key, and config.toml (``path``, default
    :func:`~tuimeter.config.default_config_path`; a missing file is fine). ConfigError
    for a file that cannot be read; an unknown key in it is a warning."""
    keys = all_keys()
    where = Path(path) if path is not None else default_config_path(env)
    return Sources(
        cli=MappingProxyType({k: v for k, v in cli.items() if v is not None}),
        env=MappingProxyType({k.name: env[k.env] for k in keys if k.env and env.get(k.env)}),
        file=MappingProxyType(read_table(where, keys)), path=where, keys=keys)


@dataclass(frozen=True)
class Settings:
    """Every option of one measurement, resolved: typed values, immutable. The carbon
    figure, the live carbon source and the exporters' settings follow rules of their own
    over the levels (a country on the command line beats an intensity in the
    environment; an InfluxDB URL in the file starts the exporter); they are worked out
    from ``sources`` by :meth:`carbon`, :meth:`live` and :meth:`exporters`, which read
    nothing more."""

    interval_s: float = 1.0
    output_dir: str | None = None
    export_dir: str = "."
    gpu: bool = True
    attribution: bool = True
    theme: str | None = None
    sources: Sources = field(default_factory=Sources)
    #: the variables of the time zone a country is guessed from (TZ; not an option)
    tz_env: Mapping[str, str] = field(default_factory=dict)

    def carbon(self) -> "CarbonInfo":
        """The grid intensity and PUE (tuimeter.carbon's rule); CarbonError when bad."""
        from .carbon import CarbonSettings, carbon_info

        s = self.sources
        levels = [CarbonSettings("given", s.cli.get("country"), s.cli.get("carbon_intensity"),
                                 s.cli.get("pue")),
                  CarbonSettings("environment", s.env.get("country"),
                                 s.env.get("carbon_intensity"), s.env.get("pue")),
                  CarbonSettings(f"config {s.path}", s.file.get("country"),
                                 s.file.get("carbon_intensity"), s.file.get("pue"), s.path)]
        return carbon_info(levels, self.tz_env)

    def live(self) -> "LiveSettings | None":
        """The live carbon source, None for the table (tuimeter.carbon_live's rule);
        ValueError naming where a bad value came from."""
        from .carbon_live import choose_live

        s = self.sources
        return choose_live(s.cli.get("carbon_source"), s.cli.get("carbon_zone"), s.pick,
                           s.check)

    def sensor_values(self) -> dict[str, Any]:
        """The value of each sensor's own key (``SensorEntry.keys``; None when unset),
        by key name: what ``SensorOptions.values`` hands the sensors."""
        from .sensors.registry import sensor_keys

        return {k.name: self.sources.value(k.name) for k in sensor_keys()}

    def exporters(self) -> list[tuple["ExporterEntry", Any]]:
        """(entry, its settings) of each exporter asked for; ExportError (one line) for
        incomplete or bad settings."""
        return [(e, s) for e in exporter_entries() if (s := e.settings(self.sources)) is not None]


def _settings(sources: Sources, tz_env: Mapping[str, str], **core: Any) -> Settings:
    """Settings over ``sources`` with the measurement values ``core`` (the rest default)."""
    return Settings(sources=sources, tz_env=MappingProxyType(
        {k: v for k, v in tz_env.items() if k in (ROOT_ENV, "TZ")}), **core)


def resolve(cli: Mapping[str, Any] | None = None, env: Mapping[str, str] = os.environ,
            path: str | os.PathLike | None = None) -> Settings:
    """The settings of a measurement the API starts: ``cli`` (key name -> value, None for
    not given: ``Meter``'s carbon keywords), then ``env``, then config.toml, for the
    carbon figure, the live source and the exporters. The measurement keys
    (``interval_s``, ``gpu`` ...) keep their defaults: ``Meter``'s keywords have their
    own, and config.toml's are the command line's. Values of the file are checked when
    used (a bad carbon key says so in the carbon rule's words)."""
    return _settings(read_sources(cli or {}, env, path), env)


def resolve_carbon(country: str | None = None, intensity_g_per_kwh: float | str | None = None,
                   pue: float | str | None = None, env: Mapping[str, str] = os.environ,
                   config_path: str | os.PathLike | None = None) -> "CarbonInfo":
    """The CarbonInfo of these arguments over ``env`` and config.toml (``config_path``,
    None: the default path; a missing file is fine); see :mod:`tuimeter.carbon`.
    CarbonError for an unknown country, a bad intensity or PUE; ConfigError for a file
    that cannot be read."""
    return resolve({"country": country, "carbon_intensity": intensity_g_per_kwh, "pue": pue},
                   env, config_path).carbon()


def resolve_live(source: str | None = None, zone: str | None = None,
                 env: Mapping[str, str] = os.environ,
                 config_path: str | os.PathLike | None = None) -> "LiveSettings | None":
    """The live carbon source of these arguments over ``env`` and config.toml, None for
    the table (see :func:`tuimeter.carbon_live.choose_live`)."""
    return resolve({"carbon_source": source, "carbon_zone": zone}, env, config_path).live()


# -- the command line ----------------------------------------------------------------------
def from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ,
              path: str | os.PathLike | None = None) -> Settings:
    """Resolve the settings of a parsed command line once, and fill the options it left
    unset (their ``unset`` value) from the environment, else config.toml, else the
    built-in default, so that the command itself reads them from ``args``; the result is
    also ``args.settings``. Every value in the file is checked, used or not; ConfigError
    (one line naming the file and key, or the variable) on a bad value. Options ``args``
    lacks are skipped.

    Idempotent: a second call returns the first one's settings."""
    if isinstance(getattr(args, "settings", None), Settings):
        return args.settings
    keys = all_keys()
    for dest in ("output_dir", "theme"):  # no option of their own
        if not hasattr(args, dest):
            setattr(args, dest, None)
    cli: dict[str, Any] = {}
    for key in keys:
        if key.dest is None:
            given = getattr(args, key.name, None)  # the carbon options share the key's name
        else:
            given = getattr(args, key.dest, key.unset)
            given = None if given is key.unset else (not given if key.negated else given)
        if given is not None:
            cli[key.name] = given
    sources = read_sources(cli, env, path)
    for key in keys:
        if key.name in sources.file:  # every value in the file is checked, used or not
            sources.check(key.name, sources.file[key.name], sources.where(key.name, "file"))
    for key in keys:
        if key.dest is None or not hasattr(args, key.dest) or key.name in sources.cli:
            continue
        if key.check_env:
            value = sources.value(key.name)
        else:  # the owner reads its variables itself (sources.env): the file only here
            value = sources.file.get(key.name)
        if value is not None:
            setattr(args, key.dest, (not value) if key.negated else value)
    for dest, default in _DEFAULTS.items():
        if hasattr(args, dest) and getattr(args, dest) is None:
            setattr(args, dest, default)
    def given(dest: str, default: Any) -> Any:
        value = getattr(args, dest, None)
        return default if value is None else value

    settings = _settings(sources, env, interval_s=given("interval", 1.0),
                         output_dir=args.output_dir, export_dir=given("export_dir", "."),
                         gpu=not given("no_gpu", False),
                         attribution=not given("no_attribution", False), theme=args.theme)
    args.settings = settings
    return settings


# -- the docs' table -------------------------------------------------------------------------
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


def options_table(keys: Sequence[Key] | None = None) -> str:
    """The Markdown table of every key (docs/configuration.md, between :data:`BEGIN` and
    :data:`END`), generated from the declarations."""
    rows = ["| Key | Type | Default | What | Environment | Option |",
            "|---|---|---|---|---|---|"]
    for k in all_keys() if keys is None else keys:
        env = f"`{k.env}`" + (f" {k.env_note}" if k.env_note else "") if k.env else "none"
        rows.append(f"| `{k.name}` | {k.type} | {k.default} | {k.what} | {env} | {k.option} |")
    return "\n".join(rows) + "\n"


def with_table(page: str) -> str:
    """``page`` with the text between the markers replaced by :func:`options_table`."""
    head, sep, rest = page.partition(BEGIN)
    _old, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the page has no {BEGIN} ... {END} block")
    return f"{head}{BEGIN}\n{options_table()}{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tuimeter.settings [PAGE]``: rewrite the table of PAGE (default
    docs/configuration.md) from the declarations."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    page = Path(args[0] if args else "docs/configuration.md")
    page.write_text(with_table(page.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    raise SystemExit(main())
