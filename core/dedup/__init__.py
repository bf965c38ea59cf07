"""The whole-dataset part of deduplication: the indexes ops build on (exact keys, union-find
clusters) and the phase that moves duplicates from the kept to the dropped output after a run's
streaming pass."""
