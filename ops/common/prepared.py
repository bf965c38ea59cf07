"""A batch's host-side work for an image-text model op, ready to score anywhere.

An image-text model filter runs in three steps: `prepare` (on the host, where the batch is: split
the texts into chunks, decode the images, the model's own processor and tokenizer), `score` (where
the model is: forwards and similarities, from the prepared tensors alone) and `finish` (back on the
batch: reduce each chunk's scores and set the stats). What `prepare` hands to `score` is plain
tensors and lists, no images and no batch, so batches prepared by different workers can be joined
and scored together (`join`) and their scores handed back (`split`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PreparedPairs:
    """Distinct images and texts of one or more batches, and the (text, image) pairs to score.

    `pixels`: the processor's pixel tensor, one row per distinct image (None when there is none);
    `tokens`: per distinct text, its token ids, truncated to the model's length, unpadded (padding
    is done per forward, exactly as the tokenizer pads a list); `pairs`: (text row, image row)."""
    pixels: object
    tokens: list[list[int]]
    pairs: list[tuple[int, int]]

    @property
    def n_images(self) -> int:
        return 0 if self.pixels is None else int(self.pixels.shape[0])


def join(parts: list[PreparedPairs]) -> PreparedPairs:
    """One PreparedPairs scoring every part's pairs (rows offset part by part)."""
    import torch
    tokens, pairs, pixels = [], [], []
    images = 0
    for p in parts:
        pairs.extend((t + len(tokens), i + images) for t, i in p.pairs)
        tokens.extend(p.tokens)
        if p.pixels is not None:
            pixels.append(p.pixels)
        images += p.n_images
    return PreparedPairs(torch.cat(pixels) if pixels else None, tokens, pairs)


def split(scores: list, parts: list[PreparedPairs]) -> list[list]:
    """The scores of a joined PreparedPairs, handed back part by part."""
    out, at = [], 0
    for p in parts:
        out.append(scores[at:at + len(p.pairs)])
        at += len(p.pairs)
    return out
