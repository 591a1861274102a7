"""The command line's help and usage: ``--help`` imports neither the UI nor the
measurement stack (it must start fast), mistyped subcommands, usage and examples."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: what a --help must not import (the UI, and what only a measurement needs)
HEAVY = ("textual", "rich", "plotext", "psutil", "pandas", "prometheus_client", "http",
         "tuimeter.measurement", "tuimeter.engine", "tuimeter.tui.app")

_PROBE = """
import json, sys
from tuimeter.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
heavy = json.loads(sys.argv[2])
print(json.dumps(sorted(m for m in sys.modules
                        if m in heavy or m.split('.')[0] in heavy)))
"""


@pytest.mark.parametrize("command", [[], ["record"], ["mark"], ["report"], ["doctor"],
                                     ["profile"]])
def test_help_imports_no_ui_nor_measurement_stack(command):
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(command + ["--help"]),
                          json.dumps(HEAVY)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert "usage:" in "\n".join(out[:-1])  # the help itself was printed
    assert json.loads(out[-1]) == []


def _run(*argv):
    return subprocess.run([sys.executable, "-m", "tuimeter", *argv], capture_output=True,
                          text=True, timeout=60)


def test_mistyped_subcommand_gets_one_line_and_exit_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "tuimeter", "recrod", "-o", "x.csv"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("tuimeter: error: unknown command 'recrod': "
                          "did you mean `record`?\n")
    assert list(tmp_path.iterdir()) == []  # nothing created, the UI never started


def test_unknown_word_without_a_close_command_says_how_to_run_a_program():
    res = _run("xyzzy")
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1
    assert "tuimeter -- xyzzy" in res.stderr


def test_a_word_after_double_dash_is_the_command_not_a_mistyped_subcommand():
    from tuimeter.cli import main
    from tuimeter.tui import run

    # parsed as the UI's `-- CMD` (the check refuses a command that does not exist)
    session, problem = run.build(["--", "recrod"], start_engine=False)
    assert session is None and problem == "command not found: recrod"
    with pytest.raises(SystemExit) as exc:  # an option first: argparse's one-line error
        main(["-i", "1", "recrod"])
    assert exc.value.code == 2


def test_check_alias_still_runs_doctor():
    assert "tuimeter doctor" in _run("check", "--help").stdout


def test_top_level_help_shows_usage_with_command_subcommands_version_examples():
    out = _run("--help").stdout
    usage = out.split("\n\n")[0]
    assert "-- CMD" in usage
    for name in ("record", "mark", "report", "doctor"):
        assert name in usage
    assert "--version" in out
    assert "examples:" in out and "exit status:" in out
    assert _run("--version").stdout.startswith("tuimeter ")
    assert _run("-V").stdout == _run("--version").stdout


@pytest.mark.parametrize("command", ["record", "mark", "report", "doctor", "profile"])
def test_each_subcommand_help_has_examples(command):
    out = _run(command, "--help").stdout
    examples = out.split("examples:\n", 1)[1]
    assert all(line.strip().startswith(f"tuimeter {command}")
               for line in examples.splitlines() if line.strip())


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_names_every_subcommand_and_option(shell):
    from tuimeter.cli_help import SUBCOMMANDS
    from tuimeter.tui.run import parser

    res = _run("completion", shell)
    assert res.returncode == 0, res.stderr
    for name in SUBCOMMANDS:
        assert name in res.stdout
    for option in ("--rotate", "--replay", "--format", "--json", "--timeout"):
        assert option.lstrip("-") in res.stdout  # record, UI, report, doctor, mark
    ui_options = [s for a in parser()._actions for s in a.option_strings]
    assert all(s.lstrip("-") in res.stdout for s in ui_options)


def test_bash_completion_parses_and_completes(tmp_path):
    script = tmp_path / "tuimeter.bash"
    script.write_text(_run("completion", "bash").stdout)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0

    def complete(*words):
        line = " ".join(words)
        probe = (f'source "{script}"; COMP_WORDS=(tuimeter {line}); '
                 f'COMP_CWORD={len(words)}; _tuimeter; echo "${{COMPREPLY[*]}}"')
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                              timeout=30).stdout.split()

    assert complete("rec") == ["record"]
    assert "--rotate" in complete("record", "--ro")
    assert complete("--rep") == ["--replay"]  # the UI's options without a subcommand
    assert complete("completion", "z") == ["zsh"]
    assert complete("--", "make", "--ro") == []  # the followed command's arguments


def test_completion_needs_a_known_shell():
    res = _run("completion", "tcsh")
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1


_PARSERS_PROBE = """
import contextlib, io, json, sys
import tuimeter.cli
from tuimeter.tui.run import parser
parser()  # the top-level parser (the UI's options)
with contextlib.redirect_stdout(io.StringIO()):
    tuimeter.cli.main(["completion", "bash"])  # builds every command's parser, runs none
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
                        ("textual", "plotext", "textual_plotext", "rich")
                        or m in ("tuimeter.tui.app", "tuimeter.tui.main_screen"))))
"""


def test_building_every_parser_imports_no_ui():
    """`import tuimeter.cli` and building the top-level, record, mark, report and doctor
    parsers loads neither Textual nor plotext (they cost most of a --help's 0.7 s)."""
    res = subprocess.run([sys.executable, "-c", _PARSERS_PROBE], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == []
