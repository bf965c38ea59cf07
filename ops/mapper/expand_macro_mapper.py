"""expand_macro_mapper: the LaTeX macros a text defines without arguments, written out where the
text uses them, as Data-Juicer's RedPajama arXiv recipe does.

The definitions are found in one pass over the text (linear: each candidate looks at its own line
once). The expansion follows Data-Juicer's order exactly, one macro after the other over the whole
text, definitions included, so that a later macro also expands inside an earlier one's values."""
from __future__ import annotations

import re

from djx import register_op
from djx.ops.common.text_mapper import TextMapper
from djx.ops.common.work_budget import DEFAULT_STEPS, WorkBudget

_NAME_CHARS = re.compile(r"[a-zA-Z0-9]*")
SCAN_STEP = 32  # characters a literal search passes over in about the time of one character written
# Unicode's White_Space characters (what Data-Juicer's `\s` takes: Python's str.isspace also takes
# the separators \x1c-\x1f, which it does not)
_SPACES = re.compile("[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*")


def _line_end(text: str):
    """`line_end(at)`: where the line holding `at` ends (its newline, or the text's end); the last
    line found is remembered, so candidates moving forward along one long line look it up once."""
    start = end = -1

    def line_end(at: int) -> int:
        nonlocal start, end
        if not start <= at <= end:
            start, end = at, text.find("\n", at)
            end = len(text) if end == -1 else end
        return end
    return line_end


def _value(text: str, brace: int, line_end) -> str | None:
    """The value whose `{` is at `brace`: the rest of that line, which must end with `}` (that last
    `}` dropped); None when the line does not end so."""
    end = line_end(brace + 1)
    return text[brace + 1:end - 1] if end - 1 > brace and text[end - 1] == "}" else None


def _newcommands(text: str):
    """(name, value) of each `\\newcommand{\\name}{value}` (or `\\newcommand*`) whose line ends
    with the value's `}`; a match takes the rest of its line, so a line defines one macro at most."""
    line_end, at = _line_end(text), text.find("\\newcommand")
    while at != -1:
        brace = at + len("\\newcommand") + (text.startswith("*", at + len("\\newcommand")))
        name_end = _NAME_CHARS.match(text, brace + 2).end() if text.startswith("{\\", brace) else -1
        value = None
        if name_end > brace + 2 and text.startswith("}{", name_end):
            value = _value(text, name_end + 1, line_end)
        if value is not None:
            yield text[brace + 1:name_end], value
        at = text.find("\\newcommand", line_end(name_end) if value is not None else at + 1)


def _defs(text: str):
    """(name, value) of each `\\def\\name{value}` (spaces, newlines too, allowed around the name)
    whose line ends with the value's `}`."""
    line_end, at = _line_end(text), text.find("\\def")
    while at != -1:
        name = _SPACES.match(text, at + 4).end()
        name_end = _NAME_CHARS.match(text, name + 1).end() if text.startswith("\\", name) else -1
        brace = _SPACES.match(text, name_end).end() if name_end > name + 1 else -1
        value = _value(text, brace, line_end) if brace != -1 and text.startswith("{", brace) else None
        if value is not None:
            yield text[name:name_end], value
        at = text.find("\\def", line_end(brace) if value is not None else at + 1)


def macro_definitions(text: str) -> dict[str, str]:
    """Each macro `text` defines without arguments -> its value: the `\\newcommand`s in the text's
    order, then the `\\def`s; a macro defined again keeps its first place and takes the last value."""
    macros = dict(_newcommands(text))
    for name, value in _defs(text):
        macros[name] = value
    return macros


@register_op("expand_macro_mapper")
class ExpandMacroMapper(TextMapper):
    """Expand the LaTeX macros a text defines without arguments (\\newcommand, \\def) where it uses them.

    As Data-Juicer: a definition counts only when its line ends with the value's closing `}` (a
    value is the rest of that line); a use is the macro's name followed by a character that is not
    an ASCII letter or digit (the name at the very end of the text stays), that character is kept,
    and it is not itself the start of another use (`\\x\\x.`: the second stays). Each macro in
    turn is replaced over the whole text, its definition included, so a later macro also expands in
    an earlier one's values. Macros with arguments stay as they are. The characters the expansions
    write (macros that expand into each other can double the text with each one) and each macro's
    pass over the text (a 32nd of its length: thousands of macros in a long text cost their count
    times its length) are counted against `work_budget`: a text that would take more is rejected,
    code `work_budget`."""

    def __init__(self, work_budget: int = DEFAULT_STEPS, **common):
        super().__init__(**common)
        self.work_budget = work_budget

    def map_text(self, text: str) -> str:
        budget = WorkBudget(self.work_budget, f"{self.name}: the expanded macros")
        for name, value in macro_definitions(text).items():
            budget.spend(len(text) // SCAN_STEP + 1)  # a pass over the whole text per macro
            if name not in text:
                continue

            def expanded(use: re.Match, value: str = value) -> str:
                budget.spend(len(value) + 1)
                return value + use.group(1)
            text = re.sub(re.escape(name) + "([^a-zA-Z0-9])", expanded, text)
        return text
