"""Textual's Linux/macOS driver, with an input thread that sleeps until there is input.

Textual's :class:`~textual.drivers.linux_driver.LinuxDriver` reads the keyboard on a thread
that wakes ten times a second (``select`` with a 0.1 s timeout) to see whether the app is
stopping and whether a lone Escape has waited long enough to be a key. Each wake-up is a
system call and a turn of Python: measured on a 2-core VM, that loop alone costs 0.12 % of
a core, about a tenth of what the whole UI may cost at 1 s (README, Overhead).

:class:`QuietLinuxDriver` waits without a timeout instead, and is woken

- by input, as before;
- by the driver stopping input: its ``exit_event`` writes a byte to a pipe the thread
  also waits on, so ``disable_input`` (quit, suspend) never waits for a key;
- by a timeout only while the parser holds a half-read sequence (a lone Escape): then the
  thread wakes every 0.1 s as Textual's does, until the parser let it go.

When the input ends (a hung-up terminal: end of file or ``EIO``), Textual's thread would
spin on it at 100 % of a core; this one stops reading and calls the app's
``terminal_lost`` on the app's loop, at once (the app polled the terminal every second).
Closing waits for the output thread a bounded time (:meth:`QuietLinuxDriver.close`).

A ``SIGCONT`` resumes the application only after our own suspend (Ctrl-Z). Textual's
driver resumed on every ``SIGCONT``: a terminal that hangs up sends its controlling
process ``SIGHUP`` *and* ``SIGCONT``, so the app, already quitting, started a new input
thread that waited in ``select`` for ever and kept the process alive after its session
had ended (a closed terminal left it behind 7 times in 8).

Output: what the app writes in one turn of its loop is written at the driver's ``flush``
(the app flushes after each frame), or at the end of the loop's turn for a write no flush
follows, as one write, by the app's thread itself when the terminal takes it at once (it
is ready, the text is at most :data:`DIRECT_MAX_CHARS`, and nothing waits in the output
thread's queue); else by Textual's output thread, as before. A frame was three writes (the
synchronized update's start, the frame, its end) handed to that thread, which woke for
them and again for the GIL the app's thread held: 2.5 wake-ups a second at a 1 s
interval, on a VM 0.3 to 0.5 ms of CPU each. A write from another thread, or with no loop
running, goes to the output thread at once (after what is held).

Where the parser does not say whether it waits (another Textual), the thread wakes every
0.1 s, as Textual's own does. Everything else is Textual's driver.
"""

from __future__ import annotations

import asyncio
import os
import select
import selectors
import threading
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

#: how often the input thread looks again while a sequence is half read (Textual's own)
TICK_S = 0.1
#: how long closing waits for the output thread to write what is queued and stop
STOP_S = 2.0
#: the longest text the app's thread writes to a ready terminal itself: a 120x40 frame is
#: 2,500 characters (the table's lines) to 15,000 (the chart redrawn); a Linux pty holds
#: 64 KiB. Longer: the output thread
DIRECT_MAX_CHARS = 32768


class _WakingEvent(threading.Event):
    """An event that also writes a byte to the pipe :meth:`attach` gave it when set: a
    thread waiting in ``select`` on the pipe's other end wakes at once."""

    def __init__(self) -> None:
        super().__init__()
        self._fd_lock = threading.Lock()
        self._wake_fd = -1

    def attach(self, wake_fd: int) -> None:
        with self._fd_lock:
            self._wake_fd = wake_fd

    def detach(self) -> None:
        """No more writes (the pipe is about to be closed: its number may be reused)."""
        with self._fd_lock:
            self._wake_fd = -1

    def set(self) -> None:
        super().set()
        with self._fd_lock:
            if self._wake_fd < 0:
                return
            try:
                os.write(self._wake_fd, b"x")
            except OSError:  # the pipe is full: the thread wakes anyway
                pass


class _TerminalFile:
    """The terminal as Textual's output thread writes to it, where a write or flush that
    fails (``EIO``: the terminal hung up) is dropped instead of raised. Raised, it ended
    the output thread; the app's next frames then filled its queue (30 writes) and the
    app's loop blocked for ever on the next one, before it could handle the SIGHUP. The
    first failure calls ``on_lost`` (once)."""

    def __init__(self, file, on_lost) -> None:
        self._file = file
        self._on_lost = on_lost
        self.lost = False
        self.handed = 0  # texts handed to the output thread (under _count_lock) ...
        self.written = 0  # ... and written by it (that thread alone counts them)
        self._count_lock = threading.Lock()

    @property
    def queued(self) -> int:
        """Texts handed to the output thread and not yet written (it writes them in
        order; the app's thread writes itself only when none is left)."""
        return self.handed - self.written

    def hand(self) -> None:
        """Count a text handed to the output thread."""
        with self._count_lock:
            self.handed += 1

    def _failed(self) -> None:
        if not self.lost:
            self.lost = True
            self._on_lost()

    def write(self, text: str) -> None:
        """The output thread's write of a text it was handed."""
        try:
            if not self.lost:
                self._file.write(text)
        except (OSError, ValueError):
            self._failed()
        finally:
            self.written += 1

    def write_now(self, text: str) -> None:
        """The app's thread's own write (and flush) of ``text``."""
        if self.lost:
            return
        try:
            self._file.write(text)
            self._file.flush()
        except (OSError, ValueError):
            self._failed()

    def ready(self) -> bool:
        """The terminal takes a write now (it would not block)."""
        try:
            return bool(select.select([], [self._file.fileno()], [], 0)[1])
        except (OSError, ValueError):
            return False

    def flush(self) -> None:
        if self.lost:
            return
        try:
            self._file.flush()
        except (OSError, ValueError):
            self._failed()

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return self._file.isatty()


