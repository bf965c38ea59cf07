"""Pipeline: the Python API and the one path every run takes (the CLI is a thin layer over it).

    Pipeline.from_recipe("recipe.yaml").run()
    Pipeline(ops=[TextLengthFilter(min_len=5)], np=2).run("in.jsonl", "out/kept.jsonl")
    for sample in Pipeline(ops=[...]).process(samples): ...
"""
from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import os
import shutil
import sys
import time
from collections import deque
from typing import Iterable, Iterator

from .chain import Item, OpChain
from .context import TOKEN_MISMATCH
from .check import check_outputs
from .errors import CheckError, DjxError, ResumeError
from .model_pool import estimate_bytes, process_pool
from .outputs import OutputPaths, OutputWriter
from .planner import Plan, cuda_inventory, plan_workers
from .progress import Progress
from .reader import ReadState, read_files, dataset_files, dataset_root
from .recipe import Recipe, load_recipe, recipe_from_dict
from .resources import cpu_count, peak_rss_bytes, uss_bytes
from .summary import format_summary

EARLY_SAMPLES = 32      # the token sanity check looks at (at least) this many first samples
EARLY_MISMATCH = 0.9    # ... and stops the run when this share of them has a token mismatch

# Keys that do not change what a run outputs: a resumed run may change them.
_VOLATILE = {"np", "start_method", "devices", "gpu_mem_fraction", "max_in_flight", "checkpoint_every", "on_error",
             "executor", "ray_address", "export_path", "dataset_path", "batch_size", "project_name"}


