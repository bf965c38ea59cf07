"""The forkserver's last preload (after preload.py and the loaders' modules): the imports leave a
large heap of Python objects; `gc.freeze()` moves them out of the collector's reach, so a worker's
collections never write to them: a collection otherwise touches every object it tracks, and each
touched page becomes a private copy in every worker.
"""
import gc

gc.collect()
gc.freeze()
