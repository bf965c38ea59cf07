"""Image paths through `djx convert`: LLaVA names an image relative to its image folder; djx reads
one relative to the dataset's folder (or absolute). llava-to-djx joins `--image-folder` to each
path (`written`), djx-to-llava takes a path under the folder back relative to it (`under`).

That join normalises the path (`a//b.jpg`, `./a.jpg`, `x/../a.jpg`), so what comes back is the same
file under another spelling. With `--round-trip`, the spellings that would not come back as they
were are kept beside the record (signed with it, in `__dj__llava__`: `paths`, by the full path they
name, with the folder they were joined to), and djx-to-llava with the same folder writes them back
byte for byte. URLs and data: URIs are never joined to a folder."""
from __future__ import annotations

import os

from djx.core.io.image_paths import is_remote


def written(path: str, paths, done) -> str:
    """A LLaVA image path as djx reads it from the output: joined to the image folder, absolute when
    the folder was given absolute, else relative to the output's folder (`djx process` resolves a
    dataset's relative paths from its folder, not from where convert ran)."""
    if isinstance(path, str) and is_remote(path):
        done.remote_images += 1
        return path
    if paths.image_folder is None and not os.path.isabs(path):
        done.relative_images += 1
        return path
    full = os.path.normpath(os.path.join(paths.image_folder or "", path))
    if not os.path.isfile(full):  # a wrong --image-folder shows here, not as rejects of a later run
        done.missing_images += 1
        done.first_missing = done.first_missing or full
    elif paths.image_folder is not None and _outside(full, paths.image_folder):
        done.outside_images += 1
        done.first_outside = done.first_outside or path
    if paths.image_folder is None:
        return path  # absolute, as LLaVA has it
    return full if paths.absolute or os.path.isabs(path) else os.path.relpath(full, paths.out_dir)


def _outside(full: str, folder: str) -> bool:
    return os.path.relpath(full, folder).startswith(os.pardir)


def originals(as_read: list, paths) -> dict | None:
    """{"folder": the image folder, "by_path": {full path: the path as LLaVA wrote it}} for the
    paths that djx-to-llava with the same folder would not give back as they were; None when all
    would come back."""
    if paths.image_folder is None:
        return None
    kept = {}
    for path in as_read:
        if not isinstance(path, str) or is_remote(path):
            continue
        full = os.path.normpath(os.path.join(paths.image_folder, path))
        rel = os.path.relpath(full, paths.image_folder)
        back = full if rel.startswith(os.pardir) else rel  # under the folder: relative, even if it was absolute
        if back != path:
            kept[full] = path
    return {"folder": paths.image_folder, "by_path": kept} if kept else None


def under(path, paths, hidden=None):
    """`path` (relative ones from the input's folder, as djx reads them) relative to the image folder
    when it lies under it (LLaVA joins its image folder and the path); else as it was. A path whose
    LLaVA spelling the record keeps (`hidden`: its signed `__dj__llava__`, same folder) is that."""
    if not isinstance(path, str) or is_remote(path):
        return path
    full = os.path.normpath(os.path.join(paths.in_root, path))
    kept = hidden.get("paths") if isinstance(hidden, dict) else None
    if isinstance(kept, dict) and kept.get("folder") == paths.image_folder \
            and isinstance(kept.get("by_path"), dict) and isinstance(kept["by_path"].get(full), str):
        return kept["by_path"][full]
    rel = os.path.relpath(full, paths.image_folder)
    return path if rel.startswith(os.pardir) else rel
