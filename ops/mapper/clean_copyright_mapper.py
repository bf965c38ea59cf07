from djx import register_op
from djx.ops.common.text_mapper import TEXT_EXTRA, TextMapper


@register_op("clean_copyright_mapper")
class CleanCopyrightMapper(TextMapper):
    """Remove a copyright notice from the head of a source file.

    As Data-Juicer (the RedPajama code recipes): the text's first `/* ... */` comment is cut when it
    says "copyright" (any case); a text with such a comment, cut or not, is otherwise left as it is.
    A text without one loses its leading lines that start with `//`, `#` or `--`, or are empty.
    The comment is found in linear time (the first `/*`, then the first `*/` after it)."""

    requires = {"regex": TEXT_EXTRA}

    def __init__(self, **common):
        super().__init__(**common)
        import regex
        self.notice = regex.compile("copyright", regex.IGNORECASE)  # Data-Juicer's case folding

    def map_text(self, text: str) -> str:
        start = text.find("/*")
        end = text.find("*/", start + 2) if start >= 0 else -1
        if end >= 0:
            return text[:start] + text[end + 2:] if self.notice.search(text, start, end + 2) else text
        lines = text.split("\n")
        skip = 0
        while skip < len(lines) and (not lines[skip] or lines[skip].startswith(("//", "#", "--"))):
            skip += 1
        return "\n".join(lines[skip:]) if skip else text