class Pipeline:
    """A list of ops plus run settings (the recipe's global keys, as keyword arguments)."""

    def __init__(self, ops: list | None = None, recipe: Recipe | None = None, **settings):
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
                            self.recipe.gpu_mem_fraction, cpu_count(), listed)

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
        while True:
            block = list(itertools.islice(it, self.recipe.batch_size))
            if not block:
                return
            items = [Item(pos + i, record=r) for i, r in enumerate(block)]
            pos += len(block)
            res = chain.run(items, pool)
            counts["input"] += len(block)
            counts["kept"] += len(res.kept)
            counts["dropped"] += len(res.dropped)
            counts["rejected"] += len(res.rejected)
            counts["rejected_records"] += res.rejected
            yield from res.kept

    # -- files ------------------------------------------------------------------------------
    def run(self, dataset_path: str | None = None, export_path: str | None = None, *,
            restart: bool = False, progress: bool = True, log=print, plan: Plan | None = None) -> dict:
        """Process a dataset (a file, a folder of files or a glob) into the export files; return the summary (also written as JSON).

        Resumes an interrupted run of the same recipe and input unless `restart`. Raises
        CheckError (after writing the outputs) when the stats or the counts do not add up."""
        r = self.recipe
        if dataset_path or export_path:
            r = recipe_from_dict({**r.to_dict(), "process": [],
                                  "dataset_path": os.path.abspath(dataset_path or r.dataset_path),
                                  "export_path": os.path.abspath(export_path or r.export_path)},
                                 base_dir=r.base_dir)
        files = dataset_files(r.dataset_path)
        paths = OutputPaths.for_export(r.export_path)
        _refuse_outputs_inside_input(r.dataset_path, paths)
        _check_writable(os.path.dirname(os.path.abspath(paths.export)))
        t0 = time.monotonic()
        root = dataset_root(r.dataset_path)
        names = tuple(os.path.relpath(f, root) for f in files) if len(files) > 1 else ()
        chain = OpChain(self.ops, r.run_context(input_files=names))
        writer = OutputWriter(paths, r.export_dropped)
        fingerprint = _fingerprint(r, self.ops, files, root)
        manifest = None if restart else writer.load_manifest()
        if manifest is not None and manifest.get("fingerprint") != fingerprint:
            raise ResumeError(f"{paths.state_dir} holds an unfinished run of a different recipe or input "
                              f"({_diff(manifest.get('fingerprint', {}), fingerprint)}); run again with "
                              f"--restart (Pipeline.run(restart=True)) to discard it and start over")
        state = ReadState(**manifest["read"]) if manifest else ReadState()
        counts = manifest["counts"] if manifest else {"kept": 0, "dropped": 0, "rejected": 0,
                                                      "ops": [[0, 0, 0, 0, 0.0] for _ in self.ops]}
        if manifest:
            log(f"[djx] resuming: {state.records} samples already done, reading on from there")
        plan = plan or self.plan(r.np)
        log(plan.describe())
        for note in self.recipe.notes():
            log(f"  note: {note}")
        executor = self._executor(chain, plan, r, log)
        writer.open(manifest)
        snapshots: deque = deque()

        def batches():
            items = read_files(files, state, parse=False)  # workers parse the lines
            while True:
                block = list(itertools.islice(items, r.batch_size))
                if not block:
                    return
                snapshots.append(dict(vars(state)))
                yield block

        bar = Progress(enabled=progress)
        done_batches = 0
        early = [0, 0] if not manifest else None  # [samples seen, token mismatches]
        try:
            results = (executor.run_dataset(files, state, snapshots) if r.executor == "ray"
                       else executor.run(batches()))
            it, read_at, saved = iter(results), None, 0
            while True:
                try:
                    res = next(it)
                except StopIteration:
                    break
                except BaseException:
                    # the executor failed (or was interrupted) between batches: every batch before
                    # this point is written whole, so keep it for the next run to resume from
                    if read_at is not None and done_batches > saved:
                        self._save_progress(writer, fingerprint, read_at, counts, log)
                    raise
                if early is not None:
                    early = self._token_sanity(early, res, r, writer)
                writer.write("kept", res.kept)
                writer.write("dropped", res.dropped)
                writer.write("rejected", res.rejected)
                for key, n in (("kept", len(res.kept)), ("dropped", len(res.dropped)),
                               ("rejected", len(res.rejected))):
                    counts[key] += n
                for acc, c in zip(counts["ops"], res.op_counts):
                    for j in range(5):
                        acc[j] += c[j]
                events = counts.setdefault("events", {})
                for k, v in res.counters.items():
                    events[k] = events.get(k, 0) + v
                read_at = snapshots.popleft()
                done_batches += 1
                bar.update(len(res.kept) + len(res.dropped) + len(res.rejected), len(res.kept))
                if done_batches % r.checkpoint_every == 0:
                    writer.checkpoint({"fingerprint": fingerprint, "read": read_at, "counts": counts})
                    saved = done_batches
            writer.checkpoint({"fingerprint": fingerprint, "read": dict(vars(state)), "counts": counts})
        finally:
            bar.close()
            writer.close()
        if state.records == 0:
            log(f"[djx] {r.dataset_path} holds no samples; writing empty outputs")
        report = check_outputs(writer.part("kept"), writer.part("dropped"), writer.part("rejected"),
                               chain.filter_stats_keys(), r.image_key, state.records)
        summary = self._summary(r, paths, plan, executor, counts, state, report, time.monotonic() - t0,
                                bool(manifest))
        writer.finish(summary)
        log(format_summary(summary))
        if not report.ok:
            raise CheckError(report.describe())
        return summary

    @staticmethod
    def _save_progress(writer: OutputWriter, fingerprint: dict, read_at: dict, counts: dict, log) -> None:
        try:
            writer.checkpoint({"fingerprint": fingerprint, "read": read_at, "counts": counts})
        except OSError as e:  # never hide the error that stopped the run behind this one
            log(f"[djx] could not save progress ({e}); the next run resumes from the last checkpoint")
            return
        log(f"[djx] stopped after {read_at['records']} samples; they are saved and the same command "
            f"resumes from there")

    @staticmethod
    def _token_sanity(early, res, r: Recipe, writer: OutputWriter):
        """Stop early when nearly every first sample's image tokens disagree with its images."""
        early[0] += len(res.kept) + len(res.dropped) + len(res.rejected)
        early[1] += sum(1 for rec in res.rejected if rec.get("code") == TOKEN_MISMATCH)
        if early[0] < EARLY_SAMPLES:
            return early
        if early[1] >= EARLY_MISMATCH * early[0]:
            writer.close()
            shutil.rmtree(writer.paths.state_dir, ignore_errors=True)
            raise DjxError(f"{early[1]} of the first {early[0]} samples have a different number of images "
                           f"than image tokens {r.image_special_token!r} in their text: the data was most "
                           f"likely written with another token. Check image_special_token (and "
                           f"eoc_special_token) in the recipe; stopped early, nothing written")
        return None

    def _executor(self, chain: OpChain, plan: Plan, r: Recipe, log=print):
        if r.executor == "ray":
            from .ray_executor import RayExecutor
            return RayExecutor(chain, plan, r)
        from .local_executor import LocalExecutor
        method = r.start_method
        if method == "auto":
            # fork only where it is safe: a forked child of a process whose torch thread pool is
            # up can deadlock in its first op; forking a Ray driver breaks Ray; CUDA needs spawn
            ray = sys.modules.get("ray")
            risky = bool(chain.model_specs()) or (ray is not None and ray.is_initialized())
            method = "spawn" if risky or plan.on_gpu or sys.platform != "linux" else "fork"
        elif method == "fork" and chain.model_specs():
            log("note: start_method fork is unsafe for ops that load models (a forked worker can hang "
                "in its first forward); using spawn")
            method = "spawn"
        return LocalExecutor(chain, plan, method, tuple(r.custom_ops), r.base_dir, r.max_in_flight,
                             replan=lambda measured: self.plan(r.np, measured), log=log)

    def _summary(self, r, paths, plan, executor, counts, state, report, seconds, resumed) -> dict:
        n = state.records
        loads = {rank: rep["pool"]["loads"] for rank, rep in executor.reports.items()}
        worker_uss = {rank: rep.get("peak_uss", 0) for rank, rep in executor.reports.items()}
        return {
            "project_name": r.project_name, "dataset_path": r.dataset_path,
            "input": n, "kept": counts["kept"], "dropped": counts["dropped"],
            "rejected": counts["rejected"], "blank_lines": state.blank_lines,
            "ops": [{"name": op.name, "in": c[0], "kept": c[1], "dropped": c[2], "rejected": c[3],
                     "seconds": round(c[4], 3)} for op, c in zip(self.ops, counts["ops"])],
            "seconds": round(seconds, 3), "samples_per_second": round(n / max(seconds, 1e-9), 2),
            "resumed": resumed, "executor": r.executor, "workers": plan.workers,
            "events": counts.get("events", {}),
            "plan": {"devices": list(plan.devices), "threads_per_worker": plan.threads_per_worker,
                     "model_bytes": plan.model_bytes, "notes": list(plan.notes)},
            "model_loads": loads,
            # the number that must be 1: how often any one model was loaded in any one process
            "max_model_loads_per_process": max((n for v in loads.values() for n in v.values()), default=0),
            "worker_restarts": getattr(executor, "restarts", 0),
            "devices": {rank: {"device": rep["pool"].get("device"),
                               "peak_device_bytes": rep.get("peak_device_bytes", 0)}
                        for rank, rep in executor.reports.items()},
            "memory": {"main_peak_rss_bytes": peak_rss_bytes(), "main_peak_uss_bytes": uss_bytes(),
                       "worker_peak_uss_bytes": worker_uss,
                       "worker_peak_uss_bytes_max": max(worker_uss.values(), default=0)},
            "outputs": {"export": paths.export, "dropped": paths.dropped if r.export_dropped else None,
                        "rejected": paths.rejected, "summary": paths.summary},
            "check": report.to_dict(),
        }


