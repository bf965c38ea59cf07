"""scoring: device keeps the device fed: a preparing worker prepares its next batches while its
last one is at the scorer (lanes), and the run says where its time went. Runs are steered by
state (a held scorer, a log of prepared batches), never by time."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO_DIR, write_jsonl_file
from helpers import GUARD_S, djx

pytestmark = [pytest.mark.slow, pytest.mark.models]

CLIP = str(REPO_DIR / "tests" / "assets" / "models" / "tiny-clip")

# A CLIP filter that logs each batch it prepares (the worker's pid and the batch's first id) and
# whose scoring waits while the file `hold` exists.
LOGGED = '''
import os, time
from djx import register_op
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter


@register_op("logged_clip_filter")
class LoggedClip(ImageTextSimilarityFilter):
    def __init__(self, hold: str = "", log: str = "", **kw):
        super().__init__(**kw)
        self.hold, self.log = hold, log

    def prepare(self, batch, processor, text_len):
        out = super().prepare(batch, processor, text_len)
        with open(self.log, "a") as f:
            f.write(f"{os.getpid()} {batch.samples[0]['id']}\\n")
        return out

    def score_parts(self, loaded, parts, fault=(), counters=None):
        while os.path.exists(self.hold):
            time.sleep(0.01)
        return super().score_parts(loaded, parts, fault, counters)
'''


def dataset(folder: Path, n: int) -> Path:
    from PIL import Image
    (folder / "images").mkdir(exist_ok=True)
    colours = ["red", "green", "blue", "yellow"]
    for k in range(8):
        Image.new("RGB", (40 + 3 * k, 48), colours[k % 4]).save(folder / "images" / f"{k}.png")
    return write_jsonl_file(folder / "data.jsonl", [
        {"id": i, "text": f"<__dj__image> a {colours[i % 4]} square", "images": [f"images/{i % 8}.png"]}
        for i in range(n)])


def prepared(log: Path) -> list[tuple[int, int]]:
    try:
        return [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    except FileNotFoundError:
        return []


def start_held_run(tmp_path: Path, **keys):
    """A run of 64 samples in batches of 8 through one preparing worker (`keys`: more recipe keys)
    whose scorer holds every batch while the file `hold` exists: (process, hold, log)."""
    plugin = tmp_path / "logged.py"
    plugin.write_text(LOGGED)
    dataset(tmp_path, 64)
    hold, log = tmp_path / "hold", tmp_path / "prepared.log"
    hold.write_text("")
    op = {"logged_clip_filter": {"hf_clip": CLIP, "min_score": 0.0, "hold": str(hold), "log": str(log)}}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(
        {"dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 1, "batch_size": 8, "scoring": "device",
         "custom_ops": [str(plugin)], "process": [op], **keys}))
    return djx("process", str(tmp_path / "recipe.yaml"), "--quiet"), hold, log


def finish_held_run(tmp_path: Path, proc, hold: Path, log: Path, lanes: int) -> tuple[list, dict, list]:
    """Wait until one worker (or stage actor) has prepared `lanes` batches while its scorer holds
    the first, release the scorer, let the run end: (the batches prepared while it held, the run's
    summary, every batch prepared), each as (pid, first sample)."""
    deadline = time.monotonic() + GUARD_S
    while len(prepared(log)) < lanes:  # the scorer holds the first batch all this time
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"only {len(prepared(log))} batch(es) prepared while the scorer held"
        time.sleep(0.01)
    held = prepared(log)
    hold.unlink()
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 0, err
    return held, json.loads((tmp_path / "out" / "o.summary.json").read_text()), prepared(log)


def test_a_worker_prepares_its_next_batches_while_the_scorer_holds_its_last(tmp_path):
    """One preparing worker, a scorer that holds: the worker does not sit idle waiting for its
    scores but prepares up to its lanes' batches (three), then the run completes."""
    from djx.core.executors.local.executor import LANES
    proc, hold, log = start_held_run(tmp_path)
    held, summary, every = finish_held_run(tmp_path, proc, hold, log, LANES)
    assert LANES >= 2 and len(held) >= LANES and len({pid for pid, _ in held}) == 1  # one worker, several batches
    assert summary["input"] == 64 and summary["kept"] + summary["dropped"] == 64 and summary["check"]["ok"]
    assert sorted(first for _, first in every) == list(range(0, 64, 8))  # each batch prepared once


