"""A run's dataset_format at the two ends of the chain: a record as read becomes a djx sample (a
LLaVA record is mapped, core/io/llava.py), and a sample as written goes back to the input's format
(`format_options.export`, by default the input's own).

A record that is not in the recipe's format is rejected as `bad_input`, with a reason naming the
format expected; a sample that an op left unable to be a LLaVA record (two distinct images, a text
that is no longer `[[role]]: ...` turns) is rejected at the last op that saw it."""
from __future__ import annotations

from djx.core.io.llava import FormatError, Keys, djx_to_llava, llava_to_djx
from djx.core.io.llava_seal import drop_foreign_llava
from djx.core.recipe.context import DROP_KEY, POSITION_KEY, SUFFIX_KEY, RunContext
from djx.core.records import Item
from djx.core.run.sample_checks import record_problem

LLAVA_EXPECTED = ("dataset_format llava expects LLaVA records ({\"id\", \"image\": a path, \"conversations\": "
                  "[{\"from\", \"value\"}, ...]})")


def keys_of(ctx: RunContext) -> Keys:
    return Keys(ctx.text_key, ctx.image_key, ctx.image_special_token, ctx.eoc_special_token)


def sample_of(item: Item, ctx: RunContext, reads_input: bool) -> tuple[object, str | None]:
    """The djx record of an input item, or why it cannot be a sample. `reads_input` False: the
    item is a sample already (a later Ray stage)."""
    reason = item.error or record_problem(item.record)
    if not reason and ctx.file_suffixes and reads_input and SUFFIX_KEY not in item.record:
        item.record[SUFFIX_KEY] = ctx.file_suffixes[item.file]  # a suffix_filter's, as Data-Juicer reads
    if reason or ctx.llava is None or not reads_input:
        return item.record, reason
    try:
        return llava_to_djx(item.record, ctx.llava, keys_of(ctx)), None
    except FormatError as e:
        return item.record, f"{LLAVA_EXPECTED}: {e}"


def untrusted_dropped(sample: dict, books, ctx: RunContext, reads_input: bool) -> dict[str, int]:
    """Remove what a sample as read carries that djx cannot vouch for: stats it did not write
    (run/provenance.py's StatBooks `books`), and in a djx-format input a `__dj__llava__` field it
    did not sign (io/llava_seal.py: never an image or a turn taken from it). {counter: how many}."""
    counts = {"foreign_stats_dropped": books.take(sample)}
    if reads_input and ctx.llava is None:
        counts["foreign_llava_dropped"] = int(drop_foreign_llava(sample, ctx.stats_key))
    return {k: n for k, n in counts.items() if n}


def writes_llava(ctx: RunContext) -> bool:
    return ctx.llava is not None and ctx.llava.export == "llava"


def export_as_llava(chain, result, originals: dict) -> None:
    """The kept (when the chain writes them) and dropped samples of `result` as LLaVA records, in
    place; one that cannot be is rejected at the last op it reached."""
    keys, n_ops = keys_of(chain.ctx), len(chain.ops)
    for kind in ("kept", "dropped") if chain.export_kept else ("dropped",):
        out = []
        for s in getattr(result, kind):
            try:
                out.append(djx_to_llava(s, chain.ctx.llava, keys))
                continue
            except FormatError as e:
                why = str(e)
            k = n_ops - 1 if kind == "kept" else s[DROP_KEY]["op_index"]
            if k is not None and k >= 0:
                counts = result.op_counts[k]
                counts.kept, counts.dropped = counts.kept - (kind == "kept"), counts.dropped - (kind == "dropped")
                counts.rejected += 1
            last = chain.ops[k].name if k is not None and k >= 0 else "none"
            result.rejected.append(chain.reject(originals[s[POSITION_KEY]], k if k is not None and k >= 0 else None,
                                                f"the sample as the ops left it cannot be written as a LLaVA record "
                                                f"({why}; the last op to see it: {last})", "op_error", "FormatError"))
        setattr(result, kind, out)


def signed_form(ctx: RunContext):
    """For a run that writes LLaVA records: a function giving the djx sample a record was signed as
    (the mapping a later run reads it with), so that `djx check` verifies its stats signature on
    that; None for djx-format outputs (signed as written)."""
    if not writes_llava(ctx):
        return None
    opts, keys = ctx.llava, keys_of(ctx)

    def form(record: dict) -> dict:
        try:
            return llava_to_djx(record, opts, keys)
        except FormatError:
            return record  # not a LLaVA record: not what djx signed
    return form
