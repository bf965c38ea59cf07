"""The dedup phase's groups formed on a Ray cluster with Ray Data (`executor: ray`).

The driver reads the parts back and adds each sample's (key, position) rows as locally, but a
table here holds at most `budget` rows: past that they go to the object store as one block
(`ray.put` of an Arrow table), so the driver holds one block and the blocks' references, never all
rows. Once every sample is in, Ray Data hash-partitions the blocks by key (`repartition(keys=...)`,
the shuffle `groupby().map_groups` runs on; one block a partition, never split), and a task per
partition sorts it and calls the same function the local engine calls on its partition files
(core.dedup.edges). Only the edges come back, and the index joins them into its parent array as
locally: same groups, same roots (the first position), same reasons, by construction.

SimHash (`pair_edges`) takes two shuffles of the same blocks: one by signature (equal ones), one
by (family, candidate key) after each block was expanded to its distinct signatures' candidate keys
on the cluster; each partition keeps a signature's first position and compares the pairs of a key.

Each partition's result carries the rows it grouped and the process that grouped them, which the
run's summary counts (`events.dedup_rows_grouped_on_ray`, `dedup_partitions_on_ray`)."""
from __future__ import annotations

import logging
import os
import threading
import warnings
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from djx.core.dedup.edges import Edges, distinct, key_edges, near_edges
from djx.core.dedup.key_rows import ROW, KeyRows
from djx.core.errors import DjxError
from djx.core.records import add_counters

PARTITION_ROWS = 4_000_000  # rows a shuffle partition holds at most, about (24 bytes each; a sort doubles it)
FAMILY = "fam"


class RayGroups:
    """One dedup phase's link to the cluster: `session()` around the phase; the first block joins
    the recipe's cluster (or starts a local one, as the run did; Ray's output goes to the run's Ray
    log) and the session's end leaves it. `rows(budget)` is each index's table. `events`: what the
    phase did on Ray, for the summary."""

    def __init__(self, address: str | None, log_path: str | None = None):
        self.address, self.log_path = address, log_path
        self.events: dict[str, int] = {}
        self._ray = self._log = self._level = None
        self._ours = None
        self._threads: set = set()

    def rows(self, budget: int) -> "RayRows":
        return RayRows(self, budget)

    def count(self, counters: dict[str, int]) -> None:
        self.events = add_counters(self.events, counters)

    def ray(self):
        """The ray module, connected (at the first call)."""
        if self._ray is None:
            import ray

            from djx.core.executors.ray.cluster import connect
            from djx.core.executors.ray.ray_log import RayLog
            if self.log_path:
                self._log = RayLog(self.log_path)
                self._log.__enter__()
            self._level = logging.getLogger("ray.data").level
            logging.getLogger("ray.data").setLevel(logging.ERROR)
            self._ours = connect(ray, self.address)
            # the threads the session's end gives time to end: Ray Data's, started from here on; not
            # Ray's own (its log printer, error listener, GC), which end only with the shutdown that
            # follows: waiting for them cost every dedup phase on Ray 10 s at its end
            self._threads = set(threading.enumerate())
            self._ray = ray
        return self._ray

    @contextmanager
    def session(self):
        from djx.core.executors.ray.cluster import explain, let_fetches_end
        try:
            yield self
        except Exception as e:  # Ray's errors (a task's, Ray Data's wrappers) said in djx's words
            if type(e).__module__.split(".")[0] != "ray":
                raise
            raise DjxError(f"the dedup phase on Ray: {explain(e)}") from None
        finally:
            if self._ours:
                let_fetches_end(self._threads)
                self._ours.shut_down(self._ray)
            if self._log is not None:
                self._log.__exit__(None, None, None)
            if self._level is not None:
                logging.getLogger("ray.data").setLevel(self._level)
            self._ray = self._log = self._level = None
            self._ours = None


