"""`djx analyze`: one streaming pass over a run's outputs, then stats.csv, the pictures and report.html."""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass

from djx.core.errors import DjxError
from djx.core.io.writers import analysis_dir as default_out_dir  # noqa: F401  (analyze's name for it)

from djx.analyze.collect import Collector
from djx.analyze.dedup_sweep import threshold_sweeps
from djx.analyze.files import replacing, text_cell
from djx.analyze.notes import notes as analysis_notes, page_summary
from djx.analyze.thumbs import image_scope
from djx.analyze.duplicates import DuplicateGroups, deduplicator_indexes, format_groups, read_members
from djx.analyze.plots import FileNames, curve_png, ensure_dir, histogram_png
from djx.analyze.outputs import iter_records, output_paths, read_summary
from djx.analyze.stat_names import LIST_CAP, PLOT_CAP, StatNames, shown_name
from djx.analyze.thresholds import FilterInfo, filters_from_names, filters_from_ops

COLUMNS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


@dataclass
class Analysis:
    out_dir: str
    collector: Collector
    summary: dict | None
    rows: list[dict]           # stats.csv, one dict per stat
    histograms: dict           # stat -> file name under out_dir
    curves: list[dict]         # per filter curve: op, stat, file, readouts
    report: str                # path of report.html

    @property
    def duplicates(self) -> list:
        """Per deduplicator of the run: its groups (duplicates.OpGroups); empty without deduplicators."""
        return self.collector.duplicates.ops


def analyze(export: str, out_dir: str | None = None, ops=None, recipe=None, log=print,
            max_plots: int = PLOT_CAP, stop=None) -> Analysis:
    """Analyze the outputs of the run whose export is `export`. `ops` (op objects) give the filters'
    thresholds; without them, the ops named in the run summary give the stats' filters only. The
    stats of those ops are plotted; when no op is known, the `max_plots` stats most records carry.
    `stop` (a core.run.stop.Stop): once requested, Stopped is raised between records and pictures."""
    paths = output_paths(export)
    summary = read_summary(paths.summary)
    out_dir = out_dir or default_out_dir(export)
    ran = filters_from_names([o.get("name", "") for o in (summary or {}).get("ops") or []])
    filters = filters_from_ops(ops) if ops is not None else ran
    names = StatNames(frozenset(s for f in filters + ran for s in f.stats) or None, max_plots)
    col = Collector(filters, recipe.text_key if recipe else "text", recipe.image_key if recipe else "images", names,
                    _llava_reader(recipe, summary), DuplicateGroups(*deduplicator_indexes(ops, summary)))
    step = _stepper(stop)
    for rec in iter_records(paths.export):
        step()
        col.add(rec, "kept")
    for rec in iter_records(paths.dropped):
        step()
        col.add(rec, "dropped")
    for rec in iter_records(paths.rejected):
        step()
        col.add_rejected(rec)
    _read_late_stats(col, paths)
    col.finish(summary)
    read_members(col.duplicates, paths, col.item_of, step)
    try:
        analysis = _write(col, filters, summary, paths, recipe, ops is not None, ensure_dir(out_dir), log, step)
        threshold_sweeps(ops, paths, analysis.out_dir, _printable(log))  # a semantic deduplicator's thresholds
        return analysis
    except OSError as e:
        raise DjxError(f"cannot write the analysis into {out_dir}: {e.strerror or e}"
                       + (f" ({e.filename})" if e.filename else "")) from None


def _read_late_stats(col: Collector, paths) -> None:
    """A bare export's most frequent stats that first appeared after the sketches were all handed
    out: their values, from a second read of the kept and dropped samples (only when there are such)."""
    late = col.late_names()
    if not late:
        return
    for rec in iter_records(paths.export):
        col.add_values(rec, "kept", late)
    for rec in iter_records(paths.dropped):
        col.add_values(rec, "dropped", late)


def _stepper(stop):
    """What analyze calls between two steps: raises Stopped once `stop` is requested."""
    if stop is None:
        return lambda: None
    return lambda: stop.check("the analysis is not finished: run the same command again to write it")


def _write(col: Collector, filters, summary, paths, recipe, has_recipe: bool, out_dir: str, log,
           step=lambda: None) -> Analysis:
    from djx.analyze.report import write_report
    rows = stats_rows(col)
    write_stats_csv(rows, os.path.join(out_dir, "stats.csv"))
    log = _printable(log)
    log(format_stats(rows, col.byte_stats))
    notes = analysis_notes(col, rows, summary, paths)
    for note in notes:
        log(f"note: {note}")
    if col.duplicates.ops:
        log(format_groups(col.duplicates.ops))
    files = FileNames()
    histograms = _histograms(col, filters, out_dir, files, step)
    curves = _curves(col, filters, out_dir, files, step)
    step()
    report = write_report(out_dir, col, page_summary(summary, col, paths), rows, histograms, curves, filters,
                          image_scope(paths.export, recipe, summary), has_recipe, notes,
                          col.names.others()[:LIST_CAP])
    log(f"[djx] analysis of {paths.export}: {out_dir}/stats.csv, {len(histograms)} histograms, "
        f"{len(curves)} keep-rate curves, {report}")
    return Analysis(out_dir, col, summary, rows, histograms, curves, report)


