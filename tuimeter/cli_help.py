"""The command line's words: the subcommands, each one's examples (the ``--help``
epilog) and the formatter that keeps them as written. Light on purpose: the parsers
and ``--help`` use it, and ``--help`` imports neither the UI nor the measurement stack.
"""

from __future__ import annotations

import argparse
import difflib

#: the subcommands, each with its one line for ``tuimeter --help``
SUBCOMMANDS = {
    "record": "record headless to a session CSV (batch jobs, SSH)",
    "mark": "add a phase marker to every running session of yours",
    "count": "count work done (samples=64 tokens=32768) in running sessions",
    "report": "energy per phase (between markers) of session CSVs",
    "profile": "energy per Python function of a program (-- python SCRIPT)",
    "doctor": "list the sensors tuimeter finds, what is wrong and the fix",
    "baseline": "measure each domain's idle power (for idle/dynamic splits)",
    "cluster": "many nodes live, or recorded, from the Prometheus that scrapes them",
    "completion": "print a shell completion script (bash, zsh or fish)",
    "sessions": "list the live view's recorded sessions; prune the oldest",
}
#: accepted, not listed
ALIASES = {"check": "doctor"}

EXAMPLES = {
    "tuimeter": """\
examples:
  tuimeter                          live view of this machine
  tuimeter -o run.csv -- make -j8   follow a command, save the session
  tuimeter --pid 4242               follow a running process and its children
  tuimeter --replay run.csv         replay a recorded session""",
    "record": """\
examples:
  tuimeter record -o run.csv -- python train.py
  tuimeter record -o node.csv --rotate daily --prometheus 9101
  tuimeter record -o run.csv --pid 4242 --duration 600 -q
  tuimeter record -o run.csv --carbon-source uk-carbon-intensity --carbon-zone RG10 -- make""",
    "mark": """\
examples:
  tuimeter mark epoch 1
  tuimeter mark --session 12345 evaluation""",
    "count": """\
examples:
  tuimeter count samples=64 tokens=32768
  tuimeter count --session run.csv steps=1""",
    "report": """\
examples:
  tuimeter report run.csv
  tuimeter report --format json node-*.csv
  tuimeter report --plot run.csv
  tuimeter report --by cgroup run.csv
  tuimeter report --per samples --per tokens run.csv""",
    "profile": """\
examples:
  tuimeter profile -- python train.py --epochs 3
  tuimeter profile -o prof.json --collapsed prof.folded -- python -m mypkg.cli
  tuimeter profile --pid 4242 --duration 30      (needs py-spy: tuimeter[profile])""",
    "doctor": """\
examples:
  tuimeter doctor
  tuimeter doctor --json > sensors.json""",
    "baseline": """\
examples:
  tuimeter baseline                 20 s on an idle machine
  tuimeter baseline --seconds 60 --no-gpu""",
    "cluster": """\
examples:
  tuimeter cluster --prometheus-url http://prom:9090 --selector job=exp1
  tuimeter cluster --prometheus-url http://prom:9090 --slurm-job 4242
  tuimeter cluster --prometheus-url http://prom:9090 --headless -o cluster.csv --duration 600""",
    "sessions": """\
examples:
  tuimeter sessions                 what the data folder holds, oldest first
  tuimeter sessions prune --keep 10 --max-mb 100
  tuimeter sessions prune --dry-run""",
    "completion": """\
examples:
  tuimeter completion bash > ~/.local/share/bash-completion/completions/tuimeter
  tuimeter completion zsh > ~/.zfunc/_tuimeter
  tuimeter completion fish > ~/.config/fish/completions/tuimeter.fish""",
}

EXIT_CODES = """\
exit status: 0 success (with -- CMD: the command's own status),
  1 a failure while recording, 2 bad input (a one-line error)"""


class Formatter(argparse.HelpFormatter):
    """Wraps one-paragraph text (descriptions) as argparse does; text with line breaks
    (examples, lists) is kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def help_text(command: str) -> dict:
    """``epilog`` and ``formatter_class`` for the parser of ``command`` (a key of
    :data:`EXAMPLES`)."""
    return {"epilog": EXAMPLES[command], "formatter_class": Formatter}


def unknown_command(word: str) -> str:
    """The one-line error for a first argument that is no subcommand."""
    close = difflib.get_close_matches(word, list(SUBCOMMANDS), n=1)
    if close:
        return f"unknown command {word!r}: did you mean `{close[0]}`?"
    return (f"unknown command {word!r} (commands: {', '.join(SUBCOMMANDS)}; "
            f"to run a program: tuimeter -- {word} ...)")
