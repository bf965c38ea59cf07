"""Small JPEG thumbnails of the gallery samples' images, written once each under DIR/thumbs/."""
from __future__ import annotations

import hashlib
import os

THUMB_PX = 128


def resolve_image(ref: str, folders: list[str]) -> str:
    """An image path as an output holds it: absolute, or relative to the first of `folders` (the
    run's image folder, the export's folder) where it exists."""
    if os.path.isabs(ref):
        return ref
    for folder in folders:
        if os.path.exists(os.path.join(folder, ref)):
            return os.path.join(folder, ref)
    return os.path.join(folders[0], ref) if folders else ref


def make_thumbs(refs, folders: list[str], out_dir: str) -> dict[str, str | None]:
    """ref -> path of its thumbnail relative to out_dir, or None when the image cannot be read now."""
    from PIL import Image, ImageOps

    from djx.core.io.regular_file import open_regular
    os.makedirs(os.path.join(out_dir, "thumbs"), exist_ok=True)
    done: dict[str, str | None] = {}
    for ref in refs:
        if ref in done:
            continue
        path = resolve_image(ref, folders)
        rel = os.path.join("thumbs", hashlib.sha1(path.encode("utf-8", "replace")).hexdigest()[:16] + ".jpg")
        try:
            # opened once, non-blocking, fstat on the descriptor: a FIFO or device put there is no image
            with open_regular(path) as f, Image.open(f) as im:
                im.draft("RGB", (THUMB_PX * 2, THUMB_PX * 2))  # JPEG: decode at a reduced scale
                im = ImageOps.exif_transpose(im).convert("RGB")
                im.thumbnail((THUMB_PX, THUMB_PX))
                im.save(os.path.join(out_dir, rel), "JPEG", quality=75)
            done[ref] = rel
        except Exception:  # noqa: BLE001 - any unreadable image just shows no thumbnail
            done[ref] = None
    return done
