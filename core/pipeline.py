"""Pipeline: the Python API and the one path every run takes (the CLI is a thin layer over it).

    Pipeline.from_recipe("recipe.yaml").run()
    Pipeline(ops=[TextLengthFilter(min_len=5)], np=2).run("in.jsonl", "out/kept.jsonl")
    for sample in Pipeline(ops=[...]).process(samples): ...
"""
from __future__ import annotations

import itertools
import json
import os
import time
from contextlib import ExitStack, closing
from typing import Iterable, Iterator

from djx.core.run.chain import OpChain
from djx.core.models.dtypes import slow_dtype_warnings
from djx.core.errors import DjxError
from djx.core.run.estimate import RunClock
from djx.core.run.formats import writes_llava
from djx.core.executors import DatasetSource, make_executor
from djx.core.io.input_size import has_more, measure_input
from djx.core.run.ledger import RunLedger
from djx.core.models.pool import estimate_bytes, process_pool
from djx.core.io.guards import guard_outputs
from djx.core.io.outputs import OutputPaths, OutputWriter
from djx.core.plan.planner import Plan, cuda_inventory, plan_workers
from djx.core.plan.preflight import refuse_short_host_memory, refuse_unguarded_main
from djx.core.io.dataset import dataset_files, dataset_root
from djx.core.io.export_input import stats_beside
from djx.core.recipe.recipe import Recipe, load_recipe, recipe_from_dict
from djx.core.records import Item
from djx.core.plan.resources import cpu_count
from djx.core.run.resume import fingerprint, resume_point
from djx.core.run.stat_reuse import models_unneeded
from djx.core.run.stop import RUN_SAVED, Stopped
from djx.core.models.share.folder import remove_stale


