"""config.toml: every key applied, the order option > environment > file > default, bad
values (one line naming the file and key, exit 2), unknown keys warned about once, and
the Linux locations kept (README, "Configuration")."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

from tests.test_hostile_files import other_user  # noqa: F401 (a fixture)
from tuimeter import config
from tuimeter.settings import resolve_carbon
from tuimeter.cli import _record_parser
from tuimeter.tui.run import parser as ui_parser

ALL_KEYS = """\
interval_s = 0.5
output_dir = "{out}"
export_dir = "{exp}"
gpu = false
attribution = false
prometheus = "127.0.0.1:9109"
influx_url = "http://127.0.0.1:8086"
influx_db = "power"
influx_org = "lab"
influx_bucket = "b"
influx_token = "t"
country = "FR"
carbon_intensity = 12.5
pue = 1.2
theme = "textual-light"
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private XDG_CONFIG_HOME (its config.toml is written by each test) and no
    TUIMETER_* settings from outside."""
    import os

    for name in list(os.environ):
        if name.startswith("TUIMETER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "tuimeter").mkdir(parents=True)
    return tmp_path


def write(home: Path, text: str) -> Path:
    path = home / "cfg" / "tuimeter" / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_key_in_the_file_is_applied(home: Path) -> None:
    """Guards against a documented key that nothing reads."""
    (home / "out").mkdir()
    (home / "exp").mkdir()
    path = write(home, ALL_KEYS.format(out=home / "out", exp=home / "exp"))
    args = ui_parser().parse_args([])
    assert args.interval == 0.5
    assert args.output_dir == str(home / "out")
    assert args.export_dir == str(home / "exp")
    assert args.no_gpu is True and args.no_attribution is True
    assert args.prometheus == ("127.0.0.1", 9109)
    assert args.influx == "http://127.0.0.1:8086"
    assert (args.influx_db, args.influx_org, args.influx_bucket, args.influx_token) == (
        "power", "lab", "b", "t")
    assert args.theme == "textual-light"
    info = resolve_carbon(env={}, config_path=path)
    assert (info.g_per_kwh, info.pue) == (12.5, 1.2)


def test_output_dir_is_where_a_new_session_file_goes(home: Path) -> None:
    from tuimeter.live import open_session_file
    from tuimeter.options import session_file

    (home / "out").mkdir()
    write(home, f'output_dir = "{home / "out"}"\n')
    recorder = open_session_file(session_file(_record_parser().parse_args([])), "h")
    try:
        assert Path(recorder.path).parent == home / "out"
    finally:
        recorder.close()


def test_nothing_set_gives_the_built_in_defaults(home: Path) -> None:
    args = ui_parser().parse_args([])
    assert args.interval == 1.0 and args.export_dir == "."
    assert args.no_gpu is False and args.no_attribution is False
    assert args.prometheus is None and args.influx is None and args.output_dir is None


@pytest.mark.parametrize("argv, env, expected", [
    (["-i", "4"], {"TUIMETER_INTERVAL": "3"}, 4.0),  # option beats env and file
    ([], {"TUIMETER_INTERVAL": "3"}, 3.0),           # env beats file
    ([], {}, 2.0),                                    # file beats default
])
def test_interval_precedence(home: Path, monkeypatch: pytest.MonkeyPatch, argv, env,
                             expected) -> None:
    write(home, "interval_s = 2\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _record_parser().parse_args(argv).interval == expected


@pytest.mark.parametrize("argv, env, no_gpu", [
    (["--no-gpu"], {"TUIMETER_GPU": "1"}, True),
    ([], {"TUIMETER_GPU": "yes"}, False),
    ([], {}, True),
])
def test_gpu_precedence(home: Path, monkeypatch: pytest.MonkeyPatch, argv, env,
                        no_gpu) -> None:
    write(home, "gpu = false\n")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _record_parser().parse_args(argv).no_gpu is no_gpu


def test_prometheus_precedence(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home, 'prometheus = "9101"\n')
    assert _record_parser().parse_args([]).prometheus == ("127.0.0.1", 9101)
    monkeypatch.setenv("TUIMETER_PROMETHEUS", "9102")
    assert _record_parser().parse_args([]).prometheus == ("127.0.0.1", 9102)
    assert _record_parser().parse_args(["--prometheus", "9103"]).prometheus == (
        "127.0.0.1", 9103)


def test_influx_url_in_the_file_yields_to_the_variable(home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's URL starts the exporter; TUIMETER_INFLUX_URL, set, decides the URL."""
    from tuimeter.export import influx

    write(home, 'influx_url = "http://127.0.0.1:1"\ninflux_db = "filedb"\n')
    monkeypatch.setenv("TUIMETER_INFLUX_URL", "http://127.0.0.1:2")
    monkeypatch.setenv("TUIMETER_INFLUX_DB", "envdb")
    [(entry, target)] = _record_parser().parse_args([]).settings.exporters()
    assert entry is influx.ENTRY
    assert "127.0.0.1:2" in target.url and target.db == "envdb"


