"""Build the tiny OWL-ViT and NLTK data used by the offline tests of phrase_grounding_recall_filter.

    python tools/make_grounding_test_model.py [--out tests/assets/models/tiny-owlvit] [--seed 0]
                                              [--nltk-out tests/assets/nltk_data]

An OwlViTForObjectDetection from a small config (no download) with random weights drawn from
`--seed`: its scores mean nothing, but they are deterministic, and the folder holds what a hub
model holds (config.json, model.safetensors, preprocessor_config.json, tokenizer files), so it
loads through the very `from_pretrained` path that `google/owlvit-base-patch32` takes. The box
head's weights are drawn wider than the default initialisation, so that predicted boxes vary in
size and overlap: recalls then vary between images instead of all being 1.0. The tokenizer is the
byte-level BPE of tests/assets/models/tiny-clip with OWL-ViT's settings (16 positions, "!" pads).

The NLTK data is what Data-Juicer's noun-phrase extraction reads through nltk 3.9+ (word_tokenize,
pos_tag), in nltk's own pickle-free formats: `tokenizers/punkt_tab/english/` (Punkt parameters
with no abbreviations or collocations: a sentence ends at a full stop) and
`taggers/averaged_perceptron_tagger_eng/` (an averaged perceptron trained on the few hand-tagged
captions below, saved as its three JSON files). It tags captions of the test images (colours,
shapes, backgrounds, everyday objects) as NLTK's English model does; it is for tests only.
The same seed and environment give identical files.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
from transformers import (  # noqa: E402
    CLIPTokenizer,
    OwlViTConfig,
    OwlViTForObjectDetection,
    OwlViTImageProcessor,
)

REPO = Path(__file__).resolve().parents[1]
CLIP_TOKENIZER = REPO / "tests" / "assets" / "models" / "tiny-clip"
IMAGE_SIZE, PATCH = 64, 8  # 8 x 8 patches: 64 candidate boxes per image
MAX_TEXT_LEN = 16  # as google/owlvit-base-patch32


def build(out: Path, seed: int) -> None:
    torch.manual_seed(seed)
    tok = CLIPTokenizer(str(CLIP_TOKENIZER / "vocab.json"), str(CLIP_TOKENIZER / "merges.txt"),
                        model_max_length=MAX_TEXT_LEN, pad_token="!")
    image_processor = OwlViTImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
                                           crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    config = OwlViTConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=MAX_TEXT_LEN,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id),
        vision_config=dict(image_size=IMAGE_SIZE, patch_size=PATCH, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4),
        projection_dim=32,
    )
    model = OwlViTForObjectDetection(config).eval()
    with torch.no_grad():
        for layer in (model.box_head.dense0, model.box_head.dense1, model.box_head.dense2):
            layer.weight.normal_(0.0, 0.3)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    image_processor.save_pretrained(out)
    tok.save_pretrained(out)
    for name in ("vocab.json", "merges.txt"):  # the slow tokenizer's files too, as tiny-clip ships
        shutil.copyfile(CLIP_TOKENIZER / name, out / name)
    for path in out.iterdir():
        path.chmod(0o644)
    (out / "README.md").write_text(
        f"# {out.name}\n\nA tiny OWL-ViT (OwlViTForObjectDetection) with random weights, written by "
        "`tools/make_grounding_test_model.py`.\nIts detections mean nothing; for tests, not for real use.\n")


# Hand-tagged captions (Penn Treebank tags, as NLTK's English tagger uses).
TAGGED = """\
a/DT red/JJ circle/NN on/IN a/DT white/JJ background/NN
an/DT orange/JJ star/NN on/IN a/DT black/JJ background/NN
the/DT blue/JJ square/NN is/VBZ next/JJ to/TO a/DT green/JJ triangle/NN ./.
two/CD yellow/JJ stars/NNS and/CC a/DT purple/JJ circle/NN ./.
a/DT dog/NN runs/VBZ on/IN the/DT grass/NN ./.
the/DT cat/NN sleeps/VBZ under/IN a/DT red/JJ car/NN ./.
a/DT man/NN holds/VBZ a/DT big/JJ blue/JJ umbrella/NN in/IN the/DT rain/NN ./.
there/EX is/VBZ a/DT gray/JJ square/NN in/IN the/DT picture/NN ./.
this/DT photo/NN shows/VBZ a/DT green/JJ star/NN ,/, a/DT red/JJ square/NN and/CC a/DT tree/NN ./.
very/RB bright/JJ ./.
it/PRP is/VBZ blue/JJ and/CC green/JJ ./.
she/PRP looks/VBZ at/IN it/PRP quickly/RB ./.
a/DT small/JJ yellow/JJ triangle/NN sits/VBZ on/IN top/NN of/IN a/DT large/JJ purple/JJ square/NN ./.
children/NNS play/VBP with/IN red/JJ balls/NNS in/IN a/DT park/NN ./.
an/DT image/NN of/IN a/DT white/JJ circle/NN on/IN a/DT gray/JJ background/NN
the/DT old/JJ house/NN has/VBZ a/DT black/JJ door/NN and/CC two/CD windows/NNS ./.
we/PRP see/VBP nothing/NN here/RB ./.
and/CC then/RB they/PRP left/VBD ./.
a/DT woman/NN is/VBZ riding/VBG a/DT bicycle/NN near/IN the/DT river/NN ./.
orange/JJ triangles/NNS and/CC blue/JJ circles/NNS on/IN a/DT black/JJ background/NN
"""


def build_nltk_data(out: Path, seed: int) -> None:
    from nltk.tag.perceptron import PerceptronTagger

    shutil.rmtree(out, ignore_errors=True)
    punkt = out / "tokenizers" / "punkt_tab" / "english"
    punkt.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (punkt / name).write_text("")
    sentences = [[tuple(t.rsplit("/", 1)) for t in line.split()] for line in TAGGED.splitlines()]
    random.seed(seed)  # the perceptron shuffles its training sentences
    tagger = PerceptronTagger(load=False)
    tagger.train(sentences, nr_iter=8)
    folder = out / "taggers" / "averaged_perceptron_tagger_eng"
    folder.mkdir(parents=True)
    (out / "README.md").write_text(
        "# nltk_data\n\nNLTK data for tests, written by `tools/make_grounding_test_model.py`: Punkt parameters "
        "with no abbreviations\n(tokenizers/punkt_tab/english) and an averaged perceptron tagger trained on a few "
        "hand-tagged captions\n(taggers/averaged_perceptron_tagger_eng), in NLTK's pickle-free formats. "
        "Not NLTK's English models.\n")
    weights, tagdict, classes = tagger.encode_json_obj()
    for param, name in zip((weights, tagdict, sorted(classes)), tagger.param_files("eng")):
        (folder / name).write_text(json.dumps(param, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "tests" / "assets" / "models" / "tiny-owlvit"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nltk-out", default=str(REPO / "tests" / "assets" / "nltk_data"))
    args = parser.parse_args()
    out = Path(args.out)
    build(out, args.seed)
    build_nltk_data(Path(args.nltk_out), args.seed)
    model = OwlViTForObjectDetection.from_pretrained(out)  # reloads as a hub id would
    print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{sum(f.stat().st_size for f in out.iterdir()) / 1024:.0f} KB")


if __name__ == "__main__":
    main()
