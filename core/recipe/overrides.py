"""Overrides of a recipe's keys, as a user types them: `--set KEY=VALUE`, and Data-Juicer's own
command line (`dj-process --config r.yaml --np 4 --export_path p --OP.PARAM V`).

Keys are dotted: `np`, `format_options.only_keep_caption`, `process.3.OP.PARAM`, or `OP.PARAM` when
OP appears once in the recipe (several times: the error lists each place to pick from). A place that
does not exist is named as it is (the op at that index), never merged into a neighbour.
"""
from __future__ import annotations

import yaml

from djx.core.errors import RecipeError


def parse_set(items: list[str]) -> dict:
    """`--set KEY=VALUE` pairs; values are YAML (so 8 is an int, true a bool, [a, b] a list)."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise RecipeError(f"--set expects KEY=VALUE, got {item!r}")
        key, _, value = item.partition("=")
        out[key.strip()] = _yaml_value(value, f"--set {item}", key.strip())
    return out


def _yaml_value(value: str, where: str, key: str, flag: str = "--set"):
    from djx.core.recipe.bounded_yaml import YamlTooLarge, safe_load_bounded
    try:
        return safe_load_bounded(value) if value.strip() else ""
    except YamlTooLarge as e:
        raise RecipeError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise RecipeError(f"{where}: the value is not valid YAML ({str(e).splitlines()[0]}); "
                          f"quote a string value, e.g. {flag} '{key}=\"{value}\"'") from None


def dj_options(tokens: list[str], own_options: set[str]) -> tuple[list[str], dict]:
    """Split `tokens` into the options djx's parser knows (`own_options`: its exact spellings, which
    also match with `_` for `-`: --export_path, --dry_run) and Data-Juicer's `--KEY VALUE` /
    `--KEY=VALUE` overrides (KEY a recipe key or OP.PARAM; a KEY followed by no value is true);
    Data-Juicer's `--custom-operator-paths P...` becomes djx's `--custom-ops P` for each."""
    rest, overrides, i = [], {}, 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, inline = token.partition("=")
        if not token.startswith("--") or token == "--" or name in own_options:
            rest.append(token)
        elif name.replace("_", "-") in own_options:
            rest.append(name.replace("_", "-") + eq + inline)
        elif name in ("--custom-operator-paths", "--custom_operator_paths"):  # Data-Juicer's, nargs="+"
            values = [inline] if eq else []
            while not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                values, i = values + [tokens[i + 1]], i + 1
            rest += [arg for v in values for arg in ("--custom-ops", v)]
        else:
            key = name[2:]
            if eq:
                value = inline
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = "true"
            overrides[key] = _yaml_value(value, f"--{key}", key)
        i += 1
    return rest, overrides


def apply_overrides(raw: dict, overrides: dict, fields) -> None:
    """Set each dotted key of `overrides` in the raw recipe mapping (in place). `fields`: the recipe's
    own keys (a first part that is none of them but names an op is OP.PARAM)."""
    for key, value in overrides.items():
        _set_dotted(raw, _placed_key(raw, key, fields), value, key)


def _op_places(raw: dict) -> list[tuple[int, str]]:
    process = raw.get("process")
    if not isinstance(process, list):
        return []
    return [(i, next(iter(e))) for i, e in enumerate(process) if isinstance(e, dict) and len(e) == 1]


def _placed_key(raw: dict, key: str, fields) -> str:
    """`key` with an op's place made explicit (OP.PARAM -> process.N.OP.PARAM), checked against the
    recipe: the index exists and holds that op."""
    parts = key.split(".")
    places = _op_places(raw)
    if parts[0] == "process" and len(parts) >= 3 and parts[1].isdigit():
        index, name = int(parts[1]), parts[2]
        if index >= len(places):
            raise RecipeError(f"--set {key}: the recipe has {len(places)} op{'s' * (len(places) != 1)} (process.0 to "
                              f"process.{len(places) - 1}), none at {index}" + _where(places, name, parts[3:]))
        if places[index][1] != name:
            raise RecipeError(f"--set {key}: process.{index} is {places[index][1]}, not {name}"
                              + _where(places, name, parts[3:]))
        return key
    if len(parts) >= 2 and parts[0] not in fields and parts[0] != "process":
        indices = [i for i, n in places if n == parts[0]]
        if len(indices) == 1:
            return ".".join(["process", str(indices[0])] + parts)
        if len(indices) > 1:
            rest = ".".join(parts[1:])
            raise RecipeError(f"--set {key}: {parts[0]} appears {len(indices)} times in the recipe; say which: "
                              + ", ".join(f"process.{i}.{parts[0]}.{rest}" for i in indices))
        if parts[0].endswith(("_filter", "_mapper", "_deduplicator")):
            ops = ", ".join(n for _, n in places) or "none"
            raise RecipeError(f"--set {key}: the recipe has no op {parts[0]} (its ops: {ops})")
    return key


def _where(places, name: str, rest: list[str]) -> str:
    indices = [i for i, n in places if n == name]
    if not indices:
        return f"; the recipe has no {name}"
    tail = ".".join(rest)
    return "; " + name + " is at " + ", ".join(f"process.{i}" for i in indices) + \
        (f" (--set process.{indices[0]}.{name}.{tail}=...)" if len(indices) == 1 and tail else "")


def _set_dotted(raw: dict, key: str, value, given: str) -> None:
    """Set raw['a']['b'][0]... from 'a.b.0'; list indices are numbers."""
    parts = key.split(".")
    try:
        node = raw
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list):
                node = node[int(part)]
            else:
                if node.get(part) is None:
                    node[part] = [] if parts[i + 1].isdigit() else {}
                node = node[part]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    except (ValueError, IndexError, TypeError, AttributeError, KeyError):
        raise RecipeError(f"--set {given}: no such place in the recipe") from None
