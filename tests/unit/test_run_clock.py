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

