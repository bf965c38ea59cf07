"""djx side by side with Data-Juicer on its deduplicators, on the same generated data.

    python tools/bench_dedup.py [--n 100000] [--images 20000] [--np CORES] [--only djx|dj]
                                [--cases exact,minhash,phash] [--work DIR] [--dj-venv /work/dj-venv]

Cases, each op with its default parameters, each tool as its own command (`djx process`,
`dj-process`), so imports, start-up and export count on both sides:
  exact    document_deduplicator over n documents (3 to 10 captions of tools/bench_text.py each):
           about 80% distinct, 12% exact copies of an earlier document, 3% copies with leading or
           trailing whitespace (the same md5 after strip), 3% in another case, 2% with a doubled space
           inside (the last two are not duplicates with the defaults: both tools must keep them).
  minhash  document_minhash_deduplicator (space shingles of 5, 256 permutations, threshold 0.7) over
           the same n documents plus n/10 near copies (1 to 3 words of a 30+ word document changed,
           or a sentence appended), appended after them.
  phash    image_deduplicator (phash) over m one-image samples: 256-px photo-like JPEGs
           (tools/dj_fixtures/dedup.py's photo, drawn at 128 px and scaled up), about 85% distinct,
           then copies: the same file again, re-encoded at quality 60, resized to 200 px, and
           brightened (a different picture to phash: kept by both).
Reported per case: wall seconds, samples/s, CPU seconds (user + system of each tool's whole tree,
which a busy machine shifts far less than the wall), peak PSS of each tool's process tree (tools/bench.py's
TreeMemory through tools/bench_dj.py's _timed), djx/Data-Juicer ratios, and whether both kept the
same set of sample ids; then where each tool's time went (djx's summary, Data-Juicer's log).
Data-Juicer runs offline with imagededup's torchvision stand-in (../shared/anchors/stubs) on its
PYTHONPATH. The data is written once per --work folder and reused by later runs with the same sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
STUBS = REPO.parent / "shared" / "anchors" / "stubs"
CASES = {"exact": ("document_deduplicator", "texts"),
         "minhash": ("document_minhash_deduplicator", "near"),
         "phash": ("image_deduplicator", "images")}
DJ = "Data-Juicer 1.6.1"


def _document(rng: random.Random) -> str:
    from tools.bench_text import caption
    return ". ".join(caption(rng) for _ in range(rng.randint(3, 10)))


def _exact_copy(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.6:
        return text
    if roll < 0.75:  # stripped before hashing: a duplicate
        return rng.choice((" ", "\n", "  ", "\t")) + text + rng.choice(("", " ", "\n"))
    if roll < 0.9:  # case: not a duplicate with lowercase false
        return rng.choice((text.upper(), text.title(), text.capitalize()))
    words = text.split(" ")  # a doubled space inside: not a duplicate either
    i = rng.randrange(len(words))
    return " ".join(words[:i]) + "  " + " ".join(words[i:])


def _near_copy(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    if rng.random() < 0.3:
        return text + " " + _document(rng).split(". ")[0]
    for i in rng.sample(range(len(words)), rng.randint(1, 3)):
        words[i] = rng.choice(("photo", "image", "picture", "view", "scene", str(rng.randint(1, 9999))))
    return " ".join(words)


def _write_jsonl(path: Path, rows) -> Path:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.rename(path)  # a run stopped while writing leaves no file to reuse
    return path


def write_texts(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    """texts-N.jsonl (n documents, ~20% exact-duplicate candidates) and near-N.jsonl (the same plus
    n/10 near copies of long documents after them)."""
    exact, near = folder / f"texts-{n}.jsonl", folder / f"near-{n}.jsonl"
    if exact.exists() and near.exists():
        return exact, near
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(n):
        texts.append(_exact_copy(rng, rng.choice(texts)) if texts and rng.random() < 0.2 else _document(rng))
    rows = [{"id": i, "text": t} for i, t in enumerate(texts)]
    _write_jsonl(exact, rows)
    long = [t for t in texts if len(t.split(" ")) >= 30]
    extra = [{"id": n + k, "text": _near_copy(rng, rng.choice(long))} for k in range(n // 10)]
    _write_jsonl(near, rows + extra)
    return exact, near


def _photo(job: tuple[int, str]) -> None:
    from PIL import Image

    from tools.dj_fixtures.dedup import photo
    seed, path = job
    photo(seed, (128, 128)).resize((256, 256), Image.BICUBIC).save(path, quality=90)


def _copy(job: tuple[str, str, str]) -> None:
    from PIL import Image
    kind, src, dst = job
    img = Image.open(src).convert("RGB")
    if kind == "quality":
        img.save(dst, quality=60)
    elif kind == "resized":
        img.resize((200, 200), Image.LANCZOS).save(dst, quality=90)
    else:  # brightened: another picture to phash
        Image.eval(img, lambda v: min(255, v + 60)).save(dst, quality=90)


def write_images(folder: Path, m: int, procs: int, seed: int = 0) -> Path:
    """images-M/data.jsonl: m one-image samples (absolute paths), ~15% of them copies of earlier ones."""
    from multiprocessing import Pool
    root = folder / f"images-{m}"
    data = root / "data.jsonl"
    if data.exists():
        return data
    (root / "img").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths, originals, copies = [], [], []
    for i in range(m):
        if originals and rng.random() < 0.15:
            kind, src = rng.choice(("same", "quality", "resized", "bright")), rng.choice(originals)
            if kind == "same":
                paths.append(src)
                continue
            dst = str(root / "img" / f"{i}_{kind}.jpg")
            copies.append((kind, src, dst))
            paths.append(dst)
        else:
            paths.append(str(root / "img" / f"{i}.jpg"))
            originals.append(paths[-1])
    with Pool(procs) as pool:
        pool.map(_photo, [(int(p.rsplit("/", 1)[1].split(".")[0]), p) for p in originals], chunksize=64)
        pool.map(_copy, copies, chunksize=64)
    return _write_jsonl(data, ({"id": i, "text": f"<__dj__image> photo {i}", "images": [p]}
                               for i, p in enumerate(paths)))


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children and theirs: a command's
    whole tree once it has exited (each tool joins its workers), the measure a busy machine shifts least."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_djx(case: Path, data: Path, op: str, np_: int) -> tuple[float, int, Path, float]:
    from tools.bench_dj import OFFLINE, _timed
    out = case / "djx_out" / "o.jsonl"
    recipe = case / "djx.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(out), "np": np_,
                                  "process": [{op: {}}]}))
    cpu = children_cpu()
    wall, pss = _timed([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                       {**os.environ, **OFFLINE}, case / "djx.log")
    return wall, pss, out, children_cpu() - cpu


def run_dj(case: Path, dj_venv: Path, data: Path, op: str, np_: int, stubs: Path) -> tuple[float, int, Path, float]:
    from tools.bench_dj import OFFLINE, _dj_export, _timed
    dj_process = dj_venv / "bin" / "dj-process"
    if not dj_process.exists():
        sys.exit(f"{dj_process} not found: install Data-Juicer with ../shared/anchors/dj_install.sh "
                 "and dj_dedup_extras.sh")
    out = case / "dj_out"
    recipe = case / "dj.yaml"
    recipe.write_text(json.dumps({
        "project_name": "bench_dedup", "dataset_path": str(data), "export_path": str(out / "dj.jsonl"),
        "np": np_, "work_dir": str(case / "dj_work"), "skip_op_error": False, "op_fusion": False,
        "use_cache": False, "open_monitor": False, "open_tracer": False, "keep_stats_in_res_ds": True,
        "process": [{op: {}}]}))
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(stubs)}  # imagededup's torchvision stand-in only
    cpu = children_cpu()
    wall, pss = _timed([str(dj_process), "--config", str(recipe)], env, case / "dj.log")
    return wall, pss, _dj_export(out), children_cpu() - cpu


def kept_ids(path: Path) -> set:
    from tools.bench_text import kept
    return set(kept(path))


def where_time_went(case: Path, results: dict) -> str:
    """djx: start-up, the streaming pass (hashing) and the end (the dedup phase, outputs) from its
    summary; Data-Juicer: its log's per-op seconds (hashing and grouping)."""
    parts = []
    if "djx" in results:
        summary = json.loads(results["djx"][2].with_suffix(".summary.json").read_text())
        t, (op,) = summary.get("timing", {}), summary["ops"]
        parts.append(f"djx start-up {t.get('startup_seconds', 0):.1f} s, streaming pass "
                     f"{t.get('processing_seconds', 0):.1f} s (the op {op['seconds']:.1f} s summed over "
                     f"{summary.get('workers')} workers), end (dedup phase, outputs) {t.get('end_seconds', 0):.1f} s; "
                     f"the rest of its {results['djx'][0]:.1f} s wall: interpreter, imports, plan, exit")
    if DJ in results:
        log = (case / "dj.log").read_text(encoding="utf-8", errors="replace")
        ops = [f"{m[1]} {float(m[2]):.1f} s" for m in re.finditer(r"OP \[(\w+)\] Done in ([\d.]+)s", log)]
        parts.append("DJ " + (", ".join(ops) or "no op timing in its log"))
    return "; ".join(parts)


