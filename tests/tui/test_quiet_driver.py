"""The input thread of the UI's driver (``tuimeter/tui/_quiet_driver.py``): it sleeps until
there is input instead of waking ten times a second, and still delivers every key, a lone
Escape, and the stop; a terminal that hangs up ends the session instead of a spinning
thread. Driven over a pipe standing in for the terminal, on the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import sys
import threading
import time

import pytest
from textual import events
from textual._xterm_parser import XTermParser

from tuimeter.tui._quiet_driver import DIRECT_MAX_CHARS, TICK_S, QuietLinuxDriver

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the Linux/macOS driver")


class FakeApp:
    def __init__(self) -> None:
        self.lost = 0

    def terminal_lost(self) -> None:
        self.lost += 1


async def until(condition, timeout_s: float = 10.0, what: str = "condition"):
    """Let the loop run until ``condition()`` holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@contextlib.contextmanager
def driven():
    """A QuietLinuxDriver reading a pipe (the terminal), its input thread running (made
    inside a running loop: the driver keeps it); gives (driver, app, write end, events
    received)."""
    app = FakeApp()
    driver = QuietLinuxDriver(app)  # type: ignore[arg-type]
    r, w = os.pipe()
    driver.fileno = r
    received: list = []
    driver.process_message = received.append  # type: ignore[method-assign]
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    driver._key_thread = thread
    thread.start()
    try:
        yield driver, app, w, received
    finally:
        driver.exit_event.set()
        thread.join(5)
        driver.close()
        for fd in (r, w):
            try:
                os.close(fd)
            except OSError:
                pass


def test_the_thread_sleeps_without_a_timeout_unless_a_sequence_is_half_read():
    driver_timeout = QuietLinuxDriver.input_timeout
    parser = XTermParser()
    assert driver_timeout(None, parser) is None  # type: ignore[arg-type]
    list(parser.feed("\x1b"))  # a lone Escape: a key, or the start of a sequence?
    assert driver_timeout(None, parser) == TICK_S  # type: ignore[arg-type]
    list(parser.feed("[A"))  # it was the up arrow
    assert driver_timeout(None, parser) is None  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_keys_arrive_and_a_lone_escape_becomes_a_key():
    with driven() as (driver, app, w, received):
        keys = lambda: [e.key for e in received if isinstance(e, events.Key)]  # noqa: E731
        os.write(w, b"q")
        await until(lambda: "q" in keys(), what="the key q")
        os.write(w, b"\x1b")
        await until(lambda: "escape" in keys(), what="a lone Escape to time out into a key")
        assert keys() == ["q", "escape"]
        assert app.lost == 0


@pytest.mark.asyncio
async def test_stopping_input_wakes_the_sleeping_thread(monkeypatch):
    """The thread waits in select without a timeout while idle; Textual's disable_input
    (quit, suspend) sets exit_event and joins the thread: it must wake for that, not wait
    for a key."""
    waits: list = []
    real_select = selectors.SelectSelector.select

    def select(self, timeout=None):
        waits.append(timeout)
        return real_select(self, timeout)

    monkeypatch.setattr(selectors.SelectSelector, "select", select)
    with driven() as (driver, app, w, received):
        thread = driver._key_thread
        await until(lambda: waits, what="the thread to wait for input")
        assert thread.is_alive() and waits == [None]
        driver.exit_event.set()
        thread.join(5)
        assert not thread.is_alive()
        assert app.lost == 0


