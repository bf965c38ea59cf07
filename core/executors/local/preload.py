"""What the forkserver of a run with model ops imports before it forks any worker.

Workers fork from the server with these modules' pages shared instead of importing torch and
transformers each. The import leaves a large heap of Python objects; `gc.freeze()` moves them out
of the collector's reach, so a worker's collections never write to them: a collection otherwise
touches every object it tracks, and each touched page becomes a private copy in every worker.
"""
import gc
import importlib

for _name in ("torch", "transformers", "djx.ops.models"):
    importlib.import_module(_name)

gc.collect()
gc.freeze()
