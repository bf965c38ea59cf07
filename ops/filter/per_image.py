"""Per-image values the image filters share: sizes read from file headers, and Data-Juicer's
any_or_all keep rule over one value per image."""
from djx import Batch


def keep_images(values: list, low: float, high: float, any_or_all: str) -> bool:
    """True when any (or all) values lie in [low, high]; a sample without images is kept."""
    if not values:
        return True
    oks = [low <= v <= high for v in values]
    return any(oks) if any_or_all == "any" else all(oks)


def image_sizes(sample: dict, batch: Batch) -> list[tuple[int, int]]:
    """[(width, height)] of the sample's images, from file headers; raises SampleError for an
    image that does not read."""
    return [batch.images.size(ref) for ref in batch.image_refs(sample)]