def table(rows: list[tuple]) -> list[str]:
    from tools.bench import mb
    head = ["case", "samples", "djx s", "DJ s", "djx samples/s", "DJ samples/s", "speed djx/DJ",
            "djx CPU s", "DJ CPU s", "CPU DJ/djx", "djx peak PSS", "DJ peak PSS", "PSS djx/DJ", "same kept set"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, n, results in rows:
        d, j = results.get("djx"), results.get(DJ)
        cell = lambda r, f: f(r) if r else "-"  # noqa: E731
        same = "-"
        if d and j:
            ours, theirs = kept_ids(d[2]), kept_ids(j[2])
            same = f"{'yes' if ours == theirs else 'no'} (djx {len(ours):,}, DJ {len(theirs):,})"
        elif d or j:
            same = f"kept {len(kept_ids((d or j)[2])):,}"
        lines.append("| " + " | ".join([
            name, f"{n:,}", cell(d, lambda r: f"{r[0]:.1f}"), cell(j, lambda r: f"{r[0]:.1f}"),
            cell(d, lambda r: f"{n / r[0]:,.0f}"), cell(j, lambda r: f"{n / r[0]:,.0f}"),
            f"{j[0] / d[0]:.2f}x" if d and j else "-",
            cell(d, lambda r: f"{r[3]:.1f}"), cell(j, lambda r: f"{r[3]:.1f}"),
            f"{j[3] / d[3]:.2f}x" if d and j else "-",
            cell(d, lambda r: mb(r[1])), cell(j, lambda r: mb(r[1])),
            f"{d[1] / j[1]:.2f}x" if d and j else "-", same]) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="documents (default 100000)")
    ap.add_argument("--images", type=int, default=20_000, help="one-image samples (default 20000)")
    ap.add_argument("--np", type=int, default=psutil.cpu_count(logical=True) or 1, help="workers (default: cores)")
    ap.add_argument("--only", choices=["djx", "dj"], help="run one tool only")
    ap.add_argument("--cases", default="exact,minhash,phash", help="comma-separated: exact, minhash, phash")
    ap.add_argument("--work", type=Path, help="work folder, kept (its data is reused); default: a temporary one")
    ap.add_argument("--dj-venv", type=Path, default=Path("/work/dj-venv"), help="a venv with Data-Juicer 1.6.1")
    ap.add_argument("--dj-stubs", type=Path, default=STUBS, help="imagededup's torchvision stand-in")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if unknown := set(cases) - CASES.keys():
        ap.error(f"unknown case(s) {sorted(unknown)}; choose from {sorted(CASES)}")
    work = (args.work or Path(tempfile.mkdtemp(prefix="djx-bench-dedup-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        data = {}
        if {"exact", "minhash"} & set(cases):
            data["texts"], data["near"] = write_texts(work, args.n, args.seed)
        if "phash" in cases:
            data["images"] = write_images(work, args.images, args.np, args.seed)
        from djx.core.plan.resources import uss_pss_bytes
        from tools.bench import mb
        own, load0 = uss_pss_bytes(os.getpid())[1], os.getloadavg()
        rows, notes = [], []
        for name in cases:
            op, kind = CASES[name]
            case = work / f"{name}-{args.n if kind != 'images' else args.images}"
            shutil.rmtree(case, ignore_errors=True)
            case.mkdir()
            n = sum(1 for _ in open(data[kind], encoding="utf-8"))
            results = {}
            if args.only in (None, "djx"):
                results["djx"] = run_djx(case, data[kind], op, args.np)
            if args.only in (None, "dj"):
                results[DJ] = run_dj(case, args.dj_venv.resolve(), data[kind], op, args.np, args.dj_stubs.resolve())
            rows.append((f"{name} ({op})", n, results))
            notes.append(f"{name}: {where_time_went(case, results)}")
        load = os.getloadavg()
        print(f"np={args.np}, {psutil.cpu_count()} cores, load average (1/5/15 min) "
              f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} at the start, {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} "
              f"at the end; each tree's PSS includes this script's own ({mb(own)} before the runs); "
              f"speed djx/DJ = DJ wall / djx wall; CPU: user + system seconds of each tree")
        print("\n".join(table(rows)))
        for name, _, results in rows:
            if "djx" in results and DJ in results:
                ours, theirs = kept_ids(results["djx"][2]), kept_ids(results[DJ][2])
                same = "yes" if ours == theirs else "no"
                print(f"{name}: same kept set: {same} (djx {len(ours):,}, DJ {len(theirs):,})"
                      + ("" if ours == theirs else f"; only djx kept {len(ours - theirs):,}, "
                                                   f"only DJ kept {len(theirs - ours):,}"))
        print("where the time went:\n" + "\n".join("  " + line for line in notes))
    finally:
        if args.work:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
