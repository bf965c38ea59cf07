"""Words as Data-Juicer's text filters see them, and the resources they read once at load.

Data-Juicer 1.6.1's definitions (ops/common/helper_func.py, special_characters.py):
- words: the text split on ' ', '\\n' and '\\t' (empty pieces dropped; no other whitespace splits),
  or the pieces of a SentencePiece model when `tokenization` is on;
- refinement: optionally lower-cased, each word stripped of SPECIAL_CHARACTERS at both ends (words
  left empty dropped), then optionally augmented with the joins of each run of `group_size` words;
- SPECIAL_CHARACTERS: string.punctuation + digits + whitespace, a fixed set of other symbols, and
  the emoji of the `emoji` package at the version Data-Juicer pins, 2.2.0 (emoji_chars.py: the
  one-character ones are what a membership test of a character can match), whatever version is
  installed beside djx.
Word lists are Data-Juicer's format: JSON files {lang: [words]}; every file in the folder whose name
contains the list's type and ends in .json, merged per language, plus 'all' (every language).
"""
from __future__ import annotations

import json
import math
import os
import re
import string
from functools import lru_cache

from djx import RecipeError
from djx.core.io.regular_file import FileRefused, read_regular
from djx.ops.common.emoji_chars import EMOJI_RANGES

TEXT_EXTRA = "pip install '.[text]' in djx's checkout"
MAX_WORD_LIST_BYTES = 64 << 20  # Data-Juicer's lists are a few hundred KB
MAX_MODEL_FILE_BYTES = 1 << 30  # a SentencePiece model is a few MB

_OTHER_SPECIAL = (
    "\u0092\u2009\u0093\u0097\u200a\u009d\u0099\u202f\u0096\u2005\u0095\u0091\u009c\u3000\u2002 "
    "\u2008\u0098\u0081\u2003\u0082\ufffc\u0083\u0084\u2019\u201c\u201d\u2013\u30fc\u4e00\u25ac\u2026"
    "\u2726\ufffd\u00ad\u00a3\u200b\u2022\u20ac\u00ab\u00bb\u00b0\u00b7\u2550\u00d7\u58eb\uff3e\u02d8"
    "\u21d3\u2193\u2191\u2190\u2192\uff08\uff09\u00a7\u2033\u2032\u00b4\u00bf\u2212\u00b1\u2208\ufeff"
    "\u00a2\u00f8\u201a\u201e\u00bd\u00bc\u00be\u00b9\u00b2\u00b3\u2015\u2043\uff0c\u02cc\u00b8\u2039"
    "\u203a\u02ba\u02c8\u02bb\u00a6\u2010\u2800\u2030\u0085\u0085\u2011\u2264\u2265\u2016\u25c6\u25cf"
    "\u25a0\u25ba\u25bc\u25b2\u25b4\u2206\u25bb\u00a1\u2605\u2606\u2731\u02d0\u00ba\u3002\u00af\u02dc"
    "\u00a5\u026a\u2248\u2020\u4e0a\u30f3\uff1a\u223c\u2044\u30fb\u2661\u2713\u2295\u2024\uff0e\u22c5"
    "\u00f7\uff11\u201f\uff1b\u060c\u3001\u00a8\u093e\u09be\u0940\u094d\u0947\u25e6\u02da\u309c\u02bc"
    "\u2256\u02bc\u00a4\u30c3\u30c4\u30b7\u2103\u221a\uff01\u3010\u3011\u203f\u221e\u27a4\uff5e\u03c0"
    "\u0647\u06e9\u261b\u20a8\u27a9\u263b\u0e51\u066a\u2665\u0131\u097d\u300a\u2018\u00a9\ufd3f\u066c"
    "\uff1f\u25b7\u0413\u266b\u221f\u2122\u00aa\u20aa\u00ae\u300c\u2014\u2756\u300d\ufd3e\u300b"
)

_SPLIT = re.compile("[ \n\t]")


@lru_cache(maxsize=1)
def special_characters() -> frozenset[str]:
    """Data-Juicer's SPECIAL_CHARACTERS (the characters of it a text can hold one at a time)."""
    chars = set(string.punctuation + string.digits + string.whitespace + _OTHER_SPECIAL)
    chars.update(chr(c) for low, high in EMOJI_RANGES for c in range(low, high + 1))
    return frozenset(chars)


def split_words(text: str, tokenizer=None) -> list[str]:
    """The text's words: SentencePiece pieces with a tokenizer, else split on space, newline, tab."""
    if tokenizer is not None:
        return tokenizer.encode_as_pieces(text)
    return [w for w in _SPLIT.split(text) if w]


def strip_special(word: str, chars: frozenset[str]) -> str:
    """`word` without the characters of `chars` at its start and end."""
    begin, end = 0, len(word)
    while begin < end and word[begin] in chars:
        begin += 1
    while end > begin and word[end - 1] in chars:
        end -= 1
    return word[begin:end]


