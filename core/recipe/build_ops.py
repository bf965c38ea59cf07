"""A recipe's process list made into ops, with every problem of every op reported at once.

A Data-Juicer recipe may name ops djx does not have and parameters it takes otherwise: one error
lists them all (unknown ops with the closest registered names), so one edit fixes the recipe; with
`skip_unknown_ops: true` the run goes on without the unknown ops and lists them.
"""
from __future__ import annotations

import os

from djx.core.recipe.dj_compat import DJ_OP_KEYS
from djx.core.errors import RecipeError


def problems(errors: list[str], hint: str = "") -> str:
    """One message for all of a recipe's problems: a single one as it is, several one per line."""
    if len(errors) == 1:
        return errors[0] + (f" ({hint})" if hint else "")
    return (f"the recipe has {len(errors)} problems:\n" + "\n".join(f"  - {e}" for e in errors)
            + (f"\n({hint})" if hint else ""))


def build_ops(recipe, load_resources: bool = True) -> list:
    """The recipe's ops, made and validated (plug-ins loaded first); RecipeError naming every
    unknown op (unless skipped) and every bad parameter. Viewers pass load_resources=False: they
    judge from stats and open none of the files a recipe names (Op.load_resources)."""
    from djx.core.op.registry import (FIND_OPS_HINT, build_op, find_op_class, load_custom_ops,
                                   load_entry_point_ops, silent_plugins, unknown_op)
    load_custom_ops(recipe.custom_ops, recipe.base_dir)
    load_entry_point_ops()
    ops, errors, unknown = [], [], False
    for i, (name, params) in enumerate(recipe.process):
        cls = find_op_class(name)
        if cls is None:
            if not recipe.skip_unknown_ops:
                unknown = True
                errors.append(f"process[{i}]: {unknown_op(name)}")
            continue
        try:
            params, _ = without_dj_op_keys(cls, params)
            ops.append(build_op(name, resolve_path_params(cls, params, recipe.base_dir), f"process[{i}].{name}",
                                load_resources))
        except RecipeError as e:
            errors.extend(e.items)
    errors += signature_clashes(ops)
    if errors:
        hint = f"{FIND_OPS_HINT}; skip_unknown_ops: true runs without the unknown ones" if unknown else ""
        hint += "".join(f"; {line}" for line in silent_plugins(recipe.custom_ops, recipe.base_dir)) if unknown else ""
        raise RecipeError(problems(errors, hint))
    if recipe.process and not ops:  # skip_unknown_ops left nothing: the run would only copy its input
        names = ", ".join(name for name, _ in recipe.process)
        raise RecipeError(f"skip_unknown_ops: djx has none of this recipe's {len(recipe.process)} op(s) "
                          f"({names}), so the run would only copy its input; implement them as plug-ins "
                          f"(see docs/plugins.md) or remove skip_unknown_ops to see what each one is")
    return ops


def signature_clashes(ops: list) -> list[str]:
    """Two deduplicators of a kind whose signature Data-Juicer recomputes per op (MinHash) with
    parameters that give other signatures: djx keeps one per sample, so the later op would group by
    the earlier one's; refused, saying how to run them."""
    from djx.core.op.deduplicator import Deduplicator
    from djx.core.run.provenance import op_fingerprint
    first: dict = {}
    errors = []
    for op in ops:
        if not (isinstance(op, Deduplicator) and op.own_signature):
            continue
        for key in op.stats_keys:
            earlier = first.setdefault(key, op)
            if earlier is not op and op_fingerprint(earlier) != op_fingerprint(op):
                errors.append(f"{op.name} after {earlier.name} with other signature parameters: djx keeps one "
                              f"{key} per sample, where Data-Juicer computes each op's anew; run them in two "
                              f"recipes (the second on the first's export), or give both the same parameters")
    return errors


def skipped_ops(recipe) -> list[dict]:
    """[{index, name}] of the ops a skip_unknown_ops recipe runs without (plug-ins loaded)."""
    from djx.core.op.registry import find_op_class
    if not recipe.skip_unknown_ops:
        return []
    return [{"index": i, "name": name} for i, (name, _) in enumerate(recipe.process) if find_op_class(name) is None]


def without_dj_op_keys(cls, params: dict) -> tuple[dict, list[str]]:
    """Params less the Data-Juicer runtime keys this op does not take; and those keys."""
    from djx.core.op.params import describe_params
    takes = {name for name, _, _ in describe_params(cls)}
    dropped = [k for k in params if k in DJ_OP_KEYS and k not in takes]
    return {k: v for k, v in params.items() if k not in dropped}, dropped


def resolve_path_params(cls, params: dict, base_dir: str) -> dict:
    """Params an op lists in `path_params` resolve against the recipe folder when that exists
    (a local model folder); otherwise they stay as given (a hub id)."""
    params = dict(params)
    for key in cls.path_params:
        value = params.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):  # "": the op's default
            candidate = os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))
            if os.path.exists(candidate):
                params[key] = candidate
    return params
