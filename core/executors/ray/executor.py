"""Ray executor: the same op chain on Ray, for datasets beyond one machine.

    read lines (task) -> parse (tasks) -> the driver -> one actor stage per group of ops -> the driver

Ray Data reads and parses (blocks.py); the stages run in djx's own actors, created as soon as Ray
is there so they load their models while Ray Data starts (stage_actors.py). Consecutive ops whose
models overlap form one stage, so one actor (one ModelPool) holds one copy of a model its ops
share; a run of model-free ops is a stage too. Every stage emits exactly one row per input row,
and the results come back in input order, so the driver numbers records and lines itself:
global positions and line numbers are exact with no coordination between tasks. Rows carry pickled
samples in binary columns (no Arrow schema for heterogeneous dicts) and small columns: the row's
kind (blank/live/dropped/rejected), the line's byte length, and per stage a side channel on the
first row of each batch (op seconds, counters, actor report): see stages.py, and read.py. A batch
that kills its actor is retried; the retry isolates the sample that kills (poison.py); the driver
watches its node's raylet (node_watch.py). A resume reads on from the saved byte offset. Ray's own
output goes to a log file (ray_log.py)."""
from __future__ import annotations

import logging
import os
import pickle
import sys
import threading
import time
import uuid
from typing import Iterator

import dill

from djx.core.run.chain import OpChain
from djx.core.recipe.context import DROP_KEY, POSITION_KEY
from djx.core.errors import DjxError
from djx.core.op.deduplicator import Deduplicator
from djx.core.executors.base import DatasetSource
from djx.core.executors.process import WorkerSetup
from djx.core.executors.ray.cluster import (connect, explain, importing_ray_data, let_fetches_end, node_memory,
                                            refuse)
from djx.core.executors.ray.node_watch import NodeLost, local_raylet, silence_ray_logs, watched
from djx.core.executors.ray.poison import PoisonTracker
from djx.core.executors.ray.ray_log import log_path, logged
from djx.core.executors.ray.scorers import LANES, RayScorers, prepare_only_stages
from djx.core.executors.ray.blocks import parsed_blocks
from djx.core.executors.ray.read import advance
from djx.core.executors.ray.stage_actors import StageActors, StageSpec
from djx.core.executors.ray.stage_plan import actor_need, cpu_tokens, fitted, largest_node_memory, ray_stages
from djx.core.executors.ray.weights import shared_weights
from djx.core.executors.ray.stages import DATA, FILE, KIND, NBYTES, ChainStage, RowKind, meta_column
from djx.core.plan.planner import Plan
from djx.core.io.readers import ReadState
from djx.core.recipe.recipe import Recipe
from djx.core.records import BatchResult, FailFast, WorkerReport, add_counters
from djx.core.models.share.weight_share import WeightShare

# a call whose actor died is retried on the restarted actor. The poison tracker bounds the deaths of each batch
# (its first, one per poison sample, two that name no sample: ray/poison.py); Ray's count only stops deaths it
# cannot see (outside any batch): every sample of a batch may be poison twice
EXTRA_RETRIES = 3


