"""Where `image_decode: device` spends its time on a GPU, part by part (run by tools/gpu_session.sh).

    python tools/gpu_decode_probe.py [--n 256]

On n photo-like 640x480 JPEGs (bench_throughput's): torchvision's batched nvJPEG decode from one
thread and from four at once (does it scale with host threads, or hold the GIL?), the Pillow-exact
resize and crop to CLIP's 224 px for the batch in one pass (ops/common/device_decode.resize_all)
and one image at a time (the old path), each timed after a warm-up with the device synchronised.
Prints images/s per part: the scorer's `device_decode` phase is their sum.
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path


def timed_rate(n: int, fn, reps: int = 3) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return n * reps / (time.perf_counter() - t0)


def main() -> None:
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    from djx.ops.common import device_decode
    from djx.tools.bench_throughput import write_photos
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    n = ap.parse_args().n
    geo = {"shortest_edge": 224, "height": None, "width": None, "crop": (224, 224)}
    with tempfile.TemporaryDirectory() as tmp:
        write_photos(Path(tmp), n)
        files = sorted(p for p in Path(tmp).rglob("*.jpg"))[:n]
        raw = [torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8) for p in files]
    n = len(raw)

    def decode(part=raw):
        return decode_jpeg(part, mode=ImageReadMode.RGB, device="cuda:0", apply_exif_orientation=True)

    one = timed_rate(n, decode)
    quarters = [raw[k::4] for k in range(4)]

    def four_threads():
        threads = [threading.Thread(target=decode, args=(q,)) for q in quarters]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    four = timed_rate(n, four_threads)
    images = list(decode())
    batched = timed_rate(n, lambda: device_decode.resize_all(images, geo))
    single = timed_rate(n, lambda: [device_decode._resize(im, geo) for im in images], reps=1)
    print(f"device decode of {n} 640x480 JPEGs: nvJPEG batched, one thread {one:,.0f} images/s; "
          f"four threads {four:,.0f} images/s; resize + crop to 224: batched {batched:,.0f} images/s, "
          f"one image at a time {single:,.0f} images/s; together (one thread, batched) "
          f"{1 / (1 / one + 1 / batched):,.0f} images/s")


if __name__ == "__main__":
    main()
