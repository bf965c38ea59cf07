from djx import register_op
from djx.ops.common.text_mapper import PatternMapper
from djx.ops.common.work_budget import DEFAULT_STEPS


@register_op("clean_email_mapper")
class CleanEmailMapper(PatternMapper):
    """Remove email addresses from the text, or replace each by `repl`.

    Data-Juicer's default pattern `[A-Za-z0-9.\\-+_]+@[a-z0-9.\\-+_]+\\.[a-z]+` (lower-case domains);
    `pattern` (a regular expression of the `regex` package, DOTALL) replaces it."""

    default_pattern = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"

    span_finder = staticmethod(lambda text, budget: _email_spans(text, budget))

    def __init__(self, pattern: str | None = None, repl: str = "", work_budget: int = DEFAULT_STEPS,
                 pattern_timeout: float = 30.0, **common):
        super().__init__(pattern=pattern, repl=repl, work_budget=work_budget, pattern_timeout=pattern_timeout, **common)


def _email_spans(text, budget):
    from djx.ops.common.email_spans import email_spans  # needs `regex`, an extra: imported when the op runs
    return email_spans(text, budget)
