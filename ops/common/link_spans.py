"""Where Data-Juicer's link pattern (clean_links_mapper's default) matches, found in linear time.

The pattern, run by a backtracking engine, tries every start and every split of `a.a.a...`: 16 KB
took 87 s. The same matches follow from a few facts about it, each checked here in one pass:
a match starts where a prefix alternative ends at a fixed character (`scheme:` at its `:`,
`www.`, `host.tld/` at its `/`), every start before that character gives the same prefix end,
and from a prefix end the match is the longest stretch of the link body (characters and balanced
parentheses) that ends on a character allowed last. The spans are those `regex.finditer` gives;
the caller re-runs the pattern anchored on each span for its groups (tests/unit: test_link_spans
compares both on generated texts)."""
from __future__ import annotations

from typing import Iterator

import regex

from djx.ops.common.work_budget import WorkBudget

_F = regex.IGNORECASE | regex.DOTALL
_WORD = regex.compile(r"\w")
_LETTER = regex.compile(r"[a-z]", _F)
_AFTER_COLON = regex.compile(r"[a-z0-9%]", _F)
_SCHEME_BACK = regex.compile(r"[\w-]*", _F | regex.REVERSE)
_HOST_BACK = regex.compile(r"[a-z0-9.\-]*", _F | regex.REVERSE)
_TLD = regex.compile(r"[.][a-z]{2,4}", _F)
_EVENTS = regex.compile(r"(?P<scheme>:)(?=[/a-z0-9%])|(?P<www>www\d{0,3}[.])|(?P<host>/)", _F)
_CHAIN = regex.compile(r"(?:[^\s()<>]++|\((?:[^\s()<>]++|\([^\s()<>]++\))*+\))*+", _F)
_GROUP = regex.compile(r"\((?:[^\s()<>]++|\([^\s()<>]++\))*+\)", _F)
_LAST_END = regex.compile(r"[^\s`!()\[\]{};:'\".,<>?«»“”‘’]|\)", _F | regex.REVERSE)
_RANK = {"scheme": 0, "www": 1, "host": 2}  # the pattern's order of alternatives at one start


def link_spans(text: str, budget: WorkBudget) -> Iterator[tuple[int, int]]:
    """The (start, end) of each match of the default link pattern in `text`, left to right."""
    events = [(m.lastgroup, m.start()) for m in _EVENTS.finditer(text)]
    if not events:
        return
    budget.spend(len(text))
    scan = _Scan(text, budget)
    pos, k = 0, 0
    while k < len(events):
        best = None
        for j in range(k, len(events)):
            kind, at = events[j]
            if kind == "www":
                if best is None or at <= best[0]:
                    best = _better(best, scan.www(at), kind)
                continue
            lo, found = scan.ranged(j, kind, at, pos)
            if best is not None and lo > best[0]:
                break
            best = _better(best, found, kind)
        if best is None:
            return
        yield best[0], best[2]
        pos = best[2]
        while k < len(events) and events[k][1] < pos:
            k += 1


def _better(best, found, kind):
    if found is None:
        return best
    cand = (found[0], _RANK[kind], found[1])
    return cand if best is None or cand[:2] < best[:2] else best


class _Scan:
    """Per-text memory: the body end from each prefix end, each scheme or host event's result."""

    def __init__(self, text: str, budget: WorkBudget):
        self.s, self.budget, self.bodies, self.backs, self.ranged_memo = text, budget, {}, {}, {}

    def boundary(self, p: int) -> bool:
        s = self.s
        before = p > 0 and _WORD.match(s, p - 1) is not None
        after = p < len(s) and _WORD.match(s, p) is not None
        return before != after

    def www(self, p: int):
        """`www\\d{0,3}.` at p (the events found it): the match from p, if any."""
        if not self.boundary(p):
            return None
        end = self.body(_EVENTS.match(self.s, p).end())
        return None if end is None else (p, end)

    def ranged(self, j: int, kind: str, at: int, pos: int):
        """A `scheme:` (at its colon) or `host.tld/` (at its slash) event: the first start it
        allows at or after `pos`, and its match (start, end) or None."""
        s = self.s
        back = self.backs.get(j)
        if back is None:
            back = self.backs[j] = (_SCHEME_BACK if kind == "scheme" else _HOST_BACK).match(s, 0, at).start()
            self.budget.spend(at - back + 1)
        lo = max(pos, back)
        memo = self.ranged_memo.get(j)
        if memo is not None and memo[0] == lo:
            return memo
        if kind == "scheme":
            hi, ends = at - 2, self._after_colon(at)
            allowed = lambda p: _LETTER.match(s, p) is not None and self.boundary(p)  # noqa: E731
        else:
            tld = next((n for n in (2, 3, 4) if at - n - 1 >= 0 and _TLD.fullmatch(s, at - n - 1, at)), None)
            hi, ends = (at - tld - 2, [at + 1]) if tld else (-1, [])
            allowed = self.boundary
        found = None
        end = next((e for e in map(self.body, ends) if e is not None), None) if lo <= hi else None
        if end is not None:
            p = next((p for p in range(lo, hi + 1) if allowed(p)), None)
            self.budget.spend(hi - lo + 1)
            found = None if p is None else (p, end)
        self.ranged_memo[j] = (lo, found)
        return lo, found

    def _after_colon(self, at: int) -> list[int]:
        """Where `:(?:/{1,3}|[a-z0-9%])` may end after the colon at `at`, in the order tried."""
        s, n = self.s, 0
        while n < 3 and at + 1 + n < len(s) and s[at + 1 + n] == "/":
            n += 1
        if n:
            return [at + 1 + k for k in range(n, 0, -1)]
        return [at + 2] if _AFTER_COLON.match(s, at + 1) else []

    def body(self, i: int):
        """The end of the link body and its last part from `i`: the last character allowed to end
        a link (or closing parenthesis) in the run of body tokens, after the first token."""
        if i in self.bodies:
            return self.bodies[i]
        s = self.s
        stop = _CHAIN.match(s, i).end()
        end = None
        if stop > i:
            last = _LAST_END.search(s, i + 1, stop)
            self.budget.spend(stop - i + 1)
            if last is not None:
                first_group = _GROUP.match(s, i).end() if s[i] == "(" else None
                end = None if last.end() == first_group else last.end()
        self.bodies[i] = end
        return end
