"""The stack sampler that runs inside the profiled program, and its bootstrap.

Standard library only, no import of the rest of tuimeter: ``tuimeter profile`` runs
``boot.py`` beside it *by its path* with the program's own interpreter (``python
.../boot.py --out FILE --rate HZ -- SCRIPT ARGS``), which may be another Python than
tuimeter's (a project's venv without tuimeter); it loads this file by its path and calls
:func:`start_program` (``python sampler.py ...`` works too, through ``boot.py``). As
``python -m cProfile`` does, the bootstrap sets ``sys.argv``
and ``sys.path[0]`` as ``python SCRIPT`` (or ``python -m MODULE``) would and runs the
program unmodified (a source file at ``boot.py``'s top level, anything else with
:mod:`runpy`). ``Meter(profile=True)`` imports the same
:class:`StackSampler` and runs it on a thread of the calling process.

Each sample (every ``1 / rate_hz`` s: in a signal handler of the main thread, or on a
daemon thread, :meth:`StackSampler.start`) records, for every Python
thread but tuimeter's own, its stack (``sys._current_frames()``) and the CPU seconds it
used since the previous sample (its per-thread CPU clock: on Linux the kernel's clock of
the thread id, which ``clock_gettime`` reads without opening /proc). A thread waiting on
I/O, a lock or ``join()`` uses no CPU in that time, so it gets no CPU energy later. Two
more figures per sample: the CPU time of tuimeter's own threads (the sampler itself, and in
``Meter`` mode the engine), and ``other``: process CPU time no Python thread accounts for
(native threads such as BLAS or OpenMP pools, threads that ended between two samples).
Where no per-thread clock exists (macOS), the CPU figures are None and every sampled
thread weighs the same.

Records (one JSON list per line in the file; a list per record in memory)::

    ["B", t_s, startup_cpu_s, rate_hz, pid]      start: CPU used before sampling began
    ["F", frame_id, qualified_name, file, line]  a function, defined before first use
    ["K", stack_id, [frame_id, ...]]             a stack, outermost first
    ["S", t_s, dt_s, [[stack_id, cpu_s], ...], other_cpu_s, tuimeter_cpu_s]
    ["E", t_s]                                   the end (missing after os._exit or a kill)

``t_s`` is ``time.monotonic()``: one clock for every process of the machine on Linux and
macOS, so the parent places samples on its own ticks. A sample covers ``(t_s - dt_s, t_s]``.
"""

import io
import os
import sys
import threading
import time

DEFAULT_RATE_HZ = 100.0
#: how often the file sink hands its buffer to the OS, s (a killed program keeps the rest)
FLUSH_EVERY_S = 0.25
#: the longest the sampler's thread sleeps before it looks whether it was stopped, s
STOP_POLL_S = 0.05
#: in the signal way, the wall timer's period (a waiting host is sampled that often), and
#: how often the watcher thread looks whether the signals still come, s
WATCH_S = 0.25
#: ``TUIMETER_PROFILE_SAMPLER=thread`` in the program's environment: the thread way (the
#: signal way is the default where it can be set up)
SAMPLER_ENV = "TUIMETER_PROFILE_SAMPLER"
#: the function name given to the CPU time of tuimeter's own threads
TUIMETER_FRAME = "[tuimeter]"
STARTUP_FRAME = "[interpreter startup]"
#: the name prefix of tuimeter's own threads (their CPU goes to TUIMETER_FRAME)
OUR_THREADS = "tuimeter-"


_LINUX = sys.platform.startswith("linux")


def thread_cpu_clock(native_id):
    """The clock id of thread ``native_id``'s CPU time, or None where there is none.

    Linux: the kernel's per-thread CPU clock, ``MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)``
    (``((~tid) << 3) | 6``, what glibc's ``pthread_getcpuclockid`` returns), read by
    ``clock_gettime`` for any thread of this process. Built from the thread id, not from
    a ``pthread_t``, so a thread that has ended gives EINVAL instead of undefined behaviour.
    """
    if native_id is None or not _LINUX:
        return None
    return ((~native_id) << 3) | 6


def thread_cpu_s(native_id):
    """CPU seconds thread ``native_id`` has used, or None (ended, or no per-thread clock)."""
    clock = thread_cpu_clock(native_id)
    if clock is None:
        return None
    try:
        return time.clock_gettime(clock)
    except (OSError, OverflowError):
        return None


def function_of(code):
    """(qualified name, file, first line) of a code object: the function's identity."""
    name = getattr(code, "co_qualname", None) or code.co_name
    return name, code.co_filename, code.co_firstlineno


