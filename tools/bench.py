"""djx benchmarks: ratios measured within one run (absolute times are noise on shared machines).

    python tools/bench.py [--quick] [--skip-models] [--skip-core]
    python tools/bench.py estimate [--sizes 1000 10000] [--limit 200]   (tools/bench_estimate.py)
    python tools/bench.py share [--n 192]   one model copy per machine: peak PSS np=2/np=1 (tools/bench_share.py)
    python tools/bench.py startup           a one-sample run against bare import + load (tools/bench_share.py)
    python tools/bench.py dj --dj-venv V    side by side with Data-Juicer (tools/bench_dj.py)

1. Streaming memory: peak USS (main + workers, sampled from outside) at 2,000 vs 20,000 samples;
   samples/s at np=1 and np=2 (text and image-header filters); and peak USS of a run that decodes
   every image (tiny CLIP filter, spawn worker) at 1,000 vs 10,000 distinct images.
2. Model filters: end-to-end image_text_similarity_filter (full-size CLIP ViT-B/32, random
   weights) samples/s against the raw batched model forward on the same decoded images and texts;
   the same for image_text_matching_filter with BLIP ITM base (ViT-B/16 at 384 px).
3. Model loads per process with two ops sharing one model (must be 1).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "assets" / "models"
sys.path.insert(0, str(REPO))
from tools import synth  # noqa: E402


class Sampler:
    """Calls `sample()` every `every` seconds on a thread while used as a context manager, and
    once more at the end (short runs: the end state is in)."""

    def __init__(self, every: float):
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self):
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()


class TreeMemory(Sampler):
    """Samples USS and PSS of this process and all its descendants every `every` seconds and keeps
    the peaks: `peak_total` (summed USS), `peak_main` (this process's USS) and `peak_pss` (summed
    PSS, which charges a page shared by N processes 1/N to each, so a shared model counts once)."""

    def __init__(self, every: float = 0.02):
        super().__init__(every)
        self.peak_total, self.peak_main, self.peak_pss = 0, 0, 0

    def sample(self):
        from djx.core.plan.resources import uss_pss_bytes
        me = psutil.Process()
        try:
            tree = [me, *me.children(recursive=True)]
        except psutil.Error:
            return
        uss_sum = pss_sum = 0
        for p in tree:
            uss, pss = uss_pss_bytes(p.pid)
            uss_sum, pss_sum = uss_sum + uss, pss_sum + pss
            if p.pid == me.pid:
                self.peak_main = max(self.peak_main, uss)
        self.peak_total = max(self.peak_total, uss_sum)
        self.peak_pss = max(self.peak_pss, pss_sum)


def write_dataset(folder: Path, n: int, n_images: int = 50, size: int = 256) -> Path:
    """n samples cycling over n_images synthetic JPEGs with their captions."""
    import random
    img_dir = folder / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    caps = []
    for i in range(n_images):
        image, cap, _ = synth.random_pair(rng, size=size)
        image.save(img_dir / f"{i}.jpg", quality=90)
        caps.append(cap)
    path = folder / f"data_{n}.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            k = i % n_images
            f.write(json.dumps({"id": i, "text": f"<__dj__image> {caps[k]}", "images": [f"images/{k}.jpg"]}) + "\n")
    return path


def mb(b: float) -> str:
    return f"{b / (1 << 20):,.0f} MB"


def bench_core(work: Path, quick: bool) -> list[tuple]:
    from djx import Pipeline
    from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
    from djx.ops.filter.image_shape_filter import ImageShapeFilter
    from djx.ops.filter.text_length_filter import TextLengthFilter

    def ops():
        return [TextLengthFilter(min_len=5), ImageShapeFilter(min_width=64, min_height=64),
                ImageAspectRatioFilter(min_ratio=0.5, max_ratio=2.0)]

    rows = []
    sizes = (2_000, 20_000)
    results = {}
    for n in sizes:
        data = write_dataset(work, n)
        for np_ in (1, 2):
            pipe = Pipeline(ops=ops(), np=np_, batch_size=64, start_method="fork")
            with TreeMemory() as s:
                t0 = time.perf_counter()
                summary = pipe.run(str(data), str(work / f"out_{n}_{np_}/o.jsonl"), progress=False,
                                   log=lambda *a: None)
                dt = time.perf_counter() - t0
            results[(n, np_)] = (n / dt, s.peak_total, s.peak_main, summary)
    for np_ in (1, 2):
        a, b = results[(2_000, np_)], results[(20_000, np_)]
        rows.append((f"peak USS, all processes, np={np_}", f"{mb(a[1])} @2k", f"{mb(b[1])} @20k",
                     f"x{b[1] / a[1]:.2f} for x10 data"))
        rows.append((f"peak USS, main process, np={np_}", f"{mb(a[2])} @2k", f"{mb(b[2])} @20k",
                     f"x{b[2] / a[2]:.2f} for x10 data"))
    s1, s2 = results[(20_000, 1)][0], results[(20_000, 2)][0]
    rows.append(("samples/s @20k (CPU filters)", f"np=1 {s1:,.0f}", f"np=2 {s2:,.0f}", f"np2/np1 {s2 / s1:.2f}"))
    return rows


def save_full_size(kind: str, folder: Path) -> Path:
    """A full-size architecture with random weights, plus a processor (the tiny models' tokenizers,
    whose ids fit the full vocabularies; image processors at the real input size)."""
    import torch
    from transformers import (AutoProcessor, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor,
                              BlipProcessor, CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor)
    torch.manual_seed(0)
    out = folder / kind
    if kind == "clip":
        model = CLIPModel(CLIPConfig())
        tok = AutoProcessor.from_pretrained(TINY / "tiny-clip").tokenizer
        proc = CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok)
    else:
        model = BlipForImageTextRetrieval(BlipConfig())
        tok = AutoProcessor.from_pretrained(TINY / "tiny-blip-itm").tokenizer
        proc = BlipProcessor(image_processor=BlipImageProcessor(), tokenizer=tok)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out


def raw_forward(kind: str, path: Path, images, texts, batch: int, dtype: str) -> float:
    """Seconds for the plain batched forward (processor + model) over the decoded pairs."""
    import torch
    from transformers import BlipForImageTextRetrieval, CLIPModel
    torch_dtype = getattr(torch, dtype)
    cls = CLIPModel if kind == "clip" else BlipForImageTextRetrieval
    model = cls.from_pretrained(path).to(torch_dtype).eval()
    from djx.ops.models import auto_processor
    proc = auto_processor(str(path))  # djx's: the Pillow backend
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            inputs = proc(text=texts[i:i + batch], images=images[i:i + batch], return_tensors="pt",
                          padding=True, truncation=True)
            inputs["pixel_values"] = inputs["pixel_values"].to(torch_dtype)
            model(**inputs)
    return time.perf_counter() - t0


def bench_model(kind: str, work: Path, n: int, batch: int, dtype: str) -> tuple:
    import torch
    from PIL import Image

    from djx import Pipeline
    from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    torch.set_num_threads(psutil.cpu_count(logical=True) or 1)
    path = save_full_size(kind, work / "models")
    folder = work / f"model_{kind}"
    data = write_dataset(folder, n, n_images=n, size=256)
    samples = [json.loads(line) for line in open(data)]
    images = [Image.open(folder / s["images"][0]).convert("RGB") for s in samples]
    texts = [s["text"].replace("<__dj__image>", "").strip() for s in samples]
    raw_forward(kind, path, images[:batch], texts[:batch], batch, dtype)  # warm-up
    raw = raw_forward(kind, path, images, texts, batch, dtype)
    if kind == "clip":
        op = ImageTextSimilarityFilter(hf_clip=str(path), min_score=-1e9, dtype=dtype, forward_batch_size=batch)
    else:
        op = ImageTextMatchingFilter(hf_blip=str(path), min_score=0.0, dtype=dtype, forward_batch_size=batch)
    pipe = Pipeline(ops=[op], batch_size=batch, dataset_path=str(data))  # images resolve next to it
    list(pipe.process(samples[:batch]))  # warm-up: loads the model into this process's pool
    t0 = time.perf_counter()
    kept = list(pipe.process(samples))
    e2e = time.perf_counter() - t0
    assert len(kept) == n, pipe.last_counts
    return (f"{kind} {dtype} ({n} pairs, batch {batch})", f"djx {n / e2e:.2f}/s", f"raw {n / raw:.2f}/s",
            f"ratio {raw / e2e:.2f}")


def bench_model_memory(work: Path, quick: bool) -> list[tuple]:
    """Peak USS of a run that decodes every image (tiny CLIP filter, 256 px JPEGs, one worker):
    memory must stay flat as the dataset grows 10x (batches are bounded, images freed per batch)."""
    from djx import Pipeline
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    sizes = (500, 5_000) if quick else (1_000, 10_000)
    peaks = {}
    for n in sizes:
        data = write_dataset(work / f"mm_{n}", n, n_images=n, size=256)  # n distinct images
        pipe = Pipeline(ops=[ImageTextSimilarityFilter(hf_clip=str(TINY / "tiny-clip"), min_score=-1.0)],
                        np=1, batch_size=64)
        with TreeMemory() as s:
            t0 = time.perf_counter()
            summary = pipe.run(str(data), str(work / f"mm_{n}/out/o.jsonl"), progress=False, log=lambda *a: None)
            dt = time.perf_counter() - t0
        assert summary["kept"] == n, summary
        peaks[n] = (s.peak_total, n / dt)
    (a, _), (b, rate) = peaks[sizes[0]], peaks[sizes[1]]
    return [("peak USS, all processes, tiny CLIP np=1", f"{mb(a)} @{sizes[0] // 1000}k",
             f"{mb(b)} @{sizes[1] // 1000}k", f"x{b / a:.2f} for x10 data ({rate:,.0f} samples/s)")]


def bench_shared_model(work: Path) -> tuple:
    from djx import Pipeline
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    data = write_dataset(work / "shared", 40, n_images=10, size=96)
    clip = str(TINY / "tiny-clip")
    ops = [ImageTextSimilarityFilter(hf_clip=clip, min_score=0.0),
           ImageTextSimilarityFilter(hf_clip=clip, min_score=0.0, reduce_mode="max")]
    summary = Pipeline(ops=ops, np=2, batch_size=8, start_method="spawn").run(
        str(data), str(work / "shared/out/o.jsonl"), progress=False, log=lambda *a: None)
    loads = summary["model_loads"]
    return ("model loads per process, 2 ops 1 model", f"workers {len(loads)}",
            f"loads {sorted(sum(v.values()) for v in loads.values())}",
            f"max {summary['max_model_loads_per_process']} (must be 1)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer pairs for the model benchmarks")
    ap.add_argument("--skip-core", action="store_true")
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("what", nargs="?", default="all", choices=["all", "estimate", "share", "startup", "dj"],
                    help="estimate: a --limit trial's estimate against the full run (tools/bench_estimate.py)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000], help="estimate: dataset sizes")
    ap.add_argument("--limit", type=int, default=200, help="estimate: the trial's --limit")
    ap.add_argument("--n", type=int, default=None, help="share: samples per run (192); dj: 1000")
    ap.add_argument("--dj-venv", type=Path, help="dj: a venv with Data-Juicer (../shared/anchors/dj_install.sh)")
    ap.add_argument("--np", type=int, default=2, help="dj: workers on both sides")
    ap.add_argument("--private", action="store_true", help="dj: also run djx with share_models: false")
    args = ap.parse_args()
    rows = []
    if args.what == "dj":
        from tools.bench_dj import bench_dj
        if args.dj_venv is None:
            ap.error("dj needs --dj-venv")
        with tempfile.TemporaryDirectory(prefix="djx-bench-") as tmp:
            rows = bench_dj(Path(tmp), args.dj_venv.resolve(), args.n or 1000, args.np, args.private)
        for r in rows:
            print("  " + "  ".join(str(c) for c in r if c))
        return
    if args.what in ("share", "startup"):
        from tools.bench_share import bench_share, bench_startup
        with tempfile.TemporaryDirectory(prefix="djx-bench-") as tmp:
            rows = bench_share(Path(tmp), args.n or 192) if args.what == "share" else bench_startup(Path(tmp))
        for r in rows:
            print("  " + "  ".join(str(c) for c in r if c))
        return
    if args.what == "estimate":
        from tools.bench_estimate import bench_estimate
        with tempfile.TemporaryDirectory(prefix="djx-bench-") as tmp:
            rows = bench_estimate(Path(tmp), args.sizes, args.limit)
        for r in rows:
            print("  " + "  ".join(str(c) for c in r if c))
        return
    with tempfile.TemporaryDirectory(prefix="djx-bench-") as tmp:
        work = Path(tmp)
        if not args.skip_core:
            rows += bench_core(work, args.quick)
            rows += bench_model_memory(work, args.quick)
        if not args.skip_models:
            rows.append(bench_model("clip", work, 32 if args.quick else 64, 32, args.dtype))
            rows.append(bench_model("blip", work, 8 if args.quick else 16, 8, args.dtype))
        rows.append(bench_shared_model(work))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    print(f"djx bench on {psutil.cpu_count()} cores ({'quick' if args.quick else 'full'})")
    for r in rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
