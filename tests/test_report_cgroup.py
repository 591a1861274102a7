"""``tuimeter report --by cgroup``: per segment, the energy of each cgroup from the session
CSV's cgroup rows and ``unowned``, adding up to the segment's total; the truth in joules
from a recording over a fake /proc; files without cgroup rows, files given twice, hostile
labels; JSON, CSV and table alike."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from tests.fakes.scripted import ScriptedSensor, domain
from tests.helpers import CARBON, make_engine
from tests.test_cgroups import ID, write_cgroup, write_machine, write_stat
from tuimeter.engine.attribution import Attributor
from tuimeter.engine.procscan import ProcFsScanner
from tuimeter.session.csvfile import SessionWriter
from tuimeter.session.report_cli import cmd_report

DOCKER = f"/system.slice/docker-{ID}.scope"
NGINX = "/system.slice/nginx.service"


def record(tmp_path, name="s.csv", cgroups=True, nginx_path=NGINX):
    """48 W over 4 CPUs at 1 s: 3 ticks with the container at 2 CPUs (24 J a tick) and
    nginx at 1 (12 J), a marker ``serve``, then 2 ticks with nginx alone at 2 CPUs
    (24 J). Truth: container 72 J, nginx 36 + 48 = 84 J, idle 36 + 48 = 84 J; 240 J."""
    hz = os.sysconf("SC_CLK_TCK")
    proc = tmp_path / f"proc-{name}"
    proc.mkdir()
    write_machine(proc, 0)
    write_stat(proc, 10, 0)
    write_stat(proc, 11, 0)
    write_cgroup(proc, 10, f"0::{DOCKER}\n")
    write_cgroup(proc, 11, f"0::{nginx_path}\n")
    sensor = ScriptedSensor("rapl", [domain("package-0")], {"package-0": 48.0})
    att = Attributor([sensor], CARBON, scanner=ProcFsScanner(str(proc)), cgroups=cgroups)
    eng, clock = make_engine([sensor], attributor=att, wall_follows_clock=True)
    eng.open()
    w = SessionWriter.create(tmp_path / name, "h")
    w.write_header_info(eng.snapshot)
    a = b = 0
    for k in range(1, 6):
        if k == 4:
            eng.add_marker("serve")
        a += 2 * hz if k <= 3 else 0
        b += hz if k <= 3 else 2 * hz
        write_machine(proc, 4 * hz * k)
        write_stat(proc, 10, a)
        write_stat(proc, 11, b)
        clock.advance(1.0)
        w.write_snapshot(eng.tick())
    w.close()
    eng.close()
    return str(tmp_path / name)


def run(capsys, *argv):
    assert cmd_report(list(argv)) == 0
    return capsys.readouterr().out


def owners(doc):
    return [{o["owner"]: o["energy_j"] for o in s["owners"]} for s in doc["segments"]]


def test_json_per_segment_energy_per_cgroup_adds_up_to_the_total(tmp_path, capsys):
    path = record(tmp_path)
    doc = json.loads(run(capsys, path, "--by", "cgroup", "--format", "json"))
    assert doc["by"] == "cgroup"
    first, serve = owners(doc)
    assert first == pytest.approx({DOCKER: 72.0, NGINX: 36.0, "unowned": 36.0})
    assert serve == pytest.approx({NGINX: 48.0, "unowned": 48.0})
    for s in doc["segments"]:
        assert sum(o["energy_j"] for o in s["owners"]) == pytest.approx(s["energy_j"])
    docker = doc["segments"][0]["owners"][0]
    assert (docker["kind"], docker["container"], docker["name"]) == (
        "docker", ID, f"docker {ID[:12]}")
    assert docker["share"] == pytest.approx(0.5)


def test_csv_and_table_say_the_same(tmp_path, capsys):
    path = record(tmp_path)
    rows = list(csv.DictReader(io.StringIO(run(capsys, path, "--by", "cgroup", "--format",
                                               "csv"))))
    got = {(r["segment"], r["owner"]): float(r["energy_j"]) for r in rows
           if r["domain"] == "(owner)"}
    assert got == pytest.approx({("1", DOCKER): 72.0, ("1", NGINX): 36.0,
                                 ("1", "unowned"): 36.0, ("2", NGINX): 48.0,
                                 ("2", "unowned"): 48.0})
    table = run(capsys, path, "--by", "cgroup")
    assert f"docker {ID[:12]}" in table and "nginx.service" in table and "unowned" in table
    assert "72.0" in table


def test_file_without_cgroup_rows_is_all_unowned_and_a_file_twice_counts_once(tmp_path,
                                                                              capsys):
    """Attribution without cgroups (or a file from before cgroup rows): every joule is
    unowned. The same file given twice: the same figures."""
    old = record(tmp_path, "old.csv", cgroups=False)
    doc = json.loads(run(capsys, old, "--by", "cgroup", "--format", "json"))
    assert owners(doc) == pytest.approx([{"unowned": 144.0}, {"unowned": 96.0}])
    path = record(tmp_path)
    doc = json.loads(run(capsys, path, path, "--by", "cgroup", "--format", "json"))
    assert owners(doc)[0] == pytest.approx({DOCKER: 72.0, NGINX: 36.0, "unowned": 36.0})


def test_hostile_cgroup_label_is_escaped_in_table_and_csv(tmp_path, capsys):
    """A cgroup name with a terminal escape and a leading '=' (a spreadsheet formula)."""
    path = record(tmp_path, nginx_path="/user.slice/=cmd|\x1b[2J.scope")
    table = run(capsys, path, "--by", "cgroup")
    assert "\x1b" not in table and "\\x1b[2J" in table
    out = run(capsys, path, "--by", "cgroup", "--format", "csv")
    assert "\x1b" not in out
    owners = [r["owner"] for r in csv.DictReader(io.StringIO(out))]
    assert "/user.slice/=cmd|\\x1b[2J.scope" in owners
    doc = json.loads(run(capsys, path, "--by", "cgroup", "--format", "json"))
    names = {o.get("name", "") for s in doc["segments"] for o in s["owners"]}
    assert "=cmd|\\x1b[2J.scope" in names and not any("\x1b" in n for n in names)


def test_by_with_codecarbon_is_a_usage_error(tmp_path, capsys):
    path = record(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cmd_report([path, "--by", "cgroup", "--format", "codecarbon"])
    assert exc.value.code == 2


def test_cgroup_owner_key_for_a_generic_by():
    """A cgroup row's owner key: its label, none for idle/system."""
    from tuimeter.session.owners import OWNER_KINDS
    from tuimeter.session.schema import Row

    cgroup_owner = OWNER_KINDS["cgroup"].key
    row = Row(0, 0.0, 1.0, 1.0, "h", "s", "cgroup", "all", "attribution", None, 1.0, 1.0,
              0.0, "attributed", DOCKER, None)
    assert cgroup_owner(row) == DOCKER
    assert cgroup_owner(row._replace(label="idle/system")) is None
    assert cgroup_owner(row._replace(label="other cgroups")) == "other cgroups"
