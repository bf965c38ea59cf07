"""scoring: device: the workers prepare (decode, the model's processor and tokenizer), the weight
owner of their device scores for all of them (on a GPU: one CUDA context). On the CPU, as here,
the same processes and handoff run, so these tests hold the split to today's results: the same
stats, no model in any worker for the ops the scorer serves, OOM back-off through the scorer,
and a scorer killed mid-run restarted with nothing lost."""
from __future__ import annotations

import json
import os
import signal

import pytest

from djx import Pipeline
from djx.core.recipe.recipe import recipe_from_dict
from conftest import REPO_DIR, read_jsonl_file

pytestmark = [pytest.mark.slow, pytest.mark.models]

MODELS = REPO_DIR / "tests" / "assets" / "models"
DEMO = REPO_DIR / "tests" / "assets" / "demo" / "demo.jsonl"
OPS = [{"text_length_filter": {"min_len": 10}},
       {"image_text_similarity_filter": {"hf_clip": str(MODELS / "tiny-clip"), "min_score": 0.2}},
       {"image_aesthetics_filter": {"hf_scorer_model": str(MODELS / "tiny-aesthetics-predictor-v2-linear"),
                                    "min_score": -1e9}},
       {"image_text_matching_filter": {"hf_blip": str(MODELS / "tiny-blip-itm"), "min_score": 0.5}}]


def run(tmp_path, name, scoring, **keys):
    recipe = {"dataset_path": str(DEMO), "export_path": str(tmp_path / name / "o.jsonl"), "np": 2,
              "batch_size": 16, "scoring": scoring, "process": OPS, **keys}
    summary = Pipeline(**recipe).run(progress=False, log=lambda *a: None)
    out = tmp_path / name
    return summary, read_jsonl_file(out / "o.jsonl"), read_jsonl_file(out / "o.dropped.jsonl")


def assert_same_stats(got: list, ref: list) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in ref]
    for a, b in zip(got, ref):
        assert a["__dj__stats__"].keys() == b["__dj__stats__"].keys()
        for key, value in b["__dj__stats__"].items():
            assert a["__dj__stats__"][key] == pytest.approx(value, abs=1e-6), key


def test_the_device_scorer_gives_the_workers_stats_and_no_worker_loads_its_models(tmp_path):
    ref, ref_kept, ref_dropped = run(tmp_path, "workers", "workers")
    got, kept, dropped = run(tmp_path, "device", "device")
    assert_same_stats(kept, ref_kept)
    assert_same_stats(dropped, ref_dropped)
    assert got["check"]["ok"] and (got["kept"], got["dropped"]) == (ref["kept"], ref["dropped"])
    # the workers prepared only: CLIP and BLIP live in the scorer; the aesthetics op, which has no
    # split, still loads its model in each worker
    for loads in got["model_loads"].values():
        assert not any("clip" in label or "blip" in label for label in loads), loads
        assert any("aesthetics" in label for label in loads), loads
    for loads in ref["model_loads"].values():
        assert any("clip" in label for label in loads), loads
    assert got["events"]["forwards"] > 0
    # each group the scorer scores counts once, with its pairs (the bench's mean group size)
    pairs = sum(len(json.loads(line).get("images", [])) for line in DEMO.read_text().splitlines())
    ev = got["events"]
    assert 1 <= ev["scorer_groups"] <= ev["forwards"] and ev["scorer_pairs"] >= ev["scorer_groups"]
    assert ev["scorer_pairs"] <= 2 * pairs  # CLIP's pairs and BLIP's, each scored once


def test_oom_back_off_runs_in_the_scorer_and_changes_no_score(tmp_path):
    ref, ref_kept, _ = run(tmp_path, "plain", "device")
    got, kept, _ = run(tmp_path, "oom", "device", inject_faults=["oom_above:2"])
    assert got["events"].get("oom_retries", 0) > 0
    assert_same_stats(kept, ref_kept)


def test_a_killed_scorer_is_restarted_and_the_run_loses_nothing(tmp_path):
    from djx.core.executors.base import InputBatch
    from djx.core.executors.local.executor import LocalExecutor
    from djx.core.records import Item
    recipe = recipe_from_dict({"dataset_path": str(DEMO), "export_path": str(tmp_path / "o.jsonl"), "np": 2,
                               "scoring": "device", "process": OPS}, base_dir=str(tmp_path))
    pipe = Pipeline(recipe=recipe)
    records = read_jsonl_file(DEMO)
    for rec in records:
        rec["images"] = [str(DEMO.parent / p) for p in rec["images"]]
    batches = [InputBatch([Item(i, record=records[i]) for i in range(b, min(b + 10, len(records)))])
               for b in range(0, len(records), 10)]

    def lines(kill: bool) -> tuple[list, LocalExecutor, list]:
        logs: list[str] = []
        ex = LocalExecutor(pipe.chain(), pipe.plan(2), "spawn", (), str(tmp_path), log=logs.append,
                           scoring="device")
        out = []
        for result in ex.run(batches):
            out += result.kept + result.dropped + [r.reason.encode() for r in result.rejected]
            if kill and not ex._owners.restarts and "cpu" in ex._owners.procs:
                owner = ex._owners.procs["cpu"]
                os.kill(owner.pid, signal.SIGKILL)
                owner.join()  # dead: the executor restarts it; the workers' next requests wait for it
                kill = False
        return out, ex, logs

    ref, _, _ = lines(False)
    got, ex, logs = lines(True)
    # the same samples with the same verdicts and stats; which batches the scorer joined depends on
    # timing, and a forward of another size may differ in the last float digits (and so the signature)
    assert len(got) == len(ref) == len(records)
    got, ref = ([json.loads(line) for line in run] for run in (got, ref))
    assert [{k: v for k, v in r.items() if k not in ("__dj__stats__", "__djx__stats_provenance__")} for r in got] \
        == [{k: v for k, v in r.items() if k not in ("__dj__stats__", "__djx__stats_provenance__")} for r in ref]
    assert_same_stats(got, ref)
    assert ex._owners.restarts == 1 and any("restarting it" in line for line in logs)
    assert ex.restarts == 0, logs  # no worker died: they waited for the new scorer

