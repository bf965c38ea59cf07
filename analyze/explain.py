"""`djx explain EXPORT ID`: one sample's journey through a finished run, read from its outputs.

Which output holds the sample (kept, dropped or rejected), and for each op of the recipe: its
thresholds, the stats the sample carries for it, and its verdict (passed, the drop reason naming
the stat, value and threshold, the rejection, or not reached). Nothing is recomputed: the verdicts
are the run's, re-read from the recorded stats with the recipe's ops.
"""
from __future__ import annotations

import json

from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY
from djx.core.errors import DjxError
from djx.analyze.outputs import read_summary
from djx.core.op.base import Filter
from djx.core.io.terminal_text import safe

MAX_MATCHES = 5  # a --where selector that matches more shows this many


def find_samples(paths, pos: int | None, where: tuple[str, str] | None) -> list[tuple[str, str, dict]]:
    """[(kind, file, record)] of the samples of a run's outputs with position `pos` or field = value."""
    from djx.core.io.output_reader import export_files, iter_output
    if not export_files(paths.export):
        raise DjxError(f"no such output: {paths.export}")
    found = []
    for kind, path in (("kept", paths.export), ("dropped", paths.dropped), ("rejected", paths.rejected)):
        if not export_files(path):
            continue
        for _, rec in iter_output(path):
            if _matches(kind, rec, pos, where):
                found.append((kind, path, rec))
                if len(found) >= MAX_MATCHES:
                    return found
    return found


def _matches(kind: str, rec: dict, pos: int | None, where: tuple[str, str] | None) -> bool:
    if pos is not None:
        return rec.get(POSITION_KEY) == pos
    field, value = where
    sample = rec.get("record") if kind == "rejected" and isinstance(rec.get("record"), dict) else rec
    return field in sample and _text(sample[field]) == value


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def recipe_ops(recipe_path: str | None, summary: dict | None, custom_ops=()) -> list | None:
    """The run's ops: from `--recipe`, else from the recipe its summary recorded; None if neither.

    A summary is data someone may have handed over: the plug-ins it records are never imported.
    Only what the user names (`--recipe`, `--custom-ops`) loads code; a recorded recipe whose ops
    need plug-ins the user did not name is shown by op name (None)."""
    from djx.core.recipe.recipe import load_recipe
    if recipe_path:
        return load_recipe(recipe_path, custom_ops=list(custom_ops)).build_ops(load_resources=False)
    try:
        recipe = recorded_recipe(summary, custom_ops)
        return recipe.build_ops(load_resources=False) if recipe is not None else None
    except DjxError:
        if _recorded_plugins(summary) and not custom_ops:
            return None  # its plug-ins are not loaded: the journey names the ops
        raise


def recorded_recipe(summary: dict | None, custom_ops=()):
    """The effective recipe a run's summary recorded (its --set overrides included), with only the
    plug-ins the user names now (`custom_ops`), never the recorded ones; None when none is recorded.
    Its ops are not built here."""
    from djx.core.recipe.recipe import recipe_from_dict
    recorded = (summary or {}).get("recipe")
    if not isinstance(recorded, dict) or not recorded.get("process"):
        return None
    raw = {k: v for k, v in recorded.items() if k not in ("base_dir", "custom_ops")}
    raw["custom_ops"] = list(custom_ops)
    return recipe_from_dict(raw, base_dir=str(recorded.get("base_dir", ".")))


def _recorded_plugins(summary: dict | None) -> list:
    recorded = (summary or {}).get("recipe")
    plugins = recorded.get("custom_ops") if isinstance(recorded, dict) else None
    return [str(p) for p in plugins] if isinstance(plugins, list) else []


def run_recipe(recipe_path: str | None, summary: dict | None, custom_ops=()):
    """The run's recipe (`--recipe`, else the one its summary recorded; ops not built), or None."""
    from djx.core.recipe.recipe import load_recipe
    try:
        return load_recipe(recipe_path, custom_ops=list(custom_ops)) if recipe_path \
            else recorded_recipe(summary, custom_ops)
    except DjxError:
        return None