class StackSampler:
    """Samples every Python thread's stack and CPU time; hands records to ``sink``.

    ``sink(record)`` takes each record (see the module docstring); it is called on the
    sampler's thread (and on the caller's by :meth:`start` and :meth:`stop`). Everything
    it reads is injectable, so tests drive :meth:`sample` with a fake clock and fake
    frames: ``clock`` (s), ``frames`` (thread ident -> innermost frame), ``threads`` (the
    threads: objects with ``ident`` and ``native_id``), ``thread_cpu`` (native id -> CPU s
    or None), ``process_cpu`` and ``own_cpu`` (this process's and the calling thread's
    CPU s). ``ignore``: idents of other threads of tuimeter's own (their CPU goes to
    :data:`TUIMETER_FRAME`; threads named :data:`OUR_THREADS`... are found by name).
    ``cut``: code objects where a stack is cut, that frame and all outer ones left out
    (the bootstrap cuts at ``runpy._run_code``, so a stack starts at the program's
    ``<module>``).
    """

    def __init__(self, sink, rate_hz=DEFAULT_RATE_HZ, *, clock=time.monotonic,
                 frames=sys._current_frames, threads=threading.enumerate,
                 thread_cpu=thread_cpu_s, process_cpu=time.process_time,
                 own_cpu=time.thread_time, ignore=(), cut=()):
        if not rate_hz > 0:
            raise ValueError("rate_hz must be > 0")
        self.sink = sink
        self.period_s = 1.0 / rate_hz
        self.rate_hz = rate_hz
        self.clock = clock
        self.frames = frames
        self.threads = threads
        self.thread_cpu = thread_cpu
        self.process_cpu = process_cpu
        self.own_cpu = own_cpu
        self.ignore = set(ignore)
        self._cut = {id(code) for code in cut}
        self._cut_codes = list(cut)  # kept alive, so their ids stay theirs
        self.own_ident = None  # the sampling thread's ident (never sampled)
        self.samples = 0
        self._frame_ids = {}  # id(code) -> frame id
        self._codes = []  # keeps every interned code object alive (ids stay unique)
        self._stack_ids = {}  # tuple of frame ids -> stack id
        self._by_codes = {}  # tuple of the frames' code ids, innermost first -> stack id
        self._last_cpu = {}  # ident -> CPU s at the last sample
        self._native_ids = {}  # ident -> native thread id (threading.enumerate is slow)
        self._ours = set()  # idents of threads named OUR_THREADS...
        self._last_t = None
        self._last_proc = 0.0
        self._last_own = 0.0
        self._stop = threading.Event()
        self._thread = None
        #: the signal way: the thread whose handler takes the samples (its CPU minus the
        #: handler's is the program's), the handler's CPU so far, the timer
        self.host_ident = None
        self._handler_cpu = 0.0
        self._timer = self._wall_timer = None
        self._guarded = self._real_signal = None
        self._old_handler = None  # the signal's handler before the sampler's
        self._started = False
        self._busy = threading.Lock()  # one sample at a time (handler or watcher)
        self._watcher_lock = threading.Lock()  # one watcher (any thread may start it)
        self.signal_samples = 0

    # -- one sample -----------------------------------------------------------------
    def begin(self, startup_cpu_s=None):
        """The start record; every thread alive now counts its CPU from here.
        ``startup_cpu_s``: CPU the process used before (the engine counts it too); True:
        all the process's CPU time so far (the bootstrap: the interpreter's start and its
        own set-up, which ends here); None: none of it is the profile's."""
        now = self.clock()
        self._last_t = now
        self._last_proc = self.process_cpu()
        if startup_cpu_s is True:
            startup_cpu_s = self._last_proc
        self._last_own = self.own_cpu()
        natives = self._native_ids = self._natives()
        for ident, native in natives.items():
            if ident != self.own_ident:
                self._last_cpu[ident] = self.thread_cpu(native)
        cpu = 0.0 if startup_cpu_s is None else startup_cpu_s
        self.sink(["B", now, cpu, self.rate_hz, os.getpid()])

    def _natives(self):
        """ident -> native id of every thread; tuimeter's own (named ``tuimeter-...``: the
        engine, the marker server, exporters) are noted on the way. Called again whenever
        the set of threads changes: an ident is reused by a new thread once one ends."""
        threads = self.threads()
        self._ours = {t.ident for t in threads
                      if str(getattr(t, "name", "")).startswith(OUR_THREADS)}
        natives = {t.ident: getattr(t, "native_id", None) for t in threads}
        # in a child made by os.fork, Python 3.11 keeps the parent's task id on the main
        # thread (the forking thread, whose task id is now the process id): its CPU clock
        # is another process's, unreadable, and its functions got no CPU time
        main = threading.main_thread().ident
        nid = natives.get(main)
        pid = os.getpid()
        if _LINUX and nid is not None and nid != pid and self.thread_cpu(nid) is None \
                and self.thread_cpu(pid) is not None:
            natives[main] = pid
        return natives

    def sample(self, frame=None):
        """Take one sample now (the sampling thread calls this; tests call it directly).
        ``frame``: the frame a signal handler interrupted, the stack of the thread it runs
        on (the signal way: :meth:`_on_signal`)."""
        now = self.clock()
        frames = self.frames()
        if frame is not None:  # not the handler's own frames: what it interrupted
            frames[threading.get_ident()] = frame
        elif self.host_ident in frames:  # the watcher's sample: the host may be in the
            f = frames[self.host_ident]  # handler (waiting for it, or starting this very
            handler = None               # thread): what the outermost handler interrupted
            while f is not None:
                if f.f_code is _HANDLER_CODE:
                    handler = f
                f = f.f_back
            if handler is not None and handler.f_back is not None:
                frames[self.host_ident] = handler.f_back
            elif handler is not None:
                del frames[self.host_ident]
        natives = self._native_ids
        if natives.keys() != frames.keys():  # threads came or went: look again
            natives = self._native_ids = self._natives()
        proc = self.process_cpu()
        own = self.own_cpu()
        dt = max(0.0, now - self._last_t) if self._last_t is not None else 0.0
        entries = []
        python_cpu = 0.0
        own_used = tuimeter_cpu = max(0.0, own - self._last_own)
        host = self.host_ident
        last_cpu = self._last_cpu
        seen = {}
        for ident, frame in frames.items():
            if ident == self.own_ident:
                continue
            cpu = self.thread_cpu(natives.get(ident))
            seen[ident] = cpu
            before = last_cpu.get(ident, 0.0)  # a new thread counts from its birth
            used = None if cpu is None or before is None else max(0.0, cpu - before)
            if used is not None and ident == host:  # the handler's CPU is tuimeter's
                used = max(0.0, used - own_used)
            if used is not None:
                python_cpu += used
            if ident in self.ignore or ident in self._ours:
                tuimeter_cpu += used or 0.0
                continue
            entries.append([self._stack_id(frame), used])
        self._last_cpu = seen
        other = max(0.0, (proc - self._last_proc) - python_cpu - own_used)
        self._last_t, self._last_proc, self._last_own = now, proc, own
        self.samples += 1
        self.sink(["S", now, dt, entries, other, tuimeter_cpu])

    def _stack_id(self, frame):
        """The stack's id, by the code objects of its frames (innermost first).

        The hot path of every sample: it only collects the code objects' ids and looks
        the tuple up (a seen stack costs one dict lookup, no call per frame); a new
        stack interns its functions. Every code object in a key stays alive in
        ``_codes`` (interned on the first sight of its stack), so no id in a key is
        ever another code's."""
        codes = []
        append = codes.append
        f = frame
        cut = self._cut
        while f is not None:
            c = id(f.f_code)
            if c in cut:
                break
            append(c)
            f = f.f_back
        key = tuple(codes)
        sid = self._by_codes.get(key)
        if sid is not None:
            return sid
        ids = []
        f = frame
        for _ in codes:
            ids.append(self._frame_id(f.f_code))
            f = f.f_back
        ids.reverse()
        frames_key = tuple(ids)
        sid = self._stack_ids.get(frames_key)
        if sid is None:
            sid = self._stack_ids[frames_key] = len(self._stack_ids)
            self.sink(["K", sid, ids])
        self._by_codes[key] = sid
        return sid

    def _frame_id(self, code):
        fid = self._frame_ids.get(id(code))
        if fid is None:
            fid = self._frame_ids[id(code)] = len(self._codes)
            self._codes.append(code)
            name, path, line = function_of(code)
            self.sink(["F", fid, name, path, line])
        return fid

    # -- the thread, or the signal -------------------------------------------------
    def start(self, startup_cpu_s=None, signals=False):
        """Write the start record, then sample until :meth:`stop`: on a daemon thread, or
        with ``signals`` (from the main thread, on Linux) in a signal handler of the
        calling thread, two POSIX timers sending it a signal (one every period of its CPU
        time, one every :data:`WATCH_S` of wall time), and no thread of tuimeter's own
        until the program has a second thread of its own (the thread way where the timers
        cannot be set up). A process's first extra thread makes the C library take its
        locks and cancellation points on every ``malloc`` and system call, 4% more
        instructions for a program of small reads and writes, and each of the thread
        way's samples is a GIL hand-off; the signal way has neither (docs/profile.md,
        "Overhead"). The timers and the handler are set up before the start record (so
        that their set-up is not in the first sample) and set going after it."""
        ready = signals and self._prepare_signals()
        self.begin(startup_cpu_s)
        self._started = True
        if ready and self._arm():
            if threading.active_count() > 1:  # the program's own threads: watch them
                self._start_watcher()
            elif getattr(threading, "getprofile", None) and threading.getprofile() is None:
                threading.setprofile(self._on_new_thread)  # and once it starts one
            return
        self._thread = threading.Thread(target=self._run, name="tuimeter-profiler",
                                        daemon=True)
        self._thread.start()

    def _on_new_thread(self, frame, event, arg):
        """The profile function of the program's first thread (``threading.setprofile``:
        each new thread calls it at its first event): the watcher starts at once, not at
        the handler's next sample, up to :data:`WATCH_S` later while the host waits (the
        new thread's work would be charged to the ticks after it ran). Called once: it
        takes itself away."""
        sys.setprofile(None)
        self._unhook()
        self._start_watcher()

    def _unhook(self):
        if getattr(threading, "getprofile", None) \
                and threading.getprofile() == self._on_new_thread:
            threading.setprofile(None)

    def _start_watcher(self):
        """The signal way's thread (:meth:`_watch`), once: when the host cannot run the
        handler while other threads run (they exist, or the program took the signal)."""
        with self._watcher_lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._watch, name="tuimeter-profiler",
                                            daemon=True)
            self._thread.start()

    def _prepare_signals(self):
        """The signal way, made ready: a handler on this thread, two timers to send it
        its signal (:meth:`_arm` sets them going). False (nothing changed) where there is
        none: not the main thread, not Linux, no ``ctypes``, no free signal, or the
        timers refused."""
        if not _LINUX or threading.current_thread() is not threading.main_thread():
            return False
        import signal

        signo = _free_signal(signal)
        if signo is None:
            return False
        try:
            tid = threading.get_native_id()
            timer = SignalTimer(signo, tid, thread_cpu_clock(tid))
        except (OSError, ImportError, AttributeError, ValueError):
            return False
        try:
            wall = SignalTimer(signo, tid, time.CLOCK_MONOTONIC)
        except (OSError, AttributeError, ValueError):
            timer.delete()
            return False
        self._old_handler = signal.getsignal(signo)
        try:
            signal.signal(signo, self._on_signal)
        except (OSError, ValueError):
            timer.delete()
            wall.delete()
            return False
        self._thread_own_cpu = self.own_cpu
        self.host_ident = threading.get_ident()
        self._handler_cpu = 0.0
        self._last_own = 0.0
        self.own_cpu = self._handler_cpu_s
        self._timer, self._wall_timer = timer, wall
        self._guard(signal, signo)
        return True

    def _arm(self):
        """The prepared timers set going: one every period of this thread's CPU time, one
        every :data:`WATCH_S` of wall time. False (the signal way undone, the thread way
        to follow) if the kernel refuses."""
        try:
            self._timer.arm(self.period_s)
            self._wall_timer.arm(WATCH_S)
        except OSError:
            self._disarm()
            self.host_ident, self.own_cpu = None, self._thread_own_cpu
            self._last_own = self.own_cpu()
            return False
        return True

    def _guard(self, signal, signo):
        """``signal.signal`` wrapped: a program that gives the timers' signal another
        handler (or the default) has the watcher thread sample from then on."""
        real = self._real_signal = signal.signal

        def signal_(signalnum, handler):
            old = real(signalnum, handler)
            if signalnum == signo and handler != self._on_signal:
                self._start_watcher()
            return old

        signal_.__doc__, signal_.__wrapped__ = real.__doc__, real
        signal.signal = self._guarded = signal_

    def _handler_cpu_s(self):
        return self._handler_cpu

    def _on_signal(self, signum, frame):
        """The signal way's sample, on the host thread between two of its bytecodes: no
        other thread takes the GIL for it. Its own CPU time goes to :data:`TUIMETER_FRAME`.
        Never raises into the program: a failing sample stops the signals (the watcher
        thread samples from then on)."""
        if frame is None or not self._busy.acquire(False):
            return  # the watcher is sampling: this period is in its sample
        lost = False
        try:
            if self.clock() - self._last_t < 0.5 * self.period_s:
                return  # the wall timer's signal just after the CPU timer's sample
            start = time.thread_time()
            self.sample(frame)
            self.signal_samples += 1
            if self._thread is None and threading.active_count() > 1:
                self._start_watcher()  # the program's threads run while the host waits
            self._handler_cpu += time.thread_time() - start
        except Exception:
            self._disarm()
            lost = True
        finally:
            self._busy.release()
        if lost and self._thread is None:
            self._start_watcher()

    def _watch(self):
        """The signal way's thread, started once the program has a thread of its own (or
        has taken the signal). The CPU timer counts the host thread's CPU time, so a host
        that waits (``sleep``, ``join()``, I/O) is not signalled by it but every
        :data:`WATCH_S` by the wall timer, and one inside a long C call that lets the
        GIL go cannot run the handler at all, while the program's other threads run:
        then this thread samples. Every :data:`WATCH_S` it looks whether the CPU
        timer's samples still come (twice since the last look, the last within 1.5
        periods); if not it samples every period itself, as the thread way does (the
        host is not holding the GIL then), until the handler samples in two periods in a
        row. Each of its wake-ups takes the GIL: it stands down at once. Its CPU time is
        tuimeter's (its name). Between looks it waits on the stop event (:meth:`stop`
        need not wait for it)."""
        period = self.period_s
        late_s = 1.5 * period
        clock, wait, stopped = self.clock, self._stop.wait, self._stop.is_set
        behind, seen, streak = True, self.signal_samples, 0
        sleep, next_t = time.sleep, clock() + period
        while True:
            if behind:  # on a grid of periods: the GIL's wait is not added to each
                gap = next_t - clock()
                if gap > 0:
                    sleep(gap)
                if stopped():
                    break
                next_t += period
                now = clock()
                if next_t < now:  # fell behind (a busy machine): skip, do not burst
                    next_t = now + period
            elif wait(WATCH_S):
                break
            else:
                next_t = clock() + period
            new, seen = self.signal_samples - seen, self.signal_samples
            # the handler's samples come in time: stand down. The CPU timer's, that is:
            # the wall timer's come once every WATCH_S (a waiting host), so behind, the
            # handler must have sampled in two periods in a row, and standing down, twice
            # since the last look (when behind, a recent sample may be this thread's own)
            streak = streak + 1 if new and behind else 0
            recent = clock() - self._last_t <= late_s
            if recent and (streak >= 2 if behind else new >= 2):
                behind = False
                continue
            behind = True
            if self._busy.acquire(False):
                try:
                    self.sample()
                finally:
                    self._busy.release()

    def _disarm(self):
        """No more signals, and the signal's handler as it was: ignored for an instant
        first, which drops a signal still on its way (never the default action, which
        for a real-time signal ends the process), then set back to what it was before
        (a child process inherits an ignored signal: one left ignored made a profiled
        program's ``tuimeter profile`` children choose a real-time signal). A handler
        the program set meanwhile is left alone. ``signal.signal`` is the program's own
        again."""
        timer, self._timer = self._timer, None
        wall, self._wall_timer = self._wall_timer, None
        if timer is None:
            return
        import signal

        timer.delete()
        if wall is not None:
            wall.delete()
        if getattr(signal, "signal", None) is self._guarded:
            signal.signal = self._real_signal
        signo = timer.signo
        try:
            now = signal.getsignal(signo)
            if now == self._on_signal or now == signal.SIG_DFL:
                self._real_signal(signo, signal.SIG_IGN)
                self._real_signal(signo, self._old_handler if now == self._on_signal
                                  else now)
        except ValueError:  # not the main thread (a failed sample in the watcher)
            pass

    def _run(self):
        """Sample every period until stopped. It sleeps with ``time.sleep`` (one system
        call, the GIL let go) rather than waiting on the stop event, whose timed wait
        builds and takes locks in Python each time: the profiled program pays for
        every bytecode this thread runs. :meth:`stop` sets the event and waits at most
        :data:`STOP_POLL_S` (or a period) for this thread to see it."""
        self.own_ident = threading.get_ident()
        self._last_cpu.pop(self.own_ident, None)
        self._last_own = self.own_cpu()
        period = self.period_s
        clock, sleep, stopped = self.clock, time.sleep, self._stop.is_set
        next_t = clock() + period
        while True:
            wait = next_t - clock()
            if wait > STOP_POLL_S:  # a long period: look at the stop flag on the way
                sleep(STOP_POLL_S)
                if stopped():
                    break
                continue
            if wait > 0:
                sleep(wait)
            if stopped():
                break
            self.sample()
            next_t += period
            now = clock()
            if next_t < now:  # fell behind (a busy machine): skip, do not burst
                next_t = now + period
        self.sample()  # up to the end
        self.sink(["E", self.clock()])

    def stop(self, caller_is_ours=False):
        """Stop sampling after one last sample and the end record (idempotent).
        ``caller_is_ours``: the calling thread runs tuimeter's code from now on (the
        bootstrap's exit handler), so its CPU time goes to :data:`TUIMETER_FRAME`."""
        if not self._started:
            return
        self._started = False
        if caller_is_ours:
            self.ignore.add(threading.get_ident())
        signalled = self.host_ident is not None
        if signalled:
            self._disarm()
            self._unhook()
        with self._watcher_lock:  # no watcher starts after this
            self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        if signalled:  # the thread way's thread takes these itself
            with self._busy:
                self.sample()  # up to the end
            self.sink(["E", self.clock()])


