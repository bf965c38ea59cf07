"""Memory figures for summaries and benchmarks: USS (pages only this process holds) is the honest
number; RSS double-counts shared libraries and memory-mapped model files."""
from __future__ import annotations

import os
import resource
import threading

import psutil


def uss_bytes(pid: int | None = None) -> int:
    try:
        return psutil.Process(pid or os.getpid()).memory_full_info().uss
    except (psutil.Error, OSError):
        return 0


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def peak_device_bytes(device: str) -> int:
    """Peak CUDA memory this process allocated on `device` (0 on CPU)."""
    if not device.startswith("cuda"):
        return 0
    import torch
    return int(torch.cuda.max_memory_allocated(device))


class PeakUss:
    """This process's peak USS, sampled by a daemon thread every `every_s` (reading smaps costs
    a few ms, so not continuously): a peak inside a long op call is seen, not only between batches."""

    def __init__(self, every_s: float = 0.25):
        self.peak = uss_bytes()
        self._every = every_s
        threading.Thread(target=self._sample, name="djx-peak-uss", daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, uss_bytes())
            threading.Event().wait(self._every)
