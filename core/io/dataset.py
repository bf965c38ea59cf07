"""Which files a dataset_path names, in what order, and the folder its relative paths resolve
against. Input djx cannot read again on resume (a FIFO, a device), compressed files and folders that
mix formats are refused here, before any work."""
from __future__ import annotations

import glob
import os
import stat

from djx.core.errors import DjxError
from djx.core.io.export_input import export_shards


SUFFIXES = (".jsonl", ".json", ".parquet")
COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip", ".7z", ".tar", ".lz4")


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def dataset_files(path: str) -> list[str]:
    """The files of a dataset_path, sorted: the file itself; the shards of a djx export named as its
    run printed it; a folder's .jsonl/.json/.parquet files (recursively, hidden names skipped); or
    the files a glob pattern (`**` included) matches."""
    if _is_glob(path):
        files = sorted(p for p in glob.glob(path, recursive=True) if not os.path.isdir(p))
        if not files:
            raise DjxError(f"dataset_path: no file matches {path}")
    elif os.path.isdir(path):
        files = []
        for folder, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            files += [os.path.join(folder, n) for n in names
                      if not n.startswith(".") and n.lower().endswith(SUFFIXES)]
        files.sort()
        if not files:
            raise DjxError(f"dataset_path: the folder {path} holds no .jsonl, .json or .parquet file")
    elif os.path.isfile(path):
        files = [path]
    elif shards := export_shards(path):  # a sharded djx export, by the name its run printed
        files = shards
    elif os.path.exists(path):
        raise DjxError(f"dataset_path {path} is not a regular file (a FIFO, a device or a socket?); djx reads "
                       f"files it can read again on resume: write the data to a file first")
    else:
        raise DjxError(f"dataset not found: {path}")
    for f in files:
        _check_member(f, path)
    for f in files:
        if f.lower().endswith(COMPRESSED):
            raise DjxError(f"{f}: a compressed file; djx reads .jsonl, .json and .parquet files as they are: "
                           f"decompress it first (e.g. gunzip -k, unzstd, xz -dk)")
    kinds = {file_kind(f) for f in files}
    if len(kinds) > 1:
        raise DjxError(f"dataset_path {path}: the files mix formats ({', '.join(sorted(kinds))}); "
                       f"keep one format per dataset")
    for f in files:
        if file_kind(f) == "json":
            _check_json_end(f)
    return files


def _check_member(f: str, path: str) -> None:
    """A file of a folder or glob dataset must be a regular file, as a single dataset_path must: a
    FIFO would block the run forever (and never read the same again on resume), a dangling link
    has nothing to read."""
    try:
        st = os.stat(f)
    except OSError as e:
        if os.path.islink(f):
            raise DjxError(f"dataset_path {path}: {f} is a symbolic link to {os.readlink(f)}, which does not "
                           f"exist ({e.strerror}): remove the link, or restore its target") from None
        raise DjxError(f"dataset_path {path}: cannot read {f} ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        from djx.core.io.regular_file import kind_of
        raise DjxError(f"dataset_path {path}: {f} is not a regular file ({kind_of(st.st_mode)}); djx reads files "
                       f"it can read again on resume: write the data to a file first, or move it out of the dataset")


def _check_json_end(path: str) -> None:
    """A .json dataset ends with the ] closing its array: say so before any work when it does not
    (data after the array, or a cut-off file), rather than after reading all of it."""
    from djx.core.io.regular_file import open_input
    with open_input(path) as f:  # swapped for a FIFO since it was listed: refused, never waited on
        f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
        tail = f.read().rstrip()
    if tail and not tail.endswith(b"]"):
        shown = tail[-40:].decode("utf-8", "backslashreplace")
        raise DjxError(f"{path}: ends with {shown!r}, not with the ] closing its JSON array: the file is cut "
                       f"off, or holds data after the closing ] of its array; a .json dataset is one JSON "
                       f"array of objects (JSON Lines: one object per line)")


def dataset_root(path: str) -> str:
    """The folder relative image paths and file names resolve against: a folder dataset's own
    folder, a glob's folder before its first wildcard, or a file's folder."""
    if _is_glob(path):
        fixed = path[:min(path.index(c) for c in "*?[" if c in path)]
        return os.path.abspath(fixed if fixed.endswith(os.sep) else os.path.dirname(fixed) or ".")
    if os.path.isdir(path):
        return os.path.abspath(path)
    return os.path.dirname(os.path.abspath(path))


def file_kind(path: str) -> str:
    lower = path.lower()
    return "parquet" if lower.endswith(".parquet") else "json" if lower.endswith(".json") else "jsonl"
