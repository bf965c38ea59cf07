"""Data-Juicer recipe keys that mean nothing to djx, with why: a Data-Juicer recipe runs as it is,
and the run lists these as ignored so nobody thinks they took effect. And the Data-Juicer habits djx
refuses with what to do instead (a mixture dataset_path)."""
import os

from djx.core.errors import RecipeError

DJ_GLOBAL_KEYS = {
    "use_cache": "djx does not cache datasets; it streams them",
    "ds_cache_dir": "djx does not cache datasets", "cache_compress": "djx does not cache datasets",
    "use_checkpoint": "djx always checkpoints; see checkpoint_every",
    "temp_dir": "djx keeps its state next to export_path",
    "open_monitor": "the summary reports per-op time and memory",
    "open_tracer": "djx writes every dropped sample with its op and reason",
    "op_list_to_trace": "djx writes every dropped sample", "trace_num": "djx writes every dropped sample",
    "op_fusion": "djx runs the whole op chain per batch", "fusion_strategy": "djx runs the whole chain per batch",
    "adaptive_batch_size": "batch_size is fixed; model forwards halve on CUDA OOM",
    "keep_hashes_in_res_ds": "djx keeps each deduplicator's hash in __dj__stats__, as a stat (a re-run reuses it; "
                             "djx check and explain read it), where Data-Juicer drops it by default",
    "export_in_parallel": "djx writes the export once, at the end of the run",
    "export_type": "the export_path suffix (.jsonl, .json, .parquet) chooses the format", "suffixes": "djx reads .jsonl, .json and .parquet",
    "save_stats_in_one_file": "with keep_stats_in_res_ds: false, stats go to one <stem>_stats.jsonl", "export_original_dataset": "see export_dropped",
    "turbo": "not used", "debug": "not used", "auto": "not used", "auto_num": "not used",
    "percentiles": "not used", "event_logging": "not used",
    "audio_key": "djx has no audio ops", "video_key": "djx has no video ops",
    "audio_special_token": "djx has no audio ops", "video_special_token": "djx has no video ops",
    "skip_op_error": "djx rejects a sample an op fails on, with its reason, and goes on (see on_error)",
    "load_jsonl_lenient": "djx rejects a line that does not parse, with its reason, and reads on",
    "resume": "djx resumes an interrupted run by itself (--restart starts over)",
    "checkpoint_dir": "djx keeps its state next to export_path", "work_dir": "djx keeps its state next to export_path",
    "job_id": "not used", "event_log_dir": "not used", "hpo_config": "not used by a run",
    "image_bytes_key": "djx reads images from the paths under image_key",
    "data_probe_algo": "djx analyze reads every sample", "data_probe_ratio": "djx analyze reads every sample",
    "open_insight_mining": "not used", "op_list_to_mine": "not used", "trace_keys": "djx writes every dropped sample",
    "mapper_fusion": "djx runs the whole op chain per batch", "mapper_fusion_vram_limit": "not used",
    "min_common_dep_num_to_combine": "djx runs the whole op chain per batch",
    "conflict_resolve_strategy": "not used", "use_dag": "not used", "strict_preflight": "djx checks every recipe at load",
    "auto_op_parallelism": "the planner sizes workers", "override_num_blocks": "djx's Ray executor cuts its own batches",
    "partition_size": "not used", "partition_dir": "not used",
    "partition": "djx's Ray executor cuts its own batches and sizes its own actors",
    "checkpoint": "djx checkpoints every checkpoint_every batches",
    "elastic_juicer_adaptive_batching": "not used", "elastic_juicer_profile_seed": "not used",
}
# Data-Juicer keys that change what is read or written: ignored (with a note) only while unset
DJ_UNSET_KEYS = {
    "generated_dataset_config": "djx reads dataset_path; it does not generate a dataset",
    "load_dataset_kwargs": "djx reads .jsonl, .json and .parquet with its own reader",
    "read_options": "djx reads .jsonl, .json and .parquet with its own reader",
    "export_extra_args": "the export's format follows export_path's suffix",
    "export_aws_credentials": "djx reads and writes local files",
    "encrypt_before_export": "djx does not encrypt", "decrypt_after_reading": "djx does not decrypt",
    "encryption_key_path": "djx does not encrypt",
}

# Data-Juicer's per-op runtime keys, ignored unless the op itself takes them
DJ_OP_KEYS = {
    "num_proc": "workers come from the recipe's np", "accelerator": "devices come from the plan",
    "mem_required": "the planner sizes workers from the models' footprint",
    "cpu_required": "the planner sizes workers", "gpu_required": "the planner sizes workers",
    "turbo": "not used", "skip_op_error": "see on_error", "work_dir": "not used",
    "index_key": "not used", "auto_op_parallelism": "not used", "runtime_np": "not used",
    "ray_execution_mode": "not used",
    # Data-Juicer 1.6's settings every op takes (its base OP): resources, Ray, and keys of data djx has no op for
    "num_cpus": "the planner sizes workers", "num_gpus": "the planner sizes workers",
    "memory": "the planner sizes workers from the models' footprint", "runtime_env": "not used",
    "batch_mode": "not used", "adaptive_batching": "not used", "input_columns": "not used",
    "output_columns": "not used", "image_bytes_key": "djx reads images from their paths",
    "audio_key": "no djx op reads audio", "video_key": "no djx op reads video",
    "system_key": "no djx op reads it", "instruction_key": "no djx op reads it", "prompt_key": "no djx op reads it",
    "query_key": "no djx op reads it", "response_key": "no djx op reads it", "history_key": "no djx op reads it",
    "tmp_file_name": "not used: djx's deduplicators keep their rows in the run's state folder",
}


