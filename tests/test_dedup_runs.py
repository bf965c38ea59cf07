"""Deduplicators in real runs: `djx process` keeps the first sample of each group, writes the others
to the dropped output naming the sample each duplicates, rejects a sample whose image cannot be
decoded, and `djx check` accounts for every sample. A run stopped inside the dedup phase and run
again gives the same outputs as one never stopped."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import read_jsonl_file

ASSETS = Path(__file__).resolve().parent / "assets" / "dj_fixtures"
FIXTURE = json.loads((ASSETS / "dedup.json").read_text(encoding="utf-8"))
PHASH = next(c for c in FIXTURE["cases"] if c["op"] == "image_deduplicator" and c["params"] ==
             {"method": "phash", "consider_text": False})
DROP, POS, STATS = "__dj__drop__", "__dj__pos__", "__dj__stats__"


def image_rows(tmp_path: Path) -> list[dict]:
    """The fixture's image samples (absolute paths), then one whose image is not an image."""
    rows = [json.loads(line) for line in (ASSETS / FIXTURE["images"]).read_text().splitlines()]
    rows = [{**r, "images": [str(ASSETS / p) for p in r["images"]]} for r in rows]
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    return rows + [{"id": len(rows), "text": "a broken photo", "images": [str(tmp_path / "broken.jpg")]}]


def write_recipe(tmp_path: Path, rows: list[dict], process: list[dict], **keys) -> Path:
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                         encoding="utf-8")
    recipe = {"dataset_path": str(tmp_path / "data.jsonl"), "export_path": str(tmp_path / "out" / "kept.jsonl"),
              "np": 2, "batch_size": 4, "process": process, **keys}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.mark.slow
def test_a_recipe_of_deduplicators_keeps_the_first_of_each_group_and_names_it_in_the_dropped(tmp_path, djx_cli):
    rows = image_rows(tmp_path)
    recipe = write_recipe(tmp_path, rows, [{"image_deduplicator": {"method": "phash"}},
                                           {"document_deduplicator": {}},
                                           {"text_length_filter": {"min_len": 8}}])
    res = djx_cli("process", "--config", recipe)
    assert res.rc == 0, res.out + res.err
    out = tmp_path / "out"
    kept, dropped = read_jsonl_file(out / "kept.jsonl"), read_jsonl_file(out / "kept.dropped.jsonl")
    rejected = read_jsonl_file(out / "kept.rejected.jsonl")

    # Data-Juicer's order: image groups first, then text groups among what is left, then the length filter
    hashes = PHASH["hashes"]["__dj__imagehash"]
    after_images = PHASH["kept"]
    first_text = {}
    for i in after_images:
        first_text.setdefault(rows[i]["text"], i)
    expected = [i for i in after_images if first_text[rows[i]["text"]] == i and len(rows[i]["text"]) >= 8]
    assert [s["id"] for s in kept] == expected

    for s in dropped:
        i, drop = s["id"], s[DROP]
        if i not in after_images:  # an image duplicate, whatever a later op would have said of it
            first = hashes.index(hashes[i])
            assert drop == {"op": "image_deduplicator", "op_index": 0, "reason": f"duplicate of {first}"}
            assert first < i and first in after_images and s[STATS]["__dj__imagehash"] == hashes[i]
        elif first_text[rows[i]["text"]] != i:
            assert drop["op"] == "document_deduplicator"
            assert drop["reason"] == f"duplicate of {first_text[rows[i]['text']]}"
        else:  # the length filter drops the first "a photo" too: its duplicates still name it
            assert drop["op"] == "text_length_filter" and len(rows[i]["text"]) < 8
    summary = json.loads((out / "kept.summary.json").read_text())
    ops = {op["name"]: op for op in summary["ops"]}
    assert ops["image_deduplicator"]["dropped"] == len(rows) - 1 - len(after_images)
    assert ops["document_deduplicator"]["in"] == len(after_images)  # as in Data-Juicer: after the image groups
    assert ops["text_length_filter"]["in"] == len(first_text)

    assert [r[POS] for r in rejected] == [len(rows) - 1] and rejected[0]["code"] == "bad_image"
    assert "broken.jpg" in rejected[0]["reason"]
    assert (summary["input"], summary["kept"], summary["dropped"], summary["rejected"]) == \
        (len(rows), len(kept), len(dropped), 1)
    check = djx_cli("check", out / "kept.jsonl", "--recipe", recipe)
    assert check.rc == 0 and "check passed" in check.out, check.out + check.err


