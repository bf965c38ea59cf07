"""Validation of op parameters against the type hints of the op's __init__."""
from __future__ import annotations

import inspect
import sys
import textwrap
import types
import typing
from typing import Any, Literal, Union

from djx.core.errors import RecipeError


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list[{_type_name(args[0])}]" if args else "list"
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def coerce(value: Any, tp: Any) -> Any:
    """Return `value` as type `tp`, or raise TypeError. Ints widen to float and a whole float (2e5) is
    an int; nothing else converts."""
    if tp is Any or tp is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise TypeError
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return coerce(value, arg)
            except TypeError:
                continue
        raise TypeError
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise TypeError
        (item_tp,) = typing.get_args(tp)[:1] or (Any,)
        return [coerce(v, item_tp) for v in value]
    if tp is type(None):
        if value is None:
            return None
        raise TypeError
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeError
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():  # 2e5, as Data-Juicer's recipes write it
            return int(value)
        raise TypeError
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise TypeError
    return value


def validate_params(cls: type, params: dict, where: str) -> dict:
    """Check `params` against cls.__init__'s signature; return them coerced. `where` prefixes errors."""
    sig = inspect.signature(cls.__init__)
    hints = typing.get_type_hints(cls.__init__)
    accepted = {n: p for n, p in sig.parameters.items()
                if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    # parameters of base classes reached through **kwargs (text_key, image_key, batch_size, ...)
    for base in cls.__mro__[1:]:
        init = base.__dict__.get("__init__")
        if init is None or base is object:
            continue
        for n, p in inspect.signature(init).parameters.items():
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                accepted.setdefault(n, p)
                hints.setdefault(n, typing.get_type_hints(init).get(n, Any))
    out, errors = {}, []
    for key, value in params.items():
        if key not in accepted:
            from djx.core.errors import closest
            hint = closest(key, accepted)
            errors.append(f"{where}: unknown parameter {key!r}" + (f"; did you mean {hint!r}?" if hint else "")
                          + f" (parameters: {', '.join(accepted) or 'none'})")
            continue
        if value is None and (getattr(cls, "none_bound_is_open", False) and key.startswith(("min_", "max_"))
                              or accepted[key].default is None):
            out[key] = None  # `max_len: null`: no bound, as Data-Juicer reads it; or the parameter's default
            continue
        if value is None and _open_bound(key, accepted[key].default):
            out[key] = accepted[key].default  # the open bound `djx ops` shows as none
            continue
        tp = hints.get(key, Any)
        try:
            out[key] = coerce(value, tp)
        except TypeError:
            errors.append(f"{where}.{key}: expected {_type_name(tp)}, got {value!r}")
    if errors:  # every bad parameter of the op at once
        raise RecipeError("; ".join(errors), items=errors)
    return out


def open_bounds_given(cls: type, params: dict) -> dict:
    """`params` with each null given for an open bound (a min_/max_ whose default is sys.maxsize)
    replaced by that default, so the op's own __init__ sees the number it compares with."""
    defaults = with_defaults(cls, {})
    return {k: defaults[k] if v is None and k in defaults and _open_bound(k, defaults[k])
            and not getattr(cls, "none_bound_is_open", False) else v for k, v in params.items()}


def _open_bound(key: str, default: Any) -> bool:
    """A min_/max_ parameter whose default is sys.maxsize: no bound (`djx ops` shows it as none)."""
    return key.startswith(("min_", "max_")) and isinstance(default, int) and not isinstance(default, bool) \
        and default == sys.maxsize


def shown(value: Any) -> str:
    """A parameter value as a person reads it: sys.maxsize (an int bound left open) is "none"."""
    return "none (unbounded)" if isinstance(value, int) and not isinstance(value, bool) and value == sys.maxsize \
        else repr(value)


def describe_params(cls: type) -> list[tuple[str, str, Any]]:
    """(name, type, default) for each parameter an op accepts, own ones first."""
    rows, seen = [], set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        hints = typing.get_type_hints(init)
        for n, p in inspect.signature(init).parameters.items():
            if n == "self" or n in seen or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            seen.add(n)
            default = None if p.default is p.empty else p.default
            rows.append((n, _type_name(hints.get(n, Any)), default))
    return rows


def describe_doc(doc: str | None) -> tuple[str, str]:
    """An op's docstring as `djx ops` shows it: (its first sentence, one line ending in a period;
    the rest). The sentence ends at the first '. ', ': ' or '; ' outside parentheses and
    backquotes (not after "e.g" or "i.e"), or with its paragraph; the rest keeps its text."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    first = " ".join(line.strip() for line in paragraphs[0].splitlines())
    depth, quoted, cut = 0, False, len(first)
    for i, ch in enumerate(first):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth = max(0, depth - 1)
        elif not quoted and depth == 0 and ch in ".:;" and first[i + 1:i + 2] == " " \
                and not first[:i].endswith(("e.g", "i.e")):
            cut = i
            break
    lead = first[:cut].rstrip(".:; ")
    rest = "\n\n".join([textwrap.fill(first[cut + 1:].strip(), 96)] + paragraphs[1:]).strip()
    return (lead + "." if lead else ""), rest


def with_defaults(cls: type, params: dict) -> dict:
    """`params` with every parameter left out at its default (the most derived __init__'s wins)."""
    defaults = {n: p.default for klass in reversed(cls.__mro__)
                if "__init__" in klass.__dict__ and klass is not object
                for n, p in inspect.signature(klass.__dict__["__init__"]).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **params}


def check_ranges(cls: type, params: dict, where: str) -> None:
    """A `min_X` above its `max_X` (given, or the default) keeps nothing: say so instead of
    dropping every sample."""
    defaults = {n: p.default for klass in cls.__mro__ if "__init__" in klass.__dict__ and klass is not object
                for n, p in inspect.signature(klass.__dict__["__init__"]).parameters.items()
                if p.default is not inspect.Parameter.empty}
    values = {**defaults, **params}
    for name, low in values.items():
        high = values.get("max_" + name[4:]) if name.startswith("min_") else None
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
        if numbers and low > high:
            raise RecipeError(f"{where}: {name} {low} is above max_{name[4:]} {high}; no sample could pass")