def _fingerprint(r: Recipe, ops: list, files: list[str], root: str) -> dict:
    settings = {k: v for k, v in r.to_dict().items() if k not in _VOLATILE and k != "process"}
    op_desc = [[op.name, op.params()] for op in ops]
    text = json.dumps([settings, op_desc], sort_keys=True, default=str)
    if len(files) == 1:
        data = _file_hash(files[0])
    else:  # which files, in which order, with which content
        h = hashlib.sha256()
        for f in files:
            h.update(f"{os.path.relpath(f, root)}\0{_file_hash(f)}\n".encode())
        data = h.hexdigest()[:16]
    return {"recipe": hashlib.sha256(text.encode()).hexdigest()[:16], "input": data}


def _check_writable(folder: str) -> None:
    """The export folder exists or can be made, and is writable: say so now, not mid-run."""
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise DjxError(f"export_path: cannot write under {folder}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DjxError(f"export_path: cannot write under {folder}: {existing} is not writable")


def _glob_matches(path: str, pattern: str) -> bool:
    """Whether glob.glob(pattern, recursive=True) would list `path` (component by component;
    `**` spans any number of folders)."""
    xs, ps = path.split(os.sep), pattern.split(os.sep)
    if "**" not in ps:
        return len(xs) == len(ps) and all(fnmatch.fnmatchcase(x, p) for x, p in zip(xs, ps))
    i = ps.index("**")
    head, tail = ps[:i], ps[i + 1:]
    return (len(xs) >= len(head) + len(tail)
            and all(fnmatch.fnmatchcase(x, p) for x, p in zip(xs[:len(head)], head))
            and all(fnmatch.fnmatchcase(x, p) for x, p in zip(xs[len(xs) - len(tail):], tail)))


def _refuse_outputs_inside_input(dataset_path: str, paths: OutputPaths) -> None:
    """A folder or glob dataset must not hold the run's own outputs: the next run would read them."""
    if os.path.isfile(dataset_path):
        return
    outs = [paths.export, paths.dropped, paths.rejected]
    if os.path.isdir(dataset_path):
        root = os.path.abspath(dataset_path) + os.sep
        inside = [o for o in outs if os.path.abspath(o).startswith(root)
                  and not any(part.startswith(".") for part in os.path.relpath(o, root).split(os.sep))]
    else:
        inside = [o for o in outs if _glob_matches(os.path.abspath(o), os.path.abspath(dataset_path))]
    if inside:
        raise DjxError(f"export_path: {inside[0]} would be part of the dataset {dataset_path} (the next run "
                       f"would read it as input); write the outputs outside the dataset")


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _diff(old: dict, new: dict) -> str:
    changed = [k for k in ("recipe", "input") if old.get(k) != new.get(k)]
    return " and ".join(f"the {k} changed" for k in changed) or "unknown state"
