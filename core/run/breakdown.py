"""Where a run's time went: per model op (decode, preprocess, wait for the scorer, transfer,
forward, the scorer's busy time) and in the main process (read, write), for the summary and the
report. This is what a device check reads first: a device idle while the workers wait on each
other, or a main process that caps the run, shows here.

An op reports a phase by adding seconds to `batch.counters["time.<phase>"]` (`timed`); the chain
sums them per op (OpCounts.phases). The device's scorer reports its phases with the first request
of each group it scores, so they are counted once per forward, not once per batch. On a GPU the
host's clock sees asynchronous work when it is waited for: a transfer's time shows in the forward
that follows it.
"""
from __future__ import annotations

import contextlib
import time

PHASE = "time."
BUSY_OF = "of its time from its first call to its last"  # what the scorer's busy share is a share of

# the phases in the order a sample meets them, with the words the summary prints
STEPS = (("decode", "decode"), ("preprocess", "preprocess"), ("wait", "wait for the scorer"),
         ("assemble", "assemble (scorer)"), ("transfer", "transfer"),
         ("device_decode", "of it JPEG decode and resize on the device"), ("forward", "forward"))


@contextlib.contextmanager
def timed(counters: dict | None, phase: str):
    """Add the block's wall time to `counters` under phase `phase` (no-op without counters)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if counters is not None:
            key = PHASE + phase
            counters[key] = counters.get(key, 0.0) + time.perf_counter() - t0


def add_counters_and_phases(given: dict, counters: dict, phases: dict) -> None:
    """An op call's counters summed into the run's `counters`, its `time.*` ones into the op's `phases`."""
    for k, v in given.items():
        if k.startswith(PHASE):
            phases[k[len(PHASE):]] = phases.get(k[len(PHASE):], 0.0) + v
        else:
            counters[k] = counters.get(k, 0) + v


def forward_timed(score, counters: dict | None):
    """`score()`, its wall time added to `counters` as the forward's, less the transfer it timed."""
    before = (counters or {}).get(PHASE + "transfer", 0.0)
    t0 = time.perf_counter()
    try:
        return score()
    finally:
        if counters is not None:
            moved = counters.get(PHASE + "transfer", 0.0) - before
            counters[PHASE + "forward"] = counters.get(PHASE + "forward", 0.0) + time.perf_counter() - t0 - moved


def breakdown(ops: list[dict], main: dict, processing_seconds: float) -> dict:
    """The summary's `time_breakdown`: the main process's read and write seconds, each op's
    phases, and the scorer's busy share (where it scored): of its time from its first call to its
    last (`scorer_span`; several scorers: their spans summed). Not of the processing time: on Ray
    that starts when the first batch enters its last stage, after earlier stages' ops were scored."""
    out = {"processing_seconds": round(processing_seconds, 3),
           "main": {k: round(v, 3) for k, v in main.items()}, "ops": {}}
    busy = span = 0.0
    for o in ops:
        phases = o.get("phases") or {}
        if phases:
            out["ops"][o["name"]] = {k: round(v, 3) for k, v in phases.items()}
            busy += phases.get("scorer_busy", 0.0)
            span += phases.get("scorer_span", 0.0)
    if busy:
        out["scorer_busy_share"] = round(busy / max(span or processing_seconds, 1e-9), 3)
    return out


def startup_parts(executor, clock) -> dict:
    """The start-up's parts in seconds (the summary's timing.startup_parts), from the wall-clock
    instants the main process and its workers took: `main` (recipe, plan, the input's size, until
    the engine started), `workers_start` (until the last worker's code ran: process start, the
    forkserver's imports), `worker_setup` (the slowest worker's own: imports, ops, models or their
    processors; of it, each the most a worker took: `imports`, the ops, plug-ins and chain;
    `host_side`, the processors of the ops the device's scorer scores, loaded while it loads their
    weights; `scorer_wait`, waiting for it to finish loading them),
    `first_batch` (from every worker ready to the first batch read); with a device's scorer, its
    own: `scorer_start` (until its process ran), `scorer_imports` (torch, the device, the ops),
    `scorer_load` (then until its models were loaded), on a GPU `scorer_device` (its start until
    the device's context was made, beside the imports). On Ray (an executor with `connected_at`):
    `ray_init` (until Ray was there: started, or joined), its stage actors counted from then, and
    those ready when the first batch began only (not those that replaced dead ones later). On the
    local engine too, workers that replaced dead ones once processing ran are no part of the
    start-up: their own set-up is `restarted_setup` (said with the processing time, which holds
    it). Empty where the engine does not say."""
    started, ready = getattr(executor, "started_at", None), getattr(executor, "ready_at", None)
    setups = [rep.setup for rep in getattr(executor, "reports", {}).values() if getattr(rep, "setup", None)]
    connected = getattr(executor, "connected_at", None)
    restarted = []  # workers that replaced dead ones once processing ran: no part of the start-up
    if clock is not None and clock.processing_at is not None:
        began = clock.wall(clock.processing_at)
        restarted = [s for s in setups if s.get("ready_at", began) > began]
        setups = [s for s in setups if s.get("ready_at", began + 1) <= began]
        if connected is not None:
            ready = max((s["ready_at"] for s in setups), default=None)
    if started is None or ready is None or clock is None:
        return {}
    since = started if connected is None else connected
    out = {"main": started - clock.wall(clock.t0),
           "workers_start": max((s["entered_at"] for s in setups if "entered_at" in s), default=since) - since,
           "worker_setup": max((s["ready_at"] - s["entered_at"] for s in setups if "ready_at" in s), default=0.0),
           "imports": max((s.get("imports", 0.0) for s in setups), default=0.0),
           "host_side": max((s.get("host_side", 0.0) for s in setups), default=0.0),
           "scorer_wait": max((s.get("scorer_wait", 0.0) for s in setups), default=0.0),
           "workers_ready": ready - started}
    if connected is not None:
        out["ray_init"] = connected - started
    # the device's scorer (scoring: device), where it said its instants
    said = [s for s in setups if {"scorer_entered_at", "scorer_imported_at", "scorer_loaded_at"} <= set(s)]
    if said:
        first = min(said, key=lambda s: s["scorer_entered_at"])
        out.update(scorer_start=first["scorer_entered_at"] - since,
                   scorer_imports=first["scorer_imported_at"] - first["scorer_entered_at"],
                   scorer_load=max(s["scorer_loaded_at"] for s in said) - first["scorer_imported_at"])
        if "scorer_device_at" in first:  # a GPU's context, made beside the imports
            out["scorer_device"] = first["scorer_device_at"] - first["scorer_entered_at"]
    if clock.processing_at is not None:
        out["first_batch"] = clock.wall(clock.processing_at) - ready
    if restarted and connected is None:  # said with the processing time, which holds it (format_timing)
        out["restarted_setup"] = sum(s["ready_at"] - s.get("entered_at", s["ready_at"]) for s in restarted)
    return {k: round(max(v, 0.0), 3) for k, v in out.items()}


