"""A mapper that changes samples in place and then raises on one of its batch: the others are run
again alone from the samples as they were before the call, so each is mapped once, never twice;
samples that cannot be copied are rejected with the batch rather than mapped twice."""
from __future__ import annotations

import threading

import pytest

from djx import Mapper, Pipeline, register_op

from conftest import read_jsonl_file


@register_op("test_appending_mapper")
class Appending(Mapper):
    """Appends ' !' to each text in place, and raises on a text with 'star' (a plug-in's bug)."""

    def process(self, batch):
        for s in batch.samples:
            if "star" in s[batch.text_key]:
                raise ValueError("cannot handle stars")
            s[batch.text_key] += " !"
            s.setdefault("meta", {}).setdefault("marks", []).append("!")  # a nested change too


@register_op("test_locking_mapper")
class Locking(Mapper):
    """Puts a lock (neither picklable nor copyable) in every sample."""

    def process(self, batch):
        for s in batch.samples:
            s["lock"] = threading.Lock()


def texts(n=32):
    return [{"id": i, "text": f"sample {i}" + (" star" if i % 5 == 3 else "")} for i in range(n)]


def test_in_memory_each_innocent_sample_is_mapped_once():
    outcomes = list(Pipeline(ops=[Appending()], batch_size=8).results(texts()))
    kept = [o.sample for o in outcomes if o.kept]
    rejected = [o for o in outcomes if o.outcome == "rejected"]
    assert len(kept) + len(rejected) == 32 and len(rejected) == 6
    assert [s["text"] for s in kept] == [r["text"] + " !" for r in texts() if "star" not in r["text"]]
    assert [s["meta"]["marks"] for s in kept] == [["!"]] * len(kept)
    assert all("cannot handle stars" in o.reason for o in rejected)


@pytest.mark.slow
def test_a_file_run_maps_each_innocent_sample_once(tmp_path, write_jsonl, write_recipe):
    write_jsonl(tmp_path / "data.jsonl", texts())
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl", np=1,
                          batch_size=8, start_method="fork", process=[{"test_appending_mapper": {}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and (summary["kept"], summary["rejected"]) == (26, 6), summary
    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    assert sorted(r["text"] for r in kept) == sorted(r["text"] + " !" for r in texts() if "star" not in r["text"])


def test_samples_that_cannot_be_copied_are_rejected_with_their_batch_not_mapped_twice():
    outcomes = list(Pipeline(ops=[Locking(), Appending()], batch_size=8).results(texts(16)))
    kept = [o.sample for o in outcomes if o.kept]
    rejected = [o for o in outcomes if o.outcome == "rejected"]
    assert len(kept) + len(rejected) == 16
    assert [s["text"].count("!") for s in kept] == [1] * len(kept)
    assert len(rejected) == 16 and all("could not be copied to retry alone" in o.reason for o in rejected), \
        [o.reason for o in rejected]
