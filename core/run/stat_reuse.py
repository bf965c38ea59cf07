"""Reusing stats a sample already carries, as Data-Juicer does: re-filtering an export with new
thresholds computes nothing and loads no model.

A filter's stats are reused when every one of them is present and valid: finite numbers inside
the filter's `stat_ranges`, and for the shapes a filter declares in `stat_shapes`, one value per
image (`per_image`), one per distinct image path (`per_distinct_image`), one per chunk that holds
images (`per_chunk`), one number (`scalar`), one non-empty string (`label`, e.g. language_id_score_filter's `lang`) or a deduplicator's hash string
(`digest`); and
when djx vouches for them (run/provenance.py: djx wrote them with the same op, or the recipe says
`trust_input_stats`). Anything else is recomputed; so is everything with `recompute_stats: true`.
"""
from __future__ import annotations

import math

from djx.core.recipe.context import POSITION_KEY, STATS_KEY, RunContext
from djx.core.op.base import LIST_SHAPES, Filter
from djx.core.io.export_input import with_stats_rows
from djx.core.io.reinput import input_sample, unwrap_rejected
from djx.core.run.formats import sample_of
from djx.core.run.provenance import StatBooks


def reusable(op, sample: dict, ctx: RunContext) -> bool:
    """Whether `sample` carries valid values of every stat `op` computes."""
    if ctx.recompute_stats or not isinstance(op, Filter) or not op.stats_keys:
        return False
    stats = sample.get(STATS_KEY)
    if not isinstance(stats, dict):
        return False
    shapes, ranges = op.stat_shapes, op.stat_ranges
    for key in op.stats_keys:
        if key not in stats or not _valid(stats[key], shapes.get(key), op, sample, ctx):
            return False
        if key in ranges and shapes.get(key) != "label" and not all(_within(v, *ranges[key]) for v in _values(stats[key])):
            return False
    return True


def drop_stale(op, samples: list[dict], live: list[int], books: StatBooks, earlier: frozenset) -> None:
    """Remove from samples[live] (about to be computed by filter `op`, not reused) the op's stats
    that came with the input: not vouched for this op, or other parameters, or images changed since.
    A deduplicator keeps a hash it finds (an earlier op of the recipe wrote it: Data-Juicer reuses
    it), so a stale one left there would be kept and signed as its own. Those this run wrote (an
    earlier op, an earlier Ray stage: `earlier`) stay."""
    keys = [key for key in op.stats_keys if key not in earlier] if isinstance(op, Filter) else []
    for i in live if keys else ():
        stats = samples[i].get(STATS_KEY)
        for key in keys if isinstance(stats, dict) else ():
            if key in stats and key not in books.judged.get(samples[i].get(POSITION_KEY), ()):
                del stats[key]


def _values(value) -> list:
    return value if isinstance(value, list) else [value]


def _within(v, low, high) -> bool:
    return (low is None or v >= low) and (high is None or v <= high)


def _valid(value, shape: str | None, op, sample: dict, ctx: RunContext) -> bool:
    if shape == "scalar":
        return _number(value)
    if shape == "label":
        return isinstance(value, str) and bool(value)
    if shape == "digest":  # a deduplicator's hash or signature
        return isinstance(value, str)
    if shape in LIST_SHAPES:
        n = _expected_length(shape, op, sample, ctx)
        return n is not None and isinstance(value, list) and len(value) == n and all(map(_number, value))
    return _number(value) or (isinstance(value, list) and all(map(_number, value)))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _expected_length(shape: str, op, sample: dict, ctx: RunContext) -> int | None:
    """Images of the sample, or its chunks that hold images; None when the sample is malformed
    (the op itself then says why, by rejecting it)."""
    refs = sample.get(op.image_key or ctx.image_key) or []
    if not isinstance(refs, list):
        return None
    if shape == "per_image":
        return len(refs)
    if shape == "per_distinct_image":  # a path listed twice counts once, as in Data-Juicer's model filters
        try:
            return len(dict.fromkeys(refs))
        except TypeError:  # an unhashable ref: the op rejects the sample
            return None
    text = sample.get(op.text_key or ctx.text_key)
    if not isinstance(text, str) or text.count(ctx.image_special_token) != len(refs):
        return None
    return sum(1 for chunk in text.split(ctx.eoc_special_token) if ctx.image_special_token in chunk)


def models_unneeded(chain, files: list[str], stats_file: str | None = None) -> bool:
    """True when the dataset's first record carries every stat of every filter that needs a model:
    its workers then load models only when a sample lacks them (a re-filter loads none)."""
    model_ops = [op for op in chain.ops if op.model_specs()]
    if chain.ctx.recompute_stats or not model_ops or not files:
        return False
    samples = input_samples(chain, files, stats_file)
    try:
        first = next(samples, None)
    except Exception:  # noqa: BLE001  a first record that does not read: the run says why
        return False
    finally:
        samples.close()
    if first is None or first[0] != 0:
        return False
    sample = first[1]
    books = StatBooks(chain.ctx, chain.fingerprints)
    books.take(sample)
    return all(reusable(op, sample, chain.ctx) and books.vouches(k, op, sample)
               for k, op in enumerate(chain.ops) if op.model_specs())


def input_samples(chain, files: list[str], stats_file: str | None = None):
    """(position, sample) of the dataset's records as the ops will see them (a LLaVA record
    converted, an export's stats file joined), from the first; one that does not read as a sample
    is left out (the run rejects it, saying why)."""
    from djx.core.io.readers import ReadState, read_files
    from djx.core.records import parse_pending
    reader = read_files(files, ReadState(), parse=True)
    items = with_stats_rows(reader, stats_file, 0) if stats_file else reader
    try:
        for item in items:
            parse_pending([item])
            unwrap_rejected(item)
            record, reason = sample_of(item, chain.ctx, reads_input=True)
            if reason or not isinstance(record, dict) or not isinstance(record.get(STATS_KEY, {}), dict):
                continue
            yield item.pos, input_sample(record, item.pos)
    finally:
        reader.close()


def vouched_stats(chain, k: int, samples):
    """(position, stats) of the samples whose stats of op k are valid and vouched for (as a run
    would reuse them)."""
    op, books = chain.ops[k], StatBooks(chain.ctx, chain.fingerprints)
    for n, (pos, sample) in enumerate(samples, 1):
        if n % 512 == 0:  # the books are a batch's: a fresh one now and then keeps memory flat
            books = StatBooks(chain.ctx, chain.fingerprints)
        books.take(sample)
        if reusable(op, sample, chain.ctx) and books.vouches(k, op, sample):
            yield pos, sample[STATS_KEY]
