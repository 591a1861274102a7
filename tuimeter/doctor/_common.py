"""What every doctor probe shares: its section of the report and its problems."""

from __future__ import annotations

from typing import Any

BUG_FIX = ("this is a bug in tuimeter: please report it with the output of "
           "`tuimeter doctor --json`")


class Probe:
    """One sensor's check. ``begin`` takes the first readings, ``end`` the second ones after
    the window (only if :meth:`wants_window`); either may raise, the runner turns that into
    a problem. ``section`` is this probe's part of the report (JSON-ready values only)."""

    name = "probe"

    def __init__(self) -> None:
        self.section: dict[str, Any] = {}
        self.problems: list[dict[str, str]] = []

    def begin(self) -> None:
        pass

    def wants_window(self) -> bool:
        return False

    def end(self) -> None:
        pass

    def error(self, what: str, fix: str = "") -> None:
        """Something found cannot be read: the doctor exits 1."""
        self.problems.append({"sensor": self.name, "level": "error", "what": what, "fix": fix})

    def warning(self, what: str, fix: str = "") -> None:
        """Readable, but worth knowing (a fallback in use, an odd value)."""
        self.problems.append({"sensor": self.name, "level": "warning", "what": what, "fix": fix})
