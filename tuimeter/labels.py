"""Marker labels: the one check every entry uses (``tuimeter mark``, the marker socket,
``tuimeter.mark`` / ``Meter.mark``, the UI's label prompt).

A label comes from outside (a shell argument, another process's JSON, a Python string,
keys typed in a terminal) and ends up in a session CSV, a report and a terminal. It is
accepted only when it is valid Unicode text that can be written as UTF-8 and shown as
it is: no lone surrogates (a non-UTF-8 argument reaches Python as ``'caf\\udce9'``), no
control characters (C0, DEL, C1, line/paragraph separators), and no bidirectional
override or isolate controls (U+202A-U+202E, U+2066-U+2069), which make a label display
as something other than what it holds. Headless: no UI import.
"""

from __future__ import annotations

import unicodedata

#: longest label accepted, in characters
MAX_LABEL_CHARS = 200

#: bidirectional embedding/override (U+202A-U+202E) and isolate (U+2066-U+2069) controls
BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


def check_label(label: object) -> str:
    """Return ``label`` without surrounding blanks if it is a usable marker label, else
    raise ValueError with a one-line reason (the label itself is not echoed: it may be
    what makes it unprintable)."""
    if not isinstance(label, str):
        raise ValueError("label must be a string")
    text = label.strip()
    if not text:
        raise ValueError("label is empty")
    if len(text) > MAX_LABEL_CHARS:
        raise ValueError(f"label is longer than {MAX_LABEL_CHARS} characters")
    for i, c in enumerate(text):
        category = unicodedata.category(c)
        if category == "Cs":
            code = ord(c)
            if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os/argv decode it
                raise ValueError(f"label is not valid UTF-8 text (byte 0x{code - 0xDC00:02x} "
                                 f"at character {i + 1})")
            raise ValueError(f"label is not valid Unicode text (lone surrogate U+{code:04X} "
                             f"at character {i + 1})")
        if category in ("Cc", "Zl", "Zp"):
            raise ValueError(f"label contains control characters (U+{ord(c):04X} at "
                             f"character {i + 1})")
        if c in BIDI_CONTROLS:
            raise ValueError(f"label contains a bidirectional override/isolate control "
                             f"(U+{ord(c):04X} at character {i + 1})")
    return text
