"""Messages from the sampling thread to the UI, and the listener that posts them."""

from __future__ import annotations

import collections
from typing import Callable

from textual.message import Message

from ..model import Snapshot


class SnapshotReady(Message):
    """A new snapshot was taken (posted from the sampler thread).

    ``times_s`` are the elapsed times of the ticks in the snapshot's histories (oldest
    first, aligned with the end of every ``history_w``), so charts have a true time axis
    even when frames were skipped or the interval changed.
    """

    def __init__(self, snapshot: Snapshot, times_s: tuple[float, ...]) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.times_s = times_s

    def can_replace(self, message: Message) -> bool:
        """A newer snapshot still queued supersedes this one: a slow terminal skips
        frames instead of falling behind (every tick is still recorded)."""
        return isinstance(message, SnapshotReady)


class SnapshotFeed:
    """Engine listener (runs on the sampler thread): keep tick times, post a message.

    ``post`` is ``App.post_message``, which is thread-safe. The feed never blocks the
    sampler: posting only queues the message.
    """

    def __init__(self, post: Callable[[Message], object], history_len: int):
        self._post = post
        self._times: collections.deque[float] = collections.deque(maxlen=history_len)

    def seed(self, times_s) -> None:
        """Tick times of ticks taken before the app subscribed (benchmarks, tests)."""
        self._times.extend(times_s)

    def __call__(self, snap: Snapshot) -> None:
        if snap.interval_s > 0:
            self._times.append(snap.elapsed_s)
        self._post(SnapshotReady(snap, tuple(self._times)))
