"""Per-image values the image filters share: sizes read from file headers, each image of a batch
decoded once (the any_or_all keep rule is RangeFilter.keep_values)."""
from djx import Batch, SampleError
from djx.core.run.breakdown import timed


def image_sizes(sample: dict, batch: Batch) -> list[tuple[int, int]]:
    """[(width, height)] of the sample's images, from file headers; raises SampleError for an
    image that does not read."""
    return [batch.images.size(ref) for ref in batch.image_refs(sample)]


def decode_each_once(batch: Batch, distinct: bool = False, only=None) -> tuple[list, list]:
    """(images, plan): every image path of the batch decoded once, in order of first use (the
    decode timed as the op's), and per sample its image rows (each distinct path once with
    `distinct`); None for a sample whose image did not decode, rejected with the reason (an image
    that fails is never given a row), and for a sample not in `only` (when given: left alone)."""
    images, ids, plan = [], {}, []
    for i, sample in enumerate(batch.samples):
        if only is not None and i not in only:
            plan.append(None)
            continue
        refs = batch.image_refs(sample)
        refs = list(dict.fromkeys(refs)) if distinct else refs
        try:
            for ref in refs:
                if ref not in ids:
                    with timed(batch.counters, "decode"):
                        image = batch.images.rgb(ref)
                    ids[ref] = len(images)
                    images.append(image)
        except SampleError as e:
            batch.reject(i, str(e), e.code)
            plan.append(None)
            continue
        plan.append([ids[ref] for ref in refs])
    return images, plan