class Pipeline:
    """A list of ops plus run settings (the recipe's global keys, as keyword arguments)."""

    def __init__(self, ops: list | None = None, recipe: Recipe | str | os.PathLike | None = None, **settings):
        if isinstance(recipe, (str, os.PathLike)):  # a recipe file, as from_recipe takes it
            recipe = load_recipe(os.fspath(recipe))
        elif recipe is not None and not isinstance(recipe, Recipe):
            raise DjxError(f"Pipeline(recipe=...): expected a recipe file path or a Recipe, got {type(recipe).__name__}")
        if recipe is None:
            base = {"dataset_path": settings.pop("dataset_path", "unset.jsonl"),
                    "export_path": settings.pop("export_path", "unset.jsonl")}
            if "text_key" in settings:
                settings["text_keys"] = settings.pop("text_key")
            recipe = recipe_from_dict({**base, **settings}, base_dir=os.getcwd())
        elif settings:
            recipe = recipe_from_dict({**recipe.to_dict(), **settings}, base_dir=recipe.base_dir)
        self.recipe = recipe
        self.ops = list(ops) if ops is not None else recipe.build_ops()
        _refuse_non_ops(self.ops)
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
        wants_cpu = listed and all(d == "cpu" for d in listed)
        if self._inventory is None:
            self._inventory = cuda_inventory() if specs and not wants_cpu else []
        # estimating builds each model on the meta device (transformers in this process): only
        # worth it where memory decides the plan (GPUs; Ray actors declare their memory from it),
        # or when asked for (dry runs)
        want = estimate or bool(self._inventory) or self.recipe.executor == "ray"
        estimated = {s.label(): estimate_bytes(s) if want else 0 for s in specs}
        return plan_workers(np or self.recipe.np, {**estimated, **(model_bytes or {})}, self._inventory,
                            self.recipe.gpu_mem_fraction, cpu_count(), listed, self.recipe.share_models,
                            self._scorer_only())

    def _scorer_only(self) -> bool:
        """scoring: device on the local engine, and every model op of the chain scores in the scorer."""
        from djx.core.models.share.score_client import takes_part
        models = [op for op in self.chain().ops if op.model_specs()]
        return (self.recipe.scoring == "device" and self.recipe.executor == "local" and bool(models)
                and all(takes_part(op) for op in models))

    def describe(self, plan: Plan) -> str:
        """The plan, the recipe's notes and the warnings a run or a dry run starts with."""
        from djx.core.plan.preflight import hub_notes
        specs = self.chain().model_specs()
        lines = [plan.describe()] + [f"  note: {note}" for note in self.recipe.notes()] + hub_notes(specs)
        if self.recipe.scoring == "device" and self.recipe.executor == "ray":
            from djx.core.executors.ray.scorers import describe
            from djx.core.executors.ray.stages import stage_groups
            ops = self.chain().ops
            lines.append(f"  note: {describe(ops, stage_groups(ops))}")
        return "\n".join(lines + slow_dtype_warnings(specs, plan.devices))

    # -- in memory --------------------------------------------------------------------------
    def process(self, samples: Iterable[dict]) -> Iterator[dict]:
        """Run the ops over in-memory samples in this process; yield the kept ones with stats.

        `self.last_counts` holds kept/dropped/rejected counts once the iterator is exhausted."""
        chain = self.chain()
        pool = process_pool()
        counts = {"input": 0, "kept": 0, "dropped": 0, "rejected": 0, "rejected_records": []}
        self.last_counts = counts
        it = iter(samples)
        pos = 0
        while block := list(itertools.islice(it, self.recipe.batch_size)):
            res = chain.run([Item(pos + i, record=r) for i, r in enumerate(block)], pool)
            pos += len(block)
            counts["input"] += len(block)
            counts["kept"] += len(res.kept)
            counts["dropped"] += len(res.dropped)
            counts["rejected"] += len(res.rejected)
            counts["rejected_records"] += [rej.to_record() for rej in res.rejected]
            yield from res.kept

    # -- files ------------------------------------------------------------------------------
    def run(self, dataset_path: str | None = None, export_path: str | None = None, *,
            restart: bool = False, progress: bool = True, log=print, plan: Plan | None = None,
            limit: int | None = None, stop=None) -> dict:
        """Process a dataset (a file, a folder of files or a glob) into the export files; return the summary (also written as JSON).

        Resumes an interrupted run of the same recipe and input unless `restart`. `limit`: a trial
        run of the first `limit` samples, whose summary estimates the whole dataset. `stop` (a
        core.run.stop.Stop, as the command line makes): once requested, the run stops after the
        batch it is writing, saves its progress and raises Stopped. Raises CheckError (after
        writing the outputs) when the stats or the counts do not add up."""
        t0 = time.monotonic()
        early = ExitStack()  # until the first batch nothing is written: a stop ends it at once
        if stop is not None:
            early.enter_context(stop.at_once())
        with early:
            return self._run(recipe_paths=(dataset_path, export_path), restart=restart, progress=progress, log=log,
                             plan=plan, limit=limit, stop=stop, early=early, t0=t0)

    def _run(self, recipe_paths, restart, progress, log, plan, limit, stop, early, t0) -> dict:
        dataset_path, export_path = recipe_paths
        refuse_unguarded_main()
        remove_stale()  # shared weights left behind by runs that were killed
        recipe = self._with_paths(dataset_path, export_path)
        _check_limit(limit, recipe)
        files = dataset_files(recipe.dataset_path)
        paths = OutputPaths.for_export(recipe.export_path)
        guard_outputs(recipe.dataset_path, paths)
        root = dataset_root(recipe.dataset_path)
        chain = OpChain(self.ops, recipe.run_context(
            input_files=tuple(os.path.relpath(f, root) for f in files) if len(files) > 1 else (),
            export_dir=os.path.dirname(paths.export)))
        side_stats, warning = stats_beside(recipe.dataset_path, files)  # an export's stats file
        if warning:
            log(warning)
        chain.lazy_models = models_unneeded(chain, files, side_stats)  # a re-filter of an export loads no model
        writer = OutputWriter(paths, recipe.export_dropped, recipe.keep_stats_in_res_ds, recipe.export_shard_size,
                              training_ready=writes_llava(chain.ctx))
        start = resume_point(None if restart else writer.load_manifest(),
                             {**fingerprint(recipe, self.ops, files, root), **({"limit": limit} if limit else {})},
                             len(self.ops), paths.state_dir)
        if limit is not None and not restart and not start.resumed:
            _refuse_trial_over_full_run(paths, limit)
        if start.note:
            log(start.note)
        if start.finishing:  # killed while moving its outputs into place: complete that, nothing else
            early.close()
            return writer.complete_interrupted(log)
        if start.resumed:
            log(f"[djx] resuming: {start.read.records} samples already done, reading on from there")
        plan = plan or self.plan(recipe.np)
        refuse_short_host_memory(self, plan, recipe.np)
        log(self.describe(plan))
        executor = make_executor(chain, plan, recipe, replan=lambda measured: self.plan(recipe.np, measured), log=log)
        clock = RunClock(measure_input(files), limit, t0)
        source = DatasetSource(files, start.read, recipe.batch_size, recipe.max_batch_bytes, limit, clock.processing,
                               recipe.max_record_bytes, side_stats)
        early.close()
        # the results are closed on the way out, before the ledger saves and the error is said: an
        # executor's clean-up (Ray's shutdown, its log's end) never waits for the traceback's end
        with RunLedger(writer, start, chain, recipe, executor, progress, log, t0, clock) as ledger, \
                closing(executor.run(source, stop)) as results:
            for result in results:
                ledger.add(result)
                if stop is not None:
                    stop.check(RUN_SAVED)
            clock.partial = limit is not None and has_more(files, source.state)
            ledger.end(source.state)
            summary = ledger.finish(plan, source.state)
        if recipe.report:
            _write_report(self.ops, recipe, paths.export, log, stop)
        return summary

    def _with_paths(self, dataset_path: str | None, export_path: str | None) -> Recipe:
        """The recipe, with the paths given to run() in place of its own."""
        recipe = self.recipe
        if not (dataset_path or export_path):
            return recipe
        return recipe_from_dict({**recipe.to_dict(), "process": [],
                                 "dataset_path": os.path.abspath(dataset_path or recipe.dataset_path),
                                 "export_path": os.path.abspath(export_path or recipe.export_path)},
                                base_dir=recipe.base_dir)


