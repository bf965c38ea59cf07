"""kill -9 a djx run at random instants, rerun the same command until it finishes, and compare
the outputs with an uninterrupted run's, byte for byte.

    python tools/torture.py [--kills 40] [--records 20000] [--np 2] [--seed 1] [--executor local]
                            [--format jsonl|json|parquet] [--stats-file] [--shard-size BYTES]

Each trial starts a run and kills its main process (SIGKILL; its workers die with it) after a
random delay drawn over the whole length of a run, from start-up through the finish; a share of
the delays is drawn near the end, where the outputs are being moved into place. The next run of
the same command resumes (or completes the interrupted finish) and may itself be killed, up to
three kills a trial. Reported: kills, the instants covered (as a fraction of an uninterrupted
run), the phase each kill hit (no state yet / mid-run / inside the finish), records compared and
differences (must be 0). Exits non-zero on any difference or failed rerun.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXPORT = {"fmt": "jsonl", "keys": ""}  # set once by main() from the command line, before any run


def outputs(folder: Path) -> dict[str, bytes]:
    """Every file the run wrote next to its export (shards and the stats file included), but the summary."""
    out = folder / "out"
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())
            if p.is_file() and not p.name.endswith(".summary.json")}


def write_dataset(folder: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(folder / "data.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            if i % 997 == 13:
                f.write('{"id": %d, "text": \n' % i)  # a bad line: rejected, must stay rejected once
                continue
            words = " ".join(rng.choice(["red", "green", "blue", "circle", "square", "a"])
                             for _ in range(rng.randint(0, 12)))
            f.write(json.dumps({"id": i, "text": words}) + "\n")


def write_recipe(folder: Path, np: int, executor: str) -> Path:
    recipe = folder / "recipe.yaml"
    recipe.write_text(f"""dataset_path: data.jsonl
export_path: out/kept.{EXPORT['fmt']}
np: {np}{EXPORT['keys']}
executor: {executor}
batch_size: 50
checkpoint_every: 3
process:
  - text_length_filter: {{min_len: 10, max_len: 60}}
""")
    return recipe


def run(recipe: Path, kill_after: float | None) -> tuple[int, float]:
    """One `djx process`; killed after `kill_after` seconds if still running. (returncode, seconds)"""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise SystemExit(f"run failed ({proc.returncode}): {err.decode()[-2000:]}")
    return proc.returncode, time.monotonic() - t0


def kill_in_finish(recipe: Path, folder: Path) -> int:
    """A run killed the moment its manifest says it is finishing (polled as fast as Python can);
    its returncode (0 when it got through first)."""
    manifest = folder / "out" / ".kept.djx-state" / "manifest.json"
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        try:
            if b'"finishing": true' in manifest.read_bytes():
                os.kill(proc.pid, signal.SIGKILL)
                break
        except OSError:
            pass
    return proc.wait()


def phase(folder: Path) -> str:
    manifest = folder / "out" / ".kept.djx-state" / "manifest.json"
    try:
        state = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return "finished" if (folder / "out" / "kept.summary.json").exists() else "no state yet"
    return "inside the finish" if state.get("finishing") else "mid-run"


def _records(name: str, blob: bytes) -> int:
    """The records an output file holds: a JSON Lines file's lines, a JSON array's items, a parquet file's rows."""
    if name.endswith(".parquet"):
        import io
        import pyarrow.parquet as pq
        return pq.ParquetFile(io.BytesIO(blob)).metadata.num_rows
    if name.endswith(".json"):
        return len(json.loads(blob)) if blob.strip() else 0
    return blob.count(b"\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=40)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--format", choices=["jsonl", "json", "parquet"], default="jsonl", help="the export's format")
    ap.add_argument("--stats-file", action="store_true", help="keep_stats_in_res_ds: false (stats in kept_stats.jsonl)")
    ap.add_argument("--shard-size", type=int, default=0, help="export_shard_size in bytes (0: one export file)")
    args = ap.parse_args(argv)
    EXPORT["fmt"] = args.format
    EXPORT["keys"] = ("\nkeep_stats_in_res_ds: false" if args.stats_file else "") + \
        (f"\nexport_shard_size: {args.shard_size}" if args.shard_size else "")
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="djx-torture-"))
    try:
        ref = work / "reference"
        ref.mkdir()
        write_dataset(ref, args.records, args.seed)
        _, whole = run(write_recipe(ref, args.np, args.executor), None)
        reference = outputs(ref)
        records = sum(_records(name, blob) for name, blob in reference.items())
        print(f"reference run: {args.records} records, {whole:.1f} s; {records} output records")
        kills, instants, phases, differences, trial = 0, [], {}, 0, 0
        while kills < args.kills:
            trial += 1
            folder = work / f"trial{trial}"
            folder.mkdir()
            shutil.copy(ref / "data.jsonl", folder / "data.jsonl")
            recipe = write_recipe(folder, args.np, args.executor)
            for _ in range(3):  # up to three kills in a row, then a run to the end
                pick = rng.random()
                if pick < 0.25:  # the moment the finish starts
                    code, delay = kill_in_finish(recipe, folder), whole
                else:
                    delay = rng.uniform(0.8, 1.1) * whole if pick < 0.5 else rng.uniform(0.05, 1.0) * whole
                    code, _ = run(recipe, delay)
                if code == 0:
                    break
                kills += 1
                instants.append(delay / whole)
                hit = phase(folder)
                phases[hit] = phases.get(hit, 0) + 1
            code, _ = run(recipe, None) if phase(folder) != "finished" else (0, 0.0)
            got = outputs(folder)
            if got != reference:
                differences += 1
                print(f"trial {trial}: outputs differ from the reference ({folder})")
            else:
                shutil.rmtree(folder)
        print(f"kills: {kills} over {trial} trials; instants covered: {min(instants):.2f} to "
              f"{max(instants):.2f} of an uninterrupted run")
        print("phases hit: " + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())))
        print(f"records compared: {records * trial}; trials whose outputs differ: {differences}")
        return 1 if differences else 0
    finally:
        if not any(p.name.startswith("trial") for p in work.iterdir()):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