class RayExecutor:
    def __init__(self, chain: OpChain, plan: Plan, recipe: Recipe):
        self.chain, self.plan, self.recipe = chain, plan, recipe
        self.reports: dict[str, WorkerReport] = {}  # actor name -> its last report
        self.started_at = self.connected_at = None  # Ray asked for, Ray there (run/breakdown.py: startup_parts)
        self.restarts = 0                           # actor deaths (Ray restarts a dead stage actor itself)
        self._share = None  # the weights CPU actors read from the object store (models/share/ray_store.py)
        self.groups = ray_stages(chain.ops, recipe.scoring == "device")  # the stages (stage_plan.py), until
        self._scorers = None  # run() knows the node's memory, then the scoring actors' plan for them
        self._client, self._node_memory = None, 0.0  # scoring actors' client (scorers.py); largest node's memory
        self._actors = None  # the stages' actors (stage_actors.py)

    def _use(self, groups: list) -> None:
        """Run these stages (and under scoring: device, the scoring actors' plan for them)."""
        self.groups, recipe = groups, self.recipe
        self._scorers = RayScorers(self.chain.ops, groups, self.plan.threads_per_worker, tuple(recipe.custom_ops),
                                   recipe.base_dir, not (recipe.devices and set(recipe.devices) == {"cpu"})
                                   ) if recipe.scoring == "device" else None

    def run(self, source: DatasetSource, stop=None) -> Iterator[BatchResult]:
        """BatchResults in input order over the source's files (all of one format), each with the
        reader position after it; `source.state` advances as rows come back. Once `stop` is
        requested, Stopped while waiting for the next batch (Ray is shut down on the way out)."""
        if source.state.file >= len(source.files):  # resumed after everything was read: nothing left for Ray
            return
        refuse(source.files, source.state)
        yield from logged(self._run(source, stop), log_path(self.recipe.export_path))

    def _run(self, source: DatasetSource, stop=None) -> Iterator[BatchResult]:
        files, state = source.files, source.state
        import ray
        self.started_at = time.time()
        ours = None
        try:
            with importing_ray_data():  # meanwhile, in a thread (a Ctrl-C while it ends: Ray stopped too)
                ours = connect(ray, self.recipe.ray_address, stop)  # None: this process was connected already
        except BaseException:
            if ours:
                ours.shut_down(ray)
            raise
        self.connected_at = time.time()
        threads = set(threading.enumerate())
        data_log = logging.getLogger("ray.data")
        level, lost, self._poison = data_log.level, False, None
        try:
            data_log.setLevel(logging.ERROR)
            self._raylet = local_raylet(ray)
            parquet = files[0].lower().endswith(".parquet")
            self._node_memory = largest_node_memory(ray)
            scored = self.recipe.scoring == "device" and bool(prepare_only_stages(self.chain.ops, self.groups))
            self._use(fitted(self.chain.ops, self.groups, self.plan.model_bytes, self.recipe.batch_size,
                             self._node_memory, scored=scored))
            io_cpus = self._start_actors(ray)  # they load their models while Ray Data starts reading
            blocks = parsed_blocks(ray, files, state, io_cpus, self.chain.ctx.with_(on_error="reject"),
                                   bool(self.groups), self.recipe.batch_size, self.recipe.max_record_bytes)
            tables = self._actors.through(blocks) if self._actors is not None else blocks
            yield from self._collect(tables, state, not parquet, source.limit, stop)
        except ray.exceptions.RayError as e:
            raise DjxError(f"ray executor: {explain(e)}") from None
        except NodeLost:
            lost = True  # Ray ends this process at its next touch of the node: no more calls into it
            raise DjxError(f"the Ray node this run drives died (its raylet process exited); the "
                           f"{state.records} samples received before that are saved: run the same command "
                           f"again to resume (it starts or joins Ray afresh)") from None
        except Exception as e:  # Ray Data's own wrappers (SystemException ...) of an actor's death
            if isinstance(e, DjxError) or not node_memory(e):
                raise
            raise DjxError(f"ray executor: {explain(e)}") from None
        finally:
            data_log.setLevel(level)
            if lost:
                silence_ray_logs()
            if self._actors is not None and not lost:
                self._actors.stop()
            if self._poison is not None and not lost:
                ray.kill(self._poison)
            if self._scorers is not None and not lost:
                self._scorers.stop(ray)
            if ours:  # disconnects from a joined cluster; stops a local one we started (lost: no calls)
                if not lost:
                    let_fetches_end(threads)
                ours.shut_down(ray, lost)

    def _start_actors(self, ray) -> float:
        """The run's actors: the poison tracker, the scoring actors (scoring: device) and the stages';
        the CPUs a read or parse task declares."""
        if self.groups:
            self._poison = ray.remote(num_cpus=0)(PoisonTracker).options(
                name=f"djx-poison-tracker-{os.getpid()}-{uuid.uuid4().hex[:8]}").remote()
        if self._scorers is not None and self._scorers.stages:  # scoring: device (scorers.py)
            self._client = self._scorers.start(ray, len(self.groups) * self.plan.workers)
        # one copy of each model per node, in the object store, where several actors load it (a task
        # loads it, weights.py); none when the stats are there (re-filter). A model one actor loads is
        # read by that actor: a shared copy would cost one more load, for no copy saved
        if self.recipe.share_models and not self.chain.lazy_models and self.plan.workers > 1:
            refs = shared_weights(ray, self._scorers.actor_specs(self.groups) if self._client else
                                  self.chain.model_specs(), self.plan.on_gpu, tuple(self.recipe.custom_ops),
                                  self.recipe.base_dir)
            self._share = None if refs is None else WeightShare(refs=refs)
        io_cpus, actor_cpus = cpu_tokens(float(ray.cluster_resources().get("CPU", 1)),
                                         len(self.groups) * self.plan.workers)
        if self.groups:
            self._actors = StageActors(ray, ChainStage, [self._stage_spec(s, actor_cpus)
                                                         for s in range(len(self.groups))])
        return io_cpus

    def _stage_spec(self, s: int, cpus: float) -> StageSpec:
        """Stage s's actors: how many, their declared resources and their constructor's arguments."""
        first, last, specs = self.groups[s]
        scored = self._client is not None and s in self._scorers.stages  # prepares only: no weights here
        n_model_stages = sum(1 for _, _, stage_specs in self.groups if stage_specs) or 1
        need = actor_need(self.chain.ops[first:last], specs, self.plan.model_bytes, self.recipe.batch_size,
                          self._node_memory, weights=not scored)
        # model stages run side by side, so they split the plan's threads and GPU share between them
        gpu = bool(specs) and self.plan.on_gpu and not scored
        per_gpu = max((info.get("workers", 1) for dev, info in self.plan.per_device.items()
                       if dev.startswith("cuda")), default=1)
        threads = max(1, self.plan.threads_per_worker // n_model_stages) if specs else 1
        stage_chain = OpChain(self.chain.ops[first:last], self.chain.ctx.with_(on_error="reject"),
                              export_kept=s == len(self.groups) - 1,  # paths of kept: at the last stage
                              lazy_models=self.chain.lazy_models,  # stats reused: models loaded on demand
                              reads_input=False,  # stages get samples: the read step admitted the input
                              earlier_stats=frozenset(k for op in self.chain.ops[:first]
                                                      for k in getattr(op, "stats_keys", ())),
                              earlier_hashes=frozenset(k for op in self.chain.ops[:first]
                                                       if isinstance(op, Deduplicator) for k in op.stats_keys))
        # a stage that only prepares runs LANES calls at once (threads): it prepares the next batch while
        # the last is scored. Ray restarts a dead actor and retries its calls there
        options = {"num_cpus": cpus, "memory": need, "num_gpus": 1.0 / (per_gpu * n_model_stages) if gpu else 0,
                   "max_concurrency": LANES if scored else 1, "max_restarts": -1,
                   "max_task_retries": 2 * self.recipe.batch_size + EXTRA_RETRIES}
        return StageSpec(self.plan.workers, options, per_actor=LANES + 1 if scored else 2, kwargs={
            # by value, with its RunContext (tokens included); the driver enforces on_error: fail
            # Ray sets CUDA_VISIBLE_DEVICES to this actor's GPU: it is cuda:0 in the actor
            "setup": WorkerSetup(dill.dumps(stage_chain), "cuda:0" if gpu else "cpu", threads,
                                 tuple(self.recipe.custom_ops), self.recipe.base_dir,
                                 share=self._share if specs and not scored else None,
                                 scoring="device" if scored else "workers",
                                 scorer=self._client if scored else None, lanes=LANES if scored else 1),
            "first": first, "stage": s, "final": s == len(self.groups) - 1,
            "sys_path": [p for p in sys.path if p], "poison": self._poison,
            "sample_timeout": self.recipe.sample_timeout, "max_batch_bytes": self.recipe.max_batch_bytes})

    # -- the driver: number the rows, rebuild BatchResults ----------------------------------
    def _collect(self, tables, state: ReadState, lines: bool, limit: int | None = None,
                 stop=None) -> Iterator[BatchResult]:
        """BatchResults from the returned rows (`tables`: a table per batch, in input order); with
        `limit` (a trial run), none past that many samples (the rows Ray made beyond it are left unread)."""
        for table in watched(tables, self._raylet, stop):
            res = BatchResult.empty(len(self.chain.ops))
            res.reach = []  # rows come in input order: the early check sees samples as locally
            col = {name: table.column(name).to_pylist() for name in table.column_names}
            for i, kind in enumerate(col[KIND]):
                if limit is not None and state.records >= limit:
                    break
                advance(state, col[FILE][i], col[NBYTES][i] if lines else None)
                if kind == RowKind.BLANK.value:
                    state.blank_lines += 1
                    continue
                self._add_row(res, RowKind(kind), pickle.loads(col[DATA][i]), state, lines)
            for s in range(len(self.groups)):
                for blob in filter(None, col.get(meta_column(s), ())):
                    self._absorb(res, pickle.loads(blob))
            res.read_at = dict(vars(state))
            self._count_deaths(res)
            yield res
            if limit is not None and state.records >= limit:
                return

    def _add_row(self, res: BatchResult, kind: RowKind, rec, state: ReadState, lines: bool) -> None:
        """A returned row into the result: its position, and the counts of each op it passed."""
        n_ops = len(self.chain.ops)
        if kind == RowKind.REJECTED:
            rec.pos, rec.line, rec.file = state.records, state.lines if lines else None, state.file
            end = rec.op_index if rec.op_index is not None else -1  # -1: rejected before any op
            if self.recipe.on_error == "fail":
                raise FailFast(rec.fail_message(self.chain.ctx.input_files))
            res.rejected.append(rec)
        else:
            rec[POSITION_KEY] = state.records
            end = n_ops if kind == RowKind.LIVE else rec[DROP_KEY]["op_index"]
            (res.kept if kind == RowKind.LIVE else res.dropped).append(rec)
        if end >= 0:
            record = rec.record if kind == RowKind.REJECTED else rec
            res.reach.append((state.records, min(end, n_ops - 1),
                              isinstance(record, dict) and bool(record.get(self.chain.ctx.image_key))))
        state.records += 1
        for counts in res.op_counts[:max(end, 0)]:
            counts.seen += 1
            counts.kept += 1
        if 0 <= end < n_ops:
            res.op_counts[end].seen += 1
            if kind == RowKind.DROPPED:
                res.op_counts[end].dropped += 1
            else:
                res.op_counts[end].rejected += 1

    def _absorb(self, res: BatchResult, meta) -> None:
        """A stage batch's side channel: its ops' seconds, phases and more, op counters and its actor's report."""
        for k, tally in meta.ops.items():
            res.op_counts[k] += tally
        res.counters = add_counters(res.counters, meta.counters)
        # the block entered its last stage: every model stage before had loaded its models by then
        res.began_at = max((t for t in (res.began_at, meta.began) if t is not None), default=None)
        self.reports[meta.worker] = meta.report

    def _count_deaths(self, res: BatchResult) -> None:
        """The actor deaths the poison tracker counted since the last batch, into this one (a death
        takes its batch's result with it, so only the tracker sees them all)."""
        if self._poison is None:
            return
        import ray
        try:
            deaths = ray.get(self._poison.death_count.remote(), timeout=60)
        except ray.exceptions.RayError:  # the tracker is gone: the stage that needs it says so
            return
        if deaths > self.restarts:
            res.counters = add_counters(res.counters, {"actor_deaths": deaths - self.restarts})
            self.restarts = deaths
