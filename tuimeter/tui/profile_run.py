"""``tuimeter profile --ui -- python SCRIPT``: the live view with the profile's panel.

The program runs under the sampler as without ``--ui`` (its output goes to a ``.log``
file, the UI owns the terminal); the app shows the session and, below the process table,
the top functions by energy so far (:class:`~tuimeter.profile.live.LiveProfile`). After
``q`` the full profile is made from the whole sample file, as without ``--ui``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def run_profile_ui(args: argparse.Namespace, command: list[str], samples_path: str
                   ) -> tuple[int, Any, list[str]]:
    """Run the app until the user quits: (exit status, profile or None, problems)."""
    from ..job import JobWatcher
    from ..live import LiveSession, StartError
    from ..profile.live import LiveProfile
    from ..profile.cli import profile_options
    from ..profile.run import finish_profile, open_engine
    from ..measurement import SetupError
    from .app import TuimeterApp
    from .run import Session

    try:
        engine, recorder, ticks = open_engine(profile_options(args))
    except (SetupError, OSError) as exc:
        return 2, None, [str(exc)]
    base = args.session_output or args.output or "tuimeter-profile"
    live = LiveSession(engine, recorder if args.session_output else None, command=command,
                       log_base=os.path.splitext(base)[0],
                       overwrite_log=args.overwrite, markers=not args.no_socket)
    try:
        live.open()
    except StartError as exc:
        return 2, None, [str(exc)]
    current = LiveProfile(samples_path, ticks)
    engine.subscribe(current)
    assert live.child is not None
    job = JobWatcher(live.child.pid, live.child, command, live.log_path)
    app = TuimeterApp(engine, job=job, attribution="on", session=live,
                      profile_source=lambda: current.latest)
    session = Session(app, live, job)
    try:
        app.run()
    finally:
        code = session.close()
    return finish_profile(code, samples_path, ticks, [])
