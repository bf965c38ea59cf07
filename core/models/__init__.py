"""Models: the per-process pool, dtypes, CUDA OOM back-off, one copy of the weights per device."""
