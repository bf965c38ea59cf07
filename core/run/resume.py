"""Resuming a run: what identifies it (the fingerprint of recipe and input), and what a
checkpoint holds (where the reader stood, the counts so far). The part files' lengths are the
writer's business (outputs.py)."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field

from djx.core.errors import ResumeError
from djx.core.io.readers import ReadState
from djx.core.records import OpCounts, add_counters
from djx.core.run.stable_params import callables, json_default, stable

# Recipe keys that do not change what a run outputs: a resumed run may change them.
RESUMABLE_KEYS = {"np", "start_method", "devices", "gpu_mem_fraction", "max_in_flight", "checkpoint_every", "dedup_memory_entries",
                  "on_error", "executor", "ray_address", "export_path", "dataset_path", "batch_size",
                  "project_name", "max_rejected_fraction",
                  "sample_timeout", "max_batch_bytes", "share_models", "report", "scoring"}


@dataclass
class RunCounts:
    """The whole run's tally so far (it survives a resume through the checkpoint)."""
    ops: list[OpCounts]
    kept: int = 0
    dropped: int = 0
    rejected: int = 0
    events: dict[str, int] = field(default_factory=dict)
    rejected_by_code: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0      # wall time of every session so far
    restarts: int = 0         # workers replaced in every session so far

    def add(self, res) -> None:
        self.kept += len(res.kept)
        self.dropped += len(res.dropped)
        self.rejected += len(res.rejected)
        self.ops = [a + b for a, b in zip(self.ops, res.op_counts)]
        self.events = add_counters(self.events, res.counters)
        for rej in res.rejected:
            code = rej.code or "other"
            self.rejected_by_code[code] = self.rejected_by_code.get(code, 0) + 1

    def to_dict(self) -> dict:
        return {"kept": self.kept, "dropped": self.dropped, "rejected": self.rejected,
                "ops": [c.to_dict() for c in self.ops], "events": dict(self.events),
                "rejected_by_code": dict(self.rejected_by_code), "seconds": self.seconds,
                "restarts": self.restarts}

    @classmethod
    def from_dict(cls, d: dict) -> "RunCounts":
        return cls([OpCounts.from_dict(c) for c in d["ops"]], d["kept"], d["dropped"], d["rejected"],
                   dict(d.get("events", {})), dict(d.get("rejected_by_code", {})), d.get("seconds", 0.0),
                   d.get("restarts", 0))


@dataclass
class ResumePoint:
    """Where a run starts: from scratch, or from an unfinished run's last checkpoint (`manifest`)."""
    fingerprint: dict
    read: ReadState
    counts: RunCounts
    manifest: dict | None = None
    note: str = ""           # said at the start of the run (a trial's state discarded)

    @property
    def resumed(self) -> bool:
        return self.manifest is not None

    @property
    def finishing(self) -> bool:
        """The run it resumes had finished and was moving its outputs into place."""
        return bool(self.manifest and self.manifest.get("finishing"))

    def checkpoint(self, read_at: dict, counts: RunCounts) -> dict:
        """The manifest of a checkpoint taken after the reader position `read_at`."""
        return {"fingerprint": self.fingerprint, "read": read_at, "counts": counts.to_dict()}