def test_djx_check_refuses_a_duplicate_that_names_no_earlier_sample(tmp_path, djx_cli):
    rows = [{"id": i, "text": t} for i, t in enumerate(["same text", "other", "same text", "same text"])]
    recipe = write_recipe(tmp_path, rows, [{"document_deduplicator": {}}], np=1)
    assert djx_cli("process", "--config", recipe).rc == 0
    dropped_path = tmp_path / "out" / "kept.dropped.jsonl"
    dropped = read_jsonl_file(dropped_path)
    assert [(s["id"], s[DROP]["reason"]) for s in dropped] == [(2, "duplicate of 0"), (3, "duplicate of 0")]
    dropped[1][DROP]["reason"] = "duplicate of 3"  # itself: not an earlier sample
    dropped_path.write_text("".join(json.dumps(s) + "\n" for s in dropped))
    check = djx_cli("check", tmp_path / "out" / "kept.jsonl", "--recipe", recipe)
    assert check.rc != 0 and "a deduplicator, but not an earlier sample" in check.out + check.err


TEXT_KEYS = {"batch_size": 8, "np": 1, "start_method": "fork", "checkpoint_every": 2, "export_dropped": True,
             "process": [{"document_minhash_deduplicator": {"jaccard_threshold": 0.5}},
                         {"document_deduplicator": {"lowercase": True}}]}


def text_run(tmp_path: Path, folder: str, **kw) -> dict:
    from djx import Pipeline
    rows = [json.loads(line) for line in (ASSETS / FIXTURE["texts"]).read_text(encoding="utf-8").splitlines()]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows * 2))
    return Pipeline(dataset_path=str(tmp_path / "data.jsonl"), **TEXT_KEYS).run(
        export_path=str(tmp_path / folder / "o.jsonl"), progress=False, log=lambda *a: None, **kw)


def outputs(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "o.jsonl").read_bytes(), (folder / "o.dropped.jsonl").read_bytes()


class Stop(Exception):
    """The process dies here (as a kill -9 would: nothing after this point runs)."""


@pytest.mark.parametrize("where", ["after the dedup files are written", "half way through moving them"])
def test_a_run_stopped_in_the_dedup_phase_resumes_to_the_same_outputs(tmp_path, monkeypatch, where):
    import djx.core.run.ledger as ledger
    from djx.core.io.outputs import OutputWriter
    reference = text_run(tmp_path, "ref")
    assert reference["check"]["ok"] and reference["dropped"] > 0
    if where == "after the dedup files are written":
        real = ledger.deduplicate

        def stop_after(*a, **kw):
            real(*a, **kw)
            raise Stop()
        monkeypatch.setattr(ledger, "deduplicate", stop_after)
    else:
        def stop_half_way(self):  # the new kept part in place, the new dropped part not yet
            for kind in ("kept", "dropped"):
                self._files.pop(kind).close()
            import os
            os.replace(self.part("kept.dedup"), self.part("kept"))
            raise Stop()
        monkeypatch.setattr(OutputWriter, "move_duplicates", stop_half_way)
    with pytest.raises(Stop):
        text_run(tmp_path, "out")
    assert not (tmp_path / "out" / "o.jsonl").exists()
    monkeypatch.undo()
    summary = text_run(tmp_path, "out")
    assert summary["resumed"] and summary["check"]["ok"]
    assert (summary["kept"], summary["dropped"]) == (reference["kept"], reference["dropped"])
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")