_HANDLER_CODE = StackSampler._on_signal.__code__


class SignalTimer:
    """A POSIX timer (``timer_create``, Linux) on clock ``clock_id`` (the thread's own
    CPU clock: only its running time counts) that sends signal ``signo`` to thread
    ``tid`` of this process (``SIGEV_THREAD_ID``) every period, through ``ctypes``.
    Unlike ``setitimer``, it is not the program's ``alarm()``, it interrupts only that
    thread's system calls, and ``exec`` deletes it (an interval timer would go on
    signalling the new program, whose default action for it is to end)."""

    SIGEV_THREAD_ID = 4

    def __init__(self, signo, tid, clock_id):
        import ctypes

        c = ctypes
        libc = c.CDLL(None, use_errno=True)
        if not hasattr(libc, "timer_create"):  # glibc before 2.34: librt
            libc = _librt(c)
        header = c.sizeof(c.c_void_p) + 2 * c.sizeof(c.c_int)

        class Sigevent(c.Structure):  # struct sigevent: 64 bytes on Linux
            _fields_ = [("value", c.c_void_p), ("signo", c.c_int), ("notify", c.c_int),
                        ("tid", c.c_int), ("pad", c.c_int * ((64 - header) // 4 - 1))]

        class Timespec(c.Structure):
            _fields_ = [("sec", c.c_long), ("nsec", c.c_long)]

        class Itimerspec(c.Structure):
            _fields_ = [("interval", Timespec), ("value", Timespec)]

        self._c, self._libc, self._spec = c, libc, (Timespec, Itimerspec)
        self.signo = signo
        event = Sigevent(None, signo, self.SIGEV_THREAD_ID, tid)
        self._id = c.c_void_p()
        libc.timer_create.argtypes = [c.c_int, c.POINTER(Sigevent), c.POINTER(c.c_void_p)]
        if libc.timer_create(clock_id, c.byref(event), c.byref(self._id)) != 0:
            raise OSError(c.get_errno(), "timer_create")

    def arm(self, period_s):
        Timespec, Itimerspec = self._spec
        ns = max(1000, int(period_s * 1e9))
        every = Timespec(ns // 1_000_000_000, ns % 1_000_000_000)
        spec = Itimerspec(every, every)
        c = self._c
        self._libc.timer_settime.argtypes = [c.c_void_p, c.c_int, c.POINTER(Itimerspec),
                                             c.c_void_p]
        if self._libc.timer_settime(self._id, 0, c.byref(spec), None) != 0:
            raise OSError(c.get_errno(), "timer_settime")

    def delete(self):
        if self._id is not None:
            self._libc.timer_delete.argtypes = [self._c.c_void_p]
            self._libc.timer_delete(self._id)
            self._id = None


def _librt(c):
    """The C library's real-time part (``timer_create`` before glibc 2.34). By its usual
    name first: ``ctypes.util`` imports ``subprocess``, ``shutil`` and ``tempfile``
    (the second largest part of the bootstrap's start)."""
    try:
        return c.CDLL("librt.so.1", use_errno=True)
    except OSError:
        import ctypes.util

        return c.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)


def _free_signal(signal):
    """The signal the timer sends: ``SIGURG`` while it has no handler, by default or
    ignored (its default action is to be ignored, so a program that sets every handler
    back to the default loses its samples, not its life: the watcher thread samples
    then), else a real-time signal with no handler (from the top: programs and libraries
    that use one take ``SIGRTMIN`` upwards), or None."""
    urg = getattr(signal, "SIGURG", None)
    if urg is not None and signal.getsignal(urg) in (signal.SIG_DFL, signal.SIG_IGN):
        return urg
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    if low is None or high is None:
        return None
    for signo in range(high - 1, low + 3, -1):
        if signal.getsignal(signo) == signal.SIG_DFL:
            return signo
    return None


def _json_text(s):
    """``s`` as a JSON string, every character outside printable ASCII escaped (a
    lone surrogate from an undecodable file name too, as ``json.dumps`` does)."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o > 0xFFFF:
            o -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 | (o >> 10), 0xDC00 | (o & 0x3FF)))
        else:
            out.append("\\u%04x" % o)
    return '"' + "".join(out) + '"'


def _json(value):
    """A start, function, stack or end record (strings, numbers, lists of them) as
    JSON, without the ``json`` module: with the ``re`` it imports, it was the largest
    part of the bootstrap's start (``python -X importtime``), for four kinds of record."""
    if isinstance(value, str):
        return _json_text(value)
    if isinstance(value, list):
        return "[" + ",".join([_json(v) for v in value]) + "]"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def encode_sample(record):
    """An "S" record as a JSON line, to the microsecond (twice as fast as json.dumps:
    this runs in the profiled program, up to a thousand times a second)."""
    _k, t, dt, entries, other, ours = record
    threads = ",".join(["[%d,null]" % sid if cpu is None else "[%d,%.7f]" % (sid, cpu)
                        for sid, cpu in entries])
    return '["S",%.6f,%.6f,[%s],%.7f,%.7f]\n' % (t, dt, threads, other, ours)


#: the sink's descriptor is moved at or above this number where the limit allows: a
#: program that closes its descriptors and opens files gets the lowest free numbers
HIGH_FD = 512
_OPEN = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class FileSink:
    """Records as JSON lines in a file, written every :data:`FLUSH_EVERY_S` (a killed
    program keeps what was written). The records wait in a list, not in a file object's
    buffer: a child made by ``os.fork`` drops its copy of them instead of writing them a
    second time when it exits.

    The descriptor survives the program's descriptor hygiene (``os.closerange(3, ...)``,
    python-daemon's ``DaemonContext``, servers that close what they did not open): it is
    checked by device and inode (``fstat``) before every write and before it is closed.
    When the number is no longer this file (closed, or now a file the program opened), it
    is left alone, never written to or closed, and the file is opened again by its path
    (appending, no link followed) and checked to be the same file; if it is not (removed
    or replaced), the profile ends there and the program runs on. ``reopened`` counts
    those. What remains is the instant between the ``fstat`` and the ``write``: another
    thread of the program would have to close this descriptor and open a file that gets
    its number in those microseconds; the descriptor sits at :data:`HIGH_FD` or above to
    make that number an unlikely one for the program to be given."""

    def __init__(self, path, clock=time.monotonic):
        self.path = path = os.path.abspath(path)  # opened again after a chdir too
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OPEN, 0o600)
        self.fd = _high(fd)
        st = os.fstat(self.fd)
        self._ident = (st.st_dev, st.st_ino)
        self.reopened = 0
        self.clock = clock
        self._records = []
        self._flushed = clock()
        self._lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def __call__(self, record):
        # the record itself waits, encoded at the flush: formatting each sample in the
        # handler, between two of the program's bytecodes, slowed a CPU-bound program by
        # 4-10% at 100 Hz (more than the formatting's own time: its allocations among
        # the program's); a batch every FLUSH_EVERY_S did not (bench_profile.py)
        with self._lock:
            if self.fd is None:
                return
            self._records.append(record)
            if record[0] == "S" and self.clock() - self._flushed >= FLUSH_EVERY_S:
                self._flush()

    def _is_ours(self, fd):
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def _own_fd(self):
        """The descriptor of this sink's file, opened again if the program took the old
        number; None when the file is gone (the profile ends)."""
        if self.fd is not None and self._is_ours(self.fd):
            return self.fd
        self.fd = None  # the number is the program's now (or nothing): never touched
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | _OPEN)
        except OSError:
            return None
        fd = _high(fd)
        if not self._is_ours(fd):
            os.close(fd)
            return None
        self.reopened += 1
        self.fd = fd
        return fd

    def _flush(self):
        data = "".join([encode_sample(r) if r[0] == "S" else _json(r) + "\n"
                        for r in self._records]).encode("ascii")
        self._records = []
        self._flushed = self.clock()
        fd = self._own_fd()
        try:
            while data and fd is not None:
                data = data[os.write(fd, data):]
        except OSError:  # the disk is full: the profile ends here, the program runs on
            self._close_own()

    def _close_own(self):
        if self.fd is not None and self._is_ours(self.fd):
            os.close(self.fd)
        self.fd = None

    def _forget(self):
        self._lock = threading.Lock()  # held by another thread of the parent, maybe
        self._records = []
        self.fd = None  # the parent's: never written from here

    def close(self):
        with self._lock:
            if self.fd is not None:
                self._flush()
                self._close_own()


def _high(fd):
    """``fd`` moved to a number at or above :data:`HIGH_FD` (close-on-exec) where the
    descriptor limit allows; ``fd`` itself otherwise."""
    try:
        import fcntl
        import resource

        if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= HIGH_FD:
            return fd
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)
    except (ImportError, OSError, ValueError, AttributeError):
        return fd
    os.close(fd)
    return high


