"""Whether the libraries a model op imports have their compiled bytecode. An install without it
(pip --no-compile, a read-only shared environment, PYTHONDONTWRITEBYTECODE set before anything
compiled) makes every worker compile torch and transformers from source: importing them with a
tiny CLIP took 7.9 s instead of 2.8 s on a 2-core machine, in each worker and each scorer, every run."""
from __future__ import annotations

import importlib.util
import os
import sys

HEAVY = ("torch", "transformers")


def _writable(folder: str) -> bool:
    """Whether a file could be created in `folder` (made as needed under its nearest existing parent)."""
    while folder and not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return bool(folder) and os.access(folder, os.W_OK)


def uncompiled(names=HEAVY, dont_write: bool | None = None) -> list[str]:
    """Those of `names` (installed packages) whose bytecode is missing and that Python will not
    write either: compiled from source in every process that imports them."""
    dont_write = sys.flags.dont_write_bytecode if dont_write is None else dont_write
    out = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = getattr(spec, "origin", None) if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        cached = importlib.util.cache_from_source(origin)
        if not os.path.exists(cached) and (dont_write or not _writable(os.path.dirname(cached))):
            out.append(name)
    return out


def bytecode_warnings(specs, names=HEAVY, dont_write: bool | None = None) -> list[str]:
    """A `warning:` line when the run loads models and their libraries would compile from source."""
    dont_write = sys.flags.dont_write_bytecode if dont_write is None else dont_write
    missing = uncompiled(names, dont_write) if specs else []
    if not missing:
        return []
    why = "PYTHONDONTWRITEBYTECODE is set" if dont_write else "their folder is read-only to you"
    if sys.pycache_prefix:  # bytecode is read from there only, the standard library's too
        paths = " ".join(p for p in sys.path if p and os.path.isdir(p))
        fix = (f"Python reads bytecode only from PYTHONPYCACHEPREFIX ({sys.pycache_prefix}): compile every folder "
               f"on sys.path into it once: `PYTHONPYCACHEPREFIX={sys.pycache_prefix} python -m compileall -q "
               f"-j 0 {paths}`")
    else:
        home = os.path.dirname(os.path.dirname(importlib.util.find_spec(missing[0]).origin))
        fix = (f"Compile them once: `python -m compileall -q -j 0 {home}`; where that folder is read-only, "
               f"set PYTHONPYCACHEPREFIX to a folder of your own and compile every folder on sys.path into it")
    verb = "has" if len(missing) == 1 else "have"
    return [f"warning: {', '.join(missing)} {verb} no compiled bytecode and Python will not write it ({why}): "
            f"every worker compiles them from source, about 3x their import time (7.9 s against 2.8 s "
            f"measured). {fix}"]
