"""GPUs of one model as one line: ``8 x H200  4.81 kW``, for the domain table and the chart.

An eight-GPU machine's domain table has eight GPU lines: at 80x24 they leave the chart
no room and the process table none at all. The main screen collapses each *device group*
(two or more GPUs of one sensor and one model, ``Domain.label``) into one line when the
table would leave the chart fewer than :data:`PLOT_MIN_ROWS` rows of plot or the process table
fewer than :data:`PROCESS_MIN_ROWS` rows; ``x`` expands the groups (or collapses them
again). A group's figures are its members' added up: power and energy, the history tick
by tick (a tick where one member was lost is a gap, not a lower sum), the provenance if
they share one (else ``mixed``), and how many are lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..model import Domain, DomainKind, DomainSample, Status
from .devices import short_name

#: the chart's plot keeps at least this many rows (where the series are drawn)
PLOT_MIN_ROWS = 5
#: the lines a short screen's chart spends around its plot: the title with the legend
#: and the x axis's tick labels (PowerChart.compact: no frame lines)
CHART_FRAME_LINES = 2
#: the chart keeps at least this many lines: its plot's rows and its frame's
CHART_MIN_LINES = PLOT_MIN_ROWS + CHART_FRAME_LINES
#: the process table keeps at least this many rows (under its note and header)
PROCESS_MIN_ROWS = 4


@dataclass(frozen=True)
class DeviceGroup:
    """Two or more GPUs of one sensor and model, drawn as one line when collapsed."""

    key: str
    """``group:<source>:<model>``: never a domain id (those carry no colon)."""
    label: str
    """``8 x H200`` (escaped: a driver names its model)."""
    members: tuple[str, ...]
    """The GPUs' domain ids, in the engine's order."""


def device_groups(domains: Iterable[Domain]) -> tuple[DeviceGroup, ...]:
    """The groups among ``domains``: GPUs that add into the total, by (sensor, model),
    two or more each, in the order of their first member."""
    found: dict[tuple[str, str], list[str]] = {}
    for d in domains:
        if d.kind is DomainKind.GPU and d.in_total:
            found.setdefault((d.source, d.label), []).append(d.id)
    out = []
    for (source, model), ids in found.items():
        if len(ids) > 1:
            name = short_name(model) or source
            out.append(DeviceGroup(f"group:{source}:{model}", f"{len(ids)} x {name}",
                                   tuple(ids)))
    return tuple(out)


@dataclass(frozen=True)
class GroupSample:
    """A group's figures at one snapshot: its members' added up."""

    history_w: tuple[float | None, ...]
    """Each tick's summed power, W; None where a member was lost (not a lower sum)."""
    now_w: float | None
    """The members' power now, summed; None if one has none."""
    total_energy_j: float | None
    """Energy since the start, summed; None if one has none."""
    provenance: str
    """The members' provenance if they share one, else ``mixed``."""
    lost: int
    """How many members are unreadable now."""


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def group_sample(samples: Sequence[DomainSample]) -> GroupSample:
    """The group of ``samples`` (its members' samples of one snapshot)."""
    n = min((len(s.history_w) for s in samples), default=0)
    history = tuple(_sum([s.history_w[len(s.history_w) - n + i] for s in samples])
                    for i in range(n))
    now = _sum([s.power_w if s.instant_power_w is None else s.instant_power_w
                for s in samples])
    provenances = {s.domain.provenance.value for s in samples}
    return GroupSample(history, now, _sum([s.total_energy_j for s in samples]),
                       provenances.pop() if len(provenances) == 1 else "mixed",
                       sum(1 for s in samples if s.status is Status.LOST))


def table_lines_needed(n_rows: int) -> int:
    """The domain table's lines for ``n_rows`` domain rows: a header and the total too."""
    return n_rows + 2


def collapse_needed(height: int, n_domains: int, n_collapsed: int, other_lines: int) -> bool:
    """Whether a screen ``height`` lines high collapses its device groups: the whole
    table (``n_domains`` rows) leaves the chart and the process table less than their
    least, when collapsed (``n_collapsed`` rows) it would leave more. ``other_lines``:
    every line that is neither the table nor the chart (top bar, job panel, process
    panel at its least, status line, footer)."""
    room = height - other_lines - CHART_MIN_LINES
    return table_lines_needed(n_domains) > room and n_collapsed < n_domains
