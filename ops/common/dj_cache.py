"""Where Data-Juicer keeps the files it downloads, so a recipe finds what Data-Juicer already fetched
on this machine, and an error names the place Data-Juicer would have used.

Data-Juicer 1.6.1 (utils/cache_utils.py): its home is DATA_JUICER_CACHE_HOME (default
$CACHE_HOME/data_juicer, CACHE_HOME default ~/.cache); word lists (flagged_words.json,
stopwords.json) live in DATA_JUICER_ASSETS_CACHE (default <home>/assets); model files
({lang}.sp.model, {lang}.arpa.bin, lid.176.bin, spaCy pipelines) in DATA_JUICER_MODELS_CACHE
(default <home>/models), after the folders of DATA_JUICER_EXTERNAL_MODELS_HOME. djx reads these
folders and never writes or downloads into them. The environment is read at each call (no state).
"""
from __future__ import annotations

import os


def dj_cache_home() -> str:
    home = os.environ.get("CACHE_HOME", "~/.cache")
    return os.path.expanduser(os.environ.get("DATA_JUICER_CACHE_HOME", os.path.join(home, "data_juicer")))


def dj_assets_dir() -> str:
    """Data-Juicer's asset folder (its word lists)."""
    return os.path.expanduser(os.environ.get("DATA_JUICER_ASSETS_CACHE", os.path.join(dj_cache_home(), "assets")))


def dj_models_dir() -> str:
    """Data-Juicer's model cache: where it puts the model files it downloads."""
    return os.path.expanduser(os.environ.get("DATA_JUICER_MODELS_CACHE", os.path.join(dj_cache_home(), "models")))


def dj_model_dirs() -> list[str]:
    """The folders Data-Juicer looks in for a model file before it downloads one, in its order."""
    external = [p.strip() for p in os.environ.get("DATA_JUICER_EXTERNAL_MODELS_HOME", "").split(os.pathsep)]
    return [os.path.expanduser(p) for p in external if p] + [dj_models_dir()]


def in_dj_dirs(name: str) -> str | None:
    """The path of Data-Juicer's model file `name` where it is already on this machine, else None."""
    for folder in dj_model_dirs():
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return None


def dj_word_lists_dir(words_type: str) -> str | None:
    """Data-Juicer's asset folder when it holds a `words_type` list (a .json file whose name
    contains it, as Data-Juicer looks for them), else None."""
    folder = dj_assets_dir()
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    return folder if any(n.endswith(".json") and words_type in n for n in names) else None


def not_found(param: str, what: str, dj_path: str) -> str:
    """The line for a resource found nowhere: the key to set, and where Data-Juicer would have it."""
    return (f"{param}: not set and not in Data-Juicer's cache: set it to {what} (Data-Juicer would use "
            f"{dj_path}; djx downloads nothing)")
