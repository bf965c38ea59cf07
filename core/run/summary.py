"""The run summary: written as <stem>.summary.json and printed as a table at the end."""
from __future__ import annotations

from collections import Counter

from djx.core.run.breakdown import format_breakdown, format_timing
from djx.core.run.estimate import format_estimate
from djx.core.plan.resources import peak_rss_bytes, uss_bytes

OPS_SECONDS = "time inside each op's calls, summed over the workers (not wall time)"


def build_summary(recipe, paths, plan, executor, ops, counts, state, report, session_seconds: float,
                  session_samples: int, resumed: bool) -> dict:
    """The summary of a finished run: counts, time and restarts of the whole run (every session of
    a resumed one), this session's rate, per-op tallies, plan, workers, memory."""
    n = state.records
    reports = executor.reports
    loads = {rank: rep.loads for rank, rep in reports.items()}
    worker_uss = {rank: rep.peak_uss for rank, rep in reports.items()}
    return {
        "project_name": recipe.project_name, "dataset_path": recipe.dataset_path,
        "input": n, "kept": counts.kept, "dropped": counts.dropped,
        "rejected": counts.rejected, "blank_lines": state.blank_lines,
        "rejected_share": round(counts.rejected / max(n, 1), 4),
        "rejected_by_code": dict(sorted(counts.rejected_by_code.items(), key=lambda kv: -kv[1])),
        "ops": [{"name": op.name, "in": c.seen, "kept": c.kept, "dropped": c.dropped, "rejected": c.rejected,
                 "seconds": round(c.seconds, 3), "reused_stats": c.reused, "uses_model": bool(op.model_specs()),
                 "phases": {k: round(v, 3) for k, v in c.phases.items()},
                 **({"with_images": c.with_images} if op.uses_images else {})}
                for op, c in zip(ops, counts.ops)],
        "skipped_ops": recipe.skipped_ops(),  # unknown ops a skip_unknown_ops recipe ran without
        "recipe": {**recipe.to_dict(), "process": ran_process(recipe, ops), "base_dir": recipe.base_dir},  # what ran
        "ops_seconds_are": OPS_SECONDS,
        "seconds": round(counts.seconds, 3),
        # the rate of this session: samples it processed over its own time
        "samples_per_second": round(session_samples / max(session_seconds, 1e-9), 2),
        "session": {"samples": session_samples, "seconds": round(session_seconds, 3)},
        "resumed": resumed, "executor": recipe.executor, "workers": plan.workers,
        "events": counts.events,
        "plan": {"devices": list(plan.devices), "threads_per_worker": plan.threads_per_worker,
                 "model_bytes": plan.model_bytes, "notes": list(plan.notes)},
        "model_loads": loads,
        # the number that must be 1: how often any one model was loaded in any one process
        "max_model_loads_per_process": max((n for v in loads.values() for n in v.values()), default=0),
        "worker_restarts": counts.restarts,
        "devices": {rank: {"device": rep.device, "peak_device_bytes": rep.peak_device_bytes}
                    for rank, rep in reports.items()},
        "memory": {"main_peak_rss_bytes": peak_rss_bytes(), "main_peak_uss_bytes": uss_bytes(),
                   "worker_peak_uss_bytes": worker_uss,
                   "worker_peak_uss_bytes_max": max(worker_uss.values(), default=0),
                   "worker_peak_rss_bytes": {rank: rep.peak_rss for rank, rep in reports.items()},
                   **_shared_memory(reports)},
        "outputs": {"export": paths.export, "dropped": paths.dropped if recipe.export_dropped else None,
                    "rejected": paths.rejected, "summary": paths.summary},
        "check": report.to_dict(),
    }


def ran_process(recipe, ops: list) -> list[dict]:
    """The summary's `process`: the recipe's list, or for ops made in Python (Pipeline(ops=[...])),
    each op's name and parameters as a recipe would say them; `djx check`, `explain` and `analyze`
    read the thresholds from it."""
    if recipe.process or not ops:
        return [{name: dict(params)} for name, params in recipe.process]
    return [{op.name or type(op).__name__: op.params()} for op in ops]


def _shared_memory(reports: dict) -> dict:
    """Per worker PSS (peak, and at its last report or the run's end) and, per device, the bytes of the one shared
    weight copy its workers map (empty when models are not shared)."""
    per_device: dict = {}
    for rep in reports.values():
        for label, n in rep.shared_bytes.items():
            per_device.setdefault(rep.device, {})[label] = n
    return {"worker_peak_pss_bytes": {rank: rep.peak_pss for rank, rep in reports.items()},
            "worker_last_uss_bytes": {rank: rep.uss for rank, rep in reports.items()},
            "worker_last_pss_bytes": {rank: rep.pss for rank, rep in reports.items()},
            "shared_weight_bytes_per_device": {d: sum(v.values()) for d, v in per_device.items()}}


