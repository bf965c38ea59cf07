"""Tiny stand-ins for the resources the text-model filters read, built here (no test downloads):
a fastText language-id model (written byte by byte in fastText's .bin format), a SentencePiece
model trained on a few hundred generated sentences, an ARPA bigram model over its pieces, and a
spaCy pipeline with a tagger, POS mapping and parser trained on a few annotated sentences.

Each builder is deterministic, so tools/dj_fixtures/text_models.py (run in Data-Juicer's venv)
builds the same files for Data-Juicer as the tests build for djx. Imports nothing from djx.
"""
from __future__ import annotations

import math
import random
import struct
from collections import Counter
from pathlib import Path

LID_WORDS = {
    "en": "the cat sat on a mat and we like green apples".split(),
    "fr": "le chat est sur un tapis et nous aimons les pommes vertes".split(),
    "de": "die katze sitzt auf einer matte und wir lieben grüne äpfel".split(),
}
FASTTEXT_MAGIC, FASTTEXT_VERSION = 793712314, 12


def write_fasttext_lid(path, weight: float = 4.0) -> Path:
    """A supervised fastText model (softmax loss, dim 3, no subwords) labelling each word list of
    LID_WORDS with its language: a text's score is the softmax of its words' mean vector, whose
    component for the word's language is `weight` (the larger, the surer)."""
    labels = list(LID_WORDS)
    words = ["</s>"] + [w for lang in labels for w in LID_WORDS[lang]]
    dim = len(labels)
    rows = [[0.0] * dim for _ in words]
    for j, lang in enumerate(labels):
        for w in LID_WORDS[lang]:
            rows[words.index(w)][j] = weight
    out = [[1.0 if i == j else 0.0 for j in range(dim)] for i in range(len(labels))]
    # args: dim ws epoch minCount neg wordNgrams loss(softmax) model(sup) bucket minn maxn lrUpdateRate t
    data = bytearray(struct.pack("<ii", FASTTEXT_MAGIC, FASTTEXT_VERSION))
    data += struct.pack("<12id", dim, 5, 5, 1, 5, 1, 3, 3, 0, 0, 0, 100, 1e-4)
    data += struct.pack("<iiiqq", len(words) + len(labels), len(words), len(labels), 100, -1)
    for w in words:
        data += w.encode() + b"\0" + struct.pack("<qb", 1, 0)
    for lang in labels:
        data += f"__label__{lang}".encode() + b"\0" + struct.pack("<qb", 1, 1)
    for matrix in (rows, out):
        data += struct.pack("<?qq", False, len(matrix), dim)
        data += b"".join(struct.pack(f"<{dim}f", *r) for r in matrix)
    Path(path).write_bytes(bytes(data))
    return Path(path)


_SUBJECTS = "the cat|a dog|my sister|the old man|our teacher|the small bird|a farmer|the children".split("|")
_VERBS = "eats|likes|sees|walks to|reads|watches|finds|paints|builds|carries".split("|")
_OBJECTS = "an apple|the river|a green house|the red ball|some bread|the mountain|a long letter|the garden".split("|")


def corpus(n: int = 300) -> list[str]:
    """n simple English sentences, the same every time."""
    rng = random.Random(7)
    return [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} ." for _ in range(n)]


def train_sentencepiece(path) -> Path:
    """A unigram SentencePiece model (vocabulary 60) trained on corpus(); written to `path`."""
    import io

    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus()), model_writer=buf, vocab_size=60,
                                   model_type="unigram", character_coverage=1.0, num_threads=1,
                                   minloglevel=2)
    Path(path).write_bytes(buf.getvalue())
    return Path(path)