def take_custom_operator_paths(raw: dict) -> None:
    """Data-Juicer's `custom_operator_paths` (files or folders of plug-in ops) is read as custom_ops."""
    paths = raw.pop("custom_operator_paths", None)
    if paths in (None, "", []):
        return
    paths = [paths] if isinstance(paths, str) else paths
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise RecipeError(f"custom_operator_paths: expected a path or a list of paths, got {paths!r:.80}")
    ops = raw.get("custom_ops")
    raw["custom_ops"] = (ops if isinstance(ops, list) else [] if ops is None else [ops]) + paths



def take_dataset(raw: dict) -> tuple | None:
    """Data-Juicer's `dataset: {configs: [{type: local, path: P}]}` becomes `dataset_path: P` (in place).
    As in Data-Juicer, a `dataset_path` wins over it: then it is ignored, with why (returned). What djx
    cannot read the same way (several sources, sampling, a hub or remote source) is refused with
    what to write instead."""
    if "dataset" not in raw:
        return None
    spec = raw.pop("dataset")
    if raw.get("dataset_path"):
        return ("dataset", "dataset_path is set, and takes precedence (as in Data-Juicer)")
    configs = spec.get("configs") if isinstance(spec, dict) else None
    if not isinstance(configs, list) or not configs or not all(isinstance(c, dict) for c in configs):
        raise RecipeError(f"dataset: expected Data-Juicer's {{configs: [{{type: local, path: ...}}]}}, got {spec!r}")
    if spec.get("max_sample_num") is not None:
        raise RecipeError("dataset: max_sample_num samples the dataset at random; djx reads every sample, in "
                          "order: write the sample first (e.g. `shuf -n N data.jsonl > part.jsonl`) and name it")
    kinds = {c.get("type") for c in configs}
    if kinds != {"local"}:
        raise RecipeError(f"dataset: djx reads local files (type: local), got type {sorted(map(str, kinds))}; "
                          f"download the dataset and give its path")
    if len(configs) > 1:
        raise RecipeError("dataset: djx reads one local source; put the files in one folder or match them "
                          "with a glob, and give that as dataset_path (e.g. dataset_path: data/*.jsonl)")
    path = configs[0].get("path")
    if not isinstance(path, str) or not path:
        raise RecipeError(f"dataset: configs[0] needs a path, got {configs[0]!r}")
    raw["dataset_path"] = path
    return None


def export_type_clash(raw: dict) -> str | None:
    """Data-Juicer's `export_type` wins over the export_path's suffix; djx writes the suffix's format
    and notes the key as ignored, which is only true while the two agree."""
    kind, path = raw.get("export_type"), raw.get("export_path")
    if not (isinstance(kind, str) and kind.strip(". ") and isinstance(path, str)):
        return None
    want = "." + kind.strip(". ").lower()
    if path.lower().endswith(want) or (want == ".jsonl" and not path.lower().endswith((".json", ".parquet"))):
        return None
    return (f"recipe key 'export_type': {kind!r} disagrees with export_path {path!r}: Data-Juicer would write "
            f"{kind}, djx writes the format the export_path's suffix names; make them agree, or remove export_type")


def refuse_mixture(path: str) -> None:
    """Data-Juicer's mixture `"0.5 a.jsonl 0.5 b.jsonl"` (weights and files): djx streams one
    dataset in a fixed order (positions, resume), so it refuses rather than samples differently."""
    parts = path.split()
    if len(parts) < 2 or os.path.exists(os.path.expanduser(path)):
        return
    if any(_is_number(p) for p in parts) or all(p.lower().endswith((".jsonl", ".json", ".parquet")) for p in parts):
        files = [p for p in parts if not _is_number(p)]
        raise RecipeError(f"dataset_path {path!r} is a Data-Juicer mixture (weights and files); djx reads one "
                          f"dataset and does not sample: to process the files whole, put them in one folder or "
                          f"match them with a glob (e.g. dataset_path: data/*.jsonl); to mix by weight, write the "
                          f"sample first (e.g. `shuf -n N {files[0]} > part.jsonl` per file, then a folder of "
                          f"the parts)")


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


_SAME_AS = {"num_proc": "np", "text_key": "text_keys", "image_keys": "image_key"}  # close in meaning, not in spelling
_NOT_IN_DJX = {"validators": "Data-Juicer's dataset validators are not in djx: remove the key to run without "
               "that check (djx rejects a record without its text or with a bad image on its own, with the "
               "reason)"}
_COMMAND_LINE = {"limit": "--limit N", "dry_run": "--dry-run", "restart": "--restart", "quiet": "--quiet",
                 "report": "--report"}  # options of `djx process`, not recipe keys


def unknown_key(key, fields) -> str:
    """Why `key` is not a recipe key, with the key (or command-line option) that was meant."""
    from djx.core.errors import closest
    if key in _NOT_IN_DJX:
        return f"recipe key {key!r}: {_NOT_IN_DJX[key]}"
    if key in _COMMAND_LINE:
        return (f"{key!r} is not a recipe key but an option of the command: "
                f"djx process RECIPE {_COMMAND_LINE[key]}")
    hint = _SAME_AS.get(key) or closest(str(key), fields)
    return f"unknown recipe key {key!r}" + (f"; did you mean {hint!r}?" if hint else "")
