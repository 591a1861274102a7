"""Energy per Python function, without running a program: the sampler on a fake clock
with fake frames, the spreading of scripted ticks (the truth in joules), the per-function
figures and the writers (JSON, folded stacks, speedscope) read back."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tuimeter.profile.cli import child_command
from tuimeter.profile.result import (MIN_SAMPLES, build, collapsed, dumps, functions_of,
                                     speedscope, stack_keys, table)
from tuimeter.profile.sampler import StackSampler, parse_boot_args
from tuimeter.profile.spread import (OTHER_STACK, TUIMETER_STACK, UNSAMPLED_STACK,
                                     SampleLog, Tick, spread)
from tuimeter.profile.ticks import TickLog, make_profile
from tests.fakes.scripted import FakeClock


# -- fakes -------------------------------------------------------------------------------
def main_fn(): pass  # noqa: E704  (their code objects are the fake frames' code)
def work(): pass  # noqa: E704
def wait(): pass  # noqa: E704
def engine_loop(): pass  # noqa: E704


class Frame:
    """A frame as the sampler walks it: ``f_code`` and ``f_back``."""

    def __init__(self, *codes):
        self.f_code = codes[-1].__code__
        self.f_back = Frame(*codes[:-1]) if len(codes) > 1 else None


class Box:
    """The fake process: its threads' stacks and CPU clocks, advanced by each test."""

    def __init__(self):
        self.clock = FakeClock(100.0)
        self.stacks = {}  # ident -> Frame
        self.cpu = {}  # native id -> s
        self.proc = 0.0
        self.own = 0.0
        self.names = {}  # ident -> thread name (default Thread-N)

    def threads(self):
        return [SimpleNamespace(ident=i, native_id=1000 + i, name=self.names.get(i, f"Thread-{i}"))
                for i in self.stacks]

    def sampler(self, records, **kw):
        return StackSampler(records.append, 100.0, clock=self.clock, frames=lambda: dict(self.stacks),
                            threads=self.threads, thread_cpu=lambda n: self.cpu.get(n),
                            process_cpu=lambda: self.proc, own_cpu=lambda: self.own, **kw)

    def run(self, ident, cpu_s):
        self.cpu[1000 + ident] = self.cpu.get(1000 + ident, 0.0) + cpu_s
        self.proc += cpu_s


def test_sampler_records_each_threads_stack_and_its_cpu_time_since_the_last_sample():
    """Per sample: each thread's stack and the CPU it used since the previous sample;
    the sampling thread itself is never sampled, an ignored thread's CPU and the sampler's
    own go to tuimeter, and CPU no Python thread used is ``other``."""
    box, records = Box(), []
    box.stacks = {1: Frame(main_fn, work), 2: Frame(main_fn, wait), 3: Frame(engine_loop),
                  9: Frame(engine_loop)}
    box.cpu = {1001: 5.0, 1002: 1.0, 1003: 0.0, 1009: 0.0}  # before the start: not counted
    s = box.sampler(records, ignore={3})
    s.begin()
    s.own_ident = 9  # the sampling thread
    box.clock.advance(0.01)
    box.run(1, 0.008)
    box.run(3, 0.001)
    box.own += 0.0005
    box.proc += 0.0005 + 0.002  # the sampler, and a native thread
    s.sample()
    samples = [r for r in records if r[0] == "S"]
    assert len(samples) == 1
    _s, t, dt, entries, other, ours = samples[0]
    assert t == pytest.approx(100.01) and dt == pytest.approx(0.01)
    frames = {r[1]: r[2] for r in records if r[0] == "F"}
    stacks = {r[1]: [frames[f] for f in r[2]] for r in records if r[0] == "K"}
    got = sorted((stacks[sid], cpu) for sid, cpu in entries)
    assert got == [(["main_fn", "wait"], 0.0), (["main_fn", "work"], pytest.approx(0.008))]
    assert ours == pytest.approx(0.0015)
    assert other == pytest.approx(0.002)


