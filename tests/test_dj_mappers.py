"""The text mappers give Data-Juicer 1.6.1's text, byte for byte: tests/assets/dj_fixtures/mappers.json
holds what Data-Juicer itself wrote for each mapper and parameters on texts made to be hard (mojibake,
curly and full-width punctuation, CJK, emoji, combining accents, HTML entities and tags, links,
emails, tabs, Unicode spaces, empty text, long words, runs of tabs and newlines, source files with
copyright comments); tools/dj_fixtures/mappers.py regenerates it.

Texts holding djx's special tokens: Data-Juicer maps them as ordinary text. Where its output keeps
every token, djx's is byte-equal; where it removes or changes one (a token inside an HTML
attribute), djx keeps the token, as it must (docs/ops.md, "Mappers and special tokens")."""
from __future__ import annotations

import importlib.util
import json

import pytest

from djx import Pipeline, build_op
from djx.ops.common.special_tokens import split_at_tokens

from helpers import TESTS_DIR

FIXTURE = json.loads((TESTS_DIR / "assets" / "dj_fixtures" / "mappers.json").read_text(encoding="utf-8"))
TOKENS = ("<__dj__image>", "<|__dj__eoc|>")
SP_MODEL = TESTS_DIR / "assets" / "dj_fixtures" / "text_resources" / "en.sp.model"  # the fixture's "@sp_model"
NEEDS = {"fix_unicode_mapper": "ftfy", "clean_html_mapper": "selectolax", "clean_copyright_mapper": "regex"}
CASES = [pytest.param(c, id=f"{c['op']}{c['params'] or ''}") for c in FIXTURE["cases"]]


def mapped(case: dict, texts: list[str]) -> list[str]:
    module = NEEDS.get(case["op"])
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{case['op']} needs {module} (pip install '.[text]' in djx's checkout)")
    params = {k: str(SP_MODEL) if v == "@sp_model" else v for k, v in case["params"].items()}
    pipe = Pipeline(ops=[build_op(case["op"], params)], batch_size=len(texts))
    out = {s["i"]: s["text"] for s in pipe.process([{"i": i, "text": t} for i, t in enumerate(texts)])}
    assert pipe.last_counts["rejected"] == 0, pipe.last_counts["rejected_records"]
    return [out[i] for i in range(len(texts))]


def tokens_of(text: str) -> list[str]:
    return split_at_tokens(text, TOKENS)[1::2]


def test_the_fixture_is_data_juicers_and_covers_every_text():
    assert FIXTURE["data_juicer"] == "1.6.1"
    assert {c["op"] for c in FIXTURE["cases"]} == {"fix_unicode_mapper", "punctuation_normalization_mapper",
                                                   "whitespace_normalization_mapper", "clean_links_mapper",
                                                   "clean_email_mapper", "clean_html_mapper", "clean_copyright_mapper",
                                                   "remove_long_words_mapper",
                                                   "remove_words_with_incorrect_substrings_mapper"}
    for case in FIXTURE["cases"]:
        for kind, texts in FIXTURE["texts"].items():
            assert len(case["output"][kind]) == len(texts)


@pytest.mark.parametrize("case", CASES)
def test_mapped_text_is_byte_equal_to_data_juicers(case):
    assert mapped(case, FIXTURE["texts"]["plain"]) == case["output"]["plain"]


@pytest.mark.parametrize("case", CASES)
def test_with_special_tokens_djx_equals_data_juicer_where_data_juicer_keeps_them(case):
    texts, theirs = FIXTURE["texts"]["tokens"], case["output"]["tokens"]
    ours = mapped(case, texts)
    for text, dj, djx in zip(texts, theirs, ours):
        assert tokens_of(djx) == tokens_of(text), (text, djx)
        if tokens_of(dj) == tokens_of(text):
            assert djx == dj, text


def test_tokenized_word_removal_without_a_sentencepiece_model_fails_at_load_naming_where_to_put_it(
        tmp_path, monkeypatch):
    from djx import RecipeError
    monkeypatch.setenv("DATA_JUICER_CACHE_HOME", str(tmp_path))
    for var in ("DATA_JUICER_MODELS_CACHE", "DATA_JUICER_EXTERNAL_MODELS_HOME"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RecipeError) as e:
        build_op("remove_words_with_incorrect_substrings_mapper", {"tokenization": True})
    assert "tokenizer_model: not set" in str(e.value) and str(tmp_path / "models" / "en.sp.model") in str(e.value)
