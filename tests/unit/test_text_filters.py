"""The model-free text filters: Data-Juicer's word splitting and refinement, why a sample was
dropped (the stat, its value, the bound), bad input rejected with its reason, resources checked when
the recipe loads (never downloaded), the text extra named when a package is missing, and the tokenizers
(a Hugging Face tokenizer and a SentencePiece model the tests make) used as loaded."""
from __future__ import annotations

import math
import sys

import pytest

from djx import STATS_KEY, Pipeline, RecipeError, build_op
from djx.ops.common.text_words import TEXT_EXTRA, refine_words, special_characters, split_words

SENTENCE = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture
def word_lists(tmp_path):
    folder = tmp_path / "words"
    folder.mkdir()
    (folder / "flagged_words.json").write_text('{"en": ["damn", "buy now"], "zh": ["午饭"]}')
    (folder / "stopwords.json").write_text('{"en": ["the", "on", "and"]}')
    return str(folder)


def stats_of(name: str, params: dict, text: str) -> dict:
    """The stats `name` writes for `text` (bounds opened so the sample is kept)."""
    wide = {"min_num": -sys.maxsize, "max_num": sys.maxsize} if name in ("words_num_filter", "token_num_filter") \
        else {"min_ratio": -math.inf, "max_ratio": math.inf}
    (out,) = Pipeline(ops=[build_op(name, {**params, **wide})]).process([{"text": text}])
    return out[STATS_KEY]


def test_words_split_on_space_newline_and_tab_only_and_are_stripped_of_special_characters():
    assert split_words("a  b\tc\nd\u3000e\u00a0f\r\ng") == ["a", "b", "c", "d\u3000e\u00a0f\r", "g"]
    assert refine_words(["«Hello»", "...", "World!\U0001F600", "x-ray", "42"], lower_case=True) == \
        ["hello", "world", "x-ray"]
    assert refine_words(["a", "b", "c"], use_words_aug=True, group_sizes=[2, 3], join_char="_") == \
        ["a", "b", "c", "a_b", "b_c", "a_b_c"]
    assert {"\u201c", "\u3000", "7", "\U0001F600"} <= special_characters() and "a" not in special_characters()


DROPS = [  # (op, params, text, what the reason says)
    ("alphanumeric_filter", {"min_ratio": 0.9}, "ab!!", "alnum_ratio=0.5 below min_ratio 0.9"),
    ("character_repetition_filter", {"rep_len": 2, "max_ratio": 0.3}, "aaaaaa", "char_rep_ratio=1 above max_ratio 0.3"),
    ("special_characters_filter", {}, "a!!!", "special_char_ratio=0.75 above max_ratio 0.25"),
    ("word_repetition_filter", {"rep_len": 1, "max_ratio": 0.5}, "go go go", "word_rep_ratio=1 above max_ratio 0.5"),
    ("words_num_filter", {}, "three short words", "num_words=3 below min_num 10"),
    ("stopwords_filter", {"min_ratio": 0.9}, SENTENCE, "stopwords_ratio=0.5385 below min_ratio 0.9"),
]


@pytest.mark.parametrize("name,params,text,reason", DROPS, ids=[d[0] for d in DROPS])
def test_a_dropped_sample_says_which_stat_missed_which_bound(name, params, text, reason, word_lists):
    params = {**params, "stopwords_dir": word_lists} if name == "stopwords_filter" else params
    op = build_op(name, params)
    assert list(Pipeline(ops=[op]).process([{"text": text}])) == []
    assert op.drop_reason(stats_of(name, params, text)) == reason


def BAD_INPUT_PARAMS(word_lists: str) -> dict:  # params keeping an empty text
    return {"alphanumeric_filter": {"min_ratio": 0.0}, "character_repetition_filter": {},
            "special_characters_filter": {}, "word_repetition_filter": {}, "words_num_filter": {"min_num": 0},
            "stopwords_filter": {"stopwords_dir": word_lists, "min_ratio": 0.0},
            "flagged_words_filter": {"flagged_words_dir": word_lists}}


