"""The execution engines behind one contract (base.Executor): local processes and Ray."""
from __future__ import annotations

import sys

from djx.core.run.chain import OpChain
from djx.core.executors.base import DatasetSource, Executor, InputBatch
from djx.core.executors.ray.available import require_ray
from djx.core.plan.planner import Plan
from djx.core.recipe.recipe import Recipe

__all__ = ["DatasetSource", "Executor", "InputBatch", "make_executor"]


def make_executor(chain: OpChain, plan: Plan, recipe: Recipe, replan=None, log=print,
                  scoring: str | None = None) -> Executor:
    """The recipe's engine for `chain`; `replan(measured model bytes) -> Plan` lets a GPU run
    revise its plan once the first worker has loaded its models; `scoring`: where the model ops
    score (Pipeline.scoring: the recipe's, `auto` resolved)."""
    if recipe.executor == "ray":
        require_ray()
        from djx.core.executors.ray.executor import RayExecutor
        return RayExecutor(chain, plan, recipe)
    from djx.core.executors.local.executor import LocalExecutor
    method = recipe.start_method
    if method == "auto":
        # fork only where it is safe: a forked child of a process whose torch thread pool is
        # up can deadlock in its first op; forking a Ray driver breaks Ray; CUDA needs spawn
        ray = sys.modules.get("ray")
        risky = bool(chain.model_specs()) or (ray is not None and ray.is_initialized())
        method = "spawn" if risky or plan.on_gpu or sys.platform != "linux" else "fork"
        if method == "spawn" and chain.model_specs() and not plan.workers_touch_gpu and sys.platform == "linux" \
                and not (ray is not None and ray.is_initialized()):
            # model ops on CPU, or workers that only prepare for their GPU's scorer (no CUDA in
            # them): workers fork from a server that imported torch and transformers once (and
            # never ran an op), sharing those pages and skipping the imports
            method = "forkserver"
    elif method == "fork" and chain.model_specs():
        log("note: start_method fork is unsafe for ops that load models (a forked worker can hang "
            "in its first forward); using spawn")
        method = "spawn"
    return LocalExecutor(chain, plan, method, tuple(recipe.custom_ops), recipe.base_dir, recipe.max_in_flight,
                         replan=replan, log=log, sample_timeout=recipe.sample_timeout, share_models=recipe.share_models,
                         scoring=scoring or ("workers" if recipe.scoring == "auto" else recipe.scoring))
