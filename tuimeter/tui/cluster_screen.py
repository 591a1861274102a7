"""The ``tuimeter cluster`` views: **nodes** (power now, energy and CO2e since the view
opened, GPU power spread, staleness; a lost node says so, never 0 W), **jobs** (by tag or
SLURM job: nodes, power, kWh, g CO2e) and a **job detail** (per node and per GPU,
stragglers and idle allocated GPUs flagged), and a node's domains.

Keys as in the single-node view: ``n`` nodes, ``j`` jobs, Enter drills down, Esc goes
back, ``/`` filters (by name, job, GPU), ``s`` cycles the sort, ``q`` quits. The rows come
from :mod:`tuimeter.cluster.view` (headless); this module only draws them, into one
``Static`` updated only when its text changed (one larger widget is the cheap way to draw
in Textual: STYLE.md). Every name shown came from a node or from Prometheus: it is
escaped (:func:`tuimeter.text.safe_text`) and drawn as plain text, never as markup.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input, Static

from ..cluster.view import NodeRow, job_detail, job_rows, node_rows, power_now
from ..text import safe_text
from .format import fmt_co2, fmt_energy, fmt_power

#: the sort orders ``s`` cycles through, per view: (name, key on a row, reversed)
SORTS = {
    "nodes": (("name", lambda r: r.host, False), ("power", lambda r: r.power_w or -1, True),
              ("energy", lambda r: r.energy_j, True),
              ("stale", lambda r: r.age_s if r.age_s is not None else 1e18, True)),
    "jobs": (("name", lambda r: r.job, False), ("power", lambda r: r.power_w or -1, True),
             ("energy", lambda r: r.energy_kwh, True)),
}


def _t(text: object) -> Text:
    return Text(safe_text(str(text)))


def _age(s: float | None) -> str:
    return "N/A" if s is None else f"{s:.1f} s"


class ClusterApp(App):
    """The cluster views over a running engine (its one sensor the
    :class:`~tuimeter.cluster.source.ClusterSensor`); ``refresh_s`` between redraws."""

    TITLE = "tuimeter cluster"
    AUTO_FOCUS = None  # the keys go to the views; the filter box only after `/`
    CSS = """
    #title { height: 1; background: $primary-background; }
    #table { height: 1fr; }
    #filter { display: none; }
    #filter.shown { display: block; }
    #status { height: 1; color: $warning; }
    """
    BINDINGS = [
        Binding("q", "quit", "quit"), Binding("n", "view('nodes')", "nodes"),
        Binding("j", "view('jobs')", "jobs"), Binding("enter", "drill", "open"),
        Binding("escape", "go_back", "back"), Binding("slash", "filter", "filter"),
        Binding("s", "sort", "sort"), Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
    ]

    def __init__(self, engine: Any, sensor: Any, refresh_s: float = 1.0) -> None:
        super().__init__()
        self.engine, self.sensor, self.refresh_s = engine, sensor, refresh_s
        self.view = "nodes"  # nodes | jobs | detail | node
        self.job: str | None = None  # the job of the detail view
        self.node: str | None = None  # the node of the node view
        self.back_to: dict[str, str] = {"detail": "jobs", "node": "nodes"}  # Esc goes
        self.cursor = 0
        self.sort_i = {"nodes": 0, "jobs": 0}
        self.filter_text = ""
        self._shown = ""  # the table's text last drawn (redraw only on change)
        self._keys: list[str] = []  # what Enter opens, per row shown

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        yield Input(placeholder="filter: node, job or GPU", id="filter")
        yield Static(id="table")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(self.refresh_s, self.redraw)

    # -- the rows ------------------------------------------------------------------
    def rows(self) -> tuple[list, list[NodeRow]]:
        snap = self.engine.snapshot
        nodes = node_rows(snap, self.sensor.nodes_state(), self.sensor.tags)
        if self.view == "nodes":
            rows: list = self._sorted("nodes", [n for n in nodes if self._match(n.host, n.job)])
        elif self.view == "jobs":
            rows = self._sorted("jobs", [j for j in job_rows(nodes) if self._match(j.job)])
        elif self.view == "detail":
            rows = [r for r in job_detail(snap, nodes, self.job or "")
                    if self._match(r.node, r.part)]
        else:
            rows = [d for d in snap.domains if d.domain.id.startswith(f"{self.node}/")
                    and self._match(d.domain.id)]
        return rows, nodes

    def _match(self, *texts: str) -> bool:
        f = self.filter_text.lower()
        return not f or any(f in t.lower() for t in texts)

    def _sorted(self, view: str, rows: list) -> list:
        _name, key, rev = SORTS[view][self.sort_i[view]]
        return sorted(rows, key=key, reverse=rev)

    # -- drawing -------------------------------------------------------------------
    def redraw(self) -> None:
        rows, nodes = self.rows()
        self.cursor = max(0, min(self.cursor, len(rows) - 1))
        table, keys = self._table(rows)
        self._keys = keys
        lost = sum(n.lost for n in nodes)
        where = {"nodes": "nodes", "jobs": "jobs", "detail": f"job {self.job}",
                 "node": f"node {self.node}"}[self.view]
        sort = (f"  sort: {SORTS[self.view][self.sort_i[self.view]][0]}"
                if self.view in SORTS else "")
        filt = f"  filter: {self.filter_text}" if self.filter_text else ""
        title = _t(f" {where}: {len(nodes)} nodes, {lost} lost{sort}{filt}")
        text = self._plain(title, table)
        if text != self._shown:
            self._shown = text
            self.query_one("#title", Static).update(title)
            self.query_one("#table", Static).update(table)
        status = self.sensor.error
        lost_why = [f"{n.host}: {n.why}" for n in nodes if n.lost and n.why]
        if not status and self.view == "nodes" and lost_why:  # why each lost node is
            status = "lost: " + "; ".join(lost_why[:3]) + (" ..." if len(lost_why) > 3 else "")
        if not status and self.view == "detail":  # the nodes' markers, merged
            marks = [m.label for m in self.engine.snapshot.markers
                     if self._in_job(m.label, nodes)][-4:]
            status = ("markers: " + "; ".join(marks)) if marks else ""
        self.query_one("#status", Static).update(_t(status) if status else "")

    def _in_job(self, label: str, nodes: list[NodeRow]) -> bool:
        host = label.split(": ", 1)[0]
        return any(n.host == host and n.job == self.job for n in nodes)

    @staticmethod
    def _plain(title: Text, table: Table) -> str:
        """The title and the table as text, a line per row (what a change is judged by,
        and what the tests read), the cursor's row marked with ``>``."""
        cols = [[str(c) for c in col._cells] for col in table.columns]  # Text cells
        lines = [str(title), "  ".join(str(c.header) for c in table.columns)]
        for i in range(len(table.rows)):
            mark = ">" if table.rows[i].style == "reverse" else " "
            lines.append(mark + " " + "  ".join(col[i] for col in cols))
        return "\n".join(lines)

    @property
    def shown(self) -> str:
        """What the table shows now, as text."""
        return self._shown

    def _table(self, rows: list) -> tuple[Table, list[str]]:
        t = Table(expand=True, show_edge=False, pad_edge=False, box=None,
                  header_style="bold")
        keys: list[str] = []
        if self.view == "nodes":
            for name in ("node", "job", "power", "energy", "CO2e", "GPU spread", "stale"):
                t.add_column(name, justify="left" if name in ("node", "job") else "right")
            for r in rows:
                spread = ("N/A" if r.gpu_min_w is None else
                          f"{fmt_power(r.gpu_min_w)}..{fmt_power(r.gpu_max_w)}")
                power = "lost" if r.lost else fmt_power(r.power_w)
                t.add_row(_t(r.host), _t(r.job), _t(power), _t(fmt_energy(r.energy_j)),
                          _t(fmt_co2(r.co2_g)), _t(spread), _t(_age(r.age_s)))
                keys.append(r.host)
        elif self.view == "jobs":
            for name in ("job", "nodes", "lost", "power", "kWh", "gCO2e"):
                t.add_column(name, justify="left" if name == "job" else "right")
            for j in rows:
                t.add_row(_t(j.job), _t(j.nodes), _t(j.lost), _t(fmt_power(j.power_w)),
                          _t(f"{j.energy_kwh:.4f}"), _t(f"{j.co2_g:.2f}"))
                keys.append(j.job)
        elif self.view == "detail":
            for name in ("node", "part", "power", "energy", "flags"):
                t.add_column(name, justify="right" if name in ("power", "energy") else "left")
            for d in rows:
                t.add_row(_t(d.node if d.part == "node" else ""), _t(d.part),
                          _t(fmt_power(d.power_w)), _t(fmt_energy(d.energy_j)),
                          _t(", ".join(d.flags)))
                keys.append(d.node)
        else:
            for name in ("domain", "kind", "in total", "power", "energy", "status"):
                t.add_column(name, justify="right" if name in ("power", "energy") else "left")
            for d in rows:
                t.add_row(_t(d.domain.id), _t(d.domain.kind), _t("yes" if d.domain.in_total
                                                                else "no"),
                          _t(fmt_power(power_now(d))), _t(fmt_energy(d.total_energy_j)),
                          _t(d.status.value))
                keys.append(d.domain.id)
        if keys:
            t.rows[self.cursor].style = "reverse"
        return t, keys

    # -- keys ----------------------------------------------------------------------
    def action_view(self, view: str) -> None:
        self.view, self.cursor = view, 0
        self.redraw()

    def action_move(self, step: int) -> None:
        self.cursor += step
        self.redraw()

    def action_sort(self) -> None:
        if self.view in SORTS:
            self.sort_i[self.view] = (self.sort_i[self.view] + 1) % len(SORTS[self.view])
            self.redraw()

    def action_drill(self) -> None:
        if not self._keys:
            return
        key = self._keys[self.cursor]
        if self.view == "jobs":
            self.view, self.job = "detail", key
        elif self.view in ("nodes", "detail"):
            self.back_to["node"] = self.view
            self.view, self.node = "node", key
        else:
            return
        self.cursor, self.filter_text = 0, ""
        self.redraw()

    def action_go_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("shown") or self.filter_text:
            box.remove_class("shown")
            box.value, self.filter_text = "", ""
        elif self.view in self.back_to:
            self.view = self.back_to[self.view]
        self.cursor = 0
        self.redraw()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.cursor = 0
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("shown")
        self.set_focus(None)


def run_cluster_ui(engine: Any, args: Any) -> None:
    """``tuimeter cluster`` without ``--headless``: the views until ``q``."""
    ClusterApp(engine, engine.sensors[0], args.interval or 1.0).run()
