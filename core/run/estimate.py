"""What a run knows about its size and pace, and a trial run's estimate for the whole dataset.

`djx process RECIPE --limit N` processes the first N samples; from them the summary estimates the
whole run on this machine with this plan: samples (the input's size), seconds (start-up measured
once + the samples at the trial's steady rate), peak memory (the trial's peaks: memory does not
grow with the dataset) and keep rates (the trial's counts). Each figure says how it was found.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from djx.core.io.input_size import InputSize


@dataclass
class RunClock:
    """The expected size of a run and the instants that split its time: `t0` (the session
    began), `processing_at` (workers ready, models loaded: the first batch was read). `limit`: the trial's sample limit (None: the whole dataset)."""
    size: InputSize
    limit: int | None = None
    t0: float = field(default_factory=time.monotonic)
    processing_at: float | None = None
    last_result_at: float | None = None   # the last batch's result came in
    # samples of the first result when it also marked the start of processing (an engine that does not
    # say when reading starts: Ray): they took an unmeasured time, so no rate counts them
    untimed: int = 0
    partial: bool = False   # the limit stopped the reader before the dataset's end

    def wall(self, instant: float | None) -> float | None:
        """A monotonic instant of this clock (t0, processing_at) on the wall clock, which worker
        processes share (their start-up's instants)."""
        return None if instant is None else time.time() - (time.monotonic() - instant)

    @property
    def total(self) -> int | None:
        """Samples this run is expected to read in all (resumed sessions included); None: unknown."""
        n = self.size.samples
        if not self.size.exact and n == 0:
            return self.limit
        return min(self.limit, n) if self.limit is not None else n

    def processing(self) -> None:
        """Mark the first batch read: start-up (workers, models) is over."""
        if self.processing_at is None:
            self.processing_at = time.monotonic()

    def batch_done(self, samples: int = 0, began_at: float | None = None) -> None:
        """A batch of `samples` came in. An engine that does not mark when reading starts says when
        it began the batch (`began_at`, wall clock: on Ray, when it entered its last stage): the first one
        marks the start of processing; without it the first batch ends start-up and its samples
        are untimed."""
        if self.processing_at is None and began_at is not None:
            now = time.monotonic()
            self.processing_at = min(max(now - (time.time() - began_at), self.t0), now)
        elif self.processing_at is None:
            self.untimed = samples
        self.processing()
        self.last_result_at = time.monotonic()

    def steady(self, done: int) -> tuple[int, float] | None:
        """(samples, seconds) of the steady rate over this session's `done` samples: those after the
        start of processing, over the time from it to the last result; None when that holds none."""
        n = done - self.untimed
        if n <= 0 or self.last_result_at is None or self.processing_at is None:
            return None
        return n, max(self.last_result_at - self.processing_at, 1e-9)

    def summary_fields(self, summary: dict, resumed: bool) -> dict:
        """`partial`, `limit`, `timing` (this session's start-up, steady rate and end) and, for a
        trial that stopped before the dataset's end, `estimate`."""
        start, busy, end = self._phases()
        done = summary["session"]["samples"]
        # no steady window (one block held every sample: Ray's first result): the samples over the
        # session's time to its last result, never over the instant one block took to arrive
        timed, seconds = self.steady(done) or (done, max(start + busy, 1e-9))
        out = {"partial": self.partial, "limit": self.limit,
               "timing": {"startup_seconds": round(start, 4), "processing_seconds": round(busy, 4),
                          "end_seconds": round(end, 4), "steady_samples_per_second": round(timed / seconds, 2)}}
        if self.partial:
            out["estimate"] = self.estimate(summary, resumed)
        return out

    def _phases(self) -> tuple[float, float, float]:
        """Seconds of this session's start-up (starting workers, loading models: until the first
        batch was read), processing (until the last batch's result) and end (stopping workers,
        the last checkpoint, the output check: until now)."""
        now = time.monotonic()
        start = (self.processing_at or self.t0) - self.t0
        last = self.last_result_at or now
        return start, max(last - (self.processing_at or self.t0), 1e-9), now - last

    def estimate(self, s: dict, resumed: bool) -> dict:
        """The whole dataset's figures from this trial's summary `s`."""
        n_all, n = self.size.samples, s["input"]
        start, busy, end = self._phases()
        done = s["session"]["samples"]
        timed, busy = self.steady(done) or (done, busy)
        rate = timed / busy
        workers = s.get("workers")
        seconds = start + n_all / max(rate, 1e-9) + end
        mem = s.get("memory", {})
        peak = mem.get("main_peak_uss_bytes", 0) + sum((mem.get("worker_peak_uss_bytes") or {}).values())
        kept = s["kept"] / n if n else 0.0
        dedups = [o["name"] for o in s.get("ops", []) if _deduplicates(o["name"])]
        return {
            "samples": n_all,
            "samples_how": self.size.how,
            "seconds": round(seconds, 3),  # a tiny run is not 0 s
            "seconds_how": (f"start-up (starting workers, loading models) {start:.1f} s and the end (stopping "
                            f"workers, output check) {end:.1f} s, measured once, + {n_all:,} samples at the "
                            f"trial's steady rate of {rate:.2f} samples/s between start-up and its last batch "
                            f"({timed:,} samples in {busy:.1f} s) on {workers} worker(s)"
                            + ("; the trial was resumed: its last session's start-up and rate" if resumed else "")
                            + _load()),
            "peak_memory_bytes": int(peak),
            "peak_memory_how": ("the trial's peaks: main process USS + the sum of every worker's peak USS; "
                                "read-ahead is bounded, so memory does not grow with the dataset"
                                + ("; a deduplicator's index does, up to dedup_memory_entries rows (24 bytes each) and 8 bytes a sample"
                                   if dedups else "")),
            "keep_rate": round(kept, 4),
            "keep_rate_ops": {o["name"]: round(o["kept"] / o["in"], 4) if o["in"] else None
                              for o in s.get("ops", [])},
            "keep_rate_how": (f"the trial's counts over the first {n:,} samples (per op: kept / reaching it); "
                              f"the first samples stand for the whole dataset, so a dataset sorted by "
                              f"anything that matters to the filters is misjudged"
                              + (f"; a deduplicator ({', '.join(dedups)}) finds more duplicates among more "
                                 f"samples: its keep rate over the whole dataset is lower" if dedups else "")),
        }