def format_startup(t: dict) -> str:
    """', of it main 0.4 s, ...' for the summary's time line (empty without parts)."""
    p = t.get("startup_parts") or {}
    if not p:
        return ""
    words = [("main", "main process"), ("ray_init", "Ray starting or joining"), ("workers_start", "workers starting"),
             ("worker_setup", "worker set-up"),
             ("imports", "of it imports"), ("host_side", "processors"),
             ("scorer_wait", "waiting for the scorer's models"), ("first_batch", "first batch"),
             ("scorer_start", "the scorer starting"), ("scorer_imports", "its imports"),
             ("scorer_load", "its models loading"), ("scorer_device", "its device ready")]
    return " (" + ", ".join(f"{w} {p[k]:.1f} s" for k, w in words if k in p) + ")"


def format_timing(t: dict) -> str:
    """'start-up (workers, models) 4.2 s (main process 0.0 s, ...), then 237.6 samples/s for 0.4 s,
    end 0.0 s': the summary's time line and the report's."""
    again = (t.get("startup_parts") or {}).get("restarted_setup")
    restarts = f" (of it workers that replaced dead ones setting up {again:.1f} s)" if again is not None else ""
    return (f"start-up (workers, models) {t['startup_seconds']:.1f} s{format_startup(t)}, then "
            f"{t.get('steady_samples_per_second', 0):.1f} samples/s for {t.get('processing_seconds', 0):.1f} s"
            f"{restarts}, end {t.get('end_seconds', 0):.1f} s")


def format_breakdown(s: dict) -> list[str]:
    """The summary's lines on where the time went (none for a summary without them)."""
    b = s.get("time_breakdown")
    if not b:
        return []
    main = b.get("main") or {}
    lines = [f"  where the time went: main process read {main.get('read', 0):.1f} s, write "
             f"{main.get('write', 0):.1f} s of {b.get('processing_seconds', 0):.1f} s processing"]
    for name, phases in (b.get("ops") or {}).items():
        steps = [f"{words} {phases[key]:.1f} s" for key, words in STEPS if phases.get(key)]
        if steps:
            lines.append(f"    {name} (summed over workers): " + ", ".join(steps))
        if phases.get("scorer_busy"):
            host = phases["scorer_busy"] - phases.get("forward", 0.0) - phases.get("transfer", 0.0)
            lines.append(f"    {name}'s scorer: busy {phases['scorer_busy']:.1f} s, of it host work apart "
                         f"from the transfers and forwards {max(host, 0.0):.1f} s (assembling, in its other "
                         f"thread: {phases.get('assemble', 0.0):.1f} s)")
    if "scorer_busy_share" in b:
        lines.append(f"    scorer busy {b['scorer_busy_share']:.0%} {BUSY_OF}")
    return lines


def time_table(s: dict) -> dict | None:
    """Where the time went, for the report: the run's line (start-up and its parts, the steady
    rate, the end, the main process's read and write, the scorer's busy share) and one row per
    model op with its phases' seconds (the columns every op left empty dropped). None for a
    summary without timings (an older one)."""
    t, b = s.get("timing") or {}, s.get("time_breakdown") or {}
    if not t or "startup_seconds" not in t:
        return None
    ops, main = b.get("ops") or {}, b.get("main") or {}
    line = format_timing(t)
    run = (f"{line[:1].upper()}{line[1:]}. Main process: read {main.get('read', 0):.1f} s, "
           f"write {main.get('write', 0):.1f} s.")
    if "scorer_busy_share" in b:
        run += f" The device's scorer was busy {b['scorer_busy_share']:.0%} {BUSY_OF}."
    steps = [(key, words) for key, words in (*STEPS, ("scorer_busy", "scorer busy"))
             if any(p.get(key) for p in ops.values())]
    rows = [(name, [f"{p[key]:.2f}" if key in p else "" for key, _ in steps]) for name, p in ops.items()]
    return {"run": run, "columns": [words for _, words in steps], "rows": rows}
