"""Text from a dataset, made safe to print on a terminal. A received dataset controls its captions,
ids, field names, stat names and image paths; printed as they are, their control characters
(ESC sequences that move the cursor or clear the screen, OSC 8 links, carriage returns, bidi
overrides) could rewrite what djx itself printed, e.g. make a dropped sample read "kept". `safe()`
shows each such character as a visible escape and cuts long text, leaving everything else as is."""
from __future__ import annotations

import re

# C0 controls but tab, DEL, C1 controls, bidi embeddings/overrides/isolates, line/paragraph separators
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(m: re.Match) -> str:
    c = m.group()
    return {"\n": "\\n", "\r": "\\r"}.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def safe(text, limit: int | None = None) -> str:
    """`text` (str() of anything else) with control and bidi characters shown as escapes
    (\\x1b, \\r, \\u202e, ...), cut to `limit` characters with the total length said."""
    text = text if isinstance(text, str) else str(text)
    shown = _UNSAFE.sub(_escape, text)
    if limit is not None and len(shown) > limit:
        return f"{shown[:limit]}... ({len(text):,} characters)"
    return shown
