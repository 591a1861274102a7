"""`%load_ext tuimeter` and `%%tuimeter` in IPython's InteractiveShell (no browser), and the
HTML views of Meter, Phase and Report (every label escaped).

The magic's Meter runs a scripted engine on a fake clock that the cell itself ticks, so
the joules shown are known exactly (rapl_like: 45 W counted)."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from tests.test_api import make_engine  # noqa: E402
from tests.test_report import record, report  # noqa: E402
from tuimeter import api, notebook  # noqa: E402

EVIL = "<script>alert(1)</script>"
TICK_TWICE = "for _ in range(2):\n    clock.advance(1.0)\n    eng.tick()\n"


pytestmark = pytest.mark.usefixtures("runtime_dir")


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        sh = InteractiveShell.instance()
        sh.run_line_magic("load_ext", "tuimeter")
        yield sh


@pytest.fixture
def engine(shell, monkeypatch):
    """The cell's Meter samples a scripted engine; the cell ticks it (``eng``, ``clock``)."""
    eng, clock = make_engine()
    monkeypatch.setattr(notebook, "_new_meter",
                        lambda **kw: api.Meter(engine=eng, autostart=False, **kw))
    shell.user_ns.update(eng=eng, clock=clock)
    shell.user_ns.pop("_tuimeter", None)
    return eng


def run(shell, cell: str):
    with capture_output() as cap:
        result = shell.run_cell(cell)
    return result, cap


def test_magic_measures_the_cell_and_shows_it_inline(shell, engine):
    """The cell runs (its print and its value still appear), and the display has HTML and
    text with the cell's energy, CO2e, duration and a sparkline."""
    result, cap = run(shell, "%%tuimeter --label train\nprint('hello from the cell')\n"
                             + TICK_TWICE + "40 + 2\n")
    assert result.success and result.result == 42
    assert "hello from the cell" in cap.stdout
    (shown,) = cap.outputs
    text, page = shown.data["text/plain"], shown.data["text/html"]
    for out in (text, page):
        assert "90.000 J" in out and "0.00900 g CO2e" in out and "2.00 s" in out
        assert "avg 45.00 W" in out and "measured" in out and "train" in out
    assert "<polyline" in page and "▄▄" in text  # the sparkline: two ticks at 45 W
    last = shell.user_ns["_tuimeter"]
    assert last.energy_j == pytest.approx(90.0) and last.power_w == (45.0, 45.0)
    assert not engine._listeners  # the magic's tick listener and the meter's are gone


def test_label_is_escaped_in_the_html(shell, engine):
    _result, cap = run(shell, f"%%tuimeter --label '{EVIL}'\n" + TICK_TWICE)
    page = cap.outputs[0].data["text/html"]
    assert EVIL not in page and "&lt;script&gt;" in page


def test_an_error_in_the_cell_is_raised_after_the_measurement(shell, engine):
    """The cell fails as it would without the magic; what it used is still shown."""
    result, cap = run(shell, "%%tuimeter\n" + TICK_TWICE + "raise ValueError('boom')\n")
    assert isinstance(result.error_in_exec, ValueError)
    assert "90.000 J" in cap.outputs[0].data["text/plain"]


def test_bad_option_is_one_line_and_runs_nothing(shell, engine):
    result, cap = run(shell, "%%tuimeter --interval soon\nran = True\n")
    assert not result.success and "ran" not in shell.user_ns
    assert "%%tuimeter: argument --interval: invalid float value: 'soon'" in cap.stderr
    assert not cap.outputs


def test_meter_phase_and_report_have_escaped_html(tmp_path):
    eng, clock = make_engine()
    with api.Meter(label=EVIL, engine=eng, autostart=False) as meter:
        clock.advance(1.0)
        eng.tick()
        meter.mark("eval & test")
        clock.advance(1.0)
        eng.tick()
    page = meter._repr_html_()
    assert "&lt;script&gt;" in page and EVIL not in page
    assert "eval &amp; test" in page and "45.000" in page and "2 phase(s)" in page
    assert "&lt;script&gt;" in meter.phases[0]._repr_html_()
    rep = report(record(tmp_path / "a.csv", host=EVIL, ticks=4, marks={2: "<i>b</i>"}))
    page = rep._repr_html_()
    assert EVIL not in page and "<i>" not in page and "&lt;i&gt;b&lt;/i&gt;" in page
    assert "180.0" in page  # 4 s at 45 W
