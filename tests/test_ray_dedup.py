"""The dedup phase on Ray: under `executor: ray` the driver sends each deduplicator's (key, position)
rows to the cluster in blocks of `dedup_memory_entries` rows, Ray Data groups them with a hash
shuffle, and only the edges come back. The outputs are the local engine's, byte for byte (the same
kept samples, the same `duplicate of <position>` reasons), the driver never forms a group, and a
run stopped in the phase resumes to the same outputs."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from PIL import Image

from djx import Pipeline
from helpers import assert_same_run, outputs_by_position

pytestmark = pytest.mark.ray  # every test here runs the Ray executor (and is slow: see conftest)

BLOCK_ROWS = 40  # dedup_memory_entries on Ray: rows a block holds, so that many blocks flow


def texts(folder: Path | None = None, n: int = 240) -> list[dict]:
    """Texts of 30 words: a third new, the rest copies of 40 originals (every other copy with one word
    changed), the copies spread over the whole file: a key's rows are in many blocks."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(400)]
    originals = [[rng.choice(words) for _ in range(30)] for _ in range(40)]
    rows = []
    for i in range(n):
        text = list(originals[i % 40]) if i % 3 else [rng.choice(words) for _ in range(30)]
        if i >= 40 and i % 2:
            text[i % 30] = rng.choice(words)
        rows.append({"id": i, "text": " ".join(text)})
    return rows


def photos(folder: Path, n: int = 120) -> list[dict]:
    """Samples of six noise pictures, each saved again under a new name for every sample (same
    pixels, same hash), and some samples without images."""
    rng = random.Random(3)
    originals = [Image.frombytes("L", (32, 32), bytes(rng.randrange(256) for _ in range(32 * 32))).convert("RGB")
                 for _ in range(6)]
    rows = []
    for i in range(n):
        path = folder / f"p{i}.png"
        originals[(i * 5) % 6].save(path)
        rows.append({"id": i, "text": f"photo {i}", "images": [] if i % 7 == 3 else [str(path)]})
    return rows


CASES = {
    "exact": ({"document_deduplicator": {}}, texts),
    "minhash": ({"document_minhash_deduplicator": {"jaccard_threshold": 0.5}}, texts),
    "simhash": ({"document_simhash_deduplicator": {}}, texts),
    "image": ({"image_deduplicator": {"method": "phash"}}, photos),
}


def run(tmp_path: Path, name: str, executor: str, ray_address: str, process: list, **keys) -> dict:
    extra = {"ray_address": ray_address, "dedup_memory_entries": BLOCK_ROWS} if executor == "ray" else \
        {"start_method": "fork"}
    return Pipeline(dataset_path=str(tmp_path / "data.jsonl"), np=1, batch_size=16, executor=executor,
                    process=process, **extra, **keys).run(
        export_path=str(tmp_path / name / "kept.jsonl"), progress=False, log=lambda *a: None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_ray_forms_the_groups_and_keeps_what_the_local_engine_keeps(tmp_path, ray_address, case, monkeypatch):
    op, make = CASES[case]
    rows = make(tmp_path)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    local = run(tmp_path, "local", "local", ray_address, [op])
    # the driver of the Ray run cannot read a partition back (the local engine's way to form groups)
    from djx.core.dedup.key_rows import KeyRows

    def no_groups_here(self):
        raise AssertionError("a group was formed in the driver")
    monkeypatch.setattr(KeyRows, "groups", no_groups_here)
    ray_summary = run(tmp_path, "ray", "ray", ray_address, [op])
    assert_same_run({"local": (local, outputs_by_position(tmp_path / "local")),
                     "ray": (ray_summary, outputs_by_position(tmp_path / "ray"))})
    for kind in ("kept", "dropped"):  # the same bytes: the same samples, reasons and order
        name = "kept.jsonl" if kind == "kept" else "kept.dropped.jsonl"
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), kind
    assert 0 < local["dropped"] < len(rows)
    events = ray_summary["events"]
    assert events["dedup_blocks_to_ray"] > 1 and events["dedup_partitions_on_ray"] > 1  # several blocks, partitions
    assert events["dedup_rows_grouped_on_ray"] >= len([r for r in rows if r.get("images", True)])
    assert events["dedup_partitions_in_driver"] == 0  # every partition was grouped by a Ray worker
    assert "dedup_partitions_on_ray" not in local["events"]


class Stop(Exception):
    """The process dies here (as a kill -9 would: nothing after this point runs)."""


def test_a_ray_run_stopped_in_the_dedup_phase_resumes_to_the_same_outputs(tmp_path, ray_address, monkeypatch):
    """The resumed run has nothing left to read (Ray's streaming pass does not start) and joins the
    cluster for the phase alone; its outputs are those of a run never stopped (the local engine's,
    which an uninterrupted Ray run gives byte for byte: the test above)."""
    import djx.core.run.ledger as ledger
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in texts()))
    process = [{"document_minhash_deduplicator": {"jaccard_threshold": 0.5}}, {"document_deduplicator": {}}]
    reference = run(tmp_path, "ref", "local", ray_address, process)
    real = ledger.deduplicate

    def stop_after(*a, **kw):
        real(*a, **kw)
        raise Stop()
    monkeypatch.setattr(ledger, "deduplicate", stop_after)
    with pytest.raises(Stop):
        run(tmp_path, "out", "ray", ray_address, process)
    monkeypatch.undo()
    summary = run(tmp_path, "out", "ray", ray_address, process)
    assert summary["resumed"] and summary["check"]["ok"] and summary["dropped"] == reference["dropped"] > 0
    assert summary["events"]["dedup_partitions_on_ray"] > 0
    for name in ("kept.jsonl", "kept.dropped.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
