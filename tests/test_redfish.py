"""Redfish (issue 27): the BMC's power over HTTP(S) from a local server, both schemas,
auth failures, a slow BMC, TLS with a CA file; read off the sampling thread. Truth in
joules: a BMC answering P W, held over T s, is P x T."""

from __future__ import annotations

import re
import time

import pytest

from tests.fakes.redfish import FakeRedfish
from tests.helpers import wait_for
from tuimeter.model import DomainKind, Status
from tuimeter.sensors.node_poller import FetchError
from tuimeter.sensors.redfish import RedfishSensor


@pytest.fixture
def bmc_factory(tmp_path):
    made = []

    def make(**kw):
        made.append(FakeRedfish(tmp_path, **kw))
        return made[-1]

    yield make
    for b in made:
        b.close()


@pytest.mark.parametrize("schema", ["power", "environment"])
def test_both_schemas_give_the_nodes_power(bmc_factory, monkeypatch, schema):
    """Power (PowerConsumedWatts) and EnvironmentMetrics (PowerWatts.Reading): 250 W;
    the enclosure's 4000 W is never taken for this node."""
    bmc_factory(schema=schema, enclosure=True).install(monkeypatch)
    s = RedfishSensor()
    assert s.is_available().available
    assert s.fetch() == 250.0
    assert ("EnergykWh" in s.note) is (schema == "environment")


def test_a_plain_read_never_waits_for_the_bmc_and_integrates_its_answers(bmc_factory,
                                                                        monkeypatch):
    """open() makes no request; the meter's thread asks; read() gives the platform at
    250 W held since its answer, and the energy between two reads is 250 W x their gap."""
    bmc = bmc_factory().install(monkeypatch)
    s = RedfishSensor()
    [dom] = s.open()
    try:
        assert dom.kind is DomainKind.PLATFORM and not dom.in_total
        wait_for(lambda: s._meter.answers >= 1, what="the BMC's answer")
        t0 = time.monotonic()
        [a] = s.read(t0)
        [b] = s.read(t0 + 1.5)
        assert b.energy_j - a.energy_j == pytest.approx(250.0 * 1.5)
        assert bmc.requests and all(r.startswith("/redfish/v1/") for r in bmc.requests)
    finally:
        s.close()


@pytest.mark.parametrize("setup, says", [
    (lambda b, mp: b.install(mp, password="wrong"), "refused the credentials (HTTP 401)"),
    (lambda b, mp: (b.install(mp), setattr(b, "delay_s", 3.0)), "no answer in 1 s")])
def test_refused_credentials_or_a_slow_bmc_is_one_line(bmc_factory, monkeypatch, setup, says):
    bmc = bmc_factory()
    setup(bmc, monkeypatch)
    s = RedfishSensor()
    with pytest.raises(FetchError, match=re.escape(says)) as info:
        s.fetch()
    assert "\n" not in str(info.value) and "s3cret" not in str(info.value)
    s.open()
    try:
        wait_for(lambda: s._meter.fault, what="the failure seen by the meter's thread")
        assert s.read(time.monotonic())[0].status is Status.LOST
        [event] = s.drain_events()
        assert says in event.message
    finally:
        bmc.delay_s = 0.0
        s.close()


def test_tls_is_checked_against_the_ca_file(bmc_factory, monkeypatch):
    """A self-signed BMC: refused without its CA file (never "verify off"), read with it."""
    bmc = bmc_factory(https=True).install(monkeypatch)
    monkeypatch.delenv("TUIMETER_REDFISH_CA_FILE")
    with pytest.raises(FetchError, match="certificate"):
        RedfishSensor().fetch()
    monkeypatch.setenv("TUIMETER_REDFISH_CA_FILE", bmc.ca_file)
    assert RedfishSensor().fetch() == 250.0


@pytest.mark.parametrize("url", ["ftp://bmc", "https://user:pw@bmc", "bmc.example"])
def test_a_bad_url_or_credentials_in_it_are_refused_in_one_line(monkeypatch, url):
    monkeypatch.setenv("TUIMETER_REDFISH_URL", url)
    st = RedfishSensor().is_available()
    assert not st.available and "TUIMETER_REDFISH_URL" in st.reason and "pw" not in st.reason


def test_without_a_url_redfish_is_absent_and_silent():
    st = RedfishSensor().is_available()
    assert not st.available and st.reason in RedfishSensor.absent_reasons
