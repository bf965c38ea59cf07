"""Recipe: the YAML a user writes, loaded with yaml.safe_load into a frozen, validated object. Global
keys follow Data-Juicer's names; djx adds its own (executor, batch_size, ...). Relative paths resolve
against the recipe's folder. Errors name the key path and what was expected."""
from __future__ import annotations

import copy
import os
import re
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import yaml

from djx.core.recipe.context import RunContext
from djx.core.recipe.dj_compat import (DJ_GLOBAL_KEYS, DJ_OP_KEYS, DJ_UNSET_KEYS, export_type_clash, refuse_mixture,
                                       take_custom_operator_paths, take_dataset, unknown_key)
from djx.core.errors import RecipeError
from djx.core.op.params import coerce, _type_name
from djx.core.io.dataset import dataset_root
from djx.core.recipe.bounded_yaml import read_recipe_file
from djx.core.recipe.build_ops import problems, without_dj_op_keys
from djx.core.recipe.formats import check_format, llava_options
from djx.core.recipe.overrides import apply_overrides, parse_set  # noqa: F401  (parse_set: its old home)
from djx.core.run.provenance import stats_key


@dataclass(frozen=True)
class Recipe:
    dataset_path: str
    export_path: str
    process: tuple = ()                       # ((op_name, {params}), ...)
    project_name: str = "djx"
    np: int | None = None                     # workers; None: decided by the planner
    text_keys: str | list[str] = RunContext.text_key   # run defaults are RunContext's
    image_key: str = RunContext.image_key
    image_special_token: str = RunContext.image_special_token
    eoc_special_token: str = RunContext.eoc_special_token
    executor: Literal["local", "ray"] = "local"
    batch_size: int = 64
    max_batch_bytes: int = 64 << 20           # a batch also ends at this many bytes of input lines
    max_record_bytes: int = 1 << 30           # a JSON line or parquet row over this is rejected unread
    start_method: Literal["auto", "fork", "spawn", "forkserver"] = "auto"
    custom_ops: list[str] = field(default_factory=list)
    export_dropped: bool = True
    keep_stats_in_res_ds: bool = True         # false: the export without stats, + <stem>_stats.jsonl
    export_shard_size: int = 0                # bytes per export shard (Data-Juicer's); 0: one file
    on_error: Literal["reject", "fail"] = "reject"
    devices: list[str] = field(default_factory=list)
    gpu_mem_fraction: float = 0.9
    max_image_pixels: int = RunContext.max_image_pixels
    load_truncated_images: bool = RunContext.load_truncated_images
    max_decoded_bytes: int = RunContext.max_decoded_bytes  # decoded pixels a batch may hold in a worker
    max_in_flight: int | None = None          # batches read ahead; None: 4 x the batches workers hold
    checkpoint_every: int = 10                # batches between resume checkpoints
    dedup_memory_entries: int = 2_000_000     # rows a deduplicator's index holds in memory, then on disk
    max_rejected_fraction: float | None = None  # a finished run rejecting more exits non-zero
    stop_on_systematic_failure: bool = True   # stop when an op fails alike for the first samples
    report: bool = False                      # write the analysis (djx analyze) next to the export
    sample_timeout: float = 600.0             # seconds one op call may make no progress (then killed)
    share_models: bool = True                 # CPU workers map one shared copy of each model's weights
    # device: workers prepare, one scorer per device scores; auto: device on GPUs, workers elsewhere
    scoring: Literal["auto", "workers", "device"] = "auto"
    ray_address: str | None = None
    image_root: str | None = None             # relative image paths resolve here (default: the dataset's folder)
    dataset_format: Literal["djx", "llava"] = "djx"  # llava: LLaVA's records, read and written as they are
    format_options: dict = field(default_factory=dict)  # the format's options (core/io/llava.py LlavaOptions)
    image_paths: Literal["absolute", "relative"] = "absolute"  # image paths in the outputs
    recompute_stats: bool = False             # False: filters reuse valid stats samples already carry
    trust_input_stats: bool = False           # True: also reuse stats djx did not write (range-checked)
    skip_unknown_ops: bool = False            # True: run without the ops djx does not have (listed)
    inject_faults: list[str] = field(default_factory=list)  # testing: "oom_above:N", "oom_always"
    base_dir: str = "."                       # the recipe's folder (set by the loader)
    ignored: tuple = ()                       # Data-Juicer keys accepted and ignored: (key, why)

    @property
    def text_key(self) -> str:
        return self.text_keys if isinstance(self.text_keys, str) else self.text_keys[0]

    def run_context(self, **extra) -> RunContext:
        return RunContext(text_key=self.text_key, image_key=self.image_key,
                          image_special_token=self.image_special_token,
                          eoc_special_token=self.eoc_special_token,
                          dataset_dir=self.image_root or dataset_root(self.dataset_path),
                          image_paths=self.image_paths, recompute_stats=self.recompute_stats,
                          trust_input_stats=self.trust_input_stats, stats_key=stats_key(),
                          max_image_pixels=self.max_image_pixels, on_error=self.on_error,
                          load_truncated_images=self.load_truncated_images, max_decoded_bytes=self.max_decoded_bytes,
                          fault=tuple(self.inject_faults), llava=llava_options(self), **extra)

    def input_context(self, files: list[str]) -> RunContext:
        """The run context of a run over the input `files` (which file a sample came from, where
        the export goes)."""
        root = dataset_root(self.dataset_path)
        suffixes = any(name == "suffix_filter" for name, _ in self.process)
        return self.run_context(input_files=tuple(os.path.relpath(f, root) for f in files) if len(files) > 1 else (),
                                export_dir=os.path.dirname(os.path.abspath(self.export_path)),
                                file_suffixes=tuple(os.path.splitext(f)[1].lower() for f in files) if suffixes else ())

    def build_ops(self, load_resources: bool = True) -> list:
        """Instantiate the process list (loads plug-ins first); validates every op parameter."""
        from djx.core.recipe.build_ops import build_ops
        return build_ops(self, load_resources)

    def skipped_ops(self) -> list[dict]:
        """The ops this recipe names that djx does not have, run without (skip_unknown_ops: true)."""
        from djx.core.recipe.build_ops import skipped_ops
        return skipped_ops(self)

    def notes(self) -> list[str]:
        """What a run should tell the user about this recipe: the Data-Juicer keys it ignores
        (call after build_ops, which loads the plug-ins)."""
        from djx.core.op.registry import get_op_class, silent_plugins, unknown_op
        out = [f"{key} ignored: {why}" for key, why in self.ignored] + silent_plugins(self.custom_ops, self.base_dir)
        out += [] if self.process else ["the recipe names no ops (no `process` list, or an empty one): the run "
                                        "copies its input, with the input checks (bad records rejected with their "
                                        "reasons)"]
        out += [f"process[{s['index']}].{s['name']} skipped (skip_unknown_ops): {unknown_op(s['name'])}"
                for s in self.skipped_ops()]
        for i, (name, params) in enumerate(self.process):
            try:
                _, dropped = without_dj_op_keys(get_op_class(name), params)
            except RecipeError:
                continue
            out += [f"process[{i}].{name}.{key} ignored: {DJ_OP_KEYS[key]}" for key in dropped]
        return out

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("base_dir", "ignored")}
        d["process"] = [{name: dict(params)} for name, params in self.process]
        return d


