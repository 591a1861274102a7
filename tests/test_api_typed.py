"""The typed API: Meter and measure take named keywords that reach the engine's options,
an unknown keyword is a TypeError, and the package is marked typed (py.typed)."""

from __future__ import annotations

import importlib.resources
import inspect
import subprocess
import sys
import textwrap

import pytest

import tuimeter
from tuimeter import api
from tuimeter import measurement as measure_mod

#: the sampling keywords and a non-default value for each (MeasureOptions fields)
SAMPLING = dict(interval_s=0.5, gpu=False, powercap_root="/nonexistent/powercap",
                country="FR", carbon_intensity=123.0, pue=1.3, host="node7",
                carbon_source="uk-carbon-intensity", carbon_zone="RG10")
#: the Meter's own keywords and a non-default value for each
OWN = dict(attach=False, wait_attached_s=2.5, autostart=False, sync="cuda")


@pytest.fixture(autouse=True)
def _rt(runtime_dir):
    pass


class _Stop(Exception):
    pass


def test_every_sampling_keyword_reaches_the_engine(monkeypatch, tmp_path):
    """Each keyword of Meter gets to the MeasureOptions make_engine is given, or to the
    meter's own attribute."""
    seen = []

    def fake_make_engine(opts, attributor=None):
        seen.append(opts)
        raise _Stop

    monkeypatch.setattr(measure_mod, "make_engine", fake_make_engine)
    sensor = object()
    out = str(tmp_path / "run.csv")
    meter = api.Meter(out, label="warmup", overwrite=True, append=True,
                      extra_sensors=[sensor], **SAMPLING, **OWN)
    with pytest.raises(_Stop):
        meter.start()
    (opts,) = seen
    for name, value in SAMPLING.items():
        assert getattr(opts, name) == value, name
    # attribution on: a phase carries this process tree's own energy
    assert opts.output == out and opts.overwrite is True and opts.attribution is True
    assert opts.extra_sensors == [sensor]
    assert meter.first_label == "warmup" and meter.append is True
    for name, value in OWN.items():
        assert getattr(meter, name) == value, name


def test_defaults_are_the_measure_options_defaults():
    """Meter() builds the same MeasureOptions as the CLI's defaults (attribution too: a
    phase's own energy needs it)."""
    opts = api.Meter().measure_options()
    default = measure_mod.MeasureOptions()
    assert opts == default


def test_measure_passes_every_keyword_to_the_meter(monkeypatch):
    """@measure(...) and bare @measure: each keyword reaches the Meter of each call."""
    made = []

    class Recording(api.Meter):
        def __init__(self, *args, **kwargs):
            made.append(kwargs)
            super().__init__(*args, **kwargs)

        def start(self):
            pass

        def stop(self):
            pass

    monkeypatch.setattr(api, "Meter", Recording)
    eng = object()

    @tuimeter.measure(label="fit", output="f.csv", overwrite=True, engine=eng,
                      extra_sensors=[], **SAMPLING, **OWN)
    def fit(x):
        return x + 1

    @tuimeter.measure
    def bare():
        return "ok"

    assert fit(1) == 2 and bare() == "ok"
    kw, bare_kw = made
    assert kw == dict(label="fit", output="f.csv", overwrite=True, engine=eng,
                      extra_sensors=[], append=False, profile=False, **SAMPLING, **OWN)
    assert isinstance(fit.last_meter, Recording) and fit.last_meter.engine is eng
    assert bare_kw["label"].endswith("bare") and bare_kw["output"] is None
    assert bare_kw["interval_s"] == 1.0 and bare_kw["append"] is False


@pytest.mark.parametrize("call", [
    lambda: api.Meter(intervall_s=1.0),
    lambda: api.Meter("a.csv", "label"),  # one positional only: output
    lambda: api.measure(intervall_s=1.0),
    lambda: api.measure(lambda: None, intervall_s=1.0),
])
def test_an_unknown_keyword_is_a_type_error_naming_it(call):
    with pytest.raises(TypeError) as info:
        call()
    assert "intervall_s" in str(info.value) or "positional" in str(info.value)


