"""Op parameters as fingerprints see them: a callable (a lambda, closure, function, partial, bound
method) by what it does, not where it lives. repr() of a function holds its memory address, which
differs in every process: hashed as is, an unchanged script could never resume, nor reuse the
stats its own last run wrote.

A callable's digest covers its module and qualified name, its code object (bytecode, constants,
names, nested code), its default arguments and its closure's values where they are plain data (a
nested callable by its own digest; another object by its type and pickled bytes). What it reads from
module globals at call time is not covered: a changed global constant is not seen.
"""
from __future__ import annotations

import functools
import hashlib
import json
import pickle
import re
import types

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_DEPTH = 8  # callables within callables followed this deep


def is_function(value) -> bool:
    """A callable parameter whose repr is not stable (a class is named by its stable repr)."""
    return callable(value) and not isinstance(value, type)


def stable(value, named: bool = True):
    """`value` with every callable in it (also inside lists, tuples and dicts) replaced by a string:
    its digest (`named`), or one marker for all (the digests are then compared apart, see
    `callables`). Values without callables are returned as they are."""
    if is_function(value):
        return f"<callable {callable_digest(value)}>" if named else "<callable>"
    if isinstance(value, (list, tuple)):
        items = [stable(v, named) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        items = {k: stable(v, named) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    return value


def callables(params: dict, prefix: str = "") -> dict[str, str]:
    """{"param", "param[0]", "param.key": digest} of every callable in an op's parameters."""
    out: dict[str, str] = {}

    def walk(value, path: str) -> None:
        if is_function(value):
            out[path] = callable_digest(value)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{path}.{k}")

    for name, value in params.items():
        walk(value, f"{prefix}{name}")
    return out


def callable_digest(fn, depth: int = 0) -> str:
    """'module.qualname:sha' of a callable, the same in every process while its code is unchanged."""
    h = hashlib.sha256()
    _feed_callable(h, fn, depth)
    return f"{_name(fn)}:{h.hexdigest()[:16]}"


def _name(fn) -> str:
    target = fn.func if isinstance(fn, functools.partial) else getattr(fn, "__func__", fn)
    module = getattr(target, "__module__", None) or type(target).__module__
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{qualname}"


def _feed_callable(h, fn, depth: int) -> None:
    h.update(_name(fn).encode())
    if depth > _DEPTH:
        return
    if isinstance(fn, functools.partial):
        _feed_callable(h, fn.func, depth + 1)
        _feed_value(h, (fn.args, fn.keywords), depth)
        return
    if isinstance(fn, types.MethodType):  # a bound method: its function, and what it is bound to
        _feed_callable(h, fn.__func__, depth + 1)
        _feed_value(h, fn.__self__, depth)
        return
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):  # a builtin by its name; a callable object by its state
        if not isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            _feed_value(h, fn, depth)
        return
    _feed_code(h, code)
    _feed_value(h, (fn.__defaults__, fn.__kwdefaults__), depth)
    for cell in fn.__closure__ or ():
        try:
            _feed_value(h, cell.cell_contents, depth)
        except ValueError:  # an empty cell (a name bound later)
            h.update(b"<empty cell>")


def _feed_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_argcount,
                   code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const)
        else:
            h.update(_const(const).encode())


def _const(value) -> str:
    """A code constant's text, the same in every process (a frozenset's order follows the hash seed)."""
    if isinstance(value, frozenset):
        return "frozenset(" + ",".join(sorted(_const(v) for v in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ",".join(_const(v) for v in value) + ")"
    return repr(value)


def _feed_value(h, value, depth: int) -> None:
    """Plain data by its JSON, a function by its digest, another object (a callable one too) by its
    type and pickled bytes (else its repr without memory addresses)."""
    if is_function(value) and not _has_state(value):
        _feed_callable(h, value, depth + 1)
        return
    if isinstance(value, (set, frozenset)):
        h.update(_const(frozenset(value)).encode())
        return
    if not is_function(value):
        try:
            h.update(json.dumps(value, sort_keys=True).encode())
            return
        except (TypeError, ValueError, RecursionError):
            pass
        if isinstance(value, (list, tuple)) and depth <= _DEPTH:
            for v in value:
                _feed_value(h, v, depth + 1)
            return
        if isinstance(value, dict) and depth <= _DEPTH:
            for k, v in value.items():
                h.update(repr(k).encode())
                _feed_value(h, v, depth + 1)
            return
    h.update(f"{type(value).__module__}.{type(value).__qualname__}".encode())
    try:
        h.update(pickle.dumps(value, protocol=4))
    except Exception:  # noqa: BLE001  unpicklable: its repr, less the address
        h.update(_ADDRESS.sub("", repr(value)).encode())


def json_default(value) -> str:
    """json.dumps's `default` for a fingerprint: str(value), unless that holds a memory address
    (an object's default repr): then its type and a digest of its pickled bytes."""
    text = str(value)
    if not _ADDRESS.search(text):
        return text
    h = hashlib.sha256()
    _feed_value(h, value, 0)
    return f"<{type(value).__module__}.{type(value).__qualname__} {h.hexdigest()[:16]}>"


def _has_state(value) -> bool:
    """A callable object (an instance with __call__), not a function: hashed by its state."""
    return not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                  functools.partial, types.BuiltinMethodType))