def test_the_summary_and_the_report_say_where_the_time_went(tmp_path):
    dataset(tmp_path, 48)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(
        {"dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 2, "batch_size": 8, "scoring": "device",
         "process": [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.0}}]}))
    proc = djx("process", str(tmp_path / "recipe.yaml"), "--report")
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 0, err
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    breakdown = summary["time_breakdown"]
    phases = breakdown["ops"]["image_text_similarity_filter"]
    # the workers decoded, preprocessed and waited; the scorer assembled and ran the forwards
    assert {"decode", "preprocess", "wait", "forward", "scorer_busy"} <= set(phases)
    assert all(v >= 0 for v in phases.values()) and phases["forward"] > 0 and phases["decode"] > 0
    assert phases["scorer_busy"] >= phases["forward"]
    # busy over the scorer's time from its first call to its last: a share, never above all of it
    assert phases["scorer_span"] >= phases["scorer_busy"]
    assert breakdown["scorer_busy_share"] == pytest.approx(phases["scorer_busy"] / phases["scorer_span"], abs=2e-3)
    assert 0 < breakdown["scorer_busy_share"] <= 1 and set(breakdown["main"]) == {"read", "write"}
    assert "where the time went: main process read" in out + err
    assert "image_text_similarity_filter's scorer: busy" in out + err
    # the report says it too: the run's line, and the op's phases in seconds, the scorer's included
    html = (tmp_path / "out" / "o.analysis" / "report.html").read_text()
    line = re.search(r'<p id="time-run">(.*?)</p>', html, re.S).group(1)
    assert f"Start-up (workers, models) {summary['timing']['startup_seconds']:.1f} s" in line and "Main process: read" in line
    head = re.findall(r"<th>(.*?)</th>", re.search(r'<table id="time-ops">(.*?)</table>', html, re.S).group(1))
    cells = re.findall(r'<td class="n">(.*?)</td>', re.search(
        r'<tr class="time-op" data-op="image_text_similarity_filter">(.*?)</tr>', html, re.S).group(1))
    shown = dict(zip(head[1:], cells))
    assert float(shown["forward"]) == round(phases["forward"], 2) and float(shown["scorer busy"]) > 0
    assert float(shown["wait for the scorer"]) == round(phases["wait"], 2)
    # the start-up's parts: the main process, the workers' start and set-up (of it the wait for the
    # scorer's model), the first batch; they add up to the start-up
    timing = summary["timing"]
    parts = timing["startup_parts"]
    assert set(parts) == {"main", "workers_start", "worker_setup", "imports", "host_side", "scorer_wait",
                          "workers_ready", "first_batch", "scorer_start", "scorer_imports", "scorer_load"}
    # the scorer's own start-up, beside the workers': it was ready before they were
    assert parts["scorer_start"] + parts["scorer_imports"] + parts["scorer_load"] <= parts["workers_ready"] + 0.01
    assert parts["scorer_imports"] > 0 and parts["scorer_load"] > 0
    assert parts["workers_ready"] >= parts["worker_setup"] >= parts["scorer_wait"] >= 0
    assert parts["worker_setup"] >= parts["host_side"] > 0 and parts["worker_setup"] >= parts["imports"] > 0
    assert abs(parts["main"] + parts["workers_ready"] + parts["first_batch"] - timing["startup_seconds"]) < 0.02
    assert "worker set-up" in out + err and "waiting for the scorer's models" in out + err
    # the same run with the model in each worker: no scorer, the forwards are the workers'
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(
        {"dataset_path": "data.jsonl", "export_path": "out2/o.jsonl", "np": 2, "batch_size": 8,
         "process": [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.0}}]}))
    proc = djx("process", str(tmp_path / "recipe.yaml"), "--quiet")
    assert proc.wait(timeout=GUARD_S) == 0
    phases = json.loads((tmp_path / "out2" / "o.summary.json").read_text())["time_breakdown"]["ops"][
        "image_text_similarity_filter"]
    assert phases["forward"] > 0 and "wait" not in phases and "scorer_busy" not in phases
    assert os.path.exists(tmp_path / "out2" / "o.jsonl")
