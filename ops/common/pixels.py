"""Prepared pixels as uint8, rescaled and normalised where the model is.

An image processor (CLIP's, BLIP's) resizes and crops an RGB image, then rescales it (x / 255) and
normalises it ((x - mean) / std) into float32. Resizing and cropping a uint8 image leave uint8
values, so the host can stop there: `processor_pixels` runs the processor with do_rescale=False
and do_normalize=False and keeps the uint8 pixels (a quarter of the float32 bytes to hand to the
scorer), with a value table: for each channel and each of the 256 values, the float32 that the
processor's own rescale and normalisation give. The table is made by the processor itself, from a
16x16 image holding every value once, so it follows that processor's arithmetic exactly (the PIL
backend rescales in float64 then normalises in float32; others fuse the two). `to_model` looks the
uint8 pixels up in the table on the model's device: the same float32 values as the processor's
full output, bit for bit.

Where the processor does not give integral pixels in 0..255 without its rescale and normalisation,
or its table does not reproduce its full output on the first images it sees, the pixels stay the
processor's float32 output (table None), as before.
"""
from __future__ import annotations

import weakref

import numpy as np

_verdicts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # processor -> its table, or False


def processor_pixels(image_processor, images: list):
    """(pixels, table) for `images` (RGB PIL images): uint8 pixels and their value table where the
    processor allows it, else its float32 pixels and None."""
    import torch
    verdict = _verdicts.get(image_processor)
    if verdict is None:
        verdict = _verdicts[image_processor] = _check(image_processor, images[:4])
    if verdict is not False:
        raw = _raw(image_processor, images)
        if raw is not None:
            return raw, verdict
    full = image_processor(images, return_tensors="pt")["pixel_values"]
    return full if isinstance(full, torch.Tensor) else torch.as_tensor(np.asarray(full)), None


def value_table(image_processor):
    """The processor's value table where its pixels can travel as uint8 (checked against its full
    output on the images it has seen, else on a probe image); None where they cannot."""
    verdict = _verdicts.get(image_processor)
    if verdict is None:
        probe = np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8)
        from PIL import Image
        verdict = _verdicts[image_processor] = _check(image_processor, [Image.fromarray(probe)])
    return None if verdict is False else verdict


def to_model(pixels, table, device, dtype):
    """The model's input from prepared pixels: looked up in `table` on `device` where they are
    uint8, then cast to `dtype` (float pixels are only moved and cast)."""
    import torch
    if table is None:
        return pixels.to(device, dtype)
    pixels = pixels.to(device)
    table = table.to(device)
    channels = table.shape[0]
    offsets = (torch.arange(channels, device=device) * 256).view(1, channels, 1, 1)
    return table.reshape(-1)[pixels.long() + offsets].to(dtype)


def same_table(a, b) -> bool:
    import torch
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(torch.equal(a, b))


def _raw(image_processor, images):
    """The processor's pixels without rescale and normalisation, as uint8; None where it refuses
    or they are not integral values in 0..255."""
    import torch
    try:
        out = image_processor(images, do_rescale=False, do_normalize=False, return_tensors="pt")["pixel_values"]
    except (TypeError, ValueError, KeyError, NotImplementedError):
        return None
    if not isinstance(out, torch.Tensor) or out.dim() != 4:
        return None
    if out.dtype == torch.uint8:
        return out
    if not out.is_floating_point() and out.dtype not in (torch.int16, torch.int32, torch.int64):
        return None
    if out.numel() and (out.min() < 0 or out.max() > 255 or not bool(torch.equal(out, out.round()))):
        return None
    return out.to(torch.uint8)


def _table(image_processor):
    """(channels, 256) float32: the processor's rescaled and normalised value of each uint8 value,
    made by the processor from an image holding every value once; None where it cannot."""
    from PIL import Image
    probe = Image.fromarray(np.repeat(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), 3, axis=2))
    kw = {"do_resize": False}
    if hasattr(image_processor, "do_center_crop"):
        kw["do_center_crop"] = False
    try:
        out = image_processor([probe], return_tensors="pt", **kw)["pixel_values"]
    except (TypeError, ValueError, KeyError, NotImplementedError):
        return None
    if out.dim() != 4 or tuple(out.shape[2:]) != (16, 16) or out.dtype != _float32():
        return None
    return out[0].reshape(out.shape[1], 256).contiguous()


def _check(image_processor, images):
    """The processor's value table where uint8 pixels looked up in it equal its full output on
    `images` exactly; False otherwise (its pixels then stay float)."""
    import torch
    table = _table(image_processor)
    raw = _raw(image_processor, images) if table is not None else None
    if raw is None or raw.shape[1] != table.shape[0]:
        return False
    full = image_processor(images, return_tensors="pt")["pixel_values"]
    looked_up = to_model(raw, table, "cpu", torch.float32)
    return table if full.shape == looked_up.shape and bool(torch.equal(full, looked_up)) else False


def _float32():
    import torch
    return torch.float32


GROUP_BYTES = 256 << 20  # decoded RGB a batch's images hold before the processor makes their pixels


class PixelRows:
    """The processor's pixels of a batch's decoded images, made a group at a time as they decode
    (a group: up to GROUP_BYTES of RGB), each group's full-size images released (`release(ref)`)
    once its pixels are made: a batch of 12-megapixel photos holds one group decoded, not the whole
    batch. The rows come out in the order the images were added, as one processor call gives them."""

    def __init__(self, image_processor, release):
        self.image_processor, self.release = image_processor, release
        self.pending, self.refs, self.done, self.table, self.bytes = [], [], [], None, 0

    def add(self, ref: str, image) -> None:
        """Take `image` (its row comes next). Returns None: a caller keeps nothing of the image,
        whose pixels are made here (holding it would keep its full size past its group)."""
        self.pending.append(image)
        self.refs.append(ref)
        self.bytes += image.width * image.height * 3
        if self.bytes >= GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            pixels, self.table = processor_pixels(self.image_processor, self.pending)
            self.done.append(pixels)
            for ref in self.refs:
                self.release(ref)
            self.pending, self.refs, self.bytes = [], [], 0

    def pixels(self):
        """(pixels of every image added, their table or None); (None, None) when none was."""
        import torch
        self._flush()
        if not self.done:
            return None, None
        return (self.done[0] if len(self.done) == 1 else torch.cat(self.done)), self.table
