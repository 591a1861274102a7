"""Recorder: writes every snapshot of an engine to a session CSV.

A write error (disk full, file removed) is caught on the sampling thread, kept in
``error`` (one line), and sets ``failed``; the caller then ends the session cleanly.
The file is cut back to the end of the last complete tick (``last_written``), so it
never ends half-way through a row.
"""

from __future__ import annotations

import threading
from typing import Callable

from ..model import Snapshot
from .csvfile import SessionWriteError, SessionWriter


class Recorder:
    def __init__(self, writer: SessionWriter, details: str = ""):
        self.writer = writer
        self.details = details
        self.error: str | None = None
        self.failed = threading.Event()
        self.last_written: Snapshot | None = None  # the last tick wholly in the file
        self._header_done = False
        self._lock = threading.Lock()
        self._on_failure: list[Callable[[], None]] = []

    @property
    def path(self) -> str:
        return self.writer.path

    def start(self, snap: Snapshot | None) -> None:
        """Write the ``session`` row (call after Engine.open())."""
        if snap is not None:
            with self._lock:
                self._guard(lambda: self.writer.write_header_info(snap, self.details))
                self._header_done = True

    def __call__(self, snap: Snapshot) -> None:
        """Engine listener: write one tick."""
        with self._lock:
            if self.failed.is_set():
                return
            if not self._header_done:
                self._guard(lambda: self.writer.write_header_info(snap, self.details))
                self._header_done = True
            self._guard(lambda: self.writer.write_snapshot(snap))
            if not self.failed.is_set():
                self.last_written = snap

    def on_failure(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once when the file fails (on the thread that was writing:
        keep it quick, it must not raise), or now if it has: so a waiter for the end of
        the recording (``record``'s main thread) sleeps without looking every so often."""
        with self._lock:
            if not self.failed.is_set():
                self._on_failure.append(callback)
                return
        callback()

    def _guard(self, fn) -> None:
        if self.failed.is_set():
            return
        try:
            fn()
        except SessionWriteError as exc:
            self.error = str(exc)
            self.failed.set()
            for callback in self._on_failure:
                callback()

    def close(self) -> None:
        with self._lock:
            self.writer.close()

    def discard(self) -> None:
        """The start failed: close and remove the file this run created (a file it was to
        replace stays untouched; nothing else is ever removed)."""
        with self._lock:
            self.writer.discard()

    @property
    def paths(self) -> list[str]:
        """Every file this recording has written (several with ``--rotate``)."""
        return list(getattr(self.writer, "paths", [self.writer.path]))


class NoFile:
    """The recorder of ``record`` with an exporter and no ``-o``: it writes nothing (a
    long-running node exporter with no ever-growing file)."""

    path = None
    error = None
    last_written = None
    paths: tuple[str, ...] = ()

    def __init__(self):
        self.failed = threading.Event()  # never set: nothing to fail

    def start(self, snap: Snapshot | None) -> None:
        pass

    def on_failure(self, callback) -> None:
        pass  # nothing can fail

    def __call__(self, snap: Snapshot) -> None:
        pass

    def close(self) -> None:
        pass

    def discard(self) -> None:
        pass
