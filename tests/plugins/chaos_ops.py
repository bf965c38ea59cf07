"""Plug-in ops that misbehave on purpose, for the reliability tests."""
import ctypes
import faulthandler
import os
import signal
import time

from djx import Filter, Mapper, register_op


@register_op("poison_filter")
class PoisonFilter(Filter):
    """Kills its own process (SIGKILL, or a segfault) on samples whose `poison` field is set;
    raises on samples whose `boom` field is set. With `deaths_dir`, each death leaves a file there
    first (what a test counts the deaths by)."""

    stats_keys = ("checked",)

    def __init__(self, how: str = "kill", deaths_dir: str = "", **common):
        super().__init__(**common)
        self.how, self.deaths_dir = how, deaths_dir

    def compute_stats(self, batch):
        for sample in batch.samples:
            if sample.get("poison"):
                if self.deaths_dir:
                    open(os.path.join(self.deaths_dir, f"{os.getpid()}-{time.time_ns()}"), "w").close()
                if self.how == "segfault":
                    faulthandler.disable()  # a real segfault, without pytest's dump of it
                    ctypes.string_at(0)
                os.kill(os.getpid(), signal.SIGKILL)
            if sample.get("boom"):
                raise ValueError(f"cannot handle {sample['text'][:20]!r}")
            batch.stats(sample)["checked"] = 1

    def keep(self, stats):
        return True


@register_op("slow_filter")
class SlowFilter(Filter):
    """Sleeps per sample so a test can interrupt a run mid-way; keeps samples with even `id`."""

    stats_keys = ("slow_id",)

    def __init__(self, seconds: float = 0.01, **common):
        super().__init__(**common)
        self.seconds = seconds

    def compute_stats(self, batch):
        for sample in batch.samples:
            time.sleep(self.seconds)
            batch.stats(sample)["slow_id"] = sample.get("id", 0)

    def keep(self, stats):
        return stats["slow_id"] % 2 == 0


@register_op("hold_mapper")
class HoldMapper(Mapper):
    """Holds every batch that has a sample with `id` >= the number written in the file `hold_file`,
    for as long as that file exists (no file: holds nothing). A test writes the file before a run to
    have it stop at a known point and stay there, whatever the machine's speed, until it acts."""

    def __init__(self, hold_file: str = "", **common):
        super().__init__(**common)
        self.hold_file = hold_file

    def process(self, batch):
        with batch.waiting():  # the worker's other batches go on while this one is held
            while (limit := self._limit()) is not None and any(s.get("id", 0) >= limit for s in batch.samples):
                time.sleep(0.01)

    def _limit(self):
        try:
            with open(self.hold_file) as f:
                return int(f.read())
        except FileNotFoundError:
            return None


@register_op("kill_ray_ledger_mapper")
class KillRayLedgerMapper(Mapper):
    """On the first sample with `kill_ledger` set (once: `done_file` marks it), kills the run's
    poison-sample ledger actor on Ray, as an operator cleaning up a cluster by hand might."""

    def __init__(self, done_file: str = "", **common):
        super().__init__(**common)
        self.done_file = done_file

    def process(self, batch):
        if os.path.exists(self.done_file) or not any(s.get("kill_ledger") for s in batch.samples):
            return
        import ray
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if actor["name"].startswith("djx-poison-tracker"):
                ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]))
        open(self.done_file, "w").close()
