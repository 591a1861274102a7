"""``tuimeter profile``: energy per Python function.

``tuimeter profile [options] -- python SCRIPT ARGS`` (or ``-- python -m MODULE ARGS``, or
``-- SCRIPT.py ARGS``) runs the program under the in-process sampler (:mod:`.sampler`,
started by path with the program's own interpreter) while tuimeter's engine follows it,
then spreads the energy attributed to it over the sampled stacks (:mod:`.spread`).
``tuimeter profile --pid PID --duration S`` samples a running program from outside with
py-spy instead (:mod:`.pyspy`).

Bad input is one line and exit status 2, before anything is created. The exit status is
otherwise the program's own (``--pid``: 0, or 1 when something failed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Callable

from ..cli_help import help_text
from ..options import (Parser, fail, interval, pid, positive_float, say, split_command)

if TYPE_CHECKING:
    from ..session.files import NewFile
    from .run import ProfileOptions
    from .result import Profile

USAGE = ("tuimeter profile [-o PROFILE.json] [--rate HZ] [--collapsed FILE] "
         "[--speedscope FILE] [--session-output CSV] [-i S] "
         "(-- python SCRIPT ARGS... | -- python -m MODULE ARGS... | --pid PID --duration S)")
MAX_RATE_HZ = 10000.0
#: an interpreter's name: python, python3, python3.12, pypy3, python3.13t ...
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*[a-z]?(\.exe)?$")
#: interpreter options that take a value (the rest are flags)
_VALUE_OPTIONS = {"-W", "-X", "--check-hash-based-pycs"}


def rate(text: str) -> float:
    value = positive_float(text)
    if value > MAX_RATE_HZ:
        raise argparse.ArgumentTypeError(f"at most {MAX_RATE_HZ:g} Hz, got {text}")
    return value


def parser() -> Parser:
    p = Parser(prog="tuimeter profile", usage=USAGE,
               description="Energy per Python function: samples the program's stacks (all "
                           "threads) and spreads the energy tuimeter attributes to the "
                           "process over them, by each thread's CPU time. Prints the top "
                           "functions; exits with the program's status.",
               **help_text("profile"))
    p.add_argument("-o", "--output", metavar="PROFILE.json",
                   help="write the profile as JSON (functions, phases, provenance)")
    p.add_argument("--rate", type=rate, default=100.0, metavar="HZ",
                   help="samples per second (default 100)")
    p.add_argument("--collapsed", metavar="FILE",
                   help="write folded stacks weighted by millijoules (flamegraph.pl, inferno)")
    p.add_argument("--speedscope", metavar="FILE",
                   help="write a speedscope profile weighted by energy (mJ)")
    p.add_argument("--session-output", metavar="CSV",
                   help="also write the session CSV, as `tuimeter record -o` does")
    p.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    p.add_argument("-i", "--interval", type=interval, default=None, metavar="S",
                   help="seconds between engine ticks (default 1)")
    p.add_argument("--pid", type=pid, metavar="PID",
                   help="profile a running Python process with py-spy (needs --duration)")
    p.add_argument("--duration", type=positive_float, metavar="S",
                   help="with --pid: how long to sample")
    p.add_argument("--top", type=int, default=20, metavar="N",
                   help="functions in the table (default 20)")
    p.add_argument("--ui", action="store_true",
                   help="show the live view with a panel of the top functions")
    p.add_argument("--powercap-root", metavar="DIR",
                   help="powercap folder (default /sys/class/powercap, or $TUIMETER_POWERCAP_ROOT)")
    p.add_argument("--no-gpu", action="store_true", default=None,
                   help="do not use the GPU sensors")
    p.add_argument("-q", "--quiet", action="store_true", help="no table on stdout")
    p.set_defaults(country=None, carbon_intensity=None, pue=None, no_attribution=None,
                   no_socket=False, carbon_source=None, carbon_zone=None)
    return p


def child_command(command: list[str], samples_path: str, rate_hz: float) -> list[str]:
    """The command that runs ``command`` (``python [OPTIONS] SCRIPT|-m MODULE ARGS`` or
    ``SCRIPT.py ARGS``) under the sampler. ValueError (one line) when it is no Python
    program tuimeter can start that way."""
    from . import boot as entry

    boot = [os.path.abspath(entry.__file__), "--out", samples_path, "--rate", repr(rate_hz),
            "--"]
    first = command[0]
    if first.endswith(".py") and not _PYTHON.match(os.path.basename(first)):
        return [sys.executable, *boot, *command]
    if not _PYTHON.match(os.path.basename(first)):
        raise ValueError(f"profile runs Python programs: -- python SCRIPT ARGS, "
                         f"-- python -m MODULE ARGS or -- SCRIPT.py ARGS (got {first!r})")
    i = 1
    options: list[str] = []
    while i < len(command) and command[i].startswith("-") and command[i] != "-":
        opt = command[i]
        if opt == "-m":
            if i + 1 >= len(command):
                raise ValueError("-m needs a module name")
            return [first, *options, *boot, "-m", *command[i + 1:]]
        if opt == "-c" or opt.startswith("-c"):
            raise ValueError("profile runs a script or -m MODULE, not -c CODE "
                             "(put the code in a file)")
        if opt == "--":
            i += 1
            break
        options.append(opt)
        if opt in _VALUE_OPTIONS and i + 1 < len(command):
            options.append(command[i + 1])
            i += 1
        i += 1
    if i >= len(command) or command[i] == "-":
        raise ValueError(f"nothing to profile: {first} needs a script or -m MODULE")
    return [first, *options, *boot, *command[i:]]


def _usage_problem(args: argparse.Namespace, command: list[str] | None) -> str | None:
    if args.top < 1:
        return "--top must be at least 1"
    if args.pid is not None:
        if command:
            return "use either --pid or -- python SCRIPT, not both"
        if args.duration is None:
            return "--pid needs --duration S (how long to sample)"
        if args.ui:
            return "--ui follows a program it starts: use -- python SCRIPT"
        return None
    if args.duration is not None:
        return "--duration goes with --pid (a program run with -- ends when it ends)"
    if command is None:
        return "profile needs -- python SCRIPT ARGS (or --pid PID --duration S)"
    if not command:
        return "-- must be followed by a command to run"
    first = command[0]
    if shutil.which(first) is None and not os.path.exists(first):
        return f"command not found: {first}"
    try:
        target = child_command(command, "-", 1.0)
    except ValueError as exc:
        return str(exc)
    script = target[target.index("--") + 1]
    if script != "-m" and not os.path.isfile(script) \
            and not os.path.isfile(os.path.join(script, "__main__.py")):  # python FOLDER
        return f"no such script: {script}"
    return None


def _open_outputs(args: argparse.Namespace) -> dict[str, "NewFile"]:
    """Each profile output created now (bad paths are refused before the program runs);
    OSError with a one-line message."""
    from ..session.files import create_target

    made: dict[str, NewFile] = {}
    try:
        for name in ("output", "collapsed", "speedscope"):
            path = getattr(args, name)
            if path:
                made[name] = create_target(path, overwrite=args.overwrite)
    except OSError:
        _discard(made)
        raise
    return made


def _discard(made: dict[str, "NewFile"]) -> None:
    for f in made.values():
        f.remove()
        os.close(f.fd)


def write_outputs(profile: "Profile", made: dict[str, "NewFile"]) -> list[str]:
    """Write each output asked for; the problems (one line each)."""
    from .result import collapsed, dumps, speedscope
    import json

    texts = {"output": lambda: dumps(profile), "collapsed": lambda: collapsed(profile),
             "speedscope": lambda: json.dumps(speedscope(profile)) + "\n"}
    problems = []
    for name, f in made.items():
        try:
            with os.fdopen(f.fd, "w", encoding="utf-8") as fh:
                fh.write(texts[name]())
            f.commit()
        except OSError as exc:
            problems.append(f"cannot write {f.path}: {exc.strerror or exc}")
    return problems


def cmd_profile(argv: list[str], ui: Callable[..., tuple] | None = None) -> int:
    """``tuimeter profile``; its exit status. ``ui``: runs ``--ui`` (``(args, command,
    samples_path) -> (exit status, profile, problems)``; the command line passes the
    UI's, which this headless package may not import)."""
    own, command = split_command(argv)
    args = parser().parse_args(own)  # before the measurement stack: --help stays fast
    problem = _usage_problem(args, command)
    if problem:
        return fail(problem)
    workdir = tempfile.mkdtemp(prefix="tuimeter-profile-")
    samples_path = os.path.join(workdir, "samples.jsonl")
    child = child_command(command, samples_path, args.rate) if command else None
    try:
        made = _open_outputs(args)
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        return fail(str(exc))
    try:
        if args.ui:
            if ui is None:
                _discard(made)
                return fail("--ui is not available here")
            code, profile, problems = ui(args, child or [], samples_path)
        elif args.pid is not None:
            from .pyspy import profile_pid

            code, profile, problems = profile_pid(profile_options(args), workdir)
        else:
            from .run import profile_command

            code, profile, problems = profile_command(profile_options(args), child or [],
                                                      samples_path)
    except BaseException:
        _discard(made)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if profile is None:
        _discard(made)
        for p in problems:
            say(f"tuimeter: error: {p}")
        return code
    return _finish(args, profile, made, problems, code)


def _finish(args: argparse.Namespace, profile: "Profile", made: dict[str, "NewFile"],
            problems: list[str], code: int) -> int:
    from .result import summary, table

    problems = problems + write_outputs(profile, made)
    if not args.quiet:
        try:
            print(table(profile, args.top, shutil.get_terminal_size((100, 24)).columns))
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    for note in profile.notes:
        say(f"tuimeter: note: {note}")
    for p in problems:
        say(f"tuimeter: error: {p}")
    paths = [f.path for f in made.values()]
    say(summary(profile) + (f" -> {', '.join(paths)}" if paths else ""))
    return code if code else (1 if problems else 0)


def profile_options(args: argparse.Namespace) -> "ProfileOptions":
    """The profile run's plain values from its parsed command line (the engine's options
    with the settings resolved at parsing; ``--session-output`` is the engine's file)."""
    from ..options import measure_options
    from .run import ProfileOptions

    ns = argparse.Namespace(**vars(args))
    ns.output = args.session_output
    return ProfileOptions(measure_options(ns), session_output=args.session_output,
                          overwrite=args.overwrite, markers=not args.no_socket, pid=args.pid,
                          duration_s=args.duration or 0.0, rate_hz=args.rate)
