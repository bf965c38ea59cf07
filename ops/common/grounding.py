"""Phrase grounding as Data-Juicer's phrase_grounding_recall_filter does it: noun phrases from a text
(GLIP's extraction with NLTK), the OWL-ViT loader of the model pool, and one image's recall.

Noun phrases: the lower-cased text is split into sentences (Punkt) and words (NLTK's Treebank word
tokenizer), tagged by NLTK's averaged perceptron, and chunked with the grammar
`NP: {<DT>?<JJ.*>*<NN.*>+}`; punctuation is removed from each phrase, empty ones dropped and
duplicates removed (first occurrence kept: Data-Juicer keeps them in set order, which changes
nothing but the order of the model's queries). That is what `nltk.word_tokenize` and
`nltk.pos_tag` read with nltk 3.9+: the pickle-free `tokenizers/punkt_tab/english/` and
`taggers/averaged_perceptron_tagger_eng/`. djx never downloads them: they are read from the op's
`nltk_data` folder, else from NLTK's search path (NLTK_DATA first).
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from djx import ModelSpec, RecipeError, register_model_loader
from djx.ops.models import HF_PRELOAD, _estimate, _load

NLTK_RESOURCES = ("tokenizers/punkt_tab/english", "taggers/averaged_perceptron_tagger_eng")
NP_GRAMMAR = "NP: {<DT>?<JJ.*>*<NN.*>+}"
PUNCTUATION = "|:;@()[]{}^'\"’`?$%#!&*+,."  # what Data-Juicer removes from a phrase


@register_model_loader("hf_owlvit", estimate=_estimate("OwlViTForObjectDetection"), preload=HF_PRELOAD)
def load_owlvit(spec: ModelSpec, device: str):
    return _load("OwlViTForObjectDetection", spec, device)


def nltk_folder(nltk_data: str | None, where: str) -> str:
    """The NLTK data folder that holds both resources: `nltk_data` when given, else the first folder
    of NLTK's search path (NLTK_DATA first) that does; a RecipeError naming what to provide if none."""
    import nltk.data
    folders = [nltk_data] if nltk_data else [p for p in nltk.data.path if isinstance(p, str)]
    for folder in folders:
        if all(os.path.isdir(os.path.join(folder, r)) for r in NLTK_RESOURCES):
            return os.path.abspath(folder)
    looked = repr(nltk_data) if nltk_data else "NLTK_DATA and NLTK's default folders"
    raise RecipeError(f"{where}: no NLTK data with {' and '.join(r + '/' for r in NLTK_RESOURCES)} in {looked}; "
                      f"set nltk_data (or NLTK_DATA) to a folder holding them, e.g. one made by "
                      f"`python -m nltk.downloader -d DIR punkt_tab averaged_perceptron_tagger_eng`")


@functools.lru_cache(maxsize=4)
def _nlp(folder: str):
    """(sentence splitter, word tokenizer, tagger, chunker) read from `folder`, once per process.

    The files are read here with plain `open` (nltk's own readers admit only folders of its search
    path) and parsed as nltk parses them: Punkt's tab files, the tagger's three JSON files."""
    from nltk.chunk import RegexpParser
    from nltk.tabdata import PunktDecoder
    from nltk.tag.perceptron import PerceptronTagger
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    punkt, decode, params = os.path.join(folder, NLTK_RESOURCES[0]), PunktDecoder(), PunktParameters()
    with open(os.path.join(punkt, "collocations.tab"), encoding="utf-8") as f:
        params.collocations = set(decode.tab2tups(f))
    with open(os.path.join(punkt, "sent_starters.txt"), encoding="utf-8") as f:
        params.sent_starters = decode.txt2set(f)
    with open(os.path.join(punkt, "abbrev_types.txt"), encoding="utf-8") as f:
        params.abbrev_types = decode.txt2set(f)
    with open(os.path.join(punkt, "ortho_context.tab"), encoding="utf-8") as f:
        params.ortho_context = decode.tab2intdict(f)
    tagger = PerceptronTagger(load=False)
    files = [os.path.join(folder, NLTK_RESOURCES[1], name) for name in tagger.param_files("eng")]
    weights, tagdict, classes = (json.loads(Path(f).read_text(encoding="utf-8")) for f in files)
    tagger.model.weights, tagger.tagdict = weights, tagdict
    tagger.classes = tagger.model.classes = set(classes)
    return PunktSentenceTokenizer(params), NLTKWordTokenizer(), tagger, RegexpParser(NP_GRAMMAR)


def noun_phrases(text: str, folder: str) -> list[str]:
    """The distinct noun phrases of `text`, as Data-Juicer extracts them (see the module's doc)."""
    sentences, words, tagger, chunker = _nlp(folder)
    tokens = [t for sentence in sentences.tokenize(text.lower()) for t in words.tokenize(sentence)]
    if not tokens:
        return []
    phrases = [" ".join(word for word, _ in tree.leaves())
               for tree in chunker.parse(tagger.tag(tokens)).subtrees() if tree.label() == "NP"]
    cleaned = (p.translate({ord(c): None for c in PUNCTUATION}).strip() for p in phrases)
    return list(dict.fromkeys(p for p in cleaned if p))


def _iou(a, b) -> float:
    inter = max(0, max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1])))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return 1.0 * inter / union if union != 0 else 0.0


def image_recall(logits, boxes, size: tuple[int, int], n_phrases: int, conf_thr: float, iou_thr: float,
                 large_area_ratio_thr: float) -> float:
    """The share of the phrases that one image's detections locate, as Data-Juicer counts it.

    `logits`: (boxes, phrases) of OWL-ViT's class head; `boxes`: (boxes, 4) centre x, y, width,
    height in [0, 1]; `size`: the image's (width, height). A box's phrase is its best-scoring one;
    boxes scoring above `conf_thr` are taken best first, at most `n_phrases` of them; a box covering
    more than `large_area_ratio_thr` of the image, or overlapping (IoU > `iou_thr`) a box already
    taken, is passed over; each phrase counts once."""
    import torch

    best = logits.float().max(dim=-1)
    scores, labels = torch.sigmoid(best.values), best.indices
    width, height = size
    scale = torch.tensor([width, height, width, height])
    cx, cy, w, h = boxes.float().unbind(-1)  # to corners as transformers' post-processing does
    corners = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1) * scale
    keep = scores > conf_thr
    scores, labels, corners = scores[keep], labels[keep], corners[keep]
    order = scores.argsort(descending=True)
    area = torch.tensor(width * height)
    hit: dict[int, list] = {}
    for box, label in zip(corners[order].tolist()[:n_phrases], labels[order].tolist()[:n_phrases]):
        if label in hit:
            continue
        box_area = (box[2] - box[0]) * (box[3] - box[1])
        if 1.0 * box_area / area > large_area_ratio_thr:  # in float32, as Data-Juicer divides by a tensor
            continue
        if any(_iou(box, other) > iou_thr for other in hit.values()):
            continue
        hit[label] = box
    return 1.0 * len(hit) / n_phrases
