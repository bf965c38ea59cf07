"""Ray executor: the same op chain over Ray Data, for datasets beyond one machine.

    read (lines as bytes) -> parse (tasks) -> one actor stage per group of ops -> driver

Ops are grouped: consecutive ops whose models overlap share a stage (one actor holds one
ModelPool, so they share one copy); a run of model-free ops is a stage of its own. Every stage
emits exactly one row per input row, in order (preserve_order), so the driver numbers records and
lines itself: global positions and line numbers are exact without any cross-task coordination.
Rows carry pickled samples in binary columns (no Arrow schema for heterogeneous dicts) plus small
columns: kind (blank/live/dropped/rejected), end (the op a row left at), per-op seconds, and per
stage the actor's pool report.
"""
from __future__ import annotations

import logging
import os
import pickle
import sys
import time
import warnings
from typing import Iterator

import dill
import pyarrow as pa

from .chain import BatchResult, FailFast, Item, OpChain
from .context import DROP_KEY, POSITION_KEY
from .errors import DjxError
from .planner import Plan
from .recipe import Recipe
from .resources import cpu_count

MiB = 1 << 20
DECODE_BYTES_PER_SAMPLE = 4 * MiB   # decoded images of one sample in flight (memory= allowance)
ACTOR_BASE_BYTES = 256 * MiB        # interpreter + libraries of one actor
BLOCK_LINES, BLOCK_BYTES = 4096, 32 * MiB
_PICKLE = pickle.HIGHEST_PROTOCOL