def test_a_memory_budget_of_two_keys_spills_to_disk_and_gives_the_same_outputs(tmp_path):
    """dedup_memory_entries bounds each table in memory; the keys past it go to a file in the run's
    state folder, and the outputs are those of a run that held everything in memory."""
    reference = text_run(tmp_path, "ref")
    TEXT_KEYS["dedup_memory_entries"] = 2
    try:
        summary = text_run(tmp_path, "out")
    finally:
        del TEXT_KEYS["dedup_memory_entries"]
    assert summary["check"]["ok"] and summary["dropped"] == reference["dropped"]
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")
    assert not list((tmp_path / "out").glob(".*djx-state*"))  # the table files went with the state


@pytest.mark.slow
@pytest.mark.parametrize("recipe", FIXTURE["recipes"], ids=lambda r: "-".join(next(iter(op)) for op in r["process"]))
def test_whole_recipes_keep_what_data_juicer_keeps(tmp_path, djx_cli, recipe):
    """Deduplicators among filters, one after another: djx's streaming pass and dedup phase keep the
    samples Data-Juicer 1.6.1 keeps running the ops one after the other (dedup.json's recipes), and
    as many samples pass each op."""
    if recipe["rows"] == "texts":
        rows = [json.loads(line) for line in (ASSETS / FIXTURE["texts"]).read_text(encoding="utf-8").splitlines()]
    else:
        rows = image_rows(tmp_path)[:-1]
    path = write_recipe(tmp_path, rows, recipe["process"])
    res = djx_cli("process", "--config", path)
    assert res.rc == 0, res.out + res.err
    assert [s["id"] for s in read_jsonl_file(tmp_path / "out" / "kept.jsonl")] == recipe["kept"]
    summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert [op["kept"] for op in summary["ops"]] == recipe["passing"]  # each op's tally is Data-Juicer's
    check = djx_cli("check", tmp_path / "out" / "kept.jsonl", "--recipe", path)
    assert check.rc == 0 and "check passed" in check.out, check.out + check.err


def test_djx_ops_lists_the_deduplicators_as_their_own_kind(djx_cli):
    res = djx_cli("ops")
    assert res.rc == 0
    for name in ("document_deduplicator", "image_deduplicator", "document_minhash_deduplicator",
                 "document_simhash_deduplicator", "ray_document_deduplicator", "ray_image_deduplicator",
                 "ray_bts_minhash_deduplicator"):
        assert f"{name}  (deduplicator)" in res.out
    one = djx_cli("ops", "document_minhash_deduplicator")
    assert "jaccard_threshold: float = 0.7" in one.out and "stats: __dj__minhash" in one.out


def test_the_plug_in_deduplicator_of_the_docs_runs_from_a_recipe(tmp_path, djx_cli):
    import re
    doc = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "Deduplicator" in b]
    (tmp_path / "caption_ops.py").write_text(code)
    rows = [{"id": i, "text": t} for i, t in enumerate(["A cat", "a dog", "a CAT", "A Dog", "a bird"])]
    recipe = write_recipe(tmp_path, rows, [{"caption_deduplicator": {}}], np=1, custom_ops=["caption_ops.py"])
    assert djx_cli("process", "--config", recipe).rc == 0
    assert [s["id"] for s in read_jsonl_file(tmp_path / "out" / "kept.jsonl")] == [0, 1, 4]
    dropped = read_jsonl_file(tmp_path / "out" / "kept.dropped.jsonl")
    assert [(s["id"], s[DROP]["reason"]) for s in dropped] == [(2, "duplicate of 0"), (3, "duplicate of 1")]


def test_the_ray_executor_deduplicates_as_the_local_one(tmp_path, ray_address):
    """The dedup phase runs in the run's ledger, after either engine's streaming pass: Ray's outputs
    and counts are the local executor's, and its check passes."""
    from djx import Pipeline
    from helpers import assert_same_run, outputs_by_position
    rows = image_rows(tmp_path)
    write_recipe(tmp_path, rows, [])
    both = {}
    for executor in ("local", "ray"):
        keys = {"ray_address": ray_address} if executor == "ray" else {"start_method": "fork"}
        summary = Pipeline(dataset_path=str(tmp_path / "data.jsonl"), np=2, batch_size=4, executor=executor,
                           process=[{"image_deduplicator": {"method": "ahash"}},
                                    {"document_minhash_deduplicator": {"jaccard_threshold": 0.5}},
                                    {"text_length_filter": {"min_len": 8}}], **keys).run(
            export_path=str(tmp_path / executor / "kept.jsonl"), progress=False, log=lambda *a: None)
        both[executor] = (summary, outputs_by_position(tmp_path / executor))
    ray_summary = assert_same_run(both)
    assert ray_summary["dropped"] > 0 and ray_summary["rejected"] == 1


