"""Marker labels: the one check every entry uses (CLI, socket, API, UI prompt)."""

from __future__ import annotations

import re

import pytest

from tuimeter.labels import BIDI_CONTROLS, MAX_LABEL_CHARS, check_label


@pytest.mark.parametrize("label", [
    "epoch 2", "café", "训练 第二轮", "Ελληνικά", "שלום", "😀 fast", "a" * MAX_LABEL_CHARS,
    "=SUM(A1)",  # stored exactly; spreadsheets are report --format csv's business
])
def test_valid_text_is_accepted(label):
    assert check_label(f"  {label} ") == label


@pytest.mark.parametrize("label, reason", [
    ("caf\udce9", "not valid UTF-8 text (byte 0xe9"),  # what argv gives for b"caf\xe9"
    ("\udcff", "byte 0xff"),
    ("a\ud83db", "lone surrogate U+D83D"),
    ("a\x1b[2Jb", "control characters (U+001B"),
    ("a\x85b", "control characters (U+0085"),  # C1
    ("a\x7fb", "control characters"),
    ("a\u2028b", "control characters"),
    ("", "empty"),
    ("   ", "empty"),
    ("a" * (MAX_LABEL_CHARS + 1), "longer than"),
    (b"bytes", "must be a string"),
])
def test_invalid_labels_are_refused_with_a_reason(label, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        check_label(label)


@pytest.mark.parametrize("code", sorted(map(ord, BIDI_CONTROLS)))
def test_every_bidi_override_and_isolate_is_refused(code):
    """U+202A-U+202E and U+2066-U+2069 make a label show as something it is not."""
    assert len(BIDI_CONTROLS) == 9
    with pytest.raises(ValueError, match=f"U\\+{code:04X}"):
        check_label(f"invoice{chr(code)}fdp.exe")
