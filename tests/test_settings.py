"""Settings resolved once, at the edge (tuimeter.settings): the command line, then the
environment, then config.toml, then the default, read once per command into one frozen
Settings that is handed down as plain values; every key declared once, and
docs/configuration.md's table generated from those declarations."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import private_env
from tuimeter import cli, config, settings
from tuimeter.cli import _record_parser

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Config and data folders of this test's own, no TUIMETER_* settings from outside."""
    import os

    for name in list(os.environ):
        if name.startswith("TUIMETER_"):
            monkeypatch.delenv(name)
    private_env(monkeypatch, tmp_path)
    (tmp_path / "config" / "tuimeter").mkdir(parents=True)
    return tmp_path


def test_record_reads_config_toml_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tuimeter record`` reads config.toml once: its parser resolves every setting and
    hands them down; the engine's carbon set-up, the live source and the exporters read
    it no more (before, the parser, resolve_carbon and resolve_live read it three
    times). The file's country reaches the session file."""
    fake = FakePowercap(home / "powercap").intel_desktop()
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(fake.sensor_root))
    (home / "config" / "tuimeter" / "config.toml").write_text('country = "FR"\n')
    reads = []
    real = config.read_config_text

    def counted(path):
        reads.append(str(path))
        return real(path)

    monkeypatch.setattr(config, "read_config_text", counted)
    out = home / "run.csv"
    code = cli.main(["record", "-o", str(out), "-i", "0.1", "--duration", "0.3", "--no-gpu",
                     "--no-socket", "-q"])
    assert code == 0
    assert reads == [str(home / "config" / "tuimeter" / "config.toml")]
    assert "FRA France" in out.read_text()