def test_in_the_signal_way_the_handlers_cpu_is_tuimeters_and_its_stack_the_interrupted():
    """The signal way samples in a handler on the host thread (here the test's own): the
    CPU the handler used (``own_cpu`` counts it then) is taken off that thread's and
    given to tuimeter, not counted again in ``other``, and the host's stack is the frame
    the signal interrupted, not the handler's own."""
    import threading

    host = threading.get_ident()
    box, records = Box(), []
    box.stacks = {host: Frame(main_fn, engine_loop), 2: Frame(main_fn, wait)}
    box.cpu = {1000 + host: 0.0, 1002: 0.0}
    s = box.sampler(records)
    s.begin()
    s.host_ident = host

    def sample(frame=None):
        records.clear()
        s.sample(frame)
        _s, _t, _dt, entries, other, ours = [r for r in records if r[0] == "S"][0]
        frames = {r[1]: r[2] for r in records if r[0] == "F"} | seen_frames
        seen_frames.update(frames)
        stacks.update({r[1]: [frames[f] for f in r[2]] for r in records if r[0] == "K"})
        return sorted((stacks[sid], cpu) for sid, cpu in entries), other, ours

    seen_frames, stacks = {}, {}
    box.clock.advance(0.01)
    box.run(host, 0.010)  # 4 ms of it the previous sample's handler
    box.own += 0.004
    box.run(2, 0.001)
    box.proc += 0.003  # a native thread
    got, other, ours = sample(Frame(main_fn, work))  # the frame the signal interrupted
    assert got == [(["main_fn", "wait"], pytest.approx(0.001)),
                   (["main_fn", "work"], pytest.approx(0.006))]
    assert ours == pytest.approx(0.004) and other == pytest.approx(0.003)
    # the watcher's sample (no frame): the host's own stack, its CPU less the handler's
    box.clock.advance(0.01)
    box.run(host, 0.010)
    box.own += 0.002
    got, other, ours = sample()
    assert got == [(["main_fn", "engine_loop"], pytest.approx(0.008)),
                   (["main_fn", "wait"], pytest.approx(0.0))]
    assert ours == pytest.approx(0.002) and other == pytest.approx(0.0)
    # the watcher samples while the host is inside the handler: what the handler
    # interrupted, not the handler's frames
    box.stacks[host] = Frame(main_fn, work, StackSampler._on_signal, engine_loop)
    box.clock.advance(0.01)
    box.run(host, 0.010)
    got, _other, _ours = sample()
    assert [stack for stack, _cpu in got] == [["main_fn", "wait"], ["main_fn", "work"]]


def test_the_signal_way_leaves_the_profile_function_and_the_signal_as_they_were():
    """The signal way's one-shot hook (``threading.setprofile``, which starts the watcher
    with the program's first thread) is set only where none is: one set before (a
    ``sitecustomize``, a tool) is kept, and the sampler's own is gone after ``stop``, as
    is its signal handler."""
    import signal
    import threading

    def mine(frame, event, arg):
        pass

    before = signal.getsignal(signal.SIGURG)
    s = StackSampler(lambda rec: None, 100.0)
    s.start(None, signals=True)
    try:
        assert s.host_ident is not None  # the signal way (Linux, the main thread)
        assert threading.getprofile() == s._on_new_thread  # a bound method: equal, not the same
    finally:
        s.stop()
    assert threading.getprofile() is None
    # the signal's handler as it was: an ignored one is inherited by child processes
    # (they then chose a real-time signal, whose default action ends a program that
    # resets every handler)
    assert signal.getsignal(signal.SIGURG) == before
    threading.setprofile(mine)
    try:
        s = StackSampler(lambda rec: None, 100.0)
        s.start(None, signals=True)
        s.stop()
        assert threading.getprofile() is mine
    finally:
        threading.setprofile(None)


