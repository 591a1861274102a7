"""`tuimeter profile`'s outputs read by the tools they are for: the ``--speedscope`` file
against speedscope's own JSON schema (speedscope 1.25.0's ``file-format-schema.json``,
vendored in tests/data/speedscope with its licence) with ``jsonschema``, and the
``--collapsed`` folded stacks rendered by Brendan Gregg's ``flamegraph.pl`` (vendored in
tests/data/flamegraph, CDDL). Each skips, saying why, where its tool is missing (the
``jsonschema`` test extra, ``perl``).

One real ``tuimeter profile`` run over a fake powercap tree makes both files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.fakes.powercap import FakePowercap
from tests.helpers import ROOT, env_for
from tests.test_profile_cli import SteadyDriver, profile, script
from tuimeter.profile.result import SPEEDSCOPE_SCHEMA

DATA = ROOT / "tests" / "data"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """(folded text, speedscope document, profile JSON) of a two-function program."""
    tmp = tmp_path_factory.mktemp("profile")
    fake = FakePowercap(tmp / "sys").intel_desktop(dram=False, psys=False)
    driver = SteadyDriver(fake)
    driver.start()
    try:
        prog = script(tmp, "two.py", """\
            def light():
                burn(0.3)

            def heavy():
                burn(0.9)

            light()
            heavy()
            """)
        r, data = profile(env_for(tmp, fake), tmp, "--collapsed", str(tmp / "p.folded"),
                          "--speedscope", str(tmp / "p.json"), "--", sys.executable, str(prog))
    finally:
        driver.halt.set()
        driver.join()
    assert r.returncode == 0, r.stderr
    return (tmp / "p.folded").read_text(), json.loads((tmp / "p.json").read_text()), data


def test_speedscope_file_validates_against_speedscopes_schema(outputs):
    """No schema error, and what the schema cannot say but speedscope's importer needs:
    every frame index names a frame, one weight per sample, weights adding to endValue."""
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema not installed (pip install -e '.[test]')")
    _, doc, _ = outputs
    schema = json.loads((DATA / "speedscope" / "file-format-schema.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    assert not errors, errors
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA
    (prof,) = doc["profiles"]
    n = len(doc["shared"]["frames"])
    assert prof["samples"] and all(0 <= i < n for s in prof["samples"] for i in s)
    assert len(prof["weights"]) == len(prof["samples"])
    assert sum(prof["weights"]) == pytest.approx(prof["endValue"])
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert {"light", "heavy"} <= names


def _flamegraph_pl() -> list[str]:
    """perl and the vendored flamegraph.pl, or a skip saying what is missing (the modules
    it loads are in Debian's ``perl``, not in the essential ``perl-base``)."""
    perl = shutil.which("perl")
    modules = "use open qw(:std :utf8); use Getopt::Long;"
    if perl is None or subprocess.run([perl, "-e", modules], capture_output=True).returncode:
        pytest.skip("perl with its standard modules is not installed (apt-get install perl; "
                    ".ci/run does): flamegraph.pl cannot run")
    return [perl, str(DATA / "flamegraph" / "flamegraph.pl")]


def test_folded_stacks_render_in_flamegraph_pl(outputs, tmp_path):
    """flamegraph.pl takes every line (it warns "Ignored N lines with invalid format" for
    any it cannot read) and draws each function with the millijoules of the file: the
    root's total is the profile's energy, within the 0.5 mJ rounding per stack."""
    folded, _, data = outputs
    r = subprocess.run([*_flamegraph_pl(), "--countname", "mJ", "--title", "energy"],
                       input=folded, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    titles = [t.text for t in ET.fromstring(r.stdout).iter(f"{SVG}title")]
    total = next(t for t in titles if t.startswith("all ("))
    lines = folded.splitlines()
    want_mj = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    assert total.startswith(f"all ({want_mj:,} mJ, 100%)")
    assert want_mj == pytest.approx(data["total_energy_j"] * 1000, abs=0.5 * len(lines) + 1)
    for func in ("light", "heavy"):
        assert any(t.startswith(f"{func} (two.py:") for t in titles), titles
