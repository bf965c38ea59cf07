"""The text filters' tokenizer modes with tokenizers the tests make: a word-level Hugging Face
tokenizer (token_num_filter, alphanumeric_filter's tokenization) and a SentencePiece model trained
here on a few hundred sentences (the word filters' tokenization); what a tokenizer that cannot be
loaded offline says at recipe load; and a base install without the text extra."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from djx import STATS_KEY, Pipeline, RecipeError, build_op
from djx.ops.common.text_words import refine_words

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "dj_fixtures"))
from word_resources import train_sentencepiece  # noqa: E402

pytestmark = pytest.mark.slow  # importing transformers, training a SentencePiece model: seconds

SENTENCE = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture
def word_lists(tmp_path):
    folder = tmp_path / "words"
    folder.mkdir()
    (folder / "flagged_words.json").write_text('{"en": ["damn", "buy now"]}')
    return str(folder)


@pytest.fixture
def hf_tokenizer(tmp_path):
    """A word-level Hugging Face tokenizer folder: one token per word or punctuation run."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(sorted(set(SENTENCE.split())))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "tok"
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    return str(train_sentencepiece(tmp_path_factory.mktemp("sp") / "en.sp", n=300, vocab_size=150))


def stats_of(op, text: str) -> dict:
    (out,) = Pipeline(ops=[op]).process([{"text": text}])
    return out[STATS_KEY]


def test_token_num_counts_the_tokenizers_tokens_and_says_why_it_dropped(hf_tokenizer):
    op = build_op("token_num_filter", {"hf_tokenizer": hf_tokenizer, "min_num": 0, "max_num": 3})
    assert list(Pipeline(ops=[op]).process([{"text": "the cat sat, on the mat"}])) == []
    stats = stats_of(build_op("token_num_filter", {"hf_tokenizer": hf_tokenizer, "min_num": 0}), "the cat sat, on the mat")
    assert stats == {"num_token": 7}  # six words and the comma
    assert op.drop_reason(stats) == "num_token=7 above max_num 3"


def test_token_num_rejects_a_sample_without_text_and_counts_the_rest(hf_tokenizer):
    pipe = Pipeline(ops=[build_op("token_num_filter", {"hf_tokenizer": hf_tokenizer, "min_num": 0})], batch_size=4)
    kept = list(pipe.process([{"text": "the cat"}, {"text": None}, {"text": ""}, {"id": 4}]))
    assert [s[STATS_KEY]["num_token"] for s in kept] == [2, 0]
    assert len(pipe.last_counts["rejected_records"]) == 2


def test_alphanumeric_tokenization_divides_letters_by_tokens_and_survives_pickling(hf_tokenizer):
    text = "the cat sat, on the mat!"
    op = build_op("alphanumeric_filter", {"tokenization": True, "hf_tokenizer": hf_tokenizer, "min_ratio": 0})
    assert op.stats_keys == ("alpha_token_ratio",)
    assert stats_of(op, text) == {"alpha_token_ratio": 17 / 8}  # 17 letters, 8 tokens (6 words, ',' and '!')
    copy = pickle.loads(pickle.dumps(op))  # as a spawned or Ray worker gets it
    assert stats_of(copy, text) == {"alpha_token_ratio": 17 / 8}


@pytest.mark.parametrize("name,params", [("token_num_filter", {"hf_tokenizer": "/nonexistent/tokenizer"}),
                                         ("alphanumeric_filter", {"tokenization": True,
                                                                  "hf_tokenizer": "no-such-org/no-such-tokenizer"})])
def test_a_tokenizer_that_cannot_be_loaded_offline_fails_at_recipe_load(name, params):
    with pytest.raises(RecipeError) as e:
        build_op(name, params)
    message = str(e.value)
    assert message.startswith(f"{name}: hf_tokenizer: cannot load a tokenizer from {params['hf_tokenizer']!r} offline")
    assert "\n" not in message


def test_sentencepiece_tokenization_splits_words_into_the_models_pieces(sp_model):
    import sentencepiece
    pieces = sentencepiece.SentencePieceProcessor(model_file=sp_model).encode_as_pieces(SENTENCE)
    assert len(pieces) > len(SENTENCE.split())  # the small model splits some words
    op = build_op("words_num_filter", {"tokenization": True, "tokenizer_model": sp_model, "min_num": 0})
    assert stats_of(op, SENTENCE) == {"num_words": len(refine_words(pieces))}
    assert stats_of(pickle.loads(pickle.dumps(op)), SENTENCE) == {"num_words": len(refine_words(pieces))}
    plain = build_op("words_num_filter", {"min_num": 0})
    assert stats_of(plain, SENTENCE) == {"num_words": 13}


def test_word_repetition_with_tokenization_counts_piece_ngrams(sp_model):
    op = build_op("word_repetition_filter", {"tokenization": True, "tokenizer_model": sp_model, "rep_len": 2,
                                             "max_ratio": 1.0})
    assert stats_of(op, "xq zv " * 5)["word_rep_ratio"] == 1.0  # every piece bigram recurs
    assert stats_of(op, "")["word_rep_ratio"] == 0.0


def test_flagged_words_with_tokenization_reads_pieces(sp_model, word_lists):
    op = build_op("flagged_words_filter", {"tokenization": True, "tokenizer_model": sp_model,
                                           "flagged_words_dir": word_lists, "max_ratio": 1.0})
    assert 0.0 <= stats_of(op, "damn it, damn")["flagged_words_ratio"] <= 1.0


HIDE = 'import sys\nfor m in ("sentencepiece", "stopwordsiso"):\n    sys.modules[m] = None\n'


def test_without_the_text_extra_djx_imports_and_a_recipe_says_what_to_install(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    probe = subprocess.run([sys.executable, "-c", "import djx.ops, djx\nassert 'words_num_filter' in djx.registered_ops()\n"
                            "import stopwordsiso"], env=env, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr.splitlines()[-1], probe.stderr
    (tmp_path / "data.jsonl").write_text(json.dumps({"text": "some words here"}) + "\n")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({"dataset_path": "data.jsonl", "export_path": "out/kept.jsonl",
                                                          "process": [{"words_num_filter": {"min_num": 1}},
                                                                      {"stopwords_filter": {"min_ratio": 0}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", "recipe.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopwords_filter" in proc.stderr and "pip install '.[text]' in djx's checkout" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out" / "kept.jsonl").exists()