@pytest.mark.parametrize("name", ["alphanumeric_filter", "character_repetition_filter", "special_characters_filter",
                                  "word_repetition_filter", "words_num_filter", "stopwords_filter",
                                  "flagged_words_filter"])
def test_a_sample_without_text_is_rejected_with_its_reason_and_the_rest_go_on(name, word_lists):
    pipe = Pipeline(ops=[build_op(name, BAD_INPUT_PARAMS(word_lists)[name])])
    kept = list(pipe.process([{"text": None}, {"text": ""}, {"id": 3}, {"text": ["a"]}]))
    assert [s["text"] for s in kept] == [""]
    reasons = [r["reason"] for r in pipe.last_counts["rejected_records"]]
    assert len(reasons) == 3 and all("text" in r for r in reasons)


def test_empty_text_gets_zero_not_an_error(word_lists):
    for name, params in [("alphanumeric_filter", {}), ("special_characters_filter", {}),
                         ("character_repetition_filter", {}), ("word_repetition_filter", {}),
                         ("words_num_filter", {}), ("stopwords_filter", {"stopwords_dir": word_lists})]:
        assert list(stats_of(name, params, "").values()) == [0], name


RECIPE_ERRORS = [
    ("flagged_words_filter", {}, "flagged_words_dir: not set"),
    ("flagged_words_filter", {"flagged_words_dir": "/nonexistent/words"}, "is not a folder"),
    ("stopwords_filter", {"stopwords_dir": "@words", "lang": "fr"}, "'fr' has no list in stopwords_dir (it has: all, en)"),
    ("words_num_filter", {"tokenization": True}, "tokenizer_model: not set"),
    ("word_repetition_filter", {"tokenization": True, "tokenizer_model": "/nonexistent.model"}, "cannot load a SentencePiece model"),
    ("character_repetition_filter", {"rep_len": 0}, "rep_len: must be >= 1"),
    ("stopwords_filter", {"stopwords_dir": "@words", "words_aug_group_sizes": [2, 0]}, "words_aug_group_sizes: must be >= 1"),
    ("special_characters_filter", {"min_ratio": 0.5, "max_ratio": 0.1}, "no sample could pass"),
]


@pytest.mark.parametrize("name,params,message", RECIPE_ERRORS, ids=[f"{e[0]}-{e[2][:20]}" for e in RECIPE_ERRORS])
def test_a_resource_that_cannot_be_used_fails_when_the_recipe_loads(name, params, message, word_lists):
    params = {k: word_lists if v == "@words" else v for k, v in params.items()}
    if "SentencePiece" in message:
        pytest.importorskip("sentencepiece", reason="loading a SentencePiece model needs the text extra")
    with pytest.raises(RecipeError) as e:
        build_op(name, params)
    assert message in str(e.value) and str(e.value).startswith(name)
    assert "\n" not in str(e.value)


def test_a_bad_word_list_file_is_named(tmp_path):
    (tmp_path / "flagged_words.json").write_text("[1, 2]")
    with pytest.raises(RecipeError, match="flagged_words.json .* not a JSON object of word lists"):
        build_op("flagged_words_filter", {"flagged_words_dir": str(tmp_path)})


def test_a_missing_package_names_the_text_extra(monkeypatch, tmp_path):
    from djx.ops.common.text_words import stopwords_iso
    monkeypatch.setenv("DATA_JUICER_ASSETS_CACHE", str(tmp_path / "no_assets"))  # no list of Data-Juicer's
    stopwords_iso.cache_clear()  # read once per process: an earlier test may have read the lists
    monkeypatch.setitem(sys.modules, "stopwordsiso", None)  # as if not installed: find_spec fails
    with pytest.raises(RecipeError, match=r"'stopwordsiso', which is not installed: pip install '\.\[text\]' in djx's checkout"):
        build_op("stopwords_filter", {}).load_resources()
    monkeypatch.undo()
    stopwords_iso.cache_clear()
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(RecipeError, match=r"'sentencepiece', which is not installed: pip install '\.\[text\]' in djx's checkout"):
        build_op("words_num_filter", {"tokenization": True, "tokenizer_model": "x.model"})
    assert TEXT_EXTRA == "pip install '.[text]' in djx's checkout"