def resume_point(manifest: dict | None, fingerprint: dict, n_ops: int, state_dir: str) -> ResumePoint:
    """Start from `manifest` (an unfinished run's state, or None) if it is this run's."""
    fresh = ResumePoint(fingerprint, ReadState(), RunCounts([OpCounts() for _ in range(n_ops)]))
    if manifest is None:
        return fresh
    if not isinstance(manifest, dict):
        raise ResumeError(f"resume state {state_dir}/manifest.json is damaged (not a JSON object); run again with "
                          f"--restart to discard it and start over")
    old_limit = (manifest.get("fingerprint") or {}).get("limit")
    if old_limit != fingerprint.get("limit") and not manifest.get("finishing"):
        if old_limit is not None:  # a trial's samples are no part of another run: start over
            fresh.note = (f"[djx] {state_dir} held an unfinished trial run (--limit {old_limit}); "
                          f"it is discarded and this run starts from the first sample")
            return fresh
        raise ResumeError(f"{state_dir} holds an unfinished run of the whole dataset; a trial run (--limit) "
                          f"would discard it: run the same command without --limit to finish that run, or "
                          f"add --restart to discard it")
    if manifest.get("fingerprint") != fingerprint:
        raise ResumeError(f"{state_dir} holds an unfinished run of a different recipe, input or code "
                          f"({_diff(manifest.get('fingerprint', {}), fingerprint)}); run again with "
                          f"--restart (Pipeline.run(restart=True)) to discard it and start over")
    try:
        read, counts = ReadState(**manifest["read"]), RunCounts.from_dict(manifest["counts"])
        if len(counts.ops) != n_ops or not all(isinstance(n, int) for n in (manifest.get("lengths") or {}).values()):
            raise ValueError("its counts or part lengths do not fit this run")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        what = f"no {e}" if isinstance(e, KeyError) else str(e)
        raise ResumeError(f"resume state {state_dir}/manifest.json is damaged ({what}); run again with --restart "
                          f"to discard it and start over") from None
    return ResumePoint(fingerprint, read, counts, manifest)


def fingerprint(recipe, ops: list, files: list[str], root: str) -> dict:
    """What decides a run's outputs: the recipe (less RESUMABLE_KEYS), the ops, the input files,
    the code of every op (plug-ins and built-ins alike), local model folders, and djx's version."""
    settings = {k: v for k, v in recipe.to_dict().items() if k not in RESUMABLE_KEYS and k != "process"}
    # a callable parameter by its code (run/stable_params.py), never by its address; apart, so that a
    # changed function is named as such
    op_desc = [[op.name, stable(op.params(), named=False)] for op in ops]
    text = json.dumps([settings, op_desc], sort_keys=True, default=json_default)
    functions = {k: v for i, op in enumerate(ops) for k, v in callables(op.params(), f"process[{i}].{op.name}.").items()}
    if len(files) == 1:
        data = _file_hash(files[0])
    else:  # which files, in which order, with which content
        h = hashlib.sha256()
        for f in files:
            h.update(f"{os.path.relpath(f, root)}\0{_file_hash(f)}\n".encode())
        data = h.hexdigest()[:16]
    code = {}
    for op in ops:
        source = getattr(sys.modules.get(type(op).__module__), "__file__", None)
        if source and os.path.isfile(source):
            code[op.name] = _file_hash(source)
    models = {}
    for op in ops:
        for spec in op.model_specs():
            if os.path.isdir(spec.name):
                models[spec.name] = _folder_stamp(spec.name)
    from djx import __version__
    return {"recipe": hashlib.sha256(text.encode()).hexdigest()[:16], "input": data, "code": code,
            "models": models, "djx": __version__, **({"callables": functions} if functions else {})}


def _folder_stamp(folder: str) -> str:
    """Names, sizes and modification times of a folder's files (a model folder: no need to read
    gigabytes of weights to see that they changed)."""
    h = hashlib.sha256()
    for base, dirs, names in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(names):
            st = os.stat(os.path.join(base, name))
            h.update(f"{os.path.relpath(os.path.join(base, name), folder)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                     .encode())
    return h.hexdigest()[:16]


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _diff(old: dict, new: dict) -> str:
    """What changed between two fingerprints, named."""
    out = [f"the {k} changed" for k in ("recipe", "input") if old.get(k) != new.get(k)]
    for kind, what in (("code", "the code of op"), ("models", "the model folder"),
                       ("callables", "the function given as op parameter")):
        before, now = old.get(kind, {}), new.get(kind, {})
        out += [f"{what} {name} changed" for name in sorted(set(before) | set(now))
                if before.get(name) != now.get(name)]
    if old.get("djx") != new.get("djx"):
        out.append(f"djx changed from {old.get('djx')} to {new.get('djx')}")
    return "; ".join(out) or "unknown state"