def test_sampler_defines_each_function_and_stack_once_and_cuts_the_bootstrap():
    """Functions and stacks are written once, before first use; frames at and outside a
    ``cut`` code (the bootstrap's runpy frame) are left out."""
    box, records = Box(), []
    box.stacks = {1: Frame(engine_loop, main_fn, work)}
    s = box.sampler(records, cut=[engine_loop.__code__])
    s.begin()
    for _ in range(3):
        box.clock.advance(0.01)
        box.run(1, 0.01)
        s.sample()
    kinds = [r[0] for r in records]
    assert kinds == ["B", "F", "F", "K", "S", "S", "S"]
    assert [r[2] for r in records if r[0] == "F"] == ["work", "main_fn"]
    (stack,) = [r[2] for r in records if r[0] == "K"]
    assert [records[1 + i][2] for i in stack] == ["main_fn", "work"]  # outermost first


def test_tuimeters_own_threads_are_found_by_name_even_when_an_ident_is_reused():
    """A thread named ``tuimeter-...`` (the engine) is not sampled: its CPU goes to
    tuimeter. When it ends and a program thread gets its ident, that one is sampled
    (a regression: a stale ident cache kept treating it as the other)."""
    box, records = Box(), []
    box.stacks = {1: Frame(main_fn)}
    box.cpu[1001] = 0.0
    s = box.sampler(records)
    s.begin()
    box.stacks[7] = Frame(engine_loop)
    box.names[7] = "tuimeter-sampler"
    box.clock.advance(0.01)
    box.run(7, 0.003)
    s.sample()
    assert len(records[-1][3]) == 1 and records[-1][5] == pytest.approx(0.003)
    del box.stacks[7]
    box.clock.advance(0.01)
    s.sample()
    box.stacks[7] = Frame(work)  # a program thread, same ident
    box.names[7] = "worker"
    box.cpu[1007] = 0.0
    box.clock.advance(0.01)
    box.run(7, 0.004)
    s.sample()
    frames = {r[1]: r[2] for r in records if r[0] == "F"}
    stacks = {r[1]: [frames[f] for f in r[2]] for r in records if r[0] == "K"}
    got = {stacks[sid][-1]: cpu for sid, cpu in records[-1][3]}
    assert got == {"main_fn": 0.0, "work": pytest.approx(0.004)}


def test_a_thread_born_after_the_start_counts_its_cpu_from_its_birth():
    box, records = Box(), []
    s = box.sampler(records)
    s.begin()
    box.stacks = {5: Frame(work)}
    box.clock.advance(0.01)
    box.run(5, 0.004)
    s.sample()
    assert records[-1][3][0][1] == pytest.approx(0.004)


def test_sampler_without_per_thread_clocks_records_none():
    """Where no per-thread CPU clock exists (macOS), the CPU figures are None."""
    box, records = Box(), []
    box.stacks = {1: Frame(work)}
    s = box.sampler(records)
    s.thread_cpu = lambda n: None
    s.begin()
    box.clock.advance(0.01)
    s.sample()
    assert records[-1][3][0][1] is None


@pytest.mark.parametrize("name", [
    "work", 'say "hi"', "back\\slash", "tab\tand\nnewline", "\x1f\x7f", "caf\u00e9",
    "\u65e5\u672c", "\U0001f600", "\udcff", "\ud800 lone", ""])
def test_the_sink_writes_what_json_reads_back(tmp_path, name):
    """The sink formats its function records itself (no ``json`` import in the profiled
    program): quotes, backslashes, control characters, non-ASCII, characters beyond the
    BMP and the lone surrogates of an undecodable file name read back as written, and
    the file is ASCII."""
    from tuimeter.profile.sampler import FileSink

    path = tmp_path / "s.jsonl"
    sink = FileSink(str(path))
    records = [["B", 1320.307056392, 0.0315, 100.0, 4242], ["F", 0, name, "/p/" + name, 7],
               ["K", 0, [0]], ["S", 1320.32, 0.01, [[0, 0.0099]], 0.0, 0.0001],
               ["E", 1320.33]]
    for rec in records:
        sink(rec)
    sink.close()
    data = path.read_bytes()
    assert data.isascii()
    assert (b'"/p/say \\"hi\\""' in data) == (name == 'say "hi"')  # ASCII kept as it is
    back = [json.loads(line) for line in data.decode().splitlines()]
    assert back[:3] == records[:3] and back[4] == records[4]
    assert back[3] == records[3]  # to the microsecond, as these are


