"""What the main screen says at every size from 80x24: tags, the totals panel's grid
line, the top bar, the sparklines' scale, the help's scrolling, where toasts go."""

from __future__ import annotations

import pytest

from tests.fakes.scripted import FakeClock, domain
from tuimeter.model import DomainKind
from tuimeter.tui.widgets._domain_table import row_name

from .conftest import replay_app, screen_text, tick

SIZES = [(80, 24), (100, 30), (120, 40), (160, 48)]


def test_a_part_is_indented_under_its_package_with_its_tag_whole():
    core = domain("package-0/core", DomainKind.CORE, in_total=False)
    assert row_name(core, {"package-0"}, 18) == "└ core (part)"
    assert row_name(core, set(), 18) == "package-0/… (part)"  # 18 cells, the tag whole
    long = domain("package-0-die-1/uncore", DomainKind.UNCORE, in_total=False)
    assert row_name(long, set(), 18).endswith("… (part)") and len(row_name(long, set(), 18)) == 18
    psys = domain("psys", DomainKind.PSYS, in_total=False)
    assert row_name(psys, {"package-0"}, 18) == "psys (whole)"
    dram = domain("package-0/dram", DomainKind.DRAM)  # counted: not indented, no tag
    assert row_name(dram, {"package-0"}, 18) == "package-0/dram"
    evil = domain("\x1b[2Jzone/core", DomainKind.CORE, in_total=False)
    assert "\x1b" not in row_name(evil, set(), 18) and row_name(evil, set(), 18).endswith("(part)")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_part_and_whole_tags_show_at_every_size(size):
    """Guards `package-0/core (part)` (23 cells in a 20-cell column): the tag wrapped onto
    a second line the one-line row never shows."""
    clock = FakeClock()
    app = replay_app(clock)
    async with app.run_test(size=size) as pilot:
        await tick(pilot, clock, 3)
        text = screen_text(app)[0]
        assert "+ └ core (part)" in text and "@ psys (whole)" in text
        await pilot.press("q")
