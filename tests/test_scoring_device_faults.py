"""scoring: device when processes die: a preparing worker killed while its request waits at the
scorer is replaced and its batch scored again (nothing rejected, nothing lost); a whole run killed
with -9 mid-way resumes with the same command to the outputs of a run never interrupted, each
sample once. Runs are stopped at known points by state (a held batch, a marker file), never by time."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO_DIR, read_jsonl_file, write_jsonl_file
from helpers import GUARD_S, PLUGINS_DIR, djx, hold, kill_when, release

pytestmark = [pytest.mark.slow, pytest.mark.models]

CLIP = str(REPO_DIR / "tests" / "assets" / "models" / "tiny-clip")
COLOURS = ["red", "green", "blue", "yellow"]

# A CLIP filter whose preparing worker dies (SIGKILL, from the scorer) while the scorer holds the
# request of the batch with sample `at`: once per marker file.
KILL_PREPARER = '''
import os, signal
from dataclasses import dataclass
from djx import register_op
from djx.ops.common.prepared import PreparedPairs
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter


@dataclass
class MarkedPairs(PreparedPairs):
    pid: int = 0  # the preparing worker, when its batch holds the marked sample


@register_op("kill_preparer_clip_filter")
class KillPreparerClip(ImageTextSimilarityFilter):
    def __init__(self, at: int = 0, marker: str = "", **kw):
        super().__init__(**kw)
        self.at, self.marker = at, marker

    def prepare(self, batch, processor, text_len):
        prepared, plan = super().prepare(batch, processor, text_len)
        mine = any(s.get("id") == self.at for s in batch.samples)
        return MarkedPairs(**vars(prepared), pid=os.getpid() if mine else 0), plan

    def score_parts(self, loaded, parts, fault=(), counters=None):
        for part in parts:
            if getattr(part, "pid", 0) and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os.kill(part.pid, signal.SIGKILL)  # it waits for these very scores
        return super().score_parts(loaded, parts, fault, counters)
'''


# A CLIP filter whose scoring (in the scorer) waits while the file `hold` exists, saying so in `held`.
HOLD_SCORER = '''
import os, time
from djx import register_op
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter


@register_op("held_scorer_clip_filter")
class HeldScorerClip(ImageTextSimilarityFilter):
    def __init__(self, hold: str = "", held: str = "", **kw):
        super().__init__(**kw)
        self.hold, self.held = hold, held

    def score_parts(self, loaded, parts, fault=(), counters=None):
        while os.path.exists(self.hold):
            open(self.held, "a").close()
            time.sleep(0.01)
        return super().score_parts(loaded, parts, fault, counters)
'''


def dataset(folder: Path, n: int) -> Path:
    from PIL import Image
    (folder / "images").mkdir(exist_ok=True)
    for k in range(12):
        Image.new("RGB", (40 + 3 * k, 48), COLOURS[k % 4]).save(folder / "images" / f"{k}.png")
    return write_jsonl_file(folder / "data.jsonl", [
        {"id": i, "text": f"<__dj__image> a {COLOURS[(i // 3) % 4]} square number {i}", "images": [f"images/{i % 12}.png"]}
        for i in range(n)])


def records(path: Path) -> list[dict]:
    """The records with their stats rounded to 1e-6 (which batches the scorer joins depends on
    timing, and a forward of another size may change the last float digits) and no signature."""
    out = []
    for rec in read_jsonl_file(path):
        rec.pop("__djx__stats_provenance__", None)
        rec["images"] = [os.path.basename(p) for p in rec.get("images", [])]  # each run has its folder
        stats = rec.get("__dj__stats__", {})
        for key, value in stats.items():
            stats[key] = [round(v, 6) for v in value] if isinstance(value, list) else value
        out.append(rec)
    return out


def outputs(folder: Path) -> tuple:
    return tuple(records(folder / "out" / name) for name in ("o.jsonl", "o.dropped.jsonl"))


def write_recipe(folder: Path, ops: list, plugins: list, **keys) -> Path:
    recipe = {"dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 2, "batch_size": 8,
              "scoring": "device", "custom_ops": [str(p) for p in plugins], "process": ops, **keys}
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def run_to_end(recipe: Path) -> dict:
    proc = djx("process", str(recipe), "--quiet")
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    return json.loads((recipe.parent / "out" / "o.summary.json").read_text())


def test_a_preparer_killed_while_the_scorer_holds_its_request_is_replaced_and_nothing_is_lost(tmp_path):
    plugin = tmp_path / "kill_preparer.py"
    plugin.write_text(KILL_PREPARER)
    summaries = {}
    for name, marker in (("ref", "never"), ("killed", "died")):
        folder = tmp_path / name
        folder.mkdir()
        dataset(folder, 40)
        if marker == "never":
            (folder / marker).write_text("")
        op = {"kill_preparer_clip_filter": {"hf_clip": CLIP, "min_score": 0.08, "at": 13,
                                            "marker": str(folder / marker)}}
        summaries[name] = run_to_end(write_recipe(folder, [op], [plugin]))
    killed = summaries["killed"]
    assert (tmp_path / "killed" / "died").exists() and killed["worker_restarts"] == 1
    assert killed["rejected"] == 0 and killed["check"]["ok"]
    assert outputs(tmp_path / "killed") == outputs(tmp_path / "ref")
    assert killed["kept"] + killed["dropped"] == 40 and killed["kept"] > 0 and killed["dropped"] > 0


def test_a_run_killed_with_minus_9_resumes_to_the_outputs_of_a_run_never_interrupted(tmp_path):
    ops = [{"hold_mapper": {"hold_file": str(tmp_path / "run" / "hold")}},
           {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.08}}]
    plugins = [PLUGINS_DIR / "chaos_ops.py"]
    for name in ("ref", "run"):
        (tmp_path / name).mkdir()
        dataset(tmp_path / name, 96)
    run_to_end(write_recipe(tmp_path / "ref", ops, plugins, checkpoint_every=2))
    recipe = write_recipe(tmp_path / "run", ops, plugins, checkpoint_every=2)
    hold(tmp_path / "run", 40 + 16)
    proc = djx("process", str(recipe), "--quiet", start_new_session=True)
    kill_when(tmp_path / "run", proc, 40)  # the driver, its workers and the scorer: one process group
    assert not (tmp_path / "run" / "out" / "o.jsonl").exists()
    release(tmp_path / "run")
    final = djx("process", str(recipe), "--quiet")
    out, err = final.communicate()
    assert final.returncode == 0, err
    assert "resuming" in out + err
    assert outputs(tmp_path / "run") == outputs(tmp_path / "ref")
    summary = json.loads((tmp_path / "run" / "out" / "o.summary.json").read_text())
    assert summary["resumed"] and summary["input"] == 96 and summary["check"]["ok"] and summary["rejected"] == 0
    kept, dropped = outputs(tmp_path / "run")
    assert sorted(r["id"] for r in kept + dropped) == list(range(96))


def test_a_held_scorer_stops_the_reading_at_the_batches_in_flight_and_the_run_then_completes(tmp_path):
    """Back-pressure: while the scorer holds every request, the run reads no batch past its
    in-flight bound (the preparing workers wait; nothing piles up), then finishes every sample."""
    import threading

    from djx import Pipeline
    from djx.core.executors.base import InputBatch
    from djx.core.executors.local.executor import LocalExecutor
    from djx.core.recipe.recipe import recipe_from_dict
    from djx.core.records import Item
    plugin = tmp_path / "held_scorer.py"
    plugin.write_text(HOLD_SCORER)
    hold, held = tmp_path / "hold", tmp_path / "held"
    hold.write_text("")
    recs = read_jsonl_file(dataset(tmp_path, 80))
    for rec in recs:
        rec["images"] = [str(tmp_path / p) for p in rec["images"]]
    op = {"held_scorer_clip_filter": {"hf_clip": CLIP, "min_score": 0.08, "hold": str(hold), "held": str(held)}}
    recipe = recipe_from_dict({"dataset_path": str(tmp_path / "data.jsonl"), "export_path": str(tmp_path / "o.jsonl"),
                               "np": 2, "scoring": "device", "custom_ops": [str(plugin)], "process": [op]},
                              base_dir=str(tmp_path))
    pipe = Pipeline(recipe=recipe)
    # a bound below the 10 batches the dataset makes (the default, 4 x the 8 the workers hold, is above)
    ex = LocalExecutor(pipe.chain(), pipe.plan(2), "spawn", (str(plugin),), str(tmp_path), max_in_flight=6,
                       log=lambda *a: None, scoring="device")
    pulled, past_bound, reached = [], [], []

    def source():
        for k, start in enumerate(range(0, len(recs), 8)):
            if k >= ex.max_in_flight and hold.exists():
                past_bound.append(k)  # read while nothing can finish: not bounded
            pulled.append(k)
            yield InputBatch([Item(i, record=recs[i]) for i in range(start, start + 8)])

    def release():  # once the scorer holds and the reading has reached its bound (a state, not a time)
        deadline = time.monotonic() + GUARD_S  # only against a hang: the test then fails
        while not (held.exists() and len(pulled) >= ex.max_in_flight) and time.monotonic() < deadline:
            time.sleep(0.01)
        reached.append(held.exists() and len(pulled) >= ex.max_in_flight)
        hold.unlink()
    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    results = list(ex.run(source()))
    releaser.join()
    assert reached == [True], "the scorer never held, or the run read fewer batches than its bound"
    assert not past_bound, f"batches {past_bound} were read past {ex.max_in_flight} in flight while the scorer held"
    assert sum(len(r.kept) + len(r.dropped) for r in results) == 80 and not any(r.rejected for r in results)


@pytest.mark.parametrize("scoring", ["device", "workers"])
def test_a_model_that_does_not_load_stops_the_run_in_one_line_wherever_it_loads(tmp_path, scoring):
    """A truncated weights file: the same one line naming the op and the model, whether the
    device's scorer loads it (scoring: device) or each worker does; no traceback, exit 1."""
    broken = tmp_path / "broken-clip"
    shutil.copytree(CLIP, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:3000])
    dataset(tmp_path, 8)
    recipe = write_recipe(tmp_path, [{"image_text_similarity_filter": {"hf_clip": str(broken)}}], [],
                          scoring=scoring)
    proc = djx("process", str(recipe), "--quiet")
    _, err = proc.communicate()
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"djx: error: op image_text_similarity_filter: its model '{broken}' (kind 'hf_clip') did not load: "
        "SafetensorError: "), err
