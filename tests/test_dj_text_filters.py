"""The model-free text filters give Data-Juicer 1.6.1's numbers: for every case of
tests/assets/dj_fixtures/text_filters.json (written by tools/dj_fixtures/text_filters.py through
Data-Juicer itself), djx's stat for each text equals Data-Juicer's within 1e-6 and djx keeps the same
texts. The texts: mojibake, curly quotes, full-width and CJK text, emoji, combining accents, HTML
entities, tabs and newlines, every line break Python's splitlines knows (\\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85,
U+2028/2029), trailing newlines, code, repetitions, empty text, image and chunk tokens, a long text."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from djx import STATS_KEY, Pipeline, build_op

ASSETS = Path(__file__).resolve().parent / "assets" / "dj_fixtures"
RESOURCES = ASSETS / "text_resources"
PLACES = {"@words": RESOURCES / "words", "@sp_model": RESOURCES / "en.sp.model", "@tokenizer": RESOURCES / "tokenizer"}
FIXTURE = json.loads((ASSETS / "text_filters.json").read_text(encoding="utf-8"))
TEXTS = [json.loads(line) for line in (ASSETS / FIXTURE["texts"]).read_text(encoding="utf-8").splitlines()]

HAS_SENTENCEPIECE = importlib.util.find_spec("sentencepiece") is not None


def djx_params(params: dict) -> dict:
    return {k: str(PLACES[v]) if isinstance(v, str) and v in PLACES else v for k, v in params.items()}


def case_id(case: dict) -> str:
    return case["op"] + "-" + ",".join(f"{k}={v}" for k, v in case["params"].items() if not str(v).startswith("@"))


def open_bounds(op_name: str, params: dict) -> dict:
    """The same op with bounds nothing falls outside: it keeps every text, with its stats."""
    if op_name in ("words_num_filter", "token_num_filter"):
        return {**params, "min_num": -sys.maxsize, "max_num": sys.maxsize}
    if op_name in ("average_line_length_filter", "maximum_line_length_filter"):
        return {**params, "min_len": -sys.maxsize, "max_len": sys.maxsize}
    return {**params, "min_ratio": -math.inf, "max_ratio": math.inf}


@pytest.mark.slow
@pytest.mark.parametrize("case", FIXTURE["cases"], ids=case_id)
def test_djx_gives_data_juicers_stats_and_verdicts(case):
    if "@sp_model" in case["params"].values() and not HAS_SENTENCEPIECE:
        pytest.skip("SentencePiece tokenization needs the text extra: pip install -e '.[text]'")
    params = djx_params(case["params"])
    every = list(Pipeline(ops=[build_op(case["op"], open_bounds(case["op"], params))]).process(TEXTS))
    assert [s["id"] for s in every] == [t["id"] for t in TEXTS]
    for sample, expected in zip(every, case["stats"]):
        assert set(sample[STATS_KEY]) == {case["stat"]}
        assert sample[STATS_KEY][case["stat"]] == pytest.approx(expected, abs=1e-6), sample["id"]
    kept = Pipeline(ops=[build_op(case["op"], params)]).process(TEXTS)
    assert [s["id"] for s in kept] == case["kept"]


def test_the_fixture_covers_every_op_with_tokenization_on_and_off():
    settings = {(c["op"], bool(c["params"].get("tokenization"))) for c in FIXTURE["cases"]}
    word_ops = ("alphanumeric_filter", "word_repetition_filter", "words_num_filter", "flagged_words_filter",
                "stopwords_filter")
    assert all((op, on) in settings for op in word_ops for on in (False, True))
    assert {"character_repetition_filter", "special_characters_filter", "token_num_filter", "average_line_length_filter",
            "maximum_line_length_filter"} <= {c["op"] for c in FIXTURE["cases"]}
    assert FIXTURE["data_juicer"] == "1.6.1" and "" in {t["text"] for t in TEXTS}