def test_boot_arguments_script_and_module():
    assert parse_boot_args(["--out", "f", "--rate", "50", "--", "s.py", "-x"]) == (
        "f", 50.0, None, "s.py", ["-x"])
    assert parse_boot_args(["--out", "f", "--", "-m", "pkg.mod", "a"]) == (
        "f", 100.0, "pkg.mod", None, ["a"])


@pytest.mark.parametrize("command, expect", [
    (["python", "s.py", "a"], ["python", "BOOT", "s.py", "a"]),
    (["python3.12", "-u", "-X", "dev", "s.py"], ["python3.12", "-u", "-X", "dev", "BOOT", "s.py"]),
    (["/opt/venv/bin/python", "-m", "pkg", "x"], ["/opt/venv/bin/python", "BOOT", "-m", "pkg", "x"]),
    (["train.py", "--epochs", "3"], ["SYS", "BOOT", "train.py", "--epochs", "3"]),
])
def test_child_command_runs_the_bootstrap_with_the_programs_interpreter(command, expect):
    import sys

    got = child_command(command, "/tmp/s.jsonl", 100.0)
    boot_at = next(i for i, a in enumerate(got) if a.endswith("boot.py"))
    assert got[boot_at + 1:boot_at + 6] == ["--out", "/tmp/s.jsonl", "--rate", "100.0", "--"]
    got = got[:boot_at] + ["BOOT"] + got[boot_at + 6:]
    assert got == [sys.executable if a == "SYS" else a for a in expect]


@pytest.mark.parametrize("command, message", [
    (["make", "-j8"], "profile runs Python programs"),
    (["python", "-c", "print(1)"], "not -c CODE"),
    (["python"], "nothing to profile"),
    (["python", "-m"], "-m needs a module name"),
])
def test_child_command_refuses_what_it_cannot_profile(command, message):
    with pytest.raises(ValueError, match=message):
        child_command(command, "/tmp/s.jsonl", 100.0)


# -- spreading (scripted ticks) ------------------------------------------------------------
def log_of(*samples, begin=(0.0, 0.0)):
    """A SampleLog with stacks 0 = main;work and 1 = main;wait, and ``samples``:
    (t, dt, [(stack, cpu)], other, tuimeter)."""
    log = SampleLog()
    for rec in (["B", begin[0], begin[1], 100.0, 4242], ["F", 0, "main", "/p/m.py", 1],
                ["F", 1, "work", "/p/m.py", 5], ["F", 2, "wait", "/p/m.py", 9],
                ["K", 0, [0, 1]], ["K", 1, [0, 2]]):
        log.feed(rec)
    for t, dt, entries, other, ours in samples:
        log.feed(["S", t, dt, [list(e) for e in entries], other, ours])
    log.feed(["E", samples[-1][0] if samples else begin[0]])
    return log


def by_stack(charges):
    out = {}
    for c in charges:
        out[c.stack] = out.get(c.stack, 0.0) + c.energy_j
    return out


def test_cpu_energy_follows_each_threads_cpu_time_and_a_waiting_thread_gets_none():
    """Tick 1 (10 J): work used 0.3 s, wait 0 -> 10 J to work; tick 2 (10 J): work 0.1 s,
    a second worker thread in the same stack 0.3 s -> still all to work; tick 3 (6 J):
    no sample at all -> [unsampled]; tick 4 (2 J) -> work. The parts add up to the
    ticks."""
    log = log_of((0.5, 0.5, [(0, 0.15), (1, 0.0)], 0.0, 0.0),
                 (1.0, 0.5, [(0, 0.15), (1, 0.0)], 0.0, 0.0),
                 (1.5, 0.5, [(0, 0.1), (1, 0.0), (0, 0.3)], 0.0, 0.0),
                 (3.5, 0.5, [(0, 0.1)], 0.0, 0.0))
    ticks = [Tick(0.0, 1.0, 10.0, 0.0), Tick(1.0, 2.0, 10.0, 0.0), Tick(2.0, 3.0, 6.0, 0.0),
             Tick(3.0, 4.0, 2.0, 0.0)]
    charges = spread(log, ticks)
    assert by_stack(charges) == pytest.approx({0: 22.0, 1: 0.0, UNSAMPLED_STACK: 6.0})
    assert sum(c.energy_j for c in charges) == pytest.approx(28.0)


