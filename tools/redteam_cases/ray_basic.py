"""Ray as a user meets it: an address where nothing listens must fail in seconds, in one line."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import yaml

from .common import Case, djx, last_line, one_clear_line, write_jsonl


def unreachable_address(tmp: Path) -> tuple[bool, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write_jsonl(tmp / "d.jsonl", [{"text": "a text long enough"}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl",
                                                "executor": "ray", "ray_address": f"127.0.0.1:{port}",
                                                "process": [{"text_length_filter": {}}]}))
    t0 = time.monotonic()
    try:
        proc = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=60)
    except Exception:  # noqa: BLE001  still retrying after a minute
        return False, "still retrying after 60 s"
    took = time.monotonic() - t0
    return one_clear_line(proc) and took < 30, f"exit {proc.returncode} after {took:.1f} s: {last_line(proc.stderr)[:90]}"


CASES = [Case("ray", "ray_address_nothing_listens", unreachable_address, needs_ray=True)]