def _deduplicates(name: str) -> bool:
    from djx.core.op.deduplicator import Deduplicator
    from djx.core.op.registry import find_op_class
    cls = find_op_class(name)
    return cls is not None and issubclass(cls, Deduplicator)


def _load() -> str:
    """The machine's load while the trial ran: the rate holds for a machine as busy as this."""
    try:
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
    except OSError:
        return ""
    return (f"; the machine's load average was {load:.1f} on {cores} cores at the end of the trial: the estimate "
            f"assumes a machine as busy")


def duration(seconds: float) -> str:
    """'3 h 10 min', '4 min 8 s', '12 s': the two leading units, for a person."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{s} s"


def _size(b: int) -> str:
    return f"{b / (1 << 30):.1f} GB" if b >= 1 << 30 else f"{b / (1 << 20):,.0f} MB"


def format_estimate(s: dict) -> list[str]:
    """The table's lines about a trial run: what it covered and the whole dataset's estimate."""
    if s.get("limit") is None:
        return []
    if not s.get("partial"):
        return [f"  --limit {s['limit']:,}: the dataset holds fewer samples; this run covered all of it"]
    e = s["estimate"]
    if not e["samples"]:
        return [f"  partial run: the first {s['input']:,} samples (--limit {s['limit']:,}); no estimate: the "
                f"dataset's size is {e['samples_how']}"]
    approx = "" if e["samples_how"].startswith("exact") else "about "
    lines = [f"  partial run: the first {s['input']:,} samples (--limit {s['limit']:,})",
             f"  estimate for the whole dataset ({approx}{e['samples']:,} samples): about "
             f"{duration(e['seconds'])} on {s.get('workers')} worker(s), {e['keep_rate']:.0%} kept, "
             f"peak memory about {_size(e['peak_memory_bytes'])}"]
    for key in ("samples", "seconds", "keep_rate", "peak_memory"):
        lines.append(f"    {key.replace('_', ' ')}: {e[key + '_how']}")
    return lines
