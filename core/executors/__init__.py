"""The execution engines behind one contract (base.Executor): local processes and Ray."""
from __future__ import annotations

import importlib.util
import sys

from djx.core.errors import DjxError
from djx.core.run.chain import OpChain
from djx.core.executors.base import DatasetSource, Executor, InputBatch
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


def require_ray() -> None:
    """Raise DjxError (what to install) unless Ray imports: the base install has no Ray, and an
    install can be broken (a bad wheel, a missing native library, a version clash). Only a run
    with executor: ray asks, and pays the import its driver needs anyway."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or half-removed install: as good as missing
        found = False
    if not found:
        raise DjxError("executor: ray needs Ray, which is not installed: pip install '.[ray]' in djx's checkout "
                       "(or use executor: local)")
    try:
        importlib.import_module("ray")
    except Exception as e:  # noqa: BLE001  (whatever a broken install raises: said in one line)
        raise DjxError(f"executor: ray: Ray is installed but does not import ({type(e).__name__}: {e}); reinstall "
                       f"it with pip install --force-reinstall '.[ray]' in djx's checkout (or use executor: local)") \
            from None


def ray_preflight(recipe: Recipe, files: list[str]) -> tuple[list[str], list[str]]:
    """What --dry-run says of a Ray run (its lines, its problems): where it would run, and what
    would stop it at once: Ray missing or broken, a cluster address nothing answers at, an input
    the engine cannot read."""
    from djx.core.io.readers import ReadState
    where = f"the Ray cluster at {recipe.ray_address}" if recipe.ray_address else "a local Ray that the run starts"
    lines = [f"executor: ray, on {where}"]
    try:
        require_ray()
        from djx.core.executors.ray.cluster import refuse, refuse_unreachable
        if recipe.ray_address:
            refuse_unreachable(recipe.ray_address)
        note = refuse(files, ReadState())
    except DjxError as e:
        return lines, [str(e)]
    return lines + ([note] if note else []), []
