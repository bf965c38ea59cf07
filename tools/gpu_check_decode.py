"""GPU check, `image_decode: device` against the host path (run by tools/gpu_check.py --only decode).

Full-size CLIP ViT-B/32 and BLIP ITM (random weights, their real 224/384-px processors) score the
same real photos (tests/assets: odd sizes, EXIF-rotated, CMYK, PNG/GIF/WebP/BMP beside JPEGs)
prepared on the host (Pillow) and with JPEGs decoded, resized and cropped on the GPU, at float32
and bfloat16. Prints the max score difference (must be <= 1e-4 in float32, <= 1e-3 in bfloat16)
and each path's images/s (prepare + score, one process, batches of 64).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHOTOS = [p for p in sorted((REPO / "tests" / "assets" / "faces").glob("*.*g"))
          + sorted((REPO / "tests" / "assets" / "dj_fixtures" / "image_models").glob("*.*"))]
LIMITS = {"float32": 1e-4, "bfloat16": 1e-3}


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
        for dtype, limit in LIMITS.items():
            host, host_rate = score_path(kind, model, samples, dtype, "cpu")
            dev, dev_rate = score_path(kind, model, samples, dtype, "device")
            diff = max(abs(a - b) for a, b in zip(host, dev))
            good = len(host) == len(dev) == n and diff <= limit
            ok = ok and good
            print(f"  {kind} {dtype:<8}: max |device - host| {diff:.2e} (limit {limit:g}); "
                  f"host {host_rate:,.1f} images/s, device decode {dev_rate:,.1f} images/s "
                  f"({dev_rate / host_rate:.2f}x): {'passed' if good else 'FAILED'}")
    print(f"GPU decode: {'passed' if ok else 'FAILED'}")
    return ok
