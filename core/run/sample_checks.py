"""What a record must be before the ops see it: a JSON object whose djx keys have their types, and,
per op, the text and image keys that op reads. A record that is not is rejected as `bad_input`
with the reason, never handed to an op (whose error would blame the op)."""
from __future__ import annotations

import math
import numbers

from djx.core.op.base import Op
from djx.core.recipe.context import STATS_KEY


def record_problem(record) -> str | None:
    """Why an input record cannot be a sample (None: it can)."""
    if not isinstance(record, dict):
        return f"record is not a JSON object (got {type(record).__name__})"
    if STATS_KEY in record and not isinstance(record[STATS_KEY], dict):
        return (f"{STATS_KEY} must be an object of stat names and values, got {type(record[STATS_KEY]).__name__} "
                f"{record[STATS_KEY]!r:.60}")
    return None


def input_problem(sample: dict, op: Op, text_key: str, image_key: str) -> str | None:
    """Why `sample` cannot go through `op` (None: it can): the text and image keys it reads. A single
    path string under the image key becomes a one-image list here (Data-Juicer users write both)."""
    if op.uses_text:
        if text_key not in sample:
            llava = "conversations" in sample and text_key != "conversations"
            return f"missing text key {text_key!r}" + (
                " (it looks like a LLaVA record: set dataset_format: llava)" if llava else "")
        if not isinstance(sample[text_key], str):
            return f"text key {text_key!r} is not a string (got {type(sample[text_key]).__name__})"
    if op.uses_images:
        refs = sample.get(image_key)
        if isinstance(refs, str):
            refs = sample[image_key] = [refs]
        if refs is not None and (not isinstance(refs, list) or not all(isinstance(r, str) for r in refs)):
            return f"{image_key!r} must be an image path or a list of them (strings), got {refs!r:.80}"
    return None


def non_finite_stat(op, stats) -> str | None:
    """Why the stats a filter just wrote cannot be written (None when they can): NaN or infinity,
    alone or in a list. Such a stat would fail the run's stats check after the whole run; it
    rejects its sample instead, naming the stat."""
    if not isinstance(stats, dict):
        return None
    for key in op.stats_keys:
        value = stats.get(key)
        if value.__class__ is float:  # the common case, checked without the loops below
            if math.isfinite(value):
                continue
        elif value.__class__ in (int, str, bool) or value is None:
            continue
        values = value if isinstance(value, list) else [value]
        for v in values:
            for x in (v if isinstance(v, list) else [v]):
                if isinstance(x, numbers.Real) and not math.isfinite(x):
                    return (f"{op.name} wrote a non-finite stat {key} = {float(x)!r} (a NaN or infinity cannot be "
                            f"judged or checked)")
    return None
