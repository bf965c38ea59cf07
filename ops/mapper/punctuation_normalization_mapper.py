import re

from djx import register_op
from djx.ops.common.text_mapper import TextMapper

# Data-Juicer's map, as it is (from BigScience's data preparation), "１" -> '"' included
PUNCTUATION_UNICODE = {
    "，": ",", "。": ".", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"', "１": '"',
    "」": '"', "「": '"', "《": '"', "》": '"', "´": "'", "∶": ":", "：": ":", "？": "?", "！": "!",
    "（": "(", "）": ")", "；": ";", "–": "-", "—": " - ", "．": ". ", "～": "~", "’": "'", "…": "...",
    "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%", "►": "-",
}
_PUNCTUATION = re.compile("[" + re.escape("".join(PUNCTUATION_UNICODE)) + "]")  # only where there is some


def _ascii(match: re.Match) -> str:
    return PUNCTUATION_UNICODE[match.group()]


@register_op("punctuation_normalization_mapper")
class PunctuationNormalizationMapper(TextMapper):
    """Replace Unicode punctuation (full-width, CJK, curly quotes, dashes) by ASCII.

    Character by character with Data-Juicer's map (PUNCTUATION_UNICODE): e.g. `，`->`,`, `“`->`"`,
    `—`->` - `, `…`->`...`; it also maps the full-width digit `１` to `"`, as Data-Juicer does."""

    def __init__(self, **common):
        super().__init__(**common)

    def map_text(self, text: str) -> str:
        return _PUNCTUATION.sub(_ascii, text)
