"""What `djx analyze`, `djx check` and `djx explain` read: a run's export, named as such or by the
recipe that wrote it (`djx analyze recipe.yaml`, or Data-Juicer's `--config recipe.yaml`), as a user
who just ran `djx process recipe.yaml` types it."""
from __future__ import annotations

import json
import os

from djx.core.errors import DjxError

RECIPE_SUFFIXES = (".yaml", ".yml")


def is_recipe(path: str | None) -> bool:
    return bool(path) and path.lower().endswith(RECIPE_SUFFIXES)


def resolve_export(command: str, given: str | None, config: str | None, recipe: str | None,
                   plugins: list[str]) -> tuple[str, str | None]:
    """(the export to read, the recipe to read it with: None for the run's recorded one). A recipe
    given (positional or --config) names its export_path; one not written yet says what to run."""
    named = config
    if is_recipe(given):
        if config and os.path.abspath(config) != os.path.abspath(given):
            raise DjxError(f"two recipes given ({given} and --config {config}); give one")
        named = given
    elif given and config:
        raise DjxError(f"give the export ({given}) or the recipe (--config {config}), not both; the recipe "
                       f"for thresholds is --recipe")
    if named is None:
        if not given:
            raise DjxError(f"give the export path of a run (e.g. out/demo.jsonl) or its recipe: "
                           f"`djx {command} RECIPE.yaml`")
        refuse_interrupted_finish(given, command)
        return given, recipe
    if recipe and os.path.abspath(recipe) != os.path.abspath(named):
        raise DjxError(f"two recipes given ({named} and --recipe {recipe}); give one")
    from djx.core.io.output_reader import export_files
    from djx.core.recipe.recipe import load_recipe
    export = load_recipe(named, custom_ops=plugins).export_path
    if not export_files(export):
        raise DjxError(f"the recipe {named} exports to {export}, which is not there: run `djx process {named}` "
                       f"first (with --report it writes the analysis as well)")
    refuse_interrupted_finish(export, command)
    return export, named


def refuse_interrupted_finish(export: str, command: str) -> None:
    """Refuse the outputs of a run that was stopped while moving them into place (its state folder
    holds the finishing mark its manifest gets before the first move): the files beside the export
    may be part its, part an earlier run's, and no check of them would say why."""
    from djx.core.io.outputs import OutputPaths
    try:
        state = OutputPaths.for_export(export).state_dir
        fd = os.open(os.path.join(state, "manifest.json"), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            finishing = json.load(f).get("finishing")
    except (OSError, ValueError, AttributeError, DjxError):  # none (the usual case), or not a manifest
        return
    if finishing:
        raise DjxError(f"a run was stopped while moving its outputs into place ({state} holds its finishing "
                       f"mark): {export} and the files beside it may mix its outputs with an earlier run's. Run "
                       f"the same `djx process` command again to complete it, then `djx {command}`")
