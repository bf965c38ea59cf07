"""djx's semantic image deduplicator (Data-Juicer has none; NeMo Curator's SemDeDup is the model):
CLIP image embeddings as stats, then k-means clusters and, within each, near-duplicates by cosine."""
from __future__ import annotations

from typing import Iterable, Literal

from djx import Batch, Deduplicator, RecipeError, register_op
from djx.core.dedup.embeddings import EmbeddingIndex
from djx.core.dedup.key_rows import IndexSpace
from djx.core.models.oom import forward_with_backoff
from djx.core.run.breakdown import forward_timed, timed
from djx.ops.common.embeddings import EMBEDDING_KEY, decode_embedding, encode_embedding, sample_embedding
from djx.ops.common.model_op import OneModelOp, check_forward_batch
from djx.ops.common.pixels import processor_pixels
from djx.ops.common.prepared import PreparedPairs, join, split
from djx.ops.common.shapes import attention_without_plans, pad_rows
from djx.ops.filter.image_model_filter import OOM_IMAGE_REASON
from djx.ops.filter.per_image import decode_each_once
from djx.ops.filter.image_text_model_filter import ImageTextModelFilter, default_forward_batch
from djx.ops.models import load_host_side

SWEEP_THRESHOLDS = (0.85, 0.88, 0.9, 0.92, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99)


