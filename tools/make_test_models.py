"""Train the tiny CLIP and BLIP-ITM models used by the offline tests (10-20 minutes on 2 CPU cores).

    python tools/make_test_models.py [--out tests/assets/models] [--seed 0]

Both models are built from small configs (no download) and trained on ``tools.synth`` images that
go through the very processor saved next to the weights; BLIP's vision tower starts from CLIP's.
Each folder holds what a hub model holds, with each architecture's standard preprocessing (CLIP:
shortest edge + centre crop; BLIP: resize to height x width), so transformers 4.57 and 5 read them
alike. The same seed and environment give byte-identical files.
The script then reloads both folders and checks them on held-out pairs: the true caption must beat
a wrong one (colour and/or shape changed) for >= 97% of images, else it exits with status 1.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools import synth  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()  # before the imports: no "torchvision missing, using PIL" notice
hf_logging.disable_progress_bar()
from tokenizers import pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    BertTokenizer,
    BlipConfig,
    BlipForImageTextRetrieval,
    BlipImageProcessor,
    BlipProcessor,
    CLIPConfig,
    CLIPImageProcessor,
    CLIPModel,
    CLIPProcessor,
    CLIPTokenizer,
)

IMAGE_SIZE = 32  # model input side; patch 8 -> 16 patches, cheap on CPU
MAX_TEXT_LEN = 32  # text max_position_embeddings = tokenizer model_max_length
GATE = 0.97
ALL_ATTRS = list(itertools.product(synth.COLORS, synth.SHAPES, synth.BACKGROUNDS))
CAPTIONS = [synth.caption(*a) for a in ALL_ATTRS]
# caption words + a few common ones, so everyday text tokenizes into whole words too
WORDS = sorted({w for c in CAPTIONS for w in c.split()}
               | {"an", "the", "of", "in", "with", "and", "is", "image", "photo", "picture", "shape"})


def seed_all(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def random_size(rng: random.Random, min_ratio: float = 0.75) -> tuple[int, int]:
    """Original image sizes seen in training/eval: 64..128 px, mostly square, short side down to
    ``min_ratio`` of the long one (0.75: up to 4:3)."""
    side = rng.randint(64, 128)
    if rng.random() < 0.6:
        return side, side
    other = int(side * rng.uniform(min_ratio, 1.0))
    return (side, other) if rng.random() < 0.5 else (other, side)


@functools.lru_cache(maxsize=2)
def make_images(seed: int, n: int, min_ratio: float = 0.75):
    """``n`` synthetic images of assorted sizes with their attribute triples."""
    rng = random.Random(seed)
    pairs = [synth.random_pair(rng, size=random_size(rng, min_ratio)) for _ in range(n)]
    return [p[0] for p in pairs], [p[2] for p in pairs]


def pixel_values(processor, images, chunk: int = 500) -> torch.Tensor:
    return torch.cat([processor.image_processor(images=images[i:i + chunk], return_tensors="pt")["pixel_values"]
                      for i in range(0, len(images), chunk)])


def schedule(optimizer, steps: int, warmup: int = 100):
    """Linear warm-up then cosine decay to 0."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ---------------------------------------------------------------- tokenizers


def learn_bpe_merges(words) -> list[tuple[str, str]]:
    """Byte-pair merges learned on ``words`` until each is one token (``</w>`` marks word end).

    Merges are learned, not hand-chained, so applying them in rank order reproduces whole words.
    """
    seqs = [list(w[:-1]) + [w[-1] + "</w>"] for w in words]
    merges = []
    while any(len(s) > 1 for s in seqs):
        counts = Counter(p for s in seqs for p in zip(s, s[1:]))
        best = max(counts, key=lambda p: (counts[p], p))
        merges.append(best)
        for s in seqs:
            i = 0
            while i < len(s) - 1:
                if (s[i], s[i + 1]) == best:
                    s[i:i + 2] = [s[i] + s[i + 1]]
                i += 1
    return merges


