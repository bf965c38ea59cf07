"""OpChain: runs every op of a recipe over one batch, in one pass. The local workers and the Ray
actors run this same object; it owns the per-sample failure rules (reject, never lose)."""
from __future__ import annotations

import functools

import time
import traceback
from typing import Callable

from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY, RunContext
from djx.core.op.reasons import default_reason
from djx.core.errors import SampleError
from djx.core.op.images import BatchImages, UndeclaredImages
from djx.core.op.base import Batch, Filter, Mapper, Op
from djx.core.dedup.finder import rejected_hashes
from djx.core.io.image_paths import path_writer
from djx.core.io.record_limits import encoded, output_problem
from djx.core.io.llava_seal import seal_llava
from djx.core.records import BatchResult, FailFast, Item, Rejection, add_counters, parse_pending
from djx.core.io.reinput import input_sample, unwrap_rejected
from djx.core.run.breakdown import add_counters_and_phases
from djx.core.run.budget_rerun import rerun_over_budget
from djx.core.run.early_check import reach
from djx.core.run.mapped import (adopt_replacements, as_read, changed, restore_keys, restored, saved_before,
                                 seen_by_op, snapshot)
from djx.core.run.provenance import StatBooks, op_fingerprint
from djx.core.run.formats import export_as_llava, sample_of, untrusted_dropped, writes_llava
from djx.core.run.sample_checks import input_problem, non_finite_stat
from djx.core.run.stat_reuse import drop_stale, reusable