def _check_limit(limit, recipe: Recipe) -> None:
    """A trial run's limit: a positive number of samples."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DjxError(f"limit: expected a positive number of samples, got {limit!r}")


def _refuse_trial_over_full_run(paths: OutputPaths, limit: int) -> None:
    """A trial (--limit) would replace the outputs of a finished full run with a sample of them."""
    try:
        with open(paths.summary, encoding="utf-8") as f:
            earlier = json.load(f)
    except (OSError, ValueError):
        return  # no finished run there (or not one djx can read): nothing a trial could lose
    if isinstance(earlier, dict) and earlier.get("partial") is False:
        raise DjxError(f"{paths.export} holds the outputs of a finished full run ({earlier.get('kept', '?')} kept of "
                       f"{earlier.get('input', '?')}); a --limit {limit} trial would replace them with a sample: "
                       f"give the trial another export path (--export-path), or --restart to replace them")


def _write_report(ops, recipe: Recipe, export: str, log, stop) -> None:
    """`report: true`: the analysis of the finished run next to its export (<stem>.analysis/)."""
    from djx.analyze import analyze
    try:
        analyze(export, ops=ops, recipe=recipe, log=log, stop=stop)
    except Stopped as e:
        raise Stopped(e.signal_name, f"the run finished and its outputs are written, but not its report: "
                                     f"`djx analyze {export}` writes it") from None
    except DjxError as e:
        raise DjxError(f"the run finished and its outputs are written, but its report could not be: {e}; "
                       f"`djx analyze {export}` retries it") from None


def _refuse_non_ops(ops: list) -> None:
    """ops=[...] holds op instances: a class, a name or anything else is said to be wrong here,
    not found deep inside a worker."""
    from djx.core.errors import UsageError
    from djx.core.op.base import Filter, Mapper
    for i, op in enumerate(ops):
        if isinstance(op, (Filter, Mapper)):
            continue
        if isinstance(op, type) and issubclass(op, (Filter, Mapper)):
            raise UsageError(f"Pipeline(ops=[...]): ops[{i}] is the class {op.__name__}; pass an instance, "
                             f"e.g. {op.__name__}() with its parameters")
        raise UsageError(f"Pipeline(ops=[...]): ops[{i}] is a {type(op).__name__}, not an op (a Filter or Mapper "
                         f"instance); for ops by name use Pipeline(process=[{{'op_name': {{...}}}}])")
