"""Build the tiny image-only models the offline tests use (random weights, a few hundred KB each).

    python tools/make_vision_test_models.py [--out tests/assets/models]

- tiny-vit-nsfw, tiny-vit-watermark: ViT image classifiers with two labels, as
  Falconsai/nsfw_image_detection and amrul-hzz/watermark_detector (label 1: nsfw / watermark).
- tiny-aesthetics-predictor-v2-linear: a LAION aesthetics predictor in shunk031's layout (CLIP
  vision + projection, the v2 linear MLP head) with a CLIP processor, as
  shunk031/aesthetics-predictor-v2-sac-logos-ava1-l14-linearMSE. Its folder name carries
  'aesthetics-predictor', 'v2' and 'linear', which is how Data-Juicer picks the head and the /10.

Each folder holds what a hub model holds (config.json, model.safetensors, preprocessor_config.json,
tokenizer files for the predictor), written by save_pretrained, so `from_pretrained(folder)` reads
it as it reads a hub id. The weights are random but fixed by the seed; the heads are scaled so
that scores spread over their range (a classifier's probability over 0-1, the aesthetics score
around 5 of 10) and thresholds in tests separate images.
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
from transformers import (CLIPImageProcessor, CLIPVisionConfig, ViTConfig,  # noqa: E402
                          ViTForImageClassification, ViTImageProcessor)

IMAGE_SIZE = 32
TOKENIZER_FROM = "tiny-clip"  # the predictor folder gets the tiny CLIP's tokenizer (a CLIPProcessor needs one)
CLASSIFIERS = {"tiny-vit-nsfw": ({0: "normal", 1: "nsfw"}, 1),
               "tiny-vit-watermark": ({0: "clear", 1: "watermark"}, 2)}
PREDICTOR = "tiny-aesthetics-predictor-v2-linear"
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json")


def build_classifier(labels: dict, seed: int) -> tuple[ViTForImageClassification, ViTImageProcessor]:
    torch.manual_seed(seed)
    config = ViTConfig(image_size=IMAGE_SIZE, patch_size=8, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, id2label=labels,
                       label2id={v: k for k, v in labels.items()})
    model = ViTForImageClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(20.0)  # logits of a few units: probabilities across 0-1
        model.classifier.bias.copy_(torch.tensor([0.0, 1.5]))
    processor = ViTImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    return model, processor


def build_predictor(seed: int):
    from djx.ops.aesthetics_model import AestheticsPredictorV2Linear
    torch.manual_seed(seed)
    config = CLIPVisionConfig(image_size=IMAGE_SIZE, patch_size=8, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=2, num_attention_heads=2, projection_dim=16)
    model = AestheticsPredictorV2Linear(config).eval()
    with torch.no_grad():  # scores around 5 of 10, spread by about a unit
        linears = [m for m in model.layers if isinstance(m, torch.nn.Linear)]
        for layer in linears:  # variance-preserving, not CLIP's std 0.02 (which gives ~0 out)
            layer.weight.normal_(0.0, layer.in_features ** -0.5)
        linears[-1].weight.mul_(8.0)
        linears[-1].bias.fill_(0.75)  # the embeddings share a mean direction: about 5 with this
    processor = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, do_center_crop=True,
                                   crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    return model, processor


def save(model, processor, path: Path, what: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    (path / "README.md").write_text(
        f"# {path.name}\n\nA tiny {what} with random weights, built by `tools/make_vision_test_models.py`.\n"
        "Its scores mean nothing; it is for tests, not for real use.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/assets/models")
    args = parser.parse_args()
    out = Path(args.out)
    for name, (labels, seed) in CLASSIFIERS.items():
        model, processor = build_classifier(labels, seed)
        save(model, processor, out / name, f"ViT image classifier ({' / '.join(labels.values())})")
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters")
    model, processor = build_predictor(3)
    save(model, processor, out / PREDICTOR, "LAION aesthetics predictor (v2 linear head)")
    for name in TOKENIZER_FILES:  # as they are: every transformers release reads these
        shutil.copyfile(out / TOKENIZER_FROM / name, out / PREDICTOR / name)
    print(f"{PREDICTOR}: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
