"""What the figures of an analysis do not cover, said once in the printout and on the page: stat
names not plotted, values that are not finite numbers, a run summary that does not describe the
files read (another run's, an edited one, an export cut short), a trial run."""
from __future__ import annotations

import os

from djx.core.io.terminal_text import safe

from djx.analyze.stat_names import LIST_CAP, shown_name

COUNTS = ("kept", "dropped", "rejected")


def notes(col, rows: list[dict], summary: dict | None, paths) -> list[str]:
    """What the figures do not cover, said in the printout and on the page."""
    out = col.names.notes(LIST_CAP)
    summarised = {r["stat"] for r in rows}
    for stat in sorted(col.left_out):
        if stat in summarised or col.non_finite[stat]:
            n = col.left_out[stat]
            out.append(f"{shown_name(stat)}: {n:,} value{'s' if n != 1 else ''} not a finite number, not summarised")
    other = sorted(set(col.stats) - summarised - {s for s in col.left_out if col.non_finite[s]})
    if other:
        out.append(f"stats without numeric values are not summarised: {', '.join(map(shown_name, other))}")
    s = summary or {}
    for what in s.get("unusable") or []:
        out.append(f"the run summary {paths.summary} has no usable {what}: "
                   + ("the funnel is left out" if what.startswith("ops ") else "left out"))
    out += _count_notes(col, s, paths)
    if s.get("partial"):
        limit = f" (--limit {s['limit']})" if "limit" in s else ""
        first = f"first {s['input']} samples" if "input" in s else "first samples only"
        out.append(f"a trial run{limit}: every figure covers its {first}")
    return out


def _dropped_not_written(s: dict, col, paths) -> bool:
    """A run that wrote no dropped file (export_dropped: false): its summary's count stands."""
    return type(s.get("dropped")) is int and s["dropped"] > col.dropped and not os.path.exists(paths.dropped)


def differing(col, summary: dict | None, paths) -> dict[str, tuple[int, int]]:
    """The summary's counts that the files read do not hold: field -> (summary's, the files')."""
    s = summary or {}
    out = {k: (s[k], getattr(col, k)) for k in COUNTS if type(s.get(k)) is int and s[k] != getattr(col, k)}
    if "dropped" in out and _dropped_not_written(s, col, paths):
        del out["dropped"]
    return out


def _count_notes(col, s: dict, paths) -> list[str]:
    out = []
    if _dropped_not_written(s, col, paths):
        out.append(f"the run dropped {s['dropped']} samples but {paths.dropped} holds {col.dropped} "
                   f"(export_dropped: false?): every figure covers the samples written only")
    named = (s.get("outputs") or {}).get("export") if isinstance(s.get("outputs"), dict) else None
    if isinstance(named, str) and os.path.basename(named) != os.path.basename(paths.export):
        out.append(f"the run summary {paths.summary} is of another export ({safe(named, 200)}): "
                   f"its counts, funnel and timing may not describe these files")
    diff = differing(col, s, paths)
    if diff:
        said = ", ".join(f"{k} {_count(a)}" for k, (a, _) in diff.items())
        held = ", ".join(f"{k} {getattr(col, k):,}" for k in COUNTS)
        out.append(f"the run summary {paths.summary} says {said}, but the files hold {held} (a summary of "
                   f"another run, edited, or outputs cut short?): the counts shown are the files'")
    coded = _by_code_total(s)
    if coded is not None and coded != col.rejected:
        out.append(f"the run summary's rejected_by_code counts {_count(coded)} samples but {paths.rejected} holds "
                   f"{col.rejected:,}: the rejection codes shown are the file's")
    return out


def _by_code_total(s: dict) -> int | None:
    """The samples the summary's rejected_by_code counts (None without one)."""
    by_code = s.get("rejected_by_code")
    if not isinstance(by_code, dict):
        return None
    return sum(n for n in by_code.values() if type(n) is int)


def _count(n: int) -> str:
    text = f"{n:,}"
    return text if len(text) <= 20 else f"{text[:12]}... ({len(str(n))} digits)"


def page_summary(summary: dict | None, col, paths) -> dict | None:
    """The summary as the page shows it: counts the files do not bear out replaced by the files'
    (its rejection codes left out when they do not add up to the rejected file's count)."""
    diff = differing(col, summary, paths)
    coded = _by_code_total(summary or {})
    if not diff and (coded is None or coded == col.rejected):
        return summary
    shown = {**summary, **{k: b for k, (_, b) in diff.items()}}
    if coded is not None and coded != col.rejected:
        shown.pop("rejected_by_code", None)
    return shown
