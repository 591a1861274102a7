"""The ``f`` key: the followed Python program's functions by energy, live, in the
profile's panel, sampled from outside with py-spy
(:class:`~tuimeter.profile.attach.ChunkedProfile`). In a ``tuimeter -- CMD`` or
``tuimeter --pid PID`` session; ``f`` again stops sampling and closes the panel.

What cannot work is said in a notification that names the fix, never a traceback: no
program followed, the program is not Python or has ended, py-spy missing (the extra
``tuimeter[profile]``), ptrace not permitted (``kernel.yama.ptrace_scope``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..profile.attach import ChunkedProfile
    from .app import TuimeterApp


# the profile's modules (py-spy's runner, the spreading of energy over stacks) load when
# f is first pressed, not with the UI (about 50 ms of its start-up)
def find_pyspy() -> str | None:
    """py-spy's executable, or None (``tuimeter.profile.pyspy.find_pyspy``)."""
    from ..profile.pyspy import find_pyspy as find

    return find()


def python_process(root: int, members, *check: Any) -> int | None:
    """The process to sample (``tuimeter.profile.attach.python_process``)."""
    from ..profile.attach import python_process as find

    return find(root, members, *check)

NO_PROGRAM = ("f shows a Python program's functions by energy: follow one "
              "(tuimeter -- python SCRIPT, or tuimeter --pid PID)")


class FunctionsKey:
    """The key's state in one app: the running profile, if any."""

    def __init__(self, app: "TuimeterApp") -> None:
        self.app = app
        self.profile: "ChunkedProfile | None" = None

    def toggle(self) -> None:
        app = self.app
        if self.profile is not None:
            self.close()
            app.say("functions panel closed (py-spy stopped)")
            return
        if app.profile_source is not None:
            app.say("the functions panel is already shown (tuimeter profile --ui)")
            return
        pid, problem = self._target()
        if pid is None:
            app.say(problem, severity="warning", timeout=10)
            return
        exe = find_pyspy()
        if exe is None:
            from ..profile.pyspy import EXTRA_HINT

            app.say(f"the functions panel samples the program with py-spy, an optional "
                    f"extra: {EXTRA_HINT}", severity="warning", timeout=15)
            return
        from ..profile.attach import ChunkedProfile

        profile = self.profile = ChunkedProfile(pid, app.engine, exe)
        app.profile_source = lambda: profile.latest
        app.run_worker(lambda: self._run(profile), thread=True, group="pyspy",
                       exit_on_error=False)
        app.say(f"sampling process {pid} with py-spy: its functions by energy appear "
                f"below the process table (f again stops)")

    def _target(self) -> tuple[int | None, str]:
        """(the pid to sample, "") or (None, why not)."""
        app = self.app
        job = app.job
        if job is None:
            return None, NO_PROGRAM
        if not job.poll().running:
            return None, f"process {job.pid} ({job.name}) has ended: nothing to sample"
        snap = app.engine.snapshot
        members = snap.job.members if snap is not None and snap.job is not None else ()
        pid = python_process(job.pid, members)
        if pid is None:
            return None, (f"process {job.pid} ({job.name}) is not a Python program: py-spy "
                          f"samples Python programs only")
        return pid, ""

    def _run(self, profile: "ChunkedProfile") -> None:
        """The sampling loop (a worker thread); a failure is said on the app's thread."""
        problem = profile.run()
        if problem:
            try:
                self.app.call_from_thread(self._failed, profile, problem)
            except RuntimeError:  # the app has ended meanwhile
                pass

    def _failed(self, profile: "ChunkedProfile", problem: str) -> None:
        if self.profile is not profile:
            return
        self.close()
        job = self.app.job
        if job is not None and not job.poll().running:
            self.app.say(f"process {job.pid} ({job.name}) has ended: functions panel closed")
        else:
            self.app.say(problem, severity="error", timeout=30)

    def stop(self) -> None:
        """Stop sampling (idempotent; the app quitting calls this)."""
        profile, self.profile = self.profile, None
        if profile is not None:
            profile.stop()
            self.app.profile_source = None

    def close(self) -> None:
        """Stop sampling and take the panel away."""
        self.stop()
        self.app.hide_profile()
