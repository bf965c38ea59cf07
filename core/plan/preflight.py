"""What can be checked before any work: `djx process --dry-run` (the dataset's first records,
the model folders or the local hub cache, host memory for the planned workers, the resolved paths)
and the checks every run makes first (host memory, a script run without a main guard)."""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys

from djx.core.errors import DjxError
from djx.core.plan.dataset_checks import missing_images, no_token, unused_image_key

GiB = 1 << 30
# a CPU worker's own memory beyond model weights: the interpreter and libraries, a batch's images
WORKER_BASE = 128 << 20
WORKER_BASE_WITH_MODELS = 512 << 20   # ... with torch and transformers imported, and activations
FIRST_RECORDS = 8


def refuse_unguarded_main() -> None:
    """A script that runs a pipeline at import time, without `if __name__ == "__main__":`, is
    imported again by every spawned worker, which would start a second run of its own. Say so."""
    main = sys.modules.get("__main__")
    for mp in (multiprocessing, sys.modules.get("multiprocess")):  # djx's workers come from multiprocess
        proc = mp.current_process() if mp is not None else None
        if proc is not None and (getattr(proc, "_inheriting", False) or (
                proc.name != "MainProcess" and getattr(main, "__name__", "") == "__mp_main__")):
            raise DjxError("Pipeline.run() was called while a worker process was importing your script: the "
                           "script starts the run at import time. Put the run under a main guard:\n"
                           "    if __name__ == \"__main__\":\n"
                           "        Pipeline.from_recipe(\"recipe.yaml\").run()\n"
                           "(workers are started with spawn, which imports the main module again)")


