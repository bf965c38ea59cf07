"""djx: clean multimodal (image + text) training data with Data-Juicer-style recipes.

The public Python API. Ops are plain classes registered by name; a Pipeline runs them.
"""
from .core.chain import OpChain
from .core.check import check_outputs
from .core.context import DROP_KEY, POSITION_KEY, STATS_KEY, RunContext
from .core.errors import CheckError, DjxError, RecipeError, ResumeError, SampleError
from .core.model_pool import ModelPool, ModelSpec, register_model_loader
from .core.op import Batch, Filter, Mapper, Op
from .core.pipeline import Pipeline
from .core.planner import DeviceInfo, Plan, plan_workers
from .core.recipe import Recipe, load_recipe
from .core.registry import build_op, get_op_class, register_op, registered_ops

__version__ = "0.1.0"

__all__ = ["Batch", "CheckError", "DROP_KEY", "DeviceInfo", "DjxError", "Filter", "Mapper",
           "ModelPool", "ModelSpec", "Op", "OpChain", "POSITION_KEY", "Pipeline", "Plan",
           "RecipeError", "Recipe", "ResumeError", "RunContext", "STATS_KEY", "SampleError",
           "build_op", "check_outputs", "get_op_class", "load_recipe", "plan_workers",
           "register_model_loader", "register_op", "registered_ops"]
