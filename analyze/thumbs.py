"""Small JPEG thumbnails of the gallery samples' images, written once each under DIR/thumbs/.

An export may come from someone else: its image paths may name any file of the analyst's (an
absolute path, `..`, a link inside the dataset), and a small PNG may decode to gigabytes. So only
images whose real path lies under the run's own folders (its image folder and dataset folder as
the recipe or run summary records them, the export's folder) are previewed, and only up to
`PIXEL_BUDGET` pixels (read from the header, before any decoding)."""
from __future__ import annotations

import hashlib
import os
import warnings
from typing import NamedTuple

THUMB_PX = 128
PIXEL_BUDGET = 40_000_000  # the most pixels decoded for one thumbnail (120 MB as RGB)
UNREADABLE = "image not readable now"
TOO_LARGE = "image too large to preview"
OUTSIDE = "outside the dataset's folders: not previewed"


class Thumb(NamedTuple):
    path: str | None  # relative to the analysis folder; None when there is no thumbnail
    why: str = ""     # why there is none


def resolve_image(ref: str, folders: list[str]) -> str:
    """An image path as an output holds it: absolute, or relative to the first of `folders` (the
    run's image folder, the export's folder) where it exists."""
    if os.path.isabs(ref):
        return ref
    for folder in folders:
        if os.path.exists(os.path.join(folder, ref)):
            return os.path.join(folder, ref)
    return os.path.join(folders[0], ref) if folders else ref


def is_inside(path: str, folders: list[str]) -> bool:
    """Whether `path`, links resolved, lies under one of `folders` (links resolved too)."""
    real = os.path.realpath(path)
    for folder in folders:
        top = os.path.realpath(folder)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


class ImageScope(NamedTuple):
    folders: list[str]         # where relative image paths resolve, in order
    allowed: list[str] | None  # the folders whose images may be previewed (None: any)
    max_pixels: int = PIXEL_BUDGET


def image_scope(export: str, recipe, summary: dict | None) -> ImageScope:
    """Where the outputs' relative image paths may point: the run's image folder (the recipe's
    image_root, else the dataset's folder), then the export's folder (image_paths: relative); the
    images previewed: those under these folders or the dataset's, as the recipe given or else the
    run summary records them; the pixel budget: PIXEL_BUDGET, or the run's max_image_pixels if lower."""
    from djx.core.io.dataset import dataset_root
    run = recipe.__dict__ if recipe is not None else ((summary or {}).get("recipe") or {})
    run = run if isinstance(run, dict) else {}
    dataset_path = run.get("dataset_path") or (summary or {}).get("dataset_path")
    dataset = dataset_root(dataset_path) if isinstance(dataset_path, str) and dataset_path else None
    image_root = run.get("image_root") if isinstance(run.get("image_root"), str) else None
    first = [f for f in (image_root or dataset,) if f]
    folders = first + [os.path.dirname(os.path.abspath(export))]
    allowed = folders + ([dataset] if dataset and dataset not in folders else [])
    limit = run.get("max_image_pixels")
    ok = type(limit) is int and 0 < limit < PIXEL_BUDGET
    return ImageScope(folders, allowed, limit if ok else PIXEL_BUDGET)


def make_thumbs(refs, scope: ImageScope, out_dir: str) -> dict[str, Thumb]:
    """ref -> its Thumb: a thumbnail of each image `scope` lets be previewed."""
    from djx.analyze.files import own_subfolder
    own_subfolder(os.path.join(out_dir, "thumbs"))
    done: dict[str, Thumb] = {}
    for ref in refs:
        if ref in done:
            continue
        path = resolve_image(ref, scope.folders)
        if scope.allowed is not None and not is_inside(path, scope.allowed):
            done[ref] = Thumb(None, OUTSIDE)
            continue
        rel = os.path.join("thumbs", hashlib.sha1(path.encode("utf-8", "replace")).hexdigest()[:16] + ".jpg")
        done[ref] = _thumb(path, out_dir, rel, min(scope.max_pixels, PIXEL_BUDGET))
    return done


def _thumb(path: str, out_dir: str, rel: str, max_pixels: int) -> Thumb:
    from PIL import Image, ImageOps

    from djx.analyze.files import replacing
    from djx.core.io.regular_file import open_regular
    try:
        # opened once, non-blocking, fstat on the descriptor: a FIFO or device put there is no image
        with open_regular(path) as f, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(f) as im:  # reads the header only: the size is known before decoding
                if im.width * im.height > max_pixels:
                    return Thumb(None, TOO_LARGE)
                im.draft("RGB", (THUMB_PX * 2, THUMB_PX * 2))  # JPEG: decode at a reduced scale
                if im.mode in ("1", "P"):
                    im = im.convert("RGBA" if "transparency" in im.info else "RGB")
                im.thumbnail((THUMB_PX, THUMB_PX))  # decodes, then shrinks in place
                small = ImageOps.exif_transpose(im).convert("RGB")
            with replacing(os.path.join(out_dir, rel), "wb") as out:
                small.save(out, "JPEG", quality=75)
        return Thumb(rel)
    except Image.DecompressionBombError:
        return Thumb(None, TOO_LARGE)
    except Exception:  # noqa: BLE001 - any unreadable image just shows no thumbnail
        return Thumb(None, UNREADABLE)
