"""The followed job, prominent: its power share, joules and CO2e, and whether it exited."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from ...model import JobSample
from ...text import safe_text
from ..format import fmt_co2, fmt_duration, fmt_energy, fmt_power, fmt_wh
from ...job import JobRanks, JobState
from ...work import metric_name


def job_text(state: JobState, job: JobSample | None, exited_at_s: float | None,
             ranks: JobRanks | None = None, width: int | None = None,
             work: list | None = None, one_line: bool = False) -> Text:
    """The job's lines; its figures line fits ``width`` cells where given (the Wh, then
    "of machine", then the CO2e left out as needed; the provenance is always shown).
    ``one_line`` (a short screen): the figures on the job's first line where they fit in
    ``width`` there, each line given to the chart and the process table counts.
    ``work``: (unit, units/s, J/unit) over the last seconds, a line each (the job's
    energy where attributed, else the machine's: the line says which)."""
    text = Text()
    text.append(f"JOB {state.pid} {safe_text(state.name)}", style="bold")  # any user's name
    if state.running and (job is None or job.running):
        detail = "" if state.status in ("running", "") else f" ({state.status})"
        text.append(f"  running{detail}")
    else:
        code = state.exit_code if state.exit_code is not None else (job.exit_code if job else None)
        text.append("  EXITED", style="bold reverse")
        if code is not None:
            text.append(f" with code {code}")
        if exited_at_s is not None:
            text.append(f" at {fmt_duration(exited_at_s)}")
    if job is None:
        text.append("\nits power share needs process attribution (not available)")
        _work_lines(text, work, "machine")
        return text
    # none: a replay of a file that does not say which processes were the job's (written
    # before process rows carried source "job"); a live job has its root at least
    text.append(f"  {job.n_processes} proc" if job.n_processes else
                "  processes not recorded")
    power, share = fmt_power(job.power_w), f"{100 * job.share:.0f}%"
    energy, wh = fmt_energy(job.total_energy_j), fmt_wh(job.total_energy_j)
    co2, tag = f"  {fmt_co2(job.total_co2_g)}", f"  [{job.provenance}]"
    forms = ((f"{power} now ({share} of machine)  ", f"{energy} = {wh}{co2}{tag}"),
             (f"{power} now ({share} of machine)  ", f"{energy}{co2}{tag}"),
             (f"{power} now ({share})  ", f"{energy}{co2}{tag}"),
             (f"{power} ({share})  ", f"{energy}{tag}"))
    room = width
    if one_line and width is not None and \
            cell_len(text.plain) + 2 + cell_len("".join(forms[-1])) <= width:
        text.append("  ")
        room = width - cell_len(text.plain)
    else:
        text.append("\n")
    head, rest = forms[0]
    if room is not None:  # the first form that fits, else the shortest
        head, rest = next((f for f in forms if cell_len(f[0] + f[1]) <= room), forms[-1])
    text.append(head, style="bold")
    text.append(rest)
    if ranks is not None:
        _rank_lines(text, ranks)
    _work_lines(text, work, "job")
    return text


def _work_lines(text: Text, work: list | None, basis: str) -> None:
    for unit, rate, j in work or ():
        per = "N/A" if j is None else f"{j:.4g} J"
        text.append(f"\n  {safe_text(unit)}: {rate:.4g}/s  {per}/{metric_name(unit)[6:]} "
                    f"[{basis} energy]")


def _rank_lines(text: Text, ranks: JobRanks) -> None:
    """One line per rank (its GPUs, own W and J), then the rest of the job: they add up
    to the job's figures above."""
    for r in (*ranks.rows, ranks.rest):
        who = f"rank {r.rank}" if r.pid is not None else r.rank
        pid = f"pid {r.pid}" if r.pid is not None else ""
        gpus = ",".join(r.gpus) or "-"
        text.append(f"\n  {who:<10} {pid:<11} {safe_text(gpus)[:24]:<12} "
                    f"{fmt_power(r.power_w):>9}  {fmt_energy(r.total_energy_j):>9}",
                    style="" if r.running else "dim")


def same_height(old: str, new: str, width: int) -> bool:
    """Whether ``new`` surely takes as many lines as ``old`` in ``width`` cells: as many
    lines, and none of either wider than the width (where wrapping could differ)."""
    a, b = old.split("\n"), new.split("\n")
    return len(a) == len(b) and all(cell_len(line) <= width for line in a + b)


class JobPanel(Static):
    DEFAULT_CSS = """
    JobPanel { height: auto; border-left: heavy $accent; padding: 0 1; }
    """

    _ranks: JobRanks | None = None
    _shown: tuple | None = None  # the last show's job (state, sample, exited at, work)
    one_line = False
    """The job and its figures on one line where they fit (a short screen: the screen
    sets it, :meth:`set_one_line`)."""

    def show(self, state: JobState, job: JobSample | None, exited_at_s: float | None,
             ranks: JobRanks | None = None, work: list | None = None) -> None:
        """Draw the job; ``ranks`` (the job's ranks as a group) replaces the last ones
        when given (an update of the job alone keeps them)."""
        if ranks is not None:
            self._ranks = ranks
        self._shown = (state, job, exited_at_s, work)
        text = job_text(state, job, exited_at_s, self._ranks, self._width() or None, work,
                        self.one_line)
        shown = str(self.content)
        if text.plain != shown:
            # a layout (of the whole screen) only when the panel's height may change: its
            # figures change on every frame, its number of lines seldom
            self.update(text, layout=not same_height(shown, text.plain, self._width()))

    def _width(self) -> int:
        """Its text's width, cells: before its first layout (the first frame is drawn
        before it), its parent's less its border and padding."""
        if self.size.width or self.parent is None:
            return self.size.width
        return max(0, self.parent.size.width - self.styles.gutter.width)

    @property
    def lines(self) -> int:
        """The lines its text takes at its width, known as soon as it is shown (its
        size, only after the next layout): the screen fits the rest around it. 2 before
        it was shown."""
        width = self._width()
        text = str(self.content)
        if not width or not text:
            return 2
        return sum(max(1, -(-cell_len(line) // width)) for line in text.split("\n"))

    def set_one_line(self, one_line: bool) -> None:
        """The figures on the job's line (True) or on a line of their own; the job shown
        again at once if it changes."""
        if one_line != self.one_line:
            self.one_line = one_line
            if self._shown is not None:
                self.show(*self._shown[:3], work=self._shown[3])
