"""The small resources the text-filter fixtures use, built deterministically: a SentencePiece model
trained on a few hundred generated sentences, a byte-level BPE Hugging Face tokenizer, and
Data-Juicer-format word lists (flagged words, stopwords). Shared by tools/dj_fixtures/text_filters.py
(which writes them under tests/assets/dj_fixtures/text_resources/) and the tests (which train their
own SentencePiece model with `sentences`)."""
from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ("the a of and to in is it that was for on with as his they at be this from have or by one had "
         "not but what all were when we there can an your which their said if do will each about how up "
         "out them then she many some so these would other into has more her two like him see time could "
         "weather river mill town dog cat park car bicycle beach friends sunshine forest sleep quick brown "
         "fox jumps lazy running grass sunny cheap deals buy now hello world sentence number talks old near "
         "café naïve résumé façade élève coöperate").split()
CJK = list("我们今天去公园散步天气非常好然后一起吃了午饭下午回家休息好学习天向上")

FLAGGED = {"en": ["damn", "crap", "shitty", "hell", "buy now", "damnit"], "zh": ["散步", "午饭", "好好"]}
STOPWORDS = {"en": ["the", "a", "an", "it", "is", "and", "that", "to", "of", "in", "on", "there", "all",
                    "not", "what", "she", "with", "or", "for", "then", "it's", "isn't"],
             "zh": ["我们", "了", "的", "然后", "一起", "天天"]}


def sentences(n: int = 400, seed: int = 0) -> list[str]:
    """`n` generated sentences (English-like words, some CJK runs): SentencePiece training text."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        if i % 5 == 0:
            words.append("".join(rng.choice(CJK) for _ in range(rng.randint(3, 10))))
        out.append(" ".join(words).capitalize() + rng.choice(".!?,"))
    return out


def train_sentencepiece(prefix: Path, n: int = 400, vocab_size: int = 200) -> Path:
    """A unigram SentencePiece model trained on `sentences(n)`; returns the .model path."""
    import sentencepiece
    prefix.parent.mkdir(parents=True, exist_ok=True)
    text = prefix.parent / (prefix.name + ".train.txt")
    text.write_text("\n".join(sentences(n)) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, num_threads=1, normalization_rule_name="identity", minloglevel=2)
    text.unlink()
    return prefix.parent / (prefix.name + ".model")


def train_hf_tokenizer(folder: Path, vocab_size: int = 300) -> Path:
    """A byte-level BPE tokenizer trained on `sentences()`, saved as a Hugging Face tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(sentences(), trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(folder))
    return folder


def write_word_lists(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flagged_words.json").write_text(json.dumps(FLAGGED, ensure_ascii=False, indent=0), encoding="utf-8")
    (folder / "stopwords.json").write_text(json.dumps(STOPWORDS, ensure_ascii=False, indent=0), encoding="utf-8")
    return folder


def build_all(root: Path) -> None:
    write_word_lists(root / "words")
    train_sentencepiece(root / "en.sp")
    train_hf_tokenizer(root / "tokenizer")
