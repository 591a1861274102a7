"""Session ids: 12 characters, random, and never a number to a CSV reader.

A plain ``uuid4().hex[:12]`` is all digits about once in 280 ids (``123456789012``), and
``12345e678901`` reads as a float (infinity) in pandas, so ``pd.read_csv(session.csv)``
would give the ``session`` column as int64 or float for those sessions and lose the id.
The first character is therefore a letter (a-f), the other eleven hex digits: 6 x 16^11
(about 10^14) ids, still plain hex as before.
"""

from __future__ import annotations

import secrets

_FIRST = "abcdef"


def new_session_id() -> str:
    """A fresh random session id, e.g. ``c3f09a1b2e47``: a letter, then 11 hex digits."""
    raw = secrets.token_bytes(6)
    return _FIRST[raw[0] % len(_FIRST)] + raw.hex()[1:]
