"""Power over time for every domain, with the session's markers as labelled lines."""

from __future__ import annotations

from typing import Sequence

from textual_plotext import PlotextPlot

from ...model import Snapshot

#: one plot character per series, so series differ without colour (NO_COLOR, mono SSH)
MARKERS = ("*", "+", "x", "o", "#", "@", "%", "&", "$", "~")


def series_marker(i: int) -> str:
    """The chart character of the i-th domain (also shown in the domain table as its key)."""
    return MARKERS[i % len(MARKERS)]


def _thin(xs: Sequence[float], ys: Sequence[float | None], n: int):
    """At most ``n`` points (every k-th, keeping the last): plotting 600 points into 60
    columns costs CPU and shows nothing more."""
    step = max(1, len(xs) // max(n, 1))
    idx = list(range(len(xs) - 1, -1, -step))[::-1]
    px = [xs[i] for i in idx if ys[i] is not None]
    py = [ys[i] for i in idx if ys[i] is not None]
    return px, py


class PowerChart(PlotextPlot):
    """Each domain's power (W) against elapsed seconds; markers as vertical lines."""

    DEFAULT_CSS = """
    PowerChart { min-height: 5; }
    """

    def show(self, snap: Snapshot, times_s: Sequence[float]) -> None:
        plt = self.plt
        plt.clear_data()
        plt.xlabel("elapsed s")
        plt.ylabel("W")
        n_points = max(2 * self.size.width, 20)
        if times_s:
            for i, d in enumerate(snap.domains):
                hist = d.history_w[-len(times_s):]
                xs = times_s[-len(hist):] if hist else ()
                px, py = _thin(xs, hist, n_points)
                if px:
                    plt.plot(px, py, marker=series_marker(i))
            lo, hi = times_s[0], times_s[-1]
            plt.xlim(lo, hi if hi > lo else lo + 1)
            top = max((w for d in snap.domains for w in d.history_w[-len(times_s):]
                       if w is not None), default=1.0)
            plt.ylim(0, top * 1.1 if top > 0 else 1.0)
            for m in snap.markers:
                if lo <= m.elapsed_s <= hi:
                    plt.vertical_line(m.elapsed_s)
                    plt.text(m.label[:12], m.elapsed_s, top * 1.05, alignment="left")
        self.refresh()
