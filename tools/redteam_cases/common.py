"""What every case needs: the Case record and a way to run djx as a user does."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Case:
    """One hostile input. run(folder) -> (held, one line saying what happened)."""

    group: str
    name: str
    run: Callable[[Path], tuple[bool, str]]
    needs_ray: bool = False


def djx(*args: str, cwd: Path, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """`djx ARGS` in cwd, as a user runs it; stdout and stderr as text."""
    return subprocess.run([sys.executable, "-m", "djx.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def write_jsonl(path: Path, records) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "(nothing printed)"


def one_clear_line(proc: subprocess.CompletedProcess) -> bool:
    """Failed with a djx error line and no Python traceback."""
    return proc.returncode != 0 and "Traceback" not in proc.stderr and "djx" in proc.stderr