def unguarded_main_hint() -> str:
    """For a worker that died while starting: when the main module is a script without a main
    guard, what to add (its worker re-imported it and ran the pipeline again); else ""."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    try:
        with open(path, encoding="utf-8") as f:
            guarded = re.search(r"__name__\s*==\s*['\"]__main__['\"]", f.read())
    except (OSError, TypeError, ValueError):
        return ""
    if guarded or not path.endswith(".py"):
        return ""
    return (f"; {path} has no `if __name__ == \"__main__\":` guard, so each spawned worker imports it and "
            f"starts the run again: put the run under that guard")


def host_memory_problem(workers: int, planned_bytes: int, available: int, with_models: bool,
                        worker_bytes: int | None = None) -> str | None:
    """A message when `workers` CPU workers, planned to take `planned_bytes` (the plan's model
    memory on CPU) plus their own base each (`worker_bytes`, the plan's figure when it has one),
    do not fit in `available` bytes; else None."""
    if workers < 1:
        return None
    base = worker_bytes or (WORKER_BASE_WITH_MODELS if with_models else WORKER_BASE)
    need = planned_bytes + workers * base
    if need <= available:
        return None
    fit = max(1, int(workers * available / need))
    return (f"{workers} CPU worker(s) need about {need / GiB:.1f} GiB (models as planned "
            f"{planned_bytes / GiB:.1f} GiB, plus about {base >> 20} MiB per worker) but this machine has "
            f"{available / GiB:.1f} GiB available: set np to at most {fit}")


def refuse_short_host_memory(pipe, plan, np: int | None) -> None:
    """Before a run: CPU workers that cannot fit in host memory are refused with the np that fits.
    Model sizes are estimated (a meta-device build) only where the workers' bases alone come close."""
    if plan.on_gpu or pipe.recipe.executor == "ray":  # Ray places actors by their declared memory
        return
    specs = pipe.chain().model_specs()
    if specs and not any(plan.model_bytes.values()) \
            and plan.workers * WORKER_BASE_WITH_MODELS * 4 > available_host_bytes():
        plan = pipe.plan(np, estimate=True)
    problem = plan_host_memory(plan)
    if problem:
        raise DjxError(problem)


def available_host_bytes() -> int:
    import psutil
    return int(psutil.virtual_memory().available)


def plan_host_memory(plan) -> str | None:
    """The host-memory message for a plan's CPU workers, or None when they fit."""
    cpu = {d: info for d, info in plan.per_device.items() if not str(d).startswith("cuda")}
    workers = sum(info.get("workers", 0) for info in cpu.values())
    planned = sum(info.get("expected_bytes", 0) for info in cpu.values())
    per_worker = max((info.get("worker_bytes") or 0 for info in cpu.values()), default=0) or None
    return host_memory_problem(workers, planned, available_host_bytes(), bool(plan.model_bytes), per_worker)


def dataset_report(recipe, pairs_chunks: bool = True, reads_images: bool = True) -> tuple[list[str], list[str]]:
    """(lines, problems) about the dataset: its files and its first records, which must parse, be
    objects, carry the image token with images where an op pairs text chunks with them (`pairs_chunks`),
    and have images under image_key where their texts carry it and an op reads images."""
    from djx.core.io.dataset import dataset_files
    from djx.core.io.readers import ReadState, read_files
    from djx.core.recipe.context import RunContext
    from djx.core.recipe.formats import llava_options
    from djx.core.run.formats import sample_of
    try:
        files = dataset_files(recipe.dataset_path)
    except DjxError as e:
        return [f"dataset: {recipe.dataset_path}"], [str(e)]
    lines = [f"dataset: {recipe.dataset_path} ({len(files)} file{'' if len(files) == 1 else 's'})"]
    if recipe.executor == "ray":  # what would stop a Ray run at once (Ray, its address, the input)
        from djx.core.executors.ray.available import ray_preflight
        ray_lines, ray_problems = ray_preflight(recipe, files)
        lines += ray_lines
        if ray_problems:
            return lines, ray_problems
    problems, bad, with_images, with_token, token_only, tokens = [], [], 0, 0, 0, set()
    items, ctx = [], RunContext(recipe.text_key, recipe.image_key, recipe.image_special_token,
                                recipe.eoc_special_token, llava=llava_options(recipe))
    try:
        for item in read_files(files, ReadState(), parse=True):
            items.append(item)
            if len(items) == FIRST_RECORDS:
                break
    except DjxError as e:
        return lines, [str(e)]
    for item in items:
        where = f"record {item.pos}" + (f" (line {item.line})" if item.line else "")
        rec, why = sample_of(item, ctx, True)  # dataset_format: llava is mapped as a run maps it
        if why or not isinstance(rec, dict):
            bad.append(f"dataset: {where}: " + (why or f"not a JSON object ({type(rec).__name__})"))
            continue
        text = rec.get(recipe.text_key)
        if not isinstance(text, str):
            bad.append(f"dataset: {where} has no text under text_keys {recipe.text_key!r}"
                       f" (its keys: {', '.join(map(str, rec)) or 'none'})"
                       + ("; a LLaVA record: set dataset_format: llava" if "conversations" in rec else ""))
            continue
        if rec.get(recipe.image_key):
            with_images += 1
            with_token += recipe.image_special_token in text
            tokens.update(t for t in re.findall(r"<[^<>\s]{1,40}>", text) if t != recipe.eoc_special_token)
        else:
            token_only += recipe.image_special_token in text
    lines.append(f"  first {len(items)} record(s) read: {len(items) - len(bad)} usable, {with_images} with "
                 f"images under {recipe.image_key!r}, {with_token} of those with {recipe.image_special_token!r}")
    if items and len(bad) == len(items):  # none usable: every sample would be rejected
        problems += bad
    else:  # a few bad records: the run rejects them, with their reasons
        lines += [f"  note: {b} (a run rejects such a record with its reason)" for b in bad]
    problems += missing_images(items, recipe, lines)
    if with_images and not with_token:
        no_token(recipe, tokens, pairs_chunks, lines, problems)
    if reads_images and not with_images and token_only:
        problems.append(unused_image_key(recipe, items, token_only))
    return lines, problems


def model_report(specs) -> tuple[list[str], list[str]]:
    """(lines, problems) about each model: a local folder holds a config that loads; a hub id is
    looked up in the local cache only (never on the network)."""
    lines, problems = [], []
    for spec in dict.fromkeys(specs):
        if not _hf_loaded(spec):  # a plug-in's own loader: its name means what that loader makes of it
            lines.append(f"model {spec.label()}: {spec.name}, loaded by the {spec.kind!r} loader (not checked here)")
        elif os.path.isdir(spec.name):
            problem = _folder_problem(spec.name)
            lines.append(f"model {spec.label()}: local folder {spec.name}" + ("" if problem else ", config loads"))
            if problem:
                problems.append(f"model {spec.name}: {problem}")
        elif spec.name.startswith((".", "/", "~")) or spec.name.count("/") > 1:
            problems.append(f"model {spec.name}: no such folder (a local model path must exist; relative paths "
                            f"are relative to the recipe's folder)")
        else:
            lines.append(f"model {spec.label()}: hub id {spec.name}, {'' if _cached(spec) else 'not '}in the local "
                         f"Hugging Face cache")
            if os.environ.get("HF_HUB_OFFLINE") and not _cached(spec):  # (not offline: the plan's note)
                problems.append(f"model {spec.name}: not a local folder and not in the local Hugging Face cache, "
                                f"and HF_HUB_OFFLINE is set: download it first or give a local folder")
    return lines, problems


def hub_notes(specs) -> list[str]:
    """The notes a run starts with for models it will fetch from the hub: a hub id that is not in
    the local cache while HF_HUB_OFFLINE is unset (without network access each worker would wait on
    the hub's retries before failing)."""
    if os.environ.get("HF_HUB_OFFLINE"):
        return []
    return [f"  note: model {spec.name} is not in the local Hugging Face cache: the workers fetch it from the hub "
            f"(without network access they wait on its retries; set HF_HUB_OFFLINE=1 to fail at once, or give "
            f"a local folder)"
            for spec in dict.fromkeys(specs) if _hf_loaded(spec) and _is_hub_id(spec.name) and not _cached(spec)]


def _hf_loaded(spec) -> bool:
    """Whether one of djx's own Hugging Face loaders (from_pretrained: a local folder or a hub id)
    loads `spec`; only then do the Hugging Face cache and the hub concern it."""
    from djx.core.models.pool import _LOADERS
    loader = _LOADERS.get(spec.kind)
    return getattr(loader, "__module__", "").startswith("djx.ops.") \
        and any(m.startswith("transformers") for m in getattr(loader, "preload", ()))


def _is_hub_id(name: str) -> bool:
    return not (os.path.isdir(name) or name.startswith((".", "/", "~")) or name.count("/") > 1)


def _folder_problem(folder: str) -> str | None:
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        return "the folder holds no config.json (is it a model saved with save_pretrained?)"
    try:
        with open(config, encoding="utf-8") as f:
            json.load(f)
        from transformers import AutoConfig
        AutoConfig.from_pretrained(folder, local_files_only=True)
    except Exception as e:  # noqa: BLE001  (any failure to load the config is what we report)
        return f"its config.json does not load ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return None


def _cached(spec) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
        found = try_to_load_from_cache(spec.name, "config.json", revision=spec.revision)
    except Exception:  # noqa: BLE001  (a malformed id is simply not cached)
        return False
    return isinstance(found, str)


def dry_run(pipe, out=print, limit: int | None = None) -> int:
    """Print what a run would do and every problem found without running; 1 when there are any.
    A deduplicator with a threshold to choose gets its table from the input's embeddings (over
    the first `limit` samples)."""
    recipe = pipe.recipe
    plan = pipe.plan(estimate=True)
    out(pipe.describe(plan))
    pairs = any("per_chunk" in (getattr(op, "stat_shapes", None) or {}).values() for op in pipe.ops)
    lines, problems = dataset_report(recipe, pairs, any(op.uses_images for op in pipe.ops))
    model_lines, model_problems = model_report(pipe.chain().model_specs())
    memory = plan_host_memory(plan) if recipe.executor != "ray" else None  # Ray: actors declare their memory
    problems += model_problems + ([f"host memory: {memory}"] if memory else [])
    from djx.core.io.guards import output_problems
    from djx.core.io.outputs import OutputPaths
    paths = OutputPaths.for_export(recipe.export_path)
    problems = list(dict.fromkeys(problems + output_problems(recipe.dataset_path, paths)))  # each said once
    lines += [f"export: {paths.export} (dropped: {paths.dropped if recipe.export_dropped else 'not written'}, "
              f"rejected: {paths.rejected}, summary: {paths.summary})",
              f"batch_size: {recipe.batch_size} samples per batch, max_batch_bytes: {recipe.max_batch_bytes}, "
              f"np: {recipe.np if recipe.np is not None else 'planned'} ({plan.workers} worker(s) would run)"]
    for line in lines + model_lines:
        out(line)
    for i, op in enumerate(pipe.ops):
        specs = ", ".join(s.label() for s in op.model_specs())
        out(f"  op {i}: {op!r}" + (f"  [models: {specs}]" if specs else ""))
    from djx.core.plan.threshold_view import threshold_views
    for line in threshold_views(pipe, recipe, limit):
        out(line)
    if problems:
        out(f"dry run: {len(problems)} problem(s) found; a run would fail or lose samples:")
        for p in problems:
            out(f"  problem: {p}")
        return 1
    out("dry run: no problem found")
    return 0
