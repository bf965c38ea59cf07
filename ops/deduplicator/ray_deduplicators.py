"""Data-Juicer's Ray deduplicators under their own names: the same groups as the local ops (the
first sample of each kept), so a Ray recipe runs unchanged on either djx engine. Their Ray-only
settings (where the hash sets live, how many union-find actors, batch sizes, memory) are accepted
and unused: djx's dedup phase decides with its own bounded-memory indexes."""
from typing import Literal

from djx import register_op
from djx.ops.deduplicator.document_deduplicator import DocumentDeduplicator
from djx.ops.deduplicator.document_minhash_deduplicator import DocumentMinhashDeduplicator
from djx.ops.deduplicator.image_deduplicator import ImageDeduplicator


@register_op("ray_document_deduplicator")
class RayDocumentDeduplicator(DocumentDeduplicator):
    """document_deduplicator under Data-Juicer's Ray name (backend, redis_address, dedup_set_num: unused)."""

    def __init__(self, backend: Literal["ray_actor", "redis"] = "ray_actor",
                 redis_address: str = "redis://localhost:6379", dedup_set_num: int | str = "auto",
                 lowercase: bool = False, ignore_non_character: bool = False, **common):
        super().__init__(lowercase=lowercase, ignore_non_character=ignore_non_character, **common)


@register_op("ray_image_deduplicator")
class RayImageDeduplicator(ImageDeduplicator):
    """image_deduplicator under Data-Juicer's Ray name (no consider_text there; backend, redis_address: unused)."""

    def __init__(self, backend: Literal["ray_actor", "redis"] = "ray_actor",
                 redis_address: str = "redis://localhost:6379",
                 method: Literal["phash", "dhash", "whash", "ahash"] = "phash", **common):
        super().__init__(method=method, **common)


@register_op("ray_bts_minhash_deduplicator")
class RayBtsMinhashDeduplicator(DocumentMinhashDeduplicator):
    """document_minhash_deduplicator under Data-Juicer's Ray name (union-find, batch, memory settings: unused)."""

    def __init__(self, tokenization: Literal["space", "punctuation", "character", "sentencepiece"] = "space",
                 window_size: int = 5, lowercase: bool = True, ignore_pattern: str | None = None,
                 num_permutations: int = 256, jaccard_threshold: float = 0.7, num_bands: int | None = None,
                 num_rows_per_band: int | None = None, tokenizer_model: str | None = None,
                 union_find_parallel_num: int | str = "auto", union_threshold: int | None = 256,
                 max_pending_edge_buffer_task: int | None = 20, num_edge_buffer_task_returns: int | None = 10,
                 max_pending_filter_tasks: int | None = 20, num_filter_task_returns: int | None = 10,
                 merge_batch_size: int | None = 1000, minhash_batch_size: int | str | None = "auto",
                 memory_per_sample: float | None = 0.1, actor_memory: int | None = None,
                 task_memory: int | None = None, **common):
        super().__init__(tokenization=tokenization, window_size=window_size, lowercase=lowercase,
                         ignore_pattern=ignore_pattern, num_permutations=num_permutations,
                         jaccard_threshold=jaccard_threshold, num_bands=num_bands,
                         num_rows_per_band=num_rows_per_band, tokenizer_model=tokenizer_model, **common)
