"""The UI's number formatters: a missing value is N/A, never nan or 0; no negative zero."""

from __future__ import annotations

import math

import pytest

from tuimeter.tui.format import NA, fmt_power, fmt_share


@pytest.mark.parametrize("share,shown", [(0.425, "42.5"), (0.0, "0.0"), (1.0, "100.0"),
                                         (None, NA), (math.nan, NA)])
def test_a_share_is_a_percentage_or_na(share, shown):
    assert fmt_share(share) == shown


def test_a_zero_power_has_no_sign():
    """A session file may hold ``-0`` (an idle/system remainder of exactly nothing)."""
    assert fmt_power(-0.0) == "0.0 W"
    assert fmt_power(0.0) == "0.0 W"
    assert fmt_power(-0.5) == "-500 mW"


@pytest.mark.parametrize("w,shown", [(-0.0003, "0 mW"), (-0.0004999, "0 mW"), (-0.04, "-40 mW"),
                                     (0.0004, "0 mW"), (-0.0006, "-1 mW"), (0.25, "250 mW")])
def test_a_power_that_rounds_to_zero_has_no_sign(w, shown):
    """idle/system read `-0 mW` (a remainder of -0.3 mW): a figure that rounds to zero is
    drawn without a sign."""
    assert fmt_power(w) == shown
