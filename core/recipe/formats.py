"""The recipe keys `dataset_format` (djx, llava) and `format_options`, checked at load."""
from __future__ import annotations

from djx.core.errors import RecipeError
from djx.core.io.llava import LlavaOptions


def check_format(values: dict) -> None:
    """Refuse options the format does not have, or of the wrong type, before any work (in place:
    the options become a plain dict of what was given)."""
    fmt, options = values.get("dataset_format", "djx"), values.get("format_options") or {}
    if fmt == "djx":
        if options:
            raise RecipeError(f"format_options {sorted(options)}: djx's own format has no options; "
                              f"set dataset_format: llava for LLaVA's")
        return
    if any(not isinstance(k, str) for k in options):
        raise RecipeError(f"format_options: keys are option names, got {options!r}")
    try:
        LlavaOptions.from_dict(options)
    except ValueError as e:
        raise RecipeError(str(e)) from None


def llava_options(recipe) -> LlavaOptions | None:
    """The run's LlavaOptions (None: the dataset is in djx's format)."""
    if recipe.dataset_format != "llava":
        return None
    return LlavaOptions.from_dict(dict(recipe.format_options))
