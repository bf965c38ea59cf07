from djx import register_op
from djx.ops.common.html_work import charge_html_parse
from djx.ops.common.text_mapper import TEXT_EXTRA, TextMapper
from djx.ops.common.work_budget import DEFAULT_STEPS, WorkBudget


@register_op("clean_html_mapper")
class CleanHtmlMapper(TextMapper):
    """Turn HTML into its text (selectolax's Lexbor parser), as Data-Juicer does.

    `<li>` and `<ol>` become a new line starting with `*`; entities are decoded and tags removed
    (the text of scripts and styles stays, as the parser gives it). Needs the text extra (`pip install '.[text]'` in djx's checkout).
    A text whose tags nest so deep that parsing it would cost more than `work_budget` steps
    (ops/common/html_work.py) is rejected (code `work_budget`) before the parser starts."""

    requires = {"selectolax": TEXT_EXTRA}

    def __init__(self, work_budget: int = DEFAULT_STEPS, **common):
        super().__init__(**common)
        self.work_budget = work_budget

    def map_text(self, text: str) -> str:
        from selectolax.lexbor import LexborHTMLParser
        text = text.replace("<li>", "\n*").replace("</li>", "").replace("<ol>", "\n*").replace("</ol>", "")
        charge_html_parse(text, WorkBudget(self.work_budget, f"{self.name}: parsing the HTML"))
        return LexborHTMLParser(text).text()
