"""Text that is safe to show: every control character written as a visible escape.

C0 and C1 controls (ESC, OSC, CR, LF, TAB, ...), the Unicode line and paragraph separators and
the bidirectional overrides could recolour, retitle or hyperlink a terminal, rewrite what it
shows, or break a line, a table row or a one-line error. Evidence is data, never terminal
control: everything the registry echoes or renders goes through `inert`. This module imports
nothing heavy, so the command line can use it at start-up.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def inert(text: object, limit: int | None = None) -> str:
    r"""Return `text` with every control character as a visible escape (ESC becomes `\x1b`).

    With `limit`, a longer result is cut to that many characters, ending in `...`.
    """
    shown = _CONTROL.sub(_escape, str(text))
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 3] + "..."
    return shown
