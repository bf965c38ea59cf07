"""Throughput of a model filter against the machine's limit, measured in one run.

    python tools/bench_throughput.py [--n 600] [--work DIR] [--full-clip] [--dtype float32|bfloat16] [--ray]

1. The per-core prepare limit: djx's own decode (Data-Juicer's pixels) of 640-px photo-like JPEGs
   plus the model's own processor (CLIP's 224-px resize, crop, normalise) and tokenizer, one thread,
   in batches of the forward size: L images/s.
2. djx end to end (image_text_similarity_filter, each sample its own image) with `np` unset (the
   planner's choice) and with np = cores: steady samples/s (the summary's, start-up excluded), as a
   ratio to cores x L. With a near-free model (a CLIP whose towers are tiny but whose processor is
   the real 224-px one) only reading, decoding and preprocessing cost anything, so the ratio says how
   much of the machine the execution shape uses. Target: >= 0.85 with np unset and with np = cores.
3. `--full-clip`: the same runs with full-size CLIP ViT-B/32 (random weights), plus the raw batched
   forward on pre-prepared tensors (all cores' threads): where the model, not the host, is the limit.
4. On a GPU (when torch sees one): the raw forward on pre-decoded tensors on the device, djx end to
   end on `cuda`, where one sample's time goes (read, decode, preprocess, transfer, forward), and the
   GPU's busy share during the djx run (nvidia-smi utilization, sampled).
5. With the simulated device: the share of its rate a run reaches (--only device), and the CPU per
   sample of the serial parts (main process, scorer) when the device decodes (tools/serial_ceiling.py).
   `--ray`: the simulated device on a local Ray too (stage actors prepare, a scoring actor scores).
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

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "assets" / "models"
FORWARD = 8
WARM_FORWARDS = 10  # before the raw forward is timed (1 warm-up measured an H100 at 1,474 pairs/s, not 12,457)


def write_photos(folder: Path, n: int, width: int = 640, height: int = 480, repeat: int = 1) -> Path:
    """n distinct photo-like JPEGs (smooth colour fields, edges and sensor-like noise: a camera
    JPEG's decode cost, not a flat synthetic one's), made on all cores, and a dataset naming each
    `repeat` times (n x repeat samples, each its own decode: a batch never names a photo twice)."""
    import multiprocessing as mp
    img_dir = folder / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(img_dir, i, width, height) for i in range(n)]
    with mp.get_context("fork").Pool(max(1, len(os.sched_getaffinity(0)))) as pool:
        pool.starmap(_write_photo, jobs, chunksize=max(1, n // 64))
    path = folder / "data.jsonl"
    with open(path, "w") as f:
        for k in range(n * repeat):
            i = k % n
            f.write(json.dumps({"id": k, "text": f"<__dj__image> photo number {i}", "images": [f"images/{i}.jpg"]}) + "\n")
    return path


def _write_photo(img_dir: Path, i: int, width: int, height: int) -> None:
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(i)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    a, b, c = rng.uniform(0.002, 0.03, 3)
    base = np.stack([np.sin(xx * a + i) * 80, np.cos(yy * b - i) * 80, np.sin((xx + yy) * c) * 80], -1) + 128
    base[(xx // 40 + yy // 40 + i) % 5 == 0] *= 0.6  # edges
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(img_dir / f"{i}.jpg", quality=90)


def save_clip(folder: Path, full: bool) -> Path:
    """A CLIP with the real 224-px image processor: full-size ViT-B/32 towers, or near-free ones."""
    import torch
    from transformers import AutoProcessor, CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor
    torch.manual_seed(0)
    out = folder / ("clip-b32" if full else "clip-near-free")
    if full:
        config = CLIPConfig()
    else:
        tiny = dict(hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
        config = CLIPConfig(text_config=dict(tiny, vocab_size=49408, max_position_embeddings=77),
                            vision_config=dict(tiny, image_size=224, patch_size=32), projection_dim=8)
    CLIPModel(config).save_pretrained(out)
    tok = AutoProcessor.from_pretrained(TINY / "tiny-clip").tokenizer  # its ids fit the full vocabulary
    CLIPProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok).save_pretrained(out)
    return out


def prepare_limit(model: Path, data: Path, n: int) -> float:
    """Images/s of one thread doing djx's decode + the model's processor and tokenizer."""
    import torch
    from djx.core.op.images import BatchImages
    from djx.ops.models import auto_processor
    torch.set_num_threads(1)
    proc = auto_processor(model)  # djx's: the Pillow backend
    samples = [json.loads(line) for line in open(data)][:n]
    images = BatchImages(str(data.parent), max_pixels=178956970)
    t0 = time.perf_counter()
    for i in range(0, len(samples), FORWARD):
        part = samples[i:i + FORWARD]
        rgb = [images.rgb(s["images"][0]) for s in part]
        proc.image_processor(rgb, return_tensors="pt")
        proc.tokenizer([s["text"] for s in part], padding=True, truncation=True, return_tensors="pt")
        images.close()
    return len(samples) / (time.perf_counter() - t0)


def djx_run(model: Path, data: Path, out: Path, np_: int | None, dtype: str = "float32",
            devices: list[str] | None = None, scoring: str | None = "workers", seconds_per_pair: float | None = None,
            image_decode: str | None = None, timeout: float | None = None, profile: Path | None = None,
            executor: str = "local") -> dict | None:
    """A `djx process` run in its own process (as a user runs it); its summary, or None when it did
    not finish within `timeout` seconds. `profile`: py-spy samples the run and its processes into
    this file (collapsed stacks, one line a stack, each rooted at its process); the rest: write_recipe."""
    recipe = write_recipe(model, data, out, np_, dtype, devices, scoring, seconds_per_pair, image_decode,
                          executor=executor)
    cmd = [sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"]
    if profile is not None:
        cmd = [shutil.which("py-spy") or "py-spy", "record", "--subprocesses", "--nonblocking", "--rate", "40",
               "--format", "raw", "--output", str(profile), "--"] + cmd
    # its own process group: a run past `timeout` is stopped with its workers and scorers (none
    # left holding cores or GPU memory for the next run)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        return None
    if proc.returncode != 0:
        raise SystemExit(f"djx run failed ({proc.returncode}): {err[-2000:]}")
    return json.loads((out / "o.summary.json").read_text())


def write_recipe(model: Path, data: Path, out: Path, np_: int | None = None, dtype: str = "float32",
                 devices: list[str] | None = None, scoring: str | None = "workers",
                 seconds_per_pair: float | None = None, image_decode: str | None = None,
                 jpeg_files: bool = False, executor: str = "local") -> Path:
    """out/recipe.json: image_text_similarity_filter over `data` with `model`, exporting into `out`.
    `seconds_per_pair`: the simulated device (tools/simulated_device.py) in place of the model's
    forward, preparing JPEG files as image_decode: device does where `jpeg_files`; `scoring` None:
    the recipe leaves it to djx (the default)."""
    op = {"hf_clip": str(model), "min_score": -1e9, "dtype": dtype}
    if image_decode is not None:
        op["image_decode"] = image_decode
    name = "image_text_similarity_filter"
    recipe = {"dataset_path": str(data), "export_path": str(out / "o.jsonl"), "batch_size": 32, "executor": executor}
    if scoring is not None:
        recipe["scoring"] = scoring
    if seconds_per_pair is not None:
        name, op["seconds_per_pair"] = "simulated_device_clip_filter", seconds_per_pair
        if jpeg_files:
            op["jpeg_files"] = True
        recipe["custom_ops"] = [str(REPO / "tools" / "simulated_device.py")]
    recipe["process"] = [{name: op}]
    if devices is not None:
        recipe["devices"] = devices
    if np_ is not None:
        recipe["np"] = np_
    out.mkdir(parents=True, exist_ok=True)
    (out / "recipe.json").write_text(json.dumps(recipe))
    return out / "recipe.json"


def named_again(data: Path, n: int, name: str) -> Path:
    """A dataset beside `data` (whose rows name its photos) of n samples: its rows over and over."""
    rows = data.read_text().splitlines()
    out = data.with_name(name)
    out.write_text("".join(json.dumps({**json.loads(rows[k % len(rows)]), "id": k}) + "\n" for k in range(n)))
    return out


def raw_forward(model: Path, data: Path, n: int, device: str, dtype: str, batch: int) -> float:
    """Pairs/s of the bare batched forward on tensors prepared beforehand (all threads)."""
    import torch
    from transformers import CLIPModel

    from djx.core.op.images import BatchImages
    from djx.ops.models import auto_processor
    torch.set_num_threads(os.cpu_count() or 1)
    tdtype = getattr(torch, dtype)
    net = CLIPModel.from_pretrained(model).to(device, tdtype).eval()
    proc = auto_processor(model)  # djx's: the Pillow backend
    samples = [json.loads(line) for line in open(data)][:n]
    images = BatchImages(str(data.parent), max_pixels=178956970)
    inputs = []
    for i in range(0, len(samples), batch):
        part = samples[i:i + batch]
        x = proc(text=[s["text"] for s in part], images=[images.rgb(s["images"][0]) for s in part],
                 return_tensors="pt", padding=True, truncation=True)
        inputs.append({k: (v.to(device, tdtype) if k == "pixel_values" else v.to(device)) for k, v in x.items()})
        images.close()
    timed = max(len(inputs), 8)  # forwards timed, cycling over the prepared batches
    with torch.inference_mode():
        for k in range(WARM_FORWARDS):  # a device's first forwards measure its warm-up, not its speed
            net(**inputs[k % len(inputs)])
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for k in range(timed):
            net(**inputs[k % len(inputs)])
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    pairs = sum(int(inputs[k % len(inputs)]["input_ids"].shape[0]) for k in range(timed))
    return pairs / (time.perf_counter() - t0)


def bare_start(model: Path, device: str, dtype: str) -> float:
    """Seconds a fresh interpreter takes to import torch and transformers and load `model` onto
    `device` with its processor, nothing else: the floor a run's start-up is measured against."""
    code = ("import sys, torch, transformers; m = transformers.CLIPModel.from_pretrained(sys.argv[1]); "
            "m.to(sys.argv[2], getattr(torch, sys.argv[3])); transformers.AutoProcessor.from_pretrained(sys.argv[1])")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(model), device, dtype], check=True, capture_output=True)
    return time.perf_counter() - t0


