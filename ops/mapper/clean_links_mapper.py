from djx import register_op
from djx.ops.common.text_mapper import PatternMapper
from djx.ops.common.work_budget import DEFAULT_STEPS


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

    span_finder = staticmethod(lambda text, budget: _link_spans(text, budget))

    def __init__(self, pattern: str | None = None, repl: str = "", work_budget: int = DEFAULT_STEPS,
                 pattern_timeout: float = 30.0, **common):
        super().__init__(pattern=pattern, repl=repl, work_budget=work_budget, pattern_timeout=pattern_timeout, **common)


def _link_spans(text, budget):
    from djx.ops.common.link_spans import link_spans  # needs `regex`, an extra: imported when the op runs
    return link_spans(text, budget)
