"""How much work an HTML parser's tree building will take, read before parsing.

Lexbor (as every HTML5 parser) walks the stack of open elements for many start and end tags
(scope checks), so text nested N deep costs ~N² steps: 1 MB of `<div>` took 441 s. One pass over
the tags keeps an upper estimate of that stack (void elements never open; a `<p>`, `<li>`...
started right after its own kind closes it, as the parser does) and charges its depth for each
tag against the sample's budget, so such a text is rejected before the parser starts."""
from __future__ import annotations

import re

from djx.ops.common.work_budget import WorkBudget

_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*)")
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr keygen".split())
_CLOSES_ITSELF = frozenset("p li dt dd option optgroup tr td th rb rt rp".split())


def charge_html_parse(text: str, budget: WorkBudget) -> None:
    """Spend, on `budget`, the open-element depth at each tag of `text` (raises past its limit)."""
    stack: list[str] = []
    open_count: dict[str, int] = {}
    for m in _TAG.finditer(text):
        name = m.group(2).lower()
        budget.spend(len(stack) + 1)
        if m.group(1):
            if open_count.get(name):
                while True:
                    top = stack.pop()
                    open_count[top] -= 1
                    if top == name:
                        break
        elif name not in _VOID:
            if name in _CLOSES_ITSELF and stack and stack[-1] == name:
                continue
            stack.append(name)
            open_count[name] = open_count.get(name, 0) + 1