def build_clip_tokenizer(out: Path) -> CLIPTokenizer:
    """Byte-level BPE over the caption words: every byte is in the vocab, so any text encodes."""
    merges = learn_bpe_merges(WORDS)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = alphabet + [c + "</w>" for c in alphabet] + ["".join(m) for m in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False))
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    # positional paths: transformers 4 names them vocab_file/merges_file, 5 vocab/merges
    tok = CLIPTokenizer(str(out / "vocab.json"), str(out / "merges.txt"), model_max_length=MAX_TEXT_LEN)
    assert all(len(tok.tokenize(w)) == 1 for w in WORDS), "caption words must be single tokens"
    return tok


def build_bert_tokenizer(out: Path) -> BertTokenizer:
    """WordPiece over the caption words plus letters/digits; anything else maps to [UNK]."""
    chars = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + list(chars)
             + ["##" + c for c in chars] + list(".,!?'\"-:;()"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    tok = BertTokenizer(str(out / "vocab.txt"), model_max_length=MAX_TEXT_LEN)
    assert all(len(tok.tokenize(w)) == 1 for w in WORDS)
    return tok


# ---------------------------------------------------------------- CLIP


def build_clip(out: Path) -> tuple[CLIPModel, CLIPProcessor]:
    tok = build_clip_tokenizer(out)
    # CLIP's own preprocessing (as openai/clip-vit-base-patch32): resize the short side, centre crop
    image_processor = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, do_center_crop=True,
                                         crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=MAX_TEXT_LEN,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(image_size=IMAGE_SIZE, patch_size=8, hidden_size=128, intermediate_size=256,
                           num_hidden_layers=2, num_attention_heads=4),
        projection_dim=64,
    )
    return CLIPModel(config), CLIPProcessor(image_processor=image_processor, tokenizer=tok)


