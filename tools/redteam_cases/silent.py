"""Runs that could not do their job must not report success; a trial must not destroy a full run;
a legitimately skewed dataset must not be stopped as a systematic failure."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from .common import Case, djx, last_line, write_jsonl

RAISES_ON_BAD = '''
from djx import Filter, register_op


@register_op("picky_filter")
class PickyFilter(Filter):
    stats_keys = ("n",)

    def compute_sample(self, sample, batch):
        if batch.text(sample).startswith("bad"):
            raise ValueError("cannot read this one")
        batch.stats(sample)["n"] = 1

    def keep(self, stats):
        return True
'''


def _recipe(tmp: Path, **keys) -> str:
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                **keys}))
    return "r.yaml"


def images_elsewhere(tmp: Path) -> tuple[bool, str]:
    """1,950 of 2,000 samples name images that are not there: bad_image nearly throughout."""
    write_jsonl(tmp / "d.jsonl", [{"text": "<__dj__image> x", "images": [f"nowhere/{i}.png"]} for i in range(2000)])
    proc = djx("process", _recipe(tmp, process=[{"image_shape_filter": {}}]), "--quiet", cwd=tmp)
    return proc.returncode != 0, f"exit {proc.returncode}: {last_line(proc.stderr)[:120]}"


def text_key_typo(tmp: Path) -> tuple[bool, str]:
    write_jsonl(tmp / "d.jsonl", [{"text": f"sample {i} text"} for i in range(200)])
    proc = djx("process", _recipe(tmp, text_keys="txt", process=[{"text_length_filter": {"min_len": 1}}]),
               "--quiet", cwd=tmp)
    return proc.returncode != 0, f"exit {proc.returncode}: {last_line(proc.stderr)[:120]}"


def trial_over_full_run(tmp: Path) -> tuple[bool, str]:
    write_jsonl(tmp / "d.jsonl", [{"text": f"sample {i} text"} for i in range(300)])
    recipe = _recipe(tmp, process=[{"text_length_filter": {"min_len": 1}}])
    djx("process", recipe, "--quiet", cwd=tmp)
    before = (tmp / "out" / "o.jsonl").read_bytes()
    proc = djx("process", recipe, "--quiet", "--limit", "5", cwd=tmp)
    same = (tmp / "out" / "o.jsonl").read_bytes() == before
    return same and proc.returncode != 0, f"outputs {'kept' if same else 'REPLACED'}, exit {proc.returncode}"


def skewed_head(tmp: Path, batch_size: int) -> tuple[bool, str]:
    """70 records an op cannot read at the head of 3,070 good ones: a skewed dataset, not a broken op."""
    (tmp / "picky.py").write_text(RAISES_ON_BAD)
    write_jsonl(tmp / "d.jsonl", [{"text": "bad record"}] * 70 + [{"text": f"good {i}"} for i in range(3000)])
    proc = djx("process", _recipe(tmp, batch_size=batch_size, custom_ops=["picky.py"],
                                  process=[{"picky_filter": {}}]), "--quiet", cwd=tmp)
    exported = (tmp / "out" / "o.jsonl").exists()
    return exported, f"batch_size {batch_size}: exit {proc.returncode}, export {'written' if exported else 'MISSING'}"


def bad_stats_type(tmp: Path) -> tuple[bool, str]:
    write_jsonl(tmp / "d.jsonl", [{"text": "a text", "__dj__stats__": "0.9"}])
    djx("process", _recipe(tmp, process=[{"text_length_filter": {"min_len": 1}}]), "--quiet", cwd=tmp)
    try:
        codes = json.loads((tmp / "out" / "o.summary.json").read_text())["rejected_by_code"]
    except (OSError, ValueError, KeyError):
        codes = None
    return codes == {"bad_input": 1}, f"rejected by code: {codes}"


CASES = [
    Case("silent", "verdict_images_not_where_records_say", images_elsewhere),
    Case("silent", "verdict_text_key_typo", text_key_typo),
    Case("silent", "verdict_trial_over_full_run", trial_over_full_run),
    Case("silent", "verdict_skewed_head_batch_7", lambda t: skewed_head(t, 7)),
    Case("silent", "verdict_skewed_head_batch_64", lambda t: skewed_head(t, 64)),
    Case("silent", "verdict_stats_wrong_type_is_bad_input", bad_stats_type),
]
