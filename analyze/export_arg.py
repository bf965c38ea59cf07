"""What `djx analyze`, `djx check` and `djx explain` read: a run's export, named as such or by the
recipe that wrote it (`djx analyze recipe.yaml`, or Data-Juicer's `--config recipe.yaml`), as a user
who just ran `djx process recipe.yaml` types it."""
from __future__ import annotations

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
        return given, recipe
    if recipe and os.path.abspath(recipe) != os.path.abspath(named):
        raise DjxError(f"two recipes given ({named} and --recipe {recipe}); give one")
    from djx.core.io.output_reader import export_files
    from djx.core.recipe.recipe import load_recipe
    export = load_recipe(named, custom_ops=plugins).export_path
    if not export_files(export):
        raise DjxError(f"the recipe {named} exports to {export}, which is not there: run `djx process {named}` "
                       f"first (with --report it writes the analysis as well)")
    return export, named