def _printable(log):
    """`log` for text that may hold what no encoding can write (a stat name with a lone surrogate,
    "\\ud800" in JSON): such characters are printed as escapes."""
    return lambda text: log(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def stats_rows(col: Collector) -> list[dict]:
    rows = []
    for stat in sorted(col.stats):
        s = col.stats[stat]["all"]
        s.flush()
        if s.n == 0:
            continue
        q = s.percentiles([0.25, 0.5, 0.75])
        rows.append({"stat": stat, "count": s.n, "mean": s.mean if s.n else math.nan, "std": s.std,
                     "min": s.min if s.n else math.nan, "25%": q[0], "50%": q[1], "75%": q[2],
                     "max": s.max if s.n else math.nan, "exact": s.is_exact})
    return rows


def write_stats_csv(rows: list[dict], path: str) -> None:
    with replacing(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        w = csv.writer(f)
        w.writerow(("stat",) + COLUMNS)
        for r in rows:
            w.writerow([text_cell(r["stat"]), r["count"]] + [repr(float(r[c])) for c in COLUMNS[1:]])


def format_stats(rows: list[dict], byte_stats=frozenset()) -> str:
    """The stats table as printed: sizes in bytes as sizes (5 MB), other values to 5 digits."""
    from djx.analyze.units import fmt
    if not rows:
        return "no stats in these outputs"
    names = {r["stat"]: shown_name(r["stat"]) for r in rows}  # a received export chooses its stat names
    w = max(len(n) for n in names.values())
    lines = [f"{'stat'.ljust(w)}  " + " ".join(c.rjust(11) for c in COLUMNS)]
    for r in rows:
        lines.append(f"{names[r['stat']].ljust(w)}  {r['count']:>11} " + " ".join(
            (fmt(r[c], True) if r["stat"] in byte_stats else f"{r[c]:.5g}").rjust(11) for c in COLUMNS[1:]))
    return "\n".join(lines)


def _histograms(col: Collector, filters: list[FilterInfo], out_dir: str, files: FileNames,
                step=lambda: None) -> dict:
    bounds, owner = {}, {s: f.name for f in filters for s in f.stats}
    for f in filters:
        for t in f.thresholds:
            bounds.setdefault(t.stat, []).append(t)
    out = {}
    for stat, sketches in sorted(col.stats.items()):
        if sketches["all"].n == 0:
            continue
        step()
        name = files.png("hist", stat)
        histogram_png(stat, sketches, bounds.get(stat, []), owner.get(stat), os.path.join(out_dir, name),
                      stat in col.byte_stats)
        out[stat] = name
    return out


def _curves(col: Collector, filters: list[FilterInfo], out_dir: str, files: FileNames,
            step=lambda: None) -> list[dict]:
    from djx.analyze.readout import readouts, write_keep_rate_csv
    out = []
    by_index = {f.op_index: f for f in filters}
    passing = {g.threshold: g.passing for g in col.galleries}
    for (op_index, stat), curve in sorted(col.curves.items()):
        if not any(v.n for v in curve.sides.values()):
            continue
        step()
        bounds = [t for t in by_index[op_index].thresholds if t.stat == stat]
        name = files.png(f"keep_rate_{op_index}", curve.op, stat)
        read = readouts(curve, bounds, passing)
        curve_png(curve, bounds, [rate for _, _, rate in read["at_bounds"]], os.path.join(out_dir, name),
                  stat in col.byte_stats)
        out.append({"op_index": op_index, "op": curve.op, "stat": stat, "file": name, "reached": curve.reached,
                    "readouts": read, "curve": curve, "bounds": bounds})
    write_keep_rate_csv(out, os.path.join(out_dir, "keep_rate.csv"))
    return out


def _llava_reader(recipe, summary: dict | None):
    """For a run that exported LLaVA records (the recipe given, else the format the summary recorded:
    keys and options only, no op is built): a record -> djx's sample (its text and images)."""
    from djx.core.io.llava import Keys, LlavaOptions, llava_to_djx
    from djx.core.recipe.context import RunContext
    raw = recipe.__dict__ if recipe is not None else ((summary or {}).get("recipe") or {})
    if not isinstance(raw, dict) or raw.get("dataset_format") != "llava":
        return None
    try:
        opts = LlavaOptions.from_dict(dict(raw.get("format_options") or {}))
    except (ValueError, TypeError):
        return None
    if opts.export != "llava":
        return None
    text_keys = raw.get("text_keys") or RunContext.text_key
    keys = Keys(text_keys if isinstance(text_keys, str) else text_keys[0], raw.get("image_key") or RunContext.image_key,
                raw.get("image_special_token") or RunContext.image_special_token,
                raw.get("eoc_special_token") or RunContext.eoc_special_token)
    return lambda rec: llava_to_djx(rec, opts, keys)
