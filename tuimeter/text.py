"""Untrusted text made safe to show on a terminal, in a report or in an error message.

tuimeter shows text it did not write: other users' process names and command lines,
marker labels, host names, session ids and file names from session files, sensor files.
Any of them can hold terminal escape sequences (``\\x1b[2J`` clears the screen, an OSC
sets the window title or writes a hyperlink, C1 ``\\x9b`` is a CSI on some terminals)
or bytes that are not UTF-8 (which make ``print`` raise). :func:`safe_text` replaces
every character a terminal would act on instead of drawing it with a visible escape in
Python's notation, so the text reads as what it is: ``\\x1b[31mEVIL``.

What is replaced: C0 controls (newline and tab included: every use here is one line or
one cell), DEL, C1 controls, lone surrogates (a byte that was not UTF-8, decoded with
``surrogateescape``, is shown as that byte: ``\\xe9``), the bidirectional controls that
reorder what follows (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F, U+061C), and the
line and paragraph separators U+2028, U+2029. Everything else, accents, CJK and emoji
included, is kept. Backslashes are not doubled: the result is for people to read, not a
round trip, and escaping twice changes nothing.

Never imports the UI: the report, the reader and the UI all use it.
"""

from __future__ import annotations

import sys

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)


def _table() -> dict[int, str]:
    table: dict[int, str] = {}
    for cp in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)):
        table[cp] = _SHORT.get(chr(cp), f"\\x{cp:02x}")
    for cp in _BIDI:
        table[cp] = f"\\u{cp:04x}"
    for cp in range(0xD800, 0xE000):  # lone surrogates: not text, cannot even be printed
        # surrogateescape maps an undecodable byte b to U+DC00+b: show the byte
        table[cp] = f"\\x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"\\u{cp:04x}"
    return table


_TABLE = _table()


def safe_text(text: object) -> str:
    """``text`` (anything: ``str()`` is taken) with every control character, lone
    surrogate and bidi control replaced by a visible escape (see the module docstring).
    Idempotent; costs one ``isprintable`` scan for ordinary text."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():  # no control, surrogate, bidi or separator characters at all
        return s
    return s.translate(_TABLE)


#: a spreadsheet reads a cell starting with one of these as a formula (OWASP, "CSV
#: Injection": ``=HYPERLINK(...)``, ``+cmd|...``, ``@SUM(...)``, ``-2+3``)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: object) -> str:
    """A text cell for a CSV meant for spreadsheets: :func:`safe_text`, and a ``'``
    before a first character that would make it a formula (the OWASP rule; the quote
    shows in the cell, the formula does not run). For text only: a number's minus sign
    is not a formula."""
    s = safe_text(text)
    return "'" + s if s.startswith(FORMULA_START) else s


def say(message: str, end: str = "\n", *, raw: bool = False) -> None:
    """A line on stderr; a terminal that has gone away (SSH dropped) is not an error.
    The message is escaped (it may hold file, command and job names: anyone's text)
    unless ``raw`` (our own control characters, e.g. wiping the progress line)."""
    try:
        sys.stderr.write((message if raw else safe_text(message)) + end)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