def test_the_special_characters_are_data_juicers_whatever_emoji_release_is_installed(monkeypatch):
    """Data-Juicer pins emoji 2.2.0: its emoji are special characters, later ones (Emoji 15.1 on) are
    not; the words filters and mappers need no emoji package at all."""
    monkeypatch.setitem(sys.modules, "emoji", None)
    special_characters.cache_clear()
    chars = special_characters()
    assert {"\U0001f600", "\u00a9", "\U0001faf8", "\u2764"} <= chars  # in emoji 2.2.0
    assert not {"\U0001fae9", "\U0001fac6", "\U0001fa89", "\U0001f6d8"} & chars  # added after it
    assert stats_of("special_characters_filter", {}, "hi \U0001fac6\U0001f600") == {"special_char_ratio": 0.4}
    assert stats_of("words_num_filter", {}, "hello \U0001fae9 \U0001f600") == {"num_words": 2}
    mapper = Pipeline(ops=[build_op("remove_long_words_mapper", {"max_len": 3})])
    assert [s["text"] for s in mapper.process([{"text": "ab \U0001f600abc\U0001f600 abcd"}])] == ["ab \U0001f600abc\U0001f600"]


def test_stopwords_default_to_the_stopwordsiso_lists():
    stopwordsiso = pytest.importorskip("stopwordsiso")
    op = build_op("stopwords_filter", {})
    assert op.vocabulary == frozenset(stopwordsiso.stopwords("en")) and "the" in op.vocabulary
    assert stats_of("stopwords_filter", {}, "The cat is on the mat") == {"stopwords_ratio": 4 / 6}


def test_a_run_on_the_stopwordsiso_lists_says_its_numbers_are_not_data_juicers(word_lists, tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_JUICER_ASSETS_CACHE", str(tmp_path / "no_assets"))  # nothing of Data-Juicer's here
    (note,) = build_op("stopwords_filter", {}).notes()
    assert note.startswith("stopwords_filter: ") and "stopwordsiso" in note and "give stopwords_dir" in note
    assert build_op("stopwords_filter", {"stopwords_dir": word_lists}).notes() == []


@pytest.mark.parametrize("model", ["tiny-clip", "tiny-blip-itm"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_the_scorers_padding_is_the_tokenizers(model, side):
    """pad_tokens pads a forward's texts in one tensor call; its ids and mask are tokenizer.pad's."""
    import torch
    from transformers import AutoTokenizer

    from djx.ops.common.shapes import pad_tokens
    from conftest import REPO_DIR
    tok = AutoTokenizer.from_pretrained(REPO_DIR / "tests" / "assets" / "models" / model)
    tok.padding_side = side
    rows = tok([f"a red circle number {i} " * (i % 5 + 1) for i in range(12)], truncation=True,
               max_length=20)["input_ids"]
    want, got = tok.pad({"input_ids": rows}, padding=True, return_tensors="pt"), pad_tokens(tok, rows)
    assert len({len(r) for r in rows}) > 1  # rows of several lengths: there is padding to do
    assert torch.equal(got["input_ids"], want["input_ids"]) and torch.equal(got["attention_mask"], want["attention_mask"])
    # to a longer length (a GPU forward's known shape, ops/common/shapes.py): max_length padding's
    want, got = tok.pad({"input_ids": rows}, padding="max_length", max_length=32, return_tensors="pt"), \
        pad_tokens(tok, rows, 32)
    assert got["input_ids"].shape == (12, 32)
    assert torch.equal(got["input_ids"], want["input_ids"]) and torch.equal(got["attention_mask"], want["attention_mask"])
