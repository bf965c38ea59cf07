"""Refusals before any work: outputs that cannot be written, that are input files (by name, link
or hard link), or that lie inside the dataset (the next run would read them as input)."""
from __future__ import annotations

import fnmatch
import os
import tempfile

from djx.core.errors import DjxError
from djx.core.io.folder_trust import check_folder_chain
from djx.core.io.outputs import OutputPaths
from djx.core.io.writers import existing_shards


def guard_outputs(dataset_path: str, paths: OutputPaths) -> None:
    """Refuse, before any work, outputs that cannot be written, that would overwrite an input, or
    that the next run would read."""
    _refuse_outputs_that_are_inputs(dataset_path, paths)
    _refuse_outputs_inside_input(dataset_path, paths)
    _refuse_json_export_of_binary(dataset_path, paths)
    check_writable(os.path.dirname(os.path.abspath(paths.export)))


def output_problems(dataset_path: str, paths: OutputPaths) -> list[str]:
    """What guard_outputs would refuse, found without making or writing anything (for --dry-run)."""
    problems = []
    for check in (_refuse_outputs_that_are_inputs, _refuse_outputs_inside_input, _refuse_json_export_of_binary,
                  lambda _, p: check_folder_chain(os.path.dirname(os.path.abspath(p.export)), "export_path")):
        try:
            check(dataset_path, paths)
        except DjxError as e:
            problems.append(str(e))
    return problems


def _outputs(paths: OutputPaths) -> dict[str, str]:
    """Every file a run writes or replaces: with the stats file and an earlier run's shards, which a
    finish removes as stale (they must never be input files)."""
    shards = {f"shard {os.path.basename(s)}": s for s in existing_shards(paths.export)}
    return {"export": paths.export, "dropped": paths.dropped, "rejected": paths.rejected,
            "summary": paths.summary, "stats": paths.stats, **shards}


def _refuse_outputs_that_are_inputs(dataset_path: str, paths: OutputPaths) -> None:
    """An output that is an input file (by name, link or hard link) would be overwritten with the
    run's results; one that is a folder could only be found unwritable after all the work."""
    from djx.core.io.dataset import dataset_files
    refuse_inputs_as_outputs(dataset_files(dataset_path), _outputs(paths), "export_path",
                             "choose an export_path whose outputs (.jsonl, .dropped.jsonl, .rejected.jsonl, "
                             ".summary.json) are neither input files nor folders")


def _refuse_json_export_of_binary(dataset_path: str, paths: OutputPaths) -> None:
    """A .jsonl or .json export of parquet columns JSON cannot hold (binary, timestamps, decimals)
    would write them as text: refuse it now, naming the column, rather than after all the work."""
    from djx.core.io.dataset import dataset_files
    from djx.core.io.parquet_reader import json_export_problem
    if paths.fmt != ".parquet" and (problem := json_export_problem(dataset_files(dataset_path))):
        raise DjxError(f"export_path {paths.export}: {problem}")


def refuse_inputs_as_outputs(input_files: list[str], outputs: dict[str, str], where: str, fix: str) -> None:
    """Refuse, before any work, an output (named: file) that is one of `input_files` (by name, link
    or hard link: writing it would destroy the input being read) or an existing folder."""
    inputs = {}
    for f in input_files:
        st = os.stat(f)
        inputs[(st.st_dev, st.st_ino)] = f
    for name, out in outputs.items():
        try:
            st = os.stat(out)
        except OSError:
            continue
        same = inputs.get((st.st_dev, st.st_ino))
        if same:
            raise DjxError(f"{where}: the {name} file {out} is the input file {same}; writing it would "
                           f"overwrite it: {fix}")
        if os.path.isdir(out):
            raise DjxError(f"{where}: the {name} file {out} is an existing folder; {fix}")


def check_writable(folder: str, where: str = "export_path") -> None:
    """The export folder exists or can be made, is writable, and no other user can change it under
    the run (io/folder_trust.py): say so now, not mid-run."""
    check_folder_chain(folder, where)  # before anything is made there
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise DjxError(f"{where}: cannot write under {folder}: {existing} is a file, not a folder")
    try:  # by trying: permission bits do not tell for root, read-only mounts or /proc
        os.makedirs(folder, exist_ok=True)
        check_folder_chain(folder, where)  # the folders just made (another user's, made first, refused)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".djx-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise DjxError(f"{where}: cannot write under {folder} ({e.strerror or e})") from None


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
    outs = list(_outputs(paths).values())
    if os.path.isdir(dataset_path):
        root = os.path.abspath(dataset_path) + os.sep
        inside = [o for o in outs if os.path.abspath(o).startswith(root)
                  and not any(part.startswith(".") for part in os.path.relpath(o, root).split(os.sep))]
    else:
        inside = [o for o in outs if _glob_matches(os.path.abspath(o), os.path.abspath(dataset_path))]
    if inside:
        raise DjxError(f"export_path: {inside[0]} would be part of the dataset {dataset_path} (the next run "
                       f"would read it as input); write the outputs outside the dataset")
