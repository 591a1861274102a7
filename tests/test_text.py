"""safe_text and spreadsheet_cell: untrusted text made safe to show, or to open in a
spreadsheet."""

from __future__ import annotations

import os

import pytest

from tuimeter.text import safe_text, spreadsheet_cell


@pytest.mark.parametrize("raw, shown", [
    ("\x1b[2J\x1b[31mEVIL", "\\x1b[2J\\x1b[31mEVIL"),  # C0: ESC
    ("\x1b]8;;http://x\x07link", "\\x1b]8;;http://x\\x07link"),  # OSC hyperlink, BEL
    ("a\x9bb\x85c", "a\\x9bb\\x85c"),  # C1: CSI, NEL
    ("del\x7f", "del\\x7f"),
    ("two\nlines\tand\rcr\x00", "two\\nlines\\tand\\rcr\\x00"),
    ("caf" + os.fsdecode(b"\xe9"), "caf\\xe9"),  # not UTF-8, surrogate-escaped: the byte
    ("lone \ud800", "lone \\ud800"),
    ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override reorders what follows
    ("line\u2028sep", "line\\u2028sep"),
])
def test_controls_become_visible_escapes(raw, shown):
    assert safe_text(raw) == shown
    assert safe_text(shown) == shown  # escaping twice changes nothing
    shown.encode("utf-8")  # printable: no surrogate left to make print() raise


#: every bidi control and separator the module docstring names (Unicode's Bidi_Control
#: set: the embeddings and overrides U+202A..U+202E, the isolates U+2066..U+2069, LRM,
#: RLM, ALM) and the line and paragraph separators
BIDI_AND_SEPARATORS = [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068,
                       0x2069, 0x200E, 0x200F, 0x061C, 0x2028, 0x2029]


@pytest.mark.parametrize("cp", BIDI_AND_SEPARATORS, ids=[f"U+{c:04X}" for c in BIDI_AND_SEPARATORS])
def test_every_bidi_control_is_escaped(cp):
    """Each one alone (a table that drops one, say the last isolate, lets a process name
    reorder the rest of its line)."""
    assert safe_text(f"a{chr(cp)}b") == f"a\\u{cp:04x}b"


@pytest.mark.parametrize("text", ["train, epoch 2", "café 日本 👍", "C:\\path\\x1b", "", "[b]x[/b]"])
def test_ordinary_text_is_unchanged(text):
    assert safe_text(text) == text


def test_anything_is_made_text():
    assert safe_text(42) == "42"
    assert safe_text(OSError("bad \x1b")) == "bad \\x1b"


@pytest.mark.parametrize("raw, cell", [
    ("=HYPERLINK(\"http://x\",\"y\")", "'=HYPERLINK(\"http://x\",\"y\")"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\t=1", "\\t=1"),  # escaped first: no longer starts with a tab
    ("epoch 2", "epoch 2"),
    ("a=b", "a=b"),
    ("", ""),
])
def test_spreadsheet_cells_never_start_a_formula(raw, cell):
    assert spreadsheet_cell(raw) == cell