def test_energy_is_shared_in_proportion_to_cpu_time():
    """One tick of 8 J: work used 0.3 s, wait 0.1 s -> 6 J and 2 J; the CPU no Python thread
    accounts for (0.2 s) is shared the same way; tuimeter's own CPU is its own line."""
    log = log_of((0.5, 0.5, [(0, 0.3), (1, 0.1)], 0.2, 0.0),
                 (1.0, 0.5, [(0, 0.0), (1, 0.0)], 0.0, 0.2))
    charges = spread(log, [Tick(0.0, 1.0, 8.0, 0.0)])
    # weights: work 0.3 + 0.15, wait 0.1 + 0.05, tuimeter 0.2 -> of 0.8
    assert by_stack(charges) == pytest.approx({0: 4.5, 1: 1.5, TUIMETER_STACK: 2.0})


def test_other_cpu_with_no_python_thread_busy_is_shared_evenly_or_kept_apart():
    log = log_of((0.5, 0.5, [(0, 0.0), (1, 0.0)], 0.4, 0.0),
                 (1.5, 0.5, [], 0.4, 0.0))
    charges = spread(log, [Tick(0.0, 1.0, 4.0, 0.0), Tick(1.0, 2.0, 4.0, 0.0)])
    assert by_stack(charges) == pytest.approx({0: 2.0, 1: 2.0, OTHER_STACK: 4.0})


def test_gpu_energy_goes_to_the_threads_running_while_it_was_spent():
    """GPU energy of a tick is spread by wall time over its samples; within a sample to the
    threads that used CPU (work in the first half), evenly when none did (the second)."""
    log = log_of((0.5, 0.5, [(0, 0.2), (1, 0.0)], 0.0, 0.0),
                 (1.0, 0.5, [(0, 0.0), (1, 0.0)], 0.0, 0.0))
    charges = spread(log, [Tick(0.0, 1.0, 0.0, 4.0)])
    assert by_stack(charges) == pytest.approx({0: 3.0, 1: 1.0})


def test_without_per_thread_clocks_each_sampled_thread_weighs_the_same():
    log = log_of((0.5, 0.5, [(0, None), (1, None)], 0.0, 0.0))
    assert by_stack(spread(log, [Tick(0.0, 1.0, 4.0, 0.0)])) == pytest.approx({0: 2.0, 1: 2.0})


def test_ticks_before_sampling_began_or_after_it_ended_go_to_startup_and_exit():
    """A slow interpreter start (a tick with energy that ended before the sampler's first
    record) is ``[interpreter startup]``, a tick after its end record ``[interpreter
    exit]``, not ``[unsampled]``."""
    log = log_of((2.5, 0.5, [(0, 0.3)], 0.0, 0.0), begin=(2.0, 0.0))
    charges = spread(log, [Tick(0.0, 1.0, 1.0, 0.0), Tick(1.0, 2.0, 2.0, 0.0),
                           Tick(2.0, 3.0, 4.0, 0.0), Tick(3.0, 4.0, 8.0, 0.0)])
    keys = stack_keys(log)
    got = {keys[sid][-1][0]: e for sid, e in by_stack(charges).items()}
    assert got == pytest.approx({"[interpreter startup]": 3.0, "work": 4.0,
                                 "[interpreter exit]": 8.0})


def test_the_interpreters_startup_has_its_own_line():
    log = log_of((0.5, 0.5, [(0, 0.3)], 0.0, 0.0), begin=(0.1, 0.1))
    charges = spread(log, [Tick(0.0, 1.0, 4.0, 0.0)])
    keys = stack_keys(log)
    got = {keys[c.stack][-1][0]: c.energy_j for c in charges}
    assert got == pytest.approx({"work": 3.0, "[interpreter startup]": 1.0})


