"""What the forkserver of a run with model ops imports before it forks any worker.

Workers fork from the server with these modules' pages shared instead of importing torch and
transformers each. The import leaves a large heap of Python objects; `gc.freeze()` moves them out
of the collector's reach, so a worker's collections never write to them: a collection otherwise
touches every object it tracks, and each touched page becomes a private copy in every worker.
"""
import gc
import importlib

from djx.core.op.registry import load_builtin_ops

for _name in ("torch", "transformers"):
    importlib.import_module(_name)
load_builtin_ops()  # the built-in ops and their model loaders

gc.collect()
gc.freeze()