def test_the_parser_hands_down_one_frozen_typed_settings(home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsed command line carries one Settings: typed values from the option, the
    variable or the file, first match first; it cannot be changed afterwards."""
    (home / "config" / "tuimeter" / "config.toml").write_text(
        'interval_s = 2\ngpu = false\nexport_dir = "~"\n')
    monkeypatch.setenv("TUIMETER_ATTRIBUTION", "off")
    from tuimeter.tui.run import parser as ui_parser

    s = ui_parser().parse_args(["-i", "0.5"]).settings
    assert isinstance(s, settings.Settings)
    assert (s.interval_s, s.gpu, s.attribution) == (0.5, False, False)
    assert s.export_dir == str(Path("~").expanduser())  # the UI's (record has none)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.interval_s = 3.0  # type: ignore[misc]
    assert _record_parser().parse_args([]).settings.interval_s == 2.0


def test_exporters_read_only_the_environment_the_resolver_read(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The InfluxDB exporter's variables come through the resolver like every other's:
    settings resolved over an environment without them do not see os.environ's (the
    exporter read TUIMETER_INFLUX_* itself)."""
    import argparse
    import os

    from tuimeter.export import ExportError, add_export_options

    monkeypatch.setenv("TUIMETER_INFLUX_URL", "http://127.0.0.1:8086")
    monkeypatch.setenv("TUIMETER_INFLUX_DB", "power")
    p = argparse.ArgumentParser()
    add_export_options(p)
    none = home / "none.toml"
    [(entry, target)] = settings.from_args(p.parse_args(["--influx"]), dict(os.environ),
                                           none).exporters()
    assert entry.name == "influx" and target.db == "power"
    alone = settings.from_args(p.parse_args(["--influx"]), {}, none)
    with pytest.raises(ExportError, match="--influx needs a URL"):
        alone.exporters()


def test_every_key_is_declared_once_with_an_environment_variable() -> None:
    """Each config key is declared once (no two owners), names its own variable, and the
    carbon keys' variables are the ones the carbon rule names in its messages."""
    from tuimeter import carbon, carbon_live

    keys = settings.all_keys()
    names = [k.name for k in keys]
    assert len(names) == len(set(names))
    assert all(k.env and k.env.startswith("TUIMETER_") for k in keys)
    by_name = {k.name: k.env for k in keys}
    assert {n: by_name[n] for n in carbon.CONFIG_KEYS} == {
        "country": carbon.ENV_COUNTRY, "carbon_intensity": carbon.ENV_INTENSITY,
        "pue": carbon.ENV_PUE}
    assert all(by_name[n] == env for n, env in carbon_live.ENV_NAMES.items())


def _table(page: str) -> str:
    return page.split(settings.BEGIN, 1)[1].split(settings.END, 1)[0].strip("\n") + "\n"


def test_the_docs_table_is_the_declarations() -> None:
    """docs/configuration.md's table is what the declarations generate (run
    ``python -m tuimeter.settings`` after changing a key)."""
    page = PAGE.read_text(encoding="utf-8")
    assert _table(page) == settings.options_table()
    assert settings.with_table(page) == page


def test_the_docs_check_fails_when_a_key_is_added(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exporter key declared but not in the page makes the page disagree (the check
    above can fail), and regenerating puts it in."""
    from tuimeter.checks import text
    from tuimeter.export import prometheus
    from tuimeter.keys import Key

    extra = Key("prometheus_path", text, "TUIMETER_PROMETHEUS_PATH", None,
                what="the metrics path", option="`--prometheus-path`")
    monkeypatch.setattr(prometheus, "ENTRY", dataclasses.replace(
        prometheus.ENTRY, keys=(*prometheus.ENTRY.keys, extra)))
    from tuimeter.export import registry

    monkeypatch.setattr(registry, "EXPORTERS", [prometheus.ENTRY, *registry.EXPORTERS[1:]])
    page = PAGE.read_text(encoding="utf-8")
    assert _table(page) != settings.options_table()
    assert "`TUIMETER_PROMETHEUS_PATH`" in settings.with_table(page)


#: the modules below the command line: they take plain values, never a parsed Namespace
BELOW_THE_CLI = ["live.py", "measurement.py", "settings.py", "config.py", "keys.py",
                 "checks.py", "measure_keys.py", "carbon.py", "carbon_live.py", "export",
                 "engine", "sensors", "points.py", "profile/run.py", "profile/pyspy.py"]


def test_no_namespace_below_the_command_line() -> None:
    """The session set-up, the session file, the exporters, the engine, the sensors and
    a profile's run never take a parsed Namespace (it travelled into open_session_file and the exporters,
    read with getattr); settings.py takes one only in from_args, the edge. (An exporter
    may still name argparse: its options' types raise ArgumentTypeError.)"""
    found = []
    for name in BELOW_THE_CLI:
        target = ROOT / "tuimeter" / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            if path.name == "settings.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                named = ((isinstance(node, ast.Attribute) and node.attr == "Namespace")
                         or (isinstance(node, ast.Name) and node.id == "Namespace")
                         or (isinstance(node, ast.ImportFrom)
                             and any(a.name == "Namespace" for a in node.names)))
                if named:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_config_toml_is_read_only_by_the_resolver() -> None:
    """Only tuimeter.settings (and the doctor, which reports on the file) calls the
    config reader: no module reads config.toml for an option by itself."""
    readers = []
    for path in sorted((ROOT / "tuimeter").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in ("read_table", "read_config_text"):
                readers.append(str(path.relative_to(ROOT)))
            if isinstance(node, ast.Attribute) and node.attr in ("read_table", "read_config_text"):
                readers.append(str(path.relative_to(ROOT)))
    assert sorted(set(readers)) == ["tuimeter/config.py", "tuimeter/settings.py"]


class _ProbeSensor:
    """A sensor a newcomer adds, with an option of its own (a root folder); never
    available: its status says which root it was built with."""

    name = "probe"
    covers_cpu = False

    def __init__(self, root=None):
        self.root = root

    def is_available(self):
        from tuimeter.model import SensorStatus

        return SensorStatus(self.name, False, f"no probe under {self.root}")


def test_a_sensor_declares_its_own_option_variable_and_config_key(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sensor entry's one Key gives ``record`` its option, and its value (the option,
    else the variable, else config.toml) reaches the sensor's constructor through the
    engine's set-up; the docs table lists it."""
    from tuimeter.checks import folder
    from tuimeter.keys import Key
    from tuimeter.sensors import registry

    key = Key("probe_root", folder, "TUIMETER_PROBE_ROOT", "probe_root",
              what="the probe's folder", option="`--probe-root`",
              cli=(("--probe-root",), {"metavar": "DIR", "help": "the probe's folder"}))
    entry = registry.SensorEntry("probe", ("linux",), frozenset({registry.CPU}), ("probe-",),
                                 "tests.test_settings:_ProbeSensor", keys=(key,),
                                 kwargs=lambda o: {"root": o.values.get("probe_root")})
    registry.register(entry)  # as its module would (the list discovery reads)
    try:
        _probe_root_reaches_the_sensor(home, monkeypatch)
    finally:
        registry.SENSORS.remove(entry)


def _probe_root_reaches_the_sensor(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tuimeter.measurement import make_engine
    from tuimeter.options import measure_options

    fake = FakePowercap(home / "powercap").intel_desktop()
    monkeypatch.setenv("TUIMETER_POWERCAP_ROOT", str(fake.sensor_root))
    (home / "config" / "tuimeter" / "config.toml").write_text('probe_root = "/in/file"\n')

    def probe_reason(argv):
        engine = make_engine(measure_options(_record_parser().parse_args(["--no-gpu", *argv])))
        return next(s.reason for s in engine.statuses if s.name == "probe")

    assert probe_reason(["--probe-root", "/given"]) == "no probe under /given"
    assert probe_reason([]) == "no probe under /in/file"
    monkeypatch.setenv("TUIMETER_PROBE_ROOT", "/from/env")
    assert probe_reason([]) == "no probe under /from/env"
    assert "--probe-root DIR" in _record_parser().format_help()
    assert "| `probe_root` |" in settings.options_table()
