"""djx: clean multimodal (image + text) training data with Data-Juicer-style recipes.

The public Python API. Ops are plain classes registered by name; a Pipeline runs them.
"""
from djx.core.run.chain import OpChain
from djx.core.run.check import check_outputs
from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY, RunContext
from djx.core.errors import CheckError, DjxError, RecipeError, ResumeError, SampleError, UsageError
from djx.core.models.pool import ModelPool, ModelSpec, register_model_loader
from djx.core.op.base import Batch, Filter, Mapper, Op
from djx.core.op.deduplicator import Deduplicator, DuplicateIndex
from djx.core.op.reasons import range_reason
from djx.core.op.range_filter import RangeFilter
from djx.core.pipeline import Pipeline
from djx.core.records import FailFast
from djx.core.run.outcome import SampleOutcome
from djx.core.plan.planner import DeviceInfo, Plan, plan_workers
from djx.core.recipe.recipe import Recipe, load_recipe
from djx.core.op.registry import build_op, get_op_class, register_op, registered_ops

__version__ = "0.1.0"

__all__ = ["Batch", "CheckError", "DROP_KEY", "Deduplicator", "DuplicateIndex", "DeviceInfo", "DjxError", "FailFast", "Filter", "Mapper",
           "ModelPool", "ModelSpec", "Op", "OpChain", "POSITION_KEY", "Pipeline", "Plan",
           "RangeFilter", "RecipeError", "Recipe", "ResumeError", "RunContext", "STATS_KEY", "SampleError", "SampleOutcome",
           "build_op", "check_outputs", "get_op_class", "load_recipe", "plan_workers",
           "range_reason", "register_model_loader", "register_op", "registered_ops", "UsageError"]
