"""The Ray side of the Ray executor: the row schema and the op-chain stage actors (reading and
parsing the input is in ray_read). Kept apart from the driver (ray.py) so each file reads in one
sitting.

Every stage emits exactly one row per input row. The row schema (module-level names below):
KIND (a RowKind), DATA (the pickled sample, or the pickled Rejection), ORIG (the pickled input
record, kept while a later stage may reject it), NBYTES (the input line's length), and from the
reader AT and FILE (the line's byte offset and file index, which name a batch across retries).
Each stage adds its own meta column: a pickled StageMeta on the first row of each batch.
"""
from __future__ import annotations

import enum
import hashlib
import itertools
import os
import pickle
import threading
import time
from dataclasses import dataclass

import pyarrow as pa

from djx.core.recipe.context import DROP_KEY, POSITION_KEY
from djx.core.errors import DjxError
from djx.core.records import BatchResult, Item, OpCounts, WorkerReport
from djx.core.run.mapped import retrace_drop, retrace_rejection

MiB = 1 << 20
_PICKLE = pickle.HIGHEST_PROTOCOL

KIND, DATA, ORIG, NBYTES, AT, FILE = "kind", "data", "orig", "nbytes", "at", "file"


class RowKind(str, enum.Enum):
    BLANK = "blank"        # a blank line: counted, no sample
    LIVE = "live"          # a sample still in the chain (kept, after the last stage)
    DROPPED = "dropped"    # a sample a filter dropped (DATA: the sample with its drop reason)
    REJECTED = "rejected"  # DATA: a Rejection


def meta_column(stage: int) -> str:
    return f"stage{stage}_meta"


@dataclass
class StageMeta:
    """A stage batch's side channel: its ops' tallies by whole-chain op index (seconds, samples with
    images, reused stats, where the time went: the counts of samples the driver takes from the
    rows), op counters, and the report of the actor that ran it."""
    ops: dict[int, OpCounts]
    counters: dict[str, int]
    worker: str
    report: WorkerReport
    began: float | None = None  # wall clock: the actor began the batch (its last stage's: the start of processing)


# -- the op stages (Ray actors) ---------------------------------------------------------------

