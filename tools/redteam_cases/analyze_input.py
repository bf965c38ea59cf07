"""djx analyze on outputs no run of djx would write: thousands of stat names in the records, names
that make one file name, more distinct names than can be counted. It must finish, plot what the
run's ops compute (or a capped number), say what it left out, and give each plot its own file."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from .common import Case, djx, last_line, write_jsonl

FOREIGN = 4_001


def _real_run(tmp: Path) -> Path:
    """A real djx run of text_length_filter over 40 texts, some dropped; -> its export."""
    write_jsonl(tmp / "d.jsonl", [{"text": "word " * (i % 9)} for i in range(40)])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 10}}]}))
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"the run to attack failed: {last_line(proc.stderr)}")
    return tmp / "out" / "o.jsonl"


def _crowd(export: Path) -> None:
    """Give the run's records 4,001 stat names no op computes, each in one record or two."""
    n = 0
    for path in (export, export.with_name("o.dropped.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for rec in records:
            rec["__dj__stats__"].update({f"foreign{k:04d}": float(k) for k in range(n % 40, FOREIGN, 40)})
            n += 1
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _pngs(folder: Path) -> int:
    return len(list(folder.glob("*.png")))


def foreign_stat_names(tmp: Path, with_recipe: bool) -> tuple[bool, str]:
    export = _real_run(tmp)
    _crowd(export)
    proc = djx("analyze", str(export), *(["--recipe", "r.yaml"] if with_recipe else []), "--out", "a", cwd=tmp)
    pngs = _pngs(tmp / "a")
    said = "4,001 other stat names" in proc.stdout
    return proc.returncode == 0 and pngs == 2 and said, \
        f"exit {proc.returncode}, {pngs} PNGs (the run's stat: 2), note {'given' if said else 'MISSING'}"


def bare_export(tmp: Path) -> tuple[bool, str]:
    export = _real_run(tmp)
    _crowd(export)
    export.with_name("o.summary.json").unlink()
    proc = djx("analyze", str(export), "--out", "a", cwd=tmp)
    pngs = _pngs(tmp / "a")
    return proc.returncode == 0 and pngs <= 50 and "more are not" in proc.stdout, \
        f"exit {proc.returncode}, {pngs} PNGs (at most 50): {last_line(proc.stdout)[:90]}"


def colliding_names(tmp: Path) -> tuple[bool, str]:
    names = ["a/b", "a_b", "A_b", "a\\b", "a b", "é_b", "z" * 1000]
    write_jsonl(tmp / "o.jsonl", [{"text": "t", "__dj__stats__": {n: float(i + k) for k, n in enumerate(names)}}
                                  for i in range(5)])
    proc = djx("analyze", "o.jsonl", "--out", "a", cwd=tmp)
    files = {p.name.lower() for p in (tmp / "a").glob("hist_*.png")}
    return proc.returncode == 0 and len(files) == len(names), \
        f"exit {proc.returncode}, {len(files)} histogram files for {len(names)} names: {last_line(proc.stderr)[:80]}"


def undrawable_names(tmp: Path) -> tuple[bool, str]:
    names = ["$x^$", "a$\\frac{$b", "\ud800x"]  # matplotlib math mode; a lone surrogate (no UTF-8)
    write_jsonl(tmp / "o.jsonl", [{"text": "t", "__dj__stats__": {n: float(i) for n in names}} for i in range(3)])
    proc = djx("analyze", "o.jsonl", "--out", "a", cwd=tmp)
    pngs = _pngs(tmp / "a")
    return proc.returncode == 0 and pngs == len(names) and "Traceback" not in proc.stderr, \
        f"exit {proc.returncode}, {pngs} PNGs for {len(names)} names: {last_line(proc.stderr)[:80]}"


def uncountable_names(tmp: Path) -> tuple[bool, str]:
    write_jsonl(tmp / "o.jsonl", [{"text": "t", "__dj__stats__": {f"n{i * 500 + k}": 1.0 for k in range(500)}}
                                  for i in range(60)])  # 30,000 distinct names
    proc = djx("analyze", "o.jsonl", "--out", "a", cwd=tmp)
    pngs = _pngs(tmp / "a")
    said = "more than 10,000 distinct stat names" in proc.stdout
    return proc.returncode == 0 and pngs <= 50 and said, \
        f"exit {proc.returncode}, {pngs} PNGs, count cap {'said' if said else 'NOT said'}"


def check_summary_wrong_types(tmp: Path) -> tuple[bool, str]:
    export = _real_run(tmp)
    summary = export.with_name("o.summary.json")
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "input": "twelve"}))
    proc = djx("check", str(export), "--recipe", "r.yaml", cwd=tmp)
    clean = "Traceback" not in proc.stderr
    return clean and "no usable input" in proc.stdout, \
        f"exit {proc.returncode}, {'no traceback' if clean else 'TRACEBACK'}: {last_line(proc.stdout + proc.stderr)[:90]}"


CASES = [
    Case("unbounded input", "analyze_4001_foreign_stat_names_with_recipe", lambda t: foreign_stat_names(t, True)),
    Case("unbounded input", "analyze_4001_foreign_stat_names_from_summary", lambda t: foreign_stat_names(t, False)),
    Case("unbounded input", "analyze_bare_export_4001_stat_names", bare_export),
    Case("unbounded input", "analyze_stat_names_making_one_file_name", colliding_names),
    Case("unbounded input", "analyze_stat_names_matplotlib_and_utf8_cannot_take", undrawable_names),
    Case("unbounded input", "analyze_30000_distinct_stat_names", uncountable_names),
    Case("unbounded input", "check_summary_input_not_a_count", check_summary_wrong_types),
]