# -- the bootstrap ------------------------------------------------------------------
def _usage(message):
    sys.stderr.write("tuimeter: error: %s\n" % message)
    sys.exit(2)


def parse_boot_args(argv):
    """``--out FILE [--rate HZ] -- (-m MODULE | SCRIPT) ARGS...`` ->
    (out, rate_hz, module or None, script or None, args)."""
    out, rate = None, DEFAULT_RATE_HZ
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
        elif argv[i] == "--rate" and i + 1 < len(argv):
            try:
                rate = float(argv[i + 1])
            except ValueError:
                _usage("--rate must be a number")
        else:
            _usage("unknown bootstrap option %r" % argv[i])
        i += 2
    rest = argv[i + 1:]
    if out is None or not rest:
        _usage("usage: boot.py --out FILE [--rate HZ] -- (-m MODULE | SCRIPT) ARGS...")
    if rest[0] == "-m":
        if len(rest) < 2:
            _usage("-m needs a module name")
        return out, rate, rest[1], None, rest[2:]
    return out, rate, None, rest[0], rest[1:]


#: the end of central directory record's signature, and how far from a zip file's end it
#: can be (the record, 22 bytes, and a comment of at most 65535)
_ZIP_END, _ZIP_TAIL = b"PK\x05\x06", 22 + 65535