def _mb(b) -> str:
    return f"{(b or 0) / (1 << 20):,.0f} MB"


def _rate(s: dict) -> str:
    """' (N samples/s after a start-up of X s)': the processing rate, start-up apart."""
    t = s.get("timing")
    if not t:
        return f" ({s['samples_per_second']:.1f} samples/s)"
    return f" ({t['steady_samples_per_second']:.1f} samples/s after a start-up of {t['startup_seconds']:.1f} s)"


def format_summary(s: dict) -> str:
    lines = [f"djx run '{s.get('project_name', '')}': {s['input']} in = {s['kept']} kept + "
             f"{s['dropped']} dropped + {s['rejected']} rejected"
             + (f" ({s['blank_lines']} blank line{'' if s['blank_lines'] == 1 else 's'} skipped)"
                if s.get("blank_lines") else "")
             + (f"  in {s['seconds']:.1f} s over all sessions; this session {s['session']['samples']} samples "
                f"at {s['samples_per_second']:.1f} samples/s" if s.get("resumed") and s.get("session") else
                f"  in {s['seconds']:.1f} s" + _rate(s))]
    t = s.get("timing")
    if t:
        lines.append(f"  time: {format_timing(t)}")
    if s.get("rejected"):
        top = ", ".join(f"{code} {n}" for code, n in list((s.get("rejected_by_code") or {}).items())[:5])
        lines.append(f"  rejected: {s.get('rejected_share', 0):.1%} of the input" + (f" ({top})" if top else ""))
    else:
        lines.append("  rejected: none")
    ops = s.get("ops") or []
    if ops:
        names, total, nth = [], Counter(o["name"] for o in ops), Counter()
        for o in ops:  # an op named twice (two alphanumeric_filters): #1, #2 in the recipe's order
            nth[o["name"]] += 1
            names.append(f"{o['name']} #{nth[o['name']]}" if total[o["name"]] > 1 else o["name"])
        w = max(map(len, names))
        lines.append(f"  {'op'.ljust(w)}  {'in':>8} {'kept':>8} {'dropped':>8} {'rejected':>8} {'op-sec*':>8}")
        for name, o in zip(names, ops):
            lines.append(f"  {name.ljust(w)}  {o['in']:>8} {o['kept']:>8} {o['dropped']:>8} "
                         f"{o['rejected']:>8} {o['seconds']:>8.2f}")
        lines.append(f"  * op-sec: {OPS_SECONDS}, over {s.get('workers')} worker(s)")
    lines += format_breakdown(s)
    lines += _reused_and_skipped(s)
    mem = s.get("memory", {})
    lines.append(f"  workers: {s.get('workers')}, loads of one model per process (max): "
                 f"{s.get('max_model_loads_per_process', 0)}, worker restarts: {s.get('worker_restarts', 0)}")
    lines.append(f"  peak memory: main USS {_mb(mem.get('main_peak_uss_bytes'))}, worker USS max "
                 f"{_mb(mem.get('worker_peak_uss_bytes_max'))}, worker PSS max "
                 f"{_mb(max((mem.get('worker_peak_pss_bytes') or {}).values(), default=0))}"
                 + "".join(f", {dev} shared weights {_mb(n)}"
                           for dev, n in (mem.get("shared_weight_bytes_per_device") or {}).items()))
    lines += format_estimate(s)
    check = s.get("check") or {}
    lines.append("  check: " + ("passed" if check.get("ok") else "FAILED") )
    outs = s.get("outputs") or {}
    shards = outs.get("export_files") or []
    for k in ("export", "stats", "dropped", "rejected", "summary"):
        if k == "export" and shards and shards != [outs.get("export")]:  # the name reads them all back
            lines.append(f"  export: {outs['export']} = {len(shards)} shard{'s' if len(shards) > 1 else ''} "
                         f"{shards[0]}" + (f" ... {shards[-1]}" if len(shards) > 1 else ""))
        elif outs.get(k):
            lines.append(f"  {k}: {outs[k]}")
    return "\n".join(lines)