def test_a_malformed_or_cut_record_is_skipped(tmp_path):
    """The file is the profiled program's to write: junk lines are counted and skipped, a
    last line not yet complete is left for the next read."""
    path = tmp_path / "s.jsonl"
    path.write_text('["B",1.0,0.0,100.0,7]\n["F",0,"f","/x.py",1]\n["K",0,[0]]\n'
                    'not json\n["S",1.1,0.1,[[5,0.1]],0,0]\n["K",1,[99]]\n'
                    '["S",-1,0.1,[],0,0]\n["S",1.2,0.1,[[0,0.1]],0,0]\n["S",1.3')
    log = SampleLog()
    log.read_file(str(path))
    assert len(log.samples) == 1 and log.bad_lines == 4
    with open(path, "a") as fh:
        fh.write(',0.1,[[0,0.1]],0,0]\n')
    log.read_file(str(path))
    assert [s[0] for s in log.samples] == [1.2, 1.3]


# -- per function ----------------------------------------------------------------------
def test_self_and_inclusive_figures_and_recursion_counted_once():
    log = SampleLog()
    for rec in (["F", 0, "main", "/p/m.py", 1], ["F", 1, "rec", "/p/m.py", 5],
                ["K", 0, [0, 1, 1]], ["K", 1, [0]]):
        log.feed(rec)
    for i in range(12):
        log.feed(["S", 0.1 * (i + 1), 0.1, [[0, 0.1]], 0, 0])
    log.feed(["S", 1.3, 0.1, [[1, 0.1]], 0, 0])
    charges = spread(log, [Tick(0.0, 2.0, 13.0, 0.0)])
    funcs = {f.function: f for f in functions_of(charges, stack_keys(log))}
    rec, main = funcs["rec"], funcs["main"]
    assert rec.total_energy_j == pytest.approx(12.0) and rec.self_energy_j == pytest.approx(12.0)
    assert rec.samples == 12 and rec.total_s == pytest.approx(1.2) and not rec.uncertain
    assert main.total_energy_j == pytest.approx(13.0) and main.self_energy_j == pytest.approx(1.0)
    assert main.self_samples == 1
    funcs2 = {f.function: f for f in functions_of(charges[:5], stack_keys(log))}
    assert funcs2["rec"].samples == 5 < MIN_SAMPLES and funcs2["rec"].uncertain


def scripted_profile(markers=()):
    log = log_of(*[(0.1 * (i + 1), 0.1, [(0 if i < 5 else 1, 0.1)], 0.0, 0.0) for i in range(20)])
    charges = spread(log, [Tick(0.0, 1.0, 10.0, 0.0), Tick(1.0, 2.0, 30.0, 0.0)])
    return build(log, charges, provenance="attributed", markers=markers)


def test_json_holds_the_fields_and_the_self_energies_add_up(tmp_path):
    prof = scripted_profile()
    data = json.loads(dumps(prof))
    assert data["total_energy_j"] == pytest.approx(40.0)
    for key in ("duration_s", "rate_hz", "samples", "provenance", "functions"):
        assert key in data
    assert data["samples"] == 20 and data["rate_hz"] == 100.0
    assert sum(f["self_energy_j"] for f in data["functions"]) == pytest.approx(40.0, rel=0.02)
    f = {f["function"]: f for f in data["functions"]}
    assert f["work"]["total_energy_j"] == pytest.approx(5.0)  # the first half of tick 1
    assert f["wait"]["total_energy_j"] == pytest.approx(35.0)
    assert set(f["work"]) >= {"function", "file", "line", "self_energy_j", "total_energy_j",
                              "self_s", "total_s", "samples", "uncertain"}
    assert "phases" not in data


def test_phases_split_the_functions_at_the_markers():
    prof = scripted_profile(markers=[("second", 0.55)])
    phases = {p.label: p for p in prof.phases}
    assert list(phases) == ["start", "second"]
    assert phases["start"].energy_j == pytest.approx(5.0)
    assert phases["second"].energy_j == pytest.approx(35.0)
    assert [f.function for f in phases["start"].functions] == ["main", "work"]


