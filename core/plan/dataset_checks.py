"""What --dry-run finds in a dataset's first records about their images (core/plan/preflight.py
reads them): images none of which exist, a token the texts lack, an image_key that holds none."""
from __future__ import annotations

import os


def no_token(recipe, tokens: set, pairs_chunks: bool, lines: list[str], problems: list[str]) -> None:
    """Records with images, none with the image token: a problem where an op pairs text chunks with
    images by it, else a note (the images are judged without it)."""
    seen = ", ".join(sorted(tokens)[:5])
    said = (f"dataset: none of the first records with images carries image_special_token "
            f"{recipe.image_special_token!r} in its text" + (f" (tokens seen: {seen})" if seen else ""))
    if pairs_chunks:
        problems.append(said + "; set image_special_token to the token your data was written with")
    else:
        lines.append(f"  note: {said} (no op of this recipe pairs text with images by it)")


def missing_images(items, recipe, lines: list[str]) -> list[str]:
    """A problem when none of the images the first records name exists where djx will look (the
    records point elsewhere: image_root); a note when some are missing."""
    from djx.core.io.dataset import dataset_root
    root = recipe.image_root or dataset_root(recipe.dataset_path)
    llava = recipe.dataset_format == "llava"  # LLaVA's records name one image, under `image`
    named = [item.record.get("image" if llava else recipe.image_key) for item in items if isinstance(item.record, dict)]
    refs = [r for refs in named for r in ([refs] if llava else refs if isinstance(refs, list) else [])
            if isinstance(r, str) and (r or not llava)]
    from djx.core.io.image_paths import is_remote
    from djx.core.op.images import shown
    remote = [r for r in refs if is_remote(r)]
    if refs and len(remote) == len(refs):
        return [f"dataset: the {len(refs)} images the first records name are URLs or data: URIs, e.g. "
                f"{shown(remote[0])}; djx reads local files: download them and use their paths"]
    missing = [r for r in refs if not is_remote(r) and not os.path.isfile(os.path.join(root, r))]
    if not missing:
        return []
    example = f"{shown(missing[0])} (looked for {shown(os.path.join(root, missing[0]))[1:-1]})"
    if len(missing) == len(refs):
        return [f"dataset: none of the {len(refs)} images the first records name exists, e.g. {example}; set "
                f"image_root to the folder the image paths are relative to"]
    lines.append(f"  note: {len(missing)} of {len(refs)} images of the first records are missing, e.g. {example} "
                 f"(a run rejects those samples as bad_image)")
    return []


def unused_image_key(recipe, items, token_only: int) -> str:
    """The problem of records whose texts carry the image token while none has images under
    image_key (a typo: the image filters would judge no image and keep every sample)."""
    lists = sorted({k for item in items if isinstance(item.record, dict)
                    for k, v in item.record.items() if isinstance(v, list) and v and k != recipe.image_key})
    return (f"dataset: none of the first {len(items)} records has images under image_key {recipe.image_key!r}, "
            f"yet {token_only} of their texts carry {recipe.image_special_token!r}: the image ops would judge "
            f"no image; set image_key to the field that lists each sample's images"
            + (f" (fields holding lists: {', '.join(map(str, lists[:5]))})" if lists else ""))
