"""A stand-in for py-spy (``py-spy record --pid PID --duration S ... --format raw -o
FILE``), for the tests of the UI's ``f`` key: :func:`install` writes an executable that
runs :func:`main` with this Python.

Driven by the environment: ``FAKE_PYSPY_FAIL`` (stderr text: exit 1 with it, as py-spy
does when it may not ptrace); ``FAKE_PYSPY_GATE`` (a folder: each run writes
``started-N`` there, then waits until a file ``go`` appears, removes it and writes its
output: the test decides when a chunk ends); ``FAKE_PYSPY_STACKS`` (the raw folded stacks
written, default :data:`STACKS`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

#: a program whose train() was seen 3 times as often as load()
STACKS = ("<module> (/w/train.py:1);train (/w/train.py:10) 3\n"
          "<module> (/w/train.py:1);load (/w/train.py:20) 1\n")


def install(folder: Path) -> str:
    """An executable ``py-spy`` in ``folder`` that runs this fake; its path."""
    exe = folder / "py-spy"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
                   "from tests.fakes.fake_pyspy import main\nsys.exit(main(sys.argv[1:]))\n")
    exe.chmod(0o755)
    return str(exe)


def main(argv: list[str]) -> int:
    if argv[:1] != ["record"] or "-o" not in argv or "--pid" not in argv:
        sys.stderr.write("Error: usage: py-spy record --pid PID -o FILE\n")
        return 2
    fail = os.environ.get("FAKE_PYSPY_FAIL")
    if fail:
        sys.stderr.write(fail + "\n")
        return 1
    gate = os.environ.get("FAKE_PYSPY_GATE")
    if gate:
        folder = Path(gate)
        n = len(list(folder.glob("started-*")))
        (folder / f"started-{n + 1}").write_text(str(os.getpid()))
        go = folder / "go"
        deadline = time.monotonic() + 60
        while not go.exists():
            if time.monotonic() > deadline:
                return 3
            time.sleep(0.01)
        go.unlink()
    out = argv[argv.index("-o") + 1]
    Path(out).write_text(os.environ.get("FAKE_PYSPY_STACKS", STACKS))
    return 0
