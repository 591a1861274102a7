"""The UI's data folder keeps the newest sessions within bounds (session/retention.py),
removing only session files tuimeter made there; `--no-record` makes none."""

from __future__ import annotations

import os

import pytest

from tuimeter.session import retention
from tuimeter.session.retention import HEADER, KEEP_SESSIONS, prune
from tuimeter.tui.run import build

ROW = HEADER + b"energy_j\n"


def fill(folder, n: int, size: int = 0, first: int = 0) -> list[str]:
    """``n`` old sessions, one a day, oldest first; each ``size`` bytes or a header."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(first, first + n):
        name = f"session-2025{1 + i // 28:02d}{1 + i % 28:02d}-120000.csv"
        (folder / name).write_bytes(ROW + b"x" * max(0, size - len(ROW)))
        names.append(name)
    return names


def test_the_oldest_of_our_sessions_go_and_nothing_else(tmp_path):
    folder = tmp_path / "sessions"
    names = fill(folder, KEEP_SESSIONS + 5)
    (folder / (names[0][:-4] + ".log")).write_text("the command's output\n")
    outside = tmp_path / "precious.csv"
    outside.write_bytes(ROW)
    os.symlink(outside, folder / "session-20200101-000000.csv")  # oldest name, a link
    (folder / "session-20200102-000000.csv").write_text("not tuimeter's\n")
    (folder / "notes.csv").write_bytes(ROW)
    current = folder / "session-20991231-235959.csv"
    current.write_bytes(ROW)
    done = prune(str(folder), str(current))
    assert done.removed == names[:6]  # 56 of ours (the current one counts): 6 go
    left = set(os.listdir(folder))
    assert set(names[6:]) <= left and current.name in left
    assert names[0][:-4] + ".log" not in left  # its command's log went with it
    assert {"session-20200101-000000.csv", "session-20200102-000000.csv",
            "notes.csv"} <= left
    assert outside.read_bytes() == ROW


def test_the_byte_bound(tmp_path):
    folder = tmp_path / "sessions"
    names = fill(folder, 6, size=1000)
    done = prune(str(folder), None, keep=50, keep_bytes=3500)
    assert done.removed == names[:3] and done.freed_bytes == 3000


def test_a_linked_data_folder_is_left_alone(tmp_path):
    real = tmp_path / "elsewhere"
    fill(real, 60)
    os.symlink(real, tmp_path / "sessions")
    assert prune(str(tmp_path / "sessions"), None).removed == []
    assert len(os.listdir(real)) == 60


def _data(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    return tmp_path / "data" / "tuimeter" / "sessions"


def test_a_ui_launch_prunes_its_data_folder_and_says_so(tmp_path, monkeypatch, capsys):
    """`tuimeter` with 52 old sessions in the data folder: its new one is the 53rd, the 3
    oldest go, and the last lines say so."""
    folder = _data(tmp_path, monkeypatch)
    names = fill(folder, KEEP_SESSIONS + 2)
    session, problem = build(["--no-socket", "--no-gpu"], start_engine=False)
    assert problem is None
    assert session.close() == 0
    left = sorted(os.listdir(folder))
    assert len(left) == KEEP_SESSIONS and session.recorder.path.endswith(left[-1])
    assert not set(names[:3]) & set(left)
    assert f"removed the 3 oldest sessions" in capsys.readouterr().err


def test_a_session_named_with_o_prunes_nothing(tmp_path, monkeypatch):
    folder = _data(tmp_path, monkeypatch)
    fill(folder, KEEP_SESSIONS + 2)
    session, problem = build(["--no-socket", "--no-gpu", "-o", str(folder / "mine.csv")],
                             start_engine=False)
    assert problem is None
    session.close()
    assert len(os.listdir(folder)) == KEEP_SESSIONS + 3


def test_no_record_writes_no_file(tmp_path, monkeypatch, capsys):
    folder = _data(tmp_path, monkeypatch)
    session, problem = build(["--no-socket", "--no-gpu", "--no-record"], start_engine=False)
    assert problem is None and session.recorder is None
    session.app.engine.tick()
    assert session.close() == 0
    assert not folder.exists() or os.listdir(folder) == []
    assert "not recorded (--no-record)" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["-o", "x.csv"], ["--", "true"]])
def test_no_record_with_a_file_or_a_command_is_bad_input(tmp_path, monkeypatch, extra):
    _data(tmp_path, monkeypatch)
    session, problem = build(["--no-socket", "--no-gpu", "--no-record", *extra],
                             start_engine=False)
    assert session is None and problem.startswith("--no-record") and "\n" not in problem
