"""Importing the plug-ins a user names in `custom_ops` (or Data-Juicer's `custom_operator_paths`):
a .py file, a package folder (a folder with __init__.py, which Data-Juicer's loader takes too), or
an importable module name. Only what the user names is imported, never what data names; a file or
folder gets a module name stable across processes (a worker re-imports it under the same name, so
pickled ops find their class). A failed import is one line naming the plug-in's file and line."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback

from djx.core.errors import DjxError, RecipeError

_CORE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # djx/core: never the plug-in's line


def import_plugin(src: str, base_dir: str) -> str:
    """Import one custom_ops entry; the name of the module it became. A path (ending in .py, or
    with a slash) resolves against base_dir; a bare name is a module on the import path, else a
    folder of that name in base_dir."""
    full = os.path.normpath(os.path.join(base_dir, os.path.expanduser(src)))
    if src.endswith(".py") or os.sep in src or "/" in src:
        return _import_path(full)
    spec = _find_spec(src)
    if (spec is None or spec.origin is None) and os.path.isdir(full):  # not a module: a folder beside the recipe
        return _import_path(full)
    if spec is not None and spec.origin is None and spec.submodule_search_locations:  # a folder on the import
        return _import_path(list(spec.submodule_search_locations)[0])  # path, with no __init__.py to run
    return _import_module(src)


def _find_spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except Exception:  # noqa: BLE001  (a parent package missing or failing: the import says why)
        return None


def _import_path(path: str) -> str:
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            files = sorted(n for n in os.listdir(path) if n.endswith(".py")) or ["my_ops.py"]
            raise RecipeError(f"custom_ops: {path} is a folder without __init__.py: name its plug-in files "
                              f"(e.g. {os.path.join(path, files[0])}), or make it a package: an __init__.py "
                              f"that imports its ops (from .{files[0][:-3]} import ...)")
        return _exec(_stable_name(path), init, path, package=True)
    if not os.path.isfile(path):
        raise RecipeError(f"custom_ops: file not found: {path}")
    return _exec(_stable_name(path), path, path, package=False)


def _stable_name(path: str) -> str:
    """The same module name for a path in every process: its stem and a digest of its absolute path."""
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    stem = os.path.splitext(os.path.basename(os.path.abspath(path)))[0]
    return f"djx_plugin_{stem}_{digest}"


def _exec(mod_name: str, file: str, shown: str, package: bool) -> str:
    if mod_name in sys.modules:
        return mod_name
    locations = [os.path.dirname(file)] if package else None  # its modules import each other relatively
    spec = importlib.util.spec_from_file_location(mod_name, file, submodule_search_locations=locations)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        _forget(mod_name)
        raise
    except BaseException as e:  # noqa: BLE001  (sys.exit() in a plug-in too: said, not obeyed)
        _forget(mod_name)
        if isinstance(e, DjxError):
            raise RecipeError(f"custom_ops: {shown}: {e}{at(e)}") from None
        raise RecipeError(f"custom_ops: importing {shown} failed: {failure(e)}") from None
    return mod_name


def _forget(mod_name: str) -> None:
    for name in [n for n in sys.modules if n == mod_name or n.startswith(mod_name + ".")]:
        del sys.modules[name]


def _import_module(src: str) -> str:
    try:
        importlib.import_module(src)
    except KeyboardInterrupt:
        raise
    except ModuleNotFoundError as e:
        if e.name and (src == e.name or src.startswith(e.name + ".")):
            raise RecipeError(f"custom_ops: cannot import module {src!r}: no module of that name on Python's "
                              f"import path; give its file instead ({src.replace('.', '/')}.py: in a recipe's custom_ops "
                              f"relative to the recipe's folder, after --custom-ops to the current folder) or "
                              f"add the folder holding it to PYTHONPATH") from None
        raise RecipeError(f"custom_ops: importing module {src!r} failed: {failure(e)}") from None
    except BaseException as e:  # noqa: BLE001  (sys.exit() in a plug-in too: said, not obeyed)
        if isinstance(e, DjxError):
            raise RecipeError(f"custom_ops: module {src!r}: {e}{at(e)}") from None
        raise RecipeError(f"custom_ops: importing module {src!r} failed: {failure(e)}") from None
    return src


def failure(e: BaseException) -> str:
    """`Type: message (at file:line)`: what went wrong and where in the plug-in."""
    if isinstance(e, SyntaxError):
        return f"{type(e).__name__}: {e.msg}{at(e)}"
    return f"{type(e).__name__}: {e}{at(e)}"


def at(e: BaseException) -> str:
    """' (at FILE:LINE)': the line of the plug-in that raised `e` (its deepest frame outside djx's
    core and the import machinery, preferring the user's own files to installed libraries); '' if none."""
    if isinstance(e, SyntaxError) and e.filename and e.lineno:
        return f" (at {e.filename}:{e.lineno})"
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith("<") and not os.path.abspath(f.filename).startswith(_CORE_DIR + os.sep)]
    libraries = tuple({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "purelib", "platlib")})
    own = [f for f in frames if not os.path.abspath(f.filename).startswith(libraries)]
    frame = (own or frames or [None])[-1]
    return f" (at {frame.filename}:{frame.lineno})" if frame else ""