@register_op("image_semantic_deduplicator")
class ImageSemanticDeduplicator(OneModelOp, Deduplicator):
    """Drop samples whose images look the same to CLIP as an earlier sample's (re-encoded, resized,
    lightly edited copies), keeping the first in input order.

    Stat `image_embedding`: the CLIP image embedding (unit length, base64 of float16) of the sample;
    for several images, the mean of their embeddings (each distinct path once, order ignored) scaled
    to unit length; '' for a sample without images, which is never a duplicate. An image that cannot
    be decoded rejects its sample.

    The dedup phase cuts the embedded samples into `n_clusters` with k-means (unset: one per ~1,000
    samples; 1: compare every pair), and within a cluster a sample whose most similar earlier sample
    has a cosine >= `threshold` duplicates it; the first sample of such a chain is kept and named in
    the reason. `djx analyze` with the recipe shows how many samples each threshold would remove.
    `threshold` and `n_clusters` choose the verdict only: a run with new ones reuses the embeddings.
    """

    uses_images = True
    uses_text = False
    stats_keys = (EMBEDDING_KEY,)
    stat_shapes = {EMBEDDING_KEY: "digest"}
    verdict_params = ("threshold", "n_clusters")
    embeddings_from: str | None = None  # an earlier similarity filter writes the embeddings (link_earlier)
    model_kind = "hf_clip"
    path_params = ("hf_clip",)

    def __init__(self, hf_clip: str = "openai/clip-vit-base-patch32", threshold: float = 0.95,
                 n_clusters: int | None = None, trust_remote_code: bool = False,
                 dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32",
                 forward_batch_size: int | None = None, **common):
        super().__init__(**common)
        if not 0.0 < threshold <= 1.0:
            raise RecipeError(f"{self.name}.threshold: a cosine in (0, 1], got {threshold} "
                              f"(0.95 drops re-encoded and resized copies; lower drops looser look-alikes)")
        if n_clusters is not None and n_clusters < 1:
            raise RecipeError(f"{self.name}.n_clusters: must be >= 1 (or unset: one per ~1,000 samples)")
        check_forward_batch(self.name, forward_batch_size)
        self.hf_clip, self.threshold, self.n_clusters = hf_clip, threshold, n_clusters
        self.trust_remote_code, self.dtype, self.forward_batch_size = trust_remote_code, dtype, forward_batch_size

    @property
    def model_name(self) -> str:
        return self.hf_clip

    def link_earlier(self, earlier: list) -> None:
        """One forward for both: where the nearest earlier image_text_similarity_filter of the recipe
        runs the same CLIP on the same pixels with no mapper between them, it writes this op's
        embeddings as it scores, and this op embeds only the samples that come without one."""
        from djx import Mapper
        from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
        for op in reversed(earlier):
            if isinstance(op, Mapper):
                return
            if (isinstance(op, ImageTextSimilarityFilter) and op.spec == self.spec and op.embeds_as_host_does()
                    and op.image_key == self.image_key):
                op.write_embeddings(EMBEDDING_KEY)
                self.embeddings_from = op.name
                return

    # -- prepare (host: decode, the processor), score (where the model is), finish (the stats) ------
    def host_side(self, pool) -> tuple:
        """(processor, text length) of the CLIP, without its weights: what preparing needs."""
        return pool.host(("prepare", self.spec), lambda: load_host_side(self.spec))

    def prepare(self, batch: Batch, processor, todo=None) -> tuple[PreparedPairs, list]:
        """Decode each distinct image of the batch once and run the processor (uint8 pixels where it
        allows). Returns the prepared images (one `pair` each) and, per sample, its image rows
        (None: rejected, or not in `todo`, the samples to embed when not all)."""
        images, plan = decode_each_once(batch, distinct=True, only=todo)
        with timed(batch.counters, "preprocess"):
            pixels, table = processor_pixels(processor.image_processor, images) if images else (None, None)
        return PreparedPairs(pixels, [], [(0, j) for j in range(len(images))], table), plan

    def score_parts(self, loaded, parts: list[PreparedPairs], fault=(), counters: dict | None = None) -> list:
        """Each part's image embeddings (unit length; None where even one image ran out of memory),
        the parts' images in shared forwards of `forward_batch_size`."""
        import torch
        joined = getattr(parts, "assembled", None) or join(parts)

        def encode(rows):
            pixels = pad_rows(ImageTextModelFilter.pixel_rows(loaded, joined, rows, counters))  # shapes.py
            pooled = loaded.model.vision_model(pixel_values=pixels).pooler_output[:len(rows)]
            feats = loaded.model.visual_projection(pooled)
            return list(torch.nn.functional.normalize(feats.float(), dim=-1).cpu().numpy())

        size = self.forward_batch_size or default_forward_batch(loaded.device)
        with attention_without_plans(loaded.device):  # no attention plan built per shape (shapes.py)
            vectors = forward_with_backoff(encode, list(range(joined.n_images)), size, loaded.device, fault, counters)
        return split(vectors, parts)

    def assemble_parts(self, parts: list[PreparedPairs]) -> PreparedPairs:
        return join(parts)

    def compute_stats(self, batch: Batch) -> None:
        todo = None
        if self.embeddings_from:  # the similarity filter before wrote the embeddings of the samples it scored
            todo = {i for i, s in enumerate(batch.samples) if EMBEDDING_KEY not in batch.stats(s)}
            if not todo:
                return
        scorer = batch.pool.scorer() if hasattr(batch.pool, "scorer") else None
        if scorer is None:  # the model is here
            loaded = batch.pool.get(self.spec)
            prepared, plan = self.prepare(batch, loaded.processor, todo)
        else:  # scoring: device: prepared here, embedded by the device's scorer
            prepared, plan = self.prepare(batch, self.host_side(batch.pool)[0], todo)
        vectors = []
        if prepared.pairs and scorer is not None:
            with timed(batch.counters, "wait"):
                vectors = scorer.score(self, prepared, batch.ctx.fault, batch.counters)
        elif prepared.pairs:
            import torch
            with torch.inference_mode():
                vectors = forward_timed(lambda: self.score_parts(loaded, [prepared], batch.ctx.fault,
                                                                 batch.counters)[0], batch.counters)
        for i, rows in enumerate(plan):
            if rows is None:
                continue
            got = [vectors[j] for j in rows]
            if any(v is None for v in got):
                batch.reject(i, OOM_IMAGE_REASON, "oom")
            else:
                batch.stats(batch.samples[i])[EMBEDDING_KEY] = encode_embedding(sample_embedding(got)) if got else ""

    def index(self, space: IndexSpace) -> EmbeddingIndex:
        return EmbeddingIndex(lambda stats: decode_embedding(stats[EMBEDDING_KEY]), self.threshold,
                              self.n_clusters, space)

    def threshold_sweep(self, samples: Iterable[tuple[int, dict]], thresholds: Iterable[float] | None = None,
                        space: IndexSpace = IndexSpace()) -> dict[float, int]:
        """How many of `samples` ((position, stats) of those that reached this op) each threshold
        would remove, with this op's clusters (default: SWEEP_THRESHOLDS and the op's own)."""
        index = self.index(space)
        try:
            for pos, stats in samples:
                index.add(pos, stats)
            return index.removed_at(sorted({*(thresholds or SWEEP_THRESHOLDS), self.threshold}))
        finally:
            index.close()
