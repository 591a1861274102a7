"""Documented calls are tests: every fenced ``python`` block of README.md and docs/**/*.md
runs here, over fake sensors (issue 21).

The collector reads the Markdown itself (files found by glob, so a page moved into docs/
stays tested) and makes one test per block, named by its file and line. A block whose
first line is an IPython magic (``%load_ext``, ``%%tuimeter``) runs as a cell of an
``InteractiveShell`` that has loaded the extension; any other block runs as a script,
statement by statement. A block that cannot run here is marked by an HTML comment on the
line above it, ``<!-- doctest: skip REASON -->``; a skip without a reason fails.

**A silent None fails.** Every value a block prints (``print``'s arguments, a dict's
values, the ``energy_j`` of a phase in a list) and every value of a top-level expression
(what a notebook or a REPL would show) must be a real value: not None (except a call's,
a procedure's result), not NaN, not ``"N/A"``, not an empty or all-NaN pandas object.
IPython cells: their display must not say ``N/A``.

The machine the blocks run on (one per module, in-process): a fake powercap tree
(Intel desktop, package 40 W) through ``$TUIMETER_POWERCAP_ROOT`` and a fake ``pynvml``
with one H200 at 300 W running this process; the session files the examples read
(``run.csv`` with a ``train`` and an ``evaluate`` phase, ``rank0.csv``, ``rank1.csv``),
recorded over it first; then a running session (a ``Meter`` sampling on its own) that
the blocks' markers and meters attach to, as they would to a ``tuimeter record``. Each
block runs in a fresh folder holding copies of the three files.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.fake_pynvml import make_fake_pynvml
from tests.fakes.nvml_record import ClockedGpu
from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, private_env, wait_for
from tests.test_record_faults import ConstantDriver

SKIP = re.compile(r"<!--\s*doctest:\s*skip\b(.*?)-->")
FILES = ("run.csv", "rank0.csv", "rank1.csv")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    skip: str | None  # the reason given, "" when the marker gives none

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def collect(root: Path = ROOT) -> list[Block]:
    """The fenced python blocks of README.md and every docs/**/*.md, in file order."""
    pages = [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]
    blocks = []
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                body = []
                i += 1
                while i < len(lines) and lines[i].strip() != "```":
                    body.append(lines[i])
                    i += 1
                above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
                m = SKIP.search(above)
                blocks.append(Block(page, start + 1, "\n".join(body) + "\n",
                                    m.group(1).strip() if m else None))
            i += 1
    return blocks


BLOCKS = collect()


def test_the_collector_finds_the_documented_examples():
    """The README's and the docs pages' examples are collected (a broken collector must
    not pass as "nothing to run"): the README's own `Meter`, the API page's, the
    notebook page's cell magic; and every skip gives its reason."""
    readme = [b for b in BLOCKS if b.path.name == "README.md"]
    assert any("tuimeter.Meter(" in b.code for b in readme)
    pages = {b.path.relative_to(ROOT).as_posix() for b in BLOCKS}
    assert {"docs/api.md", "docs/work.md", "docs/pandas.md", "docs/notebook.md"} <= pages
    assert any(b.code.startswith("%%tuimeter") for b in BLOCKS
               if b.path.name == "notebook.md")
    assert len(BLOCKS) >= 10
    for b in BLOCKS:
        assert b.skip is None or b.skip, f"{b.id}: a doctest skip needs a reason"


def test_the_collector_reads_skips_and_moved_pages(tmp_path):
    """A page under docs/ (any depth) is read; a skip marker applies to the block below."""
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "README.md").write_text("x\n```python\nprint(1)\n```\n")
    (tmp_path / "docs" / "api" / "meter.md").write_text(
        "<!-- doctest: skip needs a GPU -->\n```python\nprint(2)\n```\n```bash\nls\n```\n")
    got = [(b.path.name, b.line, b.code, b.skip) for b in collect(tmp_path)]
    assert got == [("README.md", 2, "print(1)\n", None),
                   ("meter.md", 2, "print(2)\n", "needs a GPU")]


# -- checking what a block shows --------------------------------------------------------

