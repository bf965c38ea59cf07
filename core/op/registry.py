"""The op registry and plug-in loading.

Ops register explicitly with @register_op: the built-ins (listed under the `djx.builtin_ops` entry
point of djx's own package) as every plug-in. Plug-ins come from recipe `custom_ops` / `--custom-ops`
(file paths or module names) and from the `djx.ops` entry-point group; a worker re-imports them
the same way, so plug-in ops work under spawn.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import sys

from djx.core.errors import DjxError, OpNotFoundError, RecipeError
from djx.core.op.base import Op
from djx.core.op.params import open_bounds_given

_OPS: dict[str, type[Op]] = {}
_ALIASES: dict[str, str] = {}
_LOADED: set[str] = set()  # BUILTIN_GROUP once the built-ins are imported
_PROVIDED: dict[tuple[str, str], tuple[str, ...]] = {}  # (base_dir, custom_ops entry) -> the ops it registered


def register_op(name: str, aliases: tuple[str, ...] = ()):
    """Class decorator: make an Op available to recipes under `name` (and `aliases`): lowercase
    letters, digits and underscores, as the built-ins' and Data-Juicer's names are."""

    def deco(cls: type[Op]) -> type[Op]:
        from djx.core.errors import UsageError
        if not (isinstance(cls, type) and issubclass(cls, Op)):
            raise UsageError(f"@register_op({name!r}) must decorate a Filter or Mapper subclass")
        for n in (name, *aliases):
            if not (isinstance(n, str) and _NAME.fullmatch(n)):
                raise UsageError(f"@register_op: op name {n!r} is not one a recipe can use: lowercase letters, "
                                 f"digits and underscores, starting with a letter (e.g. 'word_count_filter')")
        if not _is_builtin(cls):
            load_builtin_ops()  # so that a clash is always the plug-in's, whatever was imported first
        for n in (name, *aliases):
            existing = _lookup(n)
            if existing is not None and not _same_op(existing, cls):
                owner = "the built-in op" if _is_builtin(existing) else "the op"
                raise RecipeError(f"op name {n!r} is already registered by {owner} {_qualname(existing)}"
                                  f"{_from_file(existing)}; the plug-in op {_qualname(cls)}{_from_file(cls)} "
                                  f"must choose another name")
        cls.name = name
        _OPS[name] = cls
        for a in aliases:
            _ALIASES[a] = name
        return cls

    return deco


_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _lookup(name: str) -> type[Op] | None:
    """The op registered under `name`, or under the name `name` is an alias of."""
    if name in _OPS:
        return _OPS[name]
    return _OPS.get(_ALIASES[name]) if name in _ALIASES else None


def _same_op(a: type, b: type) -> bool:
    """The same op class: the same module and name (a module imported again), or the same class
    of the same source file imported under two module names (`import my_ops` in a script, and
    `custom_ops: [my_ops.py]` in its recipe)."""
    if _qualname(a) == _qualname(b):
        return True
    return a.__qualname__ == b.__qualname__ and _source(a) is not None and _source(a) == _source(b)


def _source(cls: type) -> str | None:
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return os.path.realpath(file) if file else None


def _from_file(cls: type) -> str:
    return f" (from {_source(cls)})" if _source(cls) and not _is_builtin(cls) else ""


def _is_builtin(cls: type) -> bool:
    return cls.__module__ == "djx.ops" or cls.__module__.startswith("djx.ops.")


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


BUILTIN_GROUP = "djx.builtin_ops"  # the entry-point group djx's own package lists its ops under


def load_builtin_ops() -> None:
    """Import djx's built-in ops (once). They register as any plug-in does, and djx's package lists
    them under the `djx.builtin_ops` entry point, so the framework never imports them by name: ops
    import core, never the reverse."""
    if _LOADED:
        return
    found = importlib.metadata.entry_points(group=BUILTIN_GROUP)
    if not found:
        raise DjxError("djx's built-in ops are not registered: djx runs from files that were not installed; "
                       "install it (pip install -e . in its checkout)")
    for ep in found:
        ep.load()
    _LOADED.add(BUILTIN_GROUP)


def load_run_ops(custom_ops: list[str] | tuple[str, ...], base_dir: str, sys_path: list | tuple = ()) -> None:
    """Every op a run's process can meet, as its driver found them: the built-in ops, the recipe's
    plug-ins, the entry points' (before a chain or a model is unpickled: those need their classes
    and loaders). sys_path: the driver's import path, so a module plug-in resolves in a Ray process."""
    sys.path += [p for p in sys_path if p not in sys.path and os.path.isdir(p)]
    load_builtin_ops()
    load_custom_ops(custom_ops, base_dir)
    load_entry_point_ops()