class RayExecutor:
    def __init__(self, chain: OpChain, plan: Plan, recipe: Recipe):
        self.chain, self.plan, self.recipe = chain, plan, recipe
        self.reports: dict[str, dict] = {}   # worker id -> {"pool": ..., "peak_uss": ...}
        self.restarts = 0                    # Ray restarts dead actors itself; not counted here
        self.groups = stage_groups(chain.ops)

    def run_dataset(self, path: str, state, snapshots) -> Iterator[BatchResult]:
        """Yield one BatchResult per driver batch, in input order, keeping `state` current."""
        lower = path.lower()
        if lower.endswith(".json"):
            raise DjxError(f"{path}: the ray executor reads JSON Lines (.jsonl) or parquet; convert the "
                           f".json array to .jsonl (one object per line) or use executor: local")
        import ray
        connected = not ray.is_initialized()  # else: use the Ray this process is already connected to
        if connected:
            init = {"address": self.recipe.ray_address} if self.recipe.ray_address else {
                "num_cpus": cpu_count(), "include_dashboard": False}
            try:
                ray.init(**init, logging_level=logging.ERROR, log_to_driver=True)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise DjxError(f"cannot start or join Ray (ray_address: {self.recipe.ray_address!r}): "
                               f"{_first_lines(e, 3)}") from None
        quiet = logging.getLogger("ray.data")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            ds = self._dataset(path, lower.endswith(".parquet"))
            yield from self._collect(ds, state, snapshots, not lower.endswith(".parquet"))
        except ray.exceptions.RayError as e:
            raise DjxError(f"ray executor: {_first_lines(e)}") from None
        finally:
            quiet.setLevel(level)
            if connected:  # a cluster we joined keeps running; a local one we started stops
                ray.shutdown()

    # -- building the dataset ---------------------------------------------------------------
    def _dataset(self, path: str, parquet: bool):
        import ray
        from ray.data import ActorPoolStrategy, DataContext

        old = DataContext.get_current()
        with warnings.catch_warnings():  # copying touches Ray's own deprecated properties
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx = old.copy()
        ctx.execution_options.preserve_order = True  # stage outputs come back in input order
        ctx.enable_progress_bars = False             # the pipeline draws its own
        ctx.print_on_execution_start = False
        DataContext._set_current(ctx)                # datasets built now carry this context
        try:
            cpus, gpus, mem = self._resources(ray)
            # One file is one read task; it asks for at most half the cluster's CPUs, and actors share
            # 90% of the rest as fractions. CPU is a scheduling token here (real use is bounded by
            # torch threads): a whole CPU per actor would leave a 2-CPU cluster no room for the read
            # task, and so would fractions summing to a hair over the rest (Ray rounds to 1e-4).
            read_cpus = min(1.0, cpus / 2)
            n_actors = max(1, len(self.groups) * self.plan.workers)
            actor_cpus = max(0.001, min(1.0, int((cpus - read_cpus) * 9000 / n_actors) / 10000))
            ctx_ = self.chain.ctx.with_(on_error="reject")  # the driver enforces on_error: fail
            last_stage = not self.groups
            if parquet:
                ds = ray.data.read_parquet(path, partitioning=None, num_cpus=read_cpus)
                ds = ds.map_batches(_parse_rows, fn_kwargs={"ctx": ctx_, "keep_orig": not last_stage},
                                    batch_size=None, batch_format="pyarrow", num_cpus=read_cpus)
            else:
                ds = ray.data.read_datasource(_JsonLines(path), num_cpus=read_cpus)
                ds = ds.map_batches(_parse_lines, fn_kwargs={"ctx": ctx_, "keep_orig": not last_stage},
                                    batch_size=None, batch_format="pyarrow", num_cpus=read_cpus)
            chain_bytes = dill.dumps(self.chain)
            n_model_groups = sum(1 for g in self.groups if g[2]) or 1
            for s, (first, last, specs) in enumerate(self.groups):
                uses_gpu = bool(specs) and self.plan.on_gpu
                threads = max(1, self.plan.threads_per_worker // n_model_groups) if specs else 1
                need = (sum(self.plan.model_bytes.get(spec.label(), 0) for spec in specs)
                        + ACTOR_BASE_BYTES + self.recipe.batch_size * DECODE_BYTES_PER_SAMPLE)
                if need > mem:
                    raise DjxError(f"a ray actor for {self._names(first, last)} needs about {need / 2**30:.2f} "
                                   f"GiB of memory but the largest node offers {mem / 2**30:.2f} GiB; "
                                   f"lower batch_size or add memory")
                ds = ds.map_batches(
                    _ChainStage, batch_size=self.recipe.batch_size, batch_format="pyarrow",
                    compute=ActorPoolStrategy(size=self.plan.workers),
                    fn_constructor_kwargs={
                        "chain_bytes": chain_bytes, "first": first, "last": last, "stage": s,
                        "final": s == len(self.groups) - 1, "threads": threads, "gpu": uses_gpu,
                        "custom_ops": tuple(self.recipe.custom_ops), "base_dir": self.recipe.base_dir,
                        "sys_path": [p for p in sys.path if p]},
                    num_cpus=actor_cpus, num_gpus=self._gpu_fraction(n_model_groups) if uses_gpu else 0,
                    memory=need)
            return ds
        finally:
            DataContext._set_current(old)

    def _resources(self, ray) -> tuple[float, float, float]:
        total = ray.cluster_resources()
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        mem = max((n.get("memory", 0) for n in nodes), default=total.get("memory", 0))
        return float(total.get("CPU", 1)), float(total.get("GPU", 0)), float(mem)

    def _gpu_fraction(self, n_model_groups: int) -> float:
        """Each model stage has plan.workers actors; together they fill the GPUs the plan uses."""
        per_gpu = max((info.get("workers", 1) for dev, info in self.plan.per_device.items()
                       if dev.startswith("cuda")), default=1)
        return 1.0 / (per_gpu * n_model_groups)

    def _names(self, first: int, last: int) -> str:
        return ", ".join(op.name for op in self.chain.ops[first:last])

    # -- the driver: number rows, rebuild BatchResults ----------------------------------------
    def _collect(self, ds, state, snapshots, lines: bool) -> Iterator[BatchResult]:
        n_ops = len(self.chain.ops)
        fail = self.recipe.on_error == "fail"
        for table in ds.iter_batches(batch_size=self.recipe.batch_size, batch_format="pyarrow",
                                     prefetch_batches=1):
            res = BatchResult(op_counts=[[0, 0, 0, 0, 0.0] for _ in range(n_ops)])
            col = {name: table.column(name).to_pylist() for name in table.column_names}
            for i, kind in enumerate(col["kind"]):
                if lines:
                    state.lines += 1
                    state.offset += col["nbytes"][i]
                if kind == "blank":
                    state.blank_lines += 1
                    continue
                rec = pickle.loads(col["data"][i])
                rec[POSITION_KEY] = state.records
                state.records += 1
                end = n_ops if kind == "live" else col["end"][i]
                for k in range(max(0, min(end, n_ops))):
                    res.op_counts[k][0] += 1
                    res.op_counts[k][1] += 1
                if kind == "live":
                    res.kept.append(rec)
                    continue
                if end >= 0:
                    res.op_counts[end][0] += 1
                    res.op_counts[end][2 if kind == "dropped" else 3] += 1
                if kind == "dropped":
                    res.dropped.append(rec)
                    continue
                rec["line"] = state.lines if lines else None
                if fail:
                    raise FailFast(_fail_message(rec))
                res.rejected.append(rec)
            for k in range(n_ops):
                res.op_counts[k][4] += sum(col.get(f"t{k}", ()))
            for s in range(len(self.groups)):
                for blob in col.get(f"rep{s}", ()):
                    if blob:
                        rep = pickle.loads(blob)
                        self.reports[rep.pop("worker")] = rep
            snapshots.append(dict(vars(state)))
            yield res


def stage_groups(ops: list) -> list[tuple[int, int, frozenset]]:
    """[(first, last, model specs)]: consecutive ops sharing a model, or a run of model-free ops."""
    groups: list[tuple[int, int, frozenset]] = []
    for k, op in enumerate(ops):
        specs = frozenset(op.model_specs())
        if groups:
            first, _, have = groups[-1]
            if (not specs and not have) or (specs & have):
                groups[-1] = (first, k + 1, have | specs)
                continue
        groups.append((k, k + 1, specs))
    return groups


def _fail_message(rec: dict) -> str:
    """The message OpChain raises for on_error: fail, with the global line or position."""
    line, pos, op = rec.get("line"), rec[POSITION_KEY], rec.get("op")
    where = f"line {line}" if line else f"record {pos}"
    return (f"{where}: {rec.get('reason')}" + (f" (op {op})" if op else "")
            + "; set on_error: reject to write bad samples to the rejected file and go on")


def _on_first(value, zero, n: int) -> list:
    return [value] + [zero] * (n - 1) if n else []


def _first_lines(e: BaseException, n: int = 12) -> str:
    text = str(e).strip().splitlines()
    return "\n".join(text[:n]) + ("\n..." if len(text) > n else "")


# -- reading and parsing (Ray tasks) ----------------------------------------------------------

def _datasource_base():
    from ray.data.datasource import FileBasedDatasource
    return FileBasedDatasource


class _JsonLines(_datasource_base()):
    """A JSON Lines file as its lines, split on b"\\n" only, as bytes with their newline: exactly
    what the local reader sees. (read_text uses str.splitlines, which also splits on U+2028,
    U+0085 and \\r, characters valid inside a JSON line, and fails the file on bad UTF-8.)"""

    def _read_stream(self, f, path: str):
        tail, lines, size = b"", [], 0
        while True:
            chunk = f.read(4 * MiB)
            if not chunk:
                break
            parts = (tail + chunk).split(b"\n")
            tail = parts.pop()
            for p in parts:
                lines.append(p + b"\n")
                size += len(p) + 1
                if len(lines) >= BLOCK_LINES or size >= BLOCK_BYTES:
                    yield pa.table({"raw": pa.array(lines, pa.binary())})
                    lines, size = [], 0
        if tail:
            lines.append(tail)
        if lines:
            yield pa.table({"raw": pa.array(lines, pa.binary())})


def _parse_lines(table: pa.Table, ctx, keep_orig: bool) -> pa.Table:
    """Lines -> rows, as core.reader parses them (same jsonlines calls, same error reasons)."""
    import jsonlines

    raws = table.column("raw").to_pylist()
    reader = jsonlines.Reader(iter([r for r in raws if r.strip()]))
    items, rows = [], []
    for i, raw in enumerate(raws):
        if not raw.strip():
            continue
        try:
            item = Item(len(items), record=reader.read())
        except jsonlines.InvalidLineError as e:
            text = e.line.decode("utf-8", "replace") if isinstance(e.line, bytes) else str(e.line)
            cause = e.__cause__
            why = f"not valid JSON ({cause})" if cause else "not valid JSON"
            item = Item(len(items), error=why, raw=text.rstrip("\r\n"))
        items.append(item)
        rows.append(i)
    out = _first_rows(items, rows, len(raws), ctx, keep_orig)
    out["nbytes"] = pa.array([len(r) for r in raws], pa.int64())
    return pa.table(out)


def _parse_rows(table: pa.Table, ctx, keep_orig: bool) -> pa.Table:
    """Parquet rows -> rows (records are the rows as dicts, like core.reader's parquet reader)."""
    items = [Item(i, record=r) for i, r in enumerate(table.to_pylist())]
    out = _first_rows(items, list(range(len(items))), len(items), ctx, keep_orig)
    out["nbytes"] = pa.array([0] * len(items), pa.int64())
    return pa.table(out)


def _first_rows(items: list, rows: list, n: int, ctx, keep_orig: bool) -> dict:
    """Reject what is not a sample (the chain's own rule, no ops yet); every other row is live."""
    kind, data, orig = ["blank"] * n, [b""] * n, [b""] * n
    res = OpChain([], ctx).run(items)
    for s in res.kept:
        i = rows[s[POSITION_KEY]]
        kind[i], data[i] = "live", pickle.dumps(s, _PICKLE)
        if keep_orig:
            orig[i] = pickle.dumps(items[s[POSITION_KEY]].record, _PICKLE)
    for rec in res.rejected:
        i = rows[rec[POSITION_KEY]]
        kind[i], data[i] = "rejected", pickle.dumps(rec, _PICKLE)
    return {"kind": pa.array(kind, pa.string()), "data": pa.array(data, pa.binary()),
            "orig": pa.array(orig, pa.binary()), "end": pa.array([-1] * n, pa.int32())}


# -- the op stages (Ray actors) ---------------------------------------------------------------

class _ChainStage:
    """One actor of a stage: ops [first, last) of the chain, one ModelPool, models loaded once."""

    def __init__(self, chain_bytes: bytes, first: int, last: int, stage: int, final: bool,
                 threads: int, gpu: bool, custom_ops: tuple, base_dir: str, sys_path: list):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        for p in sys_path:  # module-name plug-ins importable in the driver are importable here
            if p not in sys.path and os.path.isdir(p):
                sys.path.append(p)
        from .model_pool import process_pool
        from .registry import load_builtin_ops, load_custom_ops, load_entry_point_ops

        load_builtin_ops()
        load_custom_ops(custom_ops, base_dir)
        load_entry_point_ops()
        chain = dill.loads(chain_bytes)
        self.first, self.stage, self.final = first, stage, final
        self.chain = OpChain(chain.ops[first:last], chain.ctx.with_(on_error="reject"))
        device = "cuda:0" if gpu else "cpu"  # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU
        if "torch" in sys.modules or self.chain.model_specs():
            import torch
            torch.set_num_threads(threads)
            if gpu:
                torch.cuda.set_device(device)
        self.pool = process_pool(device)
        for spec in self.chain.model_specs():
            self.pool.get(spec)
        import ray
        self.worker = f"stage{stage}:{ray.get_runtime_context().get_actor_id()[:8]}"
        from .resources import uss_bytes
        self._uss = uss_bytes
        self.peak_uss, self.sampled_at = uss_bytes(), 0.0

    def __call__(self, table: pa.Table) -> pa.Table:
        kind = table.column("kind").to_pylist()
        data = table.column("data").to_pylist()
        orig = table.column("orig").to_pylist()
        end = table.column("end").to_pylist()
        live = [i for i, k in enumerate(kind) if k == "live"]
        res = self.chain.run([Item(j, record=pickle.loads(data[i])) for j, i in enumerate(live)], self.pool)
        for s in res.kept:
            data[live[s[POSITION_KEY]]] = pickle.dumps(s, _PICKLE)
        for s in res.dropped:
            i = live[s[POSITION_KEY]]
            s[DROP_KEY]["op_index"] += self.first  # the index in the full chain, not in this stage
            kind[i], end[i], data[i] = "dropped", s[DROP_KEY]["op_index"], pickle.dumps(s, _PICKLE)
        for k, rec in self._rejections(res):
            i = live[rec[POSITION_KEY]]
            rec["record"] = pickle.loads(orig[i])  # the input record, as the local executor writes it
            kind[i], end[i], data[i] = "rejected", self.first + k, pickle.dumps(rec, _PICKLE)
        n = len(kind)
        out = {"kind": pa.array(kind, pa.string()), "data": pa.array(data, pa.binary()),
               "orig": pa.array([b""] * n if self.final else orig, pa.binary()),
               "end": pa.array(end, pa.int32())}
        for k, counts in enumerate(res.op_counts):  # the batch's seconds ride on its first row
            out[f"t{self.first + k}"] = pa.array(_on_first(counts[4], 0.0, n), pa.float64())
        if time.monotonic() - self.sampled_at > 1.0:  # reading smaps costs ms: sample it
            self.peak_uss, self.sampled_at = max(self.peak_uss, self._uss()), time.monotonic()
        report = pickle.dumps({"worker": self.worker, "pool": self.pool.report(), "peak_uss": self.peak_uss})
        out[f"rep{self.stage}"] = pa.array(_on_first(report, b"", n), pa.binary())
        keep = [c for c in table.column_names if c not in out]
        return pa.table({**{c: table.column(c) for c in keep}, **out})

    def _rejections(self, res: BatchResult):
        """(op index in this stage, record): OpChain appends each op's rejections in op order."""
        it = iter(res.rejected)
        for k, counts in enumerate(res.op_counts):
            for _ in range(counts[3]):
                rec = next(it)
                if rec.get("op") != self.chain.ops[k].name:
                    raise RuntimeError(f"rejection order: expected op {self.chain.ops[k].name}, got {rec}")
                yield k, rec
