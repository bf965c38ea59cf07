"""Files another user or a received dataset controls: they must never run code or choose verdicts."""
from __future__ import annotations

from .common import Case

CASES: list[Case] = []