class RayRows(KeyRows):
    """KeyRows whose rows past `budget` go to the object store as blocks, and whose groups are
    formed by Ray Data (`edges`, `pair_edges`)."""

    def __init__(self, cluster: RayGroups, budget: int):
        super().__init__(None, budget)
        self.cluster, self.spills = cluster, True
        self.blocks: list = []  # ObjectRefs of Arrow tables (k1, k2, pos)
        self.n_rows = 0

    def _spill(self) -> None:
        import pyarrow as pa
        if not self.chunks:
            return
        rows = np.concatenate(self.chunks) if len(self.chunks) > 1 else self.chunks[0]
        self.chunks, self.held = [], 0
        self.blocks.append(self.cluster.ray().put(pa.table({name: rows[name] for name in ROW.names})))
        self.n_rows += len(rows)
        self.cluster.count({"dedup_blocks_to_ray": 1})

    def edges(self, fn: Callable[[np.ndarray], Edges] = key_edges) -> Iterator[Edges]:
        """`fn` of each partition of the rows by (k1, k2), sorted, on the cluster: its Edges."""
        yield from self._run(lambda ds: ds.repartition(self._partitions(self.n_rows), keys=["k1", "k2"])
                             .map_batches(_grouped, fn_kwargs={"fn": fn}, **_TASK))

    def pair_edges(self, candidates: Callable, near: Callable) -> Iterator[Edges]:
        """PairIndex's edges (see its docstring): equal signatures (k1), then near ones sharing a
        candidate key of a family."""
        yield from self.edges(key_edges)
        n_families = len(candidates(np.zeros(0, dtype=np.uint64)))
        yield from self._run(lambda ds: ds.map_batches(_candidate_rows, fn_kwargs={"candidates": candidates}, **_TASK)
                             .repartition(self._partitions(self.n_rows * n_families), keys=[FAMILY, "k1"])
                             .map_batches(_grouped_near, fn_kwargs={"near": near}, **_TASK))

    def close(self) -> None:
        super().close()
        self.blocks = []  # the driver's references go: Ray frees the blocks

    def _partitions(self, rows: int) -> int:
        cpus = int(self.cluster.ray().cluster_resources().get("CPU", 1))
        return max(1, min(len(self.blocks), cpus), -(-rows // PARTITION_ROWS))

    def _run(self, plan: Callable) -> Iterator[Edges]:
        """The edges of `plan(the blocks as a dataset)` as its partitions come back; their tallies
        into the cluster's events."""
        self._settle()
        self._spill()
        if not self.blocks:
            return
        ray = self.cluster.ray()
        with _data_context():  # a dataset carries the context it was built in
            dataset = plan(ray.data.from_arrow_refs(self.blocks))
            for batch in dataset.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=1):
                meta = batch["a"] < 0  # each partition's first row: (-1, rows grouped, pid)
                self.cluster.count({"dedup_partitions_on_ray": int(meta.sum()),
                                    "dedup_rows_grouped_on_ray": int(batch["b"][meta].sum()),
                                    "dedup_partitions_in_driver": int((batch["pid"][meta] == os.getpid()).sum())})
                yield Edges(batch["a"][~meta], batch["b"][~meta])


_TASK = {"batch_size": None, "batch_format": "numpy", "zero_copy_batch": True}


@contextmanager
def _data_context():
    """Ray Data quiet and on its hash shuffle (one block a partition: a group is never split)."""
    from ray.data import DataContext
    from ray.data.context import ShuffleStrategy
    with warnings.catch_warnings():  # Ray sets and copies its own deprecated context fields
        warnings.simplefilter("ignore", DeprecationWarning)
        old = DataContext.get_current()
        ctx = old.copy()
        ctx.shuffle_strategy = ShuffleStrategy.SHUFFLE_V2
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        DataContext._set_current(ctx)
        try:
            yield
        finally:
            DataContext._set_current(old)


def _rows(batch: dict, fields=ROW.names, dtype=ROW) -> np.ndarray:
    rows = np.empty(len(batch["pos"]), dtype)
    for name in fields:
        rows[name] = batch[name]
    return rows


def _result(edges: Edges, n_rows: int) -> dict:
    """The edges, after one row that says how many rows this partition grouped, and where."""
    return {"a": np.concatenate(([-1], edges.a)).astype(np.int64),
            "b": np.concatenate(([n_rows], edges.b)).astype(np.int64),
            "pid": np.full(len(edges.a) + 1, os.getpid(), np.int64)}


def _grouped(batch: dict, fn: Callable[[np.ndarray], Edges]) -> dict:
    """A Ray task: one partition (every row of its keys), sorted, through `fn`."""
    rows = _rows(batch)
    rows = rows[np.lexsort((rows["pos"], rows["k2"], rows["k1"]))]
    return _result(fn(rows), len(rows))


_FAMILY_ROW = np.dtype([(FAMILY, "<i8")] + [(n, ROW.fields[n][0]) for n in ROW.names])


def _candidate_rows(batch: dict, candidates: Callable) -> dict:
    """A Ray task: a block's distinct signatures (k1), each with its first position here, as one
    row per family: (family, candidate key, signature, position)."""
    rows = _rows(batch)
    first = distinct(rows[np.lexsort((rows["pos"], rows["k2"], rows["k1"]))])
    keys = candidates(first["k1"])
    out = np.empty(len(first) * len(keys), _FAMILY_ROW)
    for f, family_keys in enumerate(keys):
        part = out[f * len(first):(f + 1) * len(first)]
        part[FAMILY], part["k1"], part["k2"], part["pos"] = f, family_keys, first["k1"], first["pos"]
    return {name: out[name] for name in _FAMILY_ROW.names}


def _grouped_near(batch: dict, near: Callable) -> dict:
    """A Ray task: one partition of candidate rows; per family, one row per (key, signature) (its
    first position: the signature's first in the dataset) and the near pairs of each key."""
    rows = _rows(batch, _FAMILY_ROW.names, _FAMILY_ROW)
    rows = rows[np.lexsort((rows["pos"], rows["k2"], rows["k1"], rows[FAMILY]))]
    found, starts = [], np.flatnonzero(np.diff(rows[FAMILY], prepend=-1))
    for lo, hi in zip(starts, list(starts[1:]) + [len(rows)]):
        family = np.empty(hi - lo, ROW)
        for name in ROW.names:
            family[name] = rows[name][lo:hi]
        found.append(near_edges(distinct(family), near))
    if not found:
        return _result(Edges.none(), len(rows))
    return _result(Edges(np.concatenate([e.a for e in found]), np.concatenate([e.b for e in found])), len(rows))