def _pyc_magic():
    """The magic number a ``.pyc`` file of this interpreter starts with."""
    frozen = sys.modules.get("_frozen_importlib_external")  # loaded at every start
    magic = getattr(frozen, "MAGIC_NUMBER", None)
    if magic is None:
        import importlib.util

        magic = importlib.util.MAGIC_NUMBER
    return magic


def source_code(path):
    """The code object of the Python source file ``path``, compiled as ``python SCRIPT``
    compiles it before running it, or None where ``runpy.run_path`` must run it: a
    folder, a zip file (a ``zipapp``, maybe after a ``#!`` line), a compiled ``.pyc``, a
    file that cannot be read or compiled (``run_path`` then raises what ``python SCRIPT``
    would)."""
    try:
        with io.open_code(path) as f:
            data = f.read()
        if data.startswith(_pyc_magic()) or _ZIP_END in data[-_ZIP_TAIL:]:
            return None
        return compile(data, path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        return None


def main_module(path):
    """A new ``__main__`` module for the script ``path``, put in ``sys.modules`` as
    ``python SCRIPT`` has it (``pickle`` and ``multiprocessing`` find the script's
    classes and functions there) and as ``runpy`` fills it."""
    import builtins

    module = type(sys)("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None,
                           __package__=None, __spec__=None, __builtins__=builtins)
    sys.modules["__main__"] = module
    return module


def start_program(argv, top):
    """The bootstrap: parse ``argv``, set ``sys.argv`` and ``sys.path[0]`` as ``python
    SCRIPT`` (or ``-m MODULE``) would, and sample from here to the process's end (its
    exit handler writes the last sample). ``top``: the code object of the bootstrap's
    frame that runs the program; stacks are cut there.

    A source file is compiled here, before sampling begins, as ``python SCRIPT`` compiles
    it before it runs it, and returned with its ``__main__`` module's namespace, for the
    caller to ``exec`` at its top level: the program's frames then sit right above the
    bootstrap's, as they sit above nothing under ``python SCRIPT``. Run through
    ``runpy.run_path``'s four frames and two context managers, a loop of small reads and
    writes ran 1.3% slower than under ``python SCRIPT`` (bench/bench_profile.py), and it
    imports ``pkgutil`` and ``typing``. A module (``-m``), a folder, a zip file or a
    ``.pyc`` is run here by :mod:`runpy`, and None is returned."""
    out, rate, module, script, args = parse_boot_args(argv)
    import atexit

    code = path = None
    cut = [top]
    if module is not None:
        sys.argv = [module] + list(args)
        sys.path[0] = os.getcwd()  # as `python -m`: the current folder first
    else:
        sys.argv = [script] + list(args)
        path = os.path.abspath(script)
        sys.path[0] = os.path.dirname(path)
        code = source_code(path)
    if code is None:
        import runpy

        cut.append(runpy._run_code.__code__)
    sink = FileSink(out)
    sampler = StackSampler(sink, rate, cut=cut)
    # the signal way by default: no GIL hand-off per sample, and no thread of ours in a
    # program that has none (docs/profile.md, "Overhead"); TUIMETER_PROFILE_SAMPLER=thread
    # for the thread way. Everything the process did before is its start-up.
    namespace = main_module(path).__dict__ if code is not None else None
    sampler.start(True, signals=os.environ.get(SAMPLER_ENV, "") != "thread")

    def finish():  # after the program's non-daemon threads have ended
        sampler.stop(caller_is_ours=True)
        sink.close()

    atexit.register(finish)
    if code is not None:
        return code, namespace
    if module is not None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(path, run_name="__main__")  # as python 3.9+
    return None


def uncaught(exc):
    """An exception the program did not catch, reported as the interpreter reports it
    under ``python SCRIPT``: through ``sys.excepthook`` (the program's, where it set
    one), without the bootstrap's frame, and the exit status 1."""
    tb = exc.__traceback__
    if tb is not None:  # the hook shows the exception's own traceback
        tb = tb.tb_next
        exc.__traceback__ = tb
    sys.excepthook(type(exc), exc, tb)
    sys.exit(1)


if __name__ == "__main__":  # ``python sampler.py --out FILE -- SCRIPT``: as boot.py
    import runpy

    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot.py"),
                   run_name="__main__")
