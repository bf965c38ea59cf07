"""The Ray side of the Ray executor: reading JSON Lines, parsing rows, and the op-chain stage
actors. Kept apart from the driver (core/ray_executor.py) so each file reads in one sitting."""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time

import dill
import pyarrow as pa

from .chain import BatchResult, Item, OpChain
from .context import DROP_KEY, POSITION_KEY
from .errors import DjxError
from .resources import peak_device_bytes

MiB = 1 << 20
BLOCK_LINES, BLOCK_BYTES = 4096, 32 * MiB
_PICKLE = pickle.HIGHEST_PROTOCOL


# -- reading and parsing (Ray tasks) ----------------------------------------------------------

def _file_datasource():
    from ray.data.datasource import FileBasedDatasource
    return FileBasedDatasource


class JsonLines(_file_datasource()):
    """A JSON Lines file as its lines, split on b"\\n" only and kept as bytes with their newline:
    what the local reader sees. (read_text splits with str.splitlines, which also breaks lines at
    \\r, U+0085 and U+2028, all valid inside a JSON line, and fails the whole file on bad UTF-8.)"""

    def __init__(self, files: list[str], start: int = 0, first: int = 0, **kwargs):
        super().__init__(files, **kwargs)
        self.start = start  # a resumed run's read offset (a line start) in its first file
        self.first = first  # the dataset index of files[0] (a resumed run skips finished files)
        self.index = file_index(files, first)

    def _read_stream(self, f, path: str):
        file = lookup_file(self.index, path)
        skip = self.start if file == self.first else 0
        at = skip
        while skip > 0:  # a sequential stream: read past the part already done
            got = len(f.read(min(skip, 4 * MiB)))
            if not got:
                return
            skip -= got
        tail, lines, starts, size = b"", [], [], 0
        while chunk := f.read(4 * MiB):
            *complete, tail = (tail + chunk).split(b"\n")
            for line in complete:
                lines.append(line + b"\n")
                starts.append(at)
                at += len(line) + 1
                size += len(line) + 1
                if len(lines) >= BLOCK_LINES or size >= BLOCK_BYTES:
                    yield _lines_table(lines, starts, file)
                    lines, starts, size = [], [], 0
        if tail:
            lines.append(tail)
            starts.append(at)
        if lines:
            yield _lines_table(lines, starts, file)


def file_index(files: list[str], first: int = 0) -> dict:
    return {os.path.normpath(os.path.abspath(f)): first + i for i, f in enumerate(files)}


