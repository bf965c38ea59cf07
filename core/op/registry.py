"""The op registry and plug-in loading.

Ops register explicitly with @register_op: the built-ins (listed under the `djx.builtin_ops` entry
point of djx's own package) as every plug-in. Plug-ins come from recipe `custom_ops` / `--custom-ops`
(file paths or module names) and from the `djx.ops` entry-point group; a worker re-imports them
the same way, so plug-in ops work under spawn.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys

from djx.core.errors import DjxError, OpNotFoundError, RecipeError
from djx.core.op.base import Op

_OPS: dict[str, type[Op]] = {}
_ALIASES: dict[str, str] = {}
_LOADED: set[str] = set()  # BUILTIN_GROUP once the built-ins are imported


def register_op(name: str, aliases: tuple[str, ...] = ()):
    """Class decorator: make an Op available to recipes under `name` (and `aliases`)."""

    def deco(cls: type[Op]) -> type[Op]:
        if not (isinstance(cls, type) and issubclass(cls, Op)):
            from djx.core.errors import UsageError
            raise UsageError(f"@register_op({name!r}) must decorate a Filter or Mapper subclass")
        if not _is_builtin(cls):
            load_builtin_ops()  # so that a clash is always the plug-in's, whatever was imported first
        for n in (name, *aliases):
            existing = _OPS.get(n) or _OPS.get(_ALIASES.get(n, ""))
            if existing is not None and _qualname(existing) != _qualname(cls):
                owner = "the built-in op" if _is_builtin(existing) else "the op"
                raise RecipeError(f"op name {n!r} is already registered by {owner} {_qualname(existing)}; "
                                  f"the plug-in op {_qualname(cls)} must choose another name")
        cls.name = name
        _OPS[name] = cls
        for a in aliases:
            _ALIASES[a] = name
        return cls

    return deco


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
    return _OPS.get(name) or _OPS.get(_ALIASES.get(name, ""))


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
        op = cls(**(params or {}))
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
    """Import plug-in ops from file paths (resolved against base_dir) or importable module names."""
    for src in sources:
        looks_like_path = src.endswith(".py") or os.sep in src or "/" in src
        if looks_like_path:
            path = src if os.path.isabs(src) else os.path.normpath(os.path.join(base_dir, src))
            _import_file(path)
        else:
            try:
                importlib.import_module(src)
            except ImportError as e:
                raise RecipeError(f"custom_ops: cannot import module {src!r} ({e})") from None


def _import_file(path: str) -> None:
    if not os.path.isfile(path):
        raise RecipeError(f"custom_ops: file not found: {path}")
    # A stable module name per file: the same in every worker, so pickled ops find their class.
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    stem = os.path.splitext(os.path.basename(path))[0]
    mod_name = f"djx_plugin_{stem}_{digest}"
    if mod_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except RecipeError as e:
        del sys.modules[mod_name]
        raise RecipeError(f"custom_ops: {path}: {e}") from None
    except Exception as e:
        del sys.modules[mod_name]
        raise RecipeError(f"custom_ops: importing {path} failed: {type(e).__name__}: {e}") from e


def load_entry_point_ops() -> None:
    """Import every module advertised under the `djx.ops` entry-point group."""
    for ep in importlib.metadata.entry_points(group="djx.ops"):
        try:
            ep.load()
        except Exception as e:
            raise RecipeError(f"plug-in entry point {ep.name!r} ({ep.value}) failed to load: "
                              f"{type(e).__name__}: {e}") from e
