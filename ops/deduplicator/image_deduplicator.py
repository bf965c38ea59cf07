from typing import Literal

from djx import Batch, Deduplicator, SampleError, register_op
from djx.core.dedup.indexes import ExactIndex
from djx.ops.common.image_hashes import image_hash
from djx.ops.deduplicator.document_deduplicator import HASH_KEY, text_hasher

IMAGE_HASH_KEY = "__dj__imagehash"  # Data-Juicer's HashKeys.imagehash


@register_op("image_deduplicator")
class ImageDeduplicator(Deduplicator):
    """Drop samples whose images hash the same as an earlier sample's (all images, in order).

    `method`: imagededup's phash, dhash, whash or ahash of each distinct image path of the sample,
    concatenated. A sample without images is never a duplicate, unless `consider_text`: then the
    text's md5 (document_deduplicator's, with its defaults) must match as well, and samples without
    images are grouped by their text. An image that cannot be decoded rejects its sample."""

    uses_images = True
    stats_keys = (IMAGE_HASH_KEY,)  # and HASH_KEY with consider_text
    stat_shapes = {IMAGE_HASH_KEY: "digest", HASH_KEY: "digest"}

    def __init__(self, method: Literal["phash", "dhash", "whash", "ahash"] = "phash", consider_text: bool = False,
                 **common):
        super().__init__(**common)
        self.method = method
        self.consider_text = consider_text
        self.stats_keys = (IMAGE_HASH_KEY, HASH_KEY) if consider_text else (IMAGE_HASH_KEY,)
        self.uses_text = consider_text

    def compute_stats(self, batch: Batch) -> None:
        hashes: dict[str, str] = {}  # a path the batch holds twice is decoded and hashed once
        for i, sample in enumerate(batch.samples):
            try:
                self._compute(sample, batch, hashes)
            except SampleError as e:
                batch.reject(i, str(e), e.code)

    def _compute(self, sample: dict, batch: Batch, hashes: dict[str, str]) -> None:
        stats = batch.stats(sample)
        if self.consider_text and HASH_KEY not in stats:
            stats[HASH_KEY] = text_hasher(False, False, self.name)(batch.text(sample))
        if IMAGE_HASH_KEY in stats:  # an earlier op of the recipe wrote it: Data-Juicer reuses it
            return
        for ref in dict.fromkeys(batch.image_refs(sample)):  # Data-Juicer loads each distinct path once
            if ref not in hashes:
                hashes[ref] = image_hash(batch.images.rgb(ref), self.method)
                batch.images.release(ref)
        stats[IMAGE_HASH_KEY] = "".join(hashes[ref] for ref in dict.fromkeys(batch.image_refs(sample)))

    def index(self, space) -> ExactIndex:
        if self.consider_text:
            return ExactIndex(lambda stats: (stats[IMAGE_HASH_KEY], stats[HASH_KEY]), space)
        return ExactIndex(lambda stats: stats[IMAGE_HASH_KEY] or None, space)
