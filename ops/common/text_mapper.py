"""TextMapper: the base of the mappers that rewrite a sample's text, between its special tokens."""
from __future__ import annotations

from djx import Batch, Mapper
from djx.ops.common.special_tokens import TokenMade, map_keeping_tokens, special_tokens
from djx.ops.common.work_budget import DEFAULT_STEPS, WorkBudget, WorkBudgetExceeded

TEXT_EXTRA = "pip install '.[text]' in djx's checkout"


class TextMapper(Mapper):
    """Rewrites each sample's text with `map_text`, never changing the run's special tokens
    (ops/common/special_tokens.py: map_keeping_tokens). A sample whose text cannot be mapped is
    rejected with the reason (code `op_error`); one whose mapping would make a special token,
    `token_made`; one whose text costs more than the op's work budget, `work_budget`."""

    def map_text(self, text: str) -> str:
        """The new text: of the whole text with placeholders for its tokens, or of one stretch
        between tokens (special_tokens.map_keeping_tokens)."""
        raise NotImplementedError

    def map_sample_text(self, text: str, tokens: tuple[str, ...]) -> str:
        """The new text of a whole sample; override to treat its ends (first and last stretch) apart."""
        return map_keeping_tokens(text, tokens, self.map_text)

    def process(self, batch: Batch) -> None:
        tokens = special_tokens(batch.ctx)
        for i, sample in enumerate(batch.samples):
            try:
                sample[batch.text_key] = self.map_sample_text(batch.text(sample), tokens)
            except TokenMade as e:
                batch.reject(i, f"{self.name}: {e}", "token_made")
            except WorkBudgetExceeded as e:
                batch.reject(i, str(e), "work_budget")
            except (ValueError, TypeError, UnicodeError, RecursionError) as e:
                batch.reject(i, f"{self.name} could not map the text: {type(e).__name__}: {e}", "op_error")


class PatternMapper(TextMapper):
    """Replaces what a regular expression matches (the `regex` package, as Data-Juicer, with
    DOTALL) by `repl`. A `pattern` written as a raw-string literal (`r'...'`) is taken as its
    content, as Data-Juicer does; a pattern that does not compile fails the recipe at load.

    The default pattern's matches are found by `span_finder` in linear time, counted against
    `work_budget` steps a sample; a recipe's own pattern runs in the regex engine, stopped after
    `pattern_timeout` seconds a sample. Either way the sample is rejected (code `work_budget`)
    instead of holding its worker."""

    requires = {"regex": TEXT_EXTRA}
    default_pattern = ""
    span_finder = None  # (text, WorkBudget) -> (start, end) of each default-pattern match

    def __init__(self, pattern: str | None = None, repl: str = "", work_budget: int = DEFAULT_STEPS,
                 pattern_timeout: float = 30.0, **common):
        super().__init__(**common)
        self.work_budget, self.pattern_timeout = work_budget, pattern_timeout
        self.fast = pattern is None and type(self).span_finder is not None
        import regex
        from djx import RecipeError
        if pattern is None:
            pattern = self.default_pattern
        elif len(pattern) > 2 and pattern[:2] in ("r'", 'r"') and pattern[-1] == pattern[1]:
            pattern = pattern[2:-1]
        try:
            self.compiled = regex.compile(pattern, flags=regex.DOTALL)
        except (regex.error, ValueError, TypeError) as e:
            raise RecipeError(f"{self.name}.pattern: {pattern!r} is not a regular expression: {e}") from None
        try:  # a replacement is read on a match only: checked here on one of a pattern with the same groups
            _same_groups(self.compiled).match("").expand(repl)
        except (regex.error, IndexError) as e:
            raise RecipeError(f"{self.name}.repl: {repl!r} is not a replacement for {pattern!r}: {e}") from None
        self.pattern, self.repl = pattern, repl

    def map_text(self, text: str) -> str:
        if self.fast:
            return self._sub_spans(text)
        try:
            return self.compiled.sub(self.repl, text, timeout=self.pattern_timeout)
        except TimeoutError:
            raise WorkBudgetExceeded(f"{self.name}: the pattern ran over pattern_timeout={self.pattern_timeout} s on "
                                     "this text (raise pattern_timeout, or write a pattern that cannot backtrack)") from None

    def _sub_spans(self, text: str) -> str:
        """`sub` through the spans the linear finder gives, each expanded from the pattern
        anchored on it (the same match object `sub` would have made, groups included)."""
        budget = WorkBudget(self.work_budget, f"{self.name}: the default pattern")
        out, last = [], 0
        for start, end in type(self).span_finder(text, budget):
            m = self.compiled.match(text, start, end)
            if m is None or m.end() != end:
                raise ValueError(f"the linear matcher and the pattern disagree at {start}:{end}")
            out += [text[last:start], m.expand(self.repl)]
            last = end
        return "".join(out) + text[last:] if out else text


def _same_groups(compiled):
    """An empty-matching pattern with `compiled`'s groups (numbers and names)."""
    import regex
    names = {i: n for n, i in compiled.groupindex.items()}
    return regex.compile("".join(f"(?P<{names[i]}>)" if i in names else "()" for i in range(1, compiled.groups + 1)))
