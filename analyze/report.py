"""report.html: one page that opens offline from its folder (no network): the funnel, where the
time went, the stats table, histograms, keep-rate curves, rejections by code, duplicate groups and
galleries near each bound."""
from __future__ import annotations

import os
import re
from collections import Counter

from djx.analyze.collect import Collector
from djx.analyze.files import replacing
from djx.analyze.thumbs import ImageScope, make_thumbs
from djx.analyze.units import fmt
from djx.core.run.breakdown import time_table

TOP = 5  # drop reasons and rejection codes on the first screen

_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _funnel(summary: dict | None, col: Collector) -> list[dict]:
    ops = (summary or {}).get("ops") or []
    top = max([o.get("in", 0) for o in ops] + [1])
    return [{**o, "bar": 100 * o.get("kept", 0) / top} for o in ops]


def _galleries(col: Collector, thumbs: dict) -> list[dict]:
    out = []
    for g in col.galleries:
        sides = {side: [_with_thumbs(item, thumbs) for item in g.items(side)] for side in ("dropped", "kept")}
        if sides["dropped"]:  # a bound that dropped nothing (e.g. max_score 1.0) has nothing to show
            t = g.threshold
            values = [item["value"] for side in sides.values() for item in side]
            out.append({"threshold": t, "reduce": g.reduce, "sides": sides,
                        "label": f"{t.op}.{t.param} = {t.shown(values)}"})
    return out


def _with_thumbs(item: dict, thumbs: dict) -> dict:
    return {**item, "thumbs": [(ref, thumbs.get(ref)) for ref in item["images"]]}


def _duplicate_groups(col: Collector, thumbs: dict) -> list[dict]:
    """Per deduplicator: its counts and largest groups, each member with its thumbnails."""
    return [{"op": op, "groups": [{"group": g, "kept": _with_thumbs(g.kept, thumbs) if g.kept else None,
                                   "duplicates": [_with_thumbs(item, thumbs) for item in g.duplicates]}
                                  for g in op.top]}
            for op in col.duplicates.ops]


def _group_refs(col: Collector) -> list[str]:
    """The images of the samples the duplicate groups show."""
    return [ref for op in col.duplicates.ops for g in op.top for item in ([g.kept] if g.kept else []) + g.duplicates
            for ref in item["images"]]


def _first_screen(col: Collector, summary: dict | None, thumbs: dict) -> dict:
    """The top of the page: the counts (the summary's where it has them), the top drop reasons per
    filter, the top rejection codes with an example each, and the first kept and dropped samples."""
    s = summary or {}
    counts = {k: s[k] if type(s.get(k)) is int else getattr(col, k) for k in ("kept", "dropped", "rejected")}
    ops = [o if isinstance(o, dict) else {} for o in s.get("ops")] if isinstance(s.get("ops"), list) else []
    names = {f.op_index: f.name for f in col.filters}
    names.update({i: o.get("name") for i, o in enumerate(ops) if o.get("name")})
    funnel = {i: o["dropped"] for i, o in enumerate(ops) if type(o.get("dropped")) is int and o["dropped"] > 0}
    dropped = Counter(funnel) if funnel else col.dropped_by  # the summary's, else the dropped file's
    ranked = dropped.most_common()
    drops = [(i, names.get(i, f"op {i}"), n) for i, n in ranked[:TOP]]
    more_drops = _more(ranked[TOP:])
    by_code = s.get("rejected_by_code")
    by_code = Counter({str(c): n for c, n in by_code.items() if type(n) is int}) if isinstance(by_code, dict) else None
    ranked = (by_code or col.rejected_by_code).most_common()
    codes = [(code, n, (col.rejection_examples.get(code) or [{}])[0].get("reason", "")) for code, n in ranked[:TOP]]
    samples = {kind: [_with_thumbs(item, thumbs) for item in items] for kind, items in col.first.items()}
    return {"counts": counts, "drops": drops, "more_drops": more_drops, "codes": codes,
            "more_codes": _more(ranked[TOP:]), "samples": samples, "nothing_kept": _nothing_kept(counts, s, drops)}


def _more(rest: list) -> dict | None:
    """What the top rows leave out: how many more, and their samples."""
    return {"n": len(rest), "samples": sum(n for _, n in rest)} if rest else None


def _nothing_kept(counts: dict, summary: dict, drops: list) -> str | None:
    """The first screen's warning when the run kept nothing: the terminal's (a model filter that
    dropped all), else which op dropped most, or that every sample was rejected."""
    from djx.core.run.summary import nothing_kept_warning
    if counts["kept"] != 0 or not (counts["dropped"] or counts["rejected"]):
        return None
    said = nothing_kept_warning(summary)
    if said:
        return said
    if drops:
        i, name, n = drops[0]
        return (f"the run kept none of its samples: {i}. {name} dropped {n}; check its bounds against the "
                f"histograms and keep-rate curves below")
    return "the run kept none of its samples: every one was rejected (see Rejected as)"


def _shower(col: Collector, filters):
    """The template's `val` filter: a stat's value (or a list of them) as the report prints it,
    sizes for byte stats, digits enough to differ from the stat's bounds and from `near`."""
    bounds: dict[str, list[float]] = {}
    for f in filters:
        for t in f.thresholds:
            bounds.setdefault(t.stat, []).append(t.value)

    def show(value, stat: str = "", near=()):
        if isinstance(value, list):
            return "[" + ", ".join(show(v, stat, near) for v in value) + "]"
        return fmt(value, stat in col.byte_stats, list(near) + bounds.get(stat, []))
    return show


def write_report(out_dir: str, col: Collector, summary: dict | None, rows: list[dict], histograms: dict,
                 curves: list[dict], filters, images: ImageScope, has_recipe: bool, notes=(),
                 other_stats=()) -> str:
    """Write out_dir/report.html (and the thumbnails of the galleries and duplicate groups under
    out_dir/thumbs/); return its path.
    `images`: where image paths resolve, and which are previewed.
    `other_stats`: (name, records carrying it) of stat names listed, not plotted."""
    import jinja2
    refs = [ref for g in col.galleries for side in ("dropped", "kept") for item in g.items(side)
            for ref in item["images"]] + [ref for items in col.first.values() for item in items for ref in item["images"]]
    thumbs = make_thumbs(refs + _group_refs(col), images, out_dir)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v: fmt(v)
    env.filters["val"] = _shower(col, filters)
    env.filters["pct"] = lambda v: "–" if v is None or v != v else f"{v:.1%}"
    page = env.get_template("report.html").render(
        summary=summary or {}, col=col, funnel=_funnel(summary, col), rows=rows,
        columns=("count", "mean", "std", "min", "25%", "50%", "75%", "max"),
        histograms=histograms, curves=curves, galleries=_galleries(col, thumbs),
        first=_first_screen(col, summary, thumbs), timing=time_table(summary or {}),
        duplicates=_duplicate_groups(col, thumbs),
        grouped={op.op_index for op in col.duplicates.ops if op.groups},
        rejections=col.rejected_by_code.most_common(), examples=col.rejection_examples,
        has_recipe=has_recipe, filters=filters, notes=list(notes), other_stats=list(other_stats))
    path = os.path.join(out_dir, "report.html")
    with replacing(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write(_CONTROLS.sub("\ufffd", page))
    return path


# what a page must not hold (NUL, C0 controls but tab and newline, DEL, C1 controls),
# whatever a dataset put in its captions and stat names: shown as U+FFFD
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
