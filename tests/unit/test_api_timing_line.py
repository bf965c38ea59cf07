"""The summary's time line after a worker restart: a worker that replaced a dead one mid-run is
no part of the start-up (the line said "start-up 0.1 s" and, in its own parentheses, "workers
starting 10.1 s"); its set-up is said with the processing time, which holds it."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from djx.core.records import WorkerReport
from djx.core.run.breakdown import format_timing, startup_parts
from djx.core.io.input_size import InputSize
from djx.core.run.estimate import RunClock


def test_a_worker_restarted_mid_run_is_said_with_the_processing_not_the_start_up():
    now = time.time()
    clock = RunClock(InputSize(40, True, "counted"), t0=time.monotonic() - 11.0)  # the session began 11 s ago
    clock.processing_at = time.monotonic() - 10.8                                   # processing from 0.2 s on
    t0 = now - 11.0
    # rank 0 replaced its dead worker 10 s into the run (the first one's report is gone with it)
    replaced = WorkerReport(setup={"entered_at": t0 + 10.1, "ready_at": t0 + 10.4, "imports": 0.2})
    ok = WorkerReport(setup={"entered_at": t0 + 0.08, "ready_at": t0 + 0.12, "imports": 0.01})
    local = SimpleNamespace(started_at=t0 + 0.05, ready_at=t0 + 0.15, reports={0: replaced, 1: ok})
    parts = startup_parts(local, clock)
    assert parts["workers_start"] == pytest.approx(0.03, abs=0.01)
    assert parts["worker_setup"] == pytest.approx(0.04, abs=0.01)
    assert parts["restarted_setup"] == pytest.approx(0.3, abs=0.01)
    line = format_timing({"startup_seconds": 0.2, "processing_seconds": 10.6, "end_seconds": 0.0,
                          "steady_samples_per_second": 3.8, "startup_parts": parts})
    start_up = line.split(", then ")[0]
    assert "workers starting 0.0 s" in start_up and "10." not in start_up
    assert "for 10.6 s (of it workers that replaced dead ones setting up 0.3 s)" in line
