"""A batch's host-side work for an image-text model op, ready to score anywhere.

An image-text model filter runs in three steps: `prepare` (on the host, where the batch is: split
the texts into chunks, decode the images, the model's own processor and tokenizer), `score` (where
the model is: forwards and similarities, from the prepared tensors alone) and `finish` (back on the
batch: reduce each chunk's scores and set the stats). What `prepare` hands to `score` is plain
tensors and lists, no images and no batch, so batches prepared by different workers can be joined
and scored together (`join`) and their scores handed back (`split`).

The pixels travel as uint8 where the processor allows it, with the value table that rescales and
normalises them on the model's device (ops/common/pixels.py): a quarter of the float32 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PreparedPairs:
    """Distinct images and texts of one or more batches, and the (text, image) pairs to score.

    `pixels`: the processor's pixel tensor, one row per distinct image (None when there is none);
    `tokens`: per distinct text, its token ids, truncated to the model's length, unpadded (padding
    is done per forward, exactly as the tokenizer pads a list); `pairs`: (text row, image row);
    `pixel_table`: where `pixels` are uint8, the (channels, 256) float32 table of the processor's
    rescaled and normalised values (None: `pixels` are the processor's float output).
    With `image_decode: device`: `jpegs`, JPEG files' bytes (1-D uint8 tensors) to decode where the
    model is, `jpeg_rows` their image rows (`pixels` holds the other rows, in order) and
    `geometry` the processor's resize and crop (ops/common/device_decode.py)."""
    pixels: object
    tokens: list[list[int]]
    pairs: list[tuple[int, int]]
    pixel_table: object = None
    jpegs: list = field(default_factory=list)
    jpeg_rows: list[int] = field(default_factory=list)
    geometry: object = None

    @property
    def n_images(self) -> int:
        return (0 if self.pixels is None else int(self.pixels.shape[0])) + len(self.jpegs)


def join(parts: list[PreparedPairs]) -> PreparedPairs:
    """One PreparedPairs scoring every part's pairs (rows offset part by part). uint8 parts stay
    uint8 where they share one value table; beside float parts they are looked up on the host.
    Raises ValueError for uint8 parts with different tables (different normalisations)."""
    import torch
    from djx.ops.common.pixels import same_table, to_model
    with_pixels = [p for p in parts if p.n_images]
    tables = [p.pixel_table for p in with_pixels if p.pixel_table is not None]
    if any(not same_table(tables[0], t) for t in tables[1:]):
        raise ValueError("cannot join prepared pixels with different normalisations (value tables)")
    table = tables[0] if tables and len(tables) == len(with_pixels) else None
    geometries = {repr(p.geometry) for p in parts if p.jpegs}
    if len(geometries) > 1 or (geometries and table is None):
        raise ValueError("cannot join JPEGs to decode with different geometries or beside float pixels")
    out = PreparedPairs(None, [], [], table, geometry=next((p.geometry for p in parts if p.jpegs), None))
    pixels, images = [], 0
    for p in parts:
        out.pairs.extend((t + len(out.tokens), i + images) for t, i in p.pairs)
        out.tokens.extend(p.tokens)
        out.jpegs.extend(p.jpegs)
        out.jpeg_rows.extend(r + images for r in p.jpeg_rows)
        if p.pixels is not None:
            keep = table is not None or p.pixel_table is None
            pixels.append(p.pixels if keep else to_model(p.pixels, p.pixel_table, "cpu", torch.float32))
        images += p.n_images
    out.pixels = torch.cat(pixels) if pixels else None
    return out


def split(scores: list, parts: list[PreparedPairs]) -> list[list]:
    """The scores of a joined PreparedPairs, handed back part by part."""
    out, at = [], 0
    for p in parts:
        out.append(scores[at:at + len(p.pairs)])
        at += len(p.pairs)
    return out
