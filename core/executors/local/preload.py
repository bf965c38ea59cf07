"""What the forkserver of a run with model ops imports before it forks any worker.

Workers fork from the server with these modules' pages shared instead of importing torch and
transformers each. The executor names this module first, then the modules the chain's model
loaders declare (register_model_loader's `preload`: transformers' processing and modelling code,
which each worker preparing for a scorer imported on its own: ~2 s a worker here, ~10 s with 16 at
once on a 16-core GPU box), then `freeze_heap`.
"""
import importlib

from djx.core.op.registry import load_builtin_ops

for _name in ("torch", "transformers"):
    importlib.import_module(_name)
load_builtin_ops()  # the built-in ops and their model loaders