def is_silent(value) -> bool:
    """Whether a shown value is no real value: None, NaN, "N/A", an empty or all-NaN
    pandas object, or a phase-like object whose ``energy_j`` is one of those."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str) and value.strip() in ("N/A", "nan", "None"):
        return True
    if type(value).__module__.startswith("pandas"):
        if hasattr(value, "isna") and (len(value) == 0 or bool(value.isna().all(axis=None))):
            return True
    if hasattr(value, "energy_j") and not isinstance(value, type):
        return is_silent(value.energy_j)
    return False


def check_shown(value, where: str) -> None:
    items = list(value.values()) if isinstance(value, dict) else (
        list(value) if isinstance(value, list) else [])
    assert not is_silent(value), f"{where} shows {value!r}"
    for item in items:
        assert not is_silent(item), f"{where} shows {value!r}"


def run_script(block: Block) -> None:
    """Run the block's statements in order in one namespace; check each printed value and
    each top-level expression's value."""
    tree = ast.parse(block.code, str(block.path))

    def checked_print(*args, **kwargs):
        for a in args:
            check_shown(a, f"{block.id}: print")
        print(*args, **kwargs)

    ns: dict = {"__name__": "__doc_example__", "print": checked_print}
    for stmt in tree.body:
        where = f"{block.id} (line {block.line + stmt.lineno})"
        if isinstance(stmt, ast.Expr):
            code = compile(ast.Expression(stmt.value), where, "eval")
            value = eval(code, ns)
            if value is None and isinstance(stmt.value, ast.Call):
                continue  # a procedure, e.g. compress()
            check_shown(value, where)
        else:
            exec(compile(ast.Module([stmt], []), where, "exec"), ns)


def run_cells(block: Block, shell) -> None:
    """Run the block as one IPython cell; it must succeed and display no N/A."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = shell.run_cell(block.code)
    assert result.success, f"{block.id}: {result.error_in_exec or result.error_before_exec}"
    shown = cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "N/A" not in shown, f"{block.id} displays: {shown}"
    if block.code.startswith("%%tuimeter"):
        cell = shell.user_ns["_tuimeter"]
        assert not is_silent(cell.energy_j), f"{block.id}: {cell!r}"
    if result.result is not None:
        check_shown(result.result, f"{block.id}: Out")


# -- the machine ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """Fake sensors, the recorded files, and a running session (see the module docstring)."""
    import tuimeter

    base = tmp_path_factory.mktemp("docs")
    with pytest.MonkeyPatch.context() as mp:
        run = base / "run"
        run.mkdir(mode=0o700)
        mp.setenv("XDG_RUNTIME_DIR", str(run))
        mp.delenv("TUIMETER_SESSION", raising=False)
        mp.setenv("IPYTHONDIR", str(base / "ipython"))
        fake = FakePowercap(base / "sys").intel_desktop(psys=False)
        private_env(mp, base, fake.sensor_root)
        mp.setenv("TUIMETER_CARBON_INTENSITY", "300")  # so CO2e is a number too
        pids = base / "pids.txt"
        pids.write_text(f"{os.getpid()}\n")
        mp.setitem(sys.modules, "pynvml", make_fake_pynvml(
            [ClockedGpu(0, 300.0, str(pids), time.monotonic())]))
        driver = ConstantDriver(fake, {"package-0": 40.0, "core": 25.0})
        driver.start()
        files = base / "files"
        files.mkdir()
        try:
            for name in FILES:
                _record(tuimeter, files / name)
            live = tuimeter.Meter(attach=False, interval_s=0.2, label="docs")
            live.start()
            # the replies a block's meters get carry energy from the session's first tick
            wait_for(lambda: live.engine.snapshot is not None
                     and live.engine.snapshot.interval_s > 0, what="the session's first tick")
            try:
                yield files
            finally:
                live.stop()
        finally:
            driver.halt.set()
            driver.join()


def _record(tuimeter, path: Path) -> None:
    """A short own-mode session in ``path``: a train and an evaluate phase, 3 ticks each."""
    with tuimeter.Meter(output=str(path), attach=False, interval_s=0.05, label="train") as m:
        for label in ("evaluate", None):
            seq = m.engine.snapshot.seq if m.engine.snapshot else 0
            while (m.engine.snapshot.seq if m.engine.snapshot else 0) < seq + 3:
                sum(i * i for i in range(2000))
            if label:
                m.mark(label)


@pytest.fixture(scope="module")
def shell(machine):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tuimeter")
    return sh


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_documented_example_runs(block: Block, machine, tmp_path, monkeypatch, request):
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    for name in FILES:
        shutil.copy(machine / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    if block.code.lstrip().startswith("%"):
        run_cells(block, request.getfixturevalue("shell"))
    else:
        run_script(block)
