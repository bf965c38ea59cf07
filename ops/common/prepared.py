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
    `geometry` the processor's resize and crop (ops/common/device_decode.py), `jpeg_orientations`
    their EXIF orientations."""
    pixels: object
    tokens: list[list[int]]
    pairs: list[tuple[int, int]]
    pixel_table: object = None
    jpegs: list = field(default_factory=list)
    jpeg_rows: list[int] = field(default_factory=list)
    geometry: object = None
    jpeg_orientations: list[int] = field(default_factory=list)

    @property
    def n_images(self) -> int:
        return (0 if self.pixels is None else int(self.pixels.shape[0])) + len(self.jpegs)

    def __getstate__(self) -> dict:
        # the JPEG files pickled as bytes (Ray's object store, a scorer without a shared buffer):
        # torch's own pickling of a tensor costs ~150 us to rebuild each, bytes ~5 us
        import torch
        state = dict(self.__dict__)
        if isinstance(self.jpegs, list) and self.jpegs and all(isinstance(t, torch.Tensor) for t in self.jpegs):
            state["jpegs"] = [t.numpy().tobytes() for t in self.jpegs]
        return state

    def __setstate__(self, state: dict) -> None:
        jpegs = state.get("jpegs")
        if isinstance(jpegs, list) and jpegs and all(isinstance(b, bytes) for b in jpegs):
            import torch
            state = dict(state, jpegs=[torch.frombuffer(bytearray(b), dtype=torch.uint8) if b else
                                       torch.empty(0, dtype=torch.uint8) for b in jpegs])
        self.__dict__.update(state)


class RowStack:
    """Row tensors of several batches, stacked without a copy. `stack[a:b]` gives rows a..b-1: a view
    where they lie in one part, else a copy of those rows only (one forward's), where torch.cat of
    every part would copy each joined batch's pixels once more before any forward (a third of the
    scorer's time, measured by tools/bench_scorer.py)."""

    def __init__(self, parts: list):
        self.parts = parts
        self.starts = [0]
        for p in parts:
            self.starts.append(self.starts[-1] + int(p.shape[0]))

    @property
    def shape(self) -> tuple:
        return (self.starts[-1], *self.parts[0].shape[1:])

    @property
    def dtype(self):
        return self.parts[0].dtype

    def __len__(self) -> int:
        return self.starts[-1]

    def pieces(self, start: int, stop: int) -> list:
        """Rows start..stop-1 as views of the parts they lie in (no copy)."""
        return [part[max(start, first) - first:min(stop, end) - first]
                for part, first, end in zip(self.parts, self.starts, self.starts[1:]) if first < stop and start < end]

    def __getitem__(self, rows: slice):
        import torch
        start, stop, step = rows.indices(self.starts[-1])
        if step != 1:
            raise IndexError("RowStack takes consecutive rows")
        pieces = self.pieces(start, stop)
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces) if pieces else self.parts[0][:0]

    def to(self, *args, **kwargs):
        """Every row as one tensor, moved (e.g. to the model's device)."""
        import torch
        return torch.cat([p.to(*args, **kwargs) for p in self.parts])


def row_pieces(pixels, start: int, stop: int) -> list:
    """Rows start..stop-1 of prepared pixels (a tensor or a RowStack) as views, without a copy."""
    return pixels.pieces(start, stop) if isinstance(pixels, RowStack) else [pixels[start:stop]]


def join(parts: list[PreparedPairs]) -> PreparedPairs:
    """One PreparedPairs scoring every part's pairs (rows offset part by part; the pixels stacked
    without a copy: RowStack). uint8 parts stay
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
        out.jpeg_orientations.extend(p.jpeg_orientations or [1] * len(p.jpegs))
        if p.pixels is not None:
            keep = table is not None or p.pixel_table is None
            pixels.append(p.pixels if keep else to_model(p.pixels, p.pixel_table, "cpu", torch.float32))
        images += p.n_images
    out.pixels = (RowStack(pixels) if len(pixels) > 1 else pixels[0]) if pixels else None
    return out


class PairScores(list):
    """Pair scores with, where an op asked for them, per image row outputs (`images`: e.g. the
    image embeddings the similarity filter computed on its way, for a semantic deduplicator)."""
    images: list | None = None


def split(scores: list, parts: list[PreparedPairs]) -> list[list]:
    """The scores of a joined PreparedPairs, handed back part by part (with their images' outputs)."""
    out, at, row = [], 0, 0
    images = getattr(scores, "images", None)
    for p in parts:
        piece = scores[at:at + len(p.pairs)]
        if images is not None:
            piece = PairScores(piece)
            piece.images = images[row:row + p.n_images]
        out.append(piece)
        at += len(p.pairs)
        row += p.n_images
    return out
