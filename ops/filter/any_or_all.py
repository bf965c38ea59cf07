"""The per-image keep rule shared by image filters (Data-Juicer's any_or_all semantics)."""


def keep_images(values: list, low: float, high: float, any_or_all: str) -> bool:
    """True when any (or all) values lie in [low, high]; a sample without images is kept."""
    if not values:
        return True
    oks = [low <= v <= high for v in values]
    return any(oks) if any_or_all == "any" else all(oks)
