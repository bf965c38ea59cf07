"""The scorer's own cost: CPU time per 1,000 pairs apart from the forward.

    python tools/bench_scorer.py [--clients 4] [--batches 60]

A real scorer (the device's weight owner process, on the CPU) serves `clients` worker processes,
each sending `batches` prepared CLIP batches of 32 pairs as a preparing worker does, through the
same client, socket and shared buffers: first with 224-px uint8 pixels and their value table (the
host's decode), then with 64 KB of bytes in place of each JPEG file (`image_decode: device`: the
device decodes; the simulated device decodes nothing), each with short token lists. Its op is the simulated device at zero cost (tools/simulated_device.py), so what the
scorer process spends is what it does around a forward: receive, unpack, join, split, answer.
Target: <= 20 ms of scorer CPU per 1,000 pairs (>= 50,000 pairs/s on one core).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN = str(REPO / "tools" / "simulated_device.py")
TINY_CLIP = str(REPO / "tests" / "assets" / "models" / "tiny-clip")
PAIRS = 32
JPEG_BYTES = 64 << 10  # a 640x480 camera JPEG at quality 90 is 50-100 KB


def _op():
    from djx.core.op.registry import get_op_class, load_builtin_ops, load_custom_ops
    load_builtin_ops()
    load_custom_ops([PLUGIN])
    return get_op_class("simulated_device_clip_filter")(hf_clip=TINY_CLIP, min_score=0.0, seconds_per_pair=0.0)


def _prepared(seed: int, jpegs: bool, side: int = 224):
    import torch

    from djx.ops.common.prepared import PreparedPairs
    g = torch.Generator().manual_seed(seed)
    table = torch.rand(3, 256, generator=torch.Generator().manual_seed(0))  # one table for every batch
    tokens = [[49406, 320 + i % 50, 1125, 1936 + i, 49407] for i in range(PAIRS)]
    pairs = [(i, i) for i in range(PAIRS)]
    if jpegs:  # what prepare hands over under image_decode: device (the files' bytes, one tensor each)
        files = [torch.randint(0, 256, (JPEG_BYTES,), dtype=torch.uint8, generator=g) for _ in range(PAIRS)]
        return PreparedPairs(None, tokens, pairs, table, jpegs=files, jpeg_rows=list(range(PAIRS)),
                             jpeg_orientations=[1] * PAIRS)
    pixels = torch.randint(0, 256, (PAIRS, 3, side, side), dtype=torch.uint8, generator=g)
    return PreparedPairs(pixels, tokens, pairs, table)


def client(address, batches: int, jpegs: bool, ready, go) -> None:
    from djx.core.models.share.score_client import ScoreClient
    op = _op()
    scorer = ScoreClient(address, "cpu")
    prepared = [_prepared(s, jpegs) for s in range(4)]
    scorer.warm(op)
    ready.release()
    go.wait()
    for b in range(batches):
        scores = scorer.score(op, prepared[b % 4])
        assert len(scores) == PAIRS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batches", type=int, default=60)
    args = ap.parse_args()
    print(f"# bench_scorer: {args.clients} clients x {args.batches} batches of {PAIRS} pairs", flush=True)
    for jpegs, what in ((False, "224-px uint8 pixels"), (True, f"{JPEG_BYTES >> 10} KB a JPEG file (image_decode: device)")):
        result = measure(args.clients, args.batches, jpegs)
        print(f"{what}: scorer CPU {result['cpu_ms_per_1000']:.1f} ms per 1,000 pairs (target <= 20), "
              f"at {result['pairs_per_s']:,.0f} pairs/s offered by the clients", flush=True)


def measure(clients: int = 4, batches: int = 60, jpegs: bool = False) -> dict:
    import multiprocess as mp
    import psutil

    from djx.core.executors.process import main_importable
    from djx.core.models.share.folder import create_run_folder, remove_run_folder
    from djx.core.models.share.gpu_owner import WeightOwners
    ctx = mp.get_context("spawn")
    folder = create_run_folder()
    owners = WeightOwners((PLUGIN,), str(REPO), lambda m: None, main_importable, threads=1)
    try:
        address = owners.start(folder, ["cpu"])["cpu"]
        ready, go = ctx.Semaphore(0), ctx.Event()
        procs = [ctx.Process(target=client, args=(address, batches, jpegs, ready, go), daemon=True) for _ in range(clients)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.acquire()  # every client connected and its op's model loaded in the scorer
        scorer = psutil.Process(owners.procs["cpu"].pid)
        cpu0, t0 = sum(scorer.cpu_times()[:2]), time.perf_counter()
        go.set()
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise SystemExit(f"a client failed (exit code {p.exitcode})")
        wall, cpu = time.perf_counter() - t0, sum(scorer.cpu_times()[:2]) - cpu0
    finally:
        owners.stop()
        remove_run_folder(folder)
    pairs = clients * batches * PAIRS
    return {"cpu_ms_per_1000": 1000.0 * cpu / pairs * 1000, "pairs_per_s": pairs / wall}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO.parent))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