def refine_words(words: list[str], lower_case: bool = False, use_words_aug: bool = False,
                 group_sizes: list[int] = (2,), join_char: str = "") -> list[str]:
    """Data-Juicer's words_refinement with strip_chars=SPECIAL_CHARACTERS."""
    chars = special_characters()
    if lower_case:
        words = [w.lower() for w in words]
    words = [w for w in (strip_special(w, chars) for w in words) if w]
    if use_words_aug:
        words = words + [join_char.join(words[i:i + size]) for size in group_sizes
                         for i in range(len(words) - size + 1)]
    return words


def char_rep_ratio(text: str, n: int) -> float:
    """Share of the character n-grams taken by the most frequent floor(sqrt(distinct)) repeated ones."""
    counts: dict[str, int] = {}
    for i in range(len(text) - n + 1):
        gram = text[i:i + n]
        counts[gram] = counts.get(gram, 0) + 1
    if not counts:
        return 0.0
    freqs = sorted(counts.values(), reverse=True)
    top = min(int(math.sqrt(len(freqs))), len(freqs) - freqs.count(1))
    return sum(freqs[:top]) / sum(freqs)


def word_rep_ratio(words: list[str], n: int) -> float:
    """Share of the word n-grams that occur more than once."""
    counts: dict[str, int] = {}
    for i in range(len(words) - n + 1):
        gram = " ".join(words[i:i + n])
        counts[gram] = counts.get(gram, 0) + 1
    if not counts:
        return 0.0
    return sum(c for c in counts.values() if c > 1) / sum(counts.values())


def share_in(words: list[str], vocabulary: frozenset[str]) -> float:
    """Share of `words` in `vocabulary` (0.0 for no words)."""
    if not words:
        return 0.0
    return min(1.0, sum(1 for w in words if w in vocabulary) / len(words))


def read_word_lists(folder: str, words_type: str, param: str) -> dict[str, frozenset[str]]:
    """{lang: words} from the folder's JSON files named like `words_type`, plus 'all'."""
    if not os.path.isdir(folder):
        looked = "" if os.path.isabs(folder) else f"; looked for in the recipe's folder and as {os.path.abspath(folder)!r}"
        raise RecipeError(f"{param}: {folder!r} is not a folder (it should hold {words_type}*.json files{looked})")
    merged: dict[str, list[str]] = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json") and words_type in name:
            try:
                loaded = json.loads(read_regular(os.path.join(folder, name), MAX_WORD_LIST_BYTES).decode("utf-8"))
                for lang, words in loaded.items():
                    merged.setdefault(lang, []).extend(str(w) for w in words)
            except FileRefused as e:
                raise RecipeError(f"{param}: {name} in {folder!r}: {e}") from None
            except (OSError, ValueError, AttributeError, TypeError) as e:
                raise RecipeError(f"{param}: {name} in {folder!r} is not a JSON object of word lists "
                                  f"({{lang: [words]}}): {e}") from None
    if not merged:
        raise RecipeError(f"{param}: {folder!r} holds no JSON file whose name contains {words_type!r}")
    return with_all(merged)


def with_all(lists: dict[str, list[str]]) -> dict[str, frozenset[str]]:
    out = {lang: frozenset(words) for lang, words in lists.items()}
    if "all" not in out:
        out["all"] = frozenset(w for words in out.values() for w in words)
    return out


def pick_language(lists: dict[str, frozenset[str]], lang: str, param: str) -> frozenset[str]:
    if lang not in lists:
        raise RecipeError(f"lang: {lang!r} has no list in {param} (it has: {', '.join(sorted(lists))})")
    return lists[lang]


def load_sentencepiece(path: str | None, lang: str):
    """The SentencePiece model at `path`, loaded once (tokenization: true needs one)."""
    if not path:
        raise RecipeError(f"tokenization: true needs tokenizer_model, the path of a SentencePiece model "
                          f"file (Data-Juicer downloads its own as {lang}.sp.model; djx never downloads)")
    import sentencepiece
    model = sentencepiece.SentencePieceProcessor()
    try:
        model.LoadFromSerializedProto(read_regular(path, MAX_MODEL_FILE_BYTES))
    except FileRefused as e:
        raise RecipeError(f"tokenizer_model: {e}") from None
    except (OSError, RuntimeError) as e:
        raise RecipeError(f"tokenizer_model: cannot load a SentencePiece model from {path!r}: {e}") from None
    return model


def load_hf_tokenizer(name: str, param: str):
    """A Hugging Face tokenizer from a local folder (or a hub id already in the local cache)."""
    import transformers
    try:
        return transformers.AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RecipeError(f"{param}: cannot load a tokenizer from {name!r} offline (give a local folder "
                          f"with tokenizer files, or a hub id already in the Hugging Face cache): {first}") from None


@lru_cache(maxsize=1)
def stopwords_iso() -> dict[str, frozenset[str]]:
    """The stopword lists of the `stopwordsiso` package ({lang: words}, plus 'all')."""
    try:
        import stopwordsiso
    except ImportError:
        raise RecipeError(f"stopwords_filter without stopwords_dir reads the lists of the Python package "
                          f"'stopwordsiso', which is not installed: {TEXT_EXTRA} (or give stopwords_dir)") from None
    return with_all({lang: sorted(stopwordsiso.stopwords(lang)) for lang in stopwordsiso.langs()})
