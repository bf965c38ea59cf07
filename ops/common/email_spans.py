"""Where Data-Juicer's email pattern (clean_email_mapper's default) matches, found in linear time.

`[A-Za-z0-9.\\-+_]+@[a-z0-9.\\-+_]+\\.[a-z]+` run by a backtracking engine re-reads the domain from
every start of a long name before an `@` (128 KB: ~6 min). Every start in the run of name
characters before one `@` reaches that `@`, so each `@` is read once: the name run back from it,
the domain run after it, and its last `.` followed by a lower-case letter. The spans are those
`regex.finditer` gives (tests/unit: test_link_spans compares both on generated texts)."""
from __future__ import annotations

from typing import Iterator

import regex

from djx.ops.common.work_budget import WorkBudget

_NAME_BACK = regex.compile(r"[A-Za-z0-9.\-+_]*", regex.DOTALL | regex.REVERSE)
_DOMAIN = regex.compile(r"[a-z0-9.\-+_]*", regex.DOTALL)
_LAST_DOT = regex.compile(r"\.(?=[a-z])", regex.DOTALL | regex.REVERSE)
_LETTERS = regex.compile(r"[a-z]*", regex.DOTALL)


def email_spans(text: str, budget: WorkBudget) -> Iterator[tuple[int, int]]:
    """The (start, end) of each match of the default email pattern in `text`, left to right."""
    pos, at = 0, text.find("@")
    while at >= 0:
        start = max(pos, _NAME_BACK.match(text, 0, at).start())
        domain_end = _DOMAIN.match(text, at + 1).end()
        budget.spend(domain_end - start + 1)
        dot = _LAST_DOT.search(text, at + 2, domain_end) if start < at else None
        if dot is not None:
            end = _LETTERS.match(text, dot.end()).end()
            yield start, end
            pos = end
        at = text.find("@", max(at + 1, pos))
