"""The whole-dataset part of deduplication: the indexes ops build on (exact keys, LSH bands, near
signatures; their rows spill to partition files past a budget, their groups live in a parent array)
and the phase that moves duplicates from the kept to the dropped output after a run's streaming pass."""
