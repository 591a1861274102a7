"""Running a profiled program: tuimeter's live session follows the bootstrap process
(``python boot.py ... -- SCRIPT``) as ``tuimeter record -- CMD`` follows a command,
a :class:`~.ticks.TickLog` keeps each tick's attributed energy, and at the end the
sampler's file is read and the energy spread (:func:`~.ticks.make_profile`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..live import (HANGUP_WAIT_S, Caught, Forward, LiveSession, StartError,
                    wait_for_child)
from .spread import SampleLog
from .ticks import TickLog, make_profile

if TYPE_CHECKING:
    from ..measurement import MeasureOptions
    from .result import Profile


@dataclass(frozen=True)
class ProfileOptions:
    """What a profile run takes from its command line, as plain values: the engine's
    options (``measure``, with the resolved settings), the session CSV to write (None:
    none) and whether to replace it, whether to serve markers, and for ``--pid`` the
    process, how long (s) and how often (Hz) py-spy samples it."""

    measure: "MeasureOptions"
    session_output: str | None = None
    overwrite: bool = False
    markers: bool = True
    pid: int | None = None
    duration_s: float = 0.0
    rate_hz: float = 100.0


def open_engine(opts: ProfileOptions) -> tuple[Any, Any, TickLog]:
    """(engine with its attributor, recorder, tick log) for a profile; raises
    SetupError (one line) or OSError for the session CSV."""
    from ..measurement import make_engine, open_recorder
    from ..session.recorder import NoFile

    engine = make_engine(opts.measure)
    try:
        recorder = (open_recorder(opts.session_output, engine.host, opts.overwrite)
                    if opts.session_output else NoFile())
    except BaseException:
        engine.close()
        raise
    ticks = TickLog()
    engine.subscribe(ticks)
    return engine, recorder, ticks


def profile_command(opts: ProfileOptions, command: list[str], samples_path: str
                    ) -> tuple[int, "Profile | None", list[str]]:
    """Run ``command`` (the bootstrap) to its end under the engine: (exit status, the
    profile or None, problems)."""
    from ..measurement import SetupError

    caught = Caught()
    try:
        try:
            engine, recorder, ticks = open_engine(opts)
        except (SetupError, OSError) as exc:
            return 2, None, [str(exc)]
        live = LiveSession(engine, recorder, command=command, markers=opts.markers)
        try:
            live.open()
        except StartError as exc:
            return 2, None, [str(exc)]
        child = live.child
        assert child is not None  # a command was given
        forward = Forward(child, HANGUP_WAIT_S)
        problems: list[str] = []
        try:
            live.start()
            code = wait_for_child(child, forward, caught)
        except Exception as exc:  # never leave the program unwatched with a traceback
            problems.append(f"profiling stopped early: {type(exc).__name__}: {exc}")
            code = wait_for_child(child, forward, caught)
        summary = live.stop()
        problems += summary.problems
        if summary.record_error:
            problems.append(summary.record_error)
    finally:
        caught.restore()
    return finish_profile(code, samples_path, ticks, problems)


def finish_profile(code: int | None, samples_path: str, ticks: TickLog, problems: list[str]
                   ) -> tuple[int, "Profile | None", list[str]]:
    """After the program: (its exit status, the profile from the whole sample file, or
    None when the process's energy is unknown, problems)."""
    log = SampleLog()
    try:
        log.read_file(samples_path)
    except OSError:
        pass  # the program never started the sampler: said in the profile's notes
    if not ticks.job_seen:
        problems.append("process attribution is unavailable here, so the program's "
                        "energy is unknown (needs /proc or psutil)")
        return (code or 1), None, problems
    return (128 + 1 if code is None else code), make_profile(log, ticks), problems