def steady(summary: dict) -> float:
    return (summary.get("timing") or {}).get("steady_samples_per_second") or summary["samples_per_second"]


PROXY_SAMPLES = 2400


def device_proxy(work: Path, data: Path, cores: int, executor: str = "local") -> None:
    """The simulated device: the shipped tiny CLIP's preparing (decode, processor, tokenizer) on the
    workers, and a scorer that takes a fixed time per pair outside the GIL (as a GPU does). First a
    free device gives the rate the workers prepare at (R); then a device of exactly that speed: a
    shape where workers and device never wait for each other reaches R again. Target >= 0.9 R.
    Over at least PROXY_SAMPLES samples (the data's named again): the first batch's preparing and
    the last group's scoring wait on each other in any shape, ~10% of a 600-sample run here.
    executor: ray: the same on a local Ray (stage actors preparing, a scoring actor; R measured there)."""
    if len(data.read_text().splitlines()) < PROXY_SAMPLES:
        data = named_again(data, PROXY_SAMPLES, "proxy.jsonl")
    free = djx_run(TINY / "tiny-clip", data, work / f"out-sim-free-{executor}", None, scoring="device",
                   devices=["cpu"], seconds_per_pair=0.0, executor=executor)
    rate = steady(free)
    sim = djx_run(TINY / "tiny-clip", data, work / f"out-sim-device-{executor}", None, scoring="device",
                  devices=["cpu"], seconds_per_pair=1.0 / rate, executor=executor)
    on = "" if executor == "local" else f", executor: {executor}"
    print(f"\n## simulated device (tiny CLIP prepared on {free.get('workers')} workers, scoring: device{on})\n"
          f"free device: R = {rate:,.1f} samples/s; a device of R pairs/s ({1000.0 / rate:.3f} ms a pair): "
          f"{steady(sim):,.1f} samples/s = **{steady(sim) / rate:.2f} x R** (target >= 0.9)", flush=True)