class ChainStage:
    """One actor of a stage: ops [first, last) of the chain (the chain it is given) and one
    ModelPool, models loaded once."""

    def __init__(self, setup, first: int, stage: int, final: bool, sys_path: list, poison=None,
                 sample_timeout: float = 600.0, max_batch_bytes: int = 64 * MiB):
        entered = time.time()  # the start-up's instants (the summary's startup_parts)
        from djx.core.executors.process import set_thread_env
        set_thread_env(setup.threads)  # before anything imports torch
        import ray

        from djx.core.executors.process import bind_process
        from djx.core.plan.resources import PeakUss

        self.chain, self.pool = bind_process(setup, sys_path)  # sys_path: the driver's, for module plug-ins
        self.first, self.stage, self.final = first, stage, final
        self.poison, self._ray = poison, ray
        # a process's report apart from its actor's earlier ones: Ray restarts a dead actor under its id
        self.worker = f"stage{stage}:{ray.get_runtime_context().get_actor_id()[:8]}:{os.getpid()}"
        self.peak = PeakUss()
        self.max_batch_bytes = max_batch_bytes
        self.watchdog = _Watchdog(sample_timeout, self._stop)
        # a stage that only prepares takes several batches at once (its actor's max_concurrency): like a local
        # worker's lanes, one computes while the others wait for the scoring actor
        from types import SimpleNamespace

        from djx.core.executors.local.lanes import Lanes
        self.lanes = Lanes(setup.lanes, SimpleNamespace())
        self.pool.waiting = self.lanes.waiting
        if self.pool.scorer() is not None:  # the scoring actors' client, made before the lanes
            self.pool.scorer().waiting = self.lanes.waiting
        self._calls = itertools.count()
        self.pool.setup.update(entered_at=entered, ready_at=time.time())

    def _stop(self, key) -> None:
        """The watchdog's way out of an op call that makes no progress: tell the poison tracker
        (so the sample it was on is rejected as a timeout) and end this actor; Ray retries the batch."""
        if key is not None:
            try:
                self._ray.get(self.poison.stopped.remote(key), timeout=30)
            except Exception:  # noqa: BLE001  the tracker is gone: the run is ending anyway
                pass
        os._exit(3)

    def run(self, table: pa.Table) -> pa.Table:
        """A batch's rows through this stage (stage_actors.py calls it; the driver gives it the batch
        or, from the second stage on, the reference to the last stage's result)."""
        with self.lanes.working(next(self._calls)):
            return self._call(table)

    def _call(self, table: pa.Table) -> pa.Table:
        began = time.time()
        kind, data, orig = (table.column(c).to_pylist() for c in (KIND, DATA, ORIG))
        live = [i for i, k in enumerate(kind) if k == RowKind.LIVE.value]
        items = [Item(j, record=pickle.loads(data[i])) for j, i in enumerate(live)]
        ids = self._ids(table, live, data)
        attempt = self._ask(self.poison.begin, ids) if ids else None
        if attempt is not None and attempt.stop:
            raise DjxError(f"stage {self.stage} ({', '.join(op.name for op in self.chain.ops)}): {attempt.stop}")
        known = attempt.poison if attempt is not None else {}
        spared = [item for item in items if ids[item.pos] not in known] if known else items
        self.watchdog.begin(ids[0] if ids else None)
        try:
            if attempt is None or not attempt.careful:
                nbytes = table.column(NBYTES).to_pylist()  # the input line's length (0: parquet)
                res = self._run(spared, [nbytes[live[item.pos]] or len(data[live[item.pos]]) for item in spared])
            else:  # these samples were in an attempt that killed an actor: one at a time, saying where
                res = self._careful(ids, spared)
        finally:
            self.watchdog.end()
        res.rejected += [self._poisoned(item, known[ids[item.pos]]) for item in items
                         if ids and ids[item.pos] in known]
        if ids:  # waited for: a retry of this task must find these samples done
            self._ask(self.poison.end, ids)
        for s in res.kept:
            data[live[s[POSITION_KEY]]] = pickle.dumps(s, _PICKLE)
        for s in res.dropped:
            i = live[s[POSITION_KEY]]
            retrace_drop(s, pickle.loads(orig[i]), self.chain)  # the text as read, not as it got here
            s[DROP_KEY]["op_index"] += self.first  # its index in the whole chain, not in this stage
            kind[i], data[i] = RowKind.DROPPED.value, pickle.dumps(s, _PICKLE)
        for rej in res.rejected:
            i = live[rej.pos]
            here, rej.record = rej.record, pickle.loads(orig[i])  # the input record, not the sample as it got here
            retrace_rejection(rej, here, self.chain)
            if rej.op_index is not None:
                rej.op_index += self.first
            kind[i], data[i] = RowKind.REJECTED.value, pickle.dumps(rej, _PICKLE)
        return self._table(table, kind, data, orig, res, began)

    def _table(self, table: pa.Table, kind: list, data: list, orig: list, res: BatchResult, began: float) -> pa.Table:
        ops = {self.first + k: OpCounts(seconds=c.seconds, with_images=c.with_images, reused=c.reused, phases=c.phases)
               for k, c in enumerate(res.op_counts)}
        meta = StageMeta(ops, res.counters, self.worker, self.pool.report(self.peak), began)
        n = len(kind)
        out = {KIND: pa.array(kind, pa.string()), DATA: pa.array(data, pa.binary()),
               ORIG: pa.array([b""] * n if self.final else orig, pa.binary()),
               meta_column(self.stage): pa.array([pickle.dumps(meta, _PICKLE)] + [b""] * (n - 1) if n else [],
                                                 pa.binary())}
        return pa.table({**{c: table.column(c) for c in table.column_names if c not in out}, **out})

    def _ask(self, method, *args):
        """A call to the run's poison tracker; its death (an actor killed from outside) is said in
        words: without it a sample that kills its actor could not be isolated."""
        try:
            return self._ray.get(method.remote(*args))
        except self._ray.exceptions.RayActorError:
            raise DjxError("the run's poison-sample tracker (a Ray actor) died (killed from outside, or its "
                           "node was lost); the batches finished so far are saved: run the same command "
                           "again to resume") from None

    def _run(self, items: list, sizes: list) -> BatchResult:
        """The batch through the chain in parts of at most max_batch_bytes of input (one sample at
        least), so the samples and decoded images in work are bounded in bytes, not only rows."""
        res, part, size = None, [], 0
        for item, n in zip(items, sizes):
            part.append(item)
            size += n
            if size >= self.max_batch_bytes:  # as the local reader ends a batch
                one = self.chain.run(part, self.pool, on_op=self.watchdog.tick)
                res = one if res is None else res + one
                part, size = [], 0
        if part or res is None:
            one = self.chain.run(part, self.pool, on_op=self.watchdog.tick)
            res = one if res is None else res + one
        return res

    def _ids(self, table: pa.Table, live: list, data: list) -> list | None:
        """What names each live sample across retries and re-blocking (None: no tracker): its
        stage, file and line offset (JSON Lines), or its stage, file and a hash of its row (parquet:
        identical rows share a name, and a poison one is poison twice)."""
        if self.poison is None or not live:
            return None
        files = table.column(FILE).to_pylist()
        if AT in table.column_names:
            at = table.column(AT).to_pylist()
            return [(self.stage, files[i], at[i]) for i in live]
        return [(self.stage, files[i], hashlib.blake2b(data[i], digest_size=16).hexdigest()) for i in live]

    def _careful(self, ids: list, items: list) -> BatchResult:
        """The batch one sample at a time, the tracker told where each one is. (Per-op counts come
        from the rows at the driver; only op seconds and counters matter in the result.)"""
        res = BatchResult.empty(len(self.chain.ops))
        for item in items:
            sample = ids[item.pos]

            def mark(k, sample=sample):
                self.watchdog.tick(k)
                self._ask(self.poison.at, sample, (sample, k))
            res += self.chain.run([item], self.pool, on_op=mark)
            self._ask(self.poison.at, sample, None)
        return res

    def _poisoned(self, item: Item, poison):
        """The rejection of a sample that killed (or hung) an actor of this stage before."""
        k, name = max(poison.op, 0), self.chain.ops[max(poison.op, 0)].name
        if poison.timeout:
            return self.chain.reject(item, k, f"no progress in {name} for {self.watchdog.limit:g} s "
                                              f"(sample_timeout); its Ray actor was stopped", "timeout")
        return self.chain.reject(item, k, f"worker died while running {name} (its Ray actor process died)",
                                 "worker_died")


