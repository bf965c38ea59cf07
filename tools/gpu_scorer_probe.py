"""Where the scorer's time goes on a GPU, one group at a time (run by tools/gpu_session.sh).

    python tools/gpu_scorer_probe.py [--n 512] [--groups 32,128,352,512]

In one process, no workers: full-size CLIP ViT-B/32 (random weights) on the first GPU scores
groups of prepared batches as the scorer gets them (bench_throughput's 640x480 photos, prepared
by the op in batches of 32, joined by its `assemble_parts`), with `image_decode` cpu (uint8 pixels
from the host) and device (JPEG bytes). Per group size: pairs/s of `score_parts` with the device
synchronised, and the phases it reports (device decode, transfer, forward) in microseconds a pair;
then Python's profiler over a few groups of the largest size (host time by function), which says
what the scorer's thread does while the GPU waits.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import tempfile
import time
from pathlib import Path

BATCH = 32


def prepared_batches(model: Path, data: Path, n: int, decode: str, dtype: str, device: str):
    """(op, loaded model, prepared batches of BATCH samples) for `decode` cpu or device."""
    import json

    from djx import Batch, RunContext
    from djx.core.models.pool import ModelPool
    from djx.core.op.images import BatchImages
    from djx.ops.filter.image_text_model_filter import max_text_len
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    op = ImageTextSimilarityFilter(hf_clip=str(model), dtype=dtype, image_decode=decode, min_score=-1e9)
    pool = ModelPool(device)
    loaded = pool.get(op.spec)
    ctx = RunContext()
    samples = [json.loads(line) for line in open(data)][:n]
    out = []
    for i in range(0, len(samples), BATCH):
        batch = Batch([dict(s) for s in samples[i:i + BATCH]], ctx, BatchImages(str(data.parent), ctx.max_image_pixels),
                      pool, ctx.text_key, ctx.image_key)
        out.append(op.prepare(batch, loaded.processor, max_text_len(loaded.model))[0])
    return op, loaded, out


def score_group(op, loaded, parts: list, counters: dict):
    """One group scored as the scorer scores it (fresh copies: the device decode replaces the bytes)."""
    import torch

    from djx.core.models.share.scoring import AssembledParts
    from djx.core.run.breakdown import forward_timed
    group = AssembledParts(dataclasses.replace(p) for p in parts)
    group.assembled = op.assemble_parts(group)
    op.ready_parts(loaded, group.assembled, counters)  # the gathering thread's part (device decode)
    with torch.inference_mode():
        return forward_timed(lambda: op.score_parts(loaded, group, (), counters), counters)


def towers(loaded, batches: list, size: int, reps: int = 5) -> str:
    """The bare towers on one joined group's device tensors: each tower's output copied back before
    the next forward (a sync per forward) against every forward queued and one copy at the end."""
    import torch

    from djx.ops.common.prepared import join
    from djx.ops.common.pixels import to_model
    from djx.ops.common.shapes import pad_tokens
    joined = join(batches[:max(1, size // BATCH)])
    model, dev = loaded.model, loaded.device
    pixels = to_model(joined.pixels.to(dev), joined.pixel_table, dev, loaded.dtype)
    tokens = {k: v.to(dev) for k, v in pad_tokens(loaded.processor.tokenizer, joined.tokens).items()
              if k in ("input_ids", "attention_mask")}
    chunks = [slice(a, a + 256) for a in range(0, pixels.shape[0], 256)]

    def run(sync_each: bool):
        outs = []
        for c in chunks:
            outs.append(model.visual_projection(model.vision_model(pixel_values=pixels[c]).pooler_output))
            if sync_each:
                outs[-1] = outs[-1].float().cpu()
        for c in chunks:
            outs.append(model.text_projection(model.text_model(**{k: v[c] for k, v in tokens.items()}).pooler_output))
            if sync_each:
                outs[-1] = outs[-1].float().cpu()
        return [o.float().cpu() for o in outs] if not sync_each else outs
    rates = {}
    with torch.inference_mode():
        for sync_each in (True, False, True, False):
            run(sync_each)
            t0 = time.perf_counter()
            for _ in range(reps):
                run(sync_each)
            rates[sync_each] = pixels.shape[0] * reps / (time.perf_counter() - t0)
    return (f"bare towers, groups of {pixels.shape[0]}: a sync after each forward {rates[True]:,.0f} pairs/s; "
            f"all queued, one sync {rates[False]:,.0f} pairs/s")


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(op, loaded, batches: list, size: int, reps: int = 4) -> tuple[float, dict]:
    per = max(1, size // BATCH)
    groups = [batches[(k * per) % len(batches):][:per] for k in range(reps + 1)]
    groups = [g if len(g) == per else batches[:per] for g in groups]
    score_group(op, loaded, groups[0], {})  # warm-up (this size's allocations, kernels)
    _sync(loaded.device)
    counters: dict = {}
    t0 = time.perf_counter()
    pairs = 0
    for g in groups[1:]:
        score_group(op, loaded, g, counters)
        pairs += sum(len(p.pairs) for p in g)
    _sync(loaded.device)
    took = time.perf_counter() - t0
    return pairs / took, {k.split(".", 1)[-1]: v * 1e6 / pairs for k, v in counters.items() if k.startswith("time.")}


def main() -> None:
    from djx.tools.bench import save_full_size
    from djx.tools.bench_throughput import write_photos
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--groups", default="32,128,352,512")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--decodes", default="cpu,device", help="image_decode values probed")
    args = ap.parse_args()
    sizes = [int(s) for s in args.groups.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = write_photos(work / "photos", args.n)
        model = save_full_size("clip", work / "models")
        for decode in args.decodes.split(","):
            op, loaded, batches = prepared_batches(model, data, args.n, decode, args.dtype, args.device)
            for size in sizes:
                rate, phases = measure(op, loaded, batches, size)
                print(f"scorer probe, image_decode {decode:<6}, groups of {size:>3}: {rate:>8,.0f} pairs/s; "
                      "us a pair: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(phases.items())), flush=True)
            prof = cProfile.Profile()
            prof.enable()
            measure(op, loaded, batches, sizes[-1], reps=3)
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(22)
            print(f"host time by function, image_decode {decode}, groups of {sizes[-1]} (tottime first):")
            print("\n".join(line[:160] for line in text.getvalue().splitlines() if line.strip()
                            and not line.startswith(("   Ordered", "   List"))), flush=True)
            if decode == "cpu" and args.device.startswith("cuda"):
                print(towers(loaded, batches, sizes[-1]), flush=True)
            del op, loaded, batches


if __name__ == "__main__":
    main()