@pytest.mark.asyncio
async def test_an_ended_input_tells_the_app_once_and_stops_reading():
    """The terminal hangs up (the pipe's writer closes: end of file): the app's
    terminal_lost is called once on its loop, and the thread stops reading (it spun at
    100 % of a core on the ended input before), then ends when input is stopped."""
    with driven() as (driver, app, w, received):
        os.close(w)
        await until(lambda: app.lost == 1, what="terminal_lost")
        await asyncio.sleep(0.1)
        assert app.lost == 1
        driver.exit_event.set()
        driver._key_thread.join(5)
        assert not driver._key_thread.is_alive()


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
async def test_closing_never_waits_for_ever_on_an_output_thread_that_died():
    """The terminal went away: the output thread died on a write (EIO) with writes still
    queued, and Textual's close put its stop into the full queue and waited for ever (a UI
    whose tmux server was killed hung at exit). Closing returns within STOP_S."""
    from textual.drivers._writer_thread import MAX_QUEUED_WRITES, WriterThread

    class GoneTerminal:
        def write(self, text):
            raise OSError(5, "Input/output error")

        def flush(self):
            pass

    driver = QuietLinuxDriver(FakeApp())  # type: ignore[arg-type]
    writer = WriterThread(GoneTerminal())  # type: ignore[arg-type]
    writer.start()
    writer.write("first frame")  # the write that fails: the thread dies
    writer.join(5)
    assert not writer.is_alive()
    for _ in range(MAX_QUEUED_WRITES):  # frames still queued for the dead thread
        writer.write("frame")
    driver._writer_thread = writer
    closing = threading.Thread(target=driver.close, daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive()


@contextlib.contextmanager
def _writing():
    """A QuietLinuxDriver writing to a pipe (the terminal) through its output thread, as
    in application mode; gives (driver, terminal file, read end)."""
    from textual.drivers._writer_thread import WriterThread

    from tuimeter.tui._quiet_driver import _TerminalFile

    r, w = os.pipe()
    os.set_blocking(r, False)
    driver = QuietLinuxDriver(FakeApp())  # type: ignore[arg-type]
    out = _TerminalFile(os.fdopen(w, "w", encoding="utf-8"), lambda: None)
    driver._file = out
    driver._writer_thread = writer = WriterThread(out)  # type: ignore[arg-type]
    writer.start()
    try:
        yield driver, out, r
    finally:
        writer.stop()
        os.close(r)
        out._file.close()


def _read(fd: int) -> bytes:
    got = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 1 << 16):
            got += chunk
    return got


@pytest.mark.asyncio
async def test_a_frame_is_one_write_by_the_apps_thread_when_the_terminal_is_ready():
    """The app writes a frame as three writes (the synchronized update's start, the
    frame, its end) and flushes: a ready terminal gets them as one write made by the
    app's thread (the output thread, woken for each, is left asleep); a write no flush
    follows goes at the end of the loop's turn."""
    with _writing() as (driver, out, r):
        for part in ("\x1b[?2026h", "frame 1", "\x1b[?2026l"):
            driver.write(part)
        assert _read(r) == b""  # held until the flush
        driver.flush()
        assert _read(r) == b"\x1b[?2026hframe 1\x1b[?2026l"
        driver.write("\x07")  # no flush follows (a bell)
        got = bytearray()
        await until(lambda: got.extend(_read(r)) or got == b"\x07", what="the bell")
        assert out.handed == 0  # the output thread wrote nothing


@pytest.mark.asyncio
async def test_a_terminal_that_is_not_ready_gets_the_frames_in_order_from_the_thread():
    """A terminal that does not take a write now (its buffer full: a slow link): the
    frame goes to the output thread, and so does every one after it until that thread
    has written them all, so the frames arrive in order and the app's thread never
    blocks on the terminal; a frame too long goes to the thread too."""
    with _writing() as (driver, out, r):
        def fill() -> None:  # more than the pipe holds: it blocks until read
            out._file.write("x" * (1 << 20))
            out._file.flush()

        threading.Thread(target=fill, daemon=True).start()
        await until(lambda: not out.ready(), what="a full terminal")
        driver.write("frame 1")
        driver.flush()
        driver.write("frame 2")
        driver.flush()
        assert out.handed == 2  # both to the output thread
        got = bytearray()
        await until(lambda: got.extend(_read(r)) or got.endswith(b"frame 2"),
                    what="the frames")
        assert got.lstrip(b"x") == b"frame 1frame 2"
        await until(lambda: out.queued == 0, what="the queue written")
        driver.write("y" * (DIRECT_MAX_CHARS + 1))  # too long
        driver.flush()
        assert out.handed == 3


@pytest.mark.asyncio
async def test_input_works_again_after_a_suspend():
    """Ctrl-Z / SIGTSTP: Textual stops input (exit_event), closes the driver, and on
    SIGCONT starts a new input thread. The wake pipe was the driver's and close() closed
    it: the new thread died on ``Invalid file descriptor: -1`` (a traceback after `fg`)."""
    with driven() as (driver, app, w, received):
        driver.exit_event.set()  # suspend: disable_input ...
        driver._key_thread.join(5)
        driver.exit_event.clear()
        driver.close()  # ... then close
        failed: list = []

        def resumed() -> None:
            try:
                driver.run_input_thread()
            except BaseException as exc:  # noqa: BLE001 (what the thread died of)
                failed.append(exc)

        thread = driver._key_thread = threading.Thread(target=resumed, daemon=True)
        thread.start()
        os.write(w, b"q")
        await until(lambda: any(isinstance(e, events.Key) and e.key == "q"
                                for e in received) or failed, what="a key after resuming")
        assert failed == []
