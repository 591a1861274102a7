"""Prometheus marker metrics: the count and the last label come from one moment.

(Here because this change's owner holds tests/tui/ and export/prometheus.py, not
tests/test_prometheus.py; it belongs there.)"""

from __future__ import annotations

import sys
import threading

from tuimeter.export.prometheus import _marker_metrics, _MarkerCount
from tuimeter.model import Marker


class _Snap:
    def __init__(self, markers):
        self.new_markers = tuple(markers)


def test_last_marker_label_is_paired_with_its_own_number():
    """Guards a scrape pairing marker N-1's label with number N: the listener (sampling
    thread) adds markers while scrapes read them; every scrape's `marker` number is the
    one of the label it shows. Thread switches are forced very often to hit the gap
    between reading the count and reading the last marker."""
    counter = _MarkerCount()
    n = 20000
    bad: list[tuple[str, str]] = []
    done = threading.Event()

    def add():
        for i in range(1, n + 1):
            counter(_Snap([Marker(label=f"m{i}", elapsed_s=float(i), timestamp=float(i),
                                  source="api")]))
        done.set()

    def scrape():
        while not done.is_set():
            families = _marker_metrics("h", counter)
            if len(families) < 2:
                continue
            total = int(families[0].samples[0].value)
            info = families[1].samples[0].labels
            if info["label"] != f"m{info['marker']}" or info["marker"] != str(total):
                bad.append((info["label"], info["marker"]))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=add), threading.Thread(target=scrape)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert bad == []
    assert counter.read()[0] == n