def text_the_ops_saw(sample, recipe) -> str | None:
    """The text a LLaVA record's filters judged (dataset_format: llava maps the record's turns to
    one `[[human]]: ... [[gpt]]: ...` text), or None for a sample in djx's format, shown as it is."""
    from djx.core.io.llava import FormatError, llava_to_djx
    from djx.core.run.formats import keys_of
    if recipe is None or recipe.dataset_format != "llava" or not isinstance(sample, dict) \
            or "conversations" not in sample:
        return None
    ctx = recipe.run_context()
    try:
        return llava_to_djx(sample, ctx.llava, keys_of(ctx)).get(ctx.text_key)
    except FormatError:
        return None


def journey(kind: str, path: str, rec: dict, ops: list | None, summary: dict | None, recipe=None) -> list[str]:
    """The lines that tell one sample's journey (`recipe`: the run's, for the text its ops saw)."""
    sample = rec.get("record") if kind == "rejected" else rec
    lines = [f"sample {POSITION_KEY}={rec.get(POSITION_KEY)}: {kind}, in {path}"]
    if isinstance(sample, dict):
        lines += [f"  {_short(k, 80)}: {_short(v)}" for k, v in sample.items() if not k.startswith("__dj")]
    seen = text_the_ops_saw(sample, recipe)
    if seen is not None:  # LLaVA turns: the one text the text filters judged, as they judged it
        lines.append(f"  text the ops saw (dataset_format: llava): {_short(json.dumps(seen, ensure_ascii=False), 1000)}")
    mapped = (rec.get(DROP_KEY) or {}).get("text_as_read") if kind == "dropped" else rec.get("text_seen")
    if isinstance(mapped, str):  # a mapper changed the text: the other text the verdict involves
        lines.append(f"  {'text as read' if kind == 'dropped' else 'text the op saw'}: {_short(mapped)}")
    elif kind == "rejected" and rec.get("raw") is not None:  # a line that was no JSON object: as read
        lines.append(f"  raw: {_short(rec.get('raw'))}")
    stats = (rec.get(STATS_KEY) if kind != "rejected" else None) or {}
    if ops is None:
        names = [o["name"] for o in (summary or {}).get("ops", [])]
        plugins = _recorded_plugins(summary)
        hint = ("the run used plug-ins, not loaded from its summary: give --recipe or --custom-ops "
                f"{' '.join(plugins)}" if plugins else "no recipe: give --recipe")
        lines.append(f"  ({hint} for each op's thresholds)" + (f"; ops: {', '.join(names)}" if names else ""))
        lines.append(f"  stats: {_short(stats)}")
        lines.append("  verdict: " + _verdict_of(kind, rec))
        return lines
    stop = _stop_index(kind, rec, ops)
    if stop < 0:
        where = f"at op {rec['op']} (not in this recipe)" if rec.get("op") else "before any op (its input)"
        return lines + [f"  REJECTED {where} ({rec.get('code')}): {rec.get('reason')}"]
    for k, op in enumerate(ops):
        lines += _op_lines(k, op, kind, rec, stats, stop)
    return lines


def _stop_index(kind: str, rec: dict, ops: list) -> int:
    """The op the sample left the chain at (len(ops) for a kept one; -1: before any op)."""
    if kind == "kept":
        return len(ops)
    if kind == "dropped":
        return (rec.get(DROP_KEY) or {}).get("op_index", len(ops))
    names = [op.name for op in ops]
    return names.index(rec["op"]) if rec.get("op") in names else -1


def _op_lines(k: int, op, kind: str, rec: dict, stats: dict, stop: int) -> list[str]:
    head = f"  op {k} {op.name}"
    if isinstance(op, Filter):
        bounds = _thresholds(op)
        head += f"  [{bounds}]" if bounds else ""
    if k > stop:
        return [head, "      not reached"]
    out = [head]
    if isinstance(op, Filter):
        mine = {key: stats[key] for key in op.stats_keys if key in stats}
        if mine:
            out.append("      stats: " + ", ".join(f"{key}={_short(v)}" for key, v in mine.items()))
    if k < stop:
        out.append("      " + (_passed(op, stats) if isinstance(op, Filter) else "applied"))
    elif kind == "dropped":
        out.append(f"      DROPPED: {(rec.get(DROP_KEY) or {}).get('reason')}")
    else:
        out.append(f"      REJECTED ({rec.get('code')}): {rec.get('reason')}")
    return out


