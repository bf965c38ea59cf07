"""The deduplicators keep what Data-Juicer 1.6.1 keeps: for every case of
tests/assets/dj_fixtures/dedup.json (written by tools/dj_fixtures/dedup.py through Data-Juicer
itself), djx's hashes equal Data-Juicer's (md5, SimHash, imagededup's phash/dhash/whash/ahash) and
djx keeps the same samples. The texts: exact, case, whitespace, digit and punctuation copies, near
copies at several distances, CJK, shorter than a shingle, empty. The images: photo-like JPEGs
re-encoded, resized, EXIF-rotated, recompressed, as PNG, cropped; samples with several images,
the same image twice, none."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from djx import STATS_KEY, Pipeline, build_op

ASSETS = Path(__file__).resolve().parent / "assets" / "dj_fixtures"
FIXTURE = json.loads((ASSETS / "dedup.json").read_text(encoding="utf-8"))
TEXTS = [json.loads(line) for line in (ASSETS / FIXTURE["texts"]).read_text(encoding="utf-8").splitlines()]
IMAGE_ROWS = [json.loads(line) for line in (ASSETS / FIXTURE["images"]).read_text(encoding="utf-8").splitlines()]
PLACES = {"@sp_model": str(ASSETS / "text_resources" / "en.sp.model")}


def rows_for(op: str) -> list[dict]:
    if op != "image_deduplicator":
        return TEXTS
    return [{**r, "images": [str(ASSETS / p) for p in r["images"]]} for r in IMAGE_ROWS]


def case_id(case: dict) -> str:
    return case["op"] + "-" + ",".join(f"{k}={v}" for k, v in case["params"].items() if not str(v).startswith("@"))


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=case_id)
def test_djx_keeps_what_data_juicer_keeps_with_its_hashes(case):
    if case["params"].get("tokenization") == "sentencepiece":
        pytest.importorskip("sentencepiece", reason="SentencePiece tokenization needs the text extra")
    params = {k: PLACES.get(v, v) if isinstance(v, str) else v for k, v in case["params"].items()}
    op = build_op(case["op"], params)
    pipeline = Pipeline(ops=[op])
    kept = list(pipeline.process(rows_for(case["op"])))
    assert [s["id"] for s in kept] == case["kept"]
    assert pipeline.last_counts["dropped"] == len(rows_for(case["op"])) - len(case["kept"])
    if "bands" in case:
        assert [op.num_bands, op.num_rows_per_band] == case["bands"]
    by_id = {s["id"]: s[STATS_KEY] for s in kept}
    for key, values in case["hashes"].items():
        for i in case["kept"]:
            assert by_id[i][key] == values[i], (key, i)


def test_every_hash_of_every_sample_equals_data_juicers():
    """The duplicates' hashes too: each sample run alone is kept, with its hash."""
    for case in FIXTURE["cases"]:
        if not case["hashes"]:
            continue
        op = build_op(case["op"], case["params"])
        rows = rows_for(case["op"])
        for i, row in enumerate(rows):
            (sample,) = Pipeline(ops=[op]).process([row])
            for key, values in case["hashes"].items():
                assert sample[STATS_KEY][key] == values[i], (case_id(case), key, i)


def test_the_fixture_covers_what_it_claims():
    ops = {c["op"] for c in FIXTURE["cases"]}
    assert ops == {"document_deduplicator", "document_minhash_deduplicator", "document_simhash_deduplicator",
                   "image_deduplicator"}
    assert {c["params"]["method"] for c in FIXTURE["cases"] if c["op"] == "image_deduplicator"} == \
        {"phash", "dhash", "whash", "ahash"}
    assert len({c["params"].get("jaccard_threshold", 0.7) for c in FIXTURE["cases"]
                if c["op"] == "document_minhash_deduplicator"}) >= 5
    assert any(len(r["images"]) > 1 for r in IMAGE_ROWS) and any(not r["images"] for r in IMAGE_ROWS)
    assert "" in {t["text"] for t in TEXTS} and FIXTURE["data_juicer"] == "1.6.1"


@pytest.mark.parametrize("case", [c for c in FIXTURE["cases"] if c["op"] != "image_deduplicator"], ids=case_id)
def test_an_index_spilled_to_its_deepest_partitions_keeps_what_data_juicer_keeps(tmp_path, case):
    """A budget of one row: every index (exact, MinHash's bands, SimHash's candidates) writes its rows
    to partition files in the state folder, cut down to their deepest level, samples added last
    first, and the samples kept are still Data-Juicer's."""
    if case["params"].get("tokenization") == "sentencepiece":
        pytest.importorskip("sentencepiece", reason="SentencePiece tokenization needs the text extra")
    from djx.core.dedup.key_rows import IndexSpace
    params = {k: PLACES.get(v, v) if isinstance(v, str) else v for k, v in case["params"].items()}
    op = build_op(case["op"], params)
    rows = rows_for(case["op"])
    stats = [next(iter(Pipeline(ops=[op]).process([row])))[STATS_KEY] for row in rows]  # alone: kept, hashed
    index = op.index(IndexSpace(str(tmp_path), 1))
    for pos in reversed(range(len(rows))):
        index.add(pos, stats[pos])
    assert [row["id"] for pos, row in enumerate(rows) if index.kept_for(pos, stats[pos]) == pos] == case["kept"]
    index.close()
    assert not list(tmp_path.iterdir())
