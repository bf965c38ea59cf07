"""Pipeline: the Python API and the one path every run takes (the CLI is a thin layer over it).

    Pipeline.from_recipe("recipe.yaml").run()
    Pipeline(ops=[TextLengthFilter(min_len=5)], np=2).run("in.jsonl", "out/kept.jsonl")
    for sample in Pipeline(ops=[...]).process(samples): ...      # the kept samples
    for outcome in Pipeline(ops=[...]).results(samples): ...     # every sample: kept, dropped, rejected, why
"""
from __future__ import annotations

import os
import time
from contextlib import ExitStack, closing
from dataclasses import dataclass
from typing import Iterable, Iterator

from djx.core.run.chain import OpChain
from djx.core.models.dtypes import slow_dtype_warnings
from djx.core.plan.bytecode import bytecode_warnings
from djx.core.run.estimate import RunClock
from djx.core.run.trial import check_limit, refuse_trial_over_full_run
from djx.core.run.formats import writes_llava
from djx.core.executors import DatasetSource, make_executor
from djx.core.io.input_size import has_more, measure_input
from djx.core.run.ledger import RunLedger
from djx.core.models.pool import estimate_bytes
from djx.core.io.guards import guard_outputs
from djx.core.io.outputs import OutputPaths, OutputWriter
from djx.core.io.writers import analysis_dir
from djx.core.io.user_key import user_key
from djx.core.plan.planner import Plan, cuda_inventory, plan_workers
from djx.core.plan.preflight import refuse_short_host_memory, refuse_unguarded_main
from djx.core.io.dataset import dataset_files, dataset_root
from djx.core.io.export_input import stats_beside
from djx.core.recipe.recipe import Recipe, load_recipe
from djx.core.run.api_setup import pipeline_recipe, refuse_non_ops, with_paths, write_report
from djx.core.plan.resources import cpu_count
from djx.core.run.resume_images import refuse_changed_images
from djx.core.run.resume import fingerprint, resume_point
from djx.core.run.outcome import SampleOutcome, in_memory
from djx.core.run.memory_guard import MemoryGuard
from djx.core.run.stat_reuse import models_unneeded
from djx.core.run.stop import RUN_SAVED
from djx.core.models.share.folder import remove_stale


