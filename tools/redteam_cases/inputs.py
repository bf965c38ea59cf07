"""Unbounded input: a few hundred bytes of zstd parquet that decode to a GiB must cost the main
process about a batch, not the GiB; a record over max_record_bytes is rejected, not carried."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .common import Case, last_line

MiB = 1 << 20


def _parquet(path: Path, texts: list[str]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"text": texts}), path, compression="zstd")
    return path


def _recipe(tmp: Path, data: str, **keys) -> str:
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": data, "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 1}}], **keys}))
    return "r.yaml"


def _djx_peak_uss(tmp: Path, *args: str) -> tuple[int, int, str]:
    """`djx ARGS` as a user runs it: (exit status, the peak USS of its main process, stderr's last line)."""
    import psutil
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", *args], cwd=tmp, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    me, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:  # sampling memory, not waiting for a state
        try:
            peak = max(peak, me.memory_full_info().uss)
        except psutil.Error:
            break
        time.sleep(0.02)
    err = proc.communicate(timeout=600)[1]
    return proc.returncode, peak, last_line(err)


def _counts(tmp: Path) -> dict:
    try:
        summary = json.loads((tmp / "out" / "o.summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: summary.get(k) for k in ("input", "kept", "dropped", "rejected")}


def zstd_gib_of_rows(tmp: Path) -> tuple[bool, str]:
    """1,024 rows of one MiB each in a ~500-byte zstd file (one value, dictionary-encoded)."""
    data = _parquet(tmp / "d.parquet", ["a" * MiB] * 1024)
    rc, peak, err = _djx_peak_uss(tmp, "process", _recipe(tmp, str(data)), "--quiet")
    counts = _counts(tmp)
    held = rc == 0 and counts.get("kept") == 1024 and peak < 1 << 30
    return held, (f"{data.stat().st_size} B file -> 1 GiB of rows: exit {rc}, main process peak USS "
                  f"{peak / MiB:,.0f} MiB, {counts or err}")


def rows_over_max_record_bytes(tmp: Path) -> tuple[bool, str]:
    """Every 16th row is 8 MiB, over a 4 MiB max_record_bytes: those rows are rejected, the rest kept."""
    texts = [("b" * 8 * MiB) if i % 16 == 0 else f"row {i} text" for i in range(256)]
    data = _parquet(tmp / "d.parquet", texts)
    rc, peak, err = _djx_peak_uss(tmp, "process", _recipe(tmp, str(data), max_record_bytes=4 * MiB), "--quiet")
    counts = _counts(tmp)
    try:
        reasons = [json.loads(line)["reason"] for line in open(tmp / "out" / "o.rejected.jsonl", encoding="utf-8")]
    except OSError:
        reasons = []
    held = rc == 0 and counts.get("kept") == 240 and len(reasons) == 16 \
        and all("over max_record_bytes" in r for r in reasons)
    return held, f"exit {rc}, {counts or err}, peak USS {peak / MiB:,.0f} MiB; {reasons[0] if reasons else 'no rejections'}"


def json_line_over_max_record_bytes(tmp: Path) -> tuple[bool, str]:
    """A 64 MiB JSON line among short ones, over a 1 MiB max_record_bytes: rejected, never read whole."""
    with open(tmp / "d.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": "first line text"}) + "\n")
        f.write(json.dumps({"text": "c" * 64 * MiB}) + "\n")
        f.write(json.dumps({"text": "last line text"}) + "\n")
    rc, peak, err = _djx_peak_uss(tmp, "process", _recipe(tmp, "d.jsonl", max_record_bytes=MiB), "--quiet")
    counts = _counts(tmp)
    held = rc == 0 and counts.get("kept") == 2 and counts.get("rejected") == 1
    return held, f"exit {rc}, {counts or err}, main process peak USS {peak / MiB:,.0f} MiB"


CASES = [
    Case("unbounded input", "parquet_zstd_1024_rows_of_1_mib", zstd_gib_of_rows),
    Case("unbounded input", "parquet_rows_over_max_record_bytes", rows_over_max_record_bytes),
    Case("unbounded input", "json_line_over_max_record_bytes", json_line_over_max_record_bytes),
]