def test_attribution_and_pid_are_not_keywords():
    """A Meter measures the machine: attribution is off and not a keyword (it never
    worked: it was passed twice), nor is pid (only attribution used it)."""
    for bad in ("attribution", "pid"):
        with pytest.raises(TypeError, match=bad):
            api.Meter(**{bad: 1})


def test_signatures_list_the_keywords_with_annotations():
    expected = {"output", "label", "interval_s", "overwrite", "append", "gpu", "powercap_root",
                "country", "carbon_intensity", "pue", "carbon_source", "carbon_zone", "host",
                "extra_sensors", "attach", "wait_attached_s", "engine", "autostart", "profile",
                "sync"}
    for fn, skip in ((api.Meter, set()), (api.measure, {"func"})):
        params = inspect.signature(fn).parameters
        assert set(params) - skip == expected, fn
        for name in expected:
            p = params[name]
            assert p.annotation is not inspect.Parameter.empty, (fn, name)
            assert p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD), (fn, name)
            assert name in (fn.__doc__ or ""), (fn, name)  # the docstring lists it
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    meter_params = inspect.signature(api.Meter).parameters
    assert meter_params["interval_s"].default == 1.0 and meter_params["label"].default == "start"
    assert meter_params["wait_attached_s"].default == api.WAIT_ATTACHED_S


def test_the_keywords_are_written_once():
    """Meter's and measure's signatures are MeterOptions' fields (measure's with output by
    name and label None), and the sampling ones are the engine's MeasureOptions fields:
    a keyword added there is in all of them; an unknown one is named as before."""
    import dataclasses

    from tuimeter.meter_options import SAMPLING, MeasureKeywords, MeterOptions

    names = [f.name for f in dataclasses.fields(MeterOptions)]
    assert list(inspect.signature(api.Meter).parameters) == names
    assert list(inspect.signature(api.measure).parameters) == ["func", *(
        f.name for f in dataclasses.fields(MeasureKeywords))]
    assert set(SAMPLING) <= {f.name for f in dataclasses.fields(measure_mod.MeasureOptions)}
    with pytest.raises(TypeError, match=r"^Meter.__init__\(\) got an unexpected keyword "
                                        r"argument 'intervall_s'"):
        api.Meter(intervall_s=1.0)
    with pytest.raises(TypeError, match=r"^measure\(\) got an unexpected keyword"):
        api.measure(intervall_s=1.0)


def test_the_package_is_marked_typed():
    assert importlib.resources.files("tuimeter").joinpath("py.typed").is_file()


SNIPPET = """
import tuimeter

with tuimeter.Meter("run.csv", interval_s=0.5, pue=1.2) as meter:
    meter.mark("eval")
e: float | None = meter.energy_j

@tuimeter.measure
def f(x: int) -> int:
    return x

@tuimeter.measure(label="g", gpu=False)
def g(x: int) -> str:
    return str(x)

y: int = f(1)
z: str = g(2)
"""


def test_mypy_checks_code_using_the_api(tmp_path):
    """mypy (when installed) sees the types: a good snippet passes; a misspelt keyword
    and a wrongly typed value are errors."""
    pytest.importorskip("mypy")
    good = tmp_path / "good.py"
    good.write_text(SNIPPET)
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        import tuimeter
        tuimeter.Meter(intervall_s=0.5)
        tuimeter.Meter(interval_s="fast")
    """))
    run = lambda f: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "c"),
         "--follow-imports=silent", "--ignore-missing-imports", str(f)],
        capture_output=True, text=True, cwd=tmp_path)
    ok = run(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    res = run(bad)
    assert res.returncode == 1, res.stdout + res.stderr
    assert 'Unexpected keyword argument "intervall_s"' in res.stdout
    assert 'has incompatible type "str"; expected "float"' in res.stdout
