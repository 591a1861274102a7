"""Mutation run: plant single-token bugs, one at a time, and see which the tests catch.

Prints figures (not a test). For each module asked, every mutable token of its code (not
its docstrings or comments) gives mutants of these kinds:

* ``cmp``: a comparison flipped or moved off its boundary (``<`` -> ``>=``, ``<=``;
  ``==`` <-> ``!=``; ``is`` <-> ``is not``; ``in`` <-> ``not in``);
* ``const``: a number x10, /2, +1 and -1 (a limit, a divisor, an index off by one);
* ``bool``: ``and`` <-> ``or``, ``True`` <-> ``False``, ``not`` removed;
* ``arith``: ``+`` <-> ``-``, ``*`` <-> ``/``, ``max`` <-> ``min``;
* ``return``: ``return X`` -> ``return None``.

Each mutant is written into a **copy** of the checkout (under a temporary folder, removed
at the end), where the module's test files run with
``pytest -x`` under a per-mutant timeout; the checkout itself is never written. A mutant is
*killed* when the tests fail (or time out: a hang is caught too), *survived* when they
pass. The survivors are printed with their line so a test can be added, or the mutant
shown equivalent.

    python bench/mutation.py                       # every module, every mutant
    python bench/mutation.py -m sensors/base.py --max 40 --timeout 60
    python bench/mutation.py -m phases.py --tests tests/test_phases.py
    python bench/mutation.py --root /tmp/old-checkout   # the same run on another tree
    python bench/mutation.py --list                # the modules and their test files

``--max N`` takes N mutants per module, evenly spread over its list (the kill rate is then
a sample's); ``--budget S`` stops starting mutants after S seconds per module and reports
those run; ``--kinds cmp,const`` keeps some kinds. The machine is shared: one pytest at a
time, test files chosen per module (the fast ones, no servers, no terminals).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module (under tuimeter/) -> the test files that guard it (fast, hardware fakes only)
MODULES: dict[str, tuple[str, ...]] = {
    "sensors/base.py": ("tests/test_counter_tracker.py", "tests/test_rapl_faults.py",
                        "tests/test_engine.py"),
    "phases.py": ("tests/test_phases.py", "tests/test_report.py", "tests/test_report_spill.py"),
    "session/spill.py": ("tests/test_report_spill.py",),
    "session/schema.py": ("tests/test_schema.py", "tests/test_reader.py",
                          "tests/test_csvfile.py"),
    "points.py": ("tests/test_export_points.py", "tests/test_session_points.py"),
    "engine/attribution.py": ("tests/test_attribution.py", "tests/test_owners.py",
                              "tests/test_gh200.py"),
    "engine/sampler.py": ("tests/test_engine.py", "tests/test_rapl_faults.py",
                          "tests/test_csvfile.py", "tests/test_owners.py",
                          "tests/test_device_info.py"),
    "engine/node.py": ("tests/test_node_power.py", "tests/test_pm_counters.py"),
    "sensors/node_poller.py": ("tests/test_ipmi.py", "tests/test_redfish.py"),
    "profile/sampler.py": ("tests/test_profile.py", "tests/test_profile_cli.py",
                           "tests/test_profile_api.py"),
}

_CMP = {"<": ("<=", ">="), "<=": ("<", ">"), ">": (">=", "<="), ">=": (">", "<"),
        "==": ("!=",), "!=": ("==",)}
_ARITH = {"+": ("-",), "-": ("+",), "*": ("/",), "/": ("*",), "//": ("*",)}
_NAMES = {"and": ("or",), "or": ("and",), "True": ("False",), "False": ("True",),
          "max": ("min",), "min": ("max",)}


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based
    start: int  # offsets in the line
    end: int
    new: str
    kind: str

    def apply(self, lines: list[str]) -> list[str]:
        out = list(lines)
        text = out[self.line - 1]
        out[self.line - 1] = text[:self.start] + self.new + text[self.end:]
        return out

    def describe(self, lines: list[str]) -> str:
        old = lines[self.line - 1][self.start:self.end]
        return f"{self.kind}: {old!r} -> {self.new!r}"


def _numbers(text: str) -> list[str]:
    """The number mutants of a literal: x10, /2, +1, -1 (distinct, parsable)."""
    try:
        value = int(text, 0) if text.isdigit() or text.lower().startswith("0x") else float(text)
    except ValueError:
        return []
    if isinstance(value, int):
        cands = [value * 10, value // 2, value + 1, value - 1]
        return [str(c) for c in dict.fromkeys(cands) if c != value and c >= 0]
    cands = [value * 10, value / 2, value + 1, value - 1]
    return [repr(c) for c in dict.fromkeys(cands) if c != value]


def mutants(source: str) -> list[Mutant]:
    """Every single-token mutant of ``source``'s code (docstrings, comments and
    annotations' ``|`` untouched)."""
    out: list[Mutant] = []
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines()
    for i, tok in enumerate(toks):
        (row, col), (_, ecol) = tok.start, tok.end
        if row <= len(lines) and lines[row - 1].lstrip().startswith("@"):
            continue  # a decorator (frozen=True ...): not behaviour the tests pin
        prev = toks[i - 1] if i else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if tok.type == tokenize.OP and tok.string in _CMP:
            out += [Mutant(row, col, ecol, n, "cmp") for n in _CMP[tok.string]]
        elif tok.type == tokenize.OP and tok.string in _ARITH:
            if prev is not None and prev.type == tokenize.OP and prev.string in "(,=[:":
                continue  # a sign or a star-arg, not arithmetic
            out += [Mutant(row, col, ecol, n, "arith") for n in _ARITH[tok.string]]
        elif tok.type == tokenize.NUMBER:
            out += [Mutant(row, col, ecol, n, "const") for n in _numbers(tok.string)]
        elif tok.type == tokenize.NAME and tok.string in _NAMES:
            kind = "arith" if tok.string in ("max", "min") else "bool"
            out += [Mutant(row, col, ecol, n, kind) for n in _NAMES[tok.string]]
        elif tok.type == tokenize.NAME and tok.string == "not" and not (
                prev is not None and prev.string in ("is",)) and not (
                nxt is not None and nxt.string == "in"):
            out.append(Mutant(row, col, ecol + 1, "", "bool"))  # "not x" -> "x"
        elif tok.type == tokenize.NAME and tok.string == "is":
            if nxt is not None and nxt.string == "not":
                out.append(Mutant(row, col, nxt.end[1], "is", "cmp"))
            else:
                out.append(Mutant(row, col, ecol, "is not", "cmp"))
        elif tok.type == tokenize.NAME and tok.string == "in" and prev is not None and (
                prev.type != tokenize.NAME or prev.string not in ("for", "not")):
            if not _in_for(toks, i):
                out.append(Mutant(row, col, ecol, "not in", "cmp"))
        elif tok.type == tokenize.NAME and tok.string == "return" and nxt is not None and (
                nxt.type not in (tokenize.NEWLINE, tokenize.COMMENT)
                and nxt.string != "None" and nxt.start[0] == row):
            end = _line_end(toks, i)
            if end is not None:
                out.append(Mutant(row, nxt.start[1], end, "None", "return"))
    return out