class OpChain:
    """The ops of a recipe plus the run context; picklable, so it travels to workers by value."""

    def __init__(self, ops: list[Op], ctx: RunContext, export_kept: bool = True, lazy_models: bool = False,
                 reads_input: bool = True, earlier_stats: frozenset = frozenset(),
                 earlier_hashes: frozenset = frozenset()):
        self.ops, self.ctx, self.earlier_hashes = list(ops), ctx, earlier_hashes  # hashes: dedup before a Ray stage
        # never reused: a stat an earlier filter of this run also writes (its value may be that filter's)
        written = set(earlier_stats)
        self.earlier_stats = frozenset(earlier_stats)  # stats an earlier Ray stage of this run wrote
        self.may_reuse = []
        for op in self.ops:
            keys = set(getattr(op, "stats_keys", ()))
            self.may_reuse.append(isinstance(op, Filter) and not keys & written)
            written |= keys
        self.reads_input = reads_input  # False for a Ray stage: its records are samples the read step made
        # False for a stage that hands its kept samples to the next (Ray): their paths stay as read
        self.export_kept = export_kept
        self.lazy_models = lazy_models  # True: workers load models when a sample first needs one (stat reuse)

    @functools.cached_property
    def fingerprints(self) -> list[str]:
        """Each op's op_fingerprint (what makes its stats its own): made once, not per batch."""
        return [op_fingerprint(op) for op in self.ops]

    def model_specs(self) -> list:
        return [spec for op in self.ops for spec in op.model_specs()]

    def filter_stats_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        return [(op.name, tuple(op.stats_keys) if isinstance(op, Filter) else ()) for op in self.ops]

    def run(self, items: list[Item], pool=None, on_op: Callable[[int], None] | None = None,
            encode: Callable[[dict], bytes] | None = None) -> BatchResult:
        """The batch through every op. With `encode` (a local worker), kept and dropped samples come
        back as the encoded lines the writer appends; a sample that does not encode is rejected."""
        result = BatchResult.empty(len(self.ops))
        originals: dict[int, Item] = {}  # position -> the item as read (ops work on a copy)
        samples = []
        books = StatBooks(self.ctx, self.fingerprints)
        parse_pending(items)
        for item in items:
            if unwrap_rejected(item):  # a rejected file's line: the record it holds; an export's: its stats row
                result.counters["stats_rows_unmatched"] = result.counters.get("stats_rows_unmatched", 0) + 1
            record, reason = sample_of(item, self.ctx, self.reads_input)  # dataset_format: llava is mapped
            if reason:
                result.rejected.append(self.reject(item, None, reason, "bad_input"))
                continue
            originals[item.pos] = item
            samples.append(input_sample(record, item.pos, self.reads_input))
            dropped = untrusted_dropped(samples[-1], books, self.ctx, self.reads_input)  # stats, __dj__llava__
            result.counters = add_counters(result.counters, dropped)

        images = BatchImages(self.ctx.dataset_dir, self.ctx.max_image_pixels, self.ctx.load_truncated_images,
                             self.ctx.max_decoded_bytes)
        # decoded images are shared by the ops of a batch, and released after the last that reads them
        last_image_op = max((k for k, op in enumerate(self.ops) if op.uses_images), default=-1)
        try:
            for k, op in enumerate(self.ops):
                if not samples:
                    break
                if on_op:
                    on_op(k)
                t0 = time.perf_counter()
                result.op_counts[k].seen += len(samples)
                if op.uses_images:
                    key = op.image_key or self.ctx.image_key
                    result.op_counts[k].with_images += sum(1 for s in samples if s.get(key))
                images.later_readers = k < last_image_op
                samples = self._run_op(k, op, samples, images, pool, result, originals, books)
                result.op_counts[k].seconds += time.perf_counter() - t0
                if k == last_image_op:
                    images.close()
        finally:
            images.close()
        result.kept = samples
        writer = self._seal(result, books)
        llava_in = self.ctx.llava is not None and self.reads_input  # the records as read have LLaVA's `image`
        result.reach = reach(result, originals, len(self.ops), "image" if llava_in else self.ctx.image_key)
        if writer is not None and writes_llava(self.ctx):
            export_as_llava(self, result, originals)
        self._refuse_unwritable(result, originals, encode)
        if writer is not None:
            for rej in result.rejected:
                rej.record = writer.copy(rej.record)
        result.rejected.sort(key=lambda rej: rej.pos)  # bad input and ops' rejections, in input order
        return result

    def _seal(self, result: BatchResult, books: StatBooks):
        """The kept and dropped samples signed, as the outputs will hold them (their image paths
        rewritten to resolve from there); the dropped in input order, as the Ray engine writes them.
        Returns the path writer (None: paths are written as they are)."""
        result.dropped.sort(key=lambda s: s[POSITION_KEY])
        writer = path_writer(self.ctx, self.ops)
        if writer is not None:  # each sample's paths before its seal (a sample's steps touch it alone)
            for s in (result.kept if self.export_kept else []) + result.dropped:
                writer.rewrite(s)
        for s in result.kept + result.dropped:
            seal_llava(s, self.ctx.stats_key)
            books.seal(s)
        return writer

    def _refuse_unwritable(self, result: BatchResult, originals: dict, encode=None) -> None:
        """Reject the samples that ops left unwritable (a lone surrogate, a cycle), so one bad
        sample cannot crash the writer. With `encode`, encoding each sample once is the check and
        the samples become their lines; without, only mappers change a whole sample and filters
        write stats, so a chain of filters checks the stats alone."""
        if not self.ops and encode is None:
            return
        whole = any(isinstance(op, Mapper) for op in self.ops)
        for kind in ("kept", "dropped"):
            good = []
            for s in getattr(result, kind):
                if encode is not None:
                    line, why = encoded(s, encode)
                else:
                    line, why = s, output_problem(s if whole else s.get(STATS_KEY))
                if why is None:
                    good.append(line)
                    continue
                k = len(self.ops) - 1 if kind == "kept" else s[DROP_KEY]["op_index"]
                counts = result.op_counts[k]
                counts.kept, counts.dropped = counts.kept - (kind == "kept"), counts.dropped - (kind == "dropped")
                counts.rejected += 1
                result.rejected.append(self.reject(originals[s[POSITION_KEY]], k,
                                                   f"the sample as the ops left it {why} (the last op to see it: "
                                                   f"{self.ops[k].name})", "op_error"))
            setattr(result, kind, good)

    # -- one op over the live samples -------------------------------------------------------
    def _run_op(self, k, op, samples, images, pool, result, originals, books) -> list[dict]:
        ctx = self.ctx
        text_key = op.text_key or ctx.text_key
        image_key = op.image_key or ctx.image_key
        rejected: dict[int, tuple] = {}  # index -> (reason, code, exception type)
        for i, s in enumerate(samples):
            reason = input_problem(s, op, text_key, image_key)
            if reason:
                rejected[i] = (reason, "bad_input", None)
        live, reused = [i for i in range(len(samples)) if i not in rejected], set()
        if self.may_reuse[k] and not ctx.recompute_stats:  # stats already there: not recomputed
            reused = {i for i in live if reusable(op, samples[i], ctx) and books.vouches(k, op, samples[i])}
            result.op_counts[k].reused += len(reused)
            live = [i for i in live if i not in reused]
        drop_stale(op, samples, live, books, self.earlier_stats)  # an op that keeps a stat it finds must not find these
        step = op.batch_size or len(live) or 1
        own = [(s[POSITION_KEY], s.get(STATS_KEY)) for s in samples]  # djx's keys, whatever the op does
        before = snapshot(op, samples, live)  # a mapper: what it changes is no longer what the stats describe
        call = lambda idx: self._call_isolated(op, samples, idx, images, pool, text_key, image_key,  # noqa: E731
                                               result.counters, result.op_counts[k].phases)
        for start in range(0, len(live), step):
            rejected.update(call(live[start:start + step]))
        rerun_over_budget(images, rejected, call, result.counters, step)  # a sample's company never rejects it
        restore_keys(samples, own)
        books.remapped(changed(before, samples))
        kept, counts = [], result.op_counts[k]
        for i, s in enumerate(samples):
            if i not in rejected and isinstance(op, Filter) and i not in reused:
                bad = non_finite_stat(op, s.get(STATS_KEY))  # the stats check would fail the whole run on it
                if bad:
                    rejected[i] = (bad, "op_error", "BadStat")
            if i not in rejected and isinstance(op, Filter):
                try:
                    keep, why = _verdict(op, op.keep(s.get(STATS_KEY, {})))
                except KeyboardInterrupt:
                    raise
                except _BadVerdict as e:
                    rejected[i] = (str(e), "op_error", "BadVerdict")
                except BaseException as e:  # noqa: BLE001
                    rejected[i] = (f"{op.name}.keep raised {_short_tb(e)}", "op_error", type(e).__name__)
            if i in rejected:
                counts.rejected += 1
                result.rejected.append(self.reject(originals[s[POSITION_KEY]], k, *rejected[i], sample=s))
                continue
            if isinstance(op, Filter):
                books.computed(k, op, s, i in reused)
                if not keep:
                    counts.dropped += 1
                    s[DROP_KEY] = {"op": op.name, "op_index": k, "reason": why or default_reason(
                        op, s.get(STATS_KEY, {})), **as_read(originals[s[POSITION_KEY]].record, s, text_key)}
                    result.dropped.append(s)
                    continue
            counts.kept += 1
            kept.append(s)
        return kept

    def _call_isolated(self, op, samples, idx, images, pool, text_key, image_key,
                       counters: dict, phases: dict) -> dict[int, tuple]:
        """Run op on samples[idx]; if it raises, run each sample alone so only the bad ones are rejected.
        Returns {sample index: (reason, code, exception type or None)}; the op's event counters are
        added to `counters`, the samples it put in batch.samples replace those in `samples`.
        Anything an op raises (SystemExit included) stays with its sample; only Ctrl-C stops the run."""
        seen = images if op.uses_images else UndeclaredImages(op.name)  # reading them raises, saying why
        batch = Batch([samples[i] for i in idx], self.ctx, seen, pool, text_key, image_key)
        saved = saved_before(op, samples, idx)  # a mapper that raises may have changed some samples already
        try:
            _invoke(op, batch)
            out = adopt_replacements(op, batch, samples, idx)
            add_counters_and_phases(batch.counters, counters, phases)  # phases: where the op's time went
            return {**out, **{idx[j]: (r, batch.codes.get(j), None) for j, r in batch.rejected.items()}}
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001
            if len(idx) == 1:
                if isinstance(e, SampleError):
                    return {idx[0]: (str(e), e.code, None)}
                return {idx[0]: (f"{op.name} raised {_short_tb(e)}", "op_error", type(e).__name__)}
            if not restored(saved, samples, idx):  # never run again on what it half did
                why = f"{op.name} raised {_short_tb(e)} on a batch whose samples could not be copied to retry alone"
                return {i: (why, "op_error", type(e).__name__) for i in idx}
        out = {}
        for j in idx:
            out.update(self._call_isolated(op, samples, [j], images, pool, text_key, image_key, counters, phases))
        return out

    def reject(self, item: Item, op_index: int | None, reason: str, code: str | None = None,
               error: str | None = None, sample: dict | None = None) -> Rejection:
        """The rejection of `item` (as read) at op `op_index` (None: before any op); `error`: the
        exception type when the op raised; `sample`: the sample as that op saw it (its text is
        kept when a mapper changed it). Every rejection is made here; under on_error: fail it
        stops the run instead."""
        op = self.ops[op_index] if op_index is not None else None
        rej = Rejection(item.pos, item.line, op and op.name, op_index, reason, code, file=item.file,
                        record=None if item.error else item.record, raw=item.raw if item.error else None,
                        error=error, text_seen=op and seen_by_op(item.record, sample, op.text_key or self.ctx.text_key),
                        hashes=rejected_hashes(self.ops[:op_index or 0], sample, self.earlier_hashes))
        if self.ctx.on_error == "fail":
            raise FailFast(rej.fail_message(self.ctx.input_files))
        return rej


def _invoke(op: Op, batch: Batch) -> None:
    if isinstance(op, Filter):
        op.compute_stats(batch)
    elif isinstance(op, Mapper):
        op.process(batch)
    else:
        raise TypeError(f"{type(op).__name__} is neither a Filter nor a Mapper")


class _BadVerdict(Exception):
    """keep() answered something that is neither a bool nor (bool, reason)."""


def _verdict(op: Op, value) -> tuple[bool, str | None]:
    """keep()'s answer as (keep, reason). Only a bool (numpy's too) or (bool, str) is an answer:
    the string "False" is truthy and None falsy, so taking anything else at its truth value would
    keep or drop samples silently."""
    if _is_bool(value):
        return bool(value), None
    if isinstance(value, tuple) and len(value) == 2 and _is_bool(value[0]) \
            and (value[1] is None or isinstance(value[1], str)):
        return bool(value[0]), value[1]
    raise _BadVerdict(f"{op.name}.keep returned {value!r:.80}; keep() must return True or False (a numpy "
                      f"bool too), or (bool, reason string)")


def _is_bool(value) -> bool:
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


def _short_tb(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)[-2:]
    where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in reversed(frames))
    return f"{type(e).__name__}: {e} (at {where})"