class _Watchdog:
    """Stops its actor when one op call makes no progress for `limit` seconds (sample_timeout):
    a thread that looks at the time of the last op start of the batches in work (several at once
    on a stage that only prepares: the one computing ticks; the key is that of the last to tick)."""

    def __init__(self, limit: float, stop):
        self.limit, self._stop = limit, stop
        self._since: float | None = None
        self._key = None
        self._active: dict = {}  # thread -> the key of the batch it works on
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="djx-watchdog", daemon=True).start()

    def begin(self, key) -> None:
        with self._lock:
            self._active[threading.get_ident()] = key
            self._key, self._since = key, time.monotonic()

    def tick(self, _op_index: int = 0) -> None:
        with self._lock:
            self._key = self._active.get(threading.get_ident(), self._key)
            self._since = time.monotonic()

    def end(self) -> None:
        with self._lock:
            self._active.pop(threading.get_ident(), None)
            if self._active:  # another batch is in work: its clock goes on from now
                self._key, self._since = next(iter(self._active.values())), time.monotonic()
            else:
                self._since = None

    def _watch(self) -> None:
        while True:
            since = self._since
            if since is None:
                time.sleep(min(1.0, self.limit))
                continue
            left = since + self.limit - time.monotonic()
            if left <= 0 and self._since == since:
                self._stop(self._key)
            time.sleep(min(max(left, 0.05), 1.0))