def test_collapsed_stacks_read_back_in_millijoules():
    text = collapsed(scripted_profile())
    rows = dict(line.rsplit(" ", 1) for line in text.splitlines())
    assert rows == {"main (m.py:1);work (m.py:5)": "5000", "main (m.py:1);wait (m.py:9)": "35000"}


def test_speedscope_file_is_a_sampled_profile_weighted_by_energy():
    """Checked against speedscope's file format (file-format-spec.ts): the schema URL,
    shared frames, one "sampled" profile whose samples index the frames (outermost
    first) and whose weights, one per sample, add up to the energy in mJ."""
    doc = json.loads(json.dumps(speedscope(scripted_profile())))
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    (p,) = doc["profiles"]
    assert p["type"] == "sampled" and p["unit"] in {"none", "nanoseconds", "microseconds",
                                                    "milliseconds", "seconds", "bytes"}
    assert len(p["samples"]) == len(p["weights"])
    assert all(0 <= i < len(frames) for s in p["samples"] for i in s)
    assert sum(p["weights"]) == pytest.approx(40000.0) == p["endValue"] - p["startValue"]
    names = [[frames[i]["name"] for i in s] for s in p["samples"]]
    assert names == [["main", "work"], ["main", "wait"]]


def test_table_lists_functions_by_energy_and_flags_the_uncertain():
    text = table(scripted_profile())
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["incl", "J"]
    assert "main (m.py:1)" in lines[1] and "wait (m.py:9)" in lines[2]
    assert "?" in lines[3] and lines[-1].startswith("? fewer than 10 samples")


def test_the_live_profile_spreads_each_tick_once_and_agrees_with_the_final_one(tmp_path):
    """The UI's live profile spreads only the new ticks over the samples that arrived up
    to their end; after the last tick it holds what the final profile holds."""
    from tuimeter.profile.live import LiveProfile
    from tuimeter.profile.result import functions_of

    path = tmp_path / "s.jsonl"
    head = ('["B",1000.0,0.0,100.0,7]\n["F",0,"main","/p/m.py",1]\n["F",1,"work","/p/m.py",5]\n'
            '["K",0,[0]]\n["K",1,[0,1]]\n')
    path.write_text(head + '["S",1000.5,0.5,[[1,0.4]],0,0]\n')
    clock = FakeClock(1000.0)
    ticks = TickLog(clock=clock)
    live = LiveProfile(str(path), ticks)
    clock.advance(1.0)
    ticks(snap(1.0, 1.0, 4.0))
    live(None)
    funcs, total = live.latest
    assert total == pytest.approx(4.0) and funcs[0].function == "main"
    with open(path, "a") as fh:
        fh.write('["S",1001.5,0.5,[[0,0.1]],0,0]\n["S",1001.9,0.4,[[1,0.3]],0,0]\n')
    clock.advance(1.0)
    ticks(snap(2.0, 1.0, 8.0))
    live(None)
    funcs, total = live.latest
    assert total == pytest.approx(12.0)
    log = SampleLog()
    log.read_file(str(path))
    final = functions_of(spread(log, ticks.ticks()), stack_keys(log))
    assert [(f.function, f.total_energy_j, f.samples) for f in funcs] == [
        (f.function, pytest.approx(f.total_energy_j), f.samples) for f in final]
    assert {f.function: f.self_energy_j for f in funcs} == pytest.approx({"main": 2.0, "work": 10.0})


# -- provenance ----------------------------------------------------------------------
def snap(elapsed_s, interval_s, cpu_j, markers=()):
    job = SimpleNamespace(cpu_power_w=cpu_j / interval_s, energy_j=cpu_j)
    return SimpleNamespace(elapsed_s=elapsed_s, interval_s=interval_s, job=job, domains=(),
                           markers=markers)


