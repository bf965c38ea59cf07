import re

from djx import RecipeError, register_op
from djx.ops.common.text_mapper import TEXT_EXTRA, TextMapper

FORMS = ("NFC", "NFKC", "NFD", "NFKD")
# ASCII that ftfy.fix_text returns as it is, in every form: printable characters but `&` (an HTML
# entity's start), tab and line feed. Everything ftfy changes in ASCII is outside it: control
# characters, `\r` (line breaks), `&amp;`-style entities; mojibake and the rest need non-ASCII.
# Most captions are such text; ftfy's own passes over them cost ~60 us a caption.
UNTOUCHED = re.compile(r"[\t\n\x20-\x25\x27-\x7e]*")


@register_op("fix_unicode_mapper")
class FixUnicodeMapper(TextMapper):
    """Fix mojibake and other Unicode errors (ftfy), then normalize to `normalization`.

    `ftfy.fix_text(text, normalization=...)`, as Data-Juicer; `normalization` is NFC, NFKC, NFD or
    NFKD, any case; empty or unset: NFC. Needs the text extra (`pip install '.[text]'` in djx's checkout)."""

    requires = {"ftfy": TEXT_EXTRA}

    def __init__(self, normalization: str | None = None, **common):
        super().__init__(**common)
        form = normalization.upper() if normalization else "NFC"
        if form not in FORMS:
            raise RecipeError(f"fix_unicode_mapper.normalization: {normalization!r} is not one of "
                              f"{', '.join(FORMS)}")
        self.normalization = form

    def map_text(self, text: str) -> str:
        if text.isascii() and UNTOUCHED.fullmatch(text):
            return text
        import ftfy
        return ftfy.fix_text(text, normalization=self.normalization)
