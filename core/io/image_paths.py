"""Image paths in the outputs, written so that they resolve from the output.

A dataset's image paths may be relative to its own folder (or to `image_root`); copied unchanged
into an export kept elsewhere they would point nowhere. Kept, dropped and rejected records get
paths that are absolute (`image_paths: absolute`, the default, as Data-Juicer writes them) or
relative to the export's folder (`image_paths: relative`: the export and its images move together).
"""
from __future__ import annotations

import os

IMAGE_PATH_MODES = ("absolute", "relative")


def is_remote(ref: str) -> bool:
    """A URL (`scheme://...`) or a `data:` URI: a reference to no local file, never joined to a folder."""
    return "://" in ref or ref[:5].lower() == "data:"


class ImagePathWriter:
    """Rewrites the image lists of records for one run: `root` is where the input's relative paths
    resolve, `export_dir` the folder of the outputs, `keys` the image keys the run reads."""

    def __init__(self, root: str, export_dir: str, mode: str, keys: tuple[str, ...]):
        self.root, self.export_dir, self.mode, self.keys = root, export_dir, mode, keys

    def ref(self, ref):
        """One image path as the outputs write it; anything that is not a local path stays as it is
        (a URL or data: URI, a blank, a non-string: those samples are rejected with their reason anyway)."""
        if not isinstance(ref, str) or not ref.strip() or is_remote(ref):
            return ref
        full = os.path.normpath(os.path.join(self.root, ref))
        return full if self.mode == "absolute" else os.path.relpath(full, self.export_dir)

    def rewrite(self, record: dict) -> dict:
        """`record` with its image lists rewritten (in place), returned for convenience."""
        for key in self.keys:
            refs = record.get(key)
            if isinstance(refs, list):
                record[key] = [self.ref(r) for r in refs]
            elif isinstance(refs, str):
                record[key] = self.ref(refs)
        return record

    def copy(self, record):
        """A rewritten shallow copy of a record (the input record as read stays untouched)."""
        if not isinstance(record, dict) or not any(k in record for k in self.keys):
            return record
        return self.rewrite(dict(record))


def path_writer(ctx, ops) -> ImagePathWriter | None:
    """The writer of a run that writes files (None for in-memory runs: paths stay as given)."""
    if ctx.export_dir is None:
        return None
    keys = tuple(dict.fromkeys([ctx.image_key] + [op.image_key for op in ops if op.image_key]
                               + (["image"] if ctx.llava is not None else [])))  # a LLaVA record's one image
    return ImagePathWriter(ctx.dataset_dir, ctx.export_dir, ctx.image_paths, keys)
