"""``tuimeter profile --ui``: the top functions of the profiled program by energy, live."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rich.text import Text
from textual.widgets import Static

from ..format import fmt_energy
from ._job_panel import same_height

if TYPE_CHECKING:  # the profile's modules load with the first profile (start-up: 50 ms)
    from ...profile.result import FunctionStat

#: functions listed (a glance: the full table is printed at the end)
MAX_ROWS = 8


def profile_text(functions: Sequence[FunctionStat], total_j: float,
                 rows: int = MAX_ROWS) -> Text:
    """A title line, then one line per function: inclusive and self energy, share,
    samples (``?``: under 10, uncertain), name (file:line)."""
    from ...profile.result import frame_label

    text = Text()
    text.append(f"Functions by energy (profile of the program, {fmt_energy(total_j)} so far)",
                style="bold")
    if not functions:
        text.append("\nwaiting for the first samples")
        return text
    text.append(f"\n{'incl':>9} {'self':>9} {'share':>6} {'samples':>8}  function")
    for f in functions[:rows]:
        share = f"{100 * f.total_energy_j / total_j:5.1f}%" if total_j > 0 else "   N/A"
        flag = "?" if f.uncertain else " "
        # names come from the profiled program: frame_label escapes them
        text.append(f"\n{fmt_energy(f.total_energy_j):>9} {fmt_energy(f.self_energy_j):>9} "
                    f"{share:>6} {f.samples:>7}{flag}  {frame_label((f.function, f.file, f.line))}")
    return text


class ProfilePanel(Static):
    """Shows :func:`profile_text` of the latest live profile; redrawn only when it changed."""

    DEFAULT_CSS = """
    ProfilePanel { height: auto; max-height: 11; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", markup=False, **kw)
        self._shown: tuple | None = None

    def show(self, latest: tuple[Sequence[FunctionStat], float]) -> None:
        if latest is self._shown:
            return
        self._shown = latest
        functions, total_j = latest
        text = profile_text(functions, total_j)
        shown = str(self.content)
        # a layout (of the whole screen) only when the panel's height may change
        self.update(text, layout=not same_height(shown, text.plain, self.size.width))
