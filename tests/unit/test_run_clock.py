"""The rates a summary prints come from samples over measured time, never from one block."""
import time

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


def test_an_engine_that_says_when_processing_began_times_every_sample_from_then():
    """Ray's blocks of a small dataset can all arrive within milliseconds: timed from the first
    block they gave 11,976 samples/s for 100 samples that took seconds. Timed from when its first
    stage actor was ready, every sample counts over the time they took."""
    clock = RunClock(InputSize(100, True, "counted"), t0=time.monotonic() - 10.0)
    began = time.time() - 4.0   # the first actor was ready 4 s ago
    for _ in range(4):
        clock.batch_done(25, began)
    t = clock.summary_fields(summary(100), resumed=False)["timing"]
    assert 100 / 4.2 <= t["steady_samples_per_second"] <= 100 / 4.0 * 1.01
    assert 5.8 <= t["startup_seconds"] <= 6.2
