"""The dedup phase at scale through a real run: `djx process` on N generated one-line texts with
planted copies, each deduplicator alone, its JSON parts written, read back and rewritten.

    python tools/bench_dedup_phase.py [--n 1000000] [--kinds exact,minhash,simhash] [--np CORES]
                                      [--work DIR] [--keep-data]
    (also: python tools/bench_dedup_scale.py --full ...)

Data (data-N.jsonl under --work, written once, reused, removed at the end unless --keep-data): one
line a sample, `{"id": i, "text": ...}`, 20 to 30 words of a 4,096-word made-up vocabulary (about
190 bytes a line). Every 10th sample (from the 20th on) is a copy of an earlier original, each
original copied at most once (so copies never meet each other), in one of five ways:
  same      the original's text              a duplicate for all three ops
  stripped  a space before and after         all three (the exact op strips the text)
  case      upper-cased                      MinHash and SimHash (lowercase true), not exact
  spacing   a doubled space inside           MinHash and SimHash (space tokens), not exact
  appended  one more word at the end         MinHash (Jaccard >= 0.94: LSH misses ~1e-8), not
                                             planted for SimHash (a shingle more moves ~6 bits)
Reported per case (one `djx process` run, np workers, default dedup_memory_entries): wall seconds
of the command; the summary's start-up, streaming pass (processing) and end (the dedup phase, the
check, the outputs) seconds; peak USS and PSS of the run's whole process tree (sampled every 0.2 s
with uss_pss_bytes, the helper tools/bench.py's TreeMemory uses), and of its main process alone,
each also while the workers lived (the streaming pass), after the last worker left (the dedup
phase, the check) and for the end alone (the summary's end_seconds before the command's exit); the state
folder's and the outputs' peak disk (sampled every 0.5 s); the duplicates found (from the dropped
output's reasons `duplicate of <position>`) against the planted ones, those missed, and found ones
that were not planted (by variant: SimHash's `appended` copies it joins anyway).
Wall times are noisy on a shared machine: quote the ratios between cases of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tools.bench import Sampler  # noqa: E402
from tools.bench_dedup_scale import _mix  # noqa: E402

SHARE = 10
CHUNK = 50_000
VARIANTS = ("same", "stripped", "case", "spacing", "appended")
KINDS = {"exact": ("document_deduplicator", {"same", "stripped"}),
         "minhash": ("document_minhash_deduplicator", set(VARIANTS)),
         "simhash": ("document_simhash_deduplicator", {"same", "stripped", "case", "spacing"})}


def _vocab(size: int = 4096) -> list[str]:
    """Made-up words of 2 to 4 consonant-vowel syllables (distinct, deterministic)."""
    cons, vows = "bcdfghklmnprstvz", "aeiou"
    words, i = [], 0
    while len(words) < size:
        x = int(_mix(np.array([i], dtype=np.uint64))[0])
        syll = 2 + x % 3
        w = "".join(cons[(x >> (4 + 8 * s)) % 16] + vows[(x >> (8 + 8 * s)) % 5] for s in range(syll))
        if w not in words:
            words.append(w)
        i += 1
    return words


def plan(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(is a copy, its original, its variant index) for each position. The copy at 10b+9 copies
    10*(b//2) + 1 + b%2: earlier, never a copy itself, and no original is copied twice."""
    pos = pos.astype(np.int64)
    copy = (pos % SHARE == SHARE - 1) & (pos >= 2 * SHARE)
    b = pos // SHARE
    origin = np.where(copy, SHARE * (b // 2) + 1 + b % 2, pos)
    variant = (_mix(pos * 5 + 3) % np.uint64(len(VARIANTS))).astype(np.int64)
    return copy, origin, variant


def _words(pos: np.ndarray, vocab: list[str]) -> list[list[str]]:
    """20 to 30 words for each (original) position."""
    length = 20 + (_mix(pos.astype(np.uint64) * np.uint64(31) + np.uint64(7)) % np.uint64(11)).astype(np.int64)
    grid = _mix(pos.astype(np.uint64)[:, None] * np.uint64(64) + np.arange(30, dtype=np.uint64)[None, :]
                + np.uint64(1 << 44)) % np.uint64(len(vocab))
    return [[vocab[w] for w in row[:k]] for row, k in zip(grid.tolist(), length.tolist())]


def texts(pos: np.ndarray, vocab: list[str]) -> list[str]:
    copy, origin, variant = plan(pos)
    out = []
    for p, words, c, v in zip(pos.tolist(), _words(origin, vocab), copy.tolist(), variant.tolist()):
        name = VARIANTS[v] if c else "original"
        if name == "spacing":
            i = 1 + p % (len(words) - 1)
            out.append(" ".join(words[:i]) + "  " + " ".join(words[i:]))
        elif name == "appended":
            out.append(" ".join(words) + " " + vocab[p % len(vocab)])
        else:
            text = " ".join(words)
            out.append({"stripped": f" {text} ", "case": text.upper()}.get(name, text))
    return out


def write_data(work: Path, n: int) -> Path:
    path = work / f"data-{n}.jsonl"
    if path.exists():
        return path
    vocab, tmp = _vocab(), path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for lo in range(0, n, CHUNK):
            pos = np.arange(lo, min(n, lo + CHUNK))
            f.writelines(json.dumps({"id": p, "text": t}) + "\n" for p, t in zip(pos.tolist(), texts(pos, vocab)))
    tmp.rename(path)
    return path


def planted(n: int, kind: str) -> dict[str, int]:
    """Copies planted per variant (all variants: the duplicates an op must find are KINDS[kind][1]'s)."""
    counts = dict.fromkeys(VARIANTS, 0)
    for lo in range(0, n, 1 << 20):
        copy, _, variant = plan(np.arange(lo, min(n, lo + (1 << 20))))
        for v, c in zip(*np.unique(variant[copy], return_counts=True)):
            counts[VARIANTS[v]] += int(c)
    return counts


class TreeWatch(Sampler):
    """Every `every` s: USS and PSS of a process tree (its root alone too) and the bytes under some
    folders; keeps the peaks and a timeline of (time, tree USS, root USS)."""

    def __init__(self, pid: int, folders: list[Path], every: float = 0.2):
        super().__init__(every)
        self.root, self.folders = psutil.Process(pid), folders
        self.timeline: list[tuple] = []  # (t, tree uss, tree pss, root uss, root pss, processes)
        self.peak_disk = 0
        self._last_disk = 0.0

    def sample(self):
        from djx.core.plan.resources import uss_pss_bytes
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        sizes = [uss_pss_bytes(p.pid) for p in tree]
        if sizes[0] != (0, 0):
            self.timeline.append((time.perf_counter(), sum(u for u, _ in sizes), sum(p for _, p in sizes),
                                  *sizes[0], len(tree)))
        if time.perf_counter() - self._last_disk >= 0.5:
            self._last_disk = time.perf_counter()
            self.peak_disk = max(self.peak_disk, sum(_bytes_under(f) for f in self.folders))

    def peaks(self, since: float = float("-inf"), until: float = float("inf"), workers: bool | None = None) -> dict:
        """Peaks between two times; `workers`: only while the root had children (True) or after the
        last sample that saw them (False)."""
        last = max((r[0] for r in self.timeline if r[5] > 1), default=float("inf"))
        rows = [r for r in self.timeline if since <= r[0] < until and (workers is None or (r[5] > 1) == workers)
                and (workers is not False or r[0] > last)] or [(0,) * 6]
        return {k: max(r[i] for r in rows) for i, k in enumerate(("tree_uss", "tree_pss", "main_uss", "main_pss"), 1)}


def _bytes_under(folder: Path) -> int:
    total = 0
    try:
        for e in os.scandir(folder):
            try:
                total += _bytes_under(Path(e.path)) if e.is_dir(follow_symlinks=False) else e.stat().st_size
            except OSError:
                pass
    except OSError:
        pass
    return total


def found(dropped: Path, kind: str, op: str) -> dict:
    """The duplicates the run dropped, sorted into planted, missed and not planted (by variant)."""
    must = KINDS[kind][1]
    hit, unplanted = dict.fromkeys(VARIANTS, 0), {}
    total = wrong_kept = 0
    with open(dropped, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            drop = rec["__dj__drop__"]
            if drop["op"] != op or not drop["reason"].startswith("duplicate of "):
                continue
            total += 1
            p, k = rec["__dj__pos__"], int(drop["reason"].split()[-1])
            copy, origin, variant = (x[0] for x in plan(np.array([p])))
            name = VARIANTS[variant] if copy else "original"
            if copy and name in must:
                hit[name] += 1
                wrong_kept += int(origin) != k
            else:
                unplanted[name] = unplanted.get(name, 0) + 1
    return {"found": total, "hit": hit, "unplanted": unplanted, "wrong_kept": wrong_kept}


def run_case(work: Path, data: Path, kind: str, n: int, np_: int) -> dict:
    from tools.bench_dj import OFFLINE
    op, must = KINDS[kind]
    case = work / f"{kind}-{n}"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir()
    out = case / "out" / "o.jsonl"
    out.parent.mkdir()
    recipe = case / "recipe.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(out), "np": np_,
                                  "process": [{op: {}}]}))
    log = case / "djx.log"
    with open(log, "w") as logf:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                                env={**os.environ, **OFFLINE}, stdout=logf, stderr=subprocess.STDOUT)
        with TreeWatch(proc.pid, [out.parent]) as watch:
            rc = proc.wait()
        wall = time.perf_counter() - t0
    if rc:
        raise SystemExit(f"{kind} {n}: djx exited {rc}; its output ({log}):\n" + log.read_text()[-3000:])
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    timing = summary.get("timing", {})
    end_start = t0 + wall - timing.get("end_seconds", 0)
    result = {"kind": kind, "n": n, "np": np_, "wall_s": wall, "kept": summary["kept"], "dropped": summary["dropped"],
              "rejected": summary["rejected"], **{k: timing.get(k) for k in ("startup_seconds", "processing_seconds",
                                                                             "end_seconds")},
              "all": watch.peaks(), "stream": watch.peaks(workers=True), "after": watch.peaks(workers=False), "end": watch.peaks(end_start), "peak_disk": watch.peak_disk,
              "state_files": len(list(out.parent.glob(".*djx-state*/*"))),
              "outputs": {p.name: p.stat().st_size for p in out.parent.iterdir() if p.is_file()},
              "planted": {v: c for v, c in planted(n, kind).items() if v in must},
              "appended": planted(n, kind)["appended"],
              **found(out.with_suffix(".dropped.jsonl"), kind, op)}
    (case / "result.json").write_text(json.dumps(result, indent=1))
    shutil.rmtree(case, ignore_errors=True)
    return result


