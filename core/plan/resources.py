"""Memory figures for summaries and benchmarks: USS (pages only this process holds) is the honest
number; RSS double-counts shared libraries and memory-mapped model files."""
from __future__ import annotations

import dataclasses
import os
import resource
import threading
import time

import psutil


def uss_bytes(pid: int | None = None) -> int:
    try:
        return psutil.Process(pid or os.getpid()).memory_full_info().uss
    except (psutil.Error, OSError):
        return 0


def uss_pss_bytes(pid: int | None = None) -> tuple[int, int]:
    """(USS, PSS) of a process from /proc/PID/smaps_rollup (one cheap read), psutil elsewhere.
    PSS charges each shared page to its sharers in equal parts: with one model copy mapped by N
    workers, each is charged 1/N of it, and the PSS of all of them adds up to one copy."""
    pid = pid or os.getpid()
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines()[1:] if b":" in line)
        kib = {k.decode(): int(v.split()[0]) for k, v in fields.items()}
        return (kib["Private_Clean"] + kib["Private_Dirty"]) * 1024, kib["Pss"] * 1024
    except (OSError, KeyError, ValueError):
        try:
            info = psutil.Process(pid).memory_full_info()
            return info.uss, getattr(info, "pss", info.uss)
        except (psutil.Error, OSError):
            return 0, 0


def read_again(report, pid: int):
    """A worker's report (a WorkerReport) with its USS and PSS read now, from outside it: at the
    end of a run, while every worker is alive and maps the shared weights, all at one moment (a
    worker's own last reading may be up to a second old, from before the others mapped them)."""
    uss, pss = uss_pss_bytes(pid)
    if not uss:  # gone, or not readable
        return report
    return dataclasses.replace(report, uss=uss, pss=pss, peak_uss=max(report.peak_uss, uss),
                               peak_pss=max(report.peak_pss, pss))


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
    """This process's peak USS and PSS, sampled by a daemon thread every `every_s` (not
    continuously: a peak inside a long op call is seen, not only between batches) and by `now()`,
    which a worker calls with every report: it reads afresh only when the last reading is older
    than `every_s`. A reading walks every page the process maps (torch's libraries: ~10 ms); read
    with each batch and four times a second it took 13% of a worker's time (py-spy, 2 workers
    preparing CLIP's pixels), so readings are at most once a second."""

    def __init__(self, every_s: float = 1.0):
        self.peak = self.peak_pss = self.uss = self.pss = self.peak_rss = 0
        self._every = every_s
        self._at = float("-inf")
        self._read()
        threading.Thread(target=self._sample, name="djx-peak-uss", daemon=True).start()

    def now(self) -> "PeakUss":
        """`uss`/`pss`: the latest figures (read now if the last reading is older than `every_s`),
        `peak`/`peak_pss` the highest."""
        if time.monotonic() - self._at >= self._every:
            self._read()
        return self

    def _read(self) -> None:
        self._at = time.monotonic()
        self.uss, self.pss = uss_pss_bytes()
        self.peak, self.peak_pss = max(self.peak, self.uss), max(self.peak_pss, self.pss)
        self.peak_rss = peak_rss_bytes()  # getrusage: also a cost per batch (3-5% of a text worker's time)

    def _sample(self) -> None:
        wake = threading.Event()
        while True:
            wake.wait(self._every)
            self.now()