def write_arpa(path, sp_model) -> Path:
    """An ARPA bigram model over `sp_model`'s pieces of corpus(): add-one unigrams, Witten-Bell-ish
    bigrams, a constant backoff; consistent enough for KenLM to load and score."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(sp_model))
    lines = [["<s>"] + sp.encode_as_pieces(s) + ["</s>"] for s in corpus()]
    uni = Counter(w for line in lines for w in line)
    bi = Counter((a, b) for line in lines for a, b in zip(line, line[1:]))
    vocab = sorted(set(uni) | {"<unk>"})
    total = sum(uni.values()) + len(vocab)
    out = ["", "\\data\\", f"ngram 1={len(vocab)}", f"ngram 2={len(bi)}", "", "\\1-grams:"]
    for w in vocab:
        prob = -99.0 if w == "<s>" else math.log10((uni[w] + 1) / total)
        out.append(f"{prob:.6f}\t{w}" + ("" if w == "</s>" else "\t-0.301030"))
    out += ["", "\\2-grams:"]
    for (a, b), c in sorted(bi.items()):
        out.append(f"{math.log10(c / (uni[a] + 1)):.6f}\t{a} {b}")
    out += ["", "\\end\\", ""]
    Path(path).write_text("\n".join(out), encoding="utf-8")
    return Path(path)


_SPACY_TRAIN = [  # text, tags, heads, deps
    ("the cat eats fish", ["DT", "NN", "VBZ", "NN"], [1, 2, 2, 2], ["det", "nsubj", "ROOT", "dobj"]),
    ("a dog chased the ball", ["DT", "NN", "VBD", "DT", "NN"], [1, 2, 2, 4, 2], ["det", "nsubj", "ROOT", "det", "dobj"]),
    ("she reads books", ["PRP", "VBZ", "NNS"], [1, 1, 1], ["nsubj", "ROOT", "dobj"]),
    ("john likes green apples", ["NNP", "VBZ", "JJ", "NNS"], [1, 1, 3, 1], ["nsubj", "ROOT", "amod", "dobj"]),
    ("they run", ["PRP", "VBP"], [1, 1], ["nsubj", "ROOT"]),
    ("the old man walked home", ["DT", "JJ", "NN", "VBD", "NN"], [2, 2, 3, 3, 3],
     ["det", "amod", "nsubj", "ROOT", "npadvmod"]),
    ("green apples", ["JJ", "NNS"], [1, 1], ["amod", "ROOT"]),
    ("we are running , he is walking", ["PRP", "VBP", "VBG", ",", "PRP", "VBZ", "VBG"], [2, 2, 2, 2, 6, 6, 2],
     ["nsubj", "aux", "ROOT", "punct", "nsubj", "aux", "conj"]),
]
_POS = {"DT": "DET", "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "PRP": "PRON", "VBZ": "VERB", "VBD": "VERB",
        "VBP": "VERB", "VBG": "VERB", "JJ": "ADJ", ",": "PUNCT"}
_TOK2VEC = {"@architectures": "spacy.HashEmbedCNN.v2", "pretrained_vectors": None, "width": 16, "depth": 1,
            "embed_size": 300, "window_size": 1, "maxout_pieces": 2, "subword_features": True}


def train_spacy_pipeline(path, epochs: int = 25) -> Path:
    """An English spaCy pipeline (tagger, attribute_ruler mapping tags to POS, parser) trained on
    _SPACY_TRAIN with a fixed seed and saved to the folder `path`."""
    import spacy
    from spacy.training import Example
    from spacy.util import fix_random_seed
    fix_random_seed(0)
    nlp = spacy.blank("en")
    tagger = nlp.add_pipe("tagger", config={"model": {"tok2vec": _TOK2VEC}})
    ruler = nlp.add_pipe("attribute_ruler")
    parser = nlp.add_pipe("parser", config={"model": {"tok2vec": _TOK2VEC, "hidden_width": 16}})
    examples = [Example.from_dict(nlp.make_doc(text), {"tags": tags, "heads": heads, "deps": deps})
                for text, tags, heads, deps in _SPACY_TRAIN]
    for _, tags, _, deps in _SPACY_TRAIN:
        for tag in tags:
            tagger.add_label(tag)
        for dep in deps:
            parser.add_label(dep)
    optimizer = nlp.initialize(lambda: examples)
    ruler.add_patterns([{"patterns": [[{"TAG": tag}]], "attrs": {"POS": pos}} for tag, pos in _POS.items()])
    rng = random.Random(0)
    for _ in range(epochs):
        rng.shuffle(examples)
        for example in examples:  # one at a time: spaCy's parser misreads batched gold here
            nlp.update([example], sgd=optimizer, losses={})
    nlp.to_disk(path)
    return Path(path)


def spacy_annotations(nlp, text: str) -> list[list]:
    """(text, tag, pos, dep, head index) of each token: what the spaCy filters read."""
    return [[t.text, t.tag_, t.pos_, t.dep_, t.head.i] for t in nlp(text)]


LID_TEXTS = ["the cat sat on a mat", "Le chat est sur un tapis", "die Katze\nsitzt auf einer Matte",
             "the chat katze", "we like grüne äpfel and green apples", "", "xyz 123"]
PPL_TEXTS = ["the cat eats an apple .", "a farmer builds the garden .", "the mountain reads a dog",
             "zebra quantum xylophone", "the cat eats an apple .\nour teacher finds the river .", "", "   "]
SPACY_TEXTS = ["the cat eats fish", "she reads books", "john likes green apples", "we are running , he is walking",
               "green apples", "the old man walked home", "a dog chased the ball <__dj__image>", "", "fish"]