def test_a_sample_a_later_op_rejects_still_has_its_duplicates_dropped(tmp_path, djx_cli):
    """In Data-Juicer's order the deduplicator groups a sample before a later op fails on it: its
    duplicates go, as there. djx rejects it with its reason (and its hash) and drops the duplicates."""
    good = str(ASSETS / "dedup" / "p0.jpg")
    (tmp_path / "broken.jpg").write_bytes(b"not an image")
    rows = [{"id": 0, "text": "a cat on a mat", "images": [str(tmp_path / "broken.jpg")]},
            {"id": 1, "text": "a cat on a mat", "images": [good]},
            {"id": 2, "text": "a dog on a log", "images": [good]}]
    recipe = write_recipe(tmp_path, rows, [{"document_deduplicator": {}}, {"image_shape_filter": {}}], np=1)
    assert djx_cli("process", "--config", recipe).rc == 0
    out = tmp_path / "out"
    assert [s["id"] for s in read_jsonl_file(out / "kept.jsonl")] == [2]
    (dup,) = read_jsonl_file(out / "kept.dropped.jsonl")
    assert dup["id"] == 1 and dup[DROP]["reason"] == "duplicate of 0"
    (rejected,) = read_jsonl_file(out / "kept.rejected.jsonl")
    assert rejected[POS] == 0 and rejected["code"] == "bad_image" and "__dj__hash" in rejected[STATS]
    check = djx_cli("check", out / "kept.jsonl", "--recipe", recipe)
    assert check.rc == 0 and "check passed" in check.out, check.out + check.err
    # the same recipe in memory (Pipeline.results) groups the rejected sample too: the same outcomes
    from djx import Pipeline
    outcomes = list(Pipeline.from_recipe(str(recipe)).results([dict(r) for r in rows]))
    assert [(o.outcome, o.reason if o.outcome == "dropped" else None) for o in outcomes] == \
        [("rejected", None), ("dropped", "duplicate of 0"), ("kept", None)]


@pytest.mark.models
def test_on_ray_a_sample_a_later_model_stage_rejects_still_has_its_duplicates_dropped(tmp_path, ray_address):
    """A model op starts a Ray stage of its own; the deduplicator before it is in an earlier stage,
    and a sample the model stage rejects still carries that deduplicator's hash to the dedup phase."""
    from djx import Pipeline
    good = str(ASSETS / "dedup" / "p0.jpg")
    (tmp_path / "broken.jpg").write_bytes(b"not an image")
    rows = [{"id": 0, "text": "<__dj__image> a cat on a mat", "images": [str(tmp_path / "broken.jpg")]},
            {"id": 1, "text": "<__dj__image> a cat on a mat", "images": [good]},
            {"id": 2, "text": "<__dj__image> a dog on a log", "images": [good]}]
    write_recipe(tmp_path, rows, [])
    model = str(Path(__file__).resolve().parent / "assets" / "models" / "tiny-clip")
    summary = Pipeline(dataset_path=str(tmp_path / "data.jsonl"), np=1, executor="ray", ray_address=ray_address,
                       process=[{"document_deduplicator": {}},
                                {"image_text_similarity_filter": {"hf_clip": model, "min_score": 0.0}}]).run(
        export_path=str(tmp_path / "out" / "kept.jsonl"), progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and (summary["kept"], summary["dropped"], summary["rejected"]) == (1, 1, 1)
    (dup,) = read_jsonl_file(tmp_path / "out" / "kept.dropped.jsonl")
    assert dup["id"] == 1 and dup[DROP]["reason"] == "duplicate of 0"