_FIELDS = {f.name: f for f in fields(Recipe) if f.name not in ("base_dir", "ignored")}

_EXECUTOR_TYPES = {"default": "local", "local": "local", "ray": "ray"}  # Data-Juicer's executor_type
_HINTS = typing.get_type_hints(Recipe)


def load_recipe(path: str, overrides: dict | None = None, custom_ops: list[str] = ()) -> Recipe:
    """Read a recipe file, apply CLI overrides (dotted keys), and validate."""
    raw = read_recipe_file(path)
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of keys (dataset_path, process, ...), "
                          f"got {type(raw).__name__}")
    if isinstance(raw.get("process"), list):  # bare `- op_name` entries take --set keys too
        raw["process"] = [{e: {}} if isinstance(e, str) else e for e in raw["process"]]
    apply_overrides(raw, overrides or {}, _FIELDS)
    if custom_ops:
        raw["custom_ops"] = list(raw.get("custom_ops") or []) + list(custom_ops)
    return recipe_from_dict(raw, base_dir=os.path.dirname(os.path.abspath(path)))


def recipe_from_dict(raw: dict, base_dir: str = ".") -> Recipe:
    raw = copy.deepcopy(raw)
    values: dict[str, Any] = {}
    ignored = []
    _take_executor_type(raw)
    take_custom_operator_paths(raw)
    ignored.extend(filter(None, [take_dataset(raw)]))
    errors = list(filter(None, [export_type_clash(raw)]))  # every unknown key and wrong type, in one error
    for key, value in raw.items():
        if key in DJ_GLOBAL_KEYS and key not in _FIELDS:
            ignored.append((key, DJ_GLOBAL_KEYS[key]))
            continue
        if key in DJ_UNSET_KEYS:  # harmless only while it asks for nothing
            if value in (None, False, "", {}, []):
                ignored.append((key, DJ_UNSET_KEYS[key]))
            else:
                errors.append(f"recipe key {key!r}: {DJ_UNSET_KEYS[key]}: remove it, or leave it unset")
            continue
        if key not in _FIELDS:
            errors.append(unknown_key(key, _FIELDS))
            continue
        if key == "process":
            values[key] = _parse_process(value)
            continue
        if value is None:  # an empty YAML value means "the default"
            continue
        tp = _HINTS[key]
        try:
            values[key] = coerce(value, tp)
        except TypeError:
            errors.append(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if errors:
        raise RecipeError(problems(errors))
    for key in ("dataset_path", "export_path"):
        if not values.get(key):
            raise RecipeError(f"recipe key {key!r} is required")
    _check_values(values, base_dir)
    return Recipe(**values, base_dir=base_dir, ignored=tuple(ignored))


def _take_executor_type(raw: dict) -> None:
    """Data-Juicer's `executor_type` becomes `executor` (in place); contradicting both is an error."""
    if "executor_type" in raw:
        kind = raw.pop("executor_type")
        if kind not in _EXECUTOR_TYPES:
            raise RecipeError(f"executor_type: expected one of {', '.join(_EXECUTOR_TYPES)}, got {kind!r}")
        if raw.get("executor") not in (None, _EXECUTOR_TYPES[kind]):
            raise RecipeError(f"executor_type: {kind!r} contradicts executor: {raw['executor']!r}; keep one")
        raw["executor"] = _EXECUTOR_TYPES[kind]


def _check_values(values: dict, base_dir: str) -> None:
    """Check the typed values against each other and the file system; make paths absolute (in place)."""
    refuse_mixture(values["dataset_path"])
    given = values["dataset_path"]
    for key in ("dataset_path", "export_path"):
        values[key] = _abs(values[key], base_dir)
    if not os.path.lexists(values["dataset_path"]) and os.path.exists(given) and not os.path.isabs(given):
        raise RecipeError(f"dataset_path {given!r}: a recipe's relative paths resolve from its folder ({base_dir}), "
                          f"where there is no such file; Data-Juicer resolves them from the current folder, where "
                          f"there is one: write it as {os.path.abspath(given)!r} (and export_path likewise, or the "
                          f"outputs go under {base_dir})")
    if values.get("image_root"):
        values["image_root"] = _abs(values["image_root"], base_dir)
        if not os.path.isdir(values["image_root"]):
            raise RecipeError(f"image_root: no such folder: {values['image_root']}")
    if not values["export_path"].lower().endswith((".jsonl", ".json", ".parquet")):
        raise RecipeError(f"export_path: the suffix chooses the format: use a path ending in .jsonl, .json "
                          f"or .parquet, got {values['export_path']!r}")
    if values.get("export_shard_size", 0) < 0:
        raise RecipeError(f"export_shard_size: bytes per shard, >= 0 (0: one file), got {values['export_shard_size']}")
    for key in ("np", "batch_size", "max_in_flight", "checkpoint_every", "dedup_memory_entries", "max_image_pixels",
                "max_batch_bytes", "max_record_bytes", "max_decoded_bytes"):
        if values.get(key) is not None and values[key] < 1:
            raise RecipeError(f"{key}: must be >= 1, got {values[key]}")
    if not 0 <= values.get("max_rejected_fraction", 0) <= 1:
        raise RecipeError(f"max_rejected_fraction: must be in [0, 1], got {values['max_rejected_fraction']}")
    if values.get("sample_timeout", 1) <= 0:
        raise RecipeError(f"sample_timeout: must be > 0 seconds, got {values['sample_timeout']}")
    frac = values.get("gpu_mem_fraction", Recipe.gpu_mem_fraction)
    if not 0 < frac <= 1:
        raise RecipeError(f"gpu_mem_fraction: must be in (0, 1], got {frac}")
    for f in values.get("inject_faults", ()):
        if not re.fullmatch(r"oom_always|oom_above:\d+", f):
            raise RecipeError(f"inject_faults: unknown fault {f!r}; known: 'oom_always', 'oom_above:N'")
    if isinstance(values.get("text_keys"), list) and not values["text_keys"]:
        raise RecipeError("text_keys: must name at least one key")
    check_format(values)
    _check_tokens(values.get("image_special_token", Recipe.image_special_token),
                  values.get("eoc_special_token", Recipe.eoc_special_token))


def _check_tokens(image: str, eoc: str) -> None:
    """The special tokens split texts into chunks and count images: a blank token is in every
    text, and tokens that are equal or contain one another miscount, so refuse them up front."""
    for key, token in (("image_special_token", image), ("eoc_special_token", eoc)):
        if not token.strip():
            raise RecipeError(f"{key}: must be a visible token such as {getattr(Recipe, key)!r}, got {token!r}")
    if image in eoc or eoc in image:
        raise RecipeError(f"eoc_special_token {eoc!r} and image_special_token {image!r} must differ and "
                          f"neither may contain the other; set them to the tokens your data was written with")


def _parse_process(value) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RecipeError(f"process: expected a list of ops, got {value!r}")
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            entry = {entry: {}}
        if not isinstance(entry, dict) or len(entry) != 1:
            raise RecipeError(f"process[{i}]: each entry is one op, `- op_name: {{param: value}}`, "
                              f"got {entry!r}")
        (name, params), = entry.items()
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise RecipeError(f"process[{i}].{name}: parameters must be a mapping, got {params!r}")
        out.append((str(name), params))
    return tuple(out)


def _abs(path: str, base_dir: str) -> str:
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base_dir, path))