def line(r: dict) -> str:
    mb = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    plant = sum(r["planted"].values())
    missed = {v: r["planted"][v] - r["hit"][v] for v in r["planted"] if r["planted"][v] > r["hit"][v]}
    note = (f" missed {missed}" if missed else "") + (f" not planted {r['unplanted']}" if r["unplanted"] else "") \
        + (f" {r['wrong_kept']} naming another kept sample" if r["wrong_kept"] else "")
    return (f"| {r['kind']} | {r['n']:,} | {r['wall_s']:.0f} | {r['startup_seconds']:.1f} | {r['processing_seconds']:.0f} "
            f"| {r['end_seconds']:.0f} | {mb(r['all']['tree_uss'])} | {mb(r['all']['tree_pss'])} "
            f"| {mb(r['all']['main_uss'])} | {mb(r['stream']['tree_uss'])} | {mb(r['stream']['main_uss'])} "
            f"| {mb(r['after']['main_uss'])} | {mb(r['end']['tree_uss'])} | {mb(r['end']['main_uss'])} "
            f"| {mb(r['peak_disk'])} | {r['found']:,} / {plant:,}{note} |")


HEAD = ("| kind | n | wall s | start-up s | streaming s | end s | peak USS MB | peak PSS MB | main USS MB "
        "| workers alive: USS MB | main | after: main USS MB | end: USS MB | main | disk MB | found / planted |\n|"
        + "---|" * 16)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="1000000", help="samples, comma-separated for several")
    ap.add_argument("--kinds", default="exact,minhash,simhash")
    ap.add_argument("--np", type=int, default=psutil.cpu_count(logical=True) or 1, help="workers (default: cores)")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed at the end)")
    ap.add_argument("--keep-data", action="store_true", help="leave data-N.jsonl in --work for a later run")
    args = ap.parse_args(argv)
    work = (args.work or Path(tempfile.mkdtemp(prefix="djx-bench-dedup-phase-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := set(kinds) - KINDS.keys():
        ap.error(f"unknown kind(s) {sorted(unknown)}; choose from {sorted(KINDS)}")
    load0 = os.getloadavg()
    print(f"np={args.np}, {psutil.cpu_count()} cores, load {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} at the start",
          flush=True)
    print(HEAD, flush=True)
    try:
        for n in (int(x) for x in args.n.split(",")):
            t = time.perf_counter()
            data = write_data(work, n)
            gen = time.perf_counter() - t
            for kind in kinds:
                r = run_case(work, data, kind, n, args.np)
                print(line(r) + f"  <!-- data {data.stat().st_size / 2**20:,.0f} MB written in {gen:.0f} s; "
                      f"outputs {json.dumps(r['outputs'])}; kept {r['kept']:,} dropped {r['dropped']:,} "
                      f"rejected {r['rejected']:,}; state files left {r['state_files']} -->", flush=True)
            if not args.keep_data:
                data.unlink()
    finally:
        load = os.getloadavg()
        print(f"load {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} at the end", flush=True)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