@pytest.mark.parametrize("line, key", [
    ("interval_s = 0.001", "interval_s"),
    ('interval_s = "fast"', "interval_s"),
    ("gpu = 3", "gpu"),
    ('prometheus = "host:port"', "prometheus"),
    ("output_dir = 1", "output_dir"),
    ("theme = true", "theme"),
    ("pue = 0.5", "pue"),
])
def test_a_bad_value_in_the_file_is_one_line_naming_file_and_key_exit_2(
        home: Path, capsys: pytest.CaptureFixture, line: str, key: str) -> None:
    path = write(home, line + "\n")
    with pytest.raises(SystemExit) as exc:
        _record_parser().parse_args([])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tuimeter: error: ")
    assert str(path) in err and repr(key) in err


def test_a_bad_environment_value_names_the_variable(home: Path, capsys,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUIMETER_INTERVAL", "soon")
    with pytest.raises(SystemExit) as exc:
        _record_parser().parse_args([])
    assert exc.value.code == 2 and "TUIMETER_INTERVAL" in capsys.readouterr().err


def test_an_unknown_key_warns_once(home: Path) -> None:
    """One warning across the parser and the carbon settings reading the same file."""
    path = write(home, 'intervall_s = 2\n')
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _record_parser().parse_args([])
        resolve_carbon(env={}, config_path=path)
        _record_parser().parse_args([])
    [w] = [w for w in seen if issubclass(w.category, config.ConfigWarning)]
    assert "'intervall_s'" in str(w.message) and "'interval_s'" in str(w.message)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG locations")
def test_linux_locations_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tuimeter.measurement import data_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert config.default_config_path() == tmp_path / ".config" / "tuimeter" / "config.toml"
    assert data_dir() == tmp_path / ".local" / "share" / "tuimeter" / "sessions"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "d"))
    assert config.default_config_path() == tmp_path / "c" / "tuimeter" / "config.toml"
    assert data_dir() == tmp_path / "d" / "tuimeter" / "sessions"


# -- save_key: the theme the UI remembers ------------------------------------------------
USER_FILE = """# my settings
interval_s = 0.5   # half a second
theme = "textual-dark"  # what I like

[unknown_table]
theme = "not this one"
"""


def test_save_key_replaces_only_the_theme_value(home: Path) -> None:
    """Every other line, comment and table stays byte for byte; the file's mode too."""
    path = write(home, USER_FILE)
    path.chmod(0o640)
    assert config.save_key("theme", "textual-light") == path
    assert path.read_text() == USER_FILE.replace('"textual-dark"', '"textual-light"', 1)
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary left


@pytest.mark.parametrize("text", ["", "interval_s = 2\n", "interval_s = 2",
                                  "pue = 1.2\n[table]\nx = 1\n"])
def test_save_key_adds_the_key_at_the_top_level(home: Path, text: str) -> None:
    path = write(home, text)
    config.save_key("theme", "nord")
    data = config.tomllib.loads(path.read_text())
    assert data.pop("theme") == "nord"
    assert data == config.tomllib.loads(text)
    assert path.read_text().startswith(text.split("[")[0])


def test_save_key_creates_the_file_and_folder_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "tuimeter" / "config.toml"
    config.save_key("theme", "gruvbox", path)
    assert path.read_text() == 'theme = "gruvbox"\n'
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("planted", ["dangling", "to a file"])
def test_save_key_refuses_a_link_and_leaves_it_alone(home: Path, tmp_path: Path,
                                                     planted: str) -> None:
    """Issue 22 item 2: a link planted at config.toml (dangling: root created its target;
    to a file: that file was rewritten and became root's) is refused in one line; the
    link and what it points at stay as they were, nothing is created."""
    aim = tmp_path / "elsewhere" / "victim.conf"
    aim.parent.mkdir()
    if planted == "to a file":
        aim.write_text("secret = 1\n")
        aim.chmod(0o644)
    link = home / "cfg" / "tuimeter" / "config.toml"
    link.symlink_to(aim)
    with pytest.raises(config.ConfigError, match="symbolic link") as exc:
        config.save_key("theme", "nord")
    assert "\n" not in str(exc.value) and "not saved" in str(exc.value)
    assert os.readlink(link) == str(aim)
    if planted == "to a file":
        assert aim.read_text() == "secret = 1\n" and aim.stat().st_mode & 0o777 == 0o644
    else:
        assert not aim.exists()
    assert sorted(p.name for p in link.parent.iterdir()) == ["config.toml"]


