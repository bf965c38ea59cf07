from djx import register_op
from djx.ops.common.text_mapper import PatternMapper


@register_op("clean_email_mapper")
class CleanEmailMapper(PatternMapper):
    """Remove email addresses from the text, or replace each by `repl`.

    Data-Juicer's default pattern `[A-Za-z0-9.\\-+_]+@[a-z0-9.\\-+_]+\\.[a-z]+` (lower-case domains);
    `pattern` (a regular expression of the `regex` package, DOTALL) replaces it."""

    default_pattern = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"

    def __init__(self, pattern: str | None = None, repl: str = "", **common):
        super().__init__(pattern=pattern, repl=repl, **common)
