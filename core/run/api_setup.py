"""What Pipeline(...) is made of, and what its run() is given: the recipe of settings around the
ops (one list of ops: op objects or a recipe's process list, never both), and the paths run()
takes in place of the recipe's."""
from __future__ import annotations

import dataclasses
import os

from djx.core.errors import DjxError, UsageError
from djx.core.recipe.recipe import Recipe, load_recipe, recipe_from_dict

PATHS = ("dataset_path", "export_path")
_PLACEHOLDER = "unset.jsonl"  # a path Pipeline(ops=...) was not given: run() must be given it


def pipeline_recipe(ops: list | None, recipe, settings: dict) -> tuple[Recipe, tuple[str, ...]]:
    """The recipe a Pipeline runs with, and the paths it was not given (run() needs them)."""
    if isinstance(recipe, (str, os.PathLike)):  # a recipe file, as from_recipe takes it
        recipe = load_recipe(os.fspath(recipe))
    elif recipe is not None and not isinstance(recipe, Recipe):
        raise DjxError(f"Pipeline(recipe=...): expected a recipe file path or a Recipe, got {type(recipe).__name__}")
    if ops is not None:
        _refuse_two_op_lists(recipe, settings)
    unset: tuple[str, ...] = ()
    if recipe is None:
        unset = tuple(k for k in PATHS if not settings.get(k))
        base = {k: settings.pop(k, None) or _PLACEHOLDER for k in PATHS}
        if "text_key" in settings:
            settings["text_keys"] = settings.pop("text_key")
        recipe = recipe_from_dict({**base, **settings}, base_dir=os.getcwd())
    elif settings:
        recipe = recipe_from_dict({**recipe.to_dict(), **settings}, base_dir=recipe.base_dir)
    return recipe, unset


def _refuse_two_op_lists(recipe: Recipe | None, settings: dict) -> None:
    """ops=[...] with process=[...] (or a recipe that has its own process list): one would be
    ignored without a word."""
    if "process" in settings:
        raise UsageError("Pipeline(ops=[...], process=[...]): give the ops one way, as op objects (ops=) or "
                         "as a recipe's list by name (process=), not both")
    if recipe is not None and recipe.process:
        raise UsageError("Pipeline(ops=[...], recipe=...): the recipe has its own process list, which ops= would "
                         "replace; give the ops one way (drop ops=, or use a recipe without process)")


def with_paths(recipe: Recipe, dataset_path: str | None, export_path: str | None, unset: tuple[str, ...]) -> Recipe:
    """The recipe, with the paths given to run() in place of its own; a UsageError when a path was
    given neither to Pipeline(...) nor to run()."""
    missing = [k for k, given in zip(PATHS, (dataset_path, export_path)) if k in unset and not given]
    if missing:
        raise UsageError(f"Pipeline.run() needs {' and '.join(missing)}: pass run(dataset_path, export_path), "
                         f"or give them to Pipeline(..., dataset_path=..., export_path=...)")
    if not (dataset_path or export_path):
        return recipe
    changed = recipe_from_dict({**recipe.to_dict(), "process": [],
                                "dataset_path": os.path.abspath(dataset_path or recipe.dataset_path),
                                "export_path": os.path.abspath(export_path or recipe.export_path)},
                               base_dir=recipe.base_dir)
    return dataclasses.replace(changed, process=recipe.process)  # the ops' parameters as they are (not copied)


def refuse_non_ops(ops: list) -> None:
    """ops=[...] holds op instances: a class, a name or anything else is said to be wrong here,
    not found deep inside a worker."""
    from djx.core.op.base import Filter, Mapper
    for i, op in enumerate(ops):
        if isinstance(op, (Filter, Mapper)):
            continue
        if isinstance(op, type) and issubclass(op, (Filter, Mapper)):
            raise UsageError(f"Pipeline(ops=[...]): ops[{i}] is the class {op.__name__}; pass an instance, "
                             f"e.g. {op.__name__}() with its parameters")
        raise UsageError(f"Pipeline(ops=[...]): ops[{i}] is a {type(op).__name__}, not an op (a Filter or Mapper "
                         f"instance); for ops by name use Pipeline(process=[{{'op_name': {{...}}}}])")


def write_report(ops, recipe: Recipe, export: str, log, stop) -> None:
    """`report: true`: the analysis of the finished run next to its export (<stem>.analysis/)."""
    from djx.analyze import analyze
    from djx.core.run.stop import Stopped
    try:
        analyze(export, ops=ops, recipe=recipe, log=log, stop=stop)
    except Stopped as e:
        raise Stopped(e.signal_name, f"the run finished and its outputs are written, but not its report: "
                                     f"`djx analyze {export}` writes it") from None
    except DjxError as e:
        raise DjxError(f"the run finished and its outputs are written, but its report could not be: {e}; "
                       f"`djx analyze {export}` retries it") from None