def _in_for(toks, i: int) -> bool:
    """Whether the ``in`` at ``i`` belongs to a ``for`` (a loop or a comprehension)."""
    depth = 0
    for tok in reversed(toks[:i]):
        if tok.type == tokenize.OP and tok.string in ")]}":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in "([{":
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0 and tok.type == tokenize.NAME and tok.string == "for":
            return True
        elif tok.type in (tokenize.NEWLINE,):
            return False
    return False


def _line_end(toks, i: int) -> int | None:
    """End column of a one-line ``return`` expression starting after token ``i``."""
    row = toks[i].start[0]
    end = None
    for tok in toks[i + 1:]:
        if tok.type in (tokenize.NEWLINE, tokenize.COMMENT):
            break
        if tok.start[0] != row:
            return None  # a return over several lines: left alone
        end = tok.end[1]
    return end


def spread(items: list, n: int | None) -> list:
    """At most ``n`` items, evenly spread over the list (all when ``n`` is None)."""
    if n is None or n >= len(items):
        return items
    step = len(items) / n
    return [items[int(k * step)] for k in range(n)]


def copy_tree(src: Path, dst: Path) -> None:
    """The checkout's files (not .git, the virtual environment or caches) under ``dst``."""
    shutil.copytree(src, dst, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc",
                                                  "*.egg-info", "build", "dist"))


#: third-party modules the tests import, loaded once in this process so that each forked
#: run starts warm (never ``tuimeter``: each run imports the mutated copy afresh)
WARM = ("pytest", "numpy", "pandas", "psutil", "prometheus_client", "hypothesis")