class QuietLinuxDriver(LinuxDriver):
    """:class:`LinuxDriver` whose input thread sleeps until input or until stopped."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event = _WakingEvent()
        self._suspended = False  # stopped by our SIGTSTP handler: a SIGCONT resumes
        self._file = _TerminalFile(self._file, self._output_lost)
        self._stopping = False  # the application mode ended for good: nothing resumes
        self._held: list[str] = []  # written in this turn of the app's loop, not sent yet

    def _sigtstp_application(self, *args) -> None:
        self._suspended = self._auto_restart and not self._stopping
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args) -> None:
        """Resume only what our SIGTSTP suspended: a SIGCONT also comes with a terminal's
        hang-up (to the controlling process) or from ``kill -CONT``, and resuming then
        started a second input thread (one the quitting app never stopped)."""
        if not self._suspended or self._stopping:
            return
        self._suspended = False
        super()._sigcont_application(*args)

    def input_timeout(self, parser: XTermParser) -> float | None:
        """How long the input thread may sleep: for ever, unless the parser waits to
        decide what a half-read sequence is (or does not say)."""
        pending = getattr(parser, "_timeout_time", TICK_S)
        return None if pending is None else TICK_S

    def run_input_thread(self) -> None:
        """Wait for input (or the stop) and dispatch events. Each run has its own wake
        pipe: Textual closes the driver when it suspends (Ctrl-Z) and starts a new input
        thread when it resumes."""
        wake, wake_w = os.pipe()
        os.set_blocking(wake, False)
        os.set_blocking(wake_w, False)
        self.exit_event.attach(wake_w)  # before the loop looks at the event: no stop lost
        selector = selectors.SelectSelector()
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        reading = True

        def process(events: list, final: bool = False) -> bool:
            """Dispatch what came in; False once the input has ended (end of file, or a
            hung-up terminal's error)."""
            ready = [mask for key, mask in events if key.fd == fileno]
            for last, mask in loop_last(ready):
                if mask & selectors.EVENT_READ:
                    try:
                        data = decode(os.read(fileno, 4096), final=final and last)
                    except OSError:  # EIO: the terminal hung up
                        return False
                    if not data:
                        return False
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return True

        def drain_wake() -> None:
            try:
                while os.read(wake, 512):
                    pass
            except OSError:  # empty (non-blocking) or closed
                pass

        try:
            while not self.exit_event.is_set():
                events = selector.select(self.input_timeout(parser) if reading else None)
                if any(key.fd == wake for key, _ in events):
                    drain_wake()
                if reading and not process(events):
                    # Textual's loop would spin on the ended input at 100 % of a core:
                    # wait for the stop alone, and say the terminal is gone
                    reading = False
                    selector.unregister(fileno)
                    self._loop.call_soon_threadsafe(self.on_input_ended)
            if reading:
                selector.unregister(fileno)
                process(selector.select(TICK_S), final=True)
        finally:
            self.exit_event.detach()
            selector.close()
            os.close(wake)
            os.close(wake_w)

    def write(self, data: str) -> None:
        """Hold ``data`` until :meth:`flush` or the end of this turn of the app's loop,
        then send it with the rest as one write (see the module docstring)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the app's loop (another thread, or none runs)
            loop = None
        if loop is None or self._writer_thread is None:
            self._send_held()
            self._queue(data)
            return
        if not self._held:
            loop.call_soon(self._send_held)  # a write that no flush follows
        self._held.append(data)

    def flush(self) -> None:
        self._send_held()
        super().flush()

    def _send_held(self) -> None:
        """Write what is held, as one write: here if the terminal takes it at once and
        the output thread has nothing left to write, else by that thread."""
        if not self._held or self._writer_thread is None:
            return
        held, self._held = self._held, []
        text = "".join(held)
        out = self._file
        if (isinstance(out, _TerminalFile) and out.queued <= 0
                and len(text) <= DIRECT_MAX_CHARS and out.ready()):
            out.write_now(text)
        else:
            self._queue(text)

    def _queue(self, text: str) -> None:
        """Hand ``text`` to the output thread (Textual's write)."""
        if isinstance(self._file, _TerminalFile):
            self._file.hand()
        super().write(text)

    def _output_lost(self) -> None:
        """A write to the terminal failed (output thread): the terminal is gone."""
        try:
            self._loop.call_soon_threadsafe(self.on_input_ended)
        except (AttributeError, RuntimeError):  # no loop yet, or it has closed
            pass

    def on_input_ended(self) -> None:
        """The terminal's input ended (it hung up): on the app's loop, the app's
        ``terminal_lost`` (it ends the session as ``q`` does)."""
        self._app.terminal_lost()

    def disable_input(self) -> None:
        """Textual's; once the app is shutting down (``App._shutdown`` calls this first),
        no later SIGCONT starts the input again."""
        if self._app is not None and not self._app._running:
            self._stopping = True
        super().disable_input()

    def close(self) -> None:
        """Stop the output thread, waiting for it at most :data:`STOP_S`: when the terminal
        went away its thread may have died on a write, leaving a full queue that Textual's
        ``close`` would wait on for ever (a UI whose tmux server was killed hung at exit)."""
        writer = self._writer_thread  # (Textual's close does this alone, unbounded)
        if writer is not None and writer.is_alive():
            stopping = threading.Thread(target=writer.stop, daemon=True,
                                        name="tuimeter-output-stop")
            stopping.start()
            stopping.join(STOP_S)
