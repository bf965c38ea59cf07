"""The run summary: written as <stem>.summary.json and printed as a table at the end."""
from __future__ import annotations


def _mb(b) -> str:
    return f"{(b or 0) / (1 << 20):,.0f} MB"


def format_summary(s: dict) -> str:
    lines = [f"djx run '{s.get('project_name', '')}': {s['input']} in = {s['kept']} kept + "
             f"{s['dropped']} dropped + {s['rejected']} rejected"
             + (f" ({s['blank_lines']} blank lines skipped)" if s.get("blank_lines") else "")
             + f"  in {s['seconds']:.1f} s ({s['samples_per_second']:.1f} samples/s)"]
    ops = s.get("ops") or []
    if ops:
        w = max(len(o["name"]) for o in ops)
        lines.append(f"  {'op'.ljust(w)}  {'in':>8} {'kept':>8} {'dropped':>8} {'rejected':>8} {'seconds':>8}")
        for o in ops:
            lines.append(f"  {o['name'].ljust(w)}  {o['in']:>8} {o['kept']:>8} {o['dropped']:>8} "
                         f"{o['rejected']:>8} {o['seconds']:>8.2f}")
    mem = s.get("memory", {})
    lines.append(f"  workers: {s.get('workers')}, loads of one model per process (max): "
                 f"{s.get('max_model_loads_per_process', 0)}, worker restarts: {s.get('worker_restarts', 0)}")
    lines.append(f"  peak memory: main USS {_mb(mem.get('main_peak_uss_bytes'))}, worker USS max "
                 f"{_mb(mem.get('worker_peak_uss_bytes_max'))}")
    check = s.get("check") or {}
    lines.append("  check: " + ("passed" if check.get("ok") else "FAILED") )
    outs = s.get("outputs") or {}
    for k in ("export", "dropped", "rejected", "summary"):
        if outs.get(k):
            lines.append(f"  {k}: {outs[k]}")
    return "\n".join(lines)
