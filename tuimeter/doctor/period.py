"""How often a counter updates on this machine: ``tuimeter doctor`` polls it briefly.

NVML's energy counter updates about every 100 ms (a window shorter than that reads 0) and
RAPL's about every 1 ms (SENSORS.md): a phase shorter than a few updates is apportioned,
not measured (:data:`tuimeter.phases.UPDATE_PERIOD_S`, :data:`tuimeter.phases.FEW_UPDATES`).
The doctor measures it: it reads the counter as fast as it can for a short budget and
takes the median time between changes of its value.
"""

from __future__ import annotations

import statistics
from typing import Callable

#: the changes of value the measurement waits for (the median of the gaps between them)
CHANGES = 6
#: the pause between two reads, s: far below RAPL's ~1 ms update
POLL_S = 0.0001


def update_periods_s(reads: dict, clock: Callable[[], float],
                     sleep: Callable[[float], None], budget_s: float,
                     changes: int = CHANGES) -> dict:
    """Per key, the median time between changes of ``reads[key]()``'s value, all polled
    together for at most ``budget_s`` (or until each changed ``changes`` times); None
    for a counter that changed fewer than three times (idle or stuck: no period can be
    told) or whose first read failed. A read that raises stops that counter's polling."""
    last: dict = {}
    for key, read in reads.items():
        try:
            last[key] = read()
        except Exception:  # noqa: BLE001 - a probe step; the probe reports read errors
            continue
    seen: dict = {key: [] for key in last}
    start = clock()
    while clock() - start < budget_s:
        live = [k for k in last if len(seen[k]) <= changes]
        if not live:
            break
        sleep(POLL_S)
        for key in live:
            try:
                value = reads[key]()
            except Exception:  # noqa: BLE001
                del last[key]
                continue
            if value != last[key]:
                seen[key].append(clock())
                last[key] = value
    out = {}
    for key in reads:
        gaps = [b - a for a, b in zip(seen.get(key, ()), seen.get(key, ())[1:])]
        out[key] = statistics.median(gaps) if len(gaps) >= 2 else None
    return out
