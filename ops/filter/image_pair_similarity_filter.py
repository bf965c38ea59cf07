"""image_pair_similarity_filter: the CLIP cosine between a sample's two images (Data-Juicer's op).

The stat is `image_pair_similarity`: a list of one value, the cosine of the two images' CLIP image
features (`get_image_features`, no flips). Data-Juicer requires exactly two images with different
paths and raises for any other sample (none, one, three, or one path twice); djx rejects such a
sample with that reason (code `image_count`) and the run goes on. The model is the pool's
`hf_clip` copy: image_text_similarity_filter on the same CLIP and dtype shares it.
"""
from __future__ import annotations

from typing import Literal

from djx import Batch, RangeFilter, RecipeError, SampleError, register_op
from djx.core.models.oom import OOM_REASON, forward_with_backoff
from djx.ops.filter.image_text_model_filter import _image_side, default_forward_batch
from djx.ops.common.model_op import OneModelOp, check_forward_batch

IMAGE_COUNT = "image_count"  # rejection code: a sample without exactly two distinct images


@register_op("image_pair_similarity_filter")
class ImagePairSimilarityFilter(OneModelOp, RangeFilter):
    """Keep samples whose two images' CLIP cosine similarity is within [min_score, max_score].

    Each sample must hold exactly two images with different paths (else it is rejected with the
    reason). dtype: float32 (default, Data-Juicer's numerics), bfloat16, float16 or auto; the
    images of a batch are encoded together, `forward_batch_size` per forward, halved on CUDA OOM.
    """

    stats_keys = ("image_pair_similarity",)
    stat_ranges = {"image_pair_similarity": (-1.0001, 1.0001)}  # a cosine (and float rounding)
    uses_text = False
    uses_images = True
    path_params = ("hf_clip",)
    model_kind = "hf_clip"

    def __init__(self, hf_clip: str = "openai/clip-vit-base-patch32", trust_remote_code: bool = False,
                 min_score: float = 0.1, max_score: float = 1.0, any_or_all: Literal["any", "all"] = "any",
                 dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32",
                 forward_batch_size: int | None = None, draft_decode: bool = False, **common):
        super().__init__(**common)
        for name, value in (("min_score", min_score), ("max_score", max_score)):
            if value is not None and not 0 <= value <= 1:  # Data-Juicer's ClosedUnitInterval; None: no bound
                raise RecipeError(f"{self.name}.{name}: must be within [0, 1], got {value}")
        check_forward_batch(self.name, forward_batch_size)
        self.hf_clip, self.trust_remote_code, self.dtype = hf_clip, trust_remote_code, dtype
        self.min_score, self.max_score, self.any_or_all = min_score, max_score, any_or_all
        self.forward_batch_size, self.draft_decode = forward_batch_size, draft_decode

    @property
    def model_name(self) -> str:
        return self.hf_clip

    def compute_stats(self, batch: Batch) -> None:
        loaded = batch.pool.get(self.spec)
        target = _image_side(loaded.processor) if self.draft_decode else 0
        images, image_ids, plan = [], {}, []
        for i, sample in enumerate(batch.samples):
            refs = batch.image_refs(sample)
            try:
                if len(refs) != 2 or refs[0] == refs[1]:
                    raise SampleError(_pair_reason(refs), IMAGE_COUNT)
                for ref in refs:
                    if ref not in image_ids:
                        image = batch.images.rgb(ref, target)  # raises for an image that does not read
                        image_ids[ref] = len(images)
                        images.append(image)
            except SampleError as e:
                batch.reject(i, str(e), e.code)
                continue
            plan.append((i, image_ids[refs[0]], image_ids[refs[1]]))
        if not plan:
            return
        import torch
        with torch.inference_mode():
            feats = forward_with_backoff(lambda chunk: _encode(loaded, chunk), images,
                                         self.forward_batch_size or default_forward_batch(loaded.device),
                                         loaded.device, batch.ctx.fault, batch.counters)
        for i, a, b in plan:
            if feats[a] is None or feats[b] is None:
                batch.reject(i, OOM_REASON, "oom")
            else:
                cosine = torch.cosine_similarity(feats[a][None], feats[b][None], dim=1)
                batch.stats(batch.samples[i])[self.stats_keys[0]] = [float(cosine[0])]

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats[self.stats_keys[0]], self.min_score, self.max_score, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason(self.stats_keys[0], stats[self.stats_keys[0]], self.min_score, self.max_score,
                            "min_score", "max_score", self.any_or_all)


def _encode(loaded, images: list) -> list:
    """CLIP image features (visual projection of the pooled output, as get_image_features), one
    float32 row per image, on the host."""
    pixels = loaded.processor.image_processor(images, return_tensors="pt")["pixel_values"]
    out = loaded.model.vision_model(pixel_values=pixels.to(loaded.device, loaded.dtype))
    return list(loaded.model.visual_projection(out.pooler_output).float().cpu())


def _pair_reason(refs: list) -> str:
    if len(refs) == 2:
        return f"image_pair_similarity_filter needs two different images; both are {refs[0]!r}"
    return f"image_pair_similarity_filter needs exactly two images, got {len(refs)}"
