"""Before a run resumes: are the images its written samples were judged on still the same files?

The fingerprint a resume compares covers the recipe, the input files, the code and the models, not
the images the records name: hashing every image of a dataset at each start would cost more than
some runs. Without a check, images re-exported between a kill and the resume (resized, replaced)
give an export that mixes verdicts on the old and the new files, which `djx check` cannot see.

Each sample an image op judged carries, signed, the size and mtime of its images as they were
(provenance.image_stamps). The resume reads up to SAMPLES records spread evenly over the kept and
dropped parts so far and stats their images again: a size or mtime that differs, or an image gone,
refuses the resume. A sample of the run, not all of it: a wholesale change (a folder re-exported,
moved away, a disk not mounted) is seen; one image edited in a million may not be.
"""
from __future__ import annotations

import json
import os

from djx.core.errors import ResumeError
from djx.core.io.image_paths import is_remote
from djx.core.run.provenance import PROVENANCE_KEY

SAMPLES = 64            # records read per part file, at most
MAX_LINE = 16 << 20     # bytes of one record read at most (a longer one is skipped)


def changed_images(parts: dict[str, int], export_dir: str, image_keys: list[str]) -> str:
    """`parts`: each part file and its length at the last checkpoint. What changed, in words (e.g.
    "3 of 40 images checked differ, the first images/a.jpg: 1,204 bytes now, 2,311 then"), or ""."""
    checked, changed, first = 0, 0, ""
    for path, length in parts.items():
        for rec in _spread(path, length):
            for ref, then in _images(rec, image_keys):
                checked += 1
                now = _stamp(ref if os.path.isabs(ref) else os.path.join(export_dir, ref))
                if now != then[:2]:
                    changed += 1
                    first = first or _said(ref, now, then)
    return f"{changed} of {checked} images checked differ, the first {first}" if changed else ""


def _spread(path: str, length: int):
    """Up to SAMPLES records of the part's first `length` bytes, at evenly spaced offsets."""
    try:
        f = open(path, "rb")
    except OSError:
        return
    with f:
        seen = set()
        for i in range(min(SAMPLES, max(length, 0))):
            f.seek(length * i // SAMPLES)
            if i:
                f.readline(MAX_LINE)  # the rest of the record the offset fell in
            start = f.tell()
            line = f.readline(MAX_LINE)
            if start >= length or start in seen or not line.endswith(b"\n"):
                continue
            seen.add(start)
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                yield rec


def _images(rec: dict, image_keys: list[str]):
    """(path as written, stamp then) of each local image of `rec` an image op stamped."""
    prov = rec.get(PROVENANCE_KEY)
    stamps = prov.get("images") if isinstance(prov, dict) else None
    if not isinstance(stamps, list):
        return
    for key in image_keys:
        refs = rec.get(key)
        if isinstance(refs, list) and len(refs) == len(stamps):
            for ref, then in zip(refs, stamps):
                if isinstance(ref, str) and not is_remote(ref) and isinstance(then, list) and len(then) >= 2:
                    yield ref, then
            return


def _stamp(path: str) -> list | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_size, st.st_mtime_ns]


def _said(ref: str, now: list | None, then: list) -> str:
    if now is None:
        return f"{ref}: gone"
    if now[0] != then[0]:
        return f"{ref}: {now[0]:,} bytes now, {then[0]:,} then"
    return f"{ref}: modified since"


def refuse_changed_images(writer, manifest: dict, ops: list, image_key: str) -> None:
    """A ResumeError when the images of the samples written so far (`writer`'s parts at `manifest`'s
    checkpoint) changed since they were judged; nothing when no op reads images."""
    keys = list(dict.fromkeys(op.image_key or image_key for op in ops if op.uses_images))
    lengths = manifest.get("lengths") or {}
    parts = {writer.part(kind): lengths.get(kind, 0) for kind in ("kept", "dropped")}
    what = changed_images(parts, os.path.dirname(writer.paths.export), keys) if keys else ""
    if what:
        raise ResumeError(f"{writer.paths.state_dir} holds an unfinished run whose images changed since it judged "
                          f"them ({what}): resumed, its outputs would mix verdicts on the old and the new images; "
                          f"put the images back, or run again with --restart to start over")
