from djx import register_op
from djx.ops.common.text_mapper import PatternMapper


@register_op("clean_links_mapper")
class CleanLinksMapper(PatternMapper):
    """Remove links from the text, or replace each by `repl`.

    Data-Juicer's default pattern takes any `scheme:` form (http, https, ftp, mailto ...), `www.`
    and `host.tld/`; `pattern` (a regular expression of the `regex` package, DOTALL) replaces it."""

    default_pattern = (
        r"(?i)\b("
        r"(?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
        r"(?:[^\s()<>]+|\(([^\s()<>]+|(\([^\s()<>]+\)))*\))"
        r"+(?:\(([^\s()<>]+|(\([^\s()<>]+\)))*\)|[^\s`!()\[\]{};:\'\".,<>?«»“”‘’])"
        r")"
    )

    def __init__(self, pattern: str | None = None, repl: str = "", **common):
        super().__init__(pattern=pattern, repl=repl, **common)
