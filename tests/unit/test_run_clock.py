"""The rates a summary prints come from samples over measured time, never from one block; the
start-up's parts add up to the start-up."""
import time

import pytest

from djx.core.io.input_size import InputSize
from djx.core.run.estimate import RunClock


def summary(done: int) -> dict:
    return {"session": {"samples": done}, "input": done}


def test_one_block_holding_every_sample_is_not_an_instant_rate():
    """Ray's first result also marks the start of processing: when it holds every sample there is no
    steady window, and the rate is the samples over the session's time (it printed 91,040,438/s)."""
    clock = RunClock(InputSize(63, True, "counted"), t0=time.monotonic() - 10.0)
    clock.batch_done(63)  # the one and only block
    t = clock.summary_fields(summary(63), resumed=False)["timing"]
    assert t["steady_samples_per_second"] <= 63 / 10.0 * 1.01


def test_a_steady_window_counts_the_samples_after_the_first_block_over_their_time():
    clock = RunClock(InputSize(96, True, "counted"), t0=time.monotonic() - 5.0)
    clock.batch_done(32)
    began = clock.processing_at
    clock.batch_done(32)
    clock.batch_done(32)
    t = clock.summary_fields(summary(96), resumed=False)["timing"]
    assert t["steady_samples_per_second"] >= 64 / max(time.monotonic() - began, 1e-9) * 0.99



def test_blocks_that_come_back_in_a_burst_are_timed_from_when_their_engine_began_them():
    """Ray hands back rows a block at a time, and blocks finished side by side arrive together: a
    rate over the gaps between arrivals would be absurd (the summary said 90.1/s where progress
    said 9.2/s). The stage actors say when they began a batch: processing starts at the first
    begin, every sample is timed, and the rate is the samples over the time since."""
    now = time.monotonic()
    clock = RunClock(InputSize(96, True, "counted"), t0=now - 10.0)
    began = time.time() - 4.0  # the first stage actor began its first batch 4 s ago
    for _ in range(3):  # three blocks at once
        clock.batch_done(32, began_at=began)
    assert clock.untimed == 0 and abs(clock.processing_at - (now - 4.0)) < 0.5
    t = clock.summary_fields(summary(96), resumed=False)["timing"]
    assert 96 / 4.6 <= t["steady_samples_per_second"] <= 96 / 3.9
    assert 5.5 <= t["startup_seconds"] <= 6.5
    # a begin before the session began (another node's clock) is held at the session's start
    skewed = RunClock(InputSize(32, True, "counted"), t0=time.monotonic() - 2.0)
    skewed.batch_done(32, began_at=time.time() - 3600)
    assert skewed.processing_at == skewed.t0


def test_a_ray_run_s_start_up_parts_add_up_and_leave_out_actors_that_replaced_dead_ones():
    """On Ray the start-up splits into the main process, Ray starting (or joining), the stage
    actors starting and setting up (those ready when the first batch began: an actor that replaced
    a dead one later is no part of the start-up), and the wait for the first batch."""
    from types import SimpleNamespace

    from djx.core.records import WorkerReport
    from djx.core.run.breakdown import format_startup, startup_parts
    now = time.time()
    clock = RunClock(InputSize(96, True, "counted"), t0=time.monotonic() - 20.0)  # the session began 20 s ago
    clock.processing_at = time.monotonic() - 5.0                                     # the first batch began 5 s ago
    t0 = now - 20.0
    first = WorkerReport(setup={"entered_at": t0 + 6.0, "ready_at": t0 + 13.0, "imports": 1.5})
    # a scorer that said when it loaded, not when it began: no scorer's parts, and no error
    second = WorkerReport(setup={"entered_at": t0 + 5.5, "ready_at": t0 + 12.0, "imports": 1.0,
                                 "scorer_loaded_at": t0 + 11.0})
    late = WorkerReport(setup={"entered_at": t0 + 16.0, "ready_at": t0 + 19.0, "imports": 0.5})  # a replacement
    ray = SimpleNamespace(started_at=t0 + 1.0, connected_at=t0 + 4.0, ready_at=None,
                          reports={"a": first, "b": second, "c": late})
    parts = startup_parts(ray, clock)
    assert parts == pytest.approx({"main": 1.0, "ray_init": 3.0, "workers_start": 2.0, "worker_setup": 7.0,
                                   "imports": 1.5, "host_side": 0.0, "scorer_wait": 0.0, "workers_ready": 12.0,
                                   "first_batch": 2.0}, abs=0.01)
    assert parts["main"] + parts["workers_ready"] + parts["first_batch"] == pytest.approx(15.0, abs=0.01)
    assert "Ray starting or joining 3.0 s" in format_startup({"startup_parts": parts})
