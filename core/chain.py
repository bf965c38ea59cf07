"""OpChain: runs every op of a recipe over one batch, in one pass. The local workers and the Ray
actors run this same object; it owns the per-sample failure rules (reject, never lose)."""
from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import jsonlines

from .context import DROP_KEY, POSITION_KEY, STATS_KEY, RunContext
from .errors import DjxError, SampleError
from .images import BatchImages
from .op import Batch, Filter, Mapper, Op


@dataclass
class Item:
    """One input record as the reader saw it: parsed, or the raw text and why it did not parse.
    A `pending` item holds only its raw JSON line; the worker parses it (off the parent's path)."""
    pos: int
    record: Any = None
    line: int | None = None
    error: str | None = None
    raw: str | None = None
    pending: bool = False
    file: int = 0  # index into RunContext.input_files


def parse_pending(items: list[Item]) -> None:
    """Parse the raw JSON lines of pending items in place, through one jsonlines reader."""
    pending = [it for it in items if it.pending]
    if not pending:
        return
    reader = jsonlines.Reader(it.raw for it in pending)
    for it in pending:
        try:
            it.record = reader.read(allow_none=True)
        except jsonlines.InvalidLineError as e:
            it.error = f"not valid JSON ({e.__cause__})" if e.__cause__ else "not valid JSON"
        it.pending = False


@dataclass
class BatchResult:
    kept: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    rejected: list = field(default_factory=list)
    op_counts: list = field(default_factory=list)  # per op: [in, kept, dropped, rejected, seconds]
    counters: dict = field(default_factory=dict)   # ops' event counters, e.g. oom_retries

    def encode(self, dumps: Callable[[Any], str]) -> "BatchResult":
        """Turn kept and dropped samples into JSON lines (workers do this, not the parent)."""
        self.kept = [dumps(s) for s in self.kept]
        self.dropped = [dumps(s) for s in self.dropped]
        return self

    @staticmethod
    def merge(parts: list["BatchResult"], n_ops: int) -> "BatchResult":
        out = BatchResult(op_counts=[[0, 0, 0, 0, 0.0] for _ in range(n_ops)])
        for p in parts:
            out.kept += p.kept
            out.dropped += p.dropped
            out.rejected += p.rejected
            for acc, c in zip(out.op_counts, p.op_counts):
                for j in range(5):
                    acc[j] += c[j]
            for k, v in p.counters.items():
                out.counters[k] = out.counters.get(k, 0) + v
        return out


class FailFast(DjxError):
    """on_error: fail, and a sample was bad."""


