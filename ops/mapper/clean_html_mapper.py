from djx import register_op
from djx.ops.common.text_mapper import TEXT_EXTRA, TextMapper


@register_op("clean_html_mapper")
class CleanHtmlMapper(TextMapper):
    """Turn HTML into its text (selectolax's Lexbor parser), as Data-Juicer does.

    `<li>` and `<ol>` become a new line starting with `*`; entities are decoded and tags removed
    (the text of scripts and styles stays, as the parser gives it). Needs the text extra (`pip install '.[text]'` in djx's checkout)."""

    requires = {"selectolax": TEXT_EXTRA}

    def __init__(self, **common):
        super().__init__(**common)

    def map_text(self, text: str) -> str:
        from selectolax.lexbor import LexborHTMLParser
        text = text.replace("<li>", "\n*").replace("</li>", "").replace("<ol>", "\n*").replace("</ol>", "")
        return LexborHTMLParser(text).text()
