"""report.html: one page that opens offline from its folder (no network): the funnel, the stats
table, histograms, keep-rate curves, rejections by code and galleries near each bound."""
from __future__ import annotations

import os

from djx.analyze.collect import Collector
from djx.analyze.thumbs import make_thumbs

_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _funnel(summary: dict | None, col: Collector) -> list[dict]:
    ops = (summary or {}).get("ops") or []
    top = max([o.get("in", 0) for o in ops] + [1])
    return [{**o, "bar": 100 * o.get("kept", 0) / top} for o in ops]


def _galleries(col: Collector, thumbs: dict) -> list[dict]:
    out = []
    for g in col.galleries:
        sides = {}
        for side in ("dropped", "kept"):
            items = []
            for item in g.items(side):
                items.append({**item, "thumbs": [(ref, thumbs.get(ref)) for ref in item["images"]]})
            sides[side] = items
        if sides["dropped"]:  # a bound that dropped nothing (e.g. max_score 1.0) has nothing to show
            out.append({"threshold": g.threshold, "reduce": g.reduce, "sides": sides})
    return out


def write_report(out_dir: str, col: Collector, summary: dict | None, rows: list[dict], histograms: dict,
                 curves: list[dict], filters, image_folders: list[str], has_recipe: bool, notes=(),
                 other_stats=()) -> str:
    """Write out_dir/report.html (and the gallery thumbnails under out_dir/thumbs/); return its path.
    `other_stats`: (name, records carrying it) of stat names listed, not plotted."""
    import jinja2
    refs = [ref for g in col.galleries for side in ("dropped", "kept") for item in g.items(side)
            for ref in item["images"]]
    thumbs = make_thumbs(refs, image_folders, out_dir)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v: f"{v:.5g}" if isinstance(v, float) else str(v)
    env.filters["pct"] = lambda v: "–" if v is None or v != v else f"{v:.1%}"
    page = env.get_template("report.html").render(
        summary=summary or {}, col=col, funnel=_funnel(summary, col), rows=rows,
        columns=("count", "mean", "std", "min", "25%", "50%", "75%", "max"),
        histograms=histograms, curves=curves, galleries=_galleries(col, thumbs),
        rejections=col.rejected_by_code.most_common(), examples=col.rejection_examples,
        has_recipe=has_recipe, filters=filters, notes=list(notes), other_stats=list(other_stats))
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write(page)
    return path