class OpChain:
    """The ops of a recipe plus the run context; picklable, so it travels to workers by value."""

    def __init__(self, ops: list[Op], ctx: RunContext):
        self.ops = list(ops)
        self.ctx = ctx

    def model_specs(self) -> list:
        return [spec for op in self.ops for spec in op.model_specs()]

    def filter_stats_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        return [(op.name, tuple(op.stats_keys) if isinstance(op, Filter) else ()) for op in self.ops]

    def run(self, items: list[Item], pool=None, on_op: Callable[[int], None] | None = None) -> BatchResult:
        result = BatchResult(op_counts=[[0, 0, 0, 0, 0.0] for _ in self.ops])
        originals: dict[int, Any] = {}
        samples = []
        parse_pending(items)
        for item in items:
            reason = item.error or _not_an_object(item.record)
            if reason:
                self.reject(result, item.pos, item.line, None, reason, "bad_input", item=item, file=item.file)
                continue
            originals[item.pos] = (item.line, item.record, item.file)  # ops work on the copy below
            sample = dict(item.record)
            sample[POSITION_KEY] = item.pos
            samples.append(sample)

        images = BatchImages(self.ctx.dataset_dir, self.ctx.max_image_pixels,
                             load_truncated_images=self.ctx.load_truncated_images)
        try:
            for k, op in enumerate(self.ops):
                if not samples:
                    break
                if on_op:
                    on_op(k)
                t0 = time.perf_counter()
                counts = result.op_counts[k]
                counts[0] += len(samples)
                samples = self._run_op(k, op, samples, images, pool, result, originals)
                counts[4] += time.perf_counter() - t0
        finally:
            images.close()
        result.kept = samples
        return result

    # -- one op over the live samples -------------------------------------------------------
    def _run_op(self, k, op, samples, images, pool, result, originals) -> list[dict]:
        ctx = self.ctx
        text_key = op.text_key or ctx.text_key
        image_key = op.image_key or ctx.image_key
        rejected: dict[int, tuple[str, str | None]] = {}  # index -> (reason, code)
        for i, s in enumerate(samples):
            reason = _input_problem(s, op, text_key, image_key)
            if reason:
                rejected[i] = (reason, "bad_input")
        live = [i for i in range(len(samples)) if i not in rejected]
        step = op.batch_size or len(live) or 1
        for start in range(0, len(live), step):
            idx = live[start:start + step]
            rejected.update(self._call_isolated(op, [samples[i] for i in idx], idx, images, pool,
                                                text_key, image_key, result.counters))
        kept, counts = [], result.op_counts[k]
        for i, s in enumerate(samples):
            if i in rejected:
                counts[3] += 1
                line, original, file = originals[s[POSITION_KEY]]
                self.reject(result, s[POSITION_KEY], line, op.name, *rejected[i], original=original,
                             file=file)
                continue
            if isinstance(op, Filter):
                try:
                    verdict = op.keep(s.get(STATS_KEY, {}))
                except Exception as e:
                    counts[3] += 1
                    line, original, file = originals[s[POSITION_KEY]]
                    self.reject(result, s[POSITION_KEY], line, op.name,
                                 f"{op.name}.keep raised {_short_tb(e)}", "op_error", original=original,
                                 file=file)
                    continue
                keep, why = verdict if isinstance(verdict, tuple) else (verdict, None)
                if not keep:
                    counts[2] += 1
                    s[DROP_KEY] = {"op": op.name, "op_index": k,
                                   "reason": why or _default_reason(op, s.get(STATS_KEY, {}))}
                    result.dropped.append(s)
                    continue
            counts[1] += 1
            kept.append(s)
        return kept

    def _call_isolated(self, op, group, idx, images, pool, text_key, image_key,
                       counters: dict) -> dict[int, tuple[str, str | None]]:
        """Run op on a group; if it raises, run each sample alone so only the bad ones are rejected.
        Returns {sample index: (reason, code)}; the op's event counters are added to `counters`."""
        batch = Batch(group, self.ctx, images, pool, text_key, image_key)
        try:
            _invoke(op, batch)
            for k, v in batch.counters.items():
                counters[k] = counters.get(k, 0) + v
            return {idx[j]: (r, batch.codes.get(j)) for j, r in batch.rejected.items()}
        except Exception as e:
            if len(group) == 1:
                return {idx[0]: (_reason(op, e), e.code if isinstance(e, SampleError) else "op_error")}
        out = {}
        for j, sample in zip(idx, group):
            out.update(self._call_isolated(op, [sample], [j], images, pool, text_key, image_key, counters))
        return out

    def reject(self, result, pos, line, op_name, reason, code=None, item=None, original=None,
                file=0) -> None:
        rec = {POSITION_KEY: pos, **file_field(self.ctx, file), "line": line, "op": op_name,
               "reason": reason, "code": code}
        if item is not None and item.error:
            rec["raw"] = item.raw
        else:
            rec["record"] = original if original is not None else (item.record if item else None)
        if self.ctx.on_error == "fail":
            raise FailFast(fail_message(rec))
        result.rejected.append(rec)


def file_field(ctx, file: int) -> dict:
    """{"file": name} for a record of a dataset of several files; {} for a one-file dataset."""
    return {"file": ctx.input_files[file]} if len(ctx.input_files) > 1 else {}


def fail_message(rec: dict) -> str:
    """What on_error: fail says about a rejected record (the same on every executor)."""
    line, op = rec.get("line"), rec.get("op")
    where = f"line {line}" if line else f"record {rec[POSITION_KEY]}"
    if rec.get("file"):
        where = f"{rec['file']}, {where}"
    return (f"{where}: {rec.get('reason')}" + (f" (op {op})" if op else "")
            + "; set on_error: reject to write bad samples to the rejected file and go on")


def _invoke(op: Op, batch: Batch) -> None:
    if isinstance(op, Filter):
        op.compute_stats(batch)
    elif isinstance(op, Mapper):
        op.process(batch)
    else:
        raise TypeError(f"{type(op).__name__} is neither a Filter nor a Mapper")


def _not_an_object(record) -> str | None:
    if isinstance(record, dict):
        return None
    return f"record is not a JSON object (got {type(record).__name__})"


def _input_problem(sample: dict, op: Op, text_key: str, image_key: str) -> str | None:
    if op.uses_text:
        if text_key not in sample:
            return f"missing text key {text_key!r}"
        if not isinstance(sample[text_key], str):
            return f"text key {text_key!r} is not a string (got {type(sample[text_key]).__name__})"
    if op.uses_images:
        refs = sample.get(image_key)
        if refs is not None and (not isinstance(refs, list) or not all(isinstance(r, str) for r in refs)):
            return f"{image_key!r} must be a list of image paths (strings), got {refs!r:.80}"
    return None


def _reason(op: Op, e: BaseException) -> str:
    if isinstance(e, SampleError):
        return str(e)
    return f"{op.name} raised {_short_tb(e)}"


def _short_tb(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)[-2:]
    where = " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in reversed(frames))
    return f"{type(e).__name__}: {e} (at {where})"


def _default_reason(op: Op, stats: dict) -> str:
    shown = ", ".join(f"{k}={_fmt(stats.get(k))}" for k in getattr(op, "stats_keys", ()))
    return f"{shown} outside the kept range" if shown else "dropped"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return repr(v)