def test_save_key_refuses_a_config_folder_that_is_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "tuimeter").symlink_to(real)
    with pytest.raises(config.ConfigError, match="folder is a symbolic link"):
        config.save_key("theme", "nord", tmp_path / "cfg" / "tuimeter" / "config.toml")
    assert list(real.iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux users")
@pytest.mark.parametrize("whose", ["file", "folder", "folder above a new one"])
def test_save_key_refuses_another_users_config_and_changes_no_owner(tmp_path: Path,
                                                                    other_user: int,
                                                                    whose: str) -> None:
    """Root with another user's config folder (sudo -E): their config.toml, their
    config folder, or their ~/.config where tuimeter's folder does not exist yet, is not
    saved into (it became root's before), one line saying whose it is; every owner,
    mode and byte stays as it was and nothing is created."""
    cfg = tmp_path / "home" / ".config"
    folder = cfg / "tuimeter"
    target = folder / "config.toml"
    cfg.mkdir(parents=True)
    if whose != "folder above a new one":
        folder.mkdir(mode=0o755)
        target.write_text("pue = 1.5\n")
        target.chmod(0o644)
    chowned = {"file": [target], "folder": [folder, target],
               "folder above a new one": [cfg]}[whose]
    for p in chowned:
        os.chown(p, other_user, -1)
    before = {p: (p.stat().st_uid, p.stat().st_mode) for p in cfg.rglob("*")}
    with pytest.raises(config.ConfigError, match=f"uid {other_user}") as exc:
        config.save_key("theme", "nord", target)
    assert "\n" not in str(exc.value) and "not saved" in str(exc.value)
    assert {p: (p.stat().st_uid, p.stat().st_mode) for p in cfg.rglob("*")} == before
    if target.exists():
        assert target.read_text() == "pue = 1.5\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to give the file another group")
def test_save_key_keeps_the_files_group(home: Path) -> None:
    """The file is replaced by a new one: its group is carried over, never changed."""
    path = write(home, "pue = 1.5\n")
    os.chown(path, -1, 4242)
    config.save_key("theme", "nord")
    assert path.stat().st_gid == 4242 and path.stat().st_uid == os.geteuid()
    assert path.read_text() == 'pue = 1.5\ntheme = "nord"\n'


def test_a_line_appended_while_saving_is_kept(home: Path, monkeypatch) -> None:
    """Issue 22 item 3: a save read the file, changed one line and renamed over it: a
    line appended meanwhile (a user's `echo >>`, another program) was lost. The file is
    read again before the rename; the change is taken in and the save done over it."""
    path = write(home, "pue = 1.5\n")
    real = config._write_temp
    appended = []

    def write_temp_while_someone_appends(*args):
        if not appended:
            with open(path, "a") as fh:  # between the save's read and its rename
                fh.write("interval_s = 2\n")
            appended.append(True)
        return real(*args)

    monkeypatch.setattr(config, "_write_temp", write_temp_while_someone_appends)
    config.save_key("theme", "nord")
    assert path.read_text() == 'pue = 1.5\ninterval_s = 2\ntheme = "nord"\n'
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


def test_a_file_that_keeps_changing_is_refused_not_clobbered(home: Path, monkeypatch) -> None:
    path = write(home, "pue = 1.5\n")
    real = config._write_temp
    n = []

    def always(*args):
        n.append(1)
        with open(path, "a") as fh:
            fh.write(f"# edit {len(n)}\n")
        return real(*args)

    monkeypatch.setattr(config, "_write_temp", always)
    fds = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with pytest.raises(config.ConfigError, match="kept changing"):
        config.save_key("theme", "nord")
    if fds is not None:  # every try closed what it opened
        assert sorted(os.listdir("/proc/self/fd")) == fds
    assert path.read_text() == "pue = 1.5\n" + "".join(f"# edit {i}\n" for i in range(1, 6))
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


@pytest.mark.parametrize("text", [
    'theme = """textual-dark\n"""\n',  # a multi-line string the line editor cannot change
    '"theme" = "textual-dark"\n',  # a quoted key: adding one would make it twice
    "interval_s = \n",  # a file that does not parse
])
def test_save_key_leaves_a_file_it_cannot_edit_safely_alone(home: Path, text: str) -> None:
    path = write(home, text)
    with pytest.raises(config.ConfigError, match="not saved") as exc:
        config.save_key("theme", "nord")
    assert "\n" not in str(exc.value)
    assert path.read_text() == text


@pytest.mark.parametrize("key,value", [("interval_s", "1"), ("theme", 'x"\nrm = 1'),
                                       ("theme", "")])
def test_save_key_writes_only_a_plain_theme_name(home: Path, key: str, value: str) -> None:
    path = write(home, "pue = 1.5\n")
    with pytest.raises(config.ConfigError):
        config.save_key(key, value)
    assert path.read_text() == "pue = 1.5\n"
