"""Shared machinery of the filters that score each image alone with a model (aesthetics, NSFW,
watermark): one value per distinct image path of a sample, in the order of first listing (Data-
Juicer's: a path listed twice is scored once), kept or dropped with Data-Juicer's any_or_all.

Each distinct image of a batch is decoded once (the batch's images, shared with the other image
ops of the recipe) and goes through the model once, in forwards of `forward_batch_size` with CUDA
OOM back-off. An image that cannot be read rejects its sample with the file named.
"""
from __future__ import annotations

from typing import Literal

from djx import Batch, DjxError, RangeFilter
from djx.core.models.oom import forward_with_backoff
from djx.ops.filter.image_text_model_filter import default_forward_batch
from djx.ops.common.model_op import OneModelOp, check_forward_batch
from djx.ops.filter.per_image import decode_each_once

OOM_IMAGE_REASON = "CUDA out of memory even for a single image (batch halved down to 1)"


class ImageModelFilter(OneModelOp, RangeFilter):
    """Base: `score(loaded, pixels)` gives one float per image; the stat is their list."""

    uses_text = False
    uses_images = True

    def __init__(self, trust_remote_code: bool = False, any_or_all: Literal["any", "all"] = "any",
                 dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32",
                 forward_batch_size: int | None = None, **common):
        super().__init__(**common)
        check_forward_batch(self.name, forward_batch_size)
        self.trust_remote_code, self.any_or_all = trust_remote_code, any_or_all
        self.dtype, self.forward_batch_size = dtype, forward_batch_size

    @property
    def stat(self) -> str:
        return self.stats_keys[0]

    @property
    def stat_shapes(self) -> dict[str, str]:
        return {self.stat: "per_distinct_image"}

    def score(self, loaded, pixels) -> list[float]:
        """One score per image of `pixels` (the processor's tensor on the model's device)."""
        raise NotImplementedError

    # -- the filter -------------------------------------------------------------------------
    def compute_stats(self, batch: Batch) -> None:
        images, plan = decode_each_once(batch, distinct=True)  # one value per distinct path, as Data-Juicer
        scores = self._score_all(batch, images) if images else []
        for i, idx in enumerate(plan):
            if idx is None:
                continue
            values = [scores[j] for j in idx]
            if any(v is None for v in values):
                batch.reject(i, OOM_IMAGE_REASON, "oom")
            else:
                batch.stats(batch.samples[i])[self.stat] = values

    def _score_all(self, batch: Batch, images: list) -> list:
        import torch
        loaded = batch.pool.get(self.spec)

        def run(chunk):
            pixels = loaded.processor(images=chunk, return_tensors="pt")["pixel_values"]
            return self.score(loaded, pixels.to(loaded.device, loaded.dtype))

        size = self.forward_batch_size or default_forward_batch(loaded.device)
        with torch.inference_mode():
            return forward_with_backoff(run, images, size, loaded.device, batch.ctx.fault, batch.counters)

    def keep(self, stats: dict) -> bool:
        low, high = self.bounds()
        return self.keep_values(stats[self.stat], low, high, self.any_or_all)

    def bounds(self) -> tuple[float, float]:
        """The closed range of a kept image's score."""
        return self.min_score, self.max_score

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason(self.stat, stats[self.stat], *self.bounds(), "min_score", "max_score",
                            self.any_or_all)


def class_one_probability(loaded, pixels) -> list[float]:
    """Data-Juicer's image-classifier score: softmax over the labels, the probability of label 1."""
    import torch
    logits = loaded.model(pixel_values=pixels).logits.float()
    if logits.shape[-1] < 2:
        raise DjxError(f"the classifier gives {logits.shape[-1]} label(s); label 1's probability needs two or more")
    return [float(p) for p in torch.softmax(logits, dim=-1)[:, 1]]
