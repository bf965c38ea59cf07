"""The dedup phase's whole-dataset part at scale: synthetic signatures fed straight to each deduplicator's
index, through the API the phase's DuplicateFinder calls (`add` for every sample, then `kept_for`).

    python tools/bench_dedup_scale.py [--n 1000000,10000000] [--kinds exact,minhash,simhash]
                                      [--budgets default,200000] [--work DIR] [--engines local,ray]
    python tools/bench_dedup_scale.py --full [--n ...] [--kinds ...] [--np CORES] [--work DIR]
        the whole phase through `djx process` on generated texts instead: tools/bench_dedup_phase.py

Each case (kind, n, budget) runs in its own process, so each peak is its own. The index is the op's
own (`document_deduplicator`, `document_minhash_deduplicator`, `document_simhash_deduplicator`, default
parameters: 25 bands of 10 rows; 6 blocks, distance 4), in an IndexSpace with a state folder under
--work and the given budget (rows in memory; `default` is the recipe's dedup_memory_entries).
Data, generated a chunk at a time (never held whole), 10% planted duplicates, each of an earlier
original drawn at random:
  exact    md5 hex digests of a sample id; a duplicate repeats an original's id.
  minhash  25 band digests (16 hex digits each), random for an original; a near duplicate shares 1
           to 5 of its original's bands (the rest random).
  simhash  a random 64-bit signature; a near duplicate flips 1 to 4 of its original's bits.
Reported per case: wall seconds of the index (adding, joining the groups, asking every sample) and
of each step, the stats' generation apart (done twice: for the adds and for the asks), peak USS and PSS of the process (sampled every 0.2 s by core.plan.resources.PeakUss) and
its USS before the first add, peak disk of the spill files (the state folder sampled, and at the end
of the adds), and the duplicates found against the planted count (planted ones missed, and the
first ten found that were not planted, with how alike they are). Random originals may also meet
by chance (simhash: two of 10 million random signatures within 4 bits, about 2 expected).
--engines ray: the groups formed on Ray Data as under `executor: ray` (core/executors/ray/dedup_rows.py:
the rows go to the object store in blocks of the budget's rows); the case's process starts a local Ray
(`connect_s`, apart from the wall) or joins RAY_ADDRESS, and its peak USS is the driver's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHUNK = 20_000
SHARE = 10  # every 10th sample (from the 20th on) is a planted duplicate


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64: a deterministic random 64-bit number for each input."""
    x = (x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _plan(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is a planted duplicate, the original it copies: an earlier position that is not one)."""
    dup = (pos % SHARE == SHARE - 1) & (pos >= 2 * SHARE)
    blocks = np.maximum(pos // SHARE, 1).astype(np.uint64)
    source = (_mix(pos * 3 + 1) % blocks).astype(np.int64) * SHARE + (_mix(pos * 3 + 2) % np.uint64(SHARE - 1)).astype(np.int64)
    return dup, np.where(dup, source, pos)


def planted(n: int) -> int:
    return int(_plan(np.arange(n))[0].sum())


def exact_chunk(pos: np.ndarray) -> list[dict]:
    _, origin = _plan(pos)
    return [{"__dj__hash": hashlib.md5(b"%d" % o).hexdigest()} for o in origin.tolist()]


def minhash_chunk(pos: np.ndarray, bands: int = 25) -> list[dict]:
    dup, origin = _plan(pos)
    grid = np.arange(bands, dtype=np.uint64)
    own = _mix(pos.astype(np.uint64)[:, None] * np.uint64(bands) + grid + np.uint64(1 << 40))
    copied = _mix(origin.astype(np.uint64)[:, None] * np.uint64(bands) + grid + np.uint64(1 << 40))
    shared = 1 + (_mix(pos * 7 + 5) % np.uint64(5)).astype(np.int64)  # bands copied: the first 1 to 5
    take = dup[:, None] & (np.arange(bands)[None, :] < shared[:, None])
    text = np.where(take, copied, own).astype(">u8").tobytes().hex()
    width = 16 * bands
    return [{"__dj__minhash": text[i * width:(i + 1) * width]} for i in range(len(pos))]


def simhash_chunk(pos: np.ndarray) -> list[dict]:
    dup, origin = _plan(pos)
    sig = _mix(origin.astype(np.uint64) + np.uint64(1 << 50))
    flips = np.zeros(len(pos), dtype=np.uint64)
    for k in range(4):  # 1 to 4 distinct-or-repeated bit flips (a repeat undoes nothing: XOR of masks)
        bit = np.uint64(1) << (_mix(pos * 11 + k) % np.uint64(64))
        flips |= np.where(dup & ((k == 0) | (_mix(pos * 13 + k) % np.uint64(2) == 1)), bit, np.uint64(0))
    return [{"__dj__simhash": str(s)} for s in (sig ^ flips).tolist()]


KINDS = {"exact": ("document_deduplicator", exact_chunk),
         "minhash": ("document_minhash_deduplicator", minhash_chunk),
         "simhash": ("document_simhash_deduplicator", simhash_chunk)}


def _folder_bytes(folder: str) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(folder) if e.is_file())
    except OSError:
        return 0


def _uss_parts() -> tuple[int, int]:
    """(USS of this process, of it the pages of Ray's object store mappings, /dev/shm/plasma*: blocks
    this process put there that no other process has mapped yet count as its own), in bytes."""
    total = store = 0
    in_store = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 6)
            if "-" in head[0] and len(head) >= 5:  # a mapping's first line
                in_store = len(head) > 5 and "plasma" in head[5]
            elif head[0] in ("Private_Clean:", "Private_Dirty:"):
                total += int(head[1]) * 1024
                store += int(head[1]) * 1024 if in_store else 0
    return total, store


def run_case(kind: str, n: int, budget: int, work: str, engine: str = "local") -> dict:
    try:
        from djx.core.dedup.key_rows import IndexSpace
    except ImportError:  # djx before KeyRows (a baseline run from an older checkout on PYTHONPATH)
        from djx.core.dedup.first_positions import IndexSpace
    from djx.core.op.registry import build_op
    from djx.core.plan.resources import PeakUss

    name, chunk = KINDS[kind]
    folder = tempfile.mkdtemp(prefix=f"state-{kind}-", dir=work)
    op = build_op(name, {})
    peak_disk = [0]
    stop = threading.Event()

    own = [0, 0]  # peak USS outside Ray's object store, and the store's pages at that peak of USS

    def watch_disk():
        while not stop.wait(0.5):
            peak_disk[0] = max(peak_disk[0], _folder_bytes(folder))
            if engine == "ray":
                total, store = _uss_parts()
                own[0] = max(own[0], total - store)
                own[1] = max(own[1], store)
    threading.Thread(target=watch_disk, daemon=True).start()
    cluster, connect_s = None, 0.0
    if engine == "ray":
        from djx.core.executors.ray.dedup_rows import RayGroups
        cluster = RayGroups(os.environ.get("RAY_ADDRESS"))
        session = cluster.session()
        session.__enter__()
        a = time.perf_counter()
        cluster.ray()
        connect_s = time.perf_counter() - a
    memory = PeakUss(every_s=0.2)
    start_uss = memory.now().uss
    space = IndexSpace(folder, budget, cluster)
    index = op.index(space)
    spent = {"generate": 0.0, "add": 0.0, "join": 0.0, "ask": 0.0}
    for lo in range(0, n, CHUNK):
        a = time.perf_counter()
        stats = chunk(np.arange(lo, min(n, lo + CHUNK)))
        b = time.perf_counter()
        for i, s in enumerate(stats):
            index.add(lo + i, s)
        spent["generate"] += b - a
        spent["add"] += time.perf_counter() - b
    peak_disk[0] = max(peak_disk[0], _folder_bytes(folder))
    a = time.perf_counter()
    index.kept_for(0, chunk(np.arange(1))[0])  # the first answer joins the groups
    spent["join"] = time.perf_counter() - a
    found, unplanted, missed = 0, [], 0
    for lo in range(0, n, CHUNK):
        stats = chunk(np.arange(lo, min(n, lo + CHUNK)))
        a = time.perf_counter()
        kept = [index.kept_for(lo + i, s) for i, s in enumerate(stats)]
        spent["ask"] += time.perf_counter() - a
        dup = _plan(np.arange(lo, lo + len(kept)))[0]
        for i, k in enumerate(kept):
            found += k != lo + i
            missed += bool(dup[i]) and k == lo + i
            if k != lo + i and not dup[i] and len(unplanted) < 10:
                unplanted.append((lo + i, k, _distance(kind, chunk, lo + i, k)))
    wall = spent["add"] + spent["join"] + spent["ask"]  # the index's own time, generation apart
    index.close()
    stop.set()
    m = memory.now()
    if cluster is not None:
        session.__exit__(None, None, None)
    left = os.listdir(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return {"kind": kind, "n": n, "budget": budget, "engine": engine, "wall_s": round(wall, 1),
            "connect_s": round(connect_s, 1), "events": cluster.events if cluster else {},
            "own_uss_mb": round(own[0] / 2**20), "store_uss_mb": round(own[1] / 2**20),
            **{f"{k}_s": round(v, 1) for k, v in spent.items()},
            "start_uss_mb": round(start_uss / 2**20), "peak_uss_mb": round(m.peak / 2**20),
            "peak_pss_mb": round(m.peak_pss / 2**20), "peak_disk_mb": round(peak_disk[0] / 2**20),
            "duplicates": found, "planted": planted(n), "missed": missed, "unplanted": unplanted,
            "files_left": len(left)}


def _distance(kind: str, chunk, a: int, b: int):
    """How alike two samples found duplicates by chance are: bits apart (simhash), bands shared (minhash)."""
    sa, sb = (next(iter(chunk(np.array([p]))[0].values())) for p in (a, b))
    if kind == "simhash":
        return f"{(int(sa) ^ int(sb)).bit_count()} bits apart"
    if kind == "minhash":
        return f"{sum(sa[i:i + 16] == sb[i:i + 16] for i in range(0, len(sa), 16))} bands shared"
    return "equal" if sa == sb else "different"


def main() -> None:
    if "--full" in sys.argv[1:]:
        sys.path.insert(0, str(REPO))
        from tools.bench_dedup_phase import main as full
        return full([a for a in sys.argv[1:] if a != "--full"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", default="1000000")
    parser.add_argument("--kinds", default="exact,minhash,simhash")
    parser.add_argument("--budgets", default="default,200000")
    parser.add_argument("--work", default=None, help="where the state folders go (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds a case may take")
    parser.add_argument("--engines", default="local", help="local, ray or both (local,ray)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # kind:n:budget:engine, run in this process
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="djx-bench-dedup-scale-")
    os.makedirs(work, exist_ok=True)
    if args.case:
        kind, n, budget, engine = args.case.split(":")
        print(json.dumps(run_case(kind, int(n), int(budget), work, engine)))
        return
    from djx.core.recipe.recipe import Recipe
    DEFAULT_BUDGET = Recipe.__dataclass_fields__["dedup_memory_entries"].default
    budgets = [DEFAULT_BUDGET if b == "default" else int(b) for b in args.budgets.split(",")]
    print(f"{'engine':6} {'kind':8} {'n':>10} {'budget':>9} {'wall s':>7} {'gen':>6} {'add':>6} {'join':>6} {'ask':>6} "
          f"{'USS0 MB':>8} {'peak USS':>9} {'peak PSS':>9} {'disk MB':>8} {'found':>9} {'planted':>9}", flush=True)
    for n in (int(x) for x in args.n.split(",")):
        for kind in args.kinds.split(","):
            for budget, engine in ((b, e) for b in budgets for e in args.engines.split(",")):
                try:
                    out = subprocess.run([sys.executable, __file__, "--case", f"{kind}:{n}:{budget}:{engine}", "--work", work],
                                         capture_output=True, text=True, timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"{engine:6} {kind:8} {n:>10,} {budget:>9,} more than {args.timeout:.0f} s: stopped", flush=True)
                    continue
                if out.returncode:
                    print(f"{engine} {kind} {n} {budget}: failed\n{out.stderr[-2000:]}", flush=True)
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{engine:6} {kind:8} {n:>10,} {budget:>9,} {r['wall_s']:>7} {r['generate_s']:>6} {r['add_s']:>6} "
                      f"{r['join_s']:>6} {r['ask_s']:>6} {r['start_uss_mb']:>8} {r['peak_uss_mb']:>9} "
                      f"{r['peak_pss_mb']:>9} {r['peak_disk_mb']:>8} {r['duplicates']:>9,} {r['planted']:>9,}"
                      + (f"  {r['files_left']} files left!" if r["files_left"] else "")
                      + (f"  missed {r['missed']}" if r["missed"] else "")
                      + "".join(f"  not planted: {p} ~ {k} ({how})" for p, k, how in r["unplanted"])
                      + (f"  connect {r['connect_s']} s; peak USS outside the object store {r['own_uss_mb']} MB, "
                         f"store pages {r['store_uss_mb']} MB; {r['events']}" if engine == "ray" else ""), flush=True)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