def lookup_file(index: dict, path: str) -> int:
    """The dataset index of a file as Ray names it (with or without a scheme or leading slash)."""
    for prefix in ("file://", "local://"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    key = os.path.normpath(path if path.startswith("/") else "/" + path)
    if key not in index:
        raise RuntimeError(f"djx bug: Ray read {path!r}, which is not one of the dataset's files")
    return index[key]


def _lines_table(lines: list, starts: list, file: int) -> pa.Table:
    return pa.table({"raw": pa.array(lines, pa.binary()), "at": pa.array(starts, pa.int64()),
                     "file": pa.array([file] * len(lines), pa.int32())})


def parse_lines(table: pa.Table, ctx, keep_orig: bool) -> pa.Table:
    """Lines -> rows. Items are made as core.reader makes them for local workers (raw text,
    `pending`) and parsed by the chain itself, so a bad line is rejected with the same reason."""
    raws = table.column("raw").to_pylist()
    files = table.column("file").to_pylist()
    rows = [i for i, raw in enumerate(raws) if raw.strip()]
    items = [Item(j, raw=raws[i].decode("utf-8", "replace").rstrip("\r\n"), pending=True, file=files[i])
             for j, i in enumerate(rows)]
    out = _first_rows(items, rows, len(raws), ctx, keep_orig, [len(r) for r in raws])
    return out.append_column("at", table.column("at")).append_column("file", table.column("file"))


def parse_rows(table: pa.Table, ctx, keep_orig: bool, index: dict | None) -> pa.Table:
    """Parquet rows -> rows: records are the rows as dicts, as core.reader reads them. With
    several files (`index`), Ray's "path" column (include_paths) tells each row's file."""
    if index is None:
        files = [0] * table.num_rows
    else:
        files = [lookup_file(index, p) for p in table.column("path").to_pylist()]
        table = table.drop_columns(["path"])
    items = [Item(i, record=r, file=files[i]) for i, r in enumerate(table.to_pylist())]
    out = _first_rows(items, list(range(len(items))), len(items), ctx, keep_orig, [0] * len(items))
    return out.append_column("file", pa.array(files, pa.int32()))


def _first_rows(items: list, rows: list, n: int, ctx, keep_orig: bool, nbytes: list) -> pa.Table:
    """Reject what is not a sample (the chain's own rule, run with no ops); the rest is live."""
    kind, data, orig = ["blank"] * n, [b""] * n, [b""] * n
    res = OpChain([], ctx).run(items)
    for s in res.kept:
        i = rows[s[POSITION_KEY]]
        kind[i], data[i] = "live", pickle.dumps(s, _PICKLE)
        if keep_orig:  # a later rejection writes the input record, as the local executor does
            orig[i] = pickle.dumps(items[s[POSITION_KEY]].record, _PICKLE)
    for rec in res.rejected:
        i = rows[rec[POSITION_KEY]]
        kind[i], data[i] = "rejected", pickle.dumps(rec, _PICKLE)
    return pa.table({"kind": pa.array(kind, pa.string()), "data": pa.array(data, pa.binary()),
                     "orig": pa.array(orig, pa.binary()), "end": pa.array([-1] * n, pa.int32()),
                     "nbytes": pa.array(nbytes, pa.int64())})


# -- poison samples: which batch each stage is on, and where ------------------------------------

class Attempts:
    """One small actor per run. A stage actor that dies takes its batch with it, and Ray retries
    the batch on a fresh actor. The retry learns here that its batch killed an actor: it then
    runs the batch one sample at a time, telling this registry which sample and op it is on, so
    the next death names the poison sample, which the retry after it rejects. Each retry either
    names one more poison sample or counts as a death that named none (two of those end the run)."""

    def __init__(self):
        self.open: dict = {}  # batch key -> {"tries", "at": (sample, op) | None, "poison", "blind"}

    def begin(self, key) -> tuple[int, dict, int]:
        """(earlier attempts, {sample: op} known to kill, deaths that named no sample)"""
        e = self.open.get(key)
        if e is None:
            self.open[key] = {"tries": 1, "at": None, "poison": {}, "blind": 0}
            return 0, {}, 0
        if e["at"] is not None:
            sample, op = e["at"]
            e["poison"][sample] = op
            e["at"] = None
        elif e["tries"] > 1:  # died in careful mode outside any sample
            e["blind"] += 1
        e["tries"] += 1
        return e["tries"] - 1, dict(e["poison"]), e["blind"]

    def at(self, key, where) -> None:
        if key in self.open:
            self.open[key]["at"] = where

    def end(self, key) -> None:
        self.open.pop(key, None)


# -- the op stages (Ray actors) ---------------------------------------------------------------

class ChainStage:
    """One actor of a stage: ops [first, last) of the chain and one ModelPool, models loaded once."""

    def __init__(self, chain_bytes: bytes, first: int, last: int, stage: int, final: bool,
                 threads: int, gpu: bool, custom_ops: tuple, base_dir: str, sys_path: list,
                 attempts=None):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        sys.path += [p for p in sys_path if p not in sys.path and os.path.isdir(p)]  # module plug-ins
        import ray

        from .model_pool import process_pool
        from .registry import load_builtin_ops, load_custom_ops, load_entry_point_ops
        from .resources import uss_bytes

        load_builtin_ops()  # plug-ins first: unpickling the chain needs their classes
        load_custom_ops(custom_ops, base_dir)
        load_entry_point_ops()
        chain = dill.loads(chain_bytes)
        self.chain = OpChain(chain.ops[first:last], chain.ctx.with_(on_error="reject"))
        self.first, self.stage, self.final = first, stage, final
        self.attempts, self._ray = attempts, ray
        device = "cuda:0" if gpu else "cpu"  # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU
        if "torch" in sys.modules or self.chain.model_specs():
            import torch
            torch.set_num_threads(threads)
            if gpu:
                torch.cuda.set_device(device)
        self.pool = process_pool(device)
        for spec in self.chain.model_specs():
            self.pool.get(spec)
        self.worker = f"stage{stage}:{ray.get_runtime_context().get_actor_id()[:8]}"
        self._uss = uss_bytes
        self.peak_uss, self.sampled_at = uss_bytes(), time.monotonic()

    def __call__(self, table: pa.Table) -> pa.Table:
        kind, data, orig, end = (table.column(c).to_pylist() for c in ("kind", "data", "orig", "end"))
        live = [i for i, k in enumerate(kind) if k == "live"]
        items = [Item(j, record=pickle.loads(data[i])) for j, i in enumerate(live)]
        key = self._key(table, live, data)
        tries, poison, blind = (self._ray.get(self.attempts.begin.remote(key)) if key is not None
                                else (0, {}, 0))
        if tries == 0:
            res = self.chain.run(items, self.pool)
            rejections = list(self._rejections(res))
        else:  # this batch killed an actor before: one sample at a time, and say where
            if blind >= 2:
                raise DjxError(f"stage {self.stage} ({', '.join(op.name for op in self.chain.ops)}): "
                               f"its actors keep dying on one batch outside any sample (out of "
                               f"memory?); lower batch_size or give the actors more memory")
            res, rejections = self._careful(key, items, poison)
            res.counters["actor_deaths"] = res.counters.get("actor_deaths", 0) + tries
        if key is not None:
            self.attempts.end.remote(key)
        for s in res.kept:
            data[live[s[POSITION_KEY]]] = pickle.dumps(s, _PICKLE)
        for s in res.dropped:
            i = live[s[POSITION_KEY]]
            s[DROP_KEY]["op_index"] += self.first  # its index in the whole chain, not in this stage
            kind[i], end[i], data[i] = "dropped", s[DROP_KEY]["op_index"], pickle.dumps(s, _PICKLE)
        for k, rec in rejections:
            i = live[rec[POSITION_KEY]]
            rec["record"] = pickle.loads(orig[i])  # the input record, not the sample as it got here
            kind[i], end[i], data[i] = "rejected", self.first + k, pickle.dumps(rec, _PICKLE)
        if time.monotonic() - self.sampled_at > 1.0:  # reading smaps costs ms: sample it
            self.peak_uss, self.sampled_at = max(self.peak_uss, self._uss()), time.monotonic()
        meta = {"seconds": {self.first + k: c[4] for k, c in enumerate(res.op_counts)},
                "counters": res.counters, "worker": self.worker,
                "report": {"pool": self.pool.report(), "peak_uss": self.peak_uss,
                           "peak_device_bytes": peak_device_bytes(self.pool.device)}}
        n = len(kind)
        out = {"kind": pa.array(kind, pa.string()), "data": pa.array(data, pa.binary()),
               "orig": pa.array([b""] * n if self.final else orig, pa.binary()),
               "end": pa.array(end, pa.int32()),
               f"meta{self.stage}": pa.array([pickle.dumps(meta, _PICKLE)] + [b""] * (n - 1) if n else [],
                                             pa.binary())}
        return pa.table({**{c: table.column(c) for c in table.column_names if c not in out}, **out})

    def _key(self, table: pa.Table, live: list, data: list):
        """What names this batch across retries: its first line's byte offset (JSON Lines), or a
        hash of its rows (parquet)."""
        if self.attempts is None or not live:
            return None
        if "at" in table.column_names:
            return (self.stage, table.column("file")[0].as_py(), table.column("at")[0].as_py(),
                    table.num_rows)
        return (self.stage, hashlib.sha256(b"".join(data)).hexdigest(), table.num_rows)

    def _careful(self, key, items: list, poison: dict) -> tuple[BatchResult, list]:
        """The batch one sample at a time, the registry told where each one is; the samples known
        to kill are rejected unrun. (Per-op counts come from the rows' kinds at the driver; only
        op seconds and counters travel in the result.)"""
        ops = self.chain.ops
        res = BatchResult(op_counts=[[0, 0, 0, 0, 0.0] for _ in ops])
        rejections = []
        for item in items:
            j = item.pos
            if j in poison:
                k = max(poison[j], 0)
                self.chain.reject(res, j, None, ops[k].name, f"worker died while running {ops[k].name} "
                                  f"(its Ray actor process died)", "worker_died", item=item)
                rejections.append((k, res.rejected.pop()))  # line and file: the driver's
                continue
            one = self.chain.run([item], self.pool,
                                 on_op=lambda k: self._ray.get(self.attempts.at.remote(key, (j, k))))
            self._ray.get(self.attempts.at.remote(key, None))
            res.kept += one.kept
            res.dropped += one.dropped
            rejections += self._rejections(one)
            for acc, c in zip(res.op_counts, one.op_counts):
                acc[4] += c[4]
            for name, v in one.counters.items():
                res.counters[name] = res.counters.get(name, 0) + v
        return res, rejections

    def _rejections(self, res: BatchResult):
        """(op index in this stage, record): OpChain appends each op's rejections in op order."""
        it = iter(res.rejected)
        for k, counts in enumerate(res.op_counts):
            for _ in range(counts[3]):
                rec = next(it)
                if rec.get("op") != self.chain.ops[k].name:
                    raise RuntimeError(f"djx bug: rejections out of op order ({rec.get('op')} at op "
                                       f"{self.chain.ops[k].name})")
                yield k, rec