def _reused_and_skipped(s: dict) -> list[str]:
    """Filters that reused the stats samples carried (no recompute), and unknown ops skipped."""
    reused = [f"{o['name']} {o['reused_stats']}" for o in s.get("ops") or [] if o.get("reused_stats")]
    skipped = [f"process[{o['index']}] {o['name']}" for o in s.get("skipped_ops") or []]
    lines = ([f"  stats reused (samples that carried them, not recomputed): {', '.join(reused)}"] if reused else []) \
        + ([f"  skipped (unknown ops, skip_unknown_ops): {', '.join(skipped)}"] if skipped else [])
    for o in s.get("ops") or []:
        if o.get("uses_model") and o["in"] and o.get("reused_stats") == o["in"]:
            loaded = s.get("max_model_loads_per_process", 0) > 0  # a model loaded anyway is said, not hidden
            lines.append(f"  warning: {o['name']} computed nothing: it reused the stats all {o['in']} samples carried"
                         + (" (models were loaded all the same)" if loaded else ", and ran no model")
                         + " (recompute_stats: true recomputes them)")
    for o in s.get("ops") or []:
        if o.get("with_images") == 0 and o["in"] and not o.get("reused_stats"):
            lines.append(f"  warning: {o['name']} saw no sample with images under image_key "
                         f"{(s.get('recipe') or {}).get('image_key', 'images')!r} (of the {o['in']} that reached it), "
                         f"so it judged no image: is image_key the field that lists each sample's images?")
    warning = nothing_kept_warning(s)
    lines += [f"  warning: {warning}"] if warning else []
    unmatched = (s.get("events") or {}).get("stats_rows_unmatched")
    if unmatched:
        lines.append(f"  warning: {unmatched} row(s) of the stats file beside the input are not its records' "
                     f"(edited or reordered since djx wrote them): not used, those stats were computed again")
    foreign, unkeyed = (s.get("events") or {}).get("foreign_stats_dropped"), s.get("stats_key_problem")
    if foreign and unkeyed:
        lines.append(f"  note: {foreign} stat value(s) in the input were dropped, not reused: djx can vouch for none: "
                     f"{unkeyed}")
    elif foreign:
        lines.append(f"  note: {foreign} stat value(s) in the input that djx did not write were dropped, not reused "
                     f"(trust_input_stats: true reuses and keeps them, e.g. for a Data-Juicer export)")
    elif unkeyed:
        lines.append(f"  warning: this run's stats are not signed, so no later run reuses them, and it cannot be "
                     f"resumed: {unkeyed}")
    llava = (s.get("events") or {}).get("foreign_llava_dropped")
    if llava:
        lines.append(f"  note: {llava} record(s) carried a __dj__llava__ field djx did not sign (a djx-format input): "
                     f"dropped, so no image or LLaVA turn is taken from it")
    return lines


def nothing_kept_warning(s: dict, many: int = 20) -> str | None:
    """A warning when a run of many samples kept none and a model filter dropped some: most often a
    model whose scores mean nothing on this data (the demo's tiny models on real photos), or a bound
    on another scale than the model's. Said at the run's end and on the report's first screen."""
    ops = s.get("ops") if isinstance(s.get("ops"), list) else []
    dropping = [o for o in ops if isinstance(o, dict) and o.get("uses_model") and type(o.get("dropped")) is int
                and o["dropped"] > 0]
    if s.get("kept") != 0 or not isinstance(s.get("input"), int) or s["input"] < many or not dropping:
        return None
    worst = max(dropping, key=lambda o: o["dropped"])
    return (f"the run kept none of its {s['input']} samples; {worst.get('name')} dropped {worst['dropped']} "
            f"of the {worst.get('in')} it saw: check its model and bounds (the demo's tiny models mean nothing on "
            f"real photos); `djx analyze` shows the scores against the bounds")


SYSTEMATIC_SHARE = 0.9  # rejected samples (one code, or all codes together) for this share of the input: failed


def first_reason(rejected_path: str, code: str) -> str | None:
    """The reason of the first rejection with `code` in a rejected file (None if unreadable)."""
    from djx.core.errors import DjxError
    from djx.core.io.output_reader import iter_output
    try:
        for _, rec in iter_output(rejected_path):
            if rec.get("code") == code:
                reason = str(rec.get("reason"))
                return reason if len(reason) <= 300 else reason[:300].rsplit(" ", 1)[0] + " ..."
    except (OSError, ValueError, DjxError):
        return None
    return None


def systematic_rejection(rejected_by_code: dict, records: int, rejected_path: str) -> str | None:
    """Why a finished run failed when nearly every sample was rejected (SYSTEMATIC_SHARE of its
    `records`, for one reason or several together: images not where the records say, a text key that
    is not there), quoting the first reason of the commonest code; None when it did its job. The
    caller skips it where the recipe sets its own bound (max_rejected_fraction)."""
    if not records:
        return None
    total = sum(rejected_by_code.values())
    if total < SYSTEMATIC_SHARE * records:
        return None
    code, n = max(rejected_by_code.items(), key=lambda kv: kv[1])
    example = first_reason(rejected_path, code)
    quoted = f' (e.g. "{example}")' if example else ""
    if n >= SYSTEMATIC_SHARE * records:
        what = f"{n} of {records} samples ({n / records:.1%}) were rejected as {code}{quoted}"
    else:
        codes = ", ".join(f"{c} {k}" for c, k in sorted(rejected_by_code.items(), key=lambda kv: -kv[1]))
        what = (f"{total} of {records} samples ({total / records:.1%}) were rejected ({codes})"
                + (f'; {code} e.g. "{example}"' if example else ""))
    return (f"{what}: the input does not match the recipe. The outputs are written ({rejected_path} has every "
            f"reason); set max_rejected_fraction: 1.0 to accept such a run")
