"""Which text a verdict was made on, once mappers have changed it, and which samples a mapper changed.

A filter after a mapper judges the mapped text, and the kept file holds it. So that a person
debugging a recipe sees both texts wherever a verdict is written:
- a dropped sample is written as the filter saw it (the mapped text) and its `__dj__drop__` adds
  `text_as_read`, the text as read from the input, when the two differ;
- a rejected sample is written as read (`record`, so the rejected file can be re-run) and adds
  `text_seen`, the text as the rejecting op saw it, when the two differ.
Each is cut to TRACE_CHARS characters (saying how long the whole text is).

A stat the sample carried from its input, or one an earlier filter computed, describes the text
before a mapper changed it: it is no longer vouched for (run/provenance.py), so a later filter
recomputes rather than reuses it, and djx does not sign it as the written sample's.
"""
from __future__ import annotations

import copy
import pickle

from djx.core.recipe.context import DROP_KEY, ORIGIN_POS_KEY, POSITION_KEY, STATS_KEY
from djx.core.op.base import Batch, Mapper, Op

TRACE_CHARS = 1000
_OWN = (STATS_KEY, POSITION_KEY, ORIGIN_POS_KEY)


def bounded(text: str) -> str:
    if len(text) <= TRACE_CHARS:
        return text
    return f"{text[:TRACE_CHARS]}... ({len(text):,} characters in all)"


def _text(sample, key: str):
    value = sample.get(key) if isinstance(sample, dict) else None
    return value if isinstance(value, str) else None


def seen_by_op(record, sample, key: str) -> str | None:
    """The text the op saw (bounded) when it differs from the record's as read; else None."""
    seen = _text(sample, key)
    return None if seen is None or seen == _text(record, key) else bounded(seen)


def as_read(record, sample, key: str) -> dict:
    """{'text_as_read': the record's text (bounded)} when the sample's differs; else {}."""
    read = _text(record, key)
    return {} if read is None or read == _text(sample, key) else {"text_as_read": bounded(read)}


def _content(sample: dict) -> dict:
    return {k: list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
            for k, v in sample.items() if k not in _OWN}


def snapshot(op, samples: list[dict], idx: list[int]) -> dict[int, dict]:
    """What a mapper is about to change: the content of samples[idx] ({} for a filter)."""
    return {i: _content(samples[i]) for i in idx} if isinstance(op, Mapper) else {}


def changed(before: dict[int, dict], samples: list[dict]) -> list[dict]:
    """The samples whose content differs from their snapshot."""
    return [samples[i] for i, content in before.items() if _content(samples[i]) != content]


def _text_key(chain, op_index) -> str:
    return chain.ops[op_index].text_key or chain.ctx.text_key


def retrace_drop(sample: dict, record, chain) -> None:
    """A later Ray stage's dropped sample: its text as read is the input record's (`record`), not
    the text it reached the stage with (earlier stages' mappers changed that)."""
    drop = sample[DROP_KEY]
    drop.pop("text_as_read", None)
    drop.update(as_read(record, sample, _text_key(chain, drop["op_index"])))


def retrace_rejection(rej, stage_input, chain) -> None:
    """A later Ray stage's rejection, now holding the input record: the text its op saw is the one
    the sample reached the stage with, when an earlier stage's mapper changed it."""
    if rej.text_seen is None and rej.op_index is not None:
        rej.text_seen = seen_by_op(rej.record, stage_input, _text_key(chain, rej.op_index))


UNSAVED = object()


def frozen(value):
    """A deep copy of `value` to thaw later: pickle's bytes (fast for JSON-like data), else a
    deepcopy, else UNSAVED (an earlier plug-in left something neither can take)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001
            return UNSAVED


def thawed(saved):
    """A fresh deep copy of what frozen() kept (not UNSAVED)."""
    return pickle.loads(saved) if isinstance(saved, bytes) else copy.deepcopy(saved)


def saved_before(op, samples: list[dict], idx: list[int]):
    """A deep copy of samples[idx] before a mapper's call on several of them (None: nothing to save,
    a filter or one sample; UNSAVED: they cannot be copied). If the call raises, each sample is run
    again alone from this copy: a mapper that changed some samples in place before it raised would
    otherwise be applied twice to them."""
    if not isinstance(op, Mapper) or len(idx) < 2:
        return None
    return frozen([samples[i] for i in idx])


def restored(saved, samples: list[dict], idx: list[int]) -> bool:
    """Put samples[idx] back as saved_before() copied them; False when they could not be copied."""
    if saved is UNSAVED:
        return False
    if saved is not None:
        for i, s in zip(idx, thawed(saved)):
            samples[i] = s
    return True


def adopt_replacements(op: Op, batch: Batch, samples: list[dict], idx: list[int]) -> dict[int, tuple]:
    """Samples an op put in batch.samples[j] (as a Mapper may) replace the ones it was given,
    keeping their position and, when the new one has none, their stats. A replacement that is not
    a dict rejects its sample; adding or removing samples is an error of the whole call."""
    if len(batch.samples) != len(idx):
        raise TypeError(f"{op.name} changed batch.samples from {len(idx)} to {len(batch.samples)} samples; "
                        f"an op may replace samples but not add or remove them (a Filter drops them)")
    bad = {}
    for j, i in enumerate(idx):
        new, old = batch.samples[j], samples[i]
        if new is old:
            continue
        if not isinstance(new, dict):
            bad[i] = (f"{op.name} replaced the sample with {type(new).__name__} {new!r:.80}; a sample is a dict",
                      "op_error", "BadSample")
            continue
        new[POSITION_KEY] = old[POSITION_KEY]
        if STATS_KEY not in new and STATS_KEY in old:
            new[STATS_KEY] = old[STATS_KEY]
        samples[i] = new
    return bad


def restore_keys(samples: list[dict], own: list[tuple]) -> None:
    """Give back the position (and the stats, if gone) an op deleted or changed in a sample."""
    for s, (pos, stats) in zip(samples, own):
        if s.get(POSITION_KEY) is not pos:
            s[POSITION_KEY] = pos
        if STATS_KEY not in s and stats is not None:
            s[STATS_KEY] = stats