def train_clip(model, processor, seed: int, n_images: int = 10000, steps: int = 2000, batch: int = 64) -> None:
    """InfoNCE of each image against all 72 captions (every caption is a candidate each step)."""
    images, attrs = make_images(seed, n_images)
    pixels = pixel_values(processor, images)
    labels = torch.tensor([ALL_ATTRS.index(a) for a in attrs])
    text = processor.tokenizer(CAPTIONS, padding=True, return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    sched = schedule(opt, steps)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for step in range(steps):
        idx = torch.randint(0, n_images, (batch,), generator=gen)
        logits = model(**text, pixel_values=pixels[idx]).logits_per_image  # scale * cosine, batch x 72
        loss = F.cross_entropy(logits, labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        if step % 250 == 0 or step == steps - 1:
            scale = model.logit_scale.exp().item()
            print(f"  clip step {step:4d} loss {loss.item():.4f} scale {scale:.1f}", flush=True)
    model.eval()


# ---------------------------------------------------------------- BLIP ITM


def build_blip(out: Path) -> tuple[BlipForImageTextRetrieval, BlipProcessor]:
    tok = build_bert_tokenizer(out)
    # BLIP's own preprocessing (as Salesforce/blip-itm-base-coco): resize to a fixed height x width,
    # no crop. A CLIP-style {shortest_edge} + crop config loads only in transformers 5.
    image_processor = BlipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    config = BlipConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, encoder_hidden_size=128, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=MAX_TEXT_LEN,
                         projection_dim=64, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                         sep_token_id=tok.sep_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(image_size=IMAGE_SIZE, patch_size=8, hidden_size=128, intermediate_size=256,
                           num_hidden_layers=2, num_attention_heads=4, projection_dim=64, hidden_act="quick_gelu"),
        projection_dim=64,
        image_text_hidden_size=64,
    )
    return BlipForImageTextRetrieval(config), BlipProcessor(image_processor=image_processor, tokenizer=tok)


def copy_vision_tower(clip: CLIPModel, blip: BlipForImageTextRetrieval) -> None:
    """Start BLIP's vision tower from the trained CLIP one (as BLIP starts from a pre-trained ViT):
    a tiny ViT learns shapes slowly, and this way it does so only once. Same layout except that
    BLIP fuses q/k/v and has no pre-layernorm (left out; fine-tuning absorbs the difference)."""
    src = clip.vision_model.state_dict()
    dst = {
        "embeddings.class_embedding": src["embeddings.class_embedding"].view(1, 1, -1),
        "embeddings.patch_embedding.weight": src["embeddings.patch_embedding.weight"],
        "embeddings.position_embedding": src["embeddings.position_embedding.weight"].unsqueeze(0),
    }
    for key, value in src.items():
        if key.startswith(("encoder.", "post_layernorm.")) and ".self_attn." not in key:
            dst[key] = value
        elif key.endswith(("q_proj.weight", "q_proj.bias")):
            prefix, kind = key.split("q_proj.")
            dst[prefix + "qkv." + kind] = torch.cat([src[f"{prefix}{x}_proj.{kind}"] for x in "qkv"])
        elif ".out_proj." in key:
            dst[key.replace("out_proj", "projection")] = value
    missing = blip.vision_model.load_state_dict(dst, strict=False).missing_keys
    assert missing == ["embeddings.patch_embedding.bias"], missing  # BLIP's patch conv has a bias; stays 0
    with torch.no_grad():
        blip.vision_model.embeddings.patch_embedding.bias.zero_()


def train_blip(model, processor, seed: int, n_images: int = 10000, steps: int = 1600, batch: int = 64) -> None:
    """ITM (index 1 = match) on each image with its caption and with a hard negative that changes
    the colour, the shape and/or the background, plus BLIP's image-text contrastive loss against
    all 72 captions, which teaches the vision tower shapes much faster than ITM alone. BLIP's
    processor squashes an image to a square (no crop), so training covers aspect ratios up to 2:1
    (what an aspect-ratio filter in front of it typically passes): shapes are learnt squashed too."""
    images, attrs = make_images(seed, n_images, min_ratio=0.5)
    pixels = pixel_values(processor, images)
    text = processor.tokenizer(CAPTIONS, padding=True, return_tensors="pt")
    pos = torch.tensor([ALL_ATTRS.index(a) for a in attrs])
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    sched = schedule(opt, steps)
    gen = torch.Generator().manual_seed(seed)
    targets = torch.cat([torch.ones(batch), torch.zeros(batch)]).long()
    model.train()
    for step in range(steps):
        idx = torch.randint(0, n_images, (batch,), generator=gen)
        neg = torch.tensor([ALL_ATTRS.index(synth.mismatched_attrs(rng, attrs[i], ("color", "shape", "background")))
                            for i in idx.tolist()])
        cap = torch.cat([pos[idx], neg])
        # the vision tower runs once; its output feeds both losses and both captions of an image
        image = model.vision_model(pixel_values=pixels[idx]).last_hidden_state
        hidden = model.text_encoder(input_ids=text["input_ids"][cap], attention_mask=text["attention_mask"][cap],
                                    encoder_hidden_states=image.repeat(2, 1, 1)).last_hidden_state
        logits = model.itm_head(hidden[:, 0])  # == model(...).itm_score
        itm_loss = F.cross_entropy(logits, targets)
        text_cls = model.text_encoder(**text).last_hidden_state[:, 0]  # == the use_itm_head=False path
        sim = F.normalize(model.vision_proj(image[:, 0]), dim=-1) @ F.normalize(model.text_proj(text_cls), dim=-1).T
        itc_loss = F.cross_entropy(sim / 0.05, pos[idx])
        loss = itm_loss + itc_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 250 == 0 or step == steps - 1:
            acc = (logits.argmax(-1) == targets).float().mean().item()
            print(f"  blip step {step:4d} itm {itm_loss.item():.4f} (acc {acc:.3f}) itc {itc_loss.item():.4f}",
                  flush=True)
    model.eval()


# ---------------------------------------------------------------- held-out gate


def held_out(seed: int, n: int):
    """Held-out images with their true caption and a wrong one (colour and/or shape changed)."""
    images, attrs = make_images(seed, n)
    rng = random.Random(seed)
    return images, [synth.caption(*a) for a in attrs], [synth.mismatched_caption(rng, a) for a in attrs]


@torch.no_grad()
def evaluate_clip(path: Path, seed: int, n: int = 400) -> dict:
    """Score = cosine * logit_scale / 100, i.e. ``logits_per_text / 100``, true vs wrong caption."""
    model, processor = CLIPModel.from_pretrained(path).eval(), CLIPProcessor.from_pretrained(path)
    images, true, wrong = held_out(seed, n)
    inputs = processor(text=true + wrong, images=images, return_tensors="pt", padding=True)
    scores = model(**inputs).logits_per_text / 100  # (2n texts) x (n images)
    s_true, s_wrong = scores[:n].diagonal(), scores[n:].diagonal()
    return {"accuracy": (s_true > s_wrong).float().mean().item(), **_stats(s_true, s_wrong)}


@torch.no_grad()
def evaluate_blip(path: Path, seed: int, n: int = 400) -> dict:
    """Score = softmax(itm_score)[:, 1], true vs wrong caption."""
    model, processor = BlipForImageTextRetrieval.from_pretrained(path).eval(), BlipProcessor.from_pretrained(path)
    images, true, wrong = held_out(seed, n)
    inputs = processor(images=images + images, text=true + wrong, return_tensors="pt", padding=True)
    probs = model(**inputs).itm_score.softmax(-1)[:, 1]
    s_true, s_wrong = probs[:n], probs[n:]
    return {"accuracy": (s_true > s_wrong).float().mean().item(), **_stats(s_true, s_wrong)}


def _stats(s_true: torch.Tensor, s_wrong: torch.Tensor) -> dict:
    """Score ranges, and the best single threshold (what a min_score filter relies on)."""
    cuts = torch.cat([s_true, s_wrong]).sort().values
    best = max(cuts.tolist(), key=lambda c: ((s_true >= c).sum() + (s_wrong < c).sum()).item())
    return {
        "true_mean": s_true.mean().item(), "true_p05": s_true.quantile(0.05).item(),
        "wrong_mean": s_wrong.mean().item(), "wrong_p95": s_wrong.quantile(0.95).item(),
        "best_threshold": best,
        "threshold_accuracy": (((s_true >= best).sum() + (s_wrong < best).sum()) / (2 * len(s_true))).item(),
    }


def save(model, processor, path: Path, what: str) -> None:
    """The files of a hub model (config.json, weights, preprocessor_config.json, tokenizer files), which
    every supported transformers release reads; transformers 5's processor.save_pretrained would nest
    the image processor in a processor_config.json instead."""
    model.save_pretrained(path)
    processor.image_processor.save_pretrained(path)
    processor.tokenizer.save_pretrained(path)
    (path / "README.md").write_text(
        f"# {path.name}\n\nA tiny {what} trained on synthetic shape images by `tools/make_test_models.py`.\n"
        "Only meaningful for captions like 'a red circle on a white background'; for tests, not for real use.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/assets/models")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    out, results, start = Path(args.out), {}, time.time()
    for name in ("tiny-clip", "tiny-blip-itm"):  # no stale file from an earlier layout survives
        shutil.rmtree(out / name, ignore_errors=True)

    seed_all(args.seed)
    clip, processor = build_clip(out / "tiny-clip")
    print(f"tiny-clip: {sum(p.numel() for p in clip.parameters()) / 1e6:.2f}M parameters", flush=True)
    train_clip(clip, processor, args.seed)
    save(clip, processor, out / "tiny-clip", "CLIP model")
    print(f"tiny-clip: trained in {time.time() - start:.0f}s", flush=True)

    seed_all(args.seed)
    blip, processor = build_blip(out / "tiny-blip-itm")
    print(f"tiny-blip-itm: {sum(p.numel() for p in blip.parameters()) / 1e6:.2f}M parameters", flush=True)
    copy_vision_tower(clip, blip)
    train_blip(blip, processor, args.seed)
    save(blip, processor, out / "tiny-blip-itm", "BLIP image-text-matching model")
    print(f"both trained in {time.time() - start:.0f}s", flush=True)

    for name, evaluate in (("tiny-clip", evaluate_clip), ("tiny-blip-itm", evaluate_blip)):
        results[name] = evaluate(out / name, args.seed + 1000)
        print(f"{name} held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in results[name].items()), flush=True)
    failed = [k for k, r in results.items() if r["accuracy"] < GATE]
    print("quality gate:", f"FAILED for {', '.join(failed)}" if failed else f"passed (>= {GATE:.0%})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