class Pipeline:
    """A list of ops plus run settings (the recipe's global keys, as keyword arguments)."""

    def __init__(self, ops: list | None = None, recipe: Recipe | str | os.PathLike | None = None, **settings):
        recipe, self._unset_paths = pipeline_recipe(ops, recipe, settings)  # one list of ops, never two
        self.recipe = recipe
        self.ops = list(ops) if ops is not None else recipe.build_ops()
        refuse_non_ops(self.ops)
        for k, op in enumerate(self.ops):  # an op that takes work from an earlier one (one forward for both)
            if hasattr(op, "link_earlier"):
                op.link_earlier(self.ops[:k])
        for op in self.ops:  # ops made in Python: their files are read (and refused) here, not mid-run
            op.load_resources()
        self._inventory = None  # visible GPUs, read once per pipeline

    @classmethod
    def from_recipe(cls, path: str, overrides: dict | None = None, custom_ops=()) -> "Pipeline":
        return cls(recipe=load_recipe(path, overrides, list(custom_ops)))

    def chain(self) -> OpChain:
        return OpChain(self.ops, self.recipe.run_context())

    # -- planning ---------------------------------------------------------------------------
    def plan(self, np: int | None = None, model_bytes: dict | None = None, estimate: bool = False) -> Plan:
        """Workers, devices and threads for this pipeline; `model_bytes` replaces the estimates
        (label -> bytes, as a worker measured them after loading)."""
        specs = list(dict.fromkeys(self.chain().model_specs()))
        listed = tuple(self.recipe.devices)
        self._read_inventory()
        # estimating builds each model on the meta device (transformers in this process): only
        # worth it where memory decides the plan (GPUs; Ray actors declare their memory from it),
        # or when asked for (dry runs)
        want = estimate or bool(self._inventory) or self.recipe.executor == "ray"
        estimated = {s.label(): estimate_bytes(s) if want else 0 for s in specs}
        return plan_workers(np or self.recipe.np, {**estimated, **(model_bytes or {})}, self._inventory,
                            self.recipe.gpu_mem_fraction, cpu_count(), listed, self.recipe.share_models,
                            self._scorer_only())

    def _read_inventory(self) -> list:
        """The visible GPUs (read once; none when no op needs a model or the recipe lists cpu only)."""
        if self._inventory is None:
            listed = tuple(self.recipe.devices)
            wants_cpu = listed and all(d == "cpu" for d in listed)
            self._inventory = cuda_inventory() if self.chain().model_specs() and not wants_cpu else []
        return self._inventory

    def scoring(self) -> str:
        """Where the model ops score: the recipe's `scoring`, with `auto` resolved: `device` on the
        local engine with GPUs when every model op can score apart (one scorer per GPU holds each
        model once and joins the workers' batches: the GPU is fed by every core), else `workers`."""
        if self.recipe.scoring != "auto":
            return self.recipe.scoring
        from djx.core.models.share.score_client import takes_part
        models = [op for op in self.chain().ops if op.model_specs()]
        gpus = [d for d in (self.recipe.devices or [d.name for d in self._read_inventory()]) if d.startswith("cuda")]
        on_gpus = bool(gpus) and bool(self._read_inventory())
        return "device" if (self.recipe.executor == "local" and on_gpus and models
                            and all(takes_part(op) for op in models)) else "workers"

    def _scorer_only(self) -> bool:
        """scoring: device on the local engine, and every model op of the chain scores in the scorer."""
        from djx.core.models.share.score_client import takes_part
        models = [op for op in self.chain().ops if op.model_specs()]
        return (self.scoring() == "device" and self.recipe.executor == "local" and bool(models)
                and all(takes_part(op) for op in models))

    def describe(self, plan: Plan) -> str:
        """The plan, the recipe's notes and the warnings a run or a dry run starts with."""
        from djx.core.plan.preflight import hub_notes
        specs = self.chain().model_specs()
        notes = self.recipe.notes() + [note for op in self.chain().ops for note in op.notes()]
        lines = [plan.describe()] + [f"  note: {note}" for note in notes] + hub_notes(specs)
        if self.recipe.scoring == "auto" and self.scoring() == "device":
            lines.append("  note: scoring: device (the default on GPUs): the workers prepare on the cores and one "
                         "scorer per GPU holds each model once and scores their batches joined, so every core "
                         "feeds the GPU; scoring: workers scores in each worker instead")
        if self.recipe.scoring == "device" and self.recipe.executor == "ray":
            from djx.core.executors.ray.scorers import describe
            from djx.core.executors.ray.stage_plan import ray_stages
            ops = self.chain().ops
            lines.append(f"  note: {describe(ops, ray_stages(ops, True))}")
        return "\n".join(lines + slow_dtype_warnings(specs, plan.devices) + bytecode_warnings(specs))

    # -- in memory --------------------------------------------------------------------------
    def results(self, samples: Iterable[dict]) -> Iterator[SampleOutcome]:
        """Run the ops over in-memory samples in this process; yield what became of every one, in
        input order: kept (with its stats), dropped (the filter and its reason) or rejected (the
        reason and code). `self.last_counts` holds the counts once the iterator is exhausted."""
        return self._in_memory(samples, caller=3)

    def process(self, samples: Iterable[dict]) -> Iterator[dict]:
        """The kept samples of `results(samples)`, with their stats (the dropped and rejected ones
        are counted in `self.last_counts`; `results` gives each with its reason)."""
        return (o.sample for o in self._in_memory(samples, caller=3) if o.kept)

    def _in_memory(self, samples: Iterable[dict], caller: int) -> Iterator[SampleOutcome]:
        counts = {"input": 0, "kept": 0, "dropped": 0, "rejected": 0, "rejected_records": []}
        self.last_counts = counts
        chain = self.chain()  # with the file run's guards that apply in memory (run/memory_guard.py)
        guard = MemoryGuard(chain, self.recipe, warn_at=caller + 1)
        return in_memory(chain, samples, self.recipe.batch_size, counts, guard)

    # -- files ------------------------------------------------------------------------------
    def run(self, dataset_path: str | None = None, export_path: str | None = None, *,
            restart: bool = False, progress: bool = True, log=print, plan: Plan | None = None,
            limit: int | None = None, stop=None) -> dict:
        """Process a dataset (a file, a folder of files or a glob) into the export files; return the
        summary (also written as JSON next to the export).

        `progress`: show start-up, samples done, rate and time left while it runs (a bar on a
        terminal, else a line every DJX_PROGRESS_EVERY_S seconds, on stderr); False for none.
        `log`: called with each line a run says besides progress (the plan, notes, warnings, the
        summary table); `print` by default, e.g. `logging.getLogger("djx").info` or `lambda line: None`.
        Resumes an interrupted run of the same recipe and input unless `restart`. `plan`: workers
        and devices to use instead of planning them. `limit`: a trial run of the first `limit`
        samples, whose summary estimates the whole dataset. `stop` (a core.run.stop.Stop, as the
        command line makes): once requested, the run stops after the batch it is writing, saves its
        progress and raises Stopped. Raises CheckError (after writing the outputs) when the stats or
        the counts do not add up."""
        t0 = time.monotonic()
        early = ExitStack()  # until the first batch nothing is written: a stop ends it at once
        if stop is not None:
            early.enter_context(stop.at_once())
        with early:
            return self._run(recipe_paths=(dataset_path, export_path), restart=restart, progress=progress, log=log,
                             plan=plan, limit=limit, stop=stop, early=early, t0=t0)

    def _run(self, recipe_paths, restart, progress, log, plan, limit, stop, early, t0) -> dict:
        recipe = self._with_paths(*recipe_paths)  # first: a missing path is said before anything starts
        refuse_unguarded_main()
        remove_stale()  # shared weights left behind by runs that were killed
        check_limit(limit)
        run = self._open(recipe, log)
        with run.writer.held():  # from before its state is read: no other run finishes or starts meanwhile
            start = self._resume_point(run, recipe, restart, limit, log)
            if recipe.executor == "ray":  # what the Ray engine cannot read: said now, not after its start-up
                from djx.core.executors.ray.cluster import refuse
                if note := refuse(run.files, start.read):
                    log(note)
            if start.resumed and not start.finishing:
                log(f"[djx] resuming: {start.read.records} samples already done, reading on from there")
            if start.finishing:  # killed while moving its outputs into place: complete that, nothing else
                early.close()
                return run.writer.complete_interrupted(start.manifest, log)
            plan = plan or self.plan(recipe.np)
            refuse_short_host_memory(self, plan, recipe.np)
            log(self.describe(plan))
            summary = self._execute(run, start, plan, recipe, progress, log, limit, stop, t0, early)
        if recipe.report:
            write_report(self.ops, recipe, run.paths.export, log, stop)
        elif os.path.isdir(stale := analysis_dir(run.paths.export)):
            log(f"note: {stale} holds the analysis of an earlier run, not of this one: "
                f"`djx analyze {run.paths.export}` makes it again")
        return summary

    def _open(self, recipe: Recipe, log) -> "_RunFiles":
        """The run's input files, output paths and writer, and its op chain."""
        files = dataset_files(recipe.dataset_path)
        paths = OutputPaths.for_export(recipe.export_path)
        guard_outputs(recipe.dataset_path, paths)
        root = dataset_root(recipe.dataset_path)
        chain = OpChain(self.ops, recipe.input_context(files))
        side_stats, warning = stats_beside(recipe.dataset_path, files)  # an export's stats file
        if warning:
            log(warning)
        chain.lazy_models = models_unneeded(chain, files, side_stats)  # a re-filter of an export loads no model
        writer = OutputWriter(paths, recipe.export_dropped, recipe.keep_stats_in_res_ds, recipe.export_shard_size,
                              training_ready=writes_llava(chain.ctx), key=user_key(), input_files=files)
        return _RunFiles(files, root, paths, chain, side_stats, writer)

    def _resume_point(self, run: "_RunFiles", recipe: Recipe, restart: bool, limit: int | None, log):
        """Where this run starts: from scratch, or where an interrupted run of the same work stopped."""
        start = resume_point(None if restart else run.writer.load_manifest(),
                             {**fingerprint(recipe, self.ops, run.files, run.root), **({"limit": limit} if limit else {})},
                             len(self.ops), run.paths.state_dir)
        if limit is not None and not restart and not start.resumed:
            refuse_trial_over_full_run(run.paths, limit)
        if start.note:
            log(start.note)
        if start.resumed and not start.finishing:
            refuse_changed_images(run.writer, start.manifest, self.ops, run.chain.ctx.image_key)
        return start

    def _execute(self, run: "_RunFiles", start, plan: Plan, recipe: Recipe, progress: bool, log,
                 limit: int | None, stop, t0: float, early: ExitStack) -> dict:
        """The executor's results into the ledger, batch by batch; the summary. `early` (a stop
        that ends the run at once, while nothing is written) is closed before the first batch."""
        executor = make_executor(run.chain, plan, recipe, replan=lambda measured: self.plan(recipe.np, measured), log=log,
                                 scoring=self.scoring())
        clock = RunClock(measure_input(run.files), limit, t0)
        source = DatasetSource(run.files, start.read, recipe.batch_size, recipe.max_batch_bytes, limit, clock.processing,
                               recipe.max_record_bytes, run.side_stats)
        early.close()
        # the results are closed on the way out, before the ledger saves and the error is said: an
        # executor's clean-up (Ray's shutdown, its log's end) never waits for the traceback's end
        with RunLedger(run.writer, start, run.chain, recipe, executor, progress, log, t0, clock) as ledger, \
                closing(executor.run(source, stop)) as results:
            for result in results:
                ledger.add(result)
                if stop is not None:
                    stop.check(RUN_SAVED)
            clock.partial = limit is not None and has_more(run.files, source.state)
            ledger.end(source.state, stop)
            return ledger.finish(plan, source.state, source.read_seconds)

    def _with_paths(self, dataset_path: str | None, export_path: str | None) -> Recipe:
        """The recipe, with the paths given to run() in place of its own."""
        return with_paths(self.recipe, dataset_path, export_path, self._unset_paths)


@dataclass(frozen=True)
class _RunFiles:
    """One run's input files (and root), output paths and writer, op chain, and stats file beside its input (or None)."""
    files: list
    root: str
    paths: OutputPaths
    chain: OpChain
    side_stats: str | None
    writer: OutputWriter
