"""The node's rows in the live table: a node meter on top, the rest of node under it,
then the chips (issue 27)."""

from __future__ import annotations

import pytest

from tests.fakes.scripted import ScriptedSensor, domain, rapl_like
from tuimeter.model import DomainKind
from tuimeter.tui.widgets import DomainTable

from .conftest import make_app, tick


@pytest.mark.asyncio
async def test_the_node_meter_is_on_top_and_the_rest_of_node_under_it(tmp_path):
    """250 W node over chips of 45 W: the node row first (tagged, not added), the rest
    of node second at 205 W, and the total 250 W."""
    meter = ScriptedSensor("hwmon", [domain("hwmon-node", DomainKind.PLATFORM, in_total=False,
                                            source="hwmon:average")], {"hwmon-node": 250.0})
    app, clock = make_app(tmp_path, sensors=[rapl_like(), meter])
    async with app.run_test(size=(120, 30)) as pilot:
        await tick(pilot, clock, 3)
        table = app.query_one(DomainTable)
        assert table.row_keys[:3] == ("hwmon-node", "rest-of-node", "package-0")
        assert "(node)" in table.row_text("hwmon-node")
        assert table.cell_text("rest-of-node", "power") == "205.0 W"
        assert table.cell_text("total", "power") == "250.0 W"
        await pilot.press("q")
