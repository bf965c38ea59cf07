"""image_semantic_deduplicator in real runs on the shipped tiny CLIP: re-encoded, resized, rotated
(EXIF) and brightened copies of a photo are one group, the first in input order is kept and named
by the others, distinct photos and samples without images stay, a broken image is rejected; the
embeddings are stats a later run reuses without loading the model; a run stopped in the dedup phase
resumes to the same outputs; `djx analyze` says how many samples each threshold would remove."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from djx import Pipeline, RecipeError, build_op
from djx.ops.common.embeddings import decode_embedding
from helpers import read_jsonl_file
from test_dedup_runs import DROP, POS, STATS, Stop, image_rows, write_recipe

pytestmark = [pytest.mark.slow, pytest.mark.models]

CLIP = str(Path(__file__).resolve().parent / "assets" / "models" / "tiny-clip")
OP = {"image_semantic_deduplicator": {"hf_clip": CLIP}}
# dedup_images.jsonl at the default threshold 0.95: each duplicate and the sample it names
GROUPS = {1: 0, 2: 0,      # p0 as a JPEG at quality 60 and as a PNG
          4: 3, 5: 3,      # p1 at half size, at JPEG quality 25
          7: 6,            # p2 and its copy stored sideways with an EXIF orientation
          11: 10, 12: 10,  # p4 at quality 10, and brightened
          17: 16, 18: 16,  # the same two photos re-encoded, and in the other order
          19: 0,           # p0 twice is p0
          21: 20}          # three photos, each re-encoded or resized


def run(tmp_path: Path, folder: str, rows: list[dict], process=(OP,), **keys) -> dict:
    data = tmp_path / f"{folder}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    keys = {k: v for k, v in {"np": 1, "batch_size": 4, "start_method": "fork", **keys}.items() if v is not None}
    return Pipeline(dataset_path=str(data), process=list(process), **keys).run(
        export_path=str(tmp_path / folder / "kept.jsonl"), progress=False, log=lambda *a: None)


def test_copies_of_a_photo_are_one_group_and_the_first_is_kept(tmp_path, djx_cli):
    rows = image_rows(tmp_path)  # the fixture's photos and copies, then a broken JPEG
    recipe = write_recipe(tmp_path, rows, [OP])
    res = djx_cli("process", "--config", recipe)
    assert res.rc == 0, res.out + res.err
    out = tmp_path / "out"
    kept, dropped = read_jsonl_file(out / "kept.jsonl"), read_jsonl_file(out / "kept.dropped.jsonl")
    assert [s["id"] for s in kept] == [i for i in range(len(rows) - 1) if i not in GROUPS]
    assert {s["id"]: s[DROP] for s in dropped} == {
        i: {"op": "image_semantic_deduplicator", "op_index": 0, "reason": f"duplicate of {k}"}
        for i, k in GROUPS.items()}
    # distinct photos (p0, p1, p2, p3 and its crop, p4) and the three samples without images stay
    assert {0, 3, 6, 8, 9, 10, 13, 14, 15} <= {s["id"] for s in kept}
    assert all(s[STATS]["image_embedding"] == "" for s in kept if not s["images"])
    (rejected,) = read_jsonl_file(out / "kept.rejected.jsonl")
    assert rejected[POS] == len(rows) - 1 and rejected["code"] == "bad_image" and "broken.jpg" in rejected["reason"]
    check = djx_cli("check", out / "kept.jsonl", "--recipe", recipe)
    assert check.rc == 0 and "check passed" in check.out, check.out + check.err


def test_a_later_run_reuses_the_embeddings_and_a_lower_threshold_groups_more(tmp_path):
    """The embeddings are stats like any other: re-filtering the export with a new threshold loads
    no model, and at 0.75 the look-alike p3 (cosine ~0.8 to p0 under the tiny CLIP) joins p0."""
    rows = image_rows(tmp_path)[:-1]
    first = run(tmp_path, "one", rows)
    assert first["check"]["ok"] and first["kept"] == len(rows) - len(GROUPS)
    export = read_jsonl_file(tmp_path / "one" / "kept.jsonl")
    again = run(tmp_path, "two", export, process=[{"image_semantic_deduplicator": {"hf_clip": CLIP, "threshold": 0.75}}])
    assert again["check"]["ok"] and again["ops"][0]["reused_stats"] == first["kept"]
    assert again["max_model_loads_per_process"] == 0
    reasons = {s["id"]: s[DROP]["reason"] for s in read_jsonl_file(tmp_path / "two" / "kept.dropped.jsonl")}
    assert reasons.get(8) == "duplicate of 0"  # p3 now looks like p0
    assert 3 not in reasons  # p1 is nothing like p0


@pytest.mark.parametrize("where", ["after the dedup files are written", "half way through moving them"])
def test_a_run_stopped_in_the_dedup_phase_resumes_to_the_same_outputs(tmp_path, monkeypatch, where):
    import djx.core.run.ledger as ledger
    from djx.core.io.outputs import OutputWriter
    rows = image_rows(tmp_path)
    keys = {"checkpoint_every": 2, "export_dropped": True}
    reference = run(tmp_path, "ref", rows, **keys)
    assert reference["check"]["ok"] and reference["dropped"] == len(GROUPS)
    if where == "after the dedup files are written":
        real = ledger.deduplicate

        def stop_after(*a, **kw):
            real(*a, **kw)
            raise Stop()
        monkeypatch.setattr(ledger, "deduplicate", stop_after)
    else:
        def stop_half_way(self):  # the new kept part in place, the new dropped part not yet
            import os
            for kind in ("kept", "dropped"):
                self._files.pop(kind).close()
            os.replace(self.part("kept.dedup"), self.part("kept"))
            raise Stop()
        monkeypatch.setattr(OutputWriter, "move_duplicates", stop_half_way)
    with pytest.raises(Stop):
        run(tmp_path, "out", rows, **keys)
    monkeypatch.undo()
    summary = run(tmp_path, "out", rows, **keys)
    assert summary["resumed"] and summary["check"]["ok"]
    for name in ("kept.jsonl", "kept.dropped.jsonl", "kept.rejected.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_embeddings_past_the_memory_budget_spill_and_give_the_same_outputs(tmp_path):
    rows = image_rows(tmp_path)
    reference = run(tmp_path, "ref", rows)
    summary = run(tmp_path, "out", rows, dedup_memory_entries=2)
    assert summary["check"]["ok"] and summary["dropped"] == reference["dropped"] == len(GROUPS)
    for name in ("kept.jsonl", "kept.dropped.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
    assert not list((tmp_path / "out").glob(".*djx-state*"))


def test_djx_analyze_says_how_many_samples_each_threshold_would_remove(tmp_path, djx_cli):
    rows = image_rows(tmp_path)[:-1]
    recipe = write_recipe(tmp_path, rows, [{"text_length_filter": {"min_len": 1}}, OP])
    assert djx_cli("process", "--config", recipe, "--quiet").rc == 0
    res = djx_cli("analyze", tmp_path / "out" / "kept.jsonl")
    assert res.rc == 0, res.out + res.err
    assert f"image_semantic_deduplicator (process[1]): samples each threshold would remove, of {len(rows)}" in res.out
    assert f"threshold 0.95: {len(GROUPS):>8}" in res.out and "<- this run" in res.out
    (table,) = (tmp_path / "out" / "kept.analysis").glob("*.thresholds.csv")
    lines = table.read_text().splitlines()
    assert lines[0] == "op,op_index,threshold,seen,removed"
    removed = [int(line.split(",")[-1]) for line in lines[1:]]
    assert removed == sorted(removed, reverse=True) and len(GROUPS) in removed


def test_a_dry_run_over_an_export_says_what_each_threshold_would_remove_and_the_run_does_so(tmp_path, djx_cli):
    """`--dry-run` sweeps the thresholds over the embeddings an export carries (those djx vouches
    for: one tampered with is left out), and the run then removes what it said; over data without
    embeddings it says how to get the table."""
    rows = image_rows(tmp_path)[:-1]
    n = run(tmp_path, "one", rows)["kept"]
    export = read_jsonl_file(tmp_path / "one" / "kept.jsonl")

    def recipe(name: str, data: list[dict]) -> Path:
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
        path = tmp_path / f"{name}.yaml"
        path.write_text(json.dumps({"dataset_path": str(tmp_path / f"{name}.jsonl"), "np": 1,
                                    "export_path": str(tmp_path / name / "kept.jsonl"),
                                    "process": [{"image_semantic_deduplicator": {"hf_clip": CLIP, "threshold": 0.75}}]}))
        return path

    view = djx_cli("process", "--config", recipe("two", export), "--dry-run")
    assert view.rc == 0, view.out + view.err
    assert f"samples each threshold would remove, of the {n} of {n} input samples that carry its embeddings" in view.out
    (line,) = [x.strip() for x in view.out.splitlines() if x.endswith("<- this recipe")]
    assert line.startswith("threshold 0.75:")
    said = int(line.split(":")[1].split()[0])
    assert djx_cli("process", "--config", tmp_path / "two.yaml", "--quiet").rc == 0
    assert said == len(read_jsonl_file(tmp_path / "two" / "kept.dropped.jsonl")) > 0
    # an embedding copied from another sample no longer matches its signature: not counted
    forged = [dict(r) for r in export]
    forged[1] = {**forged[1], STATS: {**forged[1][STATS], "image_embedding": forged[0][STATS]["image_embedding"]}}
    view = djx_cli("process", "--config", recipe("forged", forged), "--dry-run")
    assert f"of the {n - 1} of {n} input samples" in view.out, view.out
    view = djx_cli("process", "--config", recipe("raw", rows), "--dry-run")
    assert f"none of the {len(rows)} input samples carries embeddings djx vouches for" in view.out, view.out
    assert "--limit 1000 --report" in view.out


def test_a_threshold_outside_0_1_is_refused_at_load():
    with pytest.raises(RecipeError, match="threshold"):
        build_op("image_semantic_deduplicator", {"hf_clip": CLIP, "threshold": 1.5})
    with pytest.raises(RecipeError, match="n_clusters"):
        build_op("image_semantic_deduplicator", {"hf_clip": CLIP, "n_clusters": 0})


def test_djx_ops_lists_it_as_a_deduplicator(djx_cli):
    assert "image_semantic_deduplicator  (deduplicator)" in djx_cli("ops").out
    one = djx_cli("ops", "image_semantic_deduplicator")
    assert "threshold: float = 0.95" in one.out and "stats: image_embedding" in one.out


def test_beside_the_similarity_filter_on_the_same_clip_one_model_and_one_forward_serve_both(tmp_path):
    """The two ops name the same model (hf_clip, dtype): the pool holds one copy, and the filter
    writes the embeddings as it scores, so the deduplicator runs no forward of its own (the run's
    forwards are the filter's alone) and groups as it does alone. Where the filter sees other
    pixels (flipped), the deduplicator embeds for itself."""
    from helpers import outputs_by_position
    rows = [{**r, "text": "<__dj__image> " * len(r["images"]) + r["text"]} for r in image_rows(tmp_path)[:-1]]
    sim = {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": -1.0}}
    flipped = {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": -1.0, "horizontal_flip": True}}
    got = {name: run(tmp_path, name, rows, process=ops) for name, ops in
           (("both", [sim, OP]), ("filter", [sim]), ("alone", [OP]), ("flipped", [flipped, OP]))}
    summary = got["both"]
    assert summary["check"]["ok"] and summary["dropped"] == len(GROUPS)
    assert summary["max_model_loads_per_process"] == 1
    assert all(sum(loads.values()) == 1 for loads in summary["model_loads"].values())
    assert summary["events"]["forwards"] == got["filter"]["events"]["forwards"]  # no forward of its own
    assert got["flipped"]["events"]["forwards"] > got["filter"]["events"]["forwards"]  # embeds for itself
    both, alone = outputs_by_position(tmp_path / "both"), outputs_by_position(tmp_path / "alone")
    for kind in ("kept", "dropped"):
        assert both[kind].keys() == alone[kind].keys()
        for pos, record in both[kind].items():  # the filter's embeddings are the deduplicator's own
            ours, theirs = (decode_embedding(r[STATS]["image_embedding"]) for r in (record, alone[kind][pos]))
            assert (ours is None) == (theirs is None) and (ours is None or np.abs(ours - theirs).max() < 2e-3)
            assert kind == "kept" or record[DROP]["reason"] == alone[kind][pos][DROP]["reason"]
    # with scoring: device the embeddings come back from the scorer with the pair scores
    device = run(tmp_path, "device", rows, process=[sim, OP], scoring="device")
    assert device["check"]["ok"] and device["dropped"] == len(GROUPS)
    assert device["events"]["scorer_pairs"] == sum(len(r["images"]) for r in rows)  # the filter's pairs only
    assert outputs_by_position(tmp_path / "device")["dropped"].keys() == both["dropped"].keys()


def test_the_ray_executor_groups_as_the_local_one(tmp_path, ray_address):
    """The dedup phase runs after either engine's streaming pass: Ray (its stage actors preparing, a
    scoring actor embedding: scoring: device) keeps and drops what local does."""
    from helpers import assert_same_run, outputs_by_position
    rows = image_rows(tmp_path)
    both = {}
    for executor in ("local", "ray"):
        keys = {"ray_address": ray_address, "start_method": None, "scoring": "device"} if executor == "ray" else {}
        summary = run(tmp_path, executor, rows, executor=executor, np=2, **keys)
        both[executor] = (summary, outputs_by_position(tmp_path / executor))
    for kind, records in both["ray"][1].items():  # a forward of another batch size: float16's last bit may differ
        for pos, record in records.items():
            ours, theirs = (r.get(STATS, {}).get("image_embedding") for r in (record, both["local"][1][kind][pos]))
            if ours:
                assert np.abs(decode_embedding(ours) - decode_embedding(theirs)).max() < 2e-3
                record[STATS]["image_embedding"] = theirs
    ray_summary = assert_same_run(both)
    assert ray_summary["dropped"] == len(GROUPS) and ray_summary["rejected"] == 1


def test_with_scoring_device_the_scorer_embeds_and_the_outputs_are_the_workers(tmp_path):
    """scoring: device: the workers decode and run the processor, the device's scorer holds the CLIP
    and embeds the images of batches from both workers in shared forwards."""
    rows = image_rows(tmp_path)
    both = {}
    for scoring in ("workers", "device"):
        summary = run(tmp_path, scoring, rows, np=2, scoring=scoring)
        assert summary["check"]["ok"] and summary["dropped"] == len(GROUPS) and summary["rejected"] == 1
        both[scoring] = summary
        kept = read_jsonl_file(tmp_path / scoring / "kept.jsonl")
        assert [s["id"] for s in kept] == [i for i in range(len(rows) - 1) if i not in GROUPS]
        vectors = [decode_embedding(s[STATS]["image_embedding"]) for s in kept if s["images"]]
        both[scoring + " vectors"] = np.stack(vectors)
    assert np.abs(both["device vectors"] - both["workers vectors"]).max() < 2e-3
    for loads in both["device"]["model_loads"].values():  # the workers only prepared
        assert not any("clip" in label for label in loads), loads
    assert both["device"]["events"]["forwards"] > 0