FIND_OPS_HINT = "`djx ops` lists all ops; plug-ins need `custom_ops`"


def get_op_class(name: str) -> type[Op]:
    cls = find_op_class(name)
    if cls is None:
        raise OpNotFoundError(f"{unknown_op(name)} ({FIND_OPS_HINT})")
    return cls


def find_op_class(name: str) -> type[Op] | None:
    """The op registered under `name` (or an alias of it); None when there is none."""
    load_builtin_ops()
    return _lookup(name)


def unknown_op(name: str) -> str:
    """Why `name` is not an op here: a Data-Juicer op djx does not implement yet (and what to do), or
    'unknown op NAME' with only the registered names spelled closely enough to be a typo of it."""
    from djx.core.recipe.dj_ops import DJ_OP_NAMES
    load_builtin_ops()
    if name in DJ_OP_NAMES:
        return f"{name!r} is a Data-Juicer op that djx does not implement yet; write a plug-in (see docs/plugins.md)"
    return f"unknown op {name!r}" + (f"; did you mean {' or '.join(repr(n) for n in near)}?" if (near := typo_of(name)) else "")


def typo_of(name: str) -> list[str]:
    """The registered names (and aliases) `name` is a likely misspelling of: similar enough that only a
    letter or two differ, and within a hair of the best match (every op ends in _filter: that alone
    makes no two names alike)."""
    import difflib
    scored = sorted(((difflib.SequenceMatcher(None, name, c).ratio(), c) for c in list(_OPS) + list(_ALIASES)),
                    reverse=True)
    best = scored[0][0] if scored else 0.0
    return [c for r, c in scored[:3] if r >= 0.8 and r >= best - 0.05]


def build_op(name: str, params: dict | None, where: str | None = None, load_resources: bool = True) -> Op:
    """Construct a registered op from recipe parameters, with errors prefixed by `where`; with
    `load_resources` (a run), read its resource files too (Op.load_resources)."""
    cls = get_op_class(name)
    where = where or name
    try:
        op = cls(**open_bounds_given(cls, params or {}))
        if load_resources:
            op.load_resources()
        return op
    except RecipeError as e:
        items = [_placed(str(m), cls.name, where) for m in e.items]
        raise RecipeError("; ".join(items), items=items) from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001  a plug-in's own check of its parameters, or sys.exit()
        raise RecipeError(f"{where}: the op could not be made: {type(e).__name__}: {e}") from None


def _placed(msg: str, name: str, where: str) -> str:
    """`msg` about op `name`, said of its place in the recipe (`where`, e.g. process[3].name)."""
    if msg.startswith((f"{name}.", f"{name}:")):  # the op's own name: say where it is
        msg = where + msg[len(name):]
    return msg if msg.startswith(where) else f"{where}: {msg}"


def registered_ops() -> dict[str, type[Op]]:
    load_builtin_ops()
    return dict(sorted(_OPS.items()))


def aliases() -> dict[str, str]:
    return dict(_ALIASES)


def load_custom_ops(sources: list[str] | tuple[str, ...], base_dir: str = ".") -> None:
    """Import plug-in ops from file paths or package folders (resolved against base_dir) or importable
    module names, noting which ops each entry registers (silent_plugins)."""
    from djx.core.op.plugin_load import import_plugin
    for src in sources:
        before = dict(_OPS)
        module = import_plugin(src, base_dir)
        if (base_dir, src) not in _PROVIDED:
            _PROVIDED[(base_dir, src)] = tuple(
                n for n, c in _OPS.items() if before.get(n) is not c
                or c.__module__ == module or c.__module__.startswith(module + "."))


def silent_plugins(sources, base_dir: str) -> list[str]:
    """The custom_ops entries (already loaded) that registered no op: a line each for the run's plan.
    It imports nothing (a viewer's recipe names plug-ins it never loads)."""
    return [f"custom_ops: {src} registers no op (a plug-in registers each of its ops with "
            f"@register_op(\"name\"); a package folder's __init__.py imports the modules that do)"
            for src in sources if _PROVIDED.get((base_dir, src)) == ()]


def load_entry_point_ops() -> None:
    """Import every module advertised under the `djx.ops` entry-point group."""
    for ep in importlib.metadata.entry_points(group="djx.ops"):
        try:
            ep.load()
        except Exception as e:
            raise RecipeError(f"plug-in entry point {ep.name!r} ({ep.value}) failed to load: "
                              f"{type(e).__name__}: {e}") from e
