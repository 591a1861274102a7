"""The command line's help and usage: ``--help`` imports neither the UI nor the
measurement stack (it must start fast), mistyped subcommands, usage and examples."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: what a --help must not import (the UI, and what only a measurement needs)
HEAVY = ("textual", "rich", "plotext", "psutil", "pandas", "prometheus_client")

_PROBE = """
import json, sys
from tuimeter.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
heavy = json.loads(sys.argv[2])
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))
"""


@pytest.mark.parametrize("command", [[], ["record"], ["mark"], ["report"], ["doctor"]])
def test_help_imports_no_ui_nor_measurement_stack(command):
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(command + ["--help"]),
                          json.dumps(HEAVY)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert "usage:" in "\n".join(out[:-1])  # the help itself was printed
    assert json.loads(out[-1]) == []