def _passed(op, stats: dict) -> str:
    """A filter the sample passed in the run; said again if these thresholds would now drop it."""
    from djx.core.run.chain import _verdict
    from djx.core.op.reasons import default_reason
    if not all(key in stats for key in op.stats_keys):
        return "passed (its stats are not in this output)"
    try:
        keep, why = _verdict(op, op.keep(dict(stats)))
    except Exception as e:  # noqa: BLE001  keep() of a plug-in on what it did not expect
        return f"passed (keep() on the recorded stats raised {type(e).__name__})"
    return "passed" if keep else f"passed in the run, but fails these thresholds: {why or default_reason(op, stats)}"


def _thresholds(op) -> str:
    """The op's verdict parameters under their recipe names, as given or by default (`lang` of
    language_id_score_filter, `max_size` as '1TB'), then the range switches the recipe set."""
    from djx.core.op.params import with_defaults
    from djx.core.op.range_filter import RANGE_SWITCHES
    params = with_defaults(type(op), op.params())
    verdict = op.verdict_params
    shown = [(k, v) for k, v in params.items() if k not in RANGE_SWITCHES and (
        k in verdict if verdict is not None else k.startswith(("min_", "max_")) or k in ("any_or_all", "reduce_mode"))]
    shown += [(k, v) for k, v in op.params().items() if k in RANGE_SWITCHES]  # as the recipe set them
    # the bounds as the recipe gave them (a float in full: the values it is compared with may be that
    # close; null: no bound)
    return ", ".join(f"{k} {_bound(v)}" for k, v in shown)


def _bound(v) -> str:
    from djx.core.op.reasons import fmt
    return "none" if v is None else v if isinstance(v, str) else repr(v) if isinstance(v, float) else fmt(v)


def _verdict_of(kind: str, rec: dict) -> str:
    if kind == "dropped":
        drop = rec.get(DROP_KEY) or {}
        return f"dropped by op {drop.get('op_index')} {drop.get('op')}: {drop.get('reason')}"
    if kind == "rejected":
        return f"rejected ({rec.get('code')}) at {rec.get('op') or 'input'}: {rec.get('reason')}"
    return "kept"


def _short(v, n: int = 160) -> str:
    text = _text(v)
    return text if len(text) <= n else text[:n] + "..."


def explain(export: str, sample_id: str | None, where: str | None, recipe: str | None = None,
            custom_ops=()) -> str:
    """The journey of the sample(s) at position `sample_id`, or whose FIELD=VALUE (`where`), told."""
    from djx.core.io.outputs import OutputPaths
    if (sample_id is None) == (where is None):
        raise DjxError("give the sample's __dj__pos__ (djx explain EXPORT 17) or --where FIELD=VALUE, not both")
    pos, selector = None, None
    if sample_id is not None:
        try:
            pos = int(sample_id)
        except ValueError:
            raise DjxError(f"sample id {sample_id!r}: the __dj__pos__ is a number; select by another field "
                           f"with --where FIELD=VALUE (e.g. --where id={sample_id})") from None
    else:
        field, eq, value = where.partition("=")
        if not eq or not field:
            raise DjxError(f"--where expects FIELD=VALUE, got {where!r}")
        selector = (field.strip(), value)
    paths = OutputPaths.for_export(export)
    try:
        summary = read_summary(paths.summary)
    except DjxError as e:
        raise DjxError(f"{e}; give --recipe") from None
    found = find_samples(paths, pos, selector)
    if not found:
        what = f"{POSITION_KEY} {pos}" if pos is not None else f"{selector[0]}={selector[1]}"
        raise DjxError(f"no sample with {what} in the outputs of {paths.export} (kept, dropped, rejected)")
    ops = recipe_ops(recipe, summary, custom_ops)
    run = run_recipe(recipe, summary, custom_ops)
    # what the outputs hold is the dataset's: its control characters must not act on the terminal
    blocks = ["\n".join(safe(line) for line in journey(kind, path, rec, ops, summary, run))
              for kind, path, rec in found]
    if len(found) >= MAX_MATCHES and selector:
        blocks.append(f"(the first {MAX_MATCHES} matches; select one by its {POSITION_KEY})")
    return "\n\n".join(blocks)
