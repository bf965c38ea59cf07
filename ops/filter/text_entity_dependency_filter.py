from typing import Literal

from djx import Batch, ModelSpec, RangeFilter, register_op
from djx.ops.common.text_models import SPACY_INSTALL, remove_special_tokens, spacy_pipeline

ENTITY_POS = ("NOUN", "PROPN", "PRON")
ENTITY_TAGS = ("NN", "NR", "PN", "NNS", "NNP", "NNPS", "PRP")


def dependency_edges(doc) -> list[int]:
    """Per entity token (a noun, proper noun or pronoun by POS and tag), in text order: its edges
    in the dependency tree: one to its head unless it is the root, plus one per non-punctuation
    token that depends on it."""
    edges = {t.i: 0 for t in doc if t.pos_ in ENTITY_POS and t.tag_ in ENTITY_TAGS}
    for i in edges:
        if doc[i].dep_ != "ROOT":
            edges[i] += 1
    for t in doc:
        if t.pos_ != "PUNCT" and t.head.i in edges and t.dep_ != "ROOT":
            edges[t.head.i] += 1
    return list(edges.values())


@register_op("text_entity_dependency_filter")
class TextEntityDependencyFilter(RangeFilter):
    """Keep samples whose entities (nouns, proper nouns, pronouns) have at least
    `min_dependency_num` dependency edges each (`all`) or at least one such entity (`any`); a text
    without entities is dropped, as in Data-Juicer. `spacy_model` as for text_action_filter."""

    stats_keys = ("num_dependency_edges",)
    stat_ranges = {"num_dependency_edges": (0, None)}
    path_params = ("spacy_model",)
    requires = {"spacy": SPACY_INSTALL}

    def __init__(self, lang: Literal["en", "zh"] = "en", min_dependency_num: int = 1,
                 any_or_all: Literal["any", "all"] = "all", spacy_model: str | None = None, **common):
        super().__init__(**common)
        self.lang, self.min_dependency_num, self.any_or_all = lang, min_dependency_num, any_or_all
        self.model = ModelSpec("spacy", spacy_pipeline(self.name, lang, spacy_model))

    def compute_stats(self, batch: Batch) -> None:
        nlp = batch.pool.get(self.model).model
        texts = [remove_special_tokens(batch.text(s), batch.ctx) for s in batch.samples]
        for sample, doc in zip(batch.samples, nlp.pipe(texts)):
            batch.stats(sample)["num_dependency_edges"] = dependency_edges(doc)

    def keep(self, stats: dict) -> bool:
        # a text without entities is dropped, whatever the range
        return self.keep_values(stats["num_dependency_edges"], self.min_dependency_num, None, self.any_or_all,
                                empty=False)

    def drop_reason(self, stats: dict) -> str:
        edges = stats["num_dependency_edges"]
        if not edges:
            return "num_dependency_edges=[] (the text has no entity)"
        if not self.default_switches():
            return self.range_reason("num_dependency_edges", edges, self.min_dependency_num, None,
                                     "min_dependency_num", "", self.any_or_all)
        return (f"num_dependency_edges={edges}: {'no' if self.any_or_all == 'any' else 'not every'} entity has "
                f"min_dependency_num {self.min_dependency_num} (any_or_all: {self.any_or_all})")