def warm_up() -> None:
    for name in WARM:
        try:
            __import__(name)
        except ImportError:
            pass
    assert "tuimeter" not in sys.modules


def run_tests(work: Path, tests: list[str], timeout_s: float) -> str:
    """'killed', 'survived' or 'timeout' (a timeout kills the mutant too). The tests run in
    a forked child of this (warm) process, in the copy, so a run costs its tests only."""
    pid = os.fork()
    if pid == 0:  # the child: run pytest in the copy and exit with its status
        try:
            os.chdir(work)
            sys.path.insert(0, str(work))
            os.environ["PYTHONPATH"] = str(work)
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            sys.dont_write_bytecode = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.setsid()  # its own group: a timeout ends the tests' children too
            import pytest
            rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--no-header", *tests])
        except BaseException:
            rc = 99
        os._exit(int(rc))
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
            if time.monotonic() > deadline:
                _end(pid)
                return "timeout"
            time.sleep(0.02)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): the tests' group goes too
        _end(pid)
        raise


def _end(pid: int) -> None:
    """End a forked test run and its children (its own process group), and reap it."""
    try:
        os.killpg(pid, 9)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--module", action="append", choices=sorted(MODULES),
                    help="module under tuimeter/ (repeatable; default: all)")
    ap.add_argument("--max", type=int, default=None, help="mutants per module at most")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per mutant")
    ap.add_argument("--tests", action="append", help="test files instead of the module's")
    ap.add_argument("--kinds", default="", help="comma-separated kinds to keep")
    ap.add_argument("--lines", default="", help="only mutants on lines A-B of the module")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to mutate (a copy)")
    ap.add_argument("--list", action="store_true", help="list modules and tests, then stop")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds per module: start no mutant after them, report what ran")
    args = ap.parse_args(argv)
    # a SIGTERM (timeout, a CI cancel) unwinds like Ctrl-C: the copy is removed and the
    # running tests ended
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.list:
        for mod, tests in MODULES.items():
            print(f"{mod}: {' '.join(tests)}")
        return 0
    kinds = {k for k in args.kinds.split(",") if k}
    warm_up()
    lo, _, hi = args.lines.partition("-")
    summary = []
    with tempfile.TemporaryDirectory(prefix="tuimeter-mutation-") as tmp:
        work = Path(tmp)
        copy_tree(args.root, work)
        for mod in args.module or list(MODULES):
            tests = [t for t in (args.tests or MODULES[mod]) if (work / t).exists()]
            target = work / "tuimeter" / mod
            original = target.read_text()
            lines = original.splitlines(keepends=True)
            found = [m for m in mutants(original) if (not kinds or m.kind in kinds)
                     and (not lo or int(lo) <= m.line <= int(hi or lo))]
            chosen = spread(found, args.max)
            baseline = run_tests(work, tests, args.timeout)
            if baseline != "survived":
                print(f"{mod}: the tests fail without a mutant ({baseline}); skipped")
                continue
            killed, survivors = 0, []
            print(f"{mod}: {len(chosen)} of {len(found)} mutants", flush=True)
            t0 = time.monotonic()
            n = 0
            try:
                for m in chosen:
                    if args.budget is not None and time.monotonic() - t0 > args.budget:
                        print(f"  budget of {args.budget:g} s spent: {n} of {len(chosen)} "
                              f"mutants run", flush=True)
                        break
                    n += 1
                    target.write_text("".join(m.apply(lines)))
                    result = run_tests(work, tests, args.timeout)
                    if result == "survived":
                        survivors.append(m)
                        print(f"  survived line {m.line}: {m.describe(lines)}: "
                              f"{lines[m.line - 1].strip()}", flush=True)
                    else:
                        killed += 1
            finally:
                target.write_text(original)
            rate = 100.0 * killed / n if n else 100.0
            summary.append((mod, killed, n, len(found), rate, time.monotonic() - t0))
            print(f"{mod}: killed {killed} of {n} ({rate:.1f}%), {len(found)} mutants found, "
                  f"{len(survivors)} survived (above), tests {' '.join(tests)}", flush=True)
    print("\nmodule                      killed   run  found   rate   seconds")
    for mod, killed, n, found, rate, secs in summary:
        print(f"{mod:26s} {killed:7d} {n:5d} {found:6d} {rate:6.1f}% {secs:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
