"""``%load_ext tuimeter``: the ``%%tuimeter`` cell magic for IPython and Jupyter.

::

    %%tuimeter --label train -o train.csv
    model.fit(x, y)

runs the cell under a :class:`~tuimeter.api.Meter` (attached to a running tuimeter if
there is one, else its own sampler) and shows what it used: energy, CO2e, duration,
average power, provenance and a power sparkline (HTML in Jupyter, one text line in a
terminal). The cell's own output and its value (``Out[n]``) are shown as without the
magic; an exception in the cell is shown once, after the measurement. The last result is
also ``_tuimeter`` in the user's namespace.

IPython is imported only when the extension is loaded; :class:`CellEnergy` needs nothing
beyond the standard library.
"""

from __future__ import annotations

import argparse
import ast
import shlex
from dataclasses import dataclass, field

from .htmlrepr import PHASE_HEAD, _e, fmt, phase_cells, sparkline_svg, sparkline_text, table
from .phases import average_power_w


@dataclass(frozen=True)
class CellEnergy:
    """What one ``%%tuimeter`` cell used."""

    label: str
    duration_s: float
    energy_j: float | None  # machine total (domains with in_total); None when unknown
    co2_g: float | None
    provenance: str
    power_w: tuple = ()  # total W of each tick while the cell ran (own sampler only)
    attached: bool = False  # the cell marked a running session instead of sampling
    phases: list = field(default_factory=list, repr=False)

    @classmethod
    def from_meter(cls, meter, label: str, power_w) -> "CellEnergy":
        phases = meter.phases
        co2 = [p.co2_g for p in phases]
        provs = {p.provenance for p in phases}
        return cls(label, sum(p.duration_s for p in phases), meter.energy_j,
                   None if not co2 or None in co2 else sum(co2),
                   provs.pop() if len(provs) == 1 else ("unknown" if not provs else "mixed"),
                   tuple(power_w), meter.attached, phases)

    @property
    def avg_power_w(self) -> float | None:
        return average_power_w(self.energy_j, self.duration_s)

    def summary(self) -> str:
        """``12.300 J (0.00342 Wh), 0.00123 g CO2e in 2.00 s, avg 6.15 W, measured``"""
        wh = None if self.energy_j is None else self.energy_j / 3600.0
        return (f"{fmt(self.energy_j, '.3f')} J ({fmt(wh, '.5f')} Wh), "
                f"{fmt(self.co2_g, '.5f')} g CO2e in {fmt(self.duration_s, '.2f')} s, "
                f"avg {fmt(self.avg_power_w, '.2f')} W, {self.provenance}")

    def __repr__(self) -> str:
        spark = sparkline_text(self.power_w)
        how = " (attached)" if self.attached else ""
        return f"tuimeter {self.label}{how}: {self.summary()}" + (f"  {spark}" if spark else "")

    def _repr_pretty_(self, p, cycle: bool) -> None:
        p.text(repr(self))

    def _repr_html_(self) -> str:
        spark = sparkline_svg(self.power_w)
        how = " (attached to a running session)" if self.attached else ""
        parts = [f"<div><b>tuimeter</b> {_e(self.label)}{_e(how)}: {_e(self.summary())} "
                 f"{spark}</div>"]
        if len(self.phases) > 1:
            parts.append(table(PHASE_HEAD, [phase_cells(p) for p in self.phases]))
        return "".join(parts)


def _new_meter(**kwargs):
    """The Meter a cell runs under (tests replace this to use a scripted engine)."""
    from .api import Meter

    return Meter(**kwargs)


def _parser(usage_error):
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line in the notebook, not SystemExit
            raise usage_error(f"%%tuimeter: {message}")

    p = Parser(prog="%%tuimeter", add_help=False)
    p.add_argument("--label", default="cell", help="the phase's label")
    p.add_argument("-o", "--output", default=None, help="session CSV to write (own sampler)")
    p.add_argument("--interval", type=float, default=None, help="sampling interval, s")
    return p


def _run_cell(shell, cell: str):
    """Run ``cell`` in the user's namespace as IPython would; the value of a last
    expression is returned (IPython shows it as ``Out[n]``)."""
    source = shell.transform_cell(cell)
    name = shell.compile.cache(source)  # so that a traceback shows the cell's lines
    tree = shell.transform_ast(shell.compile.ast_parse(source, name))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(shell.compile(tree, name, "exec"), shell.user_global_ns, shell.user_ns)
    if last is not None:
        return eval(shell.compile(last, name, "eval"), shell.user_global_ns, shell.user_ns)
    return None


def load_ipython_extension(ipython) -> None:
    """Register ``%%tuimeter`` on ``ipython`` (an InteractiveShell)."""
    from IPython.core.error import UsageError
    from IPython.display import display

    parser = _parser(UsageError)

    def tuimeter(line: str, cell: str):
        try:
            args = parser.parse_args(shlex.split(line))
        except ValueError as exc:  # shlex: an unclosed quote
            raise UsageError(f"%%tuimeter: {exc}") from None
        opts = {} if args.interval is None else {"interval_s": args.interval}
        try:
            meter = _new_meter(output=args.output, label=args.label, **opts)
        except ValueError as exc:  # a bad label
            raise UsageError(f"%%tuimeter: {exc}") from None
        power_w: list[float] = []

        def on_tick(snap):
            if snap.interval_s > 0 and snap.total.power_w is not None:
                power_w.append(snap.total.power_w)

        from .measurement import SetupError

        try:
            meter.start()
        except SetupError as exc:  # a bad interval, country, ...: nothing has run
            raise UsageError(f"%%tuimeter: {exc}") from None
        engine = None if meter.attached else meter.engine
        if engine is not None:
            engine.subscribe(on_tick)
        try:
            return _run_cell(ipython, cell)
        finally:
            meter.stop()
            if engine is not None:
                engine.unsubscribe(on_tick)
            result = CellEnergy.from_meter(meter, args.label, power_w)
            ipython.user_ns["_tuimeter"] = result
            display(result)

    ipython.register_magic_function(tuimeter, magic_kind="cell", magic_name="tuimeter")
