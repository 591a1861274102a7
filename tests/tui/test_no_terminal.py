"""Without a terminal the live view refuses in one line (exit 2) and points to `tuimeter
record`: before, it started anyway and wrote its escape codes into the file that stdout
(or stderr) went to, or waited for keys from /dev/null."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tuimeter.tui.run import parser, terminal_problem

from .conftest import DEMO, ROOT


def _tuimeter(*argv, stdin, stdout, stderr=subprocess.PIPE):
    return subprocess.run([sys.executable, "-m", "tuimeter", *argv], stdin=stdin,
                          stdout=stdout, stderr=stderr, cwd=ROOT, timeout=60)


def test_stdout_to_a_file_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "wb") as fh:
        res = _tuimeter("-o", str(tmp_path / "s.csv"), "--no-gpu", stdin=subprocess.DEVNULL,
                        stdout=fh)
    assert res.returncode == 2
    err = res.stderr.decode()
    assert len(err.splitlines()) == 1 and err.startswith("tuimeter: error: ")
    assert "needs a terminal" in err and "`tuimeter record`" in err
    assert out.read_bytes() == b""  # no escape code in the file
    assert not (tmp_path / "s.csv").exists()  # nothing created


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
def test_only_stdout_redirected_is_named_and_a_replay_points_to_report(tmp_path):
    """Keys and stderr on a terminal, stdout into a file: refused, naming stdout; a
    replay points to `tuimeter report`, which needs no terminal."""
    master, slave = pty.openpty()
    out = tmp_path / "out.txt"
    try:
        with open(out, "wb") as fh:
            res = _tuimeter("--replay", str(DEMO), stdin=slave, stdout=fh, stderr=slave)
        err = os.read(master, 65536).decode()  # what the terminal was sent
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 2
    assert "stdout is not one" in err and "`tuimeter report FILE`" in err
    assert out.read_bytes() == b""


def test_help_and_version_need_no_terminal(tmp_path):
    with open(tmp_path / "help.txt", "wb") as fh:
        assert _tuimeter("--help", stdin=subprocess.DEVNULL, stdout=fh).returncode == 0
    assert b"usage:" in (tmp_path / "help.txt").read_bytes()


def test_terminal_problem_names_what_is_missing():
    args = parser().parse_args([])
    assert terminal_problem(args, lambda fd: True) is None
    assert "stdin and stderr are not" in terminal_problem(args, lambda fd: fd == 1)