def test_a_run_shorter_than_one_tick_is_interpolated():
    """As phases: a profile with no whole tick inside its run rests on the tick's average
    power, so its provenance is ``interpolated``; a longer one is ``attributed``."""
    clock = FakeClock(1000.0)
    ticks = TickLog(clock=clock)
    clock.advance(1.0)
    ticks(snap(1.0, 1.0, 3.0))  # the engine began at 999.0+1.0 - 1.0 = 1000.0
    short = log_of((1000.4, 0.1, [(0, 0.1)], 0.0, 0.0), begin=(1000.3, 0.0))
    prof = make_profile(short, ticks)
    assert prof.provenance == "interpolated" and prof.total_energy_j == pytest.approx(3.0)
    clock.advance(1.0)
    ticks(snap(2.0, 1.0, 3.0))
    long = log_of((1000.5, 0.1, [(0, 0.1)], 0.0, 0.0), (1001.9, 0.1, [(0, 0.1)], 0.0, 0.0),
                  begin=(999.9, 0.0))
    assert make_profile(long, ticks).provenance == "attributed"


def test_ticks_after_a_time_are_those_that_end_after_it():
    """What the f key's chunks read on the engine's thread at each tick: the ticks since the
    last chunk, the same as the whole log's from that time on."""
    clock = FakeClock(1000.0)
    ticks = TickLog(clock=clock)
    for i in range(1, 6):
        clock.advance(1.0)
        ticks(snap(float(i), 1.0, float(i)))
    every = ticks.ticks()
    assert [t.t1_s for t in every] == [1001.0, 1002.0, 1003.0, 1004.0, 1005.0]
    assert ticks.ticks(after_s=1002.5) == [t for t in every if t.t1_s > 1002.5]
    assert ticks.ticks(after_s=1003.0) == every[3:]
    assert ticks.ticks(after_s=1005.0) == [] and ticks.ticks(after_s=0.0) == every


@pytest.mark.parametrize("asked_hz, every_s, said", [(1000.0, 1 / 225, True),
                                                     (100.0, 1 / 98, False)])
def test_a_rate_the_sampler_could_not_reach_is_said_in_the_notes_and_the_json(asked_hz,
                                                                              every_s, said):
    """Asked for ``asked_hz``, the sampler took a sample every ``every_s``: the profile's
    JSON gives the rate reached, and when it falls short of the asked rate (below 90%) a
    note says so (1000 Hz once gave 156 samples/s, said nowhere)."""
    log = log_of(*[(1000.0 + i * every_s, every_s, [(0, every_s)], 0.0, 0.0)
                   for i in range(200)], begin=(999.9, 0.0))
    log.rate_hz = asked_hz
    clock = FakeClock(1000.0)
    ticks = TickLog(clock=clock)
    clock.advance(2.0)
    ticks(snap(2.0, 2.0, 3.0))
    prof = make_profile(log, ticks)
    out = json.loads(dumps(prof))
    assert out["rate_hz"] == asked_hz
    assert out["reached_rate_hz"] == pytest.approx(1 / every_s)
    notes = [n for n in out.get("notes", []) if "samples/s" in n]
    assert bool(notes) is said
    if said:
        assert "asked for 1000 samples/s, reached 225/s" in notes[0]


def test_a_waiting_programs_long_samples_are_not_a_rate_shortfall():
    """The signal way samples a waiting main thread every 0.25 s (its CPU timer does not
    run while it waits): 1 s of samples at the 100/s asked and 1 s of waiting in four
    samples is the rate reached, not 52/s and a note telling the user to lower it."""
    run = [(1000.0 + i * 0.01, 0.01, [(0, 0.01)], 0.0, 0.0) for i in range(1, 101)]
    wait = [(1001.0 + i * 0.25, 0.25, [(0, 0.0)], 0.0, 0.0) for i in range(1, 5)]
    log = log_of(*run, *wait, begin=(1000.0, 0.0))
    log.rate_hz = 100.0
    clock = FakeClock(1000.0)
    ticks = TickLog(clock=clock)
    clock.advance(2.0)
    ticks(snap(2.0, 2.0, 3.0))
    out = json.loads(dumps(make_profile(log, ticks)))
    assert out["reached_rate_hz"] == pytest.approx(100.0)
    assert not [n for n in out.get("notes", []) if "samples/s" in n]
