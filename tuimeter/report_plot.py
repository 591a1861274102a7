"""Power over time with markers, drawn in the terminal for ``tuimeter report --plot``.

Outside :mod:`tuimeter.session` on purpose: the headless core never imports plotext
(import-linter contract in pyproject.toml); ``report_cli`` imports this module lazily.
Builds a string (``plt.build()``), so it works without a TTY (pipes, CI).
"""

from __future__ import annotations

import shutil
import sys

from .session.report import Report, power_series
from .text import safe_text


def plot_report(rep: Report, width: int | None = None, height: int | None = None,
                color: bool | None = None) -> str:
    """One chart: total W per host over seconds since the report's start; markers as lines.

    ``color`` defaults to whether stdout is a terminal (no escape codes in a pipe).
    """
    import plotext as plt

    cols, rows = shutil.get_terminal_size((100, 30))
    plt.clear_figure()
    plt.plotsize(width or max(40, cols), height or max(12, min(rows - 2, 30)))
    plt.theme("clear")
    t0 = rep.start_t
    for h in rep.hosts:
        if h.duration_s <= 0:
            continue
        times, watts = power_series(h, points=min(400, max(20, int(h.duration_s))))
        plt.plot([t - t0 for t in times], watts, label=safe_text(h.host) if len(rep.hosts) > 1 else None,
                 marker="braille")
        for s in (s for s in h.segments if s.label != "(start)"):
            plt.vline(s.start_t - t0)
            plt.text(safe_text(s.label)[:20], s.start_t - t0, max(watts or [0]))
    plt.title(f"total power (W), {rep.energy_j:.1f} J over {rep.duration_s:.1f} s")
    plt.xlabel("seconds since start")
    text = plt.build()
    plt.clear_figure()
    if color is None:
        color = sys.stdout.isatty()
    return text if color else plt.uncolorize(text)