def row(label: str, summary: dict, limit: float, cores: int) -> str:
    t = summary.get("timing") or {}
    rate = t.get("steady_samples_per_second") or summary["samples_per_second"]
    plan = summary.get("plan") or {}
    return (f"| {label} | {summary.get('workers')} workers x {plan.get('threads_per_worker')} threads | {rate:,.1f} samples/s | "
            f"{rate / (cores * limit):.2f} x cores x L |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--full-clip", action="store_true")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--only", choices=["device", "gpu"],
                    help="device: the simulated-device proxy alone; gpu: the GPU section alone")
    ap.add_argument("--ray", action="store_true", help="the simulated-device proxy on a local Ray as well")
    ap.add_argument("--repeat", type=int, default=1, help="each photo named this many times (n x repeat samples)")
    ap.add_argument("--run-timeout", type=float, default=240.0, help="seconds a GPU section run may take")
    ap.add_argument("--gpu-runs", default="default,workers,device,decode",
                    help="the GPU section's djx runs, in order (default, workers, device, decode)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    cores = len(os.sched_getaffinity(0))
    data = write_photos(work / "photos", args.n, repeat=args.repeat)
    print(f"# bench_throughput: {args.n} distinct 640x480 JPEGs, {args.n * args.repeat} samples, {cores} cores",
          flush=True)
    if args.only == "gpu":
        gpu_section(work, data, args.n, cores, args.run_timeout, tuple(args.gpu_runs.split(",")))
        return
    device_proxy(work, data, cores)
    if args.ray:
        device_proxy(work, data, cores, executor="ray")
    from djx.tools import serial_ceiling
    print(serial_ceiling.report(serial_ceiling.measure(work, data), cores), flush=True)
    if args.only == "device":
        return
    models = [save_clip(work / "models", full=False)] + ([save_clip(work / "models", full=True)] if args.full_clip else [])
    for model in models:
        limit = prepare_limit(model, data, min(args.n, 240))
        print(f"\n## {model.name}: per-core prepare limit L = {limit:,.1f} images/s (decode + processor, one thread)")
        print("| run | plan | steady | ratio |\n|---|---|---|---|")
        for label, np_, scoring in (("np unset", None, "workers"), (f"np = {cores}", cores, "workers"),
                                    ("np unset, scoring: device", None, "device")):
            s = djx_run(model, data, work / f"out-{model.name}-{np_}-{scoring}", np_, args.dtype, ["cpu"], scoring)
            print(row(label, s, limit, cores), flush=True)
        if model.name == "clip-b32":
            raw = raw_forward(model, data, min(args.n, 128), "cpu", args.dtype, FORWARD)
            print(f"raw batched forward on prepared tensors, {cores} threads: {raw:,.1f} pairs/s")
    try:
        import torch
        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:
        gpu_section(work, data, args.n, cores, args.run_timeout)


def gpu_section(work: Path, data: Path, n: int, cores: int, run_timeout: float,
                gpu_runs: tuple = ("default", "workers", "device", "decode")) -> None:
    """Full-size CLIP B/32 in bfloat16 on the first GPU: the bare forward, the per-core prepare
    limit L, djx end to end (the default plan, `scoring: workers`, `scoring: device` with CPU and
    with GPU decode) with the GPU's busy share, the processes holding GPU memory, the start-up and
    where the time went, and where one batch's time goes."""
    model = save_clip(work / "models", full=True)
    # the bare forward in a process of its own: a CUDA context left in this one would hold GPU
    # memory beside djx's scorer while djx runs (the second process an H100 run counted)
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(1) as pool:
        raw = pool.apply(raw_forward, (model, data, min(n, 1024), "cuda", "bfloat16", 256))
    limit = prepare_limit(model, data, min(n, 240))
    bare = bare_start(model, "cuda:0", "bfloat16")
    print(f"\n## GPU ({_gpu_name()}), CLIP ViT-B/32 bf16\nraw forward on pre-decoded tensors, batch 256: {raw:,.0f} "
          f"pairs/s\nper-core prepare limit L = {limit:,.1f} images/s; cores x L = {cores * limit:,.0f}\n"
          f"bare start (a fresh python: import torch and transformers, load the model onto the GPU and its "
          f"processor): {bare:.1f} s; the start-up goal: <= {bare + 2:.1f} s", flush=True)
    runs = {"default": ("default (scoring unset)", None, None), "workers": ("scoring: workers", "workers", None),
            "device": ("scoring: device", "device", None),
            "decode": ("scoring: device, image_decode: device", "device", "device")}
    profiled = set(filter(None, os.environ.get("BENCH_PROFILE", "").split(",")))
    for name in gpu_runs:
        profile = Path(os.environ.get("OUT", work)) / f"profile-{name}.txt" if name in profiled else None
        gpu_run(work, data, model, *runs[name], cores * limit, run_timeout, profile)
    breakdown(model, data, min(n, 256))


def gpu_run(work: Path, data: Path, model: Path, label: str, scoring: str | None, decode: str | None,
            host_limit: float, timeout: float, profile: Path | None = None) -> None:
    """djx end to end on the GPU(s), np unset, with the GPU's busy share and the processes holding
    GPU memory sampled meanwhile (tools/gpu_check_scoring.py's watch); `profile`: py-spy's samples
    of the run (BENCH_PROFILE names the runs sampled)."""
    from djx.tools.gpu_check import _name as process_name
    from djx.tools.gpu_check_scoring import _Watch
    out = work / f"out-gpu-{len(list(work.glob('out-gpu-*')))}"
    watch = _Watch(cpu=False, kill=False, folder=out)
    with watch:
        s = djx_run(model, data, out, None, "bfloat16", scoring=scoring, image_decode=decode, timeout=timeout,
                    profile=profile)
    holders = {pid: process_name(pid) or "gone" for pid in sorted(watch.holders)}
    if s is None:
        print(f"\n### {label}: did not finish in {timeout:.0f} s; GPU busy {watch.busy():.0f}%, processes holding "
              f"GPU memory {len(holders)}", flush=True)
        return
    t = s.get("timing") or {}
    rate = t.get("steady_samples_per_second") or s["samples_per_second"]
    print(f"\n### {label}: {s.get('workers')} workers, devices {s['plan']['devices']}; plan notes "
          f"{s['plan']['notes']}\n{rate:,.1f} samples/s steady ({rate / host_limit:.2f} x cores x L), "
          f"start-up {t.get('startup_seconds', float('nan')):.1f} s, {s['input']} in = {s['kept']} kept + "
          f"{s['dropped']} dropped + {s['rejected']} rejected; GPU busy {watch.busy():.0f}% (mean of "
          f"{len(watch.util)} samples); processes holding GPU memory: {holders}\n"
          f"start-up parts: {json.dumps(t.get('startup_parts'))}\ntime: {json.dumps(s.get('time_breakdown'))}", flush=True)
    ev = s.get("events") or {}
    if ev.get("scorer_groups"):
        print(f"scorer: {ev['scorer_groups']:,} groups of {ev['scorer_pairs'] / ev['scorer_groups']:,.1f} pairs on "
              f"average ({ev.get('joined_batches', 0):,} batches in groups of more than one)", flush=True)


def breakdown(model: Path, data: Path, n: int) -> None:
    """Milliseconds per sample of each step, one thread on the host, batch 64 on the device."""
    import io

    import torch
    from PIL import Image
    from transformers import CLIPModel

    from djx.ops.models import auto_processor
    torch.set_num_threads(1)
    net = CLIPModel.from_pretrained(model).to("cuda", torch.bfloat16).eval()
    proc = auto_processor(model)  # djx's: the Pillow backend
    samples = [json.loads(line) for line in open(data)][:n]
    took = dict.fromkeys(("read", "decode", "preprocess", "transfer", "forward"), 0.0)

    def timed(step, fn):
        t0 = time.perf_counter()
        out = fn()
        took[step] += time.perf_counter() - t0
        return out
    with torch.inference_mode():
        for i in range(0, n, 64):
            part = samples[i:i + 64]
            raw = timed("read", lambda: [(data.parent / s["images"][0]).read_bytes() for s in part])
            rgb = timed("decode", lambda: [Image.open(io.BytesIO(b)).convert("RGB") for b in raw])
            x = timed("preprocess", lambda: proc(text=[s["text"] for s in part], images=rgb, return_tensors="pt",
                                                 padding=True, truncation=True))
            x = timed("transfer", lambda: _to_cuda(x))
            timed("forward", lambda: (net(**x), torch.cuda.synchronize()))
    print("per sample: " + ", ".join(f"{k} {v * 1000 / n:.2f} ms" for k, v in took.items()))


def _to_cuda(x):
    import torch
    out = {k: (v.to("cuda", torch.bfloat16) if k == "pixel_values" else v.to("cuda")) for k, v in x.items()}
    torch.cuda.synchronize()
    return out


def _gpu_name() -> str:
    import torch
    return torch.cuda.get_device_name(0)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO.parent))
    main()
