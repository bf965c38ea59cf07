"""GPU check, `image_decode: device` against the host path (run by tools/gpu_check.py --only decode).

Full-size CLIP ViT-B/32 and BLIP ITM (random weights, their real 224/384-px processors) score the
same real photos (tests/assets: odd sizes, EXIF-rotated, CMYK, PNG/GIF/WebP/BMP beside JPEGs)
prepared on the host (Pillow) and with JPEGs decoded, resized and cropped on the GPU, at float32
and bfloat16. Prints each path's images/s (prepare + score, one process, batches of 64) and the
max score difference, after the pixels it comes from:

- the resize: Pillow-decoded pixels resized and cropped on the GPU must equal the processor's
  pixels bit for bit (this is what the device path reproduces; any difference fails the check);
- the JPEG decoder: the GPU's decode against Pillow's (libjpeg) of the same files, in levels and
  in the share of pixels that differ, and the processor-size pixels they lead to. JPEG decoders
  may round the inverse DCT and the chroma upsampling differently, so this part is measured and
  bounded, not zero: scores within DECODER_BOUND (1e-3; 4.6e-4 measured for CLIP float32 on an
  H100) where the resize is exact, against 1e-4 (float32) / 1e-3 (bfloat16) for the rest of the
  path (its scores are the host's where the decoded pixels are).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHOTOS = [p for p in sorted((REPO / "tests" / "assets" / "faces").glob("*.*g"))
          + sorted((REPO / "tests" / "assets" / "dj_fixtures" / "image_models").glob("*.*"))]
LIMITS = {"float32": 1e-4, "bfloat16": 1e-3}
DECODER_BOUND = 1e-3  # a score's difference that the JPEG decoder's rounding alone may make


def photo_samples(folder: Path, n: int) -> list[dict]:
    """n one-image samples over copies of the test photos (each copy its own file: decoded once)."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for i in range(n):
        src = PHOTOS[i % len(PHOTOS)]
        dst = folder / f"{i}-{src.name}"
        shutil.copyfile(src, dst)
        samples.append({"text": f"<__dj__image> photo number {i}", "images": [str(dst)]})
    return samples


def score_path(kind: str, model: Path, samples: list[dict], dtype: str, decode: str,
               device: str = "cuda:0") -> tuple[list, float]:
    """(scores, images/s) of one path: prepare and score in batches of 64 on `device`."""
    import torch

    from djx import Batch, RunContext
    from djx.core.models.pool import ModelPool
    from djx.core.op.images import BatchImages
    from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
    from djx.ops.filter.image_text_model_filter import max_text_len
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    kw = {"dtype": dtype, "image_decode": decode, "min_score": -1e9}
    op = ImageTextSimilarityFilter(hf_clip=str(model), **kw) if kind == "clip" else \
        ImageTextMatchingFilter(hf_blip=str(model), **kw)
    pool = ModelPool(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    loaded = pool.get(op.spec)
    ctx = RunContext()
    scores, t0 = [], None
    for start in range(-64, len(samples), 64):  # the first batch warms up and is not timed
        part = samples[max(start, 0):max(start, 0) + 64]
        if start == 0:
            sync()
            t0 = time.perf_counter()
        batch = Batch([dict(s) for s in part], ctx, BatchImages("/", ctx.max_image_pixels), pool,
                      ctx.text_key, ctx.image_key)
        prepared, _ = op.prepare(batch, loaded.processor, max_text_len(loaded.model))
        with torch.inference_mode():
            got = op.score(loaded, prepared)
        if start >= 0:
            scores.extend(got)
    sync()
    return scores, len(samples) / (time.perf_counter() - t0)


def decode_check(out: Path, n: int = 512) -> bool:
    from djx.ops.common import device_decode
    from djx.tools.bench import save_full_size
    problem = device_decode.problem()
    if problem:
        print(f"\nGPU decode: cannot run: {problem}")
        return False
    samples = photo_samples(out / "decode-photos", n)
    ok = True
    print(f"\nGPU decode against the host path: {n} samples over {len(PHOTOS)} test photos")
    for kind in ("clip", "blip"):
        model = out / "models" / kind
        if not model.is_dir():
            save_full_size(kind, out / "models")
        resize_exact, decoder_levels = pixel_check(kind, model)
        ok = ok and resize_exact
        for dtype, limit in LIMITS.items():
            host, host_rate = score_path(kind, model, samples, dtype, "cpu")
            dev, dev_rate = score_path(kind, model, samples, dtype, "device")
            diff = max(abs(a - b) for a, b in zip(host, dev))
            if decoder_levels and resize_exact:  # the decoder's rounding: its documented bound
                limit = max(limit, DECODER_BOUND)
            good = len(host) == len(dev) == n and diff <= limit
            ok = ok and good
            print(f"  {kind} {dtype:<8}: max |device - host| {diff:.2e} (limit {limit:g}); "
                  f"host {host_rate:,.1f} images/s, device decode {dev_rate:,.1f} images/s "
                  f"({dev_rate / host_rate:.2f}x): {'passed' if good else 'FAILED'}")
    print(f"GPU decode: {'passed' if ok else 'FAILED'}")
    return ok


def pixel_check(kind: str, model: Path) -> tuple[bool, int]:
    """(the GPU resize equals the processor's pixels bit for bit, the most levels by which the GPU's
    JPEG decode differs from Pillow's), printed with the share of differing pixels, over the test
    photos that are JPEGs."""
    import numpy as np
    import torch
    from PIL import Image, ImageOps
    from transformers import AutoImageProcessor

    from djx.ops.common import device_decode
    from djx.ops.common.pixels import processor_pixels
    from djx.ops.models import pil_backend
    proc = AutoImageProcessor.from_pretrained(str(model), **pil_backend())
    geo = device_decode.geometry(proc)
    files = [(p, device_decode.jpeg_file(p.read_bytes())) for p in PHOTOS if device_decode.is_jpeg(p.read_bytes())]
    files = [(p, f) for p, f in files if f is not None]  # CMYK: decoded on the host
    images = [ImageOps.exif_transpose(Image.open(p)).convert("RGB") for p, _ in files]
    host, _ = processor_pixels(proc, images)
    pil = [torch.from_numpy(np.array(im)).permute(2, 0, 1).contiguous().to("cuda:0") for im in images]
    resized = device_decode.resize_all(pil, geo).cpu()
    exact = torch.equal(resized, host)
    raw = [torch.frombuffer(bytearray(f.data), dtype=torch.uint8) for _, f in files]
    decoded = [None if d is None else device_decode.upright(d, f.orientation)
               for d, (_, f) in zip(device_decode._decode_all(raw, "cuda:0"), files)]
    levels, differing, total, refused = 0, 0, 0, 0
    for gpu, ref in zip(decoded, pil):
        if gpu is None or gpu.shape != ref.shape:
            refused += 1
            continue
        delta = (gpu.int() - ref.int()).abs()
        levels, differing, total = max(levels, int(delta.max())), differing + int((delta > 0).sum()), total + delta.numel()
    through = device_decode.resize_all([d if d is not None else p for d, p in zip(decoded, pil)], geo).cpu()
    after = int((through.int() - host.int()).abs().max())
    print(f"  {kind} pixels: GPU resize of Pillow's decode {'equals' if exact else 'DIFFERS FROM'} the processor's "
          f"({len(files)} JPEGs); GPU JPEG decode vs Pillow's: max {levels} levels, "
          f"{differing / max(total, 1):.2%} of values differ ({refused} refused or other shape); "
          f"after resize: max {after} levels")
    return exact, levels
