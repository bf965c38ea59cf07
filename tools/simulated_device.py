"""A plug-in for tools/bench_throughput.py: a device of known speed, so a CPU machine can measure
whether the execution shape keeps a device busy.

`simulated_device_clip_filter` prepares exactly as image_text_similarity_filter does (decode, the
model's processor and tokenizer, in the workers) and, where it scores (the device's scorer with
`scoring: device`), waits `seconds_per_pair` for every pair it is given, outside the interpreter
lock, as a GPU's forward does: one scorer thread then sustains exactly 1 / seconds_per_pair pairs/s.
Its scores are the pairs' cosine of nothing (0.5): it measures time, not matching. With
`jpeg_files: true` it prepares as `image_decode: device` does (the JPEG files' bytes, no decode on
the host), on any machine: what the host moves when the device decodes.

    custom_ops: [tools/simulated_device.py]
    process: [{simulated_device_clip_filter: {hf_clip: ..., seconds_per_pair: 0.001, min_score: 0}}]
"""
from __future__ import annotations

import time

from djx import register_op
from djx.ops.common.prepared import row_pieces
from djx.ops.filter.image_text_model_filter import GPU_FORWARD_BATCH
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter


@register_op("simulated_device_clip_filter")
class SimulatedDeviceClip(ImageTextSimilarityFilter):
    def __init__(self, seconds_per_pair: float = 0.0, forward_batch_size: int = GPU_FORWARD_BATCH,
                 jpeg_files: bool = False, **kw):
        super().__init__(forward_batch_size=forward_batch_size, **kw)
        self.seconds_per_pair = seconds_per_pair
        if jpeg_files:  # prepare as image_decode: device does (the files' bytes), on any machine
            self.image_decode = "device"  # past the constructor's check: this device needs no decoders

    def warm_device(self, loaded) -> None:
        """The simulated device imports no decoders."""

    @staticmethod
    def ready_parts(loaded, joined, counters=None):
        """JPEG files (image_decode: device) are the device's to decode: nothing here."""

    def score(self, loaded, prepared, fault=(), counters=None):
        # what a GPU's scorer does on its CPU for each forward of a GPU's size: take the forward's
        # pixel rows and pad its texts (the transfer and the forward are the device's)
        def pixels(rows):
            row_pieces(prepared.pixels, rows[0], rows[-1] + 1)  # each piece then goes to the device
            return [None] * len(rows)

        def texts(rows):
            self.token_rows(loaded, prepared, rows)
            return [None] * len(rows)
        if prepared.pixels is not None:
            self.forward(pixels, list(range(prepared.n_images)), loaded, fault, counters)
        self.forward(texts, list(range(len(prepared.tokens))), loaded, fault, counters)
        if self.seconds_per_pair > 0:
            time.sleep(self.seconds_per_pair * len(prepared.pairs))  # the device at work; the GIL is free
        return [0.5] * len(prepared.pairs)
