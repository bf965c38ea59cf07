"""Pipeline.process: the ops over in-memory samples in this process, for a notebook or a script:
it streams (one batch read at a time), yields the kept samples with their stats, counts the rest
and leaves the caller's dicts as they were."""
from __future__ import annotations

import itertools

from djx import STATS_KEY, Pipeline
from djx.ops.filter.text_length_filter import TextLengthFilter


def test_process_streams_an_iterator_batch_by_batch():
    pulled = 0

    def endless_samples():
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield {"id": i, "text": "word " * (i % 4)}

    pipe = Pipeline(ops=[TextLengthFilter(min_len=10)], batch_size=8)
    first = list(itertools.islice(pipe.process(endless_samples()), 3))
    assert [s["id"] for s in first] == [2, 3, 6]
    assert [s[STATS_KEY]["text_len"] for s in first] == [10, 15, 10]
    assert pulled <= 8  # one batch read, not the whole (endless) input


def test_process_yields_kept_samples_with_stats_and_counts_the_rest():
    pipe = Pipeline(ops=[TextLengthFilter(min_len=5)])
    samples = [{"text": "long enough"}, {"text": "tiny"}, {"no_text": 1}, {"text": "exactly"}]
    kept = list(pipe.process(iter(samples)))
    assert [s["text"] for s in kept] == ["long enough", "exactly"]
    assert [s[STATS_KEY] for s in kept] == [{"text_len": 11}, {"text_len": 7}]
    counts = pipe.last_counts
    assert (counts["input"], counts["kept"], counts["dropped"], counts["rejected"]) == (4, 2, 1, 1)
    assert "missing text key 'text'" in counts["rejected_records"][0]["reason"]
    assert samples[0] == {"text": "long enough"}  # the caller's dicts are not modified
