"""The three mappers of Data-Juicer's RedPajama arXiv recipe that cut text out of a LaTeX source:
its preamble (everything before the first sectioning command), its comments, and its bibliography
(everything from the bibliography or appendix on).

Each finds the spans to cut as Data-Juicer does, in one pass over the text (no backtracking: the
cost is linear in the text's length whatever it holds), and cuts them around the run's special
tokens (special_tokens.delete_keeping_tokens): a token in a cut span stays, its text around it goes.
"""
from __future__ import annotations

import re

from djx import register_op
from djx.ops.common.special_tokens import delete_keeping_tokens
from djx.ops.common.text_mapper import TextMapper

# the sectioning commands, then an optional star, seen only where a `[` or `{` follows
_HEADER = re.compile(r"\\(?:chapter|part|section|subsection|subsubsection|paragraph|subparagraph)\*?(?=[\[{])")


def header_start(text: str) -> int | None:
    """Where the first header of `text` starts: a sectioning command (with an optional `*`), an
    optional `[short title]` closed by the first `]{` after it, then `{` with a `}` somewhere after
    it (the title's own braces are not balanced, as in Data-Juicer). None without one."""
    last_close = text.rfind("}")
    short_end = None  # the first `]{` after the latest `[`, kept while the headers move on (linear)
    for m in _HEADER.finditer(text):
        at = m.end()
        if text[at] == "{":
            found = last_close > at
        else:
            if short_end is None or -1 != short_end <= at:
                short_end = text.find("]{", at + 1)
            found = short_end != -1 and last_close >= short_end + 2
        if found:
            return m.start()
    return None


@register_op("remove_header_mapper")
class RemoveHeaderMapper(TextMapper):
    """Remove what comes before a LaTeX text's first header (\\chapter, \\part, \\section and below).

    The header is a sectioning command with an optional `*`, an optional `[short title]` and a
    `{title}`, as in Data-Juicer; the text from it on is kept. A text without one becomes empty
    with `drop_no_head` (then dropped by a length filter, as Data-Juicer's recipe does), its
    special tokens too, else it is left as it is. Special tokens before a header stay, at the start
    of the text."""

    def __init__(self, drop_no_head: bool = True, **common):
        super().__init__(**common)
        self.drop_no_head = drop_no_head

    def spans(self, text: str) -> list[tuple[int, int]]:
        start = header_start(text)
        if start is None:
            return [(0, len(text))] if self.drop_no_head else []
        return [(0, start)]

    def map_text(self, text: str) -> str:
        return delete_keeping_tokens(text, (), self.spans)

    def map_sample_text(self, text: str, tokens: tuple[str, ...]) -> str:
        if self.drop_no_head and header_start(text) is None:
            return ""  # the sample is meant to go, its tokens too: as in Data-Juicer, a length filter drops it
        return delete_keeping_tokens(text, tokens, self.spans)


# a `%` after any character but a backslash (the character goes too) and the rest of its line, which
# must not be empty; the character may be the newline before a line that starts with `%`
_INLINE_COMMENT = re.compile(r"[^\\]%[^\n]+$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^%[^\n]*\n?", re.MULTILINE)  # a line that starts with `%`, its newline too


@register_op("remove_comments_mapper")
class RemoveCommentsMapper(TextMapper):
    """Remove the LaTeX comments (`%` to the end of the line) from the text.

    As Data-Juicer: with `inline`, a `%` that follows any character but a backslash and has text
    after it on its line is cut to the end of the line, with the character before it (the space,
    or the newline before a comment line); then, with `multiline`, every line that starts with `%`
    is cut with its newline (a comment at the very start of the text, a lone `%`). `doc_type` is
    taken and, as in Data-Juicer, not read: every text is treated as TeX."""

    def __init__(self, doc_type: str | list[str] = "tex", inline: bool = True, multiline: bool = True, **common):
        super().__init__(**common)
        self.doc_type, self.inline, self.multiline = doc_type, inline, multiline

    def map_text(self, text: str) -> str:
        return self.map_sample_text(text, ())

    def map_sample_text(self, text: str, tokens: tuple[str, ...]) -> str:
        for wanted, pattern in ((self.inline, _INLINE_COMMENT), (self.multiline, _COMMENT_LINE)):
            if wanted:
                text = delete_keeping_tokens(text, tokens, lambda t, p=pattern: [m.span() for m in p.finditer(t)])
        return text


_BIBLIOGRAPHY_MARKS = ("\\appendix", "\\begin{references}", "\\begin{REFERENCES}", "\\begin{thebibliography}")
_BIBLIOGRAPHY = "\\bibliography{"


def bibliography_start(text: str) -> int | None:
    """Where the text's bibliography starts: the first `\\appendix`, `\\begin{references}` (or
    REFERENCES), `\\begin{thebibliography}`, or `\\bibliography{` with a `}` somewhere after it.
    None without one."""
    starts = [at for at in map(text.find, _BIBLIOGRAPHY_MARKS) if at >= 0]
    at = text.find(_BIBLIOGRAPHY)
    if at >= 0 and text.rfind("}") >= at + len(_BIBLIOGRAPHY):
        starts.append(at)
    return min(starts, default=None)


@register_op("remove_bibliography_mapper")
class RemoveBibliographyMapper(TextMapper):
    """Remove a LaTeX text's bibliography and appendix: everything from the first \\appendix,
    \\begin{references}, \\begin{thebibliography} or \\bibliography{...} on.

    As Data-Juicer: `\\begin{REFERENCES}` counts too; a `\\bibliography{` needs a `}` somewhere
    after it; the cut goes to the end of the text, its last newline included. Special tokens in
    the part cut stay, at the end of the text."""

    @staticmethod
    def spans(text: str) -> list[tuple[int, int]]:
        start = bibliography_start(text)
        return [] if start is None else [(start, len(text))]

    def map_text(self, text: str) -> str:
        return delete_keeping_tokens(text, (), self.spans)

    def map_sample_text(self, text: str, tokens: tuple[str, ...]) -> str:
        return delete_keeping_tokens(text, tokens, self.spans)
